"""MG-MAPF baseline agents and the prioritized planner: exact outcomes on hand-made and benchmark instances."""
from __future__ import annotations

import heapq
import itertools

import numpy as np
import pytest

from coopsim.agents.mapf_baselines import GreedyAgent, PrioritizedAgent, RandomMAPFAgent, plan_prioritized
from coopsim.agents.mapf_baselines.planner import path_actions
from coopsim.errors import ConfigError
from coopsim.platform.registry import make_component, make_scenario, validate_params
from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mapf.instance import ACTION_DELTAS, MAPFInstance
from coopsim.scenarios.mapf.metrics import bfs_distances, tour_lower_bound
from coopsim.scenarios.mapf.validate import assert_valid, validate_plan


def grid(picture: str) -> np.ndarray:
    rows = [r.strip() for r in picture.strip().splitlines() if r.strip()]
    return np.array([[c == "@" for c in r] for r in rows], dtype=bool)


def instance(blocked, starts, goals, order="free") -> MAPFInstance:
    goals = np.asarray(goals, dtype=np.int32)
    if goals.ndim == 2:
        goals = goals[:, None, :]
    return MAPFInstance(blocked=np.asarray(blocked, bool), starts=np.asarray(starts, np.int32).reshape(-1, 2),
                        goals=goals, goal_order=order)


def optimal_soc(blocked: np.ndarray, starts, goals) -> int:
    """Exact minimum SoC (one goal per agent, finish = first visit) by Dijkstra over joint states (tiny instances)."""
    h, w = blocked.shape
    n = len(starts)
    starts = tuple(tuple(map(int, s)) for s in starts)
    goals = tuple(tuple(map(int, g)) for g in goals)
    done0 = tuple(s == g for s, g in zip(starts, goals))
    heap = [(0, starts, done0)]
    seen = set()
    while heap:
        cost, cells, done = heapq.heappop(heap)
        if all(done):
            return cost
        if (cells, done) in seen:
            continue
        seen.add((cells, done))
        step_cost = sum(not d for d in done)
        for acts in itertools.product(range(5), repeat=n):
            nxt = []
            for (x, y), a in zip(cells, acts):
                nx, ny = x + int(ACTION_DELTAS[a][0]), y + int(ACTION_DELTAS[a][1])
                if not (0 <= nx < w and 0 <= ny < h) or blocked[ny, nx]:
                    break
                nxt.append((nx, ny))
            else:
                if len(set(nxt)) < n:
                    continue
                if any(nxt[i] == cells[j] and nxt[j] == cells[i] for i in range(n) for j in range(i + 1, n)):
                    continue
                nd = tuple(d or c == g for d, c, g in zip(done, nxt, goals))
                heapq.heappush(heap, (cost + step_cost, tuple(nxt), nd))
    raise AssertionError("unsolvable")


# ----------------------------------------------------------------------------------------------- prioritized planner
ALCOVE_NEAR = """
@@@.@
.....
"""


def test_corridor_with_alcove_prioritized_is_optimal():
    """Two agents cross in a corridor; the second steps into the alcove next to its start while the first passes.
    Optimal SoC = 4 (straight) + 7 (two extra moves into and out of the alcove, one wait) = 11."""
    b = grid(ALCOVE_NEAR)
    starts, goals = [(0, 1), (4, 1)], [(4, 1), (0, 1)]
    assert optimal_soc(b, starts, goals) == 11
    r = plan_prioritized(b, starts, goals, "free", horizon=32)
    assert not r.failed.any() and r.soc == 11 and r.makespan == 7
    assert r.finish_step.tolist() == [4, 7]
    rep = assert_valid(instance(b, starts, goals), r.paths, require_complete=True)
    assert rep.soc == 11 and rep.finish_step.tolist() == [4, 7]
    assert r.paths[7, 1].tolist() == [0, 1] and r.paths[4, 0].tolist() == [4, 1]


