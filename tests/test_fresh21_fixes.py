"""Fixes from the twenty-first new-user pass: bad ``--calibrate`` loads, unwritable outputs of the research scripts
found only after their long work (``ddacom.train --out``, ns-3 ``--oracle-cache``, ``graph_safe.experiments --out``,
a sweep's ``out_dir``), a closed stdout (``coopsim run ... | head -1``) that failed or aborted the run, the sweep's
comparison line naming PNGs it did not draw, and `coopsim report`'s handling of blocked outputs, deleted replays and
an empty ``plot_error.txt`` on a full disk."""
from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import ConfigError, run_script
from coopsim.platform.config import load_config

ROOT = Path(__file__).resolve().parents[1]
LINE = ROOT / "configs" / "examples" / "line-random.yaml"
MAPF = ROOT / "configs" / "mapf" / "random-32-32-10.yaml"
NS3 = ROOT / "configs" / "ns3" / "ddacom-spread.yaml"
SAFETY = ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _cli(args):
    """``coopsim ARGS`` in this process (monkeypatches apply): (exit code, stdout + stderr)."""
    from typer.testing import CliRunner

    from coopsim.cli import app

    res = CliRunner().invoke(app, [str(a) for a in args])
    out = res.output + (getattr(res, "stderr", "") if res.stderr_bytes is not None else "")
    return res.exit_code, " ".join(out.split())  # unwrapped: rich wraps long lines


@pytest.fixture
def blocked(tmp_path):
    """A path no file can be written to, for any user (root too): its parent is a file."""
    f = tmp_path / "a-file"
    f.write_text("x")
    return f / "sub"


def _boom(*a, **k):
    raise AssertionError("the long work started")


# 1. --calibrate takes finite loads >= 0, checked before any run

@pytest.mark.parametrize("text, why", [("abc", "'abc' is not a number"), ("-1", "'-1' is not a load"),
                                       ("nan", "'nan' is not a load"), ("1e6,inf", "'inf' is not a load"),
                                       ("0,,1", "an empty entry"), ("", "no load given")])
def test_a_bad_calibrate_load_is_one_config_error(text, why, tmp_path, monkeypatch):
    from coopsim.comm.ns3 import experiment

    monkeypatch.setattr(experiment, "calibrate", _boom)
    with pytest.raises(ConfigError) as info:
        experiment.main([str(NS3), "--calibrate", text, "--out", str(tmp_path / "x.json")])
    assert info.value.key == "--calibrate" and why in str(info.value) and "\n" not in str(info.value)


def test_good_calibrate_loads_are_parsed(tmp_path, monkeypatch):
    from coopsim.comm.ns3 import experiment

    seen = []
    monkeypatch.setattr(experiment, "calibrate", lambda cfg, levels: seen.append(levels) or [])
    experiment.main([str(NS3), "--calibrate", "0, 1e6,2e6", "--out", str(tmp_path / "x.json")])
    assert seen == [[0.0, 1e6, 2e6]] and (tmp_path / "x.json").is_file()


