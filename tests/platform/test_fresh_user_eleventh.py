"""Fixes from the eleventh new-user pass (session 10)."""
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SMAC = ROOT / "configs" / "smac" / "3m-focus-fire.yaml"


@pytest.mark.parametrize("override, key", [("episodes=", "episodes"), ("max_steps=", "max_steps"),
                                           ("seeds=", "seeds")])
def test_an_empty_value_is_called_empty_not_a_broken_list(override, key):
    with pytest.raises(ConfigError) as info:
        load_config(SMAC, [override])
    msg = str(info.value)
    assert "is empty: give an integer" in msg and "brackets" not in msg and info.value.key == key