def test_following_is_used_and_costs_nothing_extra():
    b = grid(".....")
    r = plan_prioritized(b, [(1, 0), (0, 0)], [(2, 0), (1, 0)], "free", horizon=8)
    assert r.finish_step.tolist() == [1, 1] and r.soc == optimal_soc(b, [(1, 0), (0, 0)], [(2, 0), (1, 0)]) == 2
    assert validate_plan(instance(b, [(1, 0), (0, 0)], [(2, 0), (1, 0)]), r.paths).ok


def test_reservations_force_exact_waits_and_no_swaps():
    """Head-on in a 2-wide corridor: the lower agent sidesteps; plans are swap-free and exactly optimal."""
    b = grid("""
    ......
    ......
    """)
    starts, goals = [(0, 0), (5, 0)], [(5, 0), (0, 0)]
    r = plan_prioritized(b, starts, goals, "free", horizon=32)
    assert validate_plan(instance(b, starts, goals), r.paths).ok
    assert r.soc == optimal_soc(b, starts, goals) == 12  # 5 + 5, plus 2 for the sidestep (down and back up)


def test_prioritized_planning_failure_is_conflict_free():
    """The alcove in the middle is out of reach for whoever plans second: prioritized planning is incomplete here.
    Both orders fail for the lower agent; the fallback keeps the plan conflict-free and reports the failure."""
    b = grid("""
    @@.@@
    .....
    """)
    starts, goals = [(0, 1), (4, 1)], [(4, 1), (0, 1)]
    assert optimal_soc(b, starts, goals) == 11   # solvable by a complete planner
    r = plan_prioritized(b, starts, goals, "free", horizon=32, restarts=3)
    assert r.failed.any() and r.attempts >= 4
    rep = validate_plan(instance(b, starts, goals), r.paths)
    assert rep.ok and not rep.complete
    assert (rep.finish_step >= 0).tolist() == (~r.failed).tolist()


def test_single_agent_costs_equal_tour_lengths():
    """Alone on a map, an agent's planned cost is its shortest tour: exactly the fixed-order walk (the LB), and for
    free order between the exact free-order LB and the nearest-neighbour tour it follows (BFS distances by scipy)."""
    core = MGMAPFCore(num_envs=1, map="random-32-32-10", num_agents=8, num_goals=4, goal_order="fixed")
    core.reset(seed=1)
    inst = core.instance(0)
    lb_fixed = tour_lower_bound(inst.blocked, inst.starts, inst.goals, "fixed")
    lb_free = tour_lower_bound(inst.blocked, inst.starts, inst.goals, "free")
    for i in range(8):
        r = plan_prioritized(inst.blocked, inst.starts[i:i + 1], inst.goals[i:i + 1], "fixed", horizon=512)
        assert r.finish_step[0] == lb_fixed[i]
        pts = np.concatenate([inst.starts[i:i + 1], inst.goals[i]])
        d = bfs_distances(inst.blocked, pts)[:, pts[:, 1], pts[:, 0]]
        cur, left, nn = 0, {1, 2, 3, 4}, 0
        while left:
            nxt = min(left, key=lambda j: (d[cur, j], j))
            nn += d[cur, nxt]
            left.remove(nxt)
            cur = nxt
        rf = plan_prioritized(inst.blocked, inst.starts[i:i + 1], inst.goals[i:i + 1], "free", horizon=512)
        assert lb_free[i] <= rf.finish_step[0] <= nn
        assert rf.paths[int(nn), 0].tolist() == inst.goals[i, rf.goal_sequence[0, -1]].tolist()  # tour ends at step nn


def test_path_actions_replay_paths():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, size=(20, 6))
    p = np.zeros((21, 6, 2), dtype=np.int64)
    p[1:] = np.cumsum(ACTION_DELTAS[a], axis=0)
    assert (path_actions(p) == a).all()
    p[5, 2] += 2
    with pytest.raises(ValueError, match="agent 2 moves from .* at step 5: not a unit move"):
        path_actions(p)


def _run(core, agent, seed=0):
    obs = core.reset(seed=seed)
    agent.reset(seed)
    traj = [core.agent_xy()]
    while not core.done.all():
        obs = core.step(agent.act(obs)[0]).obs
        traj.append(core.agent_xy())
    return np.stack(traj), core.episode_metrics()


