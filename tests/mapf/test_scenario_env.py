"""MG-MAPF as a registered scenario: seeding, instances, batch vs single env, params, reference model, conformance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coopsim.errors import ConfigError
from coopsim.platform.registry import make, make_scenario, validate_params
from coopsim.scenarios.mapf.core import ACTION_DELTAS, MGMAPFCore
from coopsim.scenarios.mapf.grid import components
from coopsim.scenarios.mapf.loaders import DATA_DIR, load_map, load_scen, resolve_map


def _flat(obs):
    return {k: v.copy() for k, v in obs.items()}


def _rollout(core, steps, seed_actions=5):
    rng = np.random.default_rng(seed_actions)
    out = []
    for _ in range(steps):
        r = core.step(rng.integers(0, 5, (core.num_envs, core.num_agents)))
        out.append((_flat(r.obs), r.reward.copy(), r.terminated.copy(), r.truncated.copy(), core.state().copy()))
    return out


def test_seeded_determinism_two_instances_side_by_side():
    a = make_scenario("mapf/MGMAPF-v0", num_envs=2, num_agents=32, num_goals=3, max_steps=40)
    b = make_scenario("mapf/MGMAPF-v0", num_envs=2, num_agents=32, num_goals=3, max_steps=40)
    oa, ob = a.reset(seed=7), b.reset(seed=7)
    for k in oa:
        assert np.array_equal(oa[k], ob[k])
    for (o1, *r1), (o2, *r2) in zip(_rollout(a, 45), _rollout(b, 45)):
        assert all(np.array_equal(o1[k], o2[k]) for k in o1)
        assert all(np.array_equal(x, y) for x, y in zip(r1, r2))
    assert a.episode_metrics() == b.episode_metrics()
    for k in ("positions", "goals", "goal_reached_at"):
        assert np.array_equal(a.replay(1)[k], b.replay(1)[k])
    # another seed gives another instance
    c = make_scenario("mapf/MGMAPF-v0", num_envs=2, num_agents=32, num_goals=3, max_steps=40)
    c.reset(seed=8)
    assert not np.array_equal(c.goals_xy(), a.goals_xy())


def test_env0_of_a_batch_equals_a_single_env():
    batch = MGMAPFCore(num_envs=3, num_agents=20, max_steps=30, goal_order="fixed")
    single = MGMAPFCore(num_envs=1, num_agents=20, max_steps=30, goal_order="fixed")
    ob, os_ = batch.reset(seed=4), single.reset(seed=4)
    assert all(np.array_equal(ob[k][:1], os_[k]) for k in ob)
    rng = np.random.default_rng(1)
    for _ in range(30):
        acts = rng.integers(0, 5, (3, 20))
        rb, rs = batch.step(acts), single.step(acts[:1])
        assert all(np.array_equal(rb.obs[k][:1], rs.obs[k]) for k in rb.obs)
        assert np.array_equal(rb.reward[:1], rs.reward) and np.array_equal(rb.terminated[:1], rs.terminated)
        assert np.array_equal(batch.state()[:1], single.state())
    assert batch.episode_metrics()[0] == single.episode_metrics()[0]
    # envs of a batch get different instances (different scen files)
    assert len({batch.scen_file(e) for e in range(3)}) == 3


def test_seed_selects_scen_file_and_rows():
    core = MGMAPFCore(num_envs=2, map="random-32-32-10", num_agents=10, num_goals=3)
    core.reset(seed=30)
    for e in range(2):
        i = (30 + e) % 25 + 1
        assert Path(core.scen_file(e)).name == f"random-32-32-10-random-{i}.scen"
        sc = load_scen(DATA_DIR / f"random-32-32-10-random-{i}.scen", "random-32-32-10")
        inst = core.replay(e)
        assert inst["positions"][0].tolist() == sc.start_xy[:10].tolist()
        assert inst["goals"][:, 0].tolist() == sc.goal_xy[:10].tolist()
    # an explicit scen index overrides the rule
    core = MGMAPFCore(num_envs=2, map="random-32-32-10", scen=3, num_agents=10)
    core.reset(seed=30)
    assert {Path(core.scen_file(e)).name for e in range(2)} == {"random-32-32-10-random-3.scen"}
    # a reset without a seed continues the generators and stays on shipped scen files
    core.reset()
    assert Path(core.scen_file(0)).name == "random-32-32-10-random-3.scen"


@pytest.mark.parametrize("map_name,n,k", [("room-32-32-4", 64, 4), ("maze-32-32-2", 100, 3), ("warehouse-10-20-10-2-1", 200, 5)])
def test_goal_sampling_properties(map_name, n, k):
    core = MGMAPFCore(num_envs=2, map=map_name, num_agents=n, num_goals=k)
    core.reset(seed=2)
    md = load_map(resolve_map(map_name))
    labels = components(md.blocked)
    w = md.width
    for e in range(2):
        rep = core.replay(e)
        starts, goals = rep["positions"][0].astype(int), rep["goals"].astype(int)
        sc = load_scen(core.scen_file(e), md)
        assert goals[:, 0].tolist() == sc.goal_xy[:n].tolist()
        extra = goals[:, 1:].reshape(-1, 2)
        cells = np.concatenate([starts, goals[:, 0], extra])
        flat = cells[:, 1] * w + cells[:, 0]
        # sampled goals are distinct from every start, every first goal and each other
        n_first = len(np.unique(np.concatenate([starts, goals[:, 0]])[:, 1] * w + np.concatenate([starts, goals[:, 0]])[:, 0]))
        assert len(np.unique(flat)) == n_first + len(extra)
        assert not md.blocked[extra[:, 1], extra[:, 0]].any()
        # ... and lie in the agent's own 4-connected region
        own = labels[starts[:, 1], starts[:, 0]]
        assert (labels[goals[:, 1:, 1], goals[:, 1:, 0]] == own[:, None]).all()
    # seeded: the same seed gives the same goals, another seed others
    again = MGMAPFCore(num_envs=1, map=map_name, num_agents=n, num_goals=k)
    again.reset(seed=2)
    assert np.array_equal(again.goals_xy()[0], core.goals_xy()[0])


def test_goal_sampling_is_roughly_uniform_over_free_cells():
    core = MGMAPFCore(num_envs=1, map="empty-32-32", num_agents=1, num_goals=2, scen=1)
    hits = np.zeros((32, 32), int)
    for s in range(600):
        core.reset(seed=s)
        g = core.goals_xy()[0, 0, 1]
        hits[g[1], g[0]] += 1
    # 1022 eligible cells, 600 draws (Poisson mean 0.59 per cell): under uniformity P(some cell >= 7) ~ 1.4%,
    # and about 1022 * (1 - exp(-0.59)) = 454 distinct cells are expected; the seeds are fixed
    assert hits.max() <= 6 and hits.sum() == 600
    assert (hits > 0).sum() > 400


def test_random_map_mode():
    core = MGMAPFCore(num_envs=3, map="random", random_size=(17, 24), random_density=0.3, num_agents=16, num_goals=2)
    obs = core.reset(seed=0)
    sizes = set()
    for e in range(3):
        md = core.map_data(e)
        h, w = md.blocked.shape
        sizes.add((h, w))
        assert 17 <= h <= 24 and 17 <= w <= 24 and int(md.blocked.sum()) == round(0.3 * h * w)
        assert components(md.blocked).max() == 0
        # the window sees off-map cells of a smaller map as obstacles
        assert core.scen_file(e) is None
    assert len(sizes) > 1
    assert obs["window"].shape == (3, 16, 3, 11, 11)


def test_params_errors_name_key_value_and_valid_range():
    with pytest.raises(ConfigError) as ei:
        validate_params("scenario", "mapf/MGMAPF-v0", {"map": "random-32-32-99"})
    msg = str(ei.value)
    assert "key 'map'" in msg and "random-32-32-99" in msg and "random-32-32-10, random-64-64-10" in msg
    with pytest.raises(ConfigError, match=r"key 'num_goals'.*1\.\.32"):
        validate_params("scenario", "mapf/MGMAPF-v0", {"num_goals": 0})
    with pytest.raises(ConfigError, match=r"key 'random_density'.*0\.1\.\.0\.3"):
        validate_params("scenario", "mapf/MGMAPF-v0", {"map": "random", "random_density": 0.5})
    with pytest.raises(ConfigError, match=r"key 'goal_order'"):
        validate_params("scenario", "mapf/MGMAPF-v0", {"goal_order": "any"})
    with pytest.raises(ConfigError, match=r"unknown parameter 'agents'"):
        validate_params("scenario", "mapf/MGMAPF-v0", {"agents": 3})
    with pytest.raises(ConfigError, match=r"num_agents=513 exceeds the 512 rows of scen file 'empty-32-32-random-1.scen'"):
        MGMAPFCore(map="empty-32-32", num_agents=513)
    with pytest.raises(ConfigError, match=r"no shipped scen file 'empty-32-32-random-30.scen'"):
        MGMAPFCore(map="empty-32-32", scen=30)


def test_custom_map_path_and_scen_path(tmp_path):
    src = DATA_DIR / "maze-32-32-2.map"
    p = tmp_path / "mymaze.map"
    p.write_bytes(src.read_bytes())
    core = MGMAPFCore(map=str(p), num_agents=8, num_goals=2)
    core.reset(seed=0)
    assert core.scen_file(0) is None and core.map_data(0).name == "mymaze"   # random starts: no scen for it
    scen = tmp_path / "mymaze.scen"
    scen.write_text((DATA_DIR / "maze-32-32-2-random-4.scen").read_text().replace("maze-32-32-2.map", "mymaze.map"))
    core = MGMAPFCore(map=str(p), scen=str(scen), num_agents=8, num_goals=2)
    core.reset(seed=0)
    sc = load_scen(scen)
    assert core.replay(0)["positions"][0].tolist() == sc.start_xy[:8].tolist()


def _reference_step(blocked, pos, actions):
    """Per-agent, loop-based statement of rules 1-6 (block mode), independent of the core's arrays."""
    h, w = blocked.shape
    n = len(pos)
    want = []
    for i in range(n):
        x, y = pos[i] + ACTION_DELTAS[actions[i]]
        want.append((x, y) if 0 <= x < w and 0 <= y < h and not blocked[y, x] else tuple(pos[i]))
    cur = [tuple(p) for p in pos]
    moving = [want[i] != cur[i] for i in range(n)]
    entering = {}
    for i in range(n):
        if moving[i]:
            entering.setdefault(want[i], []).append(i)
    go = list(moving)
    for i in range(n):
        if moving[i] and len(entering[want[i]]) > 1:
            go[i] = False
    where = {c: i for i, c in enumerate(cur)}
    for i in range(n):
        j = where.get(want[i])
        if moving[i] and j is not None and moving[j] and want[j] == cur[i]:
            go[i] = False
    changed = True
    while changed:
        changed = False
        for i in range(n):
            j = where.get(want[i])
            if go[i] and j is not None and not go[j]:
                go[i] = False
                changed = True
    return np.array([want[i] if go[i] else cur[i] for i in range(n)])


