"""Fresh-user pass 24, sweep and time-to-win items: a sweep run that dies is reported with its cause and its kept
episodes, and the finished runs are compared (or the sweep says why not); a sweep's `coopsim run` children die with
the sweep (even a SIGKILLed one); a --grid over a train.* key (which `coopsim run` ignores) is refused; a resume of
benchmarks/smac_time_to_win.py with a new budget lists train.total_env_steps once in time_to_win.json."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coopsim import cli
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "examples" / "line-random.yaml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250"}


def _flat(text: str) -> str:
    return " ".join(text.split())


def _pids(*parts: str) -> list[int]:
    """Live processes (not zombies: theirs is empty) whose command line holds every one of ``parts``."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                cmd = (p / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
            except OSError:
                continue
            if all(x in cmd for x in parts):
                pids.append(int(p.name))
    return pids


def _wait_for(what, timeout_s: float = 90.0, step_s: float = 0.2):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        got = what()
        if got:
            return got
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s} s")


def _episodes_written(out_dir: Path) -> list[Path]:
    return [d for d in out_dir.glob("*/metrics.jsonl") if d.stat().st_size > 0]


def _kill_all(p: subprocess.Popen, text: str) -> None:
    """Pass or fail: no sweep and no `coopsim run` child mentioning ``text`` is left running."""
    for pid in [p.pid, *_pids("coopsim.cli", text)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=10)


def _start_sweep(tmp_path: Path, episodes: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "coopsim.cli", "sweep", str(CFG), "--grid", f"episodes={episodes}",
                             "seeds=[0]", "max_steps=5", "--jobs", "1", f"out_dir={tmp_path}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True)


# --- 1. a sweep run that dies: its cause, its kept episodes, the comparison of the others --------------------------

def test_a_killed_sweep_run_is_reported_with_its_cause_and_kept_episodes(tmp_path):
    p = _start_sweep(tmp_path, "1000000,2")  # the first run would run for hours; the second takes a second
    try:
        (metrics,) = _wait_for(lambda: _episodes_written(tmp_path))
        (child,) = _pids("coopsim.cli", " run ", str(tmp_path), "episodes=1000000")
        os.kill(child, signal.SIGKILL)
        out, err = p.communicate(timeout=120)
    finally:
        _kill_all(p, str(tmp_path))
    assert p.returncode == 1, (out, err)
    assert "Traceback" not in out + err
    text = _flat(out)
    dead = metrics.parent
    n = sum(1 for ln in metrics.read_text().splitlines() if ln.strip())
    assert n >= 1
    assert "episodes=1000000 name=line-random-1000000: killed by signal 9 (SIGKILL)" in text, out
    assert f"its {n} finished episode{'s are' if n > 1 else ' is'} kept in {dead} (metrics.jsonl;" in text, out
    (survivor,) = [d for d in tmp_path.iterdir() if d.name.startswith("line-random-2-")]
    assert f"done 'seeds=[0]' max_steps=5 out_dir={tmp_path} episodes=2 name=line-random-2 -> {survivor}" in text
    assert (f"sweep: 1 of 2 runs failed; only 1 run finished, so there is no comparison (it needs 2 finished runs): "
            f"{survivor}") in text, out
    assert "to compare with the finished episodes of the failed run too: " in text
    assert text.rstrip().endswith(f"report {survivor} {dead}")
    # the command it prints works: the failed run's kept episodes compared with the finished run
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "report", str(survivor), str(dead)], capture_output=True,
                       text=True, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"the {n} of 1000000 episode(s) finished so far" in _flat(r.stdout), r.stdout


