"""CS-PIBT, IMMP's low-level decision rule: the policy's action distribution as the preference order of PIBT."""
from types import SimpleNamespace

import numpy as np
import pytest

from coopsim.agents.immp.agent import SHIPPED_BASELINE, SHIPPED_CHECKPOINT
from coopsim.agents.pibt import PIBTPriorities, pibt_actions, preference_order
from coopsim.agents.immp.highlevel import neighbour_table
from coopsim.platform import registry
from coopsim.scenarios.mapf import MGMAPFCore

WAIT, UP, DOWN, LEFT, RIGHT = range(5)


def _corridor():
    """Row 0 is a corridor of 5 cells; row 1 has one free pocket under x = 2 (W = 5, H = 2)."""
    blocked = np.ones((2, 5), bool)
    blocked[0, :] = False
    blocked[1, 2] = False
    hw = 10
    nbr = np.concatenate([neighbour_table(blocked), np.full((1, 5), hw)])
    return blocked, nbr, hw


def _keys_from_probs(probs):
    """Preference keys as IMMP builds them in 'sorted' mode: minus the log-probabilities."""
    return -np.log(np.asarray(probs, float))


def test_preference_order_sorts_by_key_and_puts_blocked_last():
    _, nbr, hw = _corridor()
    cand = nbr[np.array([2])]                              # cell (2, 0): wait 2, up blocked, down 7, left 1, right 3
    assert cand.tolist() == [[2, hw, 7, 1, 3]]
    key = np.array([[0.3, -5.0, 0.1, 0.2, 0.0]])           # the blocked move has the best key: still goes last
    assert preference_order(cand, key, hw).tolist() == [[3, 7, 1, 2, hw]]


def test_head_on_conflict_is_resolved_by_priority_inheritance_with_the_policy_order():
    _, nbr, hw = _corridor()
    cur = np.array([1, 2])                                   # agent 0 at x=1 heading right, agent 1 at x=2 heading left
    # agent 0: right 0.7 > wait 0.2 > ...; agent 1: left 0.6 > wait 0.3 > down (pocket) 0.05 > right 0.04
    p0 = [0.2, 0.02, 0.02, 0.06, 0.7]
    p1 = [0.3, 0.01, 0.05, 0.6, 0.04]
    key = _keys_from_probs([p0, p1])
    # agent 0 has the higher priority: it takes x=2; agent 1 inherits, may not swap into x=1, cannot stay
    # (its cell is reserved by agent 0), so it takes its next-preferred free move: the pocket (down)
    acts = pibt_actions(cur, nbr, key, np.array([2.0, 1.0]), 5, hw)
    assert acts.tolist() == [RIGHT, DOWN]
    # the same conflict with agent 1 preferring to back off to the right over the pocket: it backs off
    p1b = [0.3, 0.01, 0.04, 0.6, 0.05]
    acts = pibt_actions(cur, nbr, _keys_from_probs([p0, p1b]), np.array([2.0, 1.0]), 5, hw)
    assert acts.tolist() == [RIGHT, RIGHT]
    # priorities reversed: agent 1 wins the cell x=1, agent 0 inherits and backs off to x=0
    acts = pibt_actions(cur, nbr, key, np.array([1.0, 2.0]), 5, hw)
    assert acts.tolist() == [LEFT, LEFT]


def test_swap_into_a_dead_end_backtracks_to_waits():
    blocked = np.ones((1, 3), bool)
    blocked[0, :2] = False                                   # two free cells: no way to pass
    hw = 3
    nbr = np.concatenate([neighbour_table(blocked), np.full((1, 5), hw)])
    cur = np.array([0, 1])
    key = _keys_from_probs([[0.1, 0.1, 0.1, 0.1, 0.6], [0.1, 0.1, 0.1, 0.6, 0.1]])   # they want to swap
    # agent 0 (higher) pushes agent 1, which has no free cell but agent 0's: agent 0 backtracks, both wait
    assert pibt_actions(cur, nbr, key, np.array([2.0, 1.0]), 3, hw).tolist() == [WAIT, WAIT]


def test_pibt_priorities_grow_and_reset_on_goal_visits():
    pr = PIBTPriorities(1, 2)
    vis = np.zeros((1, 2, 2), bool)
    np.testing.assert_allclose(pr.update(np.array([0]), vis), [[1.0, 1.5]])   # tie-break i/N, +1 for the step
    np.testing.assert_allclose(pr.update(np.array([1]), vis), [[2.0, 2.5]])
    vis[0, 1, 0] = True
    np.testing.assert_allclose(pr.update(np.array([2]), vis), [[3.0, 0.5]])   # agent 1 visited a goal
    vis[0, 0, :] = True
    np.testing.assert_allclose(pr.update(np.array([3]), vis), [[0.0, 1.5]])   # agent 0 finished: bottom


def _core(mp="random-32-32-10", n=48, k=3, conflicts="allow", max_steps=160):
    return MGMAPFCore(1, map=mp, num_agents=n, num_goals=k, max_steps=max_steps, conflicts=conflicts,
                      goal_order="free", obs_radius=3)


