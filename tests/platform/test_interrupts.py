"""SIGINT to `coopsim sweep` stops every child (including the one it waits on) so each keeps its summary;
SIGTERM to `coopsim run` keeps the finished episodes and a valid summary like Ctrl-C does."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pathlib import Path

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _wait_for_episodes(out_dir: Path, n_dirs: int, timeout_s: float = 90.0) -> list[Path]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        dirs = [d for d in out_dir.iterdir() if d.is_dir()]
        if len(dirs) >= n_dirs and all((d / "metrics.jsonl").is_file() and (d / "metrics.jsonl").stat().st_size > 0
                                       for d in dirs):
            return dirs
        time.sleep(0.3)
    raise AssertionError(f"no episodes written under {out_dir} in {timeout_s} s")


def _signal_and_wait(p: subprocess.Popen, sig: int, timeout_s: float = 60.0) -> tuple[str, str]:
    """Send ``sig`` to ``p``, wait for it to exit and return (stdout, stderr); kill it if it is still alive."""
    try:
        p.send_signal(sig)
        return p.communicate(timeout=timeout_s)
    finally:
        if p.poll() is None:
            p.kill()


def _live_children_mentioning(text: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                cmd = (p / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if text in cmd and "coopsim.cli" in cmd:
                pids.append(int(p.name))
    return pids


def _kill_process_groups(p: subprocess.Popen, text: str) -> None:
    """SIGKILL ``p``'s process group and that of every live `coopsim.cli` process mentioning ``text`` (the sweep's
    `coopsim run` children each lead a session of their own, so the sweep's group does not hold them)."""
    groups = {p.pid}  # p leads its own session: its group id is its pid, and stays taken while the group lives
    for pid in _live_children_mentioning(text):
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    groups.discard(os.getpgrp())  # never the test's own group
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=10)


def test_sigint_to_sweep_stops_every_child_and_keeps_summaries(tmp_path):
    # a session of its own, so the cleanup can kill the sweep's process group without the test's
    p = subprocess.Popen([sys.executable, "-m", "coopsim.cli", "sweep", str(CFG), "--grid",
                          "scenario.params.num_agents=2,3,4", "--jobs", "2", f"out_dir={tmp_path}", "seeds=[0]",
                          "episodes=1000000", "max_steps=5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV, start_new_session=True)
    try:
        dirs = _wait_for_episodes(tmp_path, 2)
        out, err = _signal_and_wait(p, signal.SIGINT, 120)
        assert p.returncode == 130, (out, err)
        assert "Traceback" not in out + err
        assert err.count("kept (interrupted)") == 2, err
        assert "not started: 1 run(s)" in err
        time.sleep(0.5)
        assert not _live_children_mentioning(str(tmp_path)), "a coopsim run child outlived the sweep"
        for d in dirs:
            assert str(d) in err
            summary = json.loads((d / "summary.json").read_text())
            assert summary["interrupted"] is True and summary["episodes_finished"] >= 1
    finally:  # pass or fail, no sweep and no run child is left running
        _kill_process_groups(p, str(tmp_path))


def test_sigterm_to_run_keeps_episodes_and_summary(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "coopsim.cli", "run", str(CFG), f"out_dir={tmp_path}", "seeds=[0]",
                          "episodes=1000000", "max_steps=5", "--no-progress"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        (d,) = _wait_for_episodes(tmp_path, 1)
    except BaseException:
        p.kill()
        raise
    out, err = _signal_and_wait(p, signal.SIGTERM)
    assert p.returncode == 143, (out, err)
    assert "Traceback" not in out + err
    assert f"terminated: finished episodes and a valid summary are kept in {d}" in err
    summary = json.loads((d / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["episodes_finished"] >= 1


def test_sigint_to_train_prints_a_resume_command_that_works(tmp_path):
    """The printed `continue with:` line carries the command-line overrides, so running it resumes the run."""
    import shlex

    cfg = Path(__file__).resolve().parents[2] / "configs" / "ppo" / "linewalk-mappo.yaml"
    args = [str(cfg), "name=resume-hint", "train.total_env_steps=10000000", f"out_dir={tmp_path}"]

    def start(extra):
        return subprocess.Popen([sys.executable, "-m", "coopsim.cli", "train", *args, *extra], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=ENV)

    def interrupt(p, ck: Path, newer_than: float = -1.0):
        """SIGINT once ``ck`` was written after ``newer_than`` (mtime), i.e. the trainer is in its loop."""
        t0 = time.monotonic()
        while not (ck.is_file() and ck.stat().st_mtime > newer_than) and time.monotonic() - t0 < 120 \
                and p.poll() is None:
            time.sleep(0.3)
        return _signal_and_wait(p, signal.SIGINT)

    procs = []
    try:
        p = start([])
        procs.append(p)
        t0 = time.monotonic()
        while not any(tmp_path.iterdir()) and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
        ck = run / "seed-0" / "checkpoint.pt"
        out, err = interrupt(p, ck)
        assert p.returncode == 130 and "Traceback" not in out + err, err
        line = next(ln for ln in err.splitlines() if "continue with: coopsim train " in ln)
        again = shlex.split(line.split("continue with: coopsim train ", 1)[1])
        assert again[:len(args)] == args and again[-2:] == ["--resume", str(run)]
        # the printed command resumes and writes a newer checkpoint (the old hint, without the overrides, exited 2
        # with "error: ... key 'name'")
        m0 = ck.stat().st_mtime
        p2 = subprocess.Popen([sys.executable, "-m", "coopsim.cli", "train", *again], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=ENV)
        procs.append(p2)
        out2, err2 = interrupt(p2, ck, newer_than=m0)
        assert p2.returncode == 130 and "error:" not in err2 and "continue with:" in err2, err2
        assert ck.stat().st_mtime > m0
    finally:
        for q in procs:
            if q.poll() is None:
                q.kill()


def test_sweep_keeps_a_childs_early_output_when_an_interrupt_cuts_its_read_short():
    """The 'run directory:' line a child printed before the sweep's read was interrupted is not lost, and a child
    whose result was reported already is not reported again."""
    from coopsim import cli

    child = [sys.executable, "-c", "print('run directory: /runs/x', flush=True); import time; time.sleep(30)"]

    def start():
        return subprocess.Popen(child, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    p, q = start(), start()
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            p.communicate(timeout=cli._CHILD_WAIT_S)  # as the sweep's loop reads its oldest child
        q.coopsim_reported = True
        outs = cli._stop_children([(["a=1"], p), (["b=2"], q)], grace_s=5.0, timeout_s=10.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        for x in (p, q):
            if x.poll() is None:
                x.kill()
            x.wait()
    assert [c for c, _ in outs] == [["a=1"]]
    assert "run directory: /runs/x" in outs[0][1]
    assert p.returncode is not None


def test_a_run_that_finished_before_the_sweeps_interrupt_is_labelled_finished(tmp_path):
    from coopsim import cli

    done, cut, bare = tmp_path / "done", tmp_path / "cut", tmp_path / "bare"
    for d, summary in ((done, '{"interrupted": false}'), (cut, '{"interrupted": true}'), (bare, None)):
        d.mkdir()
        if summary is not None:
            (d / "summary.json").write_text(summary)
    assert cli._finished_uninterrupted(done)
    assert not cli._finished_uninterrupted(cut) and not cli._finished_uninterrupted(bare)
    (bare / "summary.json").write_text("[1, 2")  # damaged: not finished
    assert not cli._finished_uninterrupted(bare)