def test_calibrate_abc_through_the_script_exits_2(tmp_path, capsys):
    from coopsim.comm.ns3 import experiment

    with pytest.raises(SystemExit) as info:
        run_script(experiment.main, [str(NS3), "--calibrate", "abc", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("error: key '--calibrate': 'abc'") and "Traceback" not in err


# 2. ddacom.train checks --out (a results folder) before training

def test_ddacom_train_checks_out_before_training(blocked, monkeypatch, capsys):
    from coopsim.agents.ddacom import train

    monkeypatch.setattr(train, "train_one", _boom)
    with pytest.raises(SystemExit) as info:
        run_script(train.main, ["--out", str(blocked / "o.json"), "--steps", "200", "--seeds", "1", "--num-envs", "2",
                                "--eval-envs", "2", "--eval-episodes", "1"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    assert err.startswith("error: key '--out': cannot write") and str(blocked / "o.json") in err


# 3. the ns-3 experiment checks --oracle-cache before the anchors and the oracle run

def test_an_unwritable_oracle_cache_fails_before_any_run(blocked, tmp_path, monkeypatch):
    from coopsim.comm.ns3 import experiment

    monkeypatch.setattr(experiment, "run", _boom)
    with pytest.raises(ConfigError) as info:
        experiment.main([str(NS3), "--oracle-cache", str(blocked), "--out", str(tmp_path / "x.json"), "--seeds", "1"])
    assert info.value.key == "--oracle-cache" and str(blocked) in str(info.value)
    assert "--oracle-cache ''" in str(info.value)


@pytest.mark.parametrize("extra", [["--oracle-cache", ""], ["--no-oracle"]])
def test_no_oracle_cache_check_when_nothing_is_cached(extra, tmp_path, monkeypatch):
    from coopsim.comm.ns3 import experiment

    real = experiment.check_writable

    def no_cache_check(flag, path, **kw):
        assert flag != "--oracle-cache", "the oracle cache's writability was checked"
        return real(flag, path, **kw)

    monkeypatch.setattr(experiment, "run", _boom)
    monkeypatch.setattr(experiment, "check_writable", no_cache_check)
    args = [str(NS3), "--out", str(tmp_path / "x.json"), "--seeds", "1", *extra]
    if "--no-oracle" in extra:  # (a file there, or a path under one, is refused: tests/test_fresh30_fixes.py)
        args += ["--oracle-cache", str(tmp_path / "cache")]
    with pytest.raises(AssertionError, match="the long work started"):
        experiment.main(args)


# 4. graph_safe.experiments checks --out (a results folder) of every subcommand that writes

@pytest.mark.parametrize("cmd", [["violations", "--configs", str(SAFETY), "--train-episodes", "1"],
                                 ["regret", "--cases", "grid4x4-2ag-separation", "--episodes", "1"]])
def test_graph_safe_experiments_check_out_first(cmd, blocked, monkeypatch):
    from coopsim.agents.graph_safe import experiments

    monkeypatch.setattr(experiments, "violations", _boom)
    monkeypatch.setattr(experiments, "regret", _boom)
    with pytest.raises(ConfigError) as info:
        experiments.main([*cmd, "--out", str(blocked)])
    assert info.value.key == "--out" and str(blocked) in str(info.value)


# 5. a closed stdout neither fails nor aborts a run

def _closed_stdout(args):
    """``python -m coopsim.cli ARGS`` whose stdout reader has gone (as after ``| head -0``): (exit code, stderr)."""
    p = subprocess.Popen([sys.executable, "-m", "coopsim.cli", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.stderr.close()
    return p.wait(timeout=60), err


@pytest.mark.parametrize("episodes", [2, 20])
def test_a_run_into_a_closed_pipe_completes_and_records_success(episodes, tmp_path):
    code, err = _closed_stdout(["run", LINE, f"out_dir={tmp_path}", f"episodes={episodes}"])
    assert code == 141, err
    assert "error" not in err and "Traceback" not in err, err
    (run_dir,) = tmp_path.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "error" not in summary and summary["interrupted"] is False
    assert summary["episodes_finished"] == 3 * episodes  # seeds [0, 1, 2]
    assert (run_dir / "metrics.png").is_file()


def test_list_into_a_closed_pipe_exits_141_quietly():
    code, err = _closed_stdout(["list"])
    assert code == 141 and err == "", err


def test_the_stdout_guard_drops_output_after_a_broken_pipe(monkeypatch):
    from coopsim.cli import _ClosedPipeSafeStdout

    r, w = os.pipe()
    os.close(r)
    stream = io.TextIOWrapper(io.FileIO(w, "w"), write_through=True)
    guard = _ClosedPipeSafeStdout(stream)
    assert guard.write("hello\n") == 6 and guard.pipe_closed
    guard.write("more\n")
    guard.flush()
    stream.close()  # fd w now points at os.devnull: closing flushes without an error


# 6. a sweep checks out_dir once before starting any run

def test_a_sweep_into_an_unwritable_out_dir_exits_2_before_any_run(blocked, monkeypatch):
    import subprocess as sp

    monkeypatch.setattr(sp, "Popen", _boom)
    code, out = _cli(["sweep", LINE, f"out_dir={blocked}", "--grid", "seeds=0,1"])
    assert code == 2, out
    assert f"error: command-line override 'out_dir={blocked}'" in out and "key 'out_dir'" in out
    assert "cannot write" in out and "Traceback" not in out


def test_a_sweep_with_out_dir_as_a_grid_axis_names_the_grid_value(blocked, tmp_path, monkeypatch):
    import subprocess as sp

    monkeypatch.setattr(sp, "Popen", _boom)
    code, out = _cli(["sweep", LINE, "--grid", f"out_dir={tmp_path},{blocked}"])
    assert code == 2, out
    assert f"--grid value 'out_dir={blocked}'" in out and "key 'out_dir'" in out


# 7. the comparison line says what was written

def _line_run(tmp_path, *overrides):
    from coopsim.platform.runner import run_config

    return run_config(load_config(LINE, [f"out_dir={tmp_path}", "episodes=1", *overrides]), progress=False)


def test_the_comparison_line_names_only_the_files_written(tmp_path):
    a, b = _line_run(tmp_path, "seeds=[0]"), _line_run(tmp_path, "seeds=[1]")
    code, out = _cli(["report", a, b])
    assert code == 0, out
    assert "one PNG per metric" not in out and "compare.csv only; no plots:" in out
    (cmp_dir,) = tmp_path.glob("compare-*")
    assert (cmp_dir / "compare.csv").is_file() and not list(cmp_dir.glob("*.png"))


def test_the_comparison_line_counts_the_pngs(tmp_path):
    a, b = _line_run(tmp_path, "scenario.params.num_agents=2"), _line_run(tmp_path, "scenario.params.num_agents=3")
    code, out = _cli(["report", a, b])
    assert code == 0, out
    (cmp_dir,) = tmp_path.glob("compare-*")
    n = len(list(cmp_dir.glob("*.png")))
    assert n >= 1 and f"compare.csv and {n} PNG" in out


# 8. coopsim report: a blocked output is an error for the plot as for the GIF; deleted replays; plot_error.txt

@pytest.fixture
def mapf_run(tmp_path):
    from coopsim.platform.runner import run_config

    cfg = load_config(MAPF, [f"out_dir={tmp_path}", "seeds=[0]", "scenario.params.num_agents=4", "max_steps=128"])
    return run_config(cfg, progress=False)


def test_a_folder_in_the_way_of_the_plot_is_an_error(tmp_path):
    run_dir = _line_run(tmp_path)
    (run_dir / "metrics.png").unlink()
    (run_dir / "metrics.png").mkdir()
    code, out = _cli(["report", run_dir])
    assert code == 2, out
    assert f"error: {run_dir}: `coopsim report` cannot write its plot metrics.png: {run_dir / 'metrics.png'} is a " \
           f"folder" in out
    assert "warning" not in out and "episodes" in out  # the table was shown first


def test_a_folder_in_the_way_of_the_gif_is_the_same_error(mapf_run):
    (mapf_run / "replay_seed0_ep0.gif").mkdir()
    code, out = _cli(["report", mapf_run])
    assert code == 2, out
    assert f"{mapf_run / 'replay_seed0_ep0.gif'} is a folder" in out


def test_a_run_whose_replays_were_deleted_says_so(mapf_run):
    import shutil

    shutil.rmtree(mapf_run / "replays")
    code, out = _cli(["report", mapf_run])
    assert code == 0, out
    assert "records no replays" not in out
    assert f"no replay GIF: the run has no replays folder ({mapf_run / 'replays'}" in out


def test_a_scenario_without_replays_still_says_so(tmp_path):
    code, out = _cli(["report", _line_run(tmp_path)])
    assert code == 0 and "no replay GIF: line/LineWalk-v0 records no replays to animate" in out, out


def test_no_empty_plot_error_file_on_a_full_disk(tmp_path, monkeypatch):
    """The run's plot fails on a full disk, and so does the note about it: no 0-byte plot_error.txt is left."""
    from coopsim.platform import report

    real_open, full = io.open, []

    class FullFile:  # created, but no byte fits (a full disk: open succeeds, write fails)
        def __init__(self, f):
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

    def opener(file, mode="r", *a, **k):
        f = real_open(file, mode, *a, **k)
        return FullFile(f) if full and any(c in mode for c in "wax") else f

    def plot_fails(run_dir):
        full.append(1)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(io, "open", opener)
    monkeypatch.setattr(report, "plot_run", plot_fails)
    try:
        run_dir = _line_run(tmp_path)
    finally:
        full.clear()
    assert not (run_dir / "plot_error.txt").exists()
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]  # no temporary file either
    assert json.loads((run_dir / "summary.json").read_text())["episodes_finished"] == 3


def test_a_plot_error_is_still_noted(tmp_path, monkeypatch, capsys):
    from coopsim.platform import report

    def plot_fails(run_dir):
        raise RuntimeError("no font")

    monkeypatch.setattr(report, "plot_run", plot_fails)
    run_dir = _line_run(tmp_path)
    assert (run_dir / "plot_error.txt").read_text() == "RuntimeError: no font\n"
    # and said at once, on one line (fresh-user pass 24: a run on a full disk ended with exit 0 and no word of it)
    err = capsys.readouterr().err
    assert f"warning: {run_dir}: the plot metrics.png was not drawn (RuntimeError: no font)" in err