@pytest.mark.parametrize("conflicts", ["allow", "block"])
def test_prioritized_agent_executes_its_plans_without_collisions(conflicts):
    """The main job's setting (64 agents, 3 goals, free order, random-32-32-10), two envs with different instances:
    the executed trajectories equal the plans, with zero collisions (allow) / zero blocked moves (block)."""
    core = make_scenario("mapf/MGMAPF-v0", num_envs=2, map="random-32-32-10", num_agents=64, num_goals=3,
                         conflicts=conflicts, max_steps=256)
    agent = make_component("agent", "mapf/prioritized-v0", core)
    traj, metrics = _run(core, agent, seed=3)
    for e in range(2):
        plan = agent.plans[e]
        assert not plan.failed.any()
        t = len(plan.paths)
        assert (traj[:t, e] == plan.paths).all() and (traj[t:, e] == plan.paths[-1]).all()
        m = metrics[e]
        assert m["collisions"] == 0 and m["blocked_moves"] == 0 and m["invalid_moves"] == 0
        assert m["success"] == 1.0 and m["soc"] == plan.soc and m["makespan"] == plan.makespan
        assert m["soc"] >= m["lb"]
    assert agent.plans[0].soc != agent.plans[1].soc  # two different instances
    stats = agent.episode_stats()
    assert stats["plan/failures"] == 0 and stats["plan/soc"] == np.mean([p.soc for p in agent.plans])


def test_prioritized_agent_shares_plans_and_warns_on_failure():
    b = grid("""
    @@.@@
    .....
    """)
    core = MGMAPFCore.from_instance(instance(b, [(0, 1), (4, 1)], [(4, 1), (0, 1)]), num_envs=3, conflicts="allow",
                                    max_steps=20)
    agent = PrioritizedAgent(core, restarts=1)
    with pytest.warns(RuntimeWarning, match=r"prioritized-v0: [12] of 2 agents have no complete plan within 20 steps"):
        _, metrics = _run(core, agent)
    assert agent.plans[0] is agent.plans[1] is agent.plans[2]
    assert all(m["collisions"] == 0 and m["success"] == 0.0 for m in metrics)


def test_prioritized_fixed_order_visits_in_sequence():
    core = make_scenario("mapf/MGMAPF-v0", num_envs=1, map="room-32-32-4", num_agents=30, num_goals=3,
                         goal_order="fixed", conflicts="allow", max_steps=400)
    agent = make_component("agent", "mapf/prioritized-v0", core)
    _, metrics = _run(core, agent, seed=2)
    rep = core.replay(0)
    reached = rep["goal_reached_at"]
    assert metrics[0]["success"] == 1.0 and metrics[0]["collisions"] == 0
    assert (np.diff(reached, axis=1) > 0).all()
    assert validate_plan(core.instance(0), agent.plans[0].paths).soc == metrics[0]["soc"]


# ----------------------------------------------------------------------------------------------------------- greedy
def greedy_reference(start, goals, order, steps):
    """Loop model of greedy on an empty map: target the nearest remaining goal by Manhattan distance (ties: lower
    index; fixed order: the next one), re-chosen every step; take the first of up, down, left, right that gets closer."""
    cur, visited, reached = np.array(start), [False] * len(goals), [-1] * len(goals)
    for t in range(1, steps + 1):
        left = [j for j in range(len(goals)) if not visited[j]]
        if not left:
            break
        j = left[0] if order == "fixed" else min(left, key=lambda j: (np.abs(goals[j] - cur).sum(), j))
        for a in (1, 2, 3, 4):
            nxt = cur + ACTION_DELTAS[a]
            if np.abs(goals[j] - nxt).sum() < np.abs(goals[j] - cur).sum():
                cur = nxt
                break
        for q in range(len(goals)):
            if not visited[q] and (goals[q] == cur).all() and (order == "free" or q == visited.index(False)):
                visited[q], reached[q] = True, t
    return reached


