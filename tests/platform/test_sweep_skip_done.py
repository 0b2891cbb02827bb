"""`coopsim sweep --skip-done` continues a sweep: a grid cell with a finished, uninterrupted run of exactly its config
in its out_dir is not run again, and that run is compared as if it had just run; an interrupted, failed or
differently configured run does not count. An interrupted sweep says how to continue."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coopsim import cli
from coopsim.platform.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "configs" / "examples" / "line-random.yaml"  # the smallest run: random agents on LineWalk
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250"}
#: two cells (line-random-4, line-random-5) of one seed, one episode, 4 or 5 steps: a second each
GRID = ["--grid", "max_steps=4,5", "seeds=[0]", "episodes=1", "out_dir=runs", "--jobs", "2"]


def _sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """A sweep run in ``cwd`` (its out_dir ``runs`` is relative, so a copied folder is a copied sweep)."""
    return subprocess.run([sys.executable, "-m", "coopsim.cli", "sweep", str(CFG), *args], cwd=cwd,
                          capture_output=True, text=True, env=ENV, timeout=300)


def _run_dirs(cwd: Path) -> set[str]:
    return {d.name for d in (cwd / "runs").iterdir() if d.is_dir() and d.name.startswith("line-random-")}


def _lines(text: str, head: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(head)]


def _compare_csv(stdout: str) -> str:
    (line,) = _lines(stdout, "comparison: ")
    return (Path(line.split(": ", 1)[1].split(" (", 1)[0]) / "compare.csv").read_text()


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """A 2-cell sweep run with --skip-done on a fresh out_dir: (its folder, its result)."""
    base = tmp_path_factory.mktemp("first")
    r = _sweep(base, *GRID, "--skip-done")
    assert r.returncode == 0, r.stdout + r.stderr
    return base, r


@pytest.fixture
def work(first, tmp_path):
    """A copy of the first sweep's folder (run directories and all), to continue in."""
    dst = tmp_path / "w"
    shutil.copytree(first[0], dst)
    return dst


def _cell_dir(cwd: Path, steps: int, first: bool = False) -> Path:
    """The run directory of the cell ``max_steps=steps`` (``first``: the oldest of several)."""
    found = sorted(cwd / "runs" / n for n in _run_dirs(cwd) if n.startswith(f"line-random-{steps}-"))
    if first:
        return found[0]
    (d,) = found
    return d


def test_skip_done_on_a_fresh_out_dir_is_a_normal_sweep(first):
    base, r = first
    names = sorted(_run_dirs(base))
    assert len(names) == 2 and names[0].startswith("line-random-4-") and names[1].startswith("line-random-5-")
    assert all(re.fullmatch(r"line-random-[45]-\d{8}T\d{6}Z-[0-9a-f]{6}", n) for n in names)
    assert _lines(r.stdout, "sweep: ") == ["sweep: 2 runs, 2 at a time"]
    assert not _lines(r.stdout, "skipped")
    done = sorted(ln.rsplit(" -> ", 1)[1] for ln in _lines(r.stdout, "done "))
    assert done == [f"runs/{n}" for n in names]
    assert len(_compare_csv(r.stdout).splitlines()) == 3  # header and one row per cell
    assert "to continue" not in r.stdout + r.stderr


def test_a_finished_sweep_is_not_run_again_and_its_runs_are_compared(first, work):
    before = _run_dirs(work)
    r = _sweep(work, *GRID, "--skip-done")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _run_dirs(work) == before  # nothing ran: no new run directory
    assert _lines(r.stdout, "sweep: ") == ["sweep: 2 runs (2 done, skipped), nothing to run"]
    assert not _lines(r.stdout, "done ")
    skipped = _lines(r.stdout, "skipped (done): ")
    assert skipped == [f"skipped (done): 'seeds=[0]' episodes=1 out_dir=runs max_steps={s} name=line-random-{s} -> "
                       f"runs/{_cell_dir(work, s).name}" for s in (4, 5)]
    # the table is shown, but no second comparison folder is written: the first sweep's holds the same runs
    assert not _lines(r.stdout, "comparison: ")
    assert sorted(p.name for p in (work / "runs").glob("compare-*")) == \
        sorted(p.name for p in (first[0] / "runs").glob("compare-*"))
    (hint,) = _lines(r.stdout, "nothing ran, so no new comparison folder was written; to write one: ")
    cmd = hint.split("to write one: ", 1)[1].split()
    assert "report" in cmd and len(cmd) - cmd.index("report") == 3  # report and the two run directories
    report = subprocess.run([sys.executable, "-m", "coopsim.cli", *cmd[cmd.index("report"):]], cwd=work,
                            capture_output=True, text=True, env=ENV, timeout=300)
    assert report.returncode == 0, report.stdout + report.stderr
    # written now by `report`: the comparison of the first sweep, the same runs and the same numbers
    assert _compare_csv(report.stdout) == _compare_csv(first[1].stdout)
    # without --skip-done nothing changes: every cell runs again
    r = _sweep(work, *GRID)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _lines(r.stdout, "sweep: ") == ["sweep: 2 runs, 2 at a time"] and not _lines(r.stdout, "skipped")
    assert len(_run_dirs(work)) == 4


