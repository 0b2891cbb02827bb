"""fresh38 F1, F2, F8, F9, F11: `--jobs` workers that die, a second Ctrl-C during the interrupt's save, Ctrl-C while the
workers start, the exit code of a failure of ns-3 or a worker, and the --jobs notes."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
import yaml

from cli_helpers import SMALL_NS3_EXPERIMENT
from coopsim.comm.ns3 import experiment
from coopsim.errors import ChannelError, ConfigError, run_script, sigterm_as_interrupt

SMALL = {**SMALL_NS3_EXPERIMENT, "sender_params": {"ddacom": {"target_utilization": 0.5}}}
MARKS = "COOPSIM_TEST_FRESH38_MARKS"  # a folder where the workers below leave their notes
_REAL_WORKER_SEED = experiment._worker_seed


def _config(tmp_path: Path, seeds: int) -> Path:
    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(dict(SMALL, seeds=seeds)))
    return cfg


# --- run in the --jobs workers (spawned: they import this module by name) ---

def probe_init(cid: str, cparams: dict) -> None:
    """The worker's initializer, noting first whether SIGINT is still blocked as the parent started it (so a Ctrl-C
    during the worker's imports was never seen)."""
    blocked = next(int(line.split()[1], 16) for line in open("/proc/self/status") if line.startswith("SigBlk:"))
    experiment._worker_init(cid, cparams)
    marks = Path(os.environ[MARKS])
    (marks / f"init-{os.getpid()}").write_text(json.dumps({
        "sigint_blocked_at_start": bool(blocked & (1 << (signal.SIGINT - 1))),
        "sigint_ignored_now": signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
        "bridge": experiment._WORKER_CHANNEL._proc.pid if experiment._WORKER_CHANNEL._proc else None}))


def seed_killed_at_1(arg: tuple):
    """Seed 1's worker is killed (kill -9) once seeds 2 and 3 have finished in the other worker; the other seeds run."""
    seed = arg[0]
    marks = Path(os.environ[MARKS])
    if seed == 1:
        t0 = time.monotonic()
        while not all((marks / f"done-{s}").exists() for s in (2, 3)) and time.monotonic() - t0 < 120:
            time.sleep(0.1)
        time.sleep(1.5)  # their results reach the parent
        os.kill(os.getpid(), signal.SIGKILL)
    out = experiment._worker_seed(arg)
    ch = experiment._WORKER_CHANNEL
    (marks / f"done-{seed}").write_text(json.dumps({"worker": os.getpid(), "bridge": ch._proc.pid}))
    return out


def _gone(pid: int) -> bool:
    try:
        state = next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("State:"))
    except FileNotFoundError:
        return True
    return state == "Z"  # ended, not reaped yet (its parent was a worker that is gone)


def test_a_killed_worker_is_one_error_naming_the_seed_and_the_contiguous_seeds_are_kept(
        ns3_bridge, tmp_path, monkeypatch, capsys):
    # F2: a worker killed by SIGKILL (here seed 1's, after seeds 2 and 3 finished in the other worker) used to make
    # Pool.imap wait forever; now it is one error naming the seed and what --out keeps: seed 0 only, since seeds 2-3
    # finished ahead of seed 1 and are not claimed. No worker or ns-3 bridge is left. F8: the workers started with
    # SIGINT blocked (a Ctrl-C during their imports is not seen), then ignore it.
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv(MARKS, str(marks))
    monkeypatch.setattr(experiment, "_worker_init", probe_init)
    monkeypatch.setattr(experiment, "_worker_seed", seed_killed_at_1)
    out = tmp_path / "k.json"
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    with pytest.raises(experiment.SeedsFailed) as info:
        experiment.main([str(_config(tmp_path, 6)), "--oracle-cache", str(tmp_path / "c"), "--no-oracle",
                         "--out", str(out), "--jobs", "2"])
    msg = str(info.value)
    assert msg.startswith("seed 1 did not finish: a --jobs worker process (pid ")
    assert "was killed by SIGKILL (kill -9, or the out-of-memory killer)" in msg
    # seeds 1-4 were in flight (2 x jobs): 2-3 had finished, 4 too unless the pool broke first
    assert re.search(f"; kept: {re.escape(str(out))} with 1 of 6 seed\\(s\\) \\(seeds 0..0\\), a valid JSON file; the "
                     "same command resumes from them; [23] later seed\\(s\\) that had finished before an earlier one "
                     "\\(--jobs\\) are not in it and run again$", msg), msg
    assert isinstance(info.value, ChannelError) and "\n" not in msg
    d = json.loads(out.read_text())
    assert d["seeds_done"] == 1 and [r["seed"] for r in d["runs"] if r["channel_name"] == "ns3"] == [0]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask  # the parent's mask is as it was
    inits = [json.loads(p.read_text()) for p in marks.glob("init-*")]
    assert len(inits) == 2 and all(i["sigint_blocked_at_start"] and i["sigint_ignored_now"] for i in inits)
    pids = [int(p.name.split("-")[1]) for p in marks.glob("init-*")]
    pids += [i["bridge"] for i in inits if i["bridge"]]
    pids += [v for p in marks.glob("done-*") for v in json.loads(p.read_text()).values()]
    t0 = time.monotonic()
    while not all(_gone(p) for p in pids) and time.monotonic() - t0 < 10:  # a bridge ends once it sees its worker go
        time.sleep(0.1)
    assert all(_gone(p) for p in pids), [p for p in pids if not _gone(p)]
    # the same command resumes from seed 1 (and runs seeds 2-3 again)
    monkeypatch.setattr(experiment, "_worker_seed", _REAL_WORKER_SEED)
    capsys.readouterr()
    experiment.main([str(_config(tmp_path, 6)), "--oracle-cache", str(tmp_path / "c"), "--no-oracle",
                     "--out", str(out), "--jobs", "2"])
    assert "reusing 1 finished seed(s)" in capsys.readouterr().out
    assert json.loads(out.read_text())["seeds_done"] == 6


