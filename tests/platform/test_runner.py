"""Runner: byte-identical metrics for the same config, correct summary statistics, Ctrl-C keeps finished episodes."""
import json
import math

import numpy as np
import pytest
from scipy import stats

from coopsim.platform.config import validate_config
from coopsim.platform.recorder import read_jsonl
from coopsim.platform.runner import run_config

CFG = {
    "name": "line",
    "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 3, "length": 12}},
    "agents": {"id": "random-v0"},
    "seeds": [0, 1, 2],
    "episodes": 2,
    "max_steps": 30,
}


def run(tmp_path, **kw):
    cfg = validate_config({**CFG, "out_dir": str(tmp_path)})
    return run_config(cfg, progress=False, **kw)


def test_same_config_same_bytes(tmp_path):
    a, b = run(tmp_path / "a"), run(tmp_path / "b")
    assert (a / "metrics.jsonl").read_bytes() == (b / "metrics.jsonl").read_bytes()
    rows = read_jsonl(a / "metrics.jsonl")
    assert [(r["seed"], r["episode"], r["episode_seed"]) for r in rows] == [(s, e, s * 2 + e) for s in (0, 1, 2) for e in (0, 1)]
    assert all("wall_s" not in r for r in rows)
    assert len(read_jsonl(a / "timing.jsonl")) == 6
    # team return is minus the sum of costs in LineWalk
    assert all(r["episode_return"] == -r["soc"] for r in rows)


def test_summary_is_mean_of_seed_means_with_t_interval(tmp_path):
    d = run(tmp_path)
    rows = read_jsonl(d / "metrics.jsonl")
    summary = json.loads((d / "summary.json").read_text())["metrics"]["soc"]
    seed_means = [np.mean([r["soc"] for r in rows if r["seed"] == s]) for s in (0, 1, 2)]
    m = np.mean(seed_means)
    half = stats.t.ppf(0.975, 2) * np.std(seed_means, ddof=1) / math.sqrt(3)
    assert summary["mean"] == pytest.approx(m)
    assert summary["ci95_low"] == pytest.approx(m - half)
    assert summary["ci95_high"] == pytest.approx(m + half)
    assert summary["n_seeds"] == 3 and summary["n_episodes"] == 6
    assert (d / "metrics.png").stat().st_size > 1000


def test_interrupt_keeps_finished_episodes(tmp_path):
    seen = []

    def stop_after_three(row):
        seen.append(row)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, on_episode=stop_after_three)
    (d,) = list(tmp_path.iterdir())
    assert len(read_jsonl(d / "metrics.jsonl")) == 3
    summary = json.loads((d / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["episodes_finished"] == 3
    assert summary["metrics"]["soc"]["n_episodes"] == 3


def test_plugin_metrics_go_to_metrics_and_wall_times_to_timing(tmp_path):
    cfg = validate_config({"name": "pp", "out_dir": str(tmp_path), "seeds": [0],
                           "scenario": {"id": "mapf/MGMAPF-v0", "params": {"map": "empty-32-32", "num_agents": 8, "num_goals": 2}},
                           "agents": {"id": "mapf/prioritized-v0"}})
    d = run_config(cfg, progress=False)
    (row,) = read_jsonl(d / "metrics.jsonl")
    assert row["plan/failures"] == 0 and row["plan/soc"] == row["soc"] and "plan/time_s" not in row
    (timing,) = read_jsonl(d / "timing.jsonl")
    assert timing["plan/time_s"] > 0


def test_env_step_before_reset_and_unknown_agent_are_clear_errors():
    import pytest

    from coopsim.platform.registry import make

    env = make("line/LineWalk-v0", num_agents=2)
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\)"):
        env.step({a: 0 for a in env.possible_agents})
    env.reset(seed=0)
    with pytest.raises(KeyError, match=r"unknown agents \['nope'\]; valid agents: \["):
        env.step({"nope": 0})


@pytest.mark.parametrize("agent", [{"id": "ppo/mappo-v0", "params": {"hidden": [16], "deterministic": False}},
                                   {"id": "qmix/qmix-v0", "params": {"hidden": 16, "hypernet_embed": 8}}])
def test_untrained_learner_same_bytes_and_training_init(tmp_path, agent):
    """An agent not loaded from a checkpoint starts from the same weights in every run (the ones `coopsim train`
    gives the first seed), and building it leaves torch's global generator where it was."""
    import torch

    from coopsim.platform.runner import RunParts
    from coopsim.platform.training import build_trainer

    base = {"name": "untrained", "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 2, "length": 6}},
            "agents": agent, "seeds": [3], "episodes": 2, "max_steps": 12}
    cfg = validate_config({**base, "out_dir": str(tmp_path)})
    torch.manual_seed(11)
    a = run_config(cfg, progress=False, run_dir=tmp_path / "a")
    after_a = torch.rand(3)
    torch.manual_seed(99)  # a different global state must not change the run
    b = run_config(cfg, progress=False, run_dir=tmp_path / "b")
    assert (a / "metrics.jsonl").read_bytes() == (b / "metrics.jsonl").read_bytes()
    torch.manual_seed(11)
    RunParts(cfg).close()
    assert torch.equal(torch.rand(3), after_a)  # the global generator is restored after the build
    trained = validate_config({**base, "train": {"num_envs": 1, "total_env_steps": 100}})
    net_run = RunParts(cfg).agent.net.state_dict()
    net_train = build_trainer(trained, 3)[0].agent.net.state_dict()
    assert all(torch.equal(net_run[k], net_train[k]) for k in net_run)