def test_an_interrupted_sweep_names_the_runs_that_had_failed_before(tmp_path):
    """Ctrl-C after one run died: the interrupt's summary names the dead run and what it kept, and its compare
    command takes the dead run's kept episodes in too."""
    p = _start_sweep(tmp_path, "1000000,1000001")  # both would run for hours; --jobs 1 runs them one after another
    try:
        (metrics,) = _wait_for(lambda: _episodes_written(tmp_path))
        (child,) = _pids("coopsim.cli", " run ", str(tmp_path), "episodes=1000000 ")
        os.kill(child, signal.SIGKILL)
        _wait_for(lambda: len(_episodes_written(tmp_path)) == 2)  # the second run has finished an episode
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        _kill_all(p, str(tmp_path))
    assert p.returncode == 130, (out, err)
    assert "Traceback" not in out + err
    dead = metrics.parent
    (second,) = [d for d in tmp_path.iterdir() if d.name.startswith("line-random-1000001-")]
    n = len([ln for ln in (dead / "metrics.jsonl").read_text().splitlines() if ln.strip()])
    text = _flat(err)
    assert (f"failed earlier: 'seeds=[0]' max_steps=5 out_dir={tmp_path} episodes=1000000 name=line-random-1000000 "
            f"-> {dead} (its {n} finished episode{'s' if n != 1 else ''} kept)") in text, err
    assert f"kept (interrupted) 'seeds=[0]' max_steps=5 out_dir={tmp_path} episodes=1000001" in text, err
    assert "run directories kept: 2; compare them with: " in text and text.rstrip().endswith(f"report {second} {dead}")


def test_failure_causes_and_the_summary_of_a_sweep_with_failed_runs(tmp_path, capsys):
    assert cli._failure_cause(-9, "run directory: x\n") == \
        "killed by signal 9 (SIGKILL) (kill -9, or the out-of-memory killer)"
    assert cli._failure_cause(-15, "") == "killed by signal 15 (SIGTERM)"
    assert cli._failure_cause(1, "run directory: x\nerror: the run failed: ValueError: boom\n  its finished ...\n") == \
        "exit code 1: error: the run failed: ValueError: boom"
    assert cli._failure_cause(1, "Traceback (most recent call last):\n  File ...\nMemoryError: oops\n") == \
        "exit code 1: MemoryError: oops"
    assert cli._failure_cause(3, "") == "exit code 3"
    assert cli._failure_cause(143, "").startswith("interrupted (exit code 143: SIGTERM")

    run = tmp_path / "r-1"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"seed": 0, "a": 1}\n{"seed": 0, "a": 2}\n{"seed": 0, "a": 3}\n{"seed"')  # a killed run's last line is cut
    failed, done = [], []
    cli._sweep_result(["episodes=9"], -9, f"run directory: {run}\n", done, failed)
    cli._sweep_result(["episodes=8"], 2, "error: key 'x': bad\n", done, failed)
    text = _flat(capsys.readouterr().out)
    assert failed == [(["episodes=9"], str(run)), (["episodes=8"], None)] and done == []
    assert f"failed episodes=9: killed by signal 9 (SIGKILL) (kill -9, or the out-of-memory killer) its 3 finished " \
           f"episodes are kept in {run} (metrics.jsonl; " in text
    assert "its output" not in text.split("failed episodes=8")[0]  # nothing but the run directory line: not repeated
    assert ("failed episodes=8: exit code 2: error: key 'x': bad no run directory was made (it failed before its "
            "first episode): nothing kept its output (the end): | error: key 'x': bad") in text

    cli._failed_runs_note(failed, ["/a", "/b"], 4)  # two finished: compared above; the failed one is named
    assert _flat(capsys.readouterr().out) == (
        "sweep: 2 of 4 runs failed; the 2 finished runs are compared above (the failed ones are not in the "
        f"comparison) to compare with the finished episodes of the failed run too: {cli._invoked_as()} report /a /b "
        f"{run}")
    cli._failed_runs_note(failed, [], 2)
    assert _flat(capsys.readouterr().out) == "sweep: 2 of 2 runs failed; no run finished, so there is no comparison"


# --- 2. the sweep's children die with it -----------------------------------------------------------------------

def test_a_sigkilled_sweep_takes_its_running_child_with_it(tmp_path):
    p = _start_sweep(tmp_path, "1000000,2")
    try:
        (metrics,) = _wait_for(lambda: _episodes_written(tmp_path))
        (child,) = _pids("coopsim.cli", " run ", str(tmp_path), "episodes=1000000")
        os.kill(p.pid, signal.SIGKILL)  # as `timeout -s KILL` or the out-of-memory killer would
        p.wait(timeout=10)
        gone = _wait_for(lambda: not _pids("coopsim.cli", " run ", str(tmp_path)) or None, timeout_s=30)
        assert gone, "the sweep's `coopsim run` child outlived the sweep"
        # it got SIGTERM, which `coopsim run` takes as Ctrl-C: its finished episodes and a valid summary are kept
        summary = json.loads(_wait_for(lambda: (metrics.parent / "summary.json").is_file()
                                       and (metrics.parent / "summary.json").read_text(), timeout_s=10))
        assert summary["interrupted"] is True and summary["episodes_finished"] >= 1
        assert not [d for d in tmp_path.iterdir() if d.name.startswith("line-random-2-")]  # nothing more started
    finally:
        _kill_all(p, str(tmp_path))


def test_the_child_setup_ends_a_child_whose_sweep_is_already_gone():
    # the parent pid the sweep passes is not this process's parent: as if the sweep died between fork and prctl
    r = subprocess.run([sys.executable, "-c", "import sys"], preexec_fn=cli._child_setup(-1), env=ENV)
    assert r.returncode == 143
    r = subprocess.run([sys.executable, "-c", "import sys"], preexec_fn=cli._child_setup(os.getpid()), env=ENV)
    assert r.returncode == 0


# --- 4. a --grid over a train.* key: `coopsim run` ignores it, so the grid would only repeat one run --------------

@pytest.mark.parametrize("config, agent, why", [
    ("configs/examples/line-random.yaml", "random-v0",
     "agent 'random-v0' does not train (it cannot be trained), and `coopsim run` (one per grid value) ignores the "
     "train: section"),
    ("configs/ppo/linewalk-mappo.yaml", "ppo/mappo-v0",
     "the agent does not train in a sweep: each grid value is a `coopsim run`, which evaluates agent 'ppo/mappo-v0' "
     "as it is and ignores the train: section (only `coopsim train` reads it)")])
def test_a_grid_over_a_train_key_is_refused(tmp_path, config, agent, why):
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "sweep", config, "--grid", "train.lr=0.001,0.01",
                        "--grid", "seeds=0,1", f"out_dir={tmp_path / 'out'}"], capture_output=True, text=True, env=ENV,
                       cwd=ROOT)
    assert r.returncode == 2, r.stdout + r.stderr
    err = _flat(r.stderr)
    assert err.startswith(f"error: --grid train.lr: {why}, so every value of train.lr would repeat the same run; "
                          f"drop --grid train.lr"), err
    assert "Traceback" not in err and "warning" not in err and r.stdout == ""
    assert not (tmp_path / "out").exists()  # nothing ran


