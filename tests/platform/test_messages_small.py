"""Small message fixes: a component without parameters says so; the internal pydantic class name is not shown."""
import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import validate_config

SC = {"id": "line/LineWalk-v0"}


def test_component_without_params_says_it_takes_none():
    with pytest.raises(ConfigError, match=r"key 'agents\.params\.bogus': unknown parameter 'bogus' \(value 1\); "
                                          r"'random-v0' takes no parameters") as e:
        validate_config({"name": "x", "scenario": SC, "agents": {"id": "random-v0", "params": {"bogus": 1}}})
    assert "valid parameters: " not in str(e.value)


@pytest.mark.parametrize("data, needle", [
    ({"name": "x", "scenario": 3, "agents": {"id": "random-v0"}}, "key 'scenario': invalid value 3: must be a mapping {id: ..., params: {...}}"),
    ({"name": "x", "scenario": SC, "agents": "random-v0"}, "key 'agents': invalid value 'random-v0': must be a mapping {id: ..., params: {...}}, e.g. {id: random-v0}"),
])
def test_no_internal_class_name(data, needle):
    with pytest.raises(ConfigError) as e:
        validate_config(data)
    assert needle in str(e.value) and "ComponentConfig" not in str(e.value)
