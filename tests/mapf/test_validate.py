"""Plan validator: each violation kind on a hand-made plan, exact costs of valid plans, and agreement with the core."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.errors import CoopsimError
from coopsim.scenarios.mapf.instance import MAPFInstance
from coopsim.scenarios.mapf.validate import InvalidPlanError, assert_valid, goal_visits, validate_plan

OPEN3 = np.zeros((3, 3), dtype=bool)


def inst(blocked, starts, goals, order="free"):
    goals = np.asarray(goals, dtype=np.int32)
    if goals.ndim == 2:
        goals = goals[:, None, :]
    return MAPFInstance(blocked=np.asarray(blocked, bool), starts=np.asarray(starts, np.int32).reshape(-1, 2),
                        goals=goals, goal_order=order)


def plan(*steps):
    """paths [T+1, N, 2] from one list of (x, y) per step."""
    return np.array(steps, dtype=np.int32)


def test_valid_plan_exact_costs():
    i = inst(OPEN3, [(0, 0), (0, 2)], [(2, 0), (2, 2)])
    p = plan([(0, 0), (0, 2)], [(1, 0), (1, 2)], [(2, 0), (2, 2)], [(2, 0), (2, 2)])
    r = validate_plan(i, p)
    assert r.ok and r.violations == [] and all(c == 0 for c in r.counts.values())
    assert r.num_steps == 3
    assert r.finish_step.tolist() == [2, 2]
    assert r.goal_reached_at.tolist() == [[2], [2]]
    assert (r.soc, r.makespan, r.goals_visited, r.complete) == (4, 2, 2, True)
    assert assert_valid(i, p, require_complete=True).soc == 4


def test_multi_goal_free_and_fixed_semantics():
    # one agent on a 1x4 corridor, goals A=(3,0) then B=(1,0) in the given order; it walks right then back left
    corridor = np.zeros((1, 4), dtype=bool)
    p = plan([(0, 0)], [(1, 0)], [(2, 0)], [(3, 0)], [(2, 0)], [(1, 0)])
    free = validate_plan(inst(corridor, [(0, 0)], [[(3, 0), (1, 0)]], "free"), p)
    assert free.goal_reached_at.tolist() == [[3, 1]] and free.finish_step.tolist() == [3] and free.soc == 3
    fixed = validate_plan(inst(corridor, [(0, 0)], [[(3, 0), (1, 0)]], "fixed"), p)
    # the pass over B at step 1 does not count before A: B counts at its visit after A, step 5
    assert fixed.goal_reached_at.tolist() == [[3, 5]] and fixed.finish_step.tolist() == [5] and fixed.soc == 5
    # reverse sequence: B at step 1, then A at step 3
    fixed2 = validate_plan(inst(corridor, [(0, 0)], [[(1, 0), (3, 0)]], "fixed"), p)
    assert fixed2.goal_reached_at.tolist() == [[1, 3]] and fixed2.soc == 3


def test_goal_on_start_counts_at_step_zero_and_unfinished_costs():
    i = inst(OPEN3, [(0, 0), (2, 2)], [(0, 0), (0, 2)])
    p = plan([(0, 0), (2, 2)], [(0, 0), (1, 2)])
    r = validate_plan(i, p)
    assert r.ok and r.goal_reached_at.tolist() == [[0], [-1]] and r.finish_step.tolist() == [0, -1]
    assert (r.soc, r.makespan, r.complete) == (0 + 1, 1, False)        # unfinished agent costs T = 1
    r2 = validate_plan(i, p, max_steps=50)
    assert (r2.soc, r2.makespan) == (50, 50)                            # ... or max_steps when given
    with pytest.raises(InvalidPlanError, match=r"incomplete plan: agent\(s\) \[1\] \(1 of 2\)"):
        assert_valid(i, p, require_complete=True)


def test_vertex_conflict_first_and_pair_count():
    i = inst(OPEN3, [(0, 1), (2, 1), (1, 0)], [(2, 2)] * 3)
    # step 1: agents 0 and 1 meet in the centre; step 2: all three meet at (1, 2) -> 3 pairs
    p = plan([(0, 1), (2, 1), (1, 0)], [(1, 1), (1, 1), (0, 0)], [(1, 2), (1, 2), (0, 1)], [(1, 2), (1, 2), (1, 1)],
             [(1, 2), (1, 2), (1, 2)])
    r = validate_plan(i, p)
    assert not r.ok
    v = r.by_kind("vertex")
    assert (v.step, v.agents, v.cells) == (1, (0, 1), ((1, 1),))
    assert r.counts["vertex"] == 1 + 1 + 1 + 3 == v.count
    assert [x.kind for x in r.violations] == ["vertex"]


def test_swap_is_rejected_following_and_rotation_are_not():
    i = inst(OPEN3, [(0, 0), (1, 0)], [(1, 0), (0, 0)])
    r = validate_plan(i, plan([(0, 0), (1, 0)], [(1, 0), (0, 0)]))
    v = r.by_kind("swap")
    assert not r.ok and (v.step, v.agents, v.count) == (1, (0, 1), 1)
    assert set(v.cells) == {(0, 0), (1, 0)}
    # following: 0 -> (1,0) while 1 -> (2,0)
    follow = inst(OPEN3, [(0, 0), (1, 0)], [(1, 0), (2, 0)])
    assert validate_plan(follow, plan([(0, 0), (1, 0)], [(1, 0), (2, 0)])).ok
    # rotation of four agents around the 2x2 block
    cyc = [(0, 0), (1, 0), (1, 1), (0, 1)]
    rot = inst(OPEN3, cyc, cyc)
    assert validate_plan(rot, plan(cyc, cyc[1:] + cyc[:1])).ok


def test_obstacle_off_map_teleport_and_start():
    blocked = OPEN3.copy()
    blocked[1, 1] = True
    i = inst(blocked, [(0, 0), (2, 2)], [(2, 0), (0, 2)])
    p = plan([(0, 0), (2, 1)],            # step 0: agent 1 not at its start (2, 2)
             [(1, 0), (2, 0)],
             [(1, 1), (2, -1)],           # step 2: agent 0 on the obstacle, agent 1 off the map
             [(1, 1), (2, -1)],
             [(0, 2), (2, 0)])            # step 4: agent 0 jumps from (1,1) to (0,2) (diagonal), agent 1 from (2,-1) ok
    r = validate_plan(i, p)
    assert not r.ok
    kinds = {v.kind: v for v in r.violations}
    assert set(kinds) == {"start", "obstacle", "off_map", "teleport"}
    assert (kinds["start"].step, kinds["start"].agents, kinds["start"].cells) == (0, (1,), ((2, 1),))
    assert (kinds["obstacle"].step, kinds["obstacle"].agents, kinds["obstacle"].count) == (2, (0,), 2)
    assert (kinds["off_map"].step, kinds["off_map"].agents, kinds["off_map"].count) == (2, (1,), 2)
    assert (kinds["teleport"].step, kinds["teleport"].agents, kinds["teleport"].count) == (4, (0,), 1)
    assert [v.kind for v in r.violations] == ["start", "off_map", "obstacle", "teleport"]  # by step, then kind
    with pytest.raises(CoopsimError, match=r"invalid plan: step 0: agent\(s\) \[1\] not at their start"):
        assert_valid(i, p)


def test_bad_shape_is_a_report_not_an_exception():
    i = inst(OPEN3, [(0, 0), (2, 2)], [(2, 0), (0, 2)])
    r = validate_plan(i, np.zeros((3, 3, 2), dtype=np.int32))
    assert not r.ok and r.violations[0].kind == "shape" and "N = 2 agents" in r.violations[0].message
    r = validate_plan(i, np.full((2, 2, 2), 0.5))
    assert not r.ok and r.violations[0].kind == "shape" and "integer" in r.violations[0].message
    with pytest.raises(InvalidPlanError) as exc:
        assert_valid(i, np.zeros((4, 2), dtype=np.int32))
    assert exc.value.report.counts["shape"] == 1


def test_goal_visits_fixed_matches_a_loop_reference():
    rng = np.random.default_rng(3)
    paths = rng.integers(0, 3, size=(30, 5, 2))
    goals = rng.integers(0, 3, size=(5, 3, 2))
    got = goal_visits(paths, goals, "fixed")
    for i in range(5):
        t0, expect = 0, []
        for k in range(3):
            hit = [t for t in range(t0, 30) if (paths[t, i] == goals[i, k]).all()] if (not expect or expect[-1] >= 0) else []
            expect.append(hit[0] if hit else -1)
            t0 = hit[0] if hit else t0
        assert got[i].tolist() == expect


def test_validator_counts_match_the_core_collisions_under_allow():
    """A random walk under ``conflicts: allow``: the core's collision count equals the validator's vertex + swap pairs,
    and the core's SoC and goal visits equal the validator's (with ``max_steps`` as the cost of unfinished agents)."""
    from coopsim.platform.registry import make_component, make_scenario

    sc = make_scenario("mapf/MGMAPF-v0", num_envs=1, map="empty-32-32", num_agents=60, num_goals=2, conflicts="allow",
                       max_steps=60, goal_order="fixed")
    ag = make_component("agent", "mapf/random-v0", sc)
    obs = sc.reset(seed=4)
    ag.reset(4)
    while not sc.done.all():
        obs = sc.step(ag.act(obs)[0]).obs
    rep = sc.replay(0)
    m = sc.episode_metrics()[0]
    r = validate_plan(sc.instance(0), rep["positions"], max_steps=60)
    assert r.counts["vertex"] + r.counts["swap"] == m["collisions"] > 0
    assert r.counts["start"] == r.counts["obstacle"] == r.counts["off_map"] == r.counts["teleport"] == 0
    assert (r.goal_reached_at == rep["goal_reached_at"]).all()
    assert r.soc == m["soc"]
