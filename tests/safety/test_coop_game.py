"""coop_game: conformance, exact violation accounting, dynamics, configs; graph-safe RL and baselines end to end."""
from __future__ import annotations

import glob

import numpy as np
import pytest

from coopsim.platform.config import load_config
from coopsim.platform.registry import list_ids
from coopsim.scenarios.coop_game import CoopGameCore
from coopsim.testing import check_scenario

IDS = [i for i in list_ids("scenario") if i.startswith("coop_game/")]


def test_registry_lists_the_family():
    assert {"coop_game/Grid-v0", "coop_game/Graph-v0", "coop_game/Grid4x4-v0", "coop_game/Grid5x5-v0",
            "coop_game/Grid16x16-v0", "coop_game/Grid32x32-v0"} <= set(IDS)
    assert {"certificate-v0", "oracle-v0"} <= set(list_ids("shield"))
    assert {"graph_safe-v0", "safe_baselines/iql-v0", "safe_baselines/lagrangian-v0"} <= set(list_ids("agent"))


@pytest.mark.parametrize("sid,params", [
    ("coop_game/Grid4x4-v0", {"num_agents": 2, "constraints": ["separation", "resource", "connectivity"]}),
    ("coop_game/Graph-v0", {"num_agents": 4, "num_nodes": 20, "constraints": ["separation", "connectivity"]}),
    ("coop_game/Grid16x16-v0", {"constraints": ["separation", "resource"], "max_steps": 12}),
])
def test_check_scenario(sid, params):
    check_scenario(sid, params=params, num_steps=30, api_cycles=10)


def test_violation_accounting_is_exact():
    # 1x5 corridor without slip; the two agents start two cells apart, range 2
    sc = CoopGameCore(num_envs=2, height=1, width=5, num_agents=2, constraints=["separation", "connectivity"],
                      slip=0.0, comm_range=2.0, start_spacing=2.0, world_seed=0)
    sc.reset(seed=0)
    c = sc.cells()[0]
    lo, hi = int(np.argmin(c)), int(np.argmax(c))
    assert c[hi] - c[lo] == 2
    a = np.zeros((2, 2), np.int64)
    a[0, lo], a[0, hi] = 4, 3  # env 0: both step into the middle cell -> one separation violation (connected)
    if c[lo] > 0:  # env 1: one agent steps away from the other: distance 3 > range 2 -> disconnected
        a[1, lo] = 3
    else:
        a[1, hi] = 4
    res = sc.step(a)
    assert res.info["cost/separation"].tolist() == [1.0, 0.0]
    assert res.info["cost/connectivity"].tolist() == [0.0, 1.0]
    # env 0 now has both agents on one cell; swapping is impossible, staying keeps the violation
    res = sc.step(np.zeros((2, 2), np.int64))
    assert res.info["cost/separation"].tolist() == [1.0, 0.0]


def test_swap_counts_as_separation_violation_and_team_reward():
    sc = CoopGameCore(num_envs=1, height=1, width=2, num_agents=2, constraints=["separation"], slip=0.0, world_seed=0)
    sc.reset(seed=0)
    c = sc.cells()[0]
    a = np.where(c == 0, 4, 3)[None]  # exchange cells
    res = sc.step(a)
    assert res.info["cost/separation"].tolist() == [1.0]
    on = (sc.cells()[0] == sc.targets()).sum() / 2
    assert res.reward.tolist() == [[on, on]]


def test_slip_frequencies_match_the_true_model():
    sc = CoopGameCore(num_envs=400, height=5, width=5, num_agents=2, constraints=["separation"], slip=0.4,
                      slippery_frac=1.0, world_seed=0)
    w = sc.world()
    sc.reset(seed=11)
    start = sc.cells()
    res = sc.step(np.tile([[1, 0]], (400, 1)))  # agent 0 moves up, agent 1 stays
    p = w.true_prob[start[0, 0], 1]
    outs = w.prior[start[0, 0], 1]
    got = np.array([(sc.cells()[:, 0] == o).mean() if o >= 0 else 0.0 for o in outs])
    assert np.all(np.abs(got - p) <= 4 * np.sqrt(p * (1 - p) / 400) + 1e-12)
    assert (sc.cells()[:, 1] == start[:, 1]).all()  # stay never slips
    assert res.reward.dtype == np.float32


def test_seeded_determinism_and_known_world_hides_dynamics():
    a = CoopGameCore(num_envs=3, height=5, width=5, num_agents=3, world_seed=2)
    b = CoopGameCore(num_envs=3, height=5, width=5, num_agents=3, world_seed=2)
    a.reset(seed=4)
    b.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(10):
        act = rng.integers(0, 5, (3, 3))
        ra, rb = a.step(act), b.step(act)
        assert np.array_equal(a.cells(), b.cells()) and np.array_equal(ra.reward, rb.reward)
    kw = a.known_world()
    assert np.isnan(kw.true_prob).all() and not kw.slippery.any()
    assert np.array_equal(kw.prior, a.world().prior)


def test_every_shipped_config_validates():
    files = sorted(glob.glob("configs/safety/*.yaml"))
    assert len(files) >= 18
    for f in files:
        cfg = load_config(f)
        assert cfg.shield.id == "certificate-v0" and len(cfg.seeds) == 20


