"""Fixes from a new-user pass: an interrupted `coopsim train` without periodic checkpoints keeps (and says) the state
of its last completed iteration and resumes exactly from it; the summary and comparison tables hide exactly the
all-zero comm/, shield/ and cost/ counters; confidence intervals of non-negative quantities stop at 0; benchmark
scripts stop on Ctrl-C with one line and exit code 130; benchmark run directories use the recorder's name format."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from coopsim.platform import training
from coopsim.platform.trainer import load_checkpoint, read_metrics
from coopsim.platform.training import train_main

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

# 20 iterations of 64 env steps; no periodic checkpoint (checkpoint_every unset: only at the end)
CFG = {
    "name": "interrupt-test",
    "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 3, "length": 7}},
    "agents": {"id": "ppo/mappo-v0", "params": {"hidden": [16], "recurrent": True}},
    "seeds": [0],
    "max_steps": 12,
    "train": {"total_env_steps": 20 * 8 * 8, "num_envs": 8, "rollout_steps": 8, "lr": 0.003, "epochs": 2,
              "minibatches": 2, "progress": False, "tensorboard": False},
}


def _write_cfg(tmp_path: Path) -> str:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    return str(p)


def _signal_during(monkeypatch, iteration: int, times: int = 1, sig: int = signal.SIGINT) -> None:
    """Make the trainer ``train_main`` builds send itself ``sig`` (``times`` times) at the start of its iteration
    number ``iteration`` (1-based), i.e. while that iteration runs."""
    real = training.build_trainer

    def build(*a, **k):
        trainer, train = real(*a, **k)
        inner, calls = trainer.train_iteration, [0]

        def train_iteration():
            calls[0] += 1
            if calls[0] == iteration:
                for _ in range(times):
                    os.kill(os.getpid(), sig)
                    time.sleep(0.01)
            return inner()

        trainer.train_iteration = train_iteration
        return trainer, train

    monkeypatch.setattr(training, "build_trainer", build)


def _same_run(a: Path, b: Path) -> None:
    ra, rb = read_metrics(a / "seed-0"), read_metrics(b / "seed-0")
    assert len(ra) == 20 and ra == rb  # every row, every column except wall-clock ones, bit for bit
    pa = torch.load(a / "seed-0" / "policy.pt", weights_only=False)["net"]
    pb = torch.load(b / "seed-0" / "policy.pt", weights_only=False)["net"]
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("full")
    return train_main(_write_cfg(tmp), [f"out_dir={tmp}"], None)


def test_interrupt_without_periodic_checkpoints_keeps_the_last_iteration_and_resumes_exactly(tmp_path, monkeypatch,
                                                                                              full_run):
    cfg = _write_cfg(tmp_path)
    _signal_during(monkeypatch, iteration=7)
    notes = []
    with pytest.raises(KeyboardInterrupt) as ei:
        train_main(cfg, [f"out_dir={tmp_path / 'cut'}"], None, info=notes.append)
    run = ei.value.run_dir
    ck = load_checkpoint(run / "seed-0" / "checkpoint.pt")
    # the signal came during iteration 7: that iteration finishes, is logged and checkpointed, nothing after it
    assert ck["trainer"]["iteration"] == 7 and ck["env_steps"] == 7 * 64
    assert len(read_metrics(run / "seed-0")) == 7
    assert not (run / "seed-0" / "policy.pt").exists() and not (run / "train_summary.json").exists()
    assert ei.value.kept == f"seed 0: checkpoint at 448 of 1,280 env steps ({run / 'seed-0' / 'checkpoint.pt'})"
    assert notes[-1] == "stopped: " + ei.value.kept
    assert training.steps_done(run / "seed-0") == 448  # --resume reports "seed 0 at 448", not "not started"
    monkeypatch.undo()
    assert train_main(cfg, [], str(run)) == run
    _same_run(full_run, run)


def test_second_interrupt_in_the_first_iteration_keeps_the_initial_state(tmp_path, monkeypatch, full_run):
    """A second Ctrl-C stops the running iteration at once; with no checkpoint yet, the state before the first
    iteration is written, so --resume continues (and exactly) rather than reporting 'not started'."""
    cfg = _write_cfg(tmp_path)
    _signal_during(monkeypatch, iteration=1, times=2)
    with pytest.raises(KeyboardInterrupt) as ei:
        train_main(cfg, [f"out_dir={tmp_path / 'cut'}"], None)
    run = ei.value.run_dir
    ck = load_checkpoint(run / "seed-0" / "checkpoint.pt")
    assert ck["trainer"]["iteration"] == 0 and ck["env_steps"] == 0
    assert ei.value.kept.startswith("seed 0: checkpoint at 0 of 1,280 env steps")
    monkeypatch.undo()
    assert train_main(cfg, [], str(run)) == run
    _same_run(full_run, run)


def test_signal_handlers_are_restored_after_fit(tmp_path, monkeypatch):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    _signal_during(monkeypatch, iteration=2)
    with pytest.raises(KeyboardInterrupt):
        train_main(_write_cfg(tmp_path), [f"out_dir={tmp_path / 'cut'}"], None)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_cli_train_signal_without_periodic_checkpoints_writes_the_checkpoint_it_names(tmp_path, sig, code, word):
    """The reported case: `coopsim train` with checkpoint_every unset, stopped mid-run, used to print 'the last
    checkpoint is kept' with no checkpoint.pt, and --resume said 'seed 0 not started'."""
    cfg = REPO / "configs" / "ppo" / "linewalk-mappo.yaml"
    p = subprocess.Popen([sys.executable, "-m", "coopsim.cli", "train", str(cfg), "train.checkpoint_every=0",
                          "train.total_env_steps=10000000", "train.progress=false", "train.tensorboard=false",
                          f"out_dir={tmp_path}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120 and p.poll() is None:
            csvs = list(tmp_path.glob("*/seed-0/metrics.csv"))
            if csvs and len(csvs[0].read_text().splitlines()) >= 3:
                break
            time.sleep(0.2)
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code and "Traceback" not in out + err, (out, err)
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    ck = load_checkpoint(run / "seed-0" / "checkpoint.pt")
    rows = read_metrics(run / "seed-0")
    assert ck["env_steps"] == int(rows[-1]["env_steps"]) > 0  # the last logged iteration, nothing lost
    assert f"stopped: seed 0: checkpoint at {ck['env_steps']:,} of 10,000,000 env steps" in out
    assert f"{word}: the last checkpoint is kept" in err and f"--resume {run}" in err