def test_distance_preferences_reproduce_plain_pibt_exactly():
    """IMMP's CS-PIBT path (its own priorities, PIBT's resolution) fed PIBT's distance keys makes PIBT's moves."""
    core = _core(n=40, max_steps=120)
    obs = core.reset(seed=3)
    pibt = registry.make_component("agent", "mapf/pibt-v0", core)
    pibt.reset(3)
    immp = registry.make_component("agent", "mapf/immp-v0", core, hidden=[16],
                                   highlevel={"ordering": "nearest", "order_weight": 0.0, "path_weight": 0.0, "rounds": 0})
    immp.reset(3)
    recorded = []
    orig = pibt.preference_keys
    pibt.preference_keys = lambda env, cur: recorded.append(orig(env, cur)) or recorded[-1]
    steps = 0
    while not core.done.all():
        a, _ = pibt.act(obs)
        immp._sync()
        b = immp.resolve(recorded[-1][None])
        np.testing.assert_array_equal(a, b)
        obs = core.step(a).obs
        steps += 1
    assert steps > 40 and core.episode_metrics()[0]["success"] == 1.0


def _positions_and_check(agent, core, seed):
    obs = core.reset(seed=seed)
    agent.reset(seed)
    prev = core.agent_xy()[0].astype(np.int64).copy()
    w = 1000
    while not core.done.all():
        a, _ = agent.act(obs)
        obs = core.step(a).obs
        xy = core.agent_xy()[0].astype(np.int64)
        c0, c1 = prev[:, 1] * w + prev[:, 0], xy[:, 1] * w + xy[:, 0]
        assert len(np.unique(c1)) == len(c1), "vertex conflict"
        moved = c0 != c1
        pos = {c: i for i, c in enumerate(c0.tolist())}
        for i in np.flatnonzero(moved):
            j = pos.get(int(c1[i]))
            assert j is None or c1[j] != c0[i], "swap (edge) conflict"
        prev = xy.copy()
    return core.episode_metrics()[0]


@pytest.mark.skipif(not SHIPPED_CHECKPOINT.is_file(), reason="no shipped checkpoint")
@pytest.mark.parametrize("order", ["adaptive", "sorted", "sampled"])
def test_shipped_policy_with_cs_pibt_has_no_conflict_in_any_step(order):
    core = _core(n=64)
    agent = registry.make_component("agent", "mapf/immp-v0", core, checkpoint="shipped", cs_order=order)
    m = _positions_and_check(agent, core, seed=1)
    assert m["collisions"] == 0.0
    assert m["goal_fraction"] > 0.9


@pytest.mark.skipif(not SHIPPED_BASELINE.is_file(), reason="no shipped checkpoint")
def test_dppo_keeps_its_own_rule_and_gets_cs_pibt_on_request():
    core = _core(n=64, max_steps=96)
    plain = registry.make_component("agent", "mapf/dppo-v0", core, checkpoint="shipped", deterministic=False)
    assert plain.params.cs_pibt is False                      # the baseline is unchanged by default
    obs = core.reset(seed=1)
    plain.reset(1)
    while not core.done.all():
        a, _ = plain.act(obs)
        obs = core.step(a).obs
    assert core.episode_metrics()[0]["collisions"] > 0       # its own choices collide under `allow`
    cs = registry.make_component("agent", "mapf/dppo-v0", core, checkpoint="shipped", cs_pibt=True)
    assert _positions_and_check(cs, core, seed=1)["collisions"] == 0.0


@pytest.mark.skipif(not SHIPPED_CHECKPOINT.is_file(), reason="no shipped checkpoint")
def test_sampled_order_first_choice_is_the_policys_own_sample_when_nothing_conflicts():
    """A lone agent: nothing to resolve, so CS-PIBT with a sampled order acts exactly as the plain sampled policy."""
    inst = SimpleNamespace(blocked=np.zeros((8, 8), bool), starts=np.array([[0, 0]]), goals=np.array([[[7, 7], [0, 7]]]))
    core = MGMAPFCore.from_instance(inst, conflicts="block", obs_radius=3, max_steps=40, goal_order="free")
    cs = registry.make_component("agent", "mapf/immp-v0", core, checkpoint="shipped", cs_order="sampled",
                                 cs_temperature=1.0, seed=5)
    plain = registry.make_component("agent", "mapf/immp-v0", core, checkpoint="shipped", cs_pibt=False,
                                    deterministic=False, seed=5)
    runs = []
    for ag in (cs, plain):
        obs = core.reset(seed=0)
        ag.reset(5)
        acts = []
        while not core.done.all():
            a, _ = ag.act(obs)
            acts.append(int(a[0, 0]))
            obs = core.step(a).obs
        runs.append(acts)
    assert runs[0] == runs[1]


def test_adaptive_order_samples_only_stalled_agents():
    inst = SimpleNamespace(blocked=np.zeros((1, 6), bool), starts=np.array([[0, 0], [5, 0]]),
                           goals=np.array([[[2, 0]], [[3, 0]]]))
    core = MGMAPFCore.from_instance(inst, conflicts="block", obs_radius=2, max_steps=40, goal_order="free")
    ag = registry.make_component("agent", "mapf/immp-v0", core, hidden=[8], cs_patience=2)
    core.reset(seed=0)
    ag.reset(0)
    ag._sync()
    assert ag._stalled().tolist() == [[False, False]]          # t = 0: counters start
    # agent 0 waits (no progress), agent 1 moves left (progress) for three steps
    for step in range(3):
        core.step(np.array([[WAIT, LEFT if step < 2 else WAIT]]))
        ag._sync()
        st = ag._stalled()
    # agent 0: 3 steps without a new best cost-to-go >= patience 2; agent 1 finished its goal -> sorted (default)
    assert st.tolist() == [[True, False]]
    assert core.goals_visited()[0, 1].all()