@pytest.mark.parametrize("damage", ["interrupted", "failed", "no summary", "bad config.yaml"])
def test_only_the_cell_whose_run_did_not_finish_runs_again(work, damage):
    bad, good = _cell_dir(work, 4), _cell_dir(work, 5)
    summary = json.loads((bad / "summary.json").read_text())
    if damage == "interrupted":  # as the runner marks an interrupted run
        (bad / "summary.json").write_text(json.dumps({**summary, "interrupted": True}))
    elif damage == "failed":  # as the runner records a run whose episode raised
        (bad / "summary.json").write_text(json.dumps({**summary, "error": "ValueError: boom"}))
    elif damage == "no summary":  # killed before writing it
        (bad / "summary.json").unlink()
    else:
        (bad / "config.yaml").write_text("name: [unclosed\n")
    before = _run_dirs(work)
    r = _sweep(work, *GRID, "--skip-done")
    assert r.returncode == 0, r.stdout + r.stderr
    new = _run_dirs(work) - before
    assert len(new) == 1 and next(iter(new)).startswith("line-random-4-")
    assert _run_dirs(work) == before | new
    assert _lines(r.stdout, "sweep: ") == ["sweep: 2 runs (1 done, skipped), 1 to run, 1 at a time"]  # --jobs 2, capped at the runs to run
    assert [ln.rsplit(" -> ", 1)[1] for ln in _lines(r.stdout, "skipped (done): ")] == [f"runs/{good.name}"]
    assert [ln.rsplit(" -> ", 1)[1] for ln in _lines(r.stdout, "done ")] == [f"runs/{next(iter(new))}"]
    assert len(_compare_csv(r.stdout).splitlines()) == 3  # the skipped run and the new one, compared
    why = {"interrupted": "was interrupted", "failed": "failed", "no summary": "has no readable summary.json",
           "bad config.yaml": "has no readable config.yaml"}[damage]
    assert _lines(r.stdout, "runs again: ") == [
        f"runs again: 'seeds=[0]' episodes=1 out_dir=runs max_steps=4 name=line-random-4: runs/{bad.name} {why}"
        + (" (it stopped before its end)" if damage == "no summary" else "")]


def test_a_different_fixed_override_skips_nothing(work):
    before = _run_dirs(work)
    r = _sweep(work, *[a if a != "episodes=1" else "episodes=2" for a in GRID], "--skip-done")
    assert r.returncode == 0, r.stdout + r.stderr
    new = _run_dirs(work) - before
    assert sorted(n[:len("line-random-4")] for n in new) == ["line-random-4", "line-random-5"]
    assert _lines(r.stdout, "sweep: ") == ["sweep: 2 runs, 2 at a time"]
    assert not _lines(r.stdout, "skipped") and len(_lines(r.stdout, "done ")) == 2
    # each cell says which key kept its earlier run from counting
    assert _lines(r.stdout, "runs again: ") == [
        f"runs again: 'seeds=[0]' episodes=2 out_dir=runs max_steps={s} name=line-random-{s}: "
        f"runs/{_cell_dir(work, s, first=True).name} ran another config (episodes: 1 -> 2)" for s in (4, 5)]
    for n in new:  # the runs of the new config, not the old ones
        assert load_config(work / "runs" / n / "config.yaml").episodes == 2


