"""Fresh-user re-check 34b, the ns-3 findings: N1 the ns-3 experiment and ``ddacom.evaluate`` took each other's
results files for their own (and replaced them), N2 ``--plot`` over the ``--out`` file, N3 a ``header_bytes`` too
large for the payload ended ``coopsim run`` in a traceback, N11 the ``none`` sender's latency line said "nothing
delivered". The experiment's runs are a fake here (as in tests/test_fresh34_ns3.py); only the tests with the
``ns3_bridge`` fixture start a real ns-3 (tiny runs)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from cli_helpers import ROOT, run_cli, run_main
from coopsim.agents.ddacom import evaluate
from coopsim.comm.ns3 import experiment
from coopsim.comm.ns3.channel import Ns3Channel
from coopsim.errors import ConfigError
from coopsim.platform.comm import MessageBatch
from ns3_helpers import TINY_EXPERIMENT as TINY
from ns3_helpers import StubChannel as _StubChannel
from ns3_helpers import boom as _boom
from ns3_helpers import fake_run as _fake_run

RESULTS = ROOT / "benchmarks" / "results"
NO_ORACLE = ["--no-oracle", "--oracle-cache", ""]
EVAL_FAST = ["--seeds", "1", "--num-agents", "3", "--num-envs", "1", "--episodes", "1", "--senders", "none"]


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A tiny experiment file; ``experiment.run`` a fake, the channel a stub that measured no latency."""
    monkeypatch.setattr(experiment, "run", _fake_run)
    monkeypatch.setattr(experiment, "make_component", lambda *a, **k: _StubChannel({}))
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    return cfg


def _refused(main, argv) -> str:
    code, stdout, err = run_main(main, argv)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# N1: each tool recognises only its own results files -------------------------------------------------------------

def _committed():
    return sorted(RESULTS.glob("*.json"))


@pytest.mark.parametrize("path", _committed(), ids=lambda p: p.name)
def test_every_committed_results_file_is_its_own_tools_and_not_the_others(path):
    own_ns3 = experiment.previous_result(path) is not None
    own_eval = evaluate._read_results(path) is not None
    if path.name.startswith("ns3_"):
        assert own_ns3 and not own_eval
    elif path.name.startswith("ddacom_eval_"):
        assert own_eval and not own_ns3
    else:  # ddacom.train's, the speaker-listener notes, smac_speed, ...: neither tool's
        assert not own_ns3 and not own_eval


def test_the_experiment_refuses_a_ddacom_evaluate_results_file_and_keeps_it(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "run_anchors", _boom)
    cases = {"committed.json": (RESULTS / "ddacom_eval_n3_e32.json").read_text(),  # before the writer field
             "new.json": json.dumps({"writer": evaluate.WRITER, "args": {}, "settings": {}, "seeds_done": 1,
                                     "summary": {}, "runs": []}),
             "bare.json": json.dumps({"seeds_done": 1, "runs": []})}  # the generic keys alone: nobody's
    for name, text in cases.items():
        out = tmp_path / name
        out.write_text(text)
        err = _refused(experiment.main, [str(tiny), *NO_ORACLE, "--seeds", "6", "--out", str(out)])
        tail = "" if name == "bare.json" else " (it is a results file of python -m coopsim.agents.ddacom.evaluate)"
        assert err == (f"error: key '--out': {out} exists and is not a results file of coopsim.comm.ns3.experiment"
                       f"{tail}; give another --out or remove it")
        assert out.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare.json", "committed.json", "new.json", "tiny.yaml"]