def test_a_failure_of_ns3_exits_1_with_what_was_kept(ns3_bridge, tmp_path, monkeypatch, capsys):
    # F11: ns-3's bridge crashing during seed 2 is not an error of the input: one line naming the seed and what --out
    # keeps (seeds 0-1, the same command resumes), exit code 1, not the input errors' 2
    real = experiment.seed_runs

    def crash_at_2(seed, **kw):
        if seed == 2:
            raise ChannelError("ns-3 bridge (pid 1234) closed its output (crashed); it exited with code -9")
        return real(seed, **kw)

    monkeypatch.setattr(experiment, "seed_runs", crash_at_2)
    monkeypatch.setattr(experiment, "WRITE_EVERY_S", 1e9)  # seed 1 is written by the error's save
    out = tmp_path / "b.json"
    with pytest.raises(SystemExit) as info:
        run_script(experiment.cli, [str(_config(tmp_path, 4)), "--oracle-cache", str(tmp_path / "c"),
                                    "--no-oracle", "--out", str(out)], kept=experiment.kept_on_interrupt)
    err = capsys.readouterr().err
    assert info.value.code == 1
    assert err == (f"error: seed 2 failed: ns-3 bridge (pid 1234) closed its output (crashed); it exited with code -9; "
                   f"kept: {out} with 2 of 4 seed(s) (seeds 0..1), a valid JSON file; the same command resumes from "
                   "them\n")
    assert json.loads(out.read_text())["seeds_done"] == 2
    # an error of the input is still 2
    with pytest.raises(SystemExit) as info:
        run_script(experiment.cli, [str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "x.json")])
    assert info.value.code == 2


def test_a_second_signal_during_the_interrupts_save_does_not_cut_it(ns3_bridge, tmp_path, monkeypatch, capsys):
    # F1: Ctrl-C at seed 2, then a second Ctrl-C and a SIGTERM while the interrupt's save runs (a big file takes
    # seconds): both are ignored until the save is done, so the file holds seeds 0-1, not just the first seed's write;
    # the handlers are put back afterwards. The table kept_on_interrupt prints is not cut by another Ctrl-C either.
    real_seed, real_write = experiment.seed_runs, experiment.atomic_write_json

    def stop_at_2(seed, **kw):
        if seed == 2:
            raise KeyboardInterrupt
        return real_seed(seed, **kw)

    def write(path, data, **kw):
        if data.get("seeds_done") == 2:  # the interrupt's save
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # either would be raised here
        return real_write(path, data, **kw)

    monkeypatch.setattr(experiment, "seed_runs", stop_at_2)
    monkeypatch.setattr(experiment, "atomic_write_json", write)
    monkeypatch.setattr(experiment, "WRITE_EVERY_S", 1e9)  # seed 1 is written by the interrupt's save alone
    out = tmp_path / "cut.json"
    handlers = signal.getsignal(signal.SIGINT)
    with sigterm_as_interrupt():  # as run_script: a SIGTERM that gets through raises Terminated
        term = signal.getsignal(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt) as info:
            experiment.main([str(_config(tmp_path, 4)), "--oracle-cache", str(tmp_path / "c"), "--no-oracle",
                             "--out", str(out)])
        assert type(info.value) is KeyboardInterrupt  # the first one, not a Terminated of the second signal
        assert signal.getsignal(signal.SIGTERM) is term
    assert signal.getsignal(signal.SIGINT) is handlers
    assert json.loads(out.read_text())["seeds_done"] == 2

    def table(summary):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        print("table")

    monkeypatch.setattr(experiment, "print_results", table)
    assert experiment.kept_on_interrupt().startswith(f"{out} with 2 of 4 seed(s) (seeds 0..1)")
    assert "table" in capsys.readouterr().out


