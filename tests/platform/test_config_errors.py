"""Bad configs get one clear message naming file, key, value and what is valid; the CLI exits 2 without a traceback."""
import re
import subprocess
import sys
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


def write(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_good_config_and_override(tmp_path):
    cfg = load_config(write(tmp_path, GOOD), ["scenario.params.num_agents=7", "max_steps=9"])
    assert cfg.scenario.params["num_agents"] == 7
    assert cfg.scenario_params() == {"num_agents": 7, "max_steps": 9}
    assert cfg.channel.id == "ideal-v0" and cfg.shield.id == "passthrough-v0"


@pytest.mark.parametrize("text, overrides, pattern", [
    (GOOD, ["scenario.params.num_agents=0"],
     r"command-line override '[^']+' \(config .*c\.yaml\): key 'scenario\.params\.num_agents': invalid value 0: Input should be greater than or equal to 1 \(agents, 1\.\.1024\)"),
    (GOOD, ["scenario.params.speed=3"],
     r"command-line override '[^']+' \(config .*c\.yaml\): key 'scenario\.params\.speed': unknown parameter 'speed' \(value 3\); valid parameters: cell_size_m, length, max_steps, num_agents"),
    (GOOD, ["agents.id=rnadom-v0"],
     r"command-line override '[^']+' \(config .*c\.yaml\): key 'agents\.id': unknown agent id 'rnadom-v0'\. Did you mean 'random-v0'.*\? Registered agent ids: .*random-v0"),
    (GOOD, ["episodes=0"], r"command-line override '[^']+' \(config .*c\.yaml\): key 'episodes': invalid value 0: .*episodes per seed"),
    (GOOD, ["seeds=[]"], r"command-line override '[^']+' \(config .*c\.yaml\): key 'seeds': invalid value \[\]: .*at least one seed"),
    (GOOD, ["colour=red"], r"command-line override '[^']+' \(config .*c\.yaml\): key 'colour': unknown parameter 'colour' \(value 'red'\); valid parameters: agents, channel"),
    ("name: t\nscenario: {id: line/LineWalk-v0\nagents: x\n", [], r"c\.yaml: not valid YAML at line \d+, column \d+"),
    ("- a\n- b\n", [], r"c\.yaml: top level must be a mapping"),
    (GOOD, ["scenario.params.num_agents=true"],
     r"key 'scenario\.params\.num_agents': invalid value true: a number is required, not a boolean"),
    (GOOD, ["shield.params.delta=2"],
     r"command-line override 'shield\.params\.delta=2' \(config .*c\.yaml\): key 'shield\.id': missing required key "
     r"'shield\.id': the file has no 'shield' section"),
])
def test_bad_config_messages(tmp_path, text, overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, text), overrides)


def test_value_from_the_file_blames_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^.*c\.yaml: key 'episodes': invalid value 0"):
        load_config(write(tmp_path, GOOD + "episodes: 0\n"))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: file not found"):
        load_config(tmp_path / "nope.yaml")


def test_bad_override_syntax(tmp_path):
    with pytest.raises(ConfigError, match=r"override 'num_agents' must look like key\.path=value"):
        load_config(write(tmp_path, GOOD), ["num_agents"])


def test_cli_exit_code_2_and_no_traceback(tmp_path):
    p = write(tmp_path, GOOD)
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "validate", str(p), "scenario.params.length=1"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    assert "key 'scenario.params.length': invalid value 1" in r.stderr


def _cli(*args):
    from pathlib import Path

    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("cmd", ["train", "validate"])
def test_a_bad_train_override_names_the_override_not_the_file(cmd):
    r = _cli(cmd, "configs/ppo/linewalk-mappo.yaml", "train.num_envs=0")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert " ".join(r.stderr.split()) == (
        "error: command-line override 'train.num_envs=0' (config configs/ppo/linewalk-mappo.yaml): key "
        "'train.num_envs': invalid value 0: Input should be greater than or equal to 1 (environments stepped "
        "together E)")


