"""Graph-safe RL's directed expansion, replanning rule, shared confidence sets, and the regret metric.

Values are checked against the exact solver: with resolved counts (empirical model = true model,
plausible sets = true support) the learner's plan *is* the optimal safe policy; with one unresolved
action on the optimal path that action, and only it, gets the goal-directed expansion bonus.
"""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.agents.graph_safe import GraphSafeAgent
from coopsim.scenarios.coop_game import CoopGameCore
from coopsim.scenarios.coop_game.solver import evaluate, joint_index, solve_scenario, team_reward

PARAMS = dict(height=4, width=4, num_agents=2, constraints=["separation", "resource", "connectivity"], max_steps=8)


def _resolved_agent(**kw):
    """An agent whose counts are those of 1000 tries of every action, with exactly the true frequencies."""
    sc = CoopGameCore(num_envs=1, **PARAMS)
    sc.reset(seed=0)
    ag = GraphSafeAgent(sc, num_runs=360, p_min=0.1, bonus=0.0, **kw)
    w = sc.world()
    ag.model.tries[:] = 1000
    ag.model.seen[:] = np.rint(w.true_prob * 1000).astype(np.int64)
    return sc, ag, w


def test_resolved_counts_give_the_exact_optimal_safe_policy():
    sc, ag, w = _resolved_agent()
    ag.plan()
    assert not ag.expanding.any() and not ag.goal_expanding.any()
    sol, tab = solve_scenario(sc)
    assert (ag._allowed == sol.safe).all()  # certified set = truly safe set
    s0 = joint_index(sc.starts(), w.num_cells)
    value = evaluate(w.transition_matrix(), team_reward(w, sc.targets()), ag._plan.policy)[0, s0]
    assert value == pytest.approx(sol.values[0, s0], abs=1e-9)


def test_unresolved_action_on_the_optimal_path_gets_the_goal_bonus_alone():
    sc, ag, w = _resolved_agent()
    sol, tab = solve_scenario(sc)
    s0 = joint_index(sc.starts(), w.num_cells)
    b0 = sol.policy[0, s0]
    found = None
    for i in range(2):  # make one first action of the optimal plan uncertain until its joint action is uncertified
        cell, act = int(tab.states[s0, i]), int(tab.actions[b0, i])
        tries, seen = ag.model.tries.copy(), ag.model.seen.copy()
        ag.model.tries[cell, act] = 10
        ag.model.seen[cell, act] = 0
        ag.model.seen[cell, act, 0] = 10
        if not tab.safe(ag.plausible_support())[s0, b0]:
            found = (cell, act)
            break
        ag.model.tries[:], ag.model.seen[:] = tries, seen
    assert found is not None, "every first action of the optimal plan is certified under any counts: pick another instance"
    ag.plan()
    assert ag.goal_expanding[found] and ag.goal_expanding.sum() == 1
    assert ag.expanding[found] and (ag.expanding <= ag.can_shrink()).all()


def test_replan_rule_and_reach_conserve_probability():
    sc, ag, w = _resolved_agent()
    ag.plan()
    assert not ag.should_replan()
    ag.model.tries[0, 1] = 2000  # a count doubled (UCRL2 epoch rule)
    assert ag.should_replan()
    ag.plan()
    ag.model.seen[0, 1, 1] += 1  # a new observed outcome changes the optimistic feasible set
    assert ag.should_replan()
    reach = ag.reach(ag._plan.policy, np.array([joint_index(sc.starts(), w.num_cells)]), tol=0.0)
    assert reach.sum(1) == pytest.approx(np.ones(ag.H))


def test_shared_model_certifies_what_the_learner_certifies():
    from coopsim.agents.graph_safe.train import run_episode, _share
    from coopsim.safety.shields import CertificateShield

    sc = CoopGameCore(num_envs=1, **PARAMS)
    ag = GraphSafeAgent(sc, num_runs=360, p_min=0.1)
    shield = CertificateShield(num_runs=360, p_min=0.1)
    _share(shield, ag)
    assert shield.model is ag.model
    for ep in range(3):
        m = run_episode(sc, ag, shield, seed=ep)
        assert m["shield/interventions"] == 0 and m["violations"] == 0
    assert ag.model.tries.sum() == 3 * 8 * 2  # counted once (by the learner), every step including the last
    with pytest.raises(ValueError, match="PlausibleModel"):
        shield.share_model(object())


def test_episode_metrics_regret_against_the_exact_optimum():
    sc = CoopGameCore(num_envs=2, **PARAMS)
    sol, _ = solve_scenario(sc)
    sc.reset(seed=1)
    while not sc.done.all():
        sc.step(np.zeros((2, 2), np.int64))  # all-stay
    v_star = sol.value(sc.starts(), sc.world().num_cells)
    for m in sc.episode_metrics():
        assert m["optimal_return"] == pytest.approx(v_star)
        assert m["regret"] == pytest.approx(v_star - m["team_return"])
