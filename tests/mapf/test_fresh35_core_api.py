"""fresh35 F6/F7: MGMAPFCore's Python API refuses bad input as clearly as the registry does (from_instance params,
the instance's map in errors, env indices, a step after a partial first reset)."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.errors import ConfigError
from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mapf.instance import MAPFInstance

BLOCKED = np.zeros((3, 4), bool)
INST = MAPFInstance(blocked=BLOCKED, starts=np.array([[0, 0], [1, 0]]), goals=np.array([[[3, 2]], [[2, 2]]]),
                    goal_order="free", map_name="tiny")


@pytest.mark.parametrize("params, text", [
    ({"max_steps": 0}, "key 'max_steps': invalid value 0: Input should be greater than or equal to 1"),
    ({"obs_radius": 99}, "key 'obs_radius': invalid value 99: Input should be less than or equal to 32"),
    ({"conflicts": "nope"}, "key 'conflicts': invalid value 'nope': Input should be 'block' or 'allow'"),
    ({"max_steps": "3"}, "key 'max_steps': invalid value '3': an integer is required, not a string"),
])
def test_from_instance_checks_params_as_the_constructor_does(params, text):
    # used to raise pydantic's ValidationError ("1 validation error for MGMAPFParams ... errors.pydantic.dev")
    with pytest.raises(ConfigError) as info:
        MGMAPFCore.from_instance(INST, **params)
    assert str(info.value).startswith(text), str(info.value)
    assert info.value.key == next(iter(params))
    with pytest.raises(ConfigError) as ctor:
        MGMAPFCore(**params)
    assert str(ctor.value) == str(info.value)


def test_from_instance_names_values_taken_from_the_instance():
    anyorder = MAPFInstance(blocked=BLOCKED, starts=np.array([[0, 0]]), goals=np.array([[[3, 2]]]), goal_order="any",
                            map_name="tiny")
    with pytest.raises(ConfigError) as info:
        MGMAPFCore.from_instance(anyorder)
    assert info.value.key == "goal_order"
    assert str(info.value).endswith("; the value comes from the instance ('tiny'): its goal_order is 'any'")
    MGMAPFCore.from_instance(anyorder, goal_order="fixed")  # the passed param wins over the instance's
    empty = MAPFInstance(blocked=BLOCKED, starts=np.zeros((0, 2), int), goals=np.zeros((0, 1, 2), int),
                         goal_order="free", map_name="tiny")
    with pytest.raises(ConfigError) as info:
        MGMAPFCore.from_instance(empty)
    assert info.value.key == "num_agents"
    assert str(info.value).startswith("key 'num_agents': invalid value 0: Input should be greater than or equal to 1")
    assert str(info.value).endswith("the value comes from the instance ('tiny'): its starts have shape (0, 2)")


def test_from_instance_errors_name_the_instance_map():
    core = MGMAPFCore.from_instance(INST, num_envs=2)
    core.reset(seed=0)
    with pytest.raises(ValueError) as info:
        core.step(np.zeros((2, 2)))
    # used to name the default map: "MGMAPFCore (map 'random-32-32-10')"
    assert str(info.value).startswith("MGMAPFCore.from_instance (map 'tiny'): actions must be integers")
    plain = MGMAPFCore(num_agents=2, num_goals=1)
    plain.reset(seed=0)
    with pytest.raises(ValueError, match=r"^MGMAPFCore \(map 'random-32-32-10'\): actions must be integers"):
        plain.step(np.zeros((1, 2)))


def test_env_index_out_of_range_names_the_valid_range():
    core = MGMAPFCore(num_envs=2, num_agents=4, num_goals=1)
    core.reset(seed=0)
    # used to be a bare "IndexError: index 5 is out of bounds"; instance(-1) returned env 1's instance
    with pytest.raises(IndexError, match=r"^replay\(\): env_index 5 is out of range: this core has 2 envs, valid 0\.\.1$"):
        core.replay(5)
    with pytest.raises(IndexError, match=r"^instance\(\): env_index -1 is out of range: this core has 2 envs, valid 0\.\.1$"):
        core.instance(-1)
    for call, name in ((core.lower_bound, "lower_bound"), (core.map_data, "map_data"), (core.scen_file, "scen_file"),
                       (core.render, "render")):
        with pytest.raises(IndexError, match=rf"^{name}\(\): env_index 2 is out of range"):
            call(2)
    with pytest.raises(ValueError, match=r"^replay\(\): env_index must be an integer in 0\.\.1; got True$"):
        core.replay(True)
    assert core.replay(np.int64(1))["positions"].shape == (1, 4, 2)
    with pytest.raises(IndexError, match=r"this core has 1 env, valid 0\.\.0$"):
        MGMAPFCore(num_agents=4, num_goals=1).instance(1)


def test_step_after_a_partial_first_reset_names_the_env():
    core = MGMAPFCore(num_envs=2, num_agents=4, num_goals=1)
    core.reset(seed=0, env_ids=[1])
    # used to step: env 0 then reported agent_xy (-5, -5), off the map, and soc 1024
    with pytest.raises(RuntimeError) as info:
        core.step(np.zeros((2, 4), np.int64))
    assert str(info.value) == ("step(): env 0 has not been reset (the resets so far covered only env_ids [1] of 2 envs), "
                               "so it has no instance to step; call reset() for every env, or reset(env_ids=[0]) first")
    with pytest.raises(RuntimeError, match=r"^instance\(\): env 0 has not been reset yet"):
        core.instance(0)
    with pytest.raises(RuntimeError, match=r"^replay\(\) needs reset\(\) first$"):
        MGMAPFCore(num_agents=4, num_goals=1).replay(0)
    core.reset(seed=0, env_ids=[0])
    assert core.step(np.zeros((2, 4), np.int64)).reward.shape == (2, 4)
    assert (core.agent_xy() >= 0).all()
