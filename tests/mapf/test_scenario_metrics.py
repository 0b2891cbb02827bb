"""MG-MAPF lower bound, SoC/return identity, metrics of a scripted episode, positions, replay, render."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mapf.metrics import bfs_distances, tour_lower_bound


def test_lb_fixed_versus_free_order_on_a_corridor(tiny):
    blocked = np.zeros((1, 11), bool)
    starts = [[5, 0]]
    goals = [[[0, 0], [7, 0]]]
    assert tour_lower_bound(blocked, starts, goals, "fixed").tolist() == [5 + 7]
    assert tour_lower_bound(blocked, starts, goals, "free").tolist() == [2 + 7]
    goals3 = [[[0, 0], [10, 0], [6, 0]]]
    assert tour_lower_bound(blocked, starts, goals3, "fixed").tolist() == [5 + 10 + 4]
    assert tour_lower_bound(blocked, starts, goals3, "free").tolist() == [1 + 4 + 10]  # 6, 10, 0 (or 0, 6, 10)


def test_lb_walks_around_obstacles(tiny):
    blocked = tiny.grid("""
        .....
        .@@@.
        .....
    """)
    # from (0,1) to (4,1): around the wall, 2 + 4 = 6 moves
    assert tour_lower_bound(blocked, [[0, 1]], [[[4, 1]]], "free").tolist() == [6]
    # fixed: (0,1) -> (4,1) -> (0,1) = 6 + 6;  (2,0) -> (2,2) around the wall (6) -> (0,0) (4)
    assert tour_lower_bound(blocked, [[0, 1], [2, 0]], [[[4, 1], [0, 1]], [[2, 2], [0, 0]]], "fixed").tolist() == [12, 10]


def test_held_karp_equals_brute_force_over_orders():
    rng = np.random.default_rng(3)
    from coopsim.scenarios.mapf.generator import random_map
    from coopsim.scenarios.mapf.sampling import random_instance

    md = random_map(rng, 16, 0.2)
    starts, goals = random_instance(md, 12, 5, rng)
    lb_free = tour_lower_bound(md.blocked, starts, goals, "free")
    lb_fixed = tour_lower_bound(md.blocked, starts, goals, "fixed")
    for i in range(len(starts)):
        pts = np.concatenate([starts[i:i + 1], goals[i]])          # 0 = start, 1..5 = goals
        dist = bfs_distances(md.blocked, pts)

        def d(p, q):
            return dist[p][pts[q][1], pts[q][0]]

        best = min(sum(d(p, q) for p, q in zip((0,) + perm, perm)) for perm in itertools.permutations(range(1, 6)))
        fixed = sum(d(p, p + 1) for p in range(5))
        assert lb_free[i] == best and lb_fixed[i] == fixed
        assert lb_free[i] <= lb_fixed[i]


def test_lb_above_exact_limit_is_a_spanning_tree_bound():
    blocked = np.zeros((1, 40), bool)
    goals = [[[x, 0] for x in range(1, 24, 2)]]           # 12 goals right of the start
    lb = tour_lower_bound(blocked, [[0, 0]], goals, "free")
    assert lb.tolist() == [23]                            # on a line the MST bound is tight


def test_scripted_episode_metrics(tiny):
    # two agents, two goals each, on a 1x6 corridor with a wall gap; fixed script
    c = tiny.core("""
        ......
    """, [[0, 0], [5, 0]], [[[2, 0], [1, 0]], [[3, 0], [5, 0]]], goal_order="fixed", max_steps=20)
    R, L, W = tiny.RIGHT, tiny.LEFT, tiny.WAIT
    # agent 1 starts on (5,0) but it is its second goal: not counted at reset in fixed order
    assert c.goals_visited()[0].tolist() == [[False, False], [False, False]]
    script = [(R, L), (R, L), (L, R), (W, R)]
    # t1: 0->(1,0) 1->(4,0); t2: 0->(2,0) g0 visited, 1->(3,0) g0 visited; t3: 0->(1,0) finished, 1->(4,0); t4: 1->(5,0) finished
    rets = []
    for s in script:
        rets.append(tiny.act(c, *s).reward.sum())
    m = c.episode_metrics()[0]
    assert c.done.all()
    assert m == {
        "soc": 3 + 4, "makespan": 4, "success": 1.0, "goal_fraction": 1.0, "throughput": 4 / 4,
        "blocked_moves": 0.0, "invalid_moves": 0.0, "collisions": 0.0, "lb": (2 + 1) + (2 + 2),
        "soc_over_lb": 7 / 7, "episode_return": -7.0, "steps": 4.0,
    }
    assert rets == [-2.0, -2.0, -2.0, -1.0]
    rep = c.replay(0)
    assert rep["positions"].dtype == np.int32 and rep["positions"].shape == (5, 2, 2)
    assert rep["positions"][:, 1, 0].tolist() == [5, 4, 3, 4, 5]
    assert rep["goal_reached_at"].tolist() == [[2, 3], [2, 4]]
    assert rep["goals"].tolist() == [[[2, 0], [1, 0]], [[3, 0], [5, 0]]]
    assert rep["blocked"].shape == (1, 6) and not rep["blocked"].any()


@pytest.mark.parametrize("params", [dict(goal_order="free"), dict(goal_order="fixed", conflicts="allow"),
                                    dict(map="room-32-32-4", num_goals=2, max_steps=40)])
def test_team_return_is_minus_soc_and_soc_at_least_lb(params):
    core = MGMAPFCore(num_envs=3, num_agents=24, max_steps=params.pop("max_steps", 96), **params)
    core.reset(seed=11)
    rng = np.random.default_rng(0)
    ret = np.zeros(3)
    while not core.done.all():
        # greedy-ish: mostly random, so some agents finish and some do not
        r = core.step(rng.integers(0, 5, (3, 24)))
        ret += r.reward.sum(1)
    for e, m in enumerate(core.episode_metrics()):
        assert m["episode_return"] == ret[e] == -m["soc"]
        assert m["steps"] == core.params.max_steps or m["success"] == 1.0
        # per agent: cost = last first-visit step (max_steps if a goal was never visited) >= min(own tour, max_steps)
        rep = core.replay(e)
        ms = core.params.max_steps
        at = rep["goal_reached_at"]
        cost = np.where((at >= 0).all(1), at.max(1), ms)
        assert cost.sum() == m["soc"]
        tour = tour_lower_bound(rep["blocked"], rep["positions"][0], rep["goals"], core.params.goal_order)
        assert tour.sum() == m["lb"] > 0
        assert (cost >= np.minimum(tour, ms)).all()


def test_positions_in_metres_and_dt(tiny):
    c = tiny.core("""
        ...
        ...
    """, [[0, 0], [2, 1]], [[[1, 1]], [[0, 1]]], cell_size_m=2.5, dt_s=0.5)
    p = c.positions()
    assert p.dtype == np.float64 and p.shape == (1, 2, 3)
    assert p[0].tolist() == [[1.25, 1.25, 0.0], [6.25, 3.75, 0.0]]
    assert c.dt_s == 0.5 and isinstance(c.dt_s, float)


def test_render_draws_agents_and_goals(tiny):
    c = tiny.core("""
        .@.
    """, [[0, 0]], [[[2, 0]]])
    img = c.render(0)
    assert img.dtype == np.uint8 and img.shape == (8, 24, 3)
    assert tuple(img[4, 12]) == (45, 45, 55)               # obstacle cell centre
    agent = img[4, 4]
    goal = img[2, 18]                                       # the goal's ring (its centre stays free-coloured)
    assert tuple(agent) != (245, 245, 240) and tuple(goal) != (245, 245, 240)
    assert tuple(img[4, 20]) == (245, 245, 240)
    assert (goal.astype(int) < agent.astype(int)).all()    # goals drawn darker in the agent's colour
    frames = MGMAPFCore.render_replay(c.replay(0))          # 12 px cells under a 16 px caption
    assert len(frames) == 1 and frames[0].shape == (16 + 12, 36, 3)
    assert np.array_equal(frames[0][16:], c.render(0, cell_px=12))


def test_long_episode_replay_keeps_every_step(tiny):
    c = tiny.core("""
        ..
    """, [[0, 0]], [[[1, 0]]], max_steps=1500)
    for t in range(1300):
        tiny.act(c, tiny.WAIT)
    tiny.act(c, tiny.RIGHT)
    rep = c.replay(0)
    assert rep["positions"].shape == (1302, 1, 2)
    assert rep["positions"][:1301, 0].tolist() == [[0, 0]] * 1301 and rep["positions"][1301, 0].tolist() == [1, 0]
    assert rep["goal_reached_at"].tolist() == [[1301]] and c.episode_metrics()[0]["soc"] == 1301