@pytest.mark.parametrize("map_name,n", [("room-32-32-4", 120), ("maze-32-32-2", 60)])
def test_block_mode_matches_a_loop_reference_and_never_conflicts(map_name, n):
    core = MGMAPFCore(num_envs=2, map=map_name, num_agents=n, max_steps=60)
    core.reset(seed=3)
    blocked = core.map_data(0).blocked
    rng = np.random.default_rng(9)
    for t in range(60):
        before = core.agent_xy().astype(int)
        acts = rng.integers(0, 5, (2, n))
        core.step(acts)
        after = core.agent_xy().astype(int)
        for e in range(2):
            assert np.array_equal(after[e], _reference_step(blocked, before[e], acts[e])), (t, e)
            flat = after[e, :, 1] * 1000 + after[e, :, 0]
            assert len(np.unique(flat)) == n                                   # no vertex conflict
            assert (np.abs(after[e] - before[e]).sum(1) <= 1).all()            # no teleport
    assert core.episode_metrics()[0]["blocked_moves"] > 0


def test_pettingzoo_view_keeps_finished_agents_until_all_finish():
    env = make("mapf/MGMAPF-v0", map="empty-32-32", num_agents=4, num_goals=1, max_steps=8)
    obs, infos = env.reset(seed=0)
    assert env.agents == [f"agent_{i}" for i in range(4)]
    assert set(obs["agent_0"]) == {"goal_status", "goal_vec", "window"}
    assert infos["agent_0"]["action_mask"].tolist() == [True] * 5
    steps = 0
    while env.agents:
        obs, rew, term, trunc, _ = env.step({a: 0 for a in env.agents})
        steps += 1
        assert len(env.agents) in (0, 4)   # all leave together
    assert steps == 8 and all(trunc.values()) and not any(term.values())
    m = env.episode_metrics()
    assert m["soc"] == 4 * 8 and m["success"] == 0.0
    assert env.positions()["agent_0"].shape == (3,)


