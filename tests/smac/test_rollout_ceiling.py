"""benchmarks/smac_rollout_ceiling.py: with one candidate the planner is the greedy policy, runs are seeded, Wilson."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.errors import ConfigError

from test_best_of_k import _load, _tiny_run  # noqa: E402  (tests/smac is on sys.path under pytest)


def test_one_candidate_plays_the_greedy_policy_and_runs_repeat(tmp_path, capsys):
    rc = _load("smac_rollout_ceiling")
    seed_dir = _tiny_run(tmp_path, "3m-mappo")
    one = rc.rollout_games(seed_dir, games=6, k=1, r=2, reset_seed=7, progress=False)
    # k = 1: the only candidate is the greedy joint action, and the real games keep their own streams, so the
    # planner's games are the greedy games, win for win
    np.testing.assert_array_equal(one["planner"], one["greedy"])
    assert one["deviations"].sum() == 0 and one["agent_steps"] > 0  # it never plays another action
    assert "deviates from the greedy action on 0.0% of" in rc.deviation_summary(one["deviations"], one["agent_steps"])
    a = rc.rollout_games(seed_dir, games=6, k=3, r=2, reset_seed=7, plan_seed=4, progress=False)
    b = rc.rollout_games(seed_dir, games=6, k=3, r=2, reset_seed=7, plan_seed=4, progress=False)
    np.testing.assert_array_equal(a["planner"], b["planner"])
    np.testing.assert_array_equal(a["greedy"], one["greedy"])
    np.testing.assert_array_equal(a["deviations"], b["deviations"])
    assert a["deviations"].sum() <= a["agent_steps"] and a["deviations"][0].sum() == 0  # a living unit never no-ops
    rc.main([str(seed_dir), "--games", "6", "-k", "3", "-r", "2", "--reset-seed", "7", "--plan-seed", "4"])
    out = capsys.readouterr().out
    assert f"rollout planner (k=3, r=2) {a['planner'].mean():.3f}" in out
    assert f"on {a['deviations'].sum() / a['agent_steps']:.1%} of {a['agent_steps']} living agent-steps" in out


def test_action_kinds_and_the_deviation_line():
    rc = _load("smac_rollout_ceiling")
    np.testing.assert_array_equal(rc.action_kind(np.array([0, 1, 2, 5, 6, 11])), [0, 1, 2, 2, 3, 3])
    dev = np.zeros((4, 4), np.int64)
    dev[1, 2], dev[3, 3] = 3, 1  # stop -> move three times, an attack on another unit once
    assert rc.deviation_summary(dev, 40) == ("planner deviates from the greedy action on 10.0% of 40 living "
                                             "agent-steps (stop->move 75%, attack->attack 25%)")


def test_wilson_interval_known_values():
    wilson = _load("smac_rollout_ceiling").wilson
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] == pytest.approx(0.27753, abs=1e-5)
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.23659, abs=1e-5) and hi == pytest.approx(0.76341, abs=1e-5)


def test_not_a_seed_dir_and_qmix_are_refused(tmp_path):
    rc = _load("smac_rollout_ceiling")
    with pytest.raises(ConfigError, match="not a training run's seed directory"):
        rc.rollout_games(tmp_path, games=2, k=1, r=1)
    with pytest.raises(ConfigError, match="candidates are sampled from a PPO policy"):
        rc.rollout_games(_tiny_run(tmp_path / "q", "3m-qmix"), games=2, k=1, r=1)


def test_the_rollout_env_cap_counts_per_agent_candidates(tmp_path):
    """With --per-agent the candidates are 1 + agents x M (3m: 1 + 3 M), not -k, and the cap says so."""
    rc = _load("smac_rollout_ceiling")
    seed_dir = _tiny_run(tmp_path, "3m-mappo")
    games, m = 1 << 12, 2  # 4096 games x (1 + 3 x 2) candidates x 64 rollouts = 1,835,008 > 2**20; -k=1 would pass
    with pytest.raises(ConfigError, match=r"--games x \(1 \+ 3 agents x --per-agent\) x -r = 1,835,008 rollout envs"):
        rc.rollout_games(seed_dir, games=games, k=1, r=64, per_agent=m, progress=False)
    with pytest.raises(ConfigError, match=r"--games x -k x -r = 1,048,577 rollout envs; keep it at most 1,048,576"):
        rc.rollout_games(seed_dir, games=1048577, k=1, r=1, progress=False)


def test_per_agent_candidates_change_one_agent_each_and_play_available_actions(tmp_path):
    rc = _load("smac_rollout_ceiling")
    from coopsim.platform import registry

    seed_dir = _tiny_run(tmp_path, "3m-mappo")
    cfg = rc.sampling_run(seed_dir, "")[0]
    env = registry.make_scenario(cfg.scenario.id, num_envs=5, **cfg.scenario_params())
    agent = registry.make_component("agent", cfg.agents.id, env, **{**cfg.agents.params, "deterministic": True})
    agent.load(str(seed_dir / "policy.pt"))
    obs = env.reset(seed=3)
    for _ in range(4):  # a few steps in, so units have moved and some actions are masked
        obs = env.step(agent.act(obs)[0]).obs
    m, A = 2, env.n_allies
    cand = rc.per_agent_candidates(agent, obs, m)
    greedy = agent.act(obs)[0]
    masks = np.asarray(env.action_masks())
    assert cand.shape == (5, 1 + A * m, A)
    np.testing.assert_array_equal(cand[:, 0], greedy)
    for i in range(A):
        for j in range(m):
            c = cand[:, 1 + i * m + j]
            others = np.delete(np.arange(A), i)
            np.testing.assert_array_equal(c[:, others], greedy[:, others])  # only agent i's action changes
            alive = np.asarray(env.alive)[:, i]
            assert (c[alive, i] != greedy[alive, i]).all()  # 3m: every living marine has at least 3 actions
            assert masks[np.arange(5), i, c[:, i]].all()  # and each is available
    # agent i's two alternatives are distinct
    assert (cand[:, 1::m] != cand[:, 2::m]).any(-1).all()
    # per-agent planning is seeded like the joint planner
    a = rc.rollout_games(seed_dir, games=4, k=1, r=2, reset_seed=7, plan_seed=4, progress=False, per_agent=1)
    b = rc.rollout_games(seed_dir, games=4, k=1, r=2, reset_seed=7, plan_seed=4, progress=False, per_agent=1)
    np.testing.assert_array_equal(a["planner"], b["planner"])
    with pytest.raises(ConfigError, match="per-agent alternatives m=99"):
        rc.per_agent_candidates(agent, obs, 99)
