"""Booleans are refused for the run config's own integer keys and the train: section's (pydantic would make them 1)."""
import textwrap

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config

GOOD = """
name: t
scenario: {id: line/LineWalk-v0, params: {num_agents: 2}}
agents: {id: random-v0}
seeds: [0, 1]
"""


def write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("override, key", [("max_steps=true", "max_steps"), ("episodes=true", "episodes"),
                                           ("seeds=[true]", "seeds"), ("seeds=[0, false]", "seeds")])
def test_bool_override_rejected(tmp_path, override, key):
    with pytest.raises(ConfigError, match=rf"key '{key}': invalid value (true|false).*a number is required, not a boolean"):
        load_config(write(tmp_path, GOOD), [override])


def test_yaml_yes_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"c\.yaml: key 'max_steps': invalid value true: a number is required, not a boolean"):
        load_config(write(tmp_path, GOOD + "max_steps: yes\n"))


def test_train_section_bool_rejected():
    from coopsim.platform.training import trainable_class, train_config

    cfg = load_config("configs/ppo/linewalk-mappo.yaml", ["train.total_env_steps=true"])
    _, cls = trainable_class(cfg)
    with pytest.raises(ConfigError, match=r"key 'train\.total_env_steps': invalid value true: a number is required, not a boolean"):
        train_config(cfg, cls, file="configs/ppo/linewalk-mappo.yaml")


def test_ints_still_accepted(tmp_path):
    cfg = load_config(write(tmp_path, GOOD), ["max_steps=3", "episodes=2"])
    assert cfg.max_steps == 3 and cfg.episodes == 2 and cfg.seeds == [0, 1]


@pytest.mark.parametrize("override, key, value", [("agents.params.hidden=[true, 64]", "agents.params.hidden", r"\[true, 64\]"),
                                                  ("agents.params.hidden=[64, no]", "agents.params.hidden", r"\[64, false\]")])
def test_component_list_bool_rejected(override, key, value):
    """A boolean inside a component's list[int] param (PPO hidden) is refused, as in the run config's own lists."""
    with pytest.raises(ConfigError, match=rf"key '{key}': invalid value (true|false) in {value}: a number is required, not a boolean"):
        load_config("configs/ppo/linewalk-mappo.yaml", [override])


def test_component_tuple_and_nested_bool_rejected():
    from coopsim.platform.registry import validate_params

    with pytest.raises(ConfigError, match=r"key 'random_size': invalid value true in \[true, 32\]: a number is required"):
        validate_params("scenario", "mapf/MGMAPF-v0", {"map": "random", "random_size": [True, 32]})
    assert validate_params("scenario", "mapf/MGMAPF-v0", {"map": "random", "random_size": [16, 32]}).random_size == (16, 32)
    cfg = load_config("configs/ppo/linewalk-mappo.yaml", ["agents.params.hidden=[8, 4]"])
    assert cfg.agents.params["hidden"] == [8, 4]
