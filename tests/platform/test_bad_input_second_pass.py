"""Bad input from a second new-user pass: each is one clear ConfigError (file, key, value, what is valid), never a
traceback, a silent exit or a huge allocation."""
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config

ROOT = Path(__file__).resolve().parents[2]
LINE = ROOT / "configs" / "examples" / "line-random.yaml"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


# N1: a huge episode count does not build a list of (seed, episode) jobs up front

def test_run_config_jobs_are_lazy(tmp_path, monkeypatch):
    from coopsim.platform import runner

    real = runner.run_episode
    calls = []

    def one_then_interrupt(*a, **kw):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(runner, "run_episode", one_then_interrupt)
    cfg = load_config(LINE, [f"out_dir={tmp_path}", "episodes=1000000000", "seeds=[0,1,2,3]"])
    with pytest.raises(runner.RunInterrupted):  # 4e9 pairs as a list would not fit in memory
        runner.run_config(cfg, progress=False)
    rows = (next(tmp_path.iterdir()) / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 1


# N3: scenario.params.env names a PettingZoo env factory, nothing else

@pytest.mark.parametrize("env, says", [
    ("sys:exit", "not a PettingZoo env factory"),
    ("builtins:exit", "not a PettingZoo env factory"),
    ("os:abort", "not a PettingZoo env factory"),
    ("json:loads", "not a PettingZoo env factory"),
    (":", "'module:callable'"),
    (":env", "'module:callable'"),
    ("mpe2:", "'module:callable'"),
    (".:x", "'module:callable'"),
    ("a b:c", "'module:callable'"),
    ("nosuchmod_coopsim.x:env", "cannot import 'nosuchmod_coopsim.x'"),
])
def test_pettingzoo_env_path_is_strict(env, says):
    from coopsim.platform.registry import make_scenario

    with pytest.raises(ConfigError, match=says) as info:
        make_scenario("pettingzoo/adapter-v0", env=env)
    assert info.value.key == "env" and info.value.value == env


def test_pettingzoo_env_path_cli_exit_2(tmp_path):
    cfg = tmp_path / "pz.yaml"
    cfg.write_text("name: pz\nscenario:\n  id: pettingzoo/adapter-v0\n  params: {env: 'sys:exit'}\n"
                   "agents:\n  id: random-v0\nseeds: [0]\nepisodes: 1\nmax_steps: 5\n")
    r = cli("validate", cfg)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "scenario.params.env" in r.stderr and "not a PettingZoo env factory" in r.stderr
    assert "Traceback" not in r.stderr


def test_pettingzoo_factory_that_exits(monkeypatch):
    import types

    from coopsim.platform.registry import make_scenario

    mod = types.ModuleType("coopsim_fake_pz_env")

    def exits(**kw):
        raise SystemExit(3)

    def fails(**kw):
        raise RuntimeError("boom")

    mod.exits, mod.fails = exits, fails
    monkeypatch.setitem(sys.modules, "coopsim_fake_pz_env", mod)
    for name, says in [("exits", "SystemExit"), ("fails", "RuntimeError: boom")]:
        with pytest.raises(ConfigError, match=says) as info:
            make_scenario("pettingzoo/adapter-v0", env=f"coopsim_fake_pz_env:{name}")
        assert info.value.key == "env"


# N10: a sweep over an untrained learner warns once

def test_sweep_warns_untrained_learner_once(tmp_path):
    cfg = ROOT / "configs" / "ppo" / "linewalk-mappo.yaml"
    r = cli("sweep", cfg, "--grid", "seeds=0,1", f"out_dir={tmp_path}", "episodes=1", "--jobs", "2")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stderr.count("evaluating an untrained policy") == 1


# N5: +-inf params are refused like nan (config.yaml could not store them); an inf default stays allowed

@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "inf", "Infinity", "1e400", "\"-1e400\""])
def test_non_finite_param_refused(value):
    with pytest.raises(ConfigError) as info:
        load_config(ROOT / "configs" / "mapf" / "random-32-32-10.yaml", [f"scenario.params.cell_size_m={value}"])
    assert info.value.key == "scenario.params.cell_size_m"
    assert "random-32-32-10.yaml" in str(info.value)


def test_inf_is_refused_even_without_a_bound():
    with pytest.raises(ConfigError, match="must be a finite number") as info:
        load_config(ROOT / "configs" / "mapf" / "random-32-32-10.yaml", ["scenario.params.cell_size_m=.inf"])
    assert info.value.value == float("inf")


def test_allowed_inf_round_trips(tmp_path):
    from coopsim.platform.config import dump_config

    cfg = load_config(LINE, ["channel.id=bandwidth-v0",
                             "channel.params.trace={kind: step, high: 1.0e+6, low: 1.0e+5, drop_at_s: 1.0, "
                             "recover_at_s: .inf}"])
    text = dump_config(cfg)
    assert "null" not in text and ".inf" in text
    p = tmp_path / "config.yaml"
    p.write_text(text)
    assert load_config(p).channel.params["trace"]["recover_at_s"] == float("inf")


# N7: out_dir=~/x is under the home folder; an empty out_dir is refused

