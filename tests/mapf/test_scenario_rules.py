"""MG-MAPF movement, conflict, goal and episode rules, each with an exact hand-made outcome."""
from __future__ import annotations

import numpy as np
import pytest

OPEN5 = """
.....
.....
.....
.....
.....
"""


def xy(core):
    return core.agent_xy()[0].tolist()


def test_each_action_moves_one_cell(tiny):
    # x is the column, y the row; up is y-1
    c = tiny.core(OPEN5, [[2, 2]], [[[0, 0]]])
    for a, expect in [(tiny.UP, [2, 1]), (tiny.DOWN, [2, 2]), (tiny.LEFT, [1, 2]), (tiny.RIGHT, [2, 2]), (tiny.WAIT, [2, 2])]:
        tiny.act(c, a)
        assert xy(c) == [expect]
    m = c.episode_metrics()[0]
    assert m["invalid_moves"] == 0 and m["blocked_moves"] == 0 and m["steps"] == 5


def test_off_map_and_obstacle_moves_are_waits(tiny):
    c = tiny.core("""
        .@.
        ...
    """, [[0, 0], [2, 1]], [[[0, 1]], [[1, 1]]])
    r = tiny.act(c, tiny.UP, tiny.RIGHT)          # both off the map
    assert xy(c) == [[0, 0], [2, 1]]
    tiny.act(c, tiny.RIGHT, tiny.DOWN)            # obstacle, off the map
    assert xy(c) == [[0, 0], [2, 1]]
    assert c.episode_metrics()[0]["invalid_moves"] == 4
    assert c.episode_metrics()[0]["blocked_moves"] == 0
    assert r.reward.tolist() == [[-1.0, -1.0]]


def test_two_or_three_agents_entering_one_cell_all_wait(tiny):
    c = tiny.core(OPEN5, [[1, 2], [3, 2], [2, 1]], [[[0, 0]], [[4, 4]], [[4, 0]]])
    tiny.act(c, tiny.RIGHT, tiny.LEFT, tiny.WAIT)
    assert xy(c) == [[1, 2], [3, 2], [2, 1]]
    assert c.episode_metrics()[0]["blocked_moves"] == 2
    tiny.act(c, tiny.RIGHT, tiny.LEFT, tiny.DOWN)
    assert xy(c) == [[1, 2], [3, 2], [2, 1]]
    assert c.episode_metrics()[0]["blocked_moves"] == 5


def test_swap_makes_both_wait(tiny):
    c = tiny.core(OPEN5, [[1, 1], [2, 1]], [[[0, 0]], [[4, 4]]])
    tiny.act(c, tiny.RIGHT, tiny.LEFT)
    assert xy(c) == [[1, 1], [2, 1]]
    assert c.episode_metrics()[0]["blocked_moves"] == 2


def test_following_into_a_vacated_cell_is_allowed(tiny):
    # a train of three moving right, the head into a free cell
    c = tiny.core(OPEN5, [[0, 0], [1, 0], [2, 0]], [[[0, 4]], [[1, 4]], [[2, 4]]])
    tiny.act(c, tiny.RIGHT, tiny.RIGHT, tiny.RIGHT)
    assert xy(c) == [[1, 0], [2, 0], [3, 0]]
    assert c.episode_metrics()[0]["blocked_moves"] == 0


def test_rotation_of_four_agents_is_allowed(tiny):
    # 2x2 cycle: every cell is vacated in the same step
    c = tiny.core(OPEN5, [[0, 0], [1, 0], [1, 1], [0, 1]], [[[4, 4]], [[4, 3]], [[4, 2]], [[4, 1]]])
    tiny.act(c, tiny.RIGHT, tiny.DOWN, tiny.LEFT, tiny.UP)
    assert xy(c) == [[1, 0], [1, 1], [0, 1], [0, 0]]


