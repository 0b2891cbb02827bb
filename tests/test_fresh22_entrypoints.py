"""fresh22 findings: the docs' commands (resume, quoted seeds, the named test file), `ppo.curves` and
`ddacom.evaluate` user errors (exit 2, one line naming the option), `ddacom.evaluate`'s Ctrl-C message, and a
directory given as a MAPF map."""
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import CoopsimError, ConfigError

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def py(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=ENV, timeout=timeout)


# --- docs ----------------------------------------------------------------------------------------------------------

def _commands(md: str) -> list[str]:
    """The shell lines of a markdown file: the lines of ```bash blocks and the `coopsim ...` inline spans."""
    out, in_block = [], False
    for line in md.splitlines():
        if line.startswith("```"):
            in_block = line.strip() in ("```bash", "```sh", "```console")
            continue
        if in_block:
            out.append(line)
        else:
            out += re.findall(r"`((?:\.venv/bin/)?coopsim [^`]+)`", line)
    return out


@pytest.mark.parametrize("doc", ["README.md", "docs/smac.md"])
def test_seed_list_overrides_are_quoted_for_zsh(doc):
    for cmd in _commands((ROOT / doc).read_text()):
        for m in re.finditer(r"seeds=\[", cmd):
            before = cmd[:m.start()]
            assert before.endswith(("'", '"')), f"{doc}: unquoted seeds=[...] in: {cmd}"


def test_smac_resume_example_leaves_the_config_out():
    cmds = [c for c in _commands((ROOT / "docs/smac.md").read_text()) if "--resume" in c]
    assert cmds
    for c in cmds:
        args = c.split("#")[0].split()
        assert args[args.index("--resume") + 2:] == [], c  # nothing after the run dir: the run's own config.yaml
    # and `coopsim train --help` says so too
    r = py("coopsim.cli", "train", "--help")
    assert r.returncode == 0, r.stderr
    assert "with --resume it may be left out" in " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.stdout).split())


def test_readme_names_the_six_map_100_agent_test_file():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"shipped maps at 100 agents \(`([^`]+)`\)", readme)
    assert m and m.group(1) == "tests/mapf/test_planners_maps.py"
    test = (ROOT / m.group(1)).read_text()
    assert "num_agents=100" in test and "test_every_shipped_map_is_covered" in test
    assert "tests/mapf/test_planners.py`" not in readme


# --- ppo.curves ----------------------------------------------------------------------------------------------------

@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    for s in (0, 1):
        d = run / f"seed-{s}"
        d.mkdir(parents=True)
        rows = ["iteration,env_steps,episode/success,episode/win,loss/value,note"]
        rows += [f"{i},{i * 100},{0.1 * i},{'' if i < 3 else 0.5},{1.0 / i},x" for i in range(1, 8)]
        (d / "metrics.csv").write_text("\n".join(rows) + "\n")
    return run


def _curves(*args):
    from coopsim.agents.ppo import curves

    curves.main([str(a) for a in args])


def test_curves_unknown_metric_exits_2_and_lists_the_columns(run_dir, tmp_path):
    out = tmp_path / "c.png"
    r = py("coopsim.agents.ppo.curves", str(out), str(run_dir), "--metric", "nope/x")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "'nope/x'" in r.stderr
    have = r.stderr.split("metrics in these runs: ")[1].strip()
    assert have == "episode/success, episode/win, loss/value"  # numbers only: not iteration, env_steps or 'note'
    assert not out.exists()


def test_curves_partly_unknown_metrics_name_only_the_unknown(run_dir, tmp_path):
    with pytest.raises(CoopsimError, match=r"--metric 'zz', 'note': not in .* metrics in these runs: episode/success"):
        _curves(tmp_path / "c.png", run_dir, "--metric", "episode/win", "--metric", "zz", "--metric", "note")
    assert not (tmp_path / "c.png").exists()


def test_curves_defaults_the_runs_lack(run_dir, tmp_path, capsys):
    _curves(tmp_path / "c.png", run_dir)  # has episode/success only of the defaults: plots it, says what is left out
    res = json.loads(capsys.readouterr().out)
    assert list(res["final_smoothed"]) == ["episode/success"] and len(res["final_smoothed"]["episode/success"]) == 2
    assert (tmp_path / "c.png").stat().st_size > 1000
    bare = tmp_path / "bare"
    (bare / "seed-0").mkdir(parents=True)
    (bare / "seed-0" / "metrics.csv").write_text("iteration,env_steps,loss/value\n1,100,0.5\n")
    with pytest.raises(CoopsimError, match=r"none of the default metrics .* choose columns with --metric; metrics in "
                                           r"these runs: loss/value$"):
        _curves(tmp_path / "d.png", bare)


