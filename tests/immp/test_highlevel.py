"""IMMP high level: exact tours, density conservation, congestion steering, waypoint features."""
from types import SimpleNamespace

import numpy as np
import pytest

from coopsim.agents.immp.highlevel import BIG, HighLevelParams, ScenarioPlanner, TeamPlanner, descend, neighbour_table
from coopsim.scenarios.mapf import MGMAPFCore
from coopsim.scenarios.mapf.metrics import bfs_distances, tour_lower_bound


def test_neighbour_table_exact():
    blocked = np.array([[0, 1], [0, 0]], bool)          # cells: 0=(0,0) 1=(1,0) blocked 2=(0,1) 3=(1,1)
    nb = neighbour_table(blocked)
    s = 4
    assert nb.tolist() == [[0, s, 2, s, s], [s] * 5, [2, 0, s, s, 3], [3, s, s, 2, s]]


def test_descend_follows_bfs_distance():
    blocked = np.zeros((5, 7), bool)
    blocked[1:4, 3] = True
    d = bfs_distances(blocked, np.array([[6, 2]]))[0].ravel()
    field = np.append(np.where(np.isfinite(d), d, BIG), BIG).astype(np.float32)[None]
    nbr = np.concatenate([neighbour_table(blocked), np.full((1, 5), 35)])
    start = 2 * 7 + 0
    walk = descend(field, nbr, np.array([start]), 12)[0]
    assert d[start] == 10
    assert walk[10] == 2 * 7 + 6 and walk[11] == walk[10]            # reaches the goal in exactly d steps, stays
    assert np.all(np.diff(field[0, walk[:11]]) == -1)                 # one unit down the field per step


def _instance(n=12, k=3, seed=0, side=12):
    rng = np.random.default_rng(seed)
    blocked = rng.random((side, side)) < 0.1
    free = np.argwhere(~blocked)[:, ::-1]
    pick = rng.choice(len(free), n * (k + 1), replace=False)
    cells = free[pick]
    from coopsim.scenarios.mapf.grid import components
    lab = components(blocked)
    # keep the instance on the largest component
    big = np.bincount(lab[lab >= 0]).argmax()
    free = np.argwhere(lab == big)[:, ::-1]
    cells = free[rng.choice(len(free), n * (k + 1), replace=False)]
    return SimpleNamespace(blocked=blocked, starts=cells[:n], goals=cells[n:].reshape(n, k, 2))


def test_shortest_tours_are_exact_and_density_is_conserved():
    inst = _instance()
    n, k = inst.goals.shape[:2]
    tp = TeamPlanner(HighLevelParams(ordering="balanced", order_weight=0.0, path_weight=0.0, horizon=40))
    env = tp.reset_env(0, inst.blocked, inst.starts, inst.goals, np.zeros((n, k), bool), "free", 100)
    d = bfs_distances(inst.blocked, inst.goals.reshape(-1, 2)).reshape(n, k, -1)
    w = inst.blocked.shape[1]
    start = inst.starts[:, 1] * w + inst.starts[:, 0]
    gc = inst.goals[..., 1] * w + inst.goals[..., 0]
    o = env.order.copy()
    length = d[np.arange(n), o[:, 0], start] + sum(d[np.arange(n), o[:, j + 1], gc[np.arange(n), o[:, j]]] for j in range(k - 1))
    lb = tour_lower_bound(inst.blocked, inst.starts, inst.goals, "free")
    np.testing.assert_array_equal(length, lb)                        # exhaustive order = Held-Karp optimum
    assert env.counts.sum() == n * 41                                 # every agent is somewhere at each planned step
    # a replan after a goal visit keeps the map consistent: erase + write
    vis = np.zeros((n, k), bool)
    vis[0, o[0, 0]] = True
    gx = inst.goals[0, o[0, 0]]
    cells = inst.starts.copy()
    cells[0] = gx
    changed = tp.on_progress(0, cells, vis, "free", 5)
    assert changed.tolist() == [0]
    assert env.counts.sum() == n * 41
    assert env.counts[5, gx[1] * w + gx[0]] >= 1                     # agent 0 is planned at its new cell at t=5
    first = o[0, 0]
    assert env.plan_t0[0] == 5 and env.order[0, 2] == first and env.target[0] == env.order[0, 0] != first