def test_the_newest_finished_run_of_exactly_the_cell_counts(work):
    cfg = load_config(CFG, ["seeds=[0]", "episodes=1", "out_dir=runs", "max_steps=4", "name=line-random-4"])
    old = _cell_dir(work, 4)
    newer = work / "runs" / "line-random-4-29991231T235959Z-abcdef"
    shutil.copytree(old, newer)
    shutil.copytree(old, work / "runs" / "line-random-4-x-29991231T235959Z-abcdef")  # another name
    shutil.copytree(old, work / "runs" / "line-random-4-99991231T235959Z-abcdeg")  # not a run directory's suffix
    with contextlib.chdir(work):
        assert cli._done_run_dir(cfg) == Path("runs") / newer.name
        # a --checkpoint run (a comment line in config.yaml, the policy in summary.json) is another run
        summary = json.loads((newer / "summary.json").read_text())
        (newer / "summary.json").write_text(json.dumps({**summary, "checkpoint": "/p/policy.pt"}))
        assert cli._done_run_dir(cfg) == Path("runs") / old.name
        # comment lines of config.yaml do not count
        (old / "config.yaml").write_text("# a note\n" + (old / "config.yaml").read_text())
        assert cli._done_run_dir(cfg) == Path("runs") / old.name
        # the same out_dir spelled otherwise (trailing slash, ./, absolute) finds the run written under "runs"
        for spelled in ("runs/", "./runs", str(work / "runs"), str(work / "runs" / ".." / "runs")):
            found = cli._done_run_dir(cfg.model_copy(update={"out_dir": spelled}))
            assert found is not None and found.resolve() == (work / "runs" / old.name).resolve(), spelled
        # fewer episodes than planned (a summary rebuilt from a cut-off run) is not finished
        (old / "summary.json").write_text(json.dumps({**summary, "episodes_finished": 0}))
        assert cli._done_run_dir(cfg) is None
        assert cli._done_run_dir(cfg.model_copy(update={"out_dir": "nowhere"})) is None


def test_the_help_and_the_continue_hint_name_skip_done(capsys):
    from typer.testing import CliRunner

    r = CliRunner().invoke(cli.app, ["sweep", "--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0 and "--skip-done" in r.output
    assert cli._continue_hint(False) == ("  to continue: re-run the same command with --skip-done: the runs that "
                                         "finished are skipped, the others run again")
    assert "--skip-done" in cli._continue_hint(True)
    cli._failed_runs_note([(["episodes=9"], None)], ["/a", "/b"], 3, hint=cli._continue_hint(False))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sweep: 1 of 3 runs failed; the 2 finished runs are compared above")
    assert out[1] == cli._continue_hint(False)


def test_an_interrupted_sweep_says_to_continue_with_skip_done(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "coopsim.cli", "sweep", str(CFG), "--grid", "episodes=1,1000000",
                          "seeds=[0]", "max_steps=5", "out_dir=runs", "--jobs", "1"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True)
    try:
        t0 = time.monotonic()  # the long run (after the short one) has finished an episode
        while not [m for m in tmp_path.glob("runs/line-random-1000000-*/metrics.jsonl") if m.stat().st_size]:
            assert time.monotonic() - t0 < 120 and p.poll() is None
            time.sleep(0.2)
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, (out, err)
    lines = err.splitlines()
    assert lines[-2] == cli._continue_hint(False)
    assert lines[-1].startswith("run directories kept: 2; compare them with: ")
    (short,) = [n for n in _run_dirs(tmp_path) if n.startswith("line-random-1-")]
    assert f"  kept (finished) -> runs/{short}" in lines


def test_config_differences_name_the_keys():
    from coopsim.platform.report import config_differences

    a = {"name": "x", "out_dir": "runs", "seeds": [0], "agents": {"id": "a", "params": {"lr": 0.1}}}
    assert config_differences(a, {**a, "out_dir": "./runs/"}) == []  # where, not what
    assert config_differences(a, {**a, "seeds": [1], "agents": {"id": "a", "params": {"lr": 0.2, "k": 3}}}) == [
        "agents.params.k: (not set) -> 3", "agents.params.lr: 0.1 -> 0.2", "seeds: [0] -> [1]"]
    assert config_differences(a, {**a, "seeds": [1], "name": "y", "episodes": 2, "max_steps": 5}, limit=2) == [
        "episodes: (not set) -> 2", "max_steps: (not set) -> 5", "... and 2 more"]