def test_out_dir_tilde_and_empty(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_config(LINE, ["out_dir=~/x"], check_components=False).out_dir == str(tmp_path / "x")
    for v in ["", "  "]:
        with pytest.raises(ConfigError, match="not empty") as info:
            load_config(LINE, [f"out_dir={v}"], check_components=False)
        assert info.value.key == "out_dir"
    with pytest.raises(ConfigError, match="no such user") as info:  # not a folder named '~nosuchuser-coopsim'
        load_config(LINE, ["out_dir=~nosuchuser-coopsim/x"], check_components=False)
    assert info.value.key == "out_dir"


# N8: a name too long for a run directory fails in validate, on key name

def test_name_too_long():
    from coopsim.platform.config import NAME_MAX

    load_config(LINE, ["name=" + "a" * NAME_MAX], check_components=False)
    for name in ["a" * 300, "é" * 100]:
        with pytest.raises(ConfigError, match=f"at most {NAME_MAX} bytes") as info:
            load_config(LINE, [f"name={name}"], check_components=False)
        assert info.value.key == "name" and str(LINE) in str(info.value)


# N6: a run name is a safe file name; paths inside printed commands are shell-quoted

@pytest.mark.parametrize("name", ["a$(touch x)", "a;b", "a*", "a'b", "a|b"])
def test_name_charset(name):
    with pytest.raises(ConfigError, match="must use letters, digits and") as info:
        load_config(LINE, [f"name={name}"], check_components=False)
    assert info.value.key == "name"


def test_name_unicode_letters_ok():
    assert load_config(LINE, ["name=café-1.2+x_y"], check_components=False).name == "café-1.2+x_y"


def test_next_line_quotes_the_run_dir(tmp_path):
    out = tmp_path / "with space"
    r = cli("run", ROOT / "configs" / "mapf" / "random-32-32-10.yaml", f"out_dir={out}", "seeds=[0]", "episodes=1",
            "max_steps=5", "scenario.params.num_agents=4", "--no-progress")  # MAPF writes replays: a next: line
    assert r.returncode == 0, r.stderr
    nxt = [ln for ln in r.stdout.splitlines() if ln.startswith("next: ")]
    assert nxt and f" report '{out}/" in nxt[0]


# N13: messages

def test_ns3_data_mode_error_names_its_key():
    from coopsim.platform import registry

    with pytest.raises(ConfigError) as info:
        registry.validate_params("channel", "ns3-v0", {"data_mode": "Foo"}, file="c.yaml", key_prefix="channel.params.")
    assert info.value.key == "channel.params.data_mode" and "'Foo' is not a mode of 802.11a" in str(info.value)
    with pytest.raises(ConfigError) as info:
        registry.validate_params("channel", "ns3-v0", {"nakagami_distance2_m": 10.0}, file="c.yaml",
                                 key_prefix="channel.params.")
    assert info.value.key == "channel.params.nakagami_distance2_m"


@pytest.mark.parametrize("override", ["seeds=[0,1", "seeds=0,1]"])
def test_unclosed_bracket_hint(override):
    with pytest.raises(ConfigError, match="check the brackets") as info:
        load_config(LINE, [override])
    assert "remove the quotes" not in str(info.value) and info.value.key == "seeds"


def test_not_a_regular_file():
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config("/dev/null")


# N14: a budget below (or not a multiple of) one iteration is rounded up, and a note says so

def test_rounded_budget_note():
    from coopsim.platform.training import rounded_budget_note

    n = rounded_budget_note({"total_env_steps_budget": 1, "env_steps": 512, "iterations": 1})
    assert n == ("note: the budget train.total_env_steps=1 env steps is below one iteration (512): trained 512 "
                 "(training runs whole iterations)")
    n = rounded_budget_note({"total_env_steps_budget": 1000, "env_steps": 1024, "iterations": 2})
    assert "rounded up to whole iterations" in n and "trained 1,024" in n
    assert rounded_budget_note({"total_env_steps_budget": 1024, "env_steps": 1024, "iterations": 2}) is None


def test_train_tiny_budget_notes_rounding(tmp_path):
    r = cli("train", ROOT / "configs" / "ppo" / "linewalk-mappo.yaml", "train.total_env_steps=1", "seeds=[0]",
            f"out_dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    assert "is below one iteration (" in r.stdout + r.stderr


# N15: the ns-3 experiment script speaks of its own input (configs/ns3/*.yaml)

def test_ns3_experiment_messages(tmp_path):
    from coopsim.comm.ns3.experiment import load

    with pytest.raises(ConfigError, match="coopsim run config, not an ns-3 experiment file: run it with `coopsim run"):
        load(str(LINE))
    b = tmp_path / "x.yaml"
    b.write_bytes(b"\xd0\xcf\x11\xe0\x00\xff")
    with pytest.raises(ConfigError, match="configs/ns3/") as info:
        load(str(b))
    assert "configs/mapf" not in str(info.value)
    with pytest.raises(ConfigError, match="is a directory"):
        load(str(tmp_path))


def test_adapter_refuses_coopsims_own_cli_as_env():
    from coopsim.platform.registry import make_scenario

    for env in ("coopsim.cli:main", "__main__:main"):
        with pytest.raises(ConfigError, match="coopsim's own command line"):
            make_scenario("pettingzoo/adapter-v0", num_envs=1, env=env)


def test_cli_run_whose_episode_raises_prints_one_error_and_keeps_the_run(tmp_path, monkeypatch, capsys,
                                                                        second_episode_fails):
    import typer

    import coopsim.cli as cli_mod

    monkeypatch.delenv("COOPSIM_TRACEBACK", raising=False)
    with pytest.raises(typer.Exit) as ei:
        cli_mod.run(ROOT / "configs" / "examples" / "line-random.yaml", ["seeds=[0]", f"out_dir={tmp_path}"], None, False)
    err = capsys.readouterr().err
    assert ei.value.exit_code == 1 and "Traceback" not in err
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert "the run failed: RuntimeError: boom in episode 2" in " ".join(err.split()) and run.name in err