def test_greedy_agents_on_empty_map_exact():
    """Empty map, ``allow`` (nobody blocks anybody): with one goal each agent's cost is exactly its Manhattan
    distance; with three goals every first-visit step equals the loop model's, free and fixed order."""
    for k, order in ((1, "free"), (3, "free"), (3, "fixed")):
        core = make_scenario("mapf/MGMAPF-v0", num_envs=2, map="empty-32-32", num_agents=24, num_goals=k,
                             goal_order=order, conflicts="allow", max_steps=300)
        agent = make_component("agent", "mapf/greedy-v0", core)
        _, metrics = _run(core, agent, seed=5)
        for e in range(2):
            inst = core.instance(e)
            reached = core.replay(e)["goal_reached_at"]
            if k == 1:
                assert reached[:, 0].tolist() == np.abs(inst.goals[:, 0] - inst.starts).sum(-1).tolist()
            expect = [greedy_reference(s, g, order, 300) for s, g in zip(inst.starts.astype(int), inst.goals.astype(int))]
            assert reached.tolist() == expect
            assert metrics[e]["soc"] == reached.max(1).sum() and metrics[e]["success"] == 1.0


def test_greedy_follows_bfs_shortest_paths_around_obstacles():
    b = grid("""
    .@...
    .@.@.
    .@.@.
    ...@.
    """)
    core = MGMAPFCore.from_instance(instance(b, [(0, 0)], [(4, 3)]), num_envs=1, max_steps=30)
    agent = GreedyAgent(core)
    traj, metrics = _run(core, agent)
    assert metrics[0]["soc"] == 13  # down 3, right 1, up 3, right 2, down 3... = BFS distance
    assert int(bfs_distances(b, np.array([[0, 0]]))[0, 3, 4]) == 13
    assert (np.abs(np.diff(traj[:, 0], axis=0)).sum(-1) == 1).all()  # a move every step, never a wait


# ----------------------------------------------------------------------------------------------------------- random
def test_random_agent_is_seeded_and_batch_invariant():
    def actions(num_envs, seed, steps=30, **params):
        core = make_scenario("mapf/MGMAPF-v0", num_envs=num_envs, map="empty-32-32", num_agents=16, num_goals=1)
        agent = RandomMAPFAgent(core, **params)
        core.reset(seed=0)
        agent.reset(seed)
        return np.stack([agent.act(None)[0] for _ in range(steps)])

    a = actions(3, 7)
    assert a.shape == (30, 3, 16) and a.dtype == np.int64 and set(np.unique(a)) == {0, 1, 2, 3, 4}
    assert (a == actions(3, 7)).all()                       # same seed, same actions
    assert (a[:, :1] == actions(1, 7)).all()                # env 0 of a batch = a single env
    assert (a[:, 2] != a[:, 1]).any() and (a != actions(3, 8)).any()
    assert (actions(2, 7, p_wait=1.0) == 0).all() and (actions(2, 7, p_wait=0.0) != 0).all()


# ----------------------------------------------------------------------------------------------- registry and errors
def test_registry_ids_params_and_errors():
    for aid in ("mapf/random-v0", "mapf/greedy-v0", "mapf/prioritized-v0"):
        validate_params("agent", aid, {})
    with pytest.raises(ConfigError, match=r"key 'restarts'.*greater than or equal to 0"):
        validate_params("agent", "mapf/prioritized-v0", {"restarts": -1})
    with pytest.raises(ConfigError, match=r"unknown parameter 'horizon'.*horizon_steps"):
        validate_params("agent", "mapf/prioritized-v0", {"horizon": 5})

    class NotMAPF:
        num_envs, num_agents = 1, 2

    with pytest.raises(ConfigError, match=r"'mapf/greedy-v0' needs an MG-MAPF scenario .* NotMAPF lacks instance"):
        GreedyAgent(NotMAPF())
    with pytest.raises(ValueError, match="two agents share a start cell"):
        plan_prioritized(grid("..."), [(0, 0), (0, 0)], [(1, 0), (2, 0)])