def test_cascade_until_stable(tiny):
    # a train of four moving right whose head is stopped by an obstacle: everyone behind waits
    c = tiny.core("""
        ....@
        .....
    """, [[0, 0], [1, 0], [2, 0], [3, 0]], [[[0, 1]], [[1, 1]], [[2, 1]], [[3, 1]]])
    tiny.act(c, tiny.RIGHT, tiny.RIGHT, tiny.RIGHT, tiny.RIGHT)
    assert xy(c) == [[0, 0], [1, 0], [2, 0], [3, 0]]
    m = c.episode_metrics()[0]
    assert m["invalid_moves"] == 1 and m["blocked_moves"] == 3


def test_cascade_from_a_vertex_conflict(tiny):
    # 0 and 1 contest cell (2, 1) and both wait; 2 follows 0 and waits by cascade; 3 moves freely
    c = tiny.core(OPEN5, [[1, 1], [3, 1], [0, 1], [4, 4]], [[[0, 4]], [[4, 0]], [[0, 0]], [[0, 3]]])
    tiny.act(c, tiny.RIGHT, tiny.LEFT, tiny.RIGHT, tiny.LEFT)
    assert xy(c) == [[1, 1], [3, 1], [0, 1], [3, 4]]
    assert c.episode_metrics()[0]["blocked_moves"] == 3


def test_cascade_from_a_swap(tiny):
    # 0 and 1 swap (both wait); 2 follows 1 and waits
    c = tiny.core(OPEN5, [[1, 1], [2, 1], [3, 1]], [[[0, 4]], [[4, 0]], [[0, 0]]])
    tiny.act(c, tiny.RIGHT, tiny.LEFT, tiny.LEFT)
    assert xy(c) == [[1, 1], [2, 1], [3, 1]]
    assert c.episode_metrics()[0]["blocked_moves"] == 3


def test_moving_into_a_waiting_agent_waits(tiny):
    c = tiny.core(OPEN5, [[1, 1], [2, 1]], [[[0, 4]], [[4, 0]]])
    tiny.act(c, tiny.RIGHT, tiny.WAIT)
    assert xy(c) == [[1, 1], [2, 1]]
    assert c.episode_metrics()[0]["blocked_moves"] == 1


def test_allow_mode_counts_vertex_and_swap_collisions(tiny):
    c = tiny.core(OPEN5, [[1, 2], [3, 2], [0, 0], [1, 0]], [[[0, 4]], [[4, 4]], [[4, 0]], [[0, 3]]], conflicts="allow")
    r = tiny.act(c, tiny.RIGHT, tiny.LEFT, tiny.RIGHT, tiny.LEFT)    # vertex at (2, 2); swap of 2 and 3
    assert xy(c) == [[2, 2], [2, 2], [1, 0], [0, 0]]
    assert r.info["cost/collision"].tolist() == [2.0]
    r = tiny.act(c, tiny.WAIT, tiny.WAIT, tiny.WAIT, tiny.WAIT)      # still sharing a cell
    assert r.info["cost/collision"].tolist() == [1.0]
    # the observation shows the other agent on one's own cell in allow mode
    obs = c.observations()
    R = c.params.obs_radius
    assert obs["window"][0, 0, 1, R, R] == 1.0 and obs["window"][0, 2, 1, R, R] == 0.0
    m = c.episode_metrics()[0]
    assert m["collisions"] == 3 and m["blocked_moves"] == 0


def test_allow_mode_three_on_one_cell_is_three_pairs(tiny):
    c = tiny.core(OPEN5, [[1, 2], [3, 2], [2, 1]], [[[0, 4]], [[4, 4]], [[4, 0]]], conflicts="allow")
    r = tiny.act(c, tiny.RIGHT, tiny.LEFT, tiny.DOWN)
    assert r.info["cost/collision"].tolist() == [3.0]