def test_signals_held_restores_the_handlers():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with experiment.signals_held():
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN == signal.getsignal(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_jobs_help_and_notes(tmp_path, monkeypatch, capsys):
    # F9: --help gives the range and the cap; --calibrate says it ignores --jobs
    with pytest.raises(SystemExit):
        experiment.main(["--help"])
    text = "".join(capsys.readouterr().out.split())  # as wrapped at any width (argparse breaks at ns-|3 too)
    for part in ("--jobs N ns-3 seeds run at a time, 0..256,", "at most the number of seeds to run",
                 "it helps only with idle cores", "not used by --calibrate"):
        assert "".join(part.split()) in text, part
    with pytest.raises(ConfigError):  # the note comes first
        experiment.main([str(tmp_path / "nope.yaml"), "--calibrate", "0", "--jobs", "2", "--out",
                         str(tmp_path / "r.json")])
    assert "note: --jobs 2 is ignored with --calibrate" in capsys.readouterr().out


def test_jobs_above_the_cores_and_the_seeds_say_so(ns3_bridge, tmp_path, monkeypatch, capsys):
    # F9: more processes than cores: a note; more than the seeds to run: capped, and the line says so
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    experiment.main([str(_config(tmp_path, 2)), "--oracle-cache", str(tmp_path / "c"), "--no-oracle",
                     "--out", str(tmp_path / "j.json"), "--jobs", "64"])
    out = capsys.readouterr().out
    assert "running seeds 0..1 in 2 processes (--jobs 64, at most one per seed to run)" in out
    assert "note: 2 processes on 1 CPU core(s): they share the cores" in out


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _start(tmp_path: Path, seeds: int, *extra: str):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "coopsim.comm.ns3.experiment", str(_config(tmp_path, seeds)), "--oracle-cache",
           str(tmp_path / "c"), "--no-oracle", "--out", str(tmp_path / "o.json"), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_workers_die_with_a_parent_killed_by_sigkill(ns3_bridge, tmp_path):
    # fresh38b G1: the parent killed with kill -9 (or by the OOM killer) left both --jobs workers (and their ns-3
    # children) running; now each worker has PR_SET_PDEATHSIG, as the bridge has
    proc = _start(tmp_path, 200, "--jobs", "2")
    workers: list[int] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        kids = [k for k in _children(proc.pid) if "spawn_main" in Path(f"/proc/{k}/cmdline").read_text(errors="replace")
                ] if proc.poll() is None else []
        if len(kids) == 2 and all(_children(k) for k in kids):  # both workers run their ns-3 child
            workers = kids
            break
        time.sleep(0.2)
    assert len(workers) == 2, proc.communicate()
    bridges = [b for w in workers for b in _children(w)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    t0 = time.monotonic()
    while not all(_gone(p) for p in workers + bridges) and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    assert all(_gone(p) for p in workers + bridges), [p for p in workers + bridges if not _gone(p)]


def test_a_hangup_keeps_the_finished_seeds_like_sigterm(ns3_bridge, tmp_path):
    # fresh38b G2: SIGHUP (the terminal closed) ended the run with the file as of its last spaced write; now it is
    # handled as SIGTERM: the finished seeds are saved, "hung up; kept: ...", exit 129
    proc = _start(tmp_path, 200)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("seed 2 ddacom"):
            break
    os.kill(proc.pid, signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err
    kept = json.loads((tmp_path / "o.json").read_text())["seeds_done"]
    assert kept >= 2  # seeds 0-1 were taken before seed 2's line (the spaced writes alone would hold seed 0 only)
    assert err.strip().endswith(f"hung up; kept: {tmp_path / 'o.json'} with {kept} of 200 seed(s) (seeds "
                                f"0..{kept - 1}), a valid JSON file; the same command resumes from them"), err
