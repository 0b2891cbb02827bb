"""Exact solver vs brute force, SafeTable vs the per-state certificate, and the counting rule of the plausible sets."""
from __future__ import annotations

import math

import numpy as np
import pytest

from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.model import PlausibleModel, PriorViolation, removal_threshold
from coopsim.scenarios.coop_game import CoopGameCore
from coopsim.scenarios.coop_game.solver import SafeTable, joint_index, solve_scenario
from safety_helpers import expectimax_value

TINY = [
    dict(height=2, width=3, num_agents=2, constraints=["separation"], world_seed=1, max_steps=3),
    dict(height=2, width=3, num_agents=2, constraints=["separation", "resource", "connectivity"], world_seed=2,
         comm_range=1.5, max_steps=3, load_frac=0.4),
    dict(height=3, width=3, num_agents=2, constraints=["resource"], world_seed=3, max_steps=3, load_frac=0.5, cap=1.0),
    dict(height=2, width=2, num_agents=3, constraints=["separation", "connectivity"], world_seed=4, max_steps=2,
         comm_range=1.5, slippery_frac=1.0),
]


@pytest.mark.parametrize("params", TINY)
def test_exact_solver_agrees_with_brute_force_expectimax(params):
    sc = CoopGameCore(num_envs=1, slip=0.4, **{"slippery_frac": 0.7, **params})
    sol, _ = solve_scenario(sc)
    w = sc.world()
    v_dp = sol.value(sc.starts(), w.num_cells)
    v_bf = expectimax_value(w, sc.constraint_set, tuple(sc.targets().tolist()), sc.starts(), sc.params.max_steps)
    assert v_dp == pytest.approx(v_bf, abs=1e-12)
    assert 0.0 <= v_dp <= sc.params.max_steps
    # policy evaluation of the optimal policy reproduces its values; all-stay is worth no more
    from coopsim.scenarios.coop_game.solver import evaluate, team_reward

    R = team_reward(w, sc.targets())
    ok = sol.safe.any(1)  # states with no safe action (already unsafe, unreachable) are valued 0 by the solver
    assert np.allclose(evaluate(w.transition_matrix(), R, sol.policy)[:, ok], sol.values[:, ok], atol=1e-12)
    stay = evaluate(w.transition_matrix(), R, np.zeros_like(sol.policy))
    assert stay[0, joint_index(sc.starts(), w.num_cells)] <= v_dp + 1e-12


def test_optimal_policy_return_matches_its_value_and_never_violates():
    sc = CoopGameCore(num_envs=256, height=4, width=4, num_agents=2, constraints=["separation", "resource", "connectivity"],
                      max_steps=8, world_seed=0)
    sol, table = solve_scenario(sc)
    v_star = sol.value(sc.starts(), sc.world().num_cells)
    sc.reset(seed=3)
    ret = np.zeros(256)
    viol = 0.0
    for t in range(8):
        a = table.actions[sol.policy[t, joint_index(sc.cells(), sc.world().num_cells)]]
        res = sc.step(a)
        ret += res.reward[:, 0]
        viol += sum(float(v.sum()) for k, v in res.info.items() if k.startswith("cost/"))
    assert viol == 0.0
    # Monte Carlo mean within 4 standard errors of the DP value
    assert abs(ret.mean() - v_star) < 4 * ret.std() / np.sqrt(256) + 1e-9


def test_safe_table_equals_per_state_certificate():
    sc = CoopGameCore(num_envs=1, height=3, width=3, num_agents=2, constraints=["separation", "resource", "connectivity"],
                      comm_range=2.0, world_seed=5, load_frac=0.3)
    w = sc.world()
    table = SafeTable(w, sc.constraint_set, 2)
    rng = np.random.default_rng(0)
    support = (w.prior >= 0) & ((rng.random(w.prior.shape) < 0.7) | (np.arange(w.num_slots) == 0))
    safe = table.safe(support)
    sc.reset(seed=0)
    base = sc.constraints()
    from dataclasses import replace

    for s in rng.choice(len(table.states), 30, replace=False):
        cells = table.states[s]
        if cells[0] == cells[1]:
            continue
        st = replace(base, positions=w.coords[cells][None], cells=cells[None].copy(), loads=w.load[cells][None],
                     intended=w.coords[w.nbr[cells]][None],
                     outcomes=w.coords[np.where(w.prior[cells] >= 0, w.prior[cells], cells[:, None, None])][None],
                     outcome_loads=w.load[np.where(w.prior[cells] >= 0, w.prior[cells], cells[:, None, None])][None],
                     outcome_mask=(w.prior[cells] >= 0)[None], outcome_cells=w.prior[cells][None])
        cert = SafetyCertificate(st, support[cells])
        assert np.array_equal(cert.certified(table.actions), safe[s]), f"state {cells}"


def test_removal_threshold_arithmetic():
    # ceil(ln(400 / (0.01 / 360)) / 0.05) = ceil(16.4827... / 0.05) = ceil(329.65...) = 330
    assert removal_threshold(400, 0.01, 0.05, 360) == math.ceil(math.log(400 * 36000) / 0.05) == 330
    assert removal_threshold(10, 0.5, 1.0) == 3  # ceil(ln 20) = ceil(2.996)
    with pytest.raises(ValueError, match="delta"):
        removal_threshold(10, 1.5, 0.05)


def test_plausible_set_counting_rule():
    sc = CoopGameCore(num_envs=1, height=1, width=3, num_agents=2, constraints=["separation"], slip=0.0, world_seed=0,
                      start_spacing=2.0)
    sc.reset(seed=0)
    st = sc.constraints()
    model = PlausibleModel(3, 5, st.outcomes.shape[3], delta=0.5, p_min=1.0)  # n_remove = ceil(ln(45 / 0.5)) = 5
    assert model.n_remove == math.ceil(math.log(3 * 5 * st.outcomes.shape[3] / 0.5))
    acts = np.zeros((1, 2), np.int64)  # stay: one outcome, itself
    for k in range(model.n_remove):
        before = model.plausible(st)
        model.update(st, np.array([[3, 0]]), np.array([[st.cells[0, 0], st.cells[0, 1]]]))  # agent 0 bumps/moves left
    # agent 0's action 3 (left): its observed outcome stays, every unseen prior outcome is gone after n_remove tries
    p = model.plausible(st)[0, 0, 3]
    seen = st.outcome_cells[0, 0, 3] == st.cells[0, 0]
    assert p[seen].all() and not p[~seen & st.outcome_mask[0, 0, 3]].any()
    assert before[0, 0, 3][st.outcome_mask[0, 0, 3]].all()  # one try earlier everything was still plausible
    # an outcome outside the prior set means the declared radius is wrong
    far = np.array([[st.cells[0, 1], st.cells[0, 1]]])
    with pytest.raises(PriorViolation, match="outside the prior plausible set"):
        model.update(st, acts, far)
