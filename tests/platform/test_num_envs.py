"""``make_scenario(id, num_envs=...)`` (every scenario) and ``SMACCore(num_envs=...)`` refuse a num_envs that is not an
integer >= 1 instead of truncating a float or reading a bool as 1."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.errors import ConfigError
from coopsim.platform import registry as reg
from coopsim.scenarios.smac import SMACCore

MSG = "num_envs must be an integer >= 1 (the number of envs stepped together); got "


@pytest.mark.parametrize("scenario_id", ["smac/3m-v0", "line/LineWalk-v0"])
@pytest.mark.parametrize("bad, shown", [(2.5, "2.5 (float)"), (2.0, "2.0 (float)"), (True, "True (bool)"),
                                        (False, "False (bool)"), ("2", "'2' (str)"), (None, "None (NoneType)"),
                                        (np.float64(3.0), "np.float64(3.0) (float64)"), (0, "0"), (-2, "-2")])
def test_make_scenario_refuses(scenario_id, bad, shown):
    with pytest.raises(ConfigError) as exc:
        reg.make_scenario(scenario_id, num_envs=bad)
    assert str(exc.value) == MSG + shown
    assert isinstance(exc.value, ValueError)


def test_smac_core_refuses_directly():
    with pytest.raises(ConfigError) as exc:
        SMACCore(num_envs=2.5)
    assert str(exc.value) == MSG + "2.5 (float)"
    with pytest.raises(ConfigError) as exc:
        SMACCore(num_envs=True)
    assert str(exc.value) == MSG + "True (bool)"


@pytest.mark.parametrize("good", [1, 3, np.int64(2), np.int32(4)])
def test_integers_accepted(good):
    core = reg.make_scenario("smac/3m-v0", num_envs=good)
    assert core.num_envs == int(good) and type(core.num_envs) is int
    assert core.reset(seed=0).shape[0] == int(good)
