"""Bad configs get one clear message naming file, key, value and what is valid; the CLI exits 2 without a traceback."""
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
     r"key 'scenario\.params\.num_agents': invalid value True: a number is required, not a boolean"),
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
    """064 is 52 in YAML 1.1 (PyYAML): a config or override with it is refused with the decimal value to write."""
    import pytest

    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config, parse_override

    with pytest.raises(ConfigError, match=r"064 has a leading zero, which YAML 1.1 reads as the octal number 52; "
                                          r"write 64") as e:
        parse_override("scenario.params.num_agents=064")
    assert e.value.key == "scenario.params.num_agents"
    with pytest.raises(ConfigError, match=r"010 has a leading zero, which YAML 1.1 reads as the octal number 8"):
        parse_override("seeds=[0, 010]")
    assert parse_override("episodes=10")[1] == 10 and parse_override("x=0")[1] == 0 and parse_override("x=-3")[1] == -3
    f = tmp_path / "oct.yaml"
    f.write_text("name: x\nscenario: {id: line/LineWalk-v0, params: {length: 010}}\nagents: {id: random-v0}\n")
    with pytest.raises(ConfigError, match=r"line 2, column \d+: 010 has a leading zero.*write 10"):
        load_config(f)


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