# --- 3. smac_time_to_win.py --resume with a new budget: the override listed once --------------------------------

def _ttw():
    return load_benchmark("smac_time_to_win")


def test_time_to_win_resumes_list_the_budget_override_once(tmp_path):
    from coopsim.platform.config import check_unique_overrides, load_config

    ttw = _ttw()
    assert ttw.main([str(ROOT / "configs/smac/3m-mappo.yaml"), "--seeds", "0", "--eval-every", "64",
                     "--eval-episodes", "2", "train.total_env_steps=128", "train.num_envs=2", "train.rollout_steps=32",
                     "train.checkpoint_every=1", "train.progress=false", f"out_dir={tmp_path}"]) == 0
    (run,) = tmp_path.iterdir()
    assert ttw.main(["--resume", str(run), "train.total_env_steps=192"]) == 0
    assert ttw.main(["--resume", str(run), "train.total_env_steps=256"]) == 0
    overrides = json.loads((run / "time_to_win.json").read_text())["overrides"]
    assert overrides == ["train.num_envs=2", "train.rollout_steps=32", "train.checkpoint_every=1",
                         "train.progress=false", f"out_dir={tmp_path}", "train.total_env_steps=256"]
    check_unique_overrides(overrides, "3m-mappo.yaml")  # coopsim takes the list back
    assert load_config(ROOT / "configs/smac/3m-mappo.yaml", overrides).train["total_env_steps"] == 256
