"""YAML 1.1 numbers not written as plain decimals (base 60 ``1:30``, hex ``0x10``, binary ``0b101``, underscores
``1_000``, a leading zero ``064``) are kept as the text written: refused in a numeric key (naming YAML 1.1's reading
and the decimal to write), taken as the text in a string key; the same in a file (with line and column), in an
override and in a sweep's --grid value. Plain decimals and floats (12, 0.5, 1e-3, 1.5e3) read as before."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from coopsim.errors import ConfigError
from coopsim.platform.config import (LeadingZeroInt, UniqueKeyLoader, YamlNumberText, dump_config, load_config,
                                     parse_override)

GOOD = """
name: t
scenario: {id: line/LineWalk-v0, params: {num_agents: 2}}
agents: {id: random-v0}
seeds: [0, 1]
"""
PPO = "configs/ppo/linewalk-mappo.yaml"
ROOT = Path(__file__).resolve().parents[2]

#: text, YAML 1.1's reading, the message after "<where>: " in a numeric key
FORMS = [
    ("1:30", 90, "1:30 is YAML 1.1 base 60 (= 90); write 90"),
    ("2:00", 120, "2:00 is YAML 1.1 base 60 (= 120); write 120"),
    ("1:0", 60, "1:0 is YAML 1.1 base 60 (= 60); write 60"),
    ("-1:30", -90, "-1:30 is YAML 1.1 base 60 (= -90); write -90"),
    ("1:30.5", 90.5, "1:30.5 is YAML 1.1 base 60 (= 90.5); write 90.5"),
    ("0x10", 16, "0x10 is YAML 1.1 hexadecimal (= 16); write 16"),
    ("-0x1f", -31, "-0x1f is YAML 1.1 hexadecimal (= -31); write -31"),
    ("0b101", 5, "0b101 is YAML 1.1 binary (= 5); write 5"),
    ("1_000", 1000, "1_000 has underscores, which YAML 1.1 drops (= 1000); write 1000"),
    ("1_000.5", 1000.5, "1_000.5 has underscores, which YAML 1.1 drops (= 1000.5); write 1000.5"),
    ("064", 52, "064 has a leading zero, which YAML 1.1 reads as the octal number 52; write 64"),
    ("08", None, "08 has a leading zero, which YAML 1.1 reads as the string '08'; write 8"),
]
INTS = [f for f in FORMS if not isinstance(f[1], float)]


def write(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("text, reading, problem", FORMS)
def test_parse_override_keeps_the_text_and_yaml_11s_reading(text, reading, problem):
    value = parse_override(f"x={text}")[1]
    assert isinstance(value, YamlNumberText) and value == text and value.reading == reading
    assert isinstance(value, LeadingZeroInt) == (text in ("064", "08"))
    assert value.where == "" and value.problem() == problem
    # the same scalar in a file, with its line and column
    loaded = yaml.load(f"a: 1\nb: {text}\n", Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    assert loaded["b"] == text and loaded["b"].where == "line 2, column 4"


@pytest.mark.parametrize("text, value", [
    ("12", 12), ("-3", -3), ("+5", 5), ("0", 0), ("0.5", 0.5), ("1e-3", 0.001), ("1.5e3", 1500.0), ("1e5", 100000),
    ("01.5", 1.5), (".inf", float("inf")), ("0X10", "0X10"), ("1:60", "1:60"), ("0x1g", "0x1g"), ("'0x10'", "0x10"),
    ('"1:30"', "1:30"), ("[1, 2]", [1, 2]),
])
def test_plain_numbers_and_strings_read_as_before(text, value):
    got = parse_override(f"x={text}")[1]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text, reading, problem", INTS)
def test_refused_in_every_integer_key_of_overrides(text, reading, problem):
    for override, key in [(f"max_steps={text}", "max_steps"), (f"episodes={text}", "episodes"),
                          (f"seeds=[0, {text}]", "seeds"), (f"seeds={text}", "seeds"),
                          (f"scenario.params.length={text}", "scenario.params.length"),
                          (f"agents.params.hidden=[64, {text}]", "agents.params.hidden"),
                          (f"train.total_env_steps={text}", None)]:
        if key is None:  # the train: section is the trainer's: checked by train_config
            from coopsim.platform.training import train_config, trainable_class

            cfg = load_config(PPO, [override])
            with pytest.raises(ConfigError, match=rf"^key 'train\.total_env_steps': {re.escape(problem)}$") as e:
                train_config(cfg, trainable_class(cfg)[1])
            assert e.value.key == "train.total_env_steps" and e.value.value == text
            continue
        with pytest.raises(ConfigError) as e:
            load_config(PPO, [override])
        assert str(e.value) == f"command-line override '{override}' (config {PPO}): key '{key}': {problem}"
        assert e.value.key == key and e.value.value == text


@pytest.mark.parametrize("text, reading, problem", FORMS)
def test_refused_in_float_keys(tmp_path, text, reading, problem):
    """``train.lr=1:0`` was the float 60.0 ("invalid value 60"); ``cell_size_m`` is a float param."""
    from coopsim.platform.training import train_config, trainable_class

    cfg = load_config(PPO, [f"train.lr={text}"])
    with pytest.raises(ConfigError, match=rf"^key 'train\.lr': {re.escape(problem)}$"):
        train_config(cfg, trainable_class(cfg)[1])
    with pytest.raises(ConfigError, match=rf"key 'scenario\.params\.cell_size_m': {re.escape(problem)}$"):
        load_config(write(tmp_path, GOOD), [f"scenario.params.cell_size_m={text}"])


@pytest.mark.parametrize("text, reading, problem", INTS)
def test_refused_in_a_file_with_line_and_column(tmp_path, text, reading, problem):
    mapf = (GOOD.replace("{id: line/LineWalk-v0, params: {num_agents: 2}}",
                         "{id: mapf/MGMAPF-v0, params: {num_agents: 2, num_goals: 1}}")
            .replace("{id: random-v0}", f"{{id: mapf/immp-v0, params: {{highlevel: {{num_waypoints: {text}}}}}}}"))
    cases = [
        (GOOD + f"max_steps: {text}\n", "max_steps", "line 6, column 12"),
        (GOOD.replace("seeds: [0, 1]", f"seeds: [0, {text}]"), "seeds", "line 5, column 12"),
        (GOOD.replace("num_agents: 2", f"num_agents: {text}"), "scenario.params.num_agents", "line 3, column 55"),
        (mapf, "agents.params.highlevel.num_waypoints", r"line 4, column \d+"),
    ]
    for body, key, where in cases:
        with pytest.raises(ConfigError, match=rf"c\.yaml: key '{re.escape(key)}': {where}: {re.escape(problem)}$") as e:
            load_config(write(tmp_path, body))
        assert e.value.key == key and e.value.value == text


def test_refused_in_the_train_section_of_a_file(tmp_path):
    from coopsim.platform.training import train_config, trainable_class

    text = (ROOT / PPO).read_text()
    body = re.sub(r"total_env_steps: *\S+", "total_env_steps: 2:00", text, count=1)
    assert body != text
    p = tmp_path / "t.yaml"
    p.write_text(body)
    cfg = load_config(p)
    line = 1 + body[:body.index("2:00")].count("\n")
    with pytest.raises(ConfigError, match=rf"key 'train\.total_env_steps': line {line}, column \d+: 2:00 is YAML 1\.1 "
                                          r"base 60 \(= 120\); write 120$"):
        train_config(cfg, trainable_class(cfg)[1], file=str(p))


@pytest.mark.parametrize("text", ["0x10", "1_000", "0b101", "12_34.5", "007"])
def test_a_string_key_takes_the_text_written(tmp_path, text):
    """``name=0x10`` was "invalid value 16", ``name=1_000`` "invalid value 1000": now the name as written, in a file
    and in an override, kept as that text in the stored config.yaml (quoted there, so it reads back the same)."""
    for cfg in (load_config(write(tmp_path, GOOD.replace("name: t", f"name: {text}"))),
                load_config(write(tmp_path, GOOD), [f"name={text}"])):
        assert cfg.name == text and type(cfg.name) is str
        assert yaml.safe_load(dump_config(cfg))["name"] == text
        assert load_config(write(tmp_path, dump_config(cfg), "again.yaml")).name == text


def test_string_keys_take_base_60_and_union_int_str_params_the_text(tmp_path):
    cfg = load_config(write(tmp_path, GOOD), ["out_dir=1:30", "scenario.id=line/LineWalk-v0"])
    assert cfg.out_dir == "1:30" and yaml.safe_load(dump_config(cfg))["out_dir"] == "1:30"
    with pytest.raises(ConfigError, match=r"key 'name': invalid value '1:30': must use letters, digits"):
        load_config(write(tmp_path, GOOD), ["name=1:30"])  # the name's own rule (no ':'), not the number 90
    with pytest.raises(ConfigError, match=r"key 'agents\.id': unknown agent id '0x10'"):
        load_config(write(tmp_path, GOOD), ["agents.id=0x10"])
    for text in ("0x10", "1_0", "1:30"):  # MG-MAPF scen: Union[int, str]
        mapf = GOOD.replace("{id: line/LineWalk-v0, params: {num_agents: 2}}",
                            f"{{id: mapf/MGMAPF-v0, params: {{num_agents: 2, num_goals: 1, scen: {text}}}}}")
        cfg = load_config(write(tmp_path, mapf), check_components=False)
        assert cfg.scenario.params["scen"] == text
        assert yaml.safe_load(dump_config(cfg))["scenario"]["params"]["scen"] == text


def test_a_sweep_grid_value_is_refused_before_anything_runs(tmp_path):
    for grid, problem in (("max_steps=90,1:30", "key 'max_steps': 1:30 is YAML 1.1 base 60 (= 90); write 90"),
                          ("seeds=0,0x10", "key 'seeds': 0x10 is YAML 1.1 hexadecimal (= 16); write 16")):
        r = subprocess.run([sys.executable, "-m", "coopsim.cli", "sweep", "configs/examples/line-random.yaml",
                            "--grid", grid, f"out_dir={tmp_path / 'runs'}"], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        bad = grid.split("=")[0] + "=" + grid.split(",")[-1]
        assert " ".join(r.stderr.split()) == (
            f"error: --grid value '{bad}' (config configs/examples/line-random.yaml): {problem}")
        assert not (tmp_path / "runs").exists()


def test_a_whole_float_for_an_int_is_stored_as_the_int(tmp_path):
    """``train.total_env_steps=1.5e3`` was stored as 1500.0 in the run's config.yaml; now 1500, as pydantic reads it.
    Floats for float keys and non-whole floats stay as they were."""
    from coopsim.platform.training import train_config, trainable_class

    cfg = load_config(PPO, ["train.total_env_steps=1.5e3", "train.lr=1e-3", "agents.params.hidden=[6.4e1, 64]"])
    assert train_config(cfg, trainable_class(cfg)[1]).total_env_steps == 1500
    assert cfg.train["total_env_steps"] == 1500 and type(cfg.train["total_env_steps"]) is int
    assert cfg.train["lr"] == 0.001
    assert cfg.agents.params["hidden"] == [64, 64] and all(type(h) is int for h in cfg.agents.params["hidden"])
    stored = yaml.safe_load(dump_config(cfg))
    assert stored["train"]["total_env_steps"] == 1500 and type(stored["train"]["total_env_steps"]) is int
    cfg = load_config(write(tmp_path, GOOD.replace("num_agents: 2", "num_agents: 2.0, cell_size_m: 2.0")),
                      ["scenario.params.length=1.2e1"])
    assert cfg.scenario.params == {"num_agents": 2, "cell_size_m": 2.0, "length": 12}
    assert [type(cfg.scenario.params[k]) for k in ("num_agents", "cell_size_m", "length")] == [int, float, int]
    with pytest.raises(ConfigError, match=r"key 'scenario\.params\.length': invalid value 12\.5"):
        load_config(write(tmp_path, GOOD), ["scenario.params.length=12.5"])
