"""The PettingZoo view (``ScenarioEnv.step``, shared by every scenario) refuses actions the core would truncate,
misread or reject later: each agent in ``env.agents`` needs one integer action in the Discrete space's range."""
from __future__ import annotations

import re

import numpy as np
import pytest

from coopsim.platform import registry as reg


@pytest.fixture
def env():
    e = reg.make("smac/3m-v0")
    e.reset(seed=0)
    return e


@pytest.mark.parametrize("bad, shown", [
    (1.7, "1.7 (float)"),
    (1.0, "1.0 (float)"),
    (np.float32(2.0), "np.float32(2.0) (float32)"),
    (np.array([1, 2]), "array([1, 2]) (ndarray of shape (2,))"),
    (np.array(1.0), "array(1.) (ndarray of shape ())"),
    ("attack", "'attack' (str)"),
    (None, "None (NoneType)"),
    (True, "True (bool)"),
    (np.bool_(False), "np.False_ (bool)"),
])
def test_non_integer_action_names_agent_value_and_range(env, bad, shown):
    acts = {a: 1 for a in env.agents}
    acts["ally_1"] = bad
    with pytest.raises(ValueError) as exc:
        env.step(acts)
    assert str(exc.value) == f"action of agent 'ally_1' must be one integer in 0..8; got {shown}"


@pytest.mark.parametrize("bad", [9, -1, np.int64(100)])
def test_out_of_range_action(env, bad):
    with pytest.raises(ValueError) as exc:
        env.step({"ally_0": bad, "ally_1": 1, "ally_2": 1})
    assert str(exc.value) == f"action of agent 'ally_0' out of range: got {int(bad)}; valid: 0..8"


def test_missing_living_agent(env):
    with pytest.raises(ValueError) as exc:
        env.step({"ally_0": 1, "ally_2": 1})
    assert str(exc.value) == ("no action for agent 'ally_1': step() needs an action for every agent in env.agents "
                              "(each an integer in 0..8); agents that have left env.agents need none")
    with pytest.raises(ValueError, match=re.escape("no action for agents 'ally_0', 'ally_1', 'ally_2': ")):
        env.step({})


def test_not_a_dict(env):
    with pytest.raises(TypeError) as exc:
        env.step([1, 1, 1])
    assert str(exc.value) == ("actions must be a dict {agent: action} with one entry per agent in env.agents; "
                              "got list [1, 1, 1]")


def test_refused_step_changes_nothing(env):
    ref = reg.make("smac/3m-v0")
    ref.reset(seed=0)
    with pytest.raises(ValueError):
        env.step({"ally_0": 4, "ally_1": 4, "ally_2": 4.5})
    a = env.step({a: 4 for a in env.agents})
    b = ref.step({a: 4 for a in ref.agents})
    for x, y in zip(a[0].values(), b[0].values()):
        np.testing.assert_array_equal(x, y)
    assert a[1:4] == b[1:4]


@pytest.mark.parametrize("good", [1, np.int64(1), np.int32(1), np.uint8(1), np.array(1)])
def test_integer_actions_accepted(env, good):
    obs, rew, term, trunc, info = env.step({a: good for a in env.agents})
    assert set(obs) == {"ally_0", "ally_1", "ally_2"}


def test_dead_agents_need_no_action_and_theirs_are_ignored():
    """SMAC: an agent whose unit died leaves env.agents; the next steps need (and read) no action for it."""
    env = reg.make("smac/3m-v0")
    env.reset(seed=0)
    core = env.core
    core._health[0, 0] = 0.0  # kill ally_0 between steps
    core._unit_alive[0, 0] = False
    core._masks = None
    env.step({a: 1 for a in env.agents})
    assert "ally_0" not in env.agents
    env.step({a: 1 for a in env.agents})  # no entry for ally_0
    env.step({**{a: 1 for a in env.agents}, "ally_0": "ignored"})


def test_other_scenarios_use_the_same_check():
    env = reg.make("line/LineWalk-v0", num_agents=2)
    env.reset(seed=0)
    with pytest.raises(ValueError) as exc:
        env.step({"agent_0": 0, "agent_1": 2.0})
    assert str(exc.value) == "action of agent 'agent_1' must be one integer in 0..2; got 2.0 (float)"
    with pytest.raises(ValueError) as exc:
        env.step({"agent_0": 0})
    assert str(exc.value) == ("no action for agent 'agent_1': step() needs an action for every agent in env.agents "
                              "(each an integer in 0..2); agents that have left env.agents need none")
    env.step({"agent_0": 0, "agent_1": 2})