def test_free_order_goals_finish_and_stay_and_terminate_together(tiny):
    # agent 0: goals (1,0) and (0,0)... in free order it may visit (0,0) first
    c = tiny.core("""
        ....
    """, [[1, 0], [3, 0]], [[[2, 0], [0, 0]], [[2, 0], [3, 0]]], goal_order="free")
    # agent 1 starts on its second goal: visited at reset
    assert c.goals_visited()[0].tolist() == [[False, False], [False, True]]
    r = tiny.act(c, tiny.LEFT, tiny.WAIT)           # 0 -> (0,0): goal 1 visited
    assert r.reward.tolist() == [[-1.0, -1.0]]
    assert c.goals_visited()[0].tolist() == [[False, True], [False, True]]
    r = tiny.act(c, tiny.RIGHT, tiny.LEFT)          # 0 -> (1,0), 1 -> (2,0): agent 1 finished at step 2
    assert c.goals_visited()[0].tolist() == [[False, True], [True, True]]
    assert r.reward.tolist() == [[-1.0, -1.0]]
    assert not r.terminated.any() and c.alive.all()
    r = tiny.act(c, tiny.WAIT, tiny.RIGHT)          # finished agent 1 moves on (to make room), reward 0
    assert r.reward.tolist() == [[-1.0, 0.0]] and xy(c) == [[1, 0], [3, 0]]
    r = tiny.act(c, tiny.RIGHT, tiny.WAIT)          # agent 0 finishes at step 4: everyone terminates
    assert r.reward.tolist() == [[-1.0, 0.0]]
    assert r.terminated.all() and not r.truncated.any() and not c.alive.any()
    m = c.episode_metrics()[0]
    assert m["soc"] == 4 + 2 and m["makespan"] == 4 and m["success"] == 1.0
    assert m["episode_return"] == -m["soc"]
    rep = c.replay(0)
    assert rep["goal_reached_at"].tolist() == [[4, 1], [2, 0]]
    assert rep["positions"][:, 0].tolist() == [[1, 0], [0, 0], [1, 0], [1, 0], [2, 0]]


def test_fixed_order_counts_only_the_next_goal(tiny):
    c = tiny.core("""
        .....
    """, [[2, 0]], [[[4, 0], [0, 0]]], goal_order="fixed")
    tiny.act(c, tiny.LEFT)
    tiny.act(c, tiny.LEFT)                                      # stands on goal 2 before goal 1: not counted
    assert c.goals_visited()[0].tolist() == [[False, False]]
    obs = c.observations()
    assert obs["goal_status"][0, 0].tolist() == [[1.0, 1.0], [1.0, 0.0]]  # remaining; only goal 0 is next
    for _ in range(4):
        tiny.act(c, tiny.RIGHT)                                 # reaches (4,0) at step 6
    assert c.goals_visited()[0].tolist() == [[True, False]]
    obs = c.observations()
    assert obs["goal_status"][0, 0].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    for _ in range(4):
        r = tiny.act(c, tiny.LEFT)
    assert r.terminated.all()
    assert c.replay(0)["goal_reached_at"].tolist() == [[6, 10]]
    m = c.episode_metrics()[0]
    assert m["soc"] == 10 and m["lb"] == 2 + 4 and m["soc_over_lb"] == pytest.approx(10 / 6)


def test_same_instance_free_order_finishes_earlier(tiny):
    c = tiny.core("""
        .....
    """, [[2, 0]], [[[4, 0], [0, 0]]], goal_order="free")
    tiny.act(c, tiny.LEFT)
    tiny.act(c, tiny.LEFT)                                      # (0,0) counts now
    assert c.goals_visited()[0].tolist() == [[False, True]]
    assert c.episode_metrics()[0]["lb"] == 2 + 4


def test_truncation_at_max_steps(tiny):
    c = tiny.core(OPEN5, [[0, 0], [4, 4]], [[[4, 0]], [[4, 3]]], max_steps=3)
    r = tiny.act(c, tiny.RIGHT, tiny.UP)                        # agent 1 finishes at step 1
    assert not r.truncated.any()
    tiny.act(c, tiny.RIGHT, tiny.WAIT)
    r = tiny.act(c, tiny.RIGHT, tiny.WAIT)
    assert r.truncated.all() and not r.terminated.any() and c.done.all()
    m = c.episode_metrics()[0]
    assert m["soc"] == 3 + 1 and m["makespan"] == 3 and m["success"] == 0.0
    assert m["episode_return"] == -4 and m["goal_fraction"] == 0.5 and m["throughput"] == pytest.approx(1 / 3)
    # a done env ignores further steps
    r = tiny.act(c, tiny.RIGHT, tiny.WAIT)
    assert r.reward.tolist() == [[0.0, 0.0]] and xy(c) == [[3, 0], [4, 3]] and r.truncated.all()


