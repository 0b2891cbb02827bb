"""Setting map_name on a smac/<map>-v0 id says how to choose the map instead (scenario.id) and lists the maps."""
from __future__ import annotations

import pytest

from coopsim.errors import ConfigError
from coopsim.platform import registry as reg
from coopsim.scenarios.smac.maps import MAPS, PROCEDURAL_IDS

MAPS_LISTED = ", ".join(sorted(list(MAPS) + list(PROCEDURAL_IDS)))


def test_unknown_map_lists_maps_and_says_use_the_id():
    with pytest.raises(ConfigError) as exc:
        reg.validate_params("scenario", "smac/3m-v0", {"map_name": "3mm"}, key_prefix="scenario.params.")
    assert str(exc.value) == ("key 'scenario.params.map_name': 'map_name' is fixed to '3m' by id 'smac/3m-v0'; "
                              "got '3mm'. Choose the map_name with scenario.id=smac/<map_name>-v0; map_names: "
                              + MAPS_LISTED)
    assert "3m, 3s5z" in str(exc.value) and "8m, 8m_vs_9m" in str(exc.value)


def test_registered_map_names_its_id():
    with pytest.raises(ConfigError) as exc:
        reg.validate_params("scenario", "smac/3m-v0", {"map_name": "8m"}, key_prefix="scenario.params.")
    assert str(exc.value) == ("key 'scenario.params.map_name': 'map_name' is fixed to '3m' by id 'smac/3m-v0'; "
                              "got '8m'. To use map_name='8m', choose its id: scenario.id=smac/8m-v0")


def test_python_api_wording():
    with pytest.raises(ConfigError) as exc:
        reg.make_scenario("smac/3m-v0", map_name="2s3z")
    assert str(exc.value) == ("key 'map_name': 'map_name' is fixed to '3m' by id 'smac/3m-v0'; got '2s3z'. "
                              "To use map_name='2s3z', choose its id: id smac/2s3z-v0")
