"""Property test (hypothesis): prioritized plans are conflict-free on any small instance, solvable or not."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coopsim.agents.mapf_baselines import plan_prioritized
from coopsim.scenarios.mapf.instance import MAPFInstance
from coopsim.scenarios.mapf.validate import validate_plan


@st.composite
def instances(draw):
    h, w = draw(st.integers(1, 6)), draw(st.integers(2, 6))
    density = draw(st.sampled_from([0.0, 0.15, 0.3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    blocked = rng.random((h, w)) < density
    free = np.argwhere(~blocked)[:, ::-1]                      # (x, y)
    if len(free) < 1:
        blocked[0, 0] = False
        free = np.array([[0, 0]])
    n = draw(st.integers(1, max(1, min(6, len(free) - 1))))
    k = draw(st.integers(1, 3))
    starts = free[rng.choice(len(free), size=n, replace=False)]
    goals = free[rng.integers(0, len(free), size=(n, k))]       # any free cells, shared or unreachable ones included
    order = draw(st.sampled_from(["free", "fixed"]))
    horizon = draw(st.sampled_from([3, 12, 40]))
    return MAPFInstance(blocked=blocked, starts=starts.astype(np.int32), goals=goals.astype(np.int32), goal_order=order), horizon


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.integers(0, 3))
def test_prioritized_plans_never_conflict(case, restarts):
    inst, horizon = case
    r = plan_prioritized(inst.blocked, inst.starts, inst.goals, inst.goal_order, horizon=horizon, restarts=restarts,
                         seed=1, max_expansions=5000)
    rep = validate_plan(inst, r.paths)
    assert rep.ok, rep.violations
    # an agent is a plan failure exactly when its path does not visit all its goals
    assert ((rep.finish_step >= 0) == ~r.failed).all()
    assert (rep.finish_step == r.finish_step).all()
    # a finished agent never finishes after the horizon
    assert (r.finish_step <= horizon).all()