def test_observation_layout(tiny):
    c = tiny.core("""
        .@...
        .....
        ...@.
    """, [[0, 0], [2, 1]], [[[4, 2], [1, 1]], [[0, 2], [4, 1]]], obs_radius=2)
    obs = c.observations()
    w = obs["window"][0, 0]             # agent 0 at (0, 0), R = 2: window[i, j] = cell (x + j - 2, y + i - 2)
    assert w.shape == (3, 5, 5)
    expect_obst = np.array([[1, 1, 1, 1, 1],
                            [1, 1, 1, 1, 1],
                            [1, 1, 0, 1, 0],
                            [1, 1, 0, 0, 0],
                            [1, 1, 0, 0, 0]], dtype=np.float32)
    assert np.array_equal(w[0], expect_obst)
    agents = np.zeros((5, 5), np.float32)
    agents[3, 4] = 1                    # agent 1 at (2, 1) -> i = 1 + 2, j = 2 + 2
    assert np.array_equal(w[1], agents)
    goals = np.zeros((5, 5), np.float32)
    goals[3, 3] = 1                     # goal (1, 1); goal (4, 2) is outside the window
    assert np.array_equal(w[2], goals)
    assert obs["goal_vec"][0, 0].tolist() == [[4.0, 2.0], [1.0, 1.0]]
    assert obs["goal_vec"][0, 1].tolist() == [[-2.0, 1.0], [2.0, 0.0]]
    tiny.act(c, tiny.DOWN, tiny.WAIT)
    tiny.act(c, tiny.RIGHT, tiny.WAIT)  # agent 0 visits (1, 1)
    obs = c.observations()
    assert obs["goal_vec"][0, 0].tolist() == [[3.0, 1.0], [0.0, 0.0]]
    assert obs["goal_status"][0, 0].tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert obs["window"][0, 0, 2].sum() == 0.0  # the remaining goal (4, 2) is 3 columns away: outside R = 2


def test_from_instance_rejects_bad_instances(tiny):
    from coopsim.errors import ConfigError
    from coopsim.scenarios.mapf.core import MGMAPFCore

    blocked = tiny.grid("""
        .@.
        ...
    """)
    with pytest.raises(ConfigError, match=r"start \[1, 0\] lies on an obstacle"):
        MGMAPFCore.from_instance(tiny.instance(blocked, [[1, 0]], [[[0, 0]]]))
    with pytest.raises(ConfigError, match=r"goal \[3, 1\] is outside the 3x2 map"):
        MGMAPFCore.from_instance(tiny.instance(blocked, [[0, 0]], [[[3, 1]]]))
    with pytest.raises(ConfigError, match="two agents share a start cell"):
        MGMAPFCore.from_instance(tiny.instance(blocked, [[0, 0], [0, 0]], [[[2, 0]], [[2, 1]]]))
    with pytest.raises(ConfigError, match="'num_agents' comes from the instance"):
        MGMAPFCore.from_instance(tiny.instance(blocked, [[0, 0]], [[[2, 0]]]), num_agents=3)


def test_instance_round_trip(tiny):
    from coopsim.scenarios.mapf.core import MGMAPFCore

    c = MGMAPFCore(num_envs=2, map="room-32-32-4", num_agents=12, num_goals=3, goal_order="fixed")
    c.reset(seed=5)
    inst = c.instance(1)
    assert np.array_equal(np.asarray(inst.starts), c.agent_xy()[1])
    assert np.array_equal(np.asarray(inst.goals), c.goals_xy()[1])
    assert np.array_equal(np.asarray(inst.blocked), c.map_data(1).blocked) and inst.goal_order == "fixed"
    # a core built from it replays the same instance
    d = MGMAPFCore.from_instance(inst)
    d.reset(seed=0)
    assert np.array_equal(d.goals_xy()[0], c.goals_xy()[1]) and d.params.goal_order == "fixed"