def test_a_misspelled_second_level_key_lists_that_levels_keys(tmp_path):
    with pytest.raises(ConfigError) as ei:
        load_config(write(tmp_path, GOOD), ["scenario.parms.num_agents=3"])
    assert str(ei.value) == (
        f"command-line override 'scenario.parms.num_agents=3' (config {tmp_path / 'c.yaml'}): key 'scenario.parms': "
        f"unknown parameter 'scenario.parms' (value {{'num_agents': 3}}) (did you mean 'params'?); "
        f"valid keys of 'scenario': id, params")
    bad = GOOD.replace("agents: {id: random-v0}", "agents: {id: random-v0, parms: {}}")
    with pytest.raises(ConfigError, match=r"key 'agents.parms': unknown parameter 'agents.parms' \(value \{\}\) "
                                          r"\(did you mean 'params'\?\); "
                                          r"valid keys of 'agents': id, params$"):
        load_config(write(tmp_path, bad))


def test_a_param_refused_after_its_component_id_was_overridden_blames_the_id_override():
    """``channel.id=ideal-v0`` on the command line keeps the file's bandwidth ``channel.params``: the refusal of
    ``channel.params.trace`` is addressed to the id override and says how to drop the file's params."""
    from coopsim.platform.config import blame_override

    exc = ConfigError("unknown parameter 'trace'; valid parameters: header_bytes", file="c.yaml",
                      key="channel.params.trace", value={"kind": "markov"})
    got = blame_override(exc, "c.yaml", ["episodes=2", "channel.id=ideal-v0"])
    assert str(got).startswith("command-line override 'channel.id=ideal-v0' (config c.yaml): key 'channel.params.trace'")
    assert "pass channel.params={} (or the new component's params) with 'channel.id=ideal-v0'" in str(got)
    assert got.key == "channel.params.trace"
    # an override of the param itself still wins, and without an id override the file is blamed
    assert "'channel.params.trace.kind=x'" in str(blame_override(exc, "c.yaml", ["channel.id=ideal-v0",
                                                                                  "channel.params.trace.kind=x"]))
    assert blame_override(exc, "c.yaml", ["agents.id=x"]) is exc


def test_leading_zero_ints_are_refused_not_read_as_yaml_11_octal(tmp_path):
    """064 is 52 in YAML 1.1 (PyYAML): a config or override with it is refused with the decimal value to write (for
    a numeric key: the check needs the key's type, so it is made when the config is validated, not when the override
    is parsed)."""
    import pytest

    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config, parse_override

    good = write(tmp_path, GOOD, "good.yaml")
    with pytest.raises(ConfigError, match=r"command-line override 'scenario.params.num_agents=064' \(config .*good\.yaml\): "
                                          r"key 'scenario.params.num_agents': 064 has a leading zero, which YAML 1.1 "
                                          r"reads as the octal number 52; write 64$") as e:
        load_config(good, ["scenario.params.num_agents=064"])
    assert e.value.key == "scenario.params.num_agents"
    with pytest.raises(ConfigError, match=r"key 'seeds': 010 has a leading zero, which YAML 1.1 reads as the octal number 8"):
        load_config(good, ["seeds=[0, 010]"])
    assert parse_override("episodes=10")[1] == 10 and parse_override("x=0")[1] == 0 and parse_override("x=-3")[1] == -3
    f = tmp_path / "oct.yaml"
    f.write_text("name: x\nscenario: {id: line/LineWalk-v0, params: {length: 010}}\nagents: {id: random-v0}\n")
    with pytest.raises(ConfigError, match=r"line 2, column \d+: 010 has a leading zero.*write 10"):
        load_config(f)


@pytest.mark.parametrize("text, reading, decimal", [
    ("08", "the string '08'", "8"), ("09", "the string '09'", "9"), ("019", "the string '019'", "19"),
    ("-08", "the string '-08'", "-8"), ("0_9", "the string '0_9'", "9"), ("064", "the octal number 52", "64"),
    ("00", "the octal number 0", "0"), ("+007", "the octal number 7", "7"),
])
def test_leading_zero_refused_in_every_numeric_key_also_08_and_09(tmp_path, text, reading, decimal):
    """08 and 09 are not octal, so YAML 1.1 reads them as strings, which pydantic made 8 and 9 silently: refused
    like 064, with the same message, in a file (line and column), in an override, in a list, in a component's params
    and in a nested model of them."""
    problem = rf"{re.escape(text)} has a leading zero, which YAML 1.1 reads as {re.escape(reading)}; write {re.escape(decimal)}$"
    cases = [
        (GOOD.replace("seeds: [0, 1]", f"seeds: [0, 1]\nepisodes: {text}"), [], "episodes", r"line 6, column 11: "),
        (GOOD.replace("seeds: [0, 1]", f"seeds: [0, {text}]"), [], "seeds", r"line 5, column 12: "),
        (GOOD.replace("num_agents: 2", f"num_agents: {text}"), [], "scenario.params.num_agents", r"line 3, column \d+: "),
        (GOOD, [f"max_steps={text}"], "max_steps", ""),
        (GOOD, [f"scenario.params.length={text}"], "scenario.params.length", ""),
        (GOOD.replace("{id: line/LineWalk-v0, params: {num_agents: 2}}", "{id: mapf/MGMAPF-v0, params: {num_agents: 2, "
                      "num_goals: 1}}").replace("{id: random-v0}", f"{{id: mapf/immp-v0, params: {{highlevel: "
                                                                   f"{{num_waypoints: {text}}}}}}}"),
         [], "agents.params.highlevel.num_waypoints", r"line 4, column \d+: "),
    ]
    for body, overrides, key, where in cases:
        with pytest.raises(ConfigError, match=rf"key '{re.escape(key)}': {where}{problem}") as e:
            load_config(write(tmp_path, body), overrides)
        assert e.value.key == key and e.value.value == text