def _two_corridors(width=9):
    """Rows 0 and 2 are corridors, row 1 is a wall except at both ends."""
    blocked = np.zeros((3, width), bool)
    blocked[1, 1:width - 1] = True
    return blocked


def test_congestion_weighted_path_avoids_the_busy_corridor():
    blocked = _two_corridors()
    w = blocked.shape[1]
    # agent 0 goes from the left end to the right end of the middle row, both corridors are equally long;
    # agents 1..4 are planned along the top corridor (fixed order, one goal each) -> top is busy
    starts = np.array([[0, 1], [1, 0], [2, 0], [3, 0], [4, 0]])
    goals = np.array([[[w - 1, 1]], [[w - 1, 0]], [[w - 2, 0]], [[w - 3, 0]], [[w - 4, 0]]])
    vis = np.zeros((5, 1), bool)
    tp = TeamPlanner(HighLevelParams(path_weight=1.0, horizon=16, rounds=0))
    env = tp.reset_env(0, blocked, starts, goals, vis, "fixed", 50)
    walk = descend(env.fields, env.nbr, np.array([1 * w + 0]), w + 1, rows=np.array([0]))[0]
    ys = walk // w
    assert walk[-1] == 1 * w + w - 1
    assert (ys[1:-1] == 2).all()                                      # the bottom corridor
    tp0 = TeamPlanner(HighLevelParams(path_weight=0.0, horizon=16, rounds=0))
    env0 = tp0.reset_env(0, blocked, starts, goals, vis, "fixed", 50)
    walk0 = descend(env0.fields, env0.nbr, np.array([1 * w + 0]), w + 1, rows=np.array([0]))[0]
    assert (walk0[1:-1] // w == 0).all()                              # unweighted tie-break: up first -> top


def test_balanced_order_visits_the_quiet_goal_first():
    blocked = np.zeros((1, 21), bool)
    # agent 0 at x=10 with goals at x=5 and x=15 (equal distance); agents 1..3 are planned to sit at x=15
    starts = np.array([[10, 0], [14, 0], [16, 0], [18, 0]])
    goals = np.array([[[15, 0], [5, 0]], [[15, 0], [15, 0]], [[15, 0], [15, 0]], [[15, 0], [15, 0]]])
    vis = np.zeros((4, 2), bool)
    vis[1:, 1] = True
    tp = TeamPlanner(HighLevelParams(order_weight=1.0, path_weight=0.0, horizon=32, rounds=1, groups=4, seed=0))
    env = tp.reset_env(0, blocked, starts, goals, vis, "free", 64)
    assert env.order[0].tolist() == [1, 0]                            # x=5 first: x=15 is crowded early
    tp0 = TeamPlanner(HighLevelParams(order_weight=0.0, path_weight=0.0, horizon=32, rounds=1))
    env0 = tp0.reset_env(0, blocked, starts, goals, vis, "free", 64)
    assert env0.order[0].tolist() == [0, 1]                           # without congestion: the tie keeps goal 0 first


def test_features_on_the_scenario():
    core = MGMAPFCore.from_instance(_instance(), obs_radius=3, max_steps=64)
    core.reset(seed=0)
    sp = ScenarioPlanner(core, HighLevelParams(num_waypoints=3))
    sp.sync()
    f = sp.features()
    assert f.shape == (1, 12, TeamPlanner.feature_dim(3))
    pref = sp.preferred_actions()[0]
    np.testing.assert_array_equal(f[0, :, 5:10].argmax(1), pref)      # one-hot of the descent move
    # the first waypoint is one move away (or the agent is at its goal), in units of the radius
    step = np.abs(f[0, :, 10:12] * 3).sum(1)
    assert set(np.round(step).astype(int).tolist()) <= {0, 1}
    # following the preferred actions alone reduces the cost-to-go column until agents meet
    assert (f[0, :, 10 + 6] == 0).all()                               # nobody finished at reset


@pytest.mark.parametrize("ordering", ["nearest", "balanced"])
def test_planner_is_deterministic(ordering):
    inst = _instance(seed=3)
    outs = []
    for _ in range(2):
        core = MGMAPFCore.from_instance(inst, max_steps=64)
        core.reset(seed=1)
        sp = ScenarioPlanner(core, HighLevelParams(ordering=ordering, seed=5))
        sp.sync()
        outs.append((sp.planner.envs[0].order.copy(), sp.features()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