def test_ddacom_evaluate_refuses_an_ns3_experiment_results_file_and_keeps_it(tiny, tmp_path, monkeypatch):
    written = tmp_path / "written.json"  # one the experiment writes now (with its writer field)
    experiment.main([str(tiny), *NO_ORACLE, "--out", str(written)])
    assert json.loads(written.read_text())["writer"] == "coopsim.comm.ns3.experiment"
    committed = tmp_path / "committed.json"  # before the writer field: command, note, oracle, ...
    shutil.copy(RESULTS / "ns3_ddacom_ramp_12seeds_window1.json", committed)
    monkeypatch.setattr(evaluate, "run", _boom)
    for out in (written, committed):
        before = out.read_text()
        err = _refused(evaluate.main, [*EVAL_FAST, "--seeds", "20", "--out", str(out)])
        assert err == (f"error: key '--out': {out} exists and is not a results file of ddacom.evaluate (it is a "
                       f"results file of python -m coopsim.comm.ns3.experiment); give another --out or remove it")
        assert out.read_text() == before
    assert not list(tmp_path.glob("*.partial-*"))


def test_own_files_still_resume_or_are_kept_with_other_settings(tiny, tmp_path, capsys):
    # the experiment's own file written before the writer field: still resumed
    out = tmp_path / "r.json"
    experiment.main([str(tiny), *NO_ORACLE, "--out", str(out)])
    d = json.loads(out.read_text())
    del d["writer"]
    out.write_text(json.dumps(d))
    capsys.readouterr()
    experiment.main([str(tiny), *NO_ORACLE, "--out", str(out)])
    assert f"reusing 1 finished seed(s) from {out} (the same settings)" in capsys.readouterr().out
    # a result of other settings (12 seeds, no settings record: a file from before resuming existed): kept, this
    # run's result goes beside it (a committed compact copy itself is refused: test_smooth_results_doc.py)
    old = tmp_path / "old.json"
    d = json.loads((RESULTS / "ns3_ddacom_ramp_12seeds_window1.json").read_text())
    del d["note"]
    old.write_text(json.dumps(d))
    before = old.read_text()
    experiment.main([str(tiny), *NO_ORACLE, "--out", str(old)])
    assert f"note: {old} holds a result of 12 seed(s) with other settings" in capsys.readouterr().out
    assert old.read_text() == before and len(list(tmp_path.glob("old.partial-*.json"))) == 1
    # ddacom.evaluate: its committed file (no writer, no settings) is its own: kept until this run has more seeds
    ev = tmp_path / "ev.json"
    shutil.copy(RESULTS / "ddacom_eval_n3_e32.json", ev)
    before = ev.read_text()
    code, stdout, err = run_main(evaluate.main, [*EVAL_FAST, "--out", str(ev)])
    assert code == 0, err
    # (fresh36 F11: a result of other settings is kept until this run has more seeds, the ns-3 experiment's rule)
    assert f"note: {ev} holds a result of 5 seed(s) with other settings (differs in: its settings are not recorded); " \
           "by the rule of coopsim.comm.ns3.experiment that result is DELETED" in stdout
    assert ev.read_text() == before
    (partial,) = tmp_path.glob("ev.partial-*.json")
    assert json.loads(partial.read_text())["writer"] == "coopsim.agents.ddacom.evaluate"


# N2: --plot is never the --out file nor the experiment file ------------------------------------------------------

