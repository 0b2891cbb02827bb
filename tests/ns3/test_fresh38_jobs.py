"""fresh38 F1: a second Ctrl-C during the interrupt's save."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from coopsim.comm.ns3 import experiment
from coopsim.errors import sigterm_as_interrupt

SMALL = {
    "scenario": {"num_agents": 3, "obs_radius_m": 0.5, "payload_floats": 24},
    "senders": ["ddacom"],
    "sender_params": {"ddacom": {"target_utilization": 0.5}},
    "num_envs": 1, "episodes": 1, "seeds": 1,
    "oracle": {"rates": 3, "min_frac": 0.1, "max_frac": 0.5, "drain_steps": 3},
    "channel": {"id": "ns3-v0", "params": {"latency_bound_s": 0.1}},
}


def _config(tmp_path: Path, seeds: int) -> Path:
    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(dict(SMALL, seeds=seeds)))
    return cfg


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