@pytest.mark.parametrize("params", [None, dict(goal_order="fixed", conflicts="allow", num_agents=24),
                                    dict(map="random", num_agents=12, num_goals=2, max_steps=30)])
def test_check_scenario_conformance(params):
    testing = pytest.importorskip("coopsim.testing")
    testing.check_scenario("mapf/MGMAPF-v0", params=params, num_steps=40, api_cycles=20)


def test_check_scenario_on_a_from_instance_core(tiny):
    testing = pytest.importorskip("coopsim.testing")
    blocked = tiny.grid("""
        .....
        .@...
        .....
        ...@.
        .....
    """)
    inst = tiny.instance(blocked, [[0, 2], [4, 2], [2, 0]], [[[4, 2], [2, 4]], [[0, 2], [0, 0]], [[2, 4], [4, 4]]])
    testing.check_scenario(lambda n: MGMAPFCore.from_instance(inst, num_envs=n, obs_radius=2, max_steps=20),
                           num_steps=40, api_cycles=20)


def test_dense_tiny_grids_match_the_loop_reference(tiny):
    """Crowded 4x4 grids (rotations, chains, swaps, contested cells): the batched rules equal the loop reference."""
    rng = np.random.default_rng(21)
    cycles_moved = 0
    for trial in range(40):
        blocked = rng.random((4, 4)) < 0.15
        free = np.flatnonzero(~blocked.ravel())
        n = int(min(len(free) - 1, rng.integers(6, 13)))
        cells = rng.choice(free, size=n, replace=False)
        starts = np.stack([cells % 4, cells // 4], -1)
        g = free[rng.integers(len(free), size=n)]
        goals = np.stack([g % 4, g // 4], -1)
        core = MGMAPFCore.from_instance(tiny.instance(blocked, starts, goals[:, None, :]), num_envs=1, max_steps=50,
                                        obs_radius=1)
        core.reset(seed=trial)
        for _ in range(12):
            if core.done[0]:
                break
            before = core.agent_xy()[0].astype(int)
            acts = rng.integers(0, 5, n)
            core.step(acts[None])
            after = core.agent_xy()[0].astype(int)
            assert np.array_equal(after, _reference_step(blocked, before, acts)), trial
            # every agent that moved entered a cell that was free or vacated, and no cell holds two agents
            assert len({tuple(p) for p in after}) == n
            moved = (after != before).any(1)
            occupied_before = {tuple(p): i for i, p in enumerate(before)}
            for i in np.flatnonzero(moved):
                j = occupied_before.get(tuple(after[i]))
                assert j is None or moved[j]
                if j is not None:
                    cycles_moved += 1
    assert cycles_moved > 20  # following moves (into vacated cells) did occur


@pytest.mark.parametrize("params", [dict(map="random", random_size=(8, 10), num_agents=4, num_goals=2),
                                    dict(map="random-32-32-10", num_agents=12, num_goals=2, conflicts="allow")])
def test_pickled_core_continues_exactly(params):
    """A pickled core (the PPO trainer's resume state) steps, observes and resets exactly as the original: the
    observation planes' views (``_pflat``, ``_win``) are rebound to the unpickled planes, not frozen copies."""
    import pickle

    a = make_scenario("mapf/MGMAPF-v0", num_envs=3, obs_radius=2, max_steps=12, **params)
    a.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a.step(rng.integers(0, 5, (3, a.num_agents)))
    b = pickle.loads(pickle.dumps(a))
    for t in range(30):  # past max_steps: envs reset without a seed mid-way
        act = rng.integers(0, 5, (3, a.num_agents))
        ra, rb = a.step(act), b.step(act)
        for k in ra.obs:
            np.testing.assert_array_equal(ra.obs[k], rb.obs[k], err_msg=f"step {t}, {k}")
        np.testing.assert_array_equal(ra.reward, rb.reward)
        np.testing.assert_array_equal(a.state(), b.state())
        if a.done.any():
            ids = np.flatnonzero(a.done)
            oa, ob = a.reset(env_ids=ids), b.reset(env_ids=ids)
            for k in oa:
                np.testing.assert_array_equal(oa[k], ob[k], err_msg=f"reset at step {t}, {k}")