def test_leading_zero_in_a_string_key_is_the_string_written(tmp_path):
    """`name: 007` was refused as octal although a name is a string; now it is the name '007', as written (and stays
    that text in the run's stored config.yaml); the same for an override and a Union[int, str] key (MG-MAPF scen)."""
    import yaml

    from coopsim.platform.config import dump_config

    for name in ("007", "08", "0042", "-09"):
        cfg = load_config(write(tmp_path, GOOD.replace("name: t", f"name: {name}")))
        assert cfg.name == name and type(cfg.name) is str
        assert yaml.safe_load(dump_config(cfg))["name"] == name
        assert load_config(write(tmp_path, GOOD), [f"name={name}"]).name == name
    assert load_config(write(tmp_path, GOOD), ["out_dir=007"]).out_dir == "007"
    mapf = GOOD.replace("{id: line/LineWalk-v0, params: {num_agents: 2}}",
                        "{id: mapf/MGMAPF-v0, params: {num_agents: 2, num_goals: 1, scen: 07}}")
    cfg = load_config(write(tmp_path, mapf))
    assert cfg.scenario.params["scen"] == "07" and yaml.safe_load(dump_config(cfg))["scenario"]["params"]["scen"] == "07"
    # quoted, a leading zero was always a string: unchanged
    assert load_config(write(tmp_path, GOOD.replace("name: t", 'name: "007"'))).name == "007"


def test_leading_zero_refused_in_the_train_section(tmp_path):
    from coopsim.platform.training import train_config, trainable_class

    for text in ("08", "016"):
        cfg = load_config("configs/ppo/linewalk-mappo.yaml", [f"train.num_envs={text}"])
        _, cls = trainable_class(cfg)
        with pytest.raises(ConfigError, match=rf"key 'train\.num_envs': {text} has a leading zero, which YAML 1\.1 "
                                              rf"reads as the (string '{text}'|octal number 14); write {int(text)}$"):
            train_config(cfg, cls)


def test_a_relative_map_path_is_found_beside_the_config_and_stored_absolute(tmp_path, monkeypatch):
    """`map: ok.map` beside the config worked only from that folder, and the run's config.yaml kept the relative
    path, so re-running it from elsewhere failed (fresh-user pass 18)."""
    import shutil

    from coopsim.platform.config import dump_config, load_config
    from coopsim.scenarios.mapf.loaders import DATA_DIR

    d = tmp_path / "cfgdir"
    d.mkdir()
    shutil.copy(DATA_DIR / "random-32-32-10.map", d / "ok.map")
    (d / "rel.yaml").write_text("name: rel\nscenario: {id: mapf/MGMAPF-v0, params: {map: ok.map, num_agents: 4, "
                                "num_goals: 1}}\nagents: {id: random-v0}\nseeds: [0]\nepisodes: 1\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(d / "rel.yaml")
    assert cfg.scenario.params["map"] == str((d / "ok.map").resolve())
    assert f"map: {(d / 'ok.map').resolve()}" in dump_config(cfg)
    # a shipped name stays a name; a file in the working folder comes first
    assert load_config(d / "rel.yaml", ["scenario.params.map=random-32-32-10"]).scenario.params["map"] == "random-32-32-10"
    shutil.copy(DATA_DIR / "room-32-32-4.map", elsewhere / "ok.map")
    assert load_config(d / "rel.yaml").scenario.params["map"] == str((elsewhere / "ok.map").resolve())