def test_plot_that_is_the_out_file_or_the_config_is_refused_before_any_work(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "run_anchors", _boom)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "same.png"
    for plot in (str(out), "./same.png", "sub/../same.png"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        err = _refused(experiment.main, [str(tiny), "--oracle-cache", "", "--out", str(out), "--plot", plot])
        assert err == (f"error: key '--plot': {plot} is the --out file {out}: the figure would be written over the "
                       "results JSON; give --plot another file")
        assert not out.exists()
    (tmp_path / "link.png").symlink_to(out)  # a symlink to an --out that exists (empty: --out may take it)
    out.write_text("")
    err = _refused(experiment.main, [str(tiny), "--oracle-cache", "", "--out", str(out), "--plot", "link.png"])
    assert err.startswith("error: key '--plot': link.png is the --out file ")
    err = _refused(experiment.main, [str(tiny), "--oracle-cache", "", "--out", "r.json", "--plot", str(tiny)])
    assert err == (f"error: key '--plot': {tiny} is the experiment file {tiny} this command reads; give --plot "
                   "another file")
    assert not (tmp_path / "r.json").exists()


# N3: header_bytes too large for the payload is a one-line ConfigError, under coopsim validate and run --------------

def _msg(width: int) -> MessageBatch:
    return MessageBatch(np.zeros(1, np.int32), np.zeros(1, np.int32), np.full(1, -1, np.int32),
                        np.ones((1, width), np.float32), np.zeros(1))


def test_header_bytes_too_large_for_the_payload_is_a_config_error_naming_both():
    ch = Ns3Channel(header_bytes=65535)
    with pytest.raises(ConfigError) as e:
        ch.check_message_size(_msg(3))  # no ns-3, no reset needed
    assert e.value.key == "channel.params.header_bytes" and e.value.value == 65535
    assert str(e.value) == (
        "key 'channel.params.header_bytes': ns3-v0: header_bytes 65535 + a message payload of 3 values x 4 B = 12 B "
        "makes an IP packet of 65547 B, over the limit of 65535 B (IPv4's 16-bit total length; ns-3 would drop it "
        "unseen); give channel.params.header_bytes at most 65523 (its range 28 .. 65535) or send fewer payload values")
    Ns3Channel(header_bytes=65523).check_message_size(_msg(3))  # exactly 65535 B: fits
    Ns3Channel(header_bytes=65535).check_message_size(_msg(0))


def test_send_raises_the_config_error_too(ns3_bridge):
    class TwoAgents:
        def positions(self):
            return np.array([[[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]])

    with Ns3Channel(header_bytes=65530) as ch:
        ch.reset(1, num_envs=1, num_agents=2, dt_s=0.1, scenario=TwoAgents())
        with pytest.raises(ConfigError, match=r"^key 'channel.params.header_bytes': .* send at most 1 payload values"):
            ch.send(0, _msg(3))
        assert ch.stats()["comm/messages_sent"] == 0


RUN_CFG = {"name": "hdr", "scenario": {"id": "mpe/simple_spread-v0", "params": {"num_agents": 3, "max_steps": 3}},
           "agents": {"id": "comm/broadcast-v0"}, "channel": {"id": "ns3-v0", "params": {"header_bytes": 65530}},
           "seeds": [0], "episodes": 1}


@pytest.mark.parametrize("command", ["validate", "run"])
def test_coopsim_validate_and_run_refuse_it_on_one_line_without_a_run_folder(command, tmp_path, ns3_bridge):
    cfg = tmp_path / "hdr.yaml"
    cfg.write_text(yaml.safe_dump(RUN_CFG))
    runs = tmp_path / "runs"
    r = run_cli(command, str(cfg), f"out_dir={runs}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"error: {cfg}: key 'channel.params.header_bytes': ns3-v0: header_bytes 65530 + a "
                               "message payload of 3 values x 4 B = 12 B makes an IP packet of 65542 B, over the limit "
                               "of 65535 B"), r.stderr
    assert "at most 65523" in r.stderr and not runs.exists()
    r = run_cli(command, str(cfg), f"out_dir={runs}", "channel.params.header_bytes=65535", "seeds=[0]")
    assert r.returncode == 2 and r.stderr.startswith(
        f"error: command-line override 'channel.params.header_bytes=65535' (config {cfg}): key "
        "'channel.params.header_bytes': ns3-v0: header_bytes 65535 "), r.stderr


# N11: the none sender sent nothing --------------------------------------------------------------------------------

def _latency_lines(text: str) -> dict[str, str]:
    return {line.split()[0]: line.split(" latency p95 ", 1)[1] for line in text.splitlines() if " latency p95 " in line}


def test_the_none_senders_latency_says_nothing_sent_not_nothing_delivered(tiny, tmp_path, capsys):
    experiment.main([str(tiny), *NO_ORACLE, "--out", str(tmp_path / "r.json")])
    lines = _latency_lines(capsys.readouterr().out)
    ideal = "- (not measured: ideal channel)"
    assert lines == {"ideal/broadcast": ideal, "ideal/none": ideal, "ns3/ddacom": "- (nothing delivered)",
                     "ns3/none": "- (nothing sent)"}
