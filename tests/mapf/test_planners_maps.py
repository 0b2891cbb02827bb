"""Done-criterion of issue 2: the prioritized planner's plans pass the validator on every shipped map at 100 agents."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.agents.mapf_baselines import plan_prioritized
from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mapf.loaders import shipped_maps
from coopsim.scenarios.mapf.validate import assert_valid

# goals per agent, chosen to keep the whole file at a few CPU seconds (maze-32-32-2 is the hardest by far)
GOALS = {"empty-32-32": 3, "random-32-32-10": 3, "random-64-64-10": 3, "room-32-32-4": 2,
         "warehouse-10-20-10-2-1": 2, "maze-32-32-2": 1}


def test_every_shipped_map_is_covered():
    assert sorted(GOALS) == shipped_maps()


@pytest.mark.parametrize("map_name", sorted(GOALS))
def test_prioritized_plans_are_valid_on_every_shipped_map(map_name):
    core = MGMAPFCore(num_envs=1, map=map_name, num_agents=100, num_goals=GOALS[map_name], goal_order="free",
                      max_steps=512)
    core.reset(seed=0)
    inst = core.instance(0)
    r = plan_prioritized(inst.blocked, inst.starts, inst.goals, inst.goal_order, horizon=512, seed=0)
    rep = assert_valid(inst, r.paths, require_complete=True)     # no conflict of any kind, every goal visited
    assert not r.failed.any()
    assert (rep.finish_step == r.finish_step).all() and rep.soc == r.soc and rep.makespan == r.makespan
    lb = core.lower_bound(0)
    assert lb <= rep.soc < 2 * lb                                 # never below the tour bound
    # every agent ends on a cell of its own (finished agents keep distinct cells)
    assert len(np.unique(r.paths[-1], axis=0)) == 100