def test_graph_safe_learns_without_violations_where_iql_violates():
    from coopsim.agents.graph_safe.train import train_seed

    sp = {"num_agents": 2, "constraints": ["separation", "resource", "connectivity"]}
    recs = train_seed("coop_game/Grid4x4-v0", sp, "graph_safe-v0", {"num_runs": 360}, "certificate-v0",
                      {"num_runs": 360}, seed=0, episodes=25, eval_episodes=3, true_support_every=12)
    assert sum(r["violations"] for r in recs) == 0.0
    assert sum(r["shield/uncertified"] for r in recs) == 0.0
    cons = [r["conservativeness"] for r in recs if "conservativeness" in r]
    assert all(0 < c <= 1 for c in cons) and cons == sorted(cons)  # certified sets only grow
    iql = train_seed("coop_game/Grid4x4-v0", sp, "safe_baselines/iql-v0", {}, "passthrough-v0", {}, seed=0, episodes=25)
    assert sum(r["violations"] for r in iql) > 0
    oracle = train_seed("coop_game/Grid4x4-v0", sp, "safe_baselines/iql-v0", {}, "oracle-v0", {}, seed=0, episodes=10)
    assert sum(r["violations"] for r in oracle) == 0.0


def test_runner_counts_costs_and_interventions(tmp_path):
    from coopsim.platform.config import validate_config
    from coopsim.platform.runner import run_config

    raw = {"name": "shield-test", "scenario": {"id": "coop_game/Grid4x4-v0", "params": {"num_agents": 3,
           "constraints": ["separation", "resource"]}}, "agents": {"id": "random-v0"},
           "shield": {"id": "certificate-v0", "params": {"num_runs": 360}}, "seeds": [0], "episodes": 2,
           "out_dir": str(tmp_path)}
    run_dir = run_config(validate_config(raw), progress=False)
    import json

    rows = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl")]
    assert len(rows) == 2
    for r in rows:
        assert r["cost/separation"] == 0.0 and r["cost/resource"] == 0.0
        assert r["shield/interventions"] > 0  # random actions collide; the shield changes them


def test_shield_wall_times_stay_out_of_metrics(tmp_path):
    """metrics.jsonl of a shielded run is byte-identical across runs; the shield's filter time per call goes to
    timing.jsonl (per episode) and summary.json (mean over episodes)."""
    import json

    from coopsim.platform.config import validate_config
    from coopsim.platform.recorder import read_jsonl
    from coopsim.platform.runner import run_config

    raw = {"name": "shield-bytes", "scenario": {"id": "coop_game/Grid4x4-v0", "params": {"num_agents": 3,
           "constraints": ["separation", "resource"]}}, "agents": {"id": "random-v0"},
           "shield": {"id": "certificate-v0", "params": {"num_runs": 360}}, "seeds": [0, 1], "episodes": 2,
           "out_dir": str(tmp_path)}
    a, b = (run_config(validate_config(raw), progress=False, run_dir=tmp_path / d) for d in "ab")
    assert (a / "metrics.jsonl").read_bytes() == (b / "metrics.jsonl").read_bytes()
    assert all("shield/filter_ms_per_call" not in r and "shield/changed_agents" in r for r in read_jsonl(a / "metrics.jsonl"))
    timing = read_jsonl(a / "timing.jsonl")
    assert len(timing) == 4 and all(t["shield/filter_ms_per_call"] > 0 for t in timing)
    summary = json.loads((a / "summary.json").read_text())
    mean = sum(t["shield/filter_ms_per_call"] for t in timing) / 4
    assert summary["timing"]["shield/filter_ms_per_call"] == pytest.approx(mean, rel=1e-4, abs=1e-6)
    assert "shield/filter_ms_per_call" not in summary["metrics"]


def test_lagrangian_multiplier_follows_dual_ascent_on_episode_cost():
    from coopsim.agents.graph_safe.train import run_episode
    from coopsim.agents.safe_baselines import LagrangianQAgent
    from coopsim.safety.passthrough import PassThroughShield

    sc = CoopGameCore(num_envs=1, height=4, width=4, num_agents=3, constraints=["separation"], max_steps=8, world_seed=0)
    agent = LagrangianQAgent(sc, epsilon=1.0, lambda_lr=0.5, cost_budget=1.0)
    lam = 0.0
    for ep in range(5):
        m = run_episode(sc, agent, PassThroughShield(), seed=ep)
        lam = min(max(lam + 0.5 * (m["violations"] - 1.0), 0.0), 100.0)
        assert agent.lam == pytest.approx(lam)
    assert agent.qc.max() > 0  # the cost table learned from observed violations


def test_episode_trainer_resumes_exactly():
    import pickle

    from coopsim.agents.graph_safe import GraphSafeAgent
    from coopsim.agents.graph_safe.train import EpisodeTrainer, GraphSafeTrainConfig

    def fresh():
        sc = CoopGameCore(num_envs=1, height=4, width=4, num_agents=2, constraints=["separation", "resource"], max_steps=8)
        return EpisodeTrainer(GraphSafeAgent(sc, num_runs=360), GraphSafeTrainConfig(total_env_steps=48), seed=3)

    full = fresh()
    ref = [full.train_iteration() for _ in range(6)]
    part = fresh()
    first = [part.train_iteration() for _ in range(3)]
    state = pickle.loads(pickle.dumps(part.state_dict()))
    resumed = fresh()
    resumed.load_state_dict(state)
    rest = [resumed.train_iteration() for _ in range(3)]
    assert first + rest == ref
    assert resumed.env_steps == full.env_steps == 48