def test_curves_swapped_arguments_say_the_first_is_the_image(run_dir, tmp_path):
    r = py("coopsim.agents.ppo.curves", str(run_dir), str(tmp_path / "c.png"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "the first argument is the output image" in r.stderr and "c.png" in r.stderr
    with pytest.raises(CoopsimError, match="the first argument is the output image"):
        _curves(tmp_path, run_dir)  # a directory first
    assert not (tmp_path / "c.png").exists()


def test_curves_good_call_and_usage_line(run_dir, tmp_path):
    r = py("coopsim.agents.ppo.curves", str(tmp_path / "c.svg"), str(run_dir), "--metric", "episode/win")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["final_smoothed"]["episode/win"] == [0.5, 0.5]
    assert (tmp_path / "c.svg").is_file()
    h = py("coopsim.agents.ppo.curves", "--help")
    assert h.returncode == 0 and h.stdout.startswith("usage: python -m coopsim.agents.ppo.curves ")


# --- ddacom.evaluate -----------------------------------------------------------------------------------------------

EVAL = "coopsim.agents.ddacom.evaluate"
FAST = ["--num-envs", "2", "--episodes", "1", "--senders", "none,broadcast"]


@pytest.mark.parametrize("value", ["-1", "0", "nan", "abc"])
def test_evaluate_bad_radius_names_the_option_and_range(value, capsys):
    from coopsim.agents.ddacom import evaluate

    with pytest.raises(SystemExit) as ei:
        evaluate.main(["--radius", value])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --radius: invalid value '{value}': a number > 0 is required" in err
    assert "obs_radius_m" not in err and err.startswith("usage: python -m coopsim.agents.ddacom.evaluate ")


def test_evaluate_too_many_agents_names_the_option_and_range(tmp_path):
    r = py(EVAL, "--num-agents", "100", "--seeds", "1", "--out", str(tmp_path / "e.json"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "argument --num-agents: invalid value '100': an integer in 2..64 is required" in r.stderr
    assert not (tmp_path / "e.json").exists()


def test_evaluate_help_names_the_module_and_every_default():
    r = py(EVAL, "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m coopsim.agents.ddacom.evaluate ")
    text = " ".join(r.stdout.split())  # help lines are wrapped
    for opt, default in [("--seeds", "5"), ("--first-seed", "0"), ("--num-agents", "3"), ("--radius", "0.5"),
                         ("--num-envs", "32"), ("--episodes", "10"), ("--senders", "none,broadcast,periodic,novelty,ddacom"),
                         ("--out", "runs/ddacom_eval.json")]:
        entry = text.split(f" {opt} {opt.lstrip('-').replace('-', '_').upper()} ", 1)[1].split(" --", 1)[0]
        assert f"(default {default}" in entry, (opt, entry)
    assert "metres" in text


def test_evaluate_interrupt_message_of_the_handler(capsys):
    from coopsim.agents.ddacom import evaluate

    evaluate._PROGRESS.clear()
    assert evaluate.kept_on_interrupt() == ""  # before the arguments were read: run_script's default text
    evaluate._PROGRESS.update(out="runs/e.json", seeds=5, first_seed=100, seeds_done=0)
    assert evaluate.kept_on_interrupt() == "nothing: no seed had finished, so runs/e.json was not written"
    evaluate._PROGRESS.clear()


def test_evaluate_ctrl_c_names_the_file_and_the_seeds_kept(tmp_path):
    out = tmp_path / "e.json"
    p = subprocess.Popen([sys.executable, "-m", EVAL, "--seeds", "1000", "--first-seed", "3", *FAST, "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True,
                         # a job started in the background by a non-interactive shell (as CI's make may be) inherits
                         # SIGINT ignored, and Python then installs no KeyboardInterrupt handler: give the child
                         # Ctrl-C's default, as a terminal user's process has it
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = p.stdout.readline()  # blocks until seed 3 is done and its JSON written
        assert first.startswith("seed 3 done"), first
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("interrupted; kept: ")]
    m = re.fullmatch(rf"interrupted; kept: {re.escape(str(out))} with (\d+) of 1000 seed\(s\) \(seeds 3\.\.(\d+)\), "
                     r"a valid JSON file", line)
    assert m, line
    n = int(m.group(1))
    assert n >= 1 and int(m.group(2)) == 3 + n - 1
    d = json.loads(out.read_text())
    assert d["seeds_done"] == n and sorted({r["seed"] for r in d["runs"]}) == list(range(3, 3 + n))
    assert f"table of the {n} finished seed(s):" in rest
    table = rest.split(f"table of the {n} finished seed(s):", 1)[1]
    assert "channel/sender" in table and "ideal/broadcast" in table


# --- MAPF map= a directory -----------------------------------------------------------------------------------------

def test_a_directory_as_map_is_named_a_directory(tmp_path):
    from coopsim.scenarios.mapf.loaders import DATA_DIR, resolve_map

    with pytest.raises(ConfigError, match=r"it is a directory, but a MovingAI \.map file is expected \(it holds no "
                                          r"\.map file\); or give a shipped map: empty-32-32") as ei:
        resolve_map(tmp_path)
    assert "no such file" not in str(ei.value) and ei.value.key == "map"
    with pytest.raises(ConfigError, match=r"it holds empty-32-32\.map, .*: give the file's path"):
        resolve_map(DATA_DIR)
    assert resolve_map(DATA_DIR / "empty-32-32.map") == DATA_DIR / "empty-32-32.map"  # a file still resolves
    with pytest.raises(ConfigError, match="no such file"):
        resolve_map(tmp_path / "nope.map")


def test_a_directory_as_map_through_the_config_and_as_scen(tmp_path):
    from coopsim.platform.config import load_config
    from coopsim.scenarios.mapf.loaders import load_map, resolve_map, resolve_scen

    with pytest.raises(ConfigError) as ei:
        load_config(ROOT / "configs/mapf/random-32-32-10.yaml", [f"scenario.params.map={tmp_path}"])
    msg = str(ei.value)
    assert msg.count("key '") == 1 and "key 'scenario.params.map'" in msg
    assert f"invalid value '{tmp_path}': it is a directory, but a MovingAI .map file is expected" in msg
    assert "no such file" not in msg
    with pytest.raises(ConfigError, match=r"is a directory; a MovingAI \.scen file is expected"):
        resolve_scen(load_map(resolve_map("empty-32-32")), tmp_path)
