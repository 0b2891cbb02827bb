"""Fixes from the thirteenth new-user pass (session 13): a single number for seeds, an empty config file, an override
into a section the file lacks, and "did you mean" for a misspelled key."""
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SMAC = ROOT / "configs" / "smac" / "3m-focus-fire.yaml"


@pytest.mark.parametrize("override, needles", [
    ("seeds=3", ["write seeds=[3] for that one seed", "or seeds=[0, 1, 2] for 3 seeds"]),
    ("seeds=0", ["write seeds=[0] for that one seed"]),
    ("seeds=1.5", ["integer seeds >= 0, e.g. seeds=[0, 1, 2]; not 1.5"]),
])
def test_a_single_number_for_seeds_says_how_to_write_the_list(override, needles):
    with pytest.raises(ConfigError) as info:
        load_config(SMAC, [override])
    msg = str(info.value)
    assert info.value.key == "seeds" and f"command-line override '{override}'" in msg
    for n in needles:
        assert n in msg, msg
    assert load_config(SMAC, ["seeds=[3]"]).seeds == [3]


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_an_empty_config_file_is_called_empty(tmp_path, text):
    f = tmp_path / "empty.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match="the file is empty") as info:
        load_config(f)
    assert str(info.value).startswith(f"{f}: ") and "NoneType" not in str(info.value)


def test_an_override_into_a_section_the_file_lacks_asks_for_its_id():
    mapf = ROOT / "configs" / "mapf" / "random-32-32-10.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(mapf, ["episodes=1", "shield.params.delta=2"])
    msg = str(info.value)
    assert msg.startswith(f"command-line override 'shield.params.delta=2' (config {mapf}): key 'shield.id': ")
    assert "the file has no 'shield' section" in msg and "shield.id=<a registered id>" in msg
    assert "is given" not in msg
    # with the id the section is whole, and the range check of the value itself speaks
    with pytest.raises(ConfigError, match="shield.params.delta") as info:
        load_config(mapf, ["shield.params.delta=2", "shield.id=certificate-v0"])


def test_a_file_section_without_id_is_still_blamed_on_the_file(tmp_path):
    import yaml

    data = yaml.safe_load(SMAC.read_text())
    data["channel"] = {"params": {}}
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_config(f, ["channel.params.x=1"])
    assert str(info.value).startswith(f"{f}: key 'channel.id': ") and "'channel' is given" in str(info.value)


@pytest.mark.parametrize("override, hint", [("scenrio.id=x", "'scenrio' (value {'id': 'x'}) (did you mean 'scenario'?)"),
                                            ("max_step=3", "(did you mean 'max_steps'?)"),
                                            ("scenario.params.reward_sprase=true", "(did you mean 'reward_sparse'?)")])
def test_a_misspelled_key_gets_the_closest_valid_one(override, hint):
    with pytest.raises(ConfigError) as info:
        load_config(SMAC, [override])
    assert hint in str(info.value) and "valid parameters" in str(info.value), str(info.value)


def test_a_key_close_to_nothing_gets_no_guess():
    with pytest.raises(ConfigError) as info:
        load_config(SMAC, ["zzz=1"])
    assert "did you mean" not in str(info.value)
