"""Fresh-user report 34, the ns-3 findings: F4 nan/inf ns3-v0 params built from Python, F5 a message over an IP
packet's size, F6 loose argument checks of the channel, F7 the ideal anchors' latency line, F12 ``--out`` over a file
that is not a results file of the ns-3 experiment. The tests marked ``ns3`` start a real ns-3 (tiny runs); the
others need none (the experiment's runs are a fake there)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from coopsim.comm.ns3 import experiment
from coopsim.comm.ns3.channel import Ns3Channel
from coopsim.errors import ChannelError, ConfigError, run_script
from coopsim.platform.comm import MessageBatch
from ns3_helpers import TINY_EXPERIMENT as TINY
from ns3_helpers import StubChannel as _StubChannel
from ns3_helpers import boom as _boom
from ns3_helpers import fake_run as _fake_run

DT = 0.1


class _TwoAgents:
    def positions(self):
        return np.array([[[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]])


def _msg(width: int, t: int = 0) -> MessageBatch:
    """One broadcast of agent 0 in env 0 with ``width`` float32 payload values."""
    return MessageBatch(np.zeros(1, np.int32), np.zeros(1, np.int32), np.full(1, -1, np.int32),
                        np.ones((1, width), np.float32), np.full(1, t * DT))


def _reset(ch: Ns3Channel) -> Ns3Channel:
    ch.reset(1, num_envs=1, num_agents=2, dt_s=DT, scenario=_TwoAgents())
    return ch


# F4: nan/inf from Python is the config file's one-line ConfigError -----------------------------------------------

NON_FINITE = [
    ({"background_pairs": 1, "background_rate_bps": float("inf")}, "background_rate_bps", "inf"),
    ({"background_pairs": 1, "background_schedule": [[0, float("nan")]]}, "background_schedule.0.1", "nan"),
    ({"background_pairs": 1, "background_schedule": [[0, float("inf")]]}, "background_schedule.0.1", "inf"),
    ({"background_pairs": 1, "background_schedule": [[0, 1e5], [float("inf"), 0]]}, "background_schedule.1.0", "inf"),
    ({"latency_bound_s": float("inf")}, "latency_bound_s", "inf"),
    ({"loss_timeout_s": float("inf")}, "loss_timeout_s", "inf"),
    ({"step_timeout_s": float("inf")}, "step_timeout_s", "inf"),
    ({"reset_timeout_s": float("inf")}, "reset_timeout_s", "inf"),
    ({"background_position_m": (0.0, float("-inf"), 0.0)}, "background_position_m.1", "-inf"),
]


@pytest.mark.parametrize("params, key, shown", NON_FINITE, ids=[k for _, k, _ in NON_FINITE])
def test_non_finite_ns3_params_from_python_get_the_config_files_error(params, key, shown):
    from coopsim.platform.config import check_component_params
    from coopsim.platform.registry import make_component

    with pytest.raises(ConfigError) as direct:
        Ns3Channel(**params)
    with pytest.raises(ConfigError) as registry:
        make_component("channel", "ns3-v0", **params)
    with pytest.raises(ConfigError) as config_file:  # what `coopsim validate` / a run config gets
        check_component_params("channel", "ns3-v0", dict(params), file="run.yaml", key_prefix="channel.params.")
    assert direct.value.key == registry.value.key == key
    assert config_file.value.key == f"channel.params.{key}"
    assert direct.value.message.startswith(f"invalid value {shown}: must be a finite number (")
    assert direct.value.message == registry.value.message == config_file.value.message
    assert "\n" not in str(direct.value)


def test_a_huge_finite_step_timeout_waits_instead_of_overflowing(ns3_bridge):
    # 1e300 s cannot be one select() timeout (OverflowError before): it is waited in slices
    with Ns3Channel(step_timeout_s=1e300, reset_timeout_s=1e300) as ch:
        _reset(ch)
        ch.send(0, _msg(25))
        assert len(ch.deliver(1)) == 1


# F5: a message larger than an IP packet is refused by send, before ns-3 --------------------------------------------

def test_a_message_over_an_ip_packet_is_refused_before_ns3_and_65535_bytes_go_through(ns3_bridge):
    with _reset(Ns3Channel(header_bytes=31)) as ch:
        with pytest.raises(ValueError) as e:
            ch.send(0, _msg(16377))  # 16377 * 4 + 31 = 65539 B
        text = str(e.value)
        assert "65539 B" in text and "limit of 65535 B" in text and "at most 16376 payload values" in text
        s = ch.stats()
        assert s["comm/offered_copies"] == 0 and s["comm/messages_sent"] == 0  # nothing counted, nothing sent
        ch.send(0, _msg(16376))  # the same step again: exactly 65535 B, the largest IP packet, is delivered
        got = [ch.deliver(1)]  # ~45 IP fragments at 6 Mbit/s: more than one 0.1 s step
        for t in range(1, 5):
            ch.send(t, None)
            got.append(ch.deliver(t + 1))
        assert [len(g) for g in got if len(g)] == [1] and max(g.payload.shape[1] for g in got) == 16376
        assert ch.stats()["comm/delivered_bytes"] == 65535


# F6: loose argument checks and raw errors --------------------------------------------------------------------------

@pytest.mark.parametrize("call", ["stats", "per_copy", "queued", "latencies_s", "background_rate_bps",
                                  "lost_bytes_by_send_step"])
def test_the_accounting_before_the_first_reset_says_call_reset_first(call):
    ch = Ns3Channel(background_pairs=1, background_schedule=[[0, 1e5], [1, 0]])
    args = (3,) if call in ("background_rate_bps", "lost_bytes_by_send_step") else ()
    with pytest.raises(ChannelError, match=r"^ns3-v0: call reset\(\) first"):
        getattr(ch, call)(*args)
    with pytest.raises(ChannelError, match=r"^ns3-v0: call reset\(\) first"):  # the same words as send's
        ch.send(0, None)


BAD_RESET = [
    (dict(num_envs=2.5), "num_envs must be an integer in 1..256", "got 2.5 (float)"),
    (dict(num_envs=True), "num_envs must be an integer in 1..256", "got True (bool)"),
    (dict(num_envs="2"), "num_envs must be an integer in 1..256", "got '2' (str)"),
    (dict(num_envs=257), "num_envs must be an integer in 1..256", "got 257"),
    (dict(seed=1.7), "seed must be an integer >= 0", "got 1.7 (float)"),
    (dict(seed=True), "seed must be an integer >= 0", "got True (bool)"),
    (dict(seed=-1), "seed must be an integer >= 0", "got -1"),
    (dict(num_agents="3"), "num_agents must be an integer >= 1", "got '3' (str)"),
    (dict(num_agents=2.0), "num_agents must be an integer >= 1", "got 2.0 (float)"),
    (dict(dt_s=float("inf")), "dt_s a finite number > 0", "got inf"),
]


@pytest.mark.parametrize("bad, rule, got", BAD_RESET, ids=[repr(b) for b, _, _ in BAD_RESET])
def test_reset_refuses_a_float_bool_or_string_size_or_seed(bad, rule, got):
    ch = Ns3Channel()
    kw = {**dict(seed=0, num_envs=1, num_agents=2, dt_s=DT, scenario=_TwoAgents()), **bad}
    with pytest.raises(ValueError) as e:  # refused before any ns-3 starts
        ch.reset(kw.pop("seed"), **kw)
    assert rule in str(e.value) and str(e.value).endswith(got), str(e.value)
    assert ch._proc is None


def test_reset_names_the_node_limit():
    ch = Ns3Channel(background_pairs=64)
    with pytest.raises(ValueError) as e:
        ch.reset(0, num_envs=1, num_agents=59_873, dt_s=DT)
    assert str(e.value) == ("ns3-v0: num_agents + 2 * background_pairs = 59873 + 2 * 64 = 60001 ns-3 nodes per env, "
                            "over the limit of 60000 nodes per env (each env is one /16 IPv4 subnet)")
    assert ch._proc is None


def test_send_at_a_negative_or_fractional_step_says_t_must_be_at_least_0(ns3_bridge):
    with _reset(Ns3Channel()) as ch:
        for t in (-1, 1.5, True):
            with pytest.raises(ValueError, match=r"^ns3-v0: send\(t\): t must be an integer >= 0 \(the step\); got "):
                ch.send(t, _msg(3))
        with pytest.raises(ValueError, match=r"^ns3-v0: deliver\(t\): t must be an integer >= 0"):
            ch.deliver(-1)
        ch.send(np.int64(0), _msg(3))  # a numpy integer is a step
        assert len(ch.deliver(1)) == 1 and ch.stats()["comm/messages_sent"] == 1


def test_the_channel_is_a_context_manager_that_closes_the_child(ns3_bridge):
    with Ns3Channel() as ch:
        _reset(ch)
        proc = ch._proc
        assert proc.alive
    assert not proc.alive and ch._proc is None
    with pytest.raises(ChannelError, match=r"call reset\(\) first"):
        ch.send(0, None)
    assert ch.stats()["comm/offered_copies"] == 0  # the totals stay readable after close
    with pytest.raises(RuntimeError, match="boom"):  # closed on an exception too, which goes on
        with _reset(Ns3Channel()) as ch2:
            proc = ch2._proc
            raise RuntimeError("boom")
    assert not proc.alive and ch2._proc is None


# F7 and F12: the experiment script; its runs are a fake, the ns-3 channel a stub -----------------------------------


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A tiny experiment file; ``experiment.run`` a fake, the channel a stub whose p95 latency is 0.05 s."""
    monkeypatch.setattr(experiment, "run", _fake_run)
    monkeypatch.setattr(experiment, "make_component", lambda *a, **k: _StubChannel({"comm/latency_p95_s": 0.05}))
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    return cfg


def _latency_lines(text: str) -> dict[str, str]:
    return {line.split()[0]: line.split(" latency p95 ", 1)[1] for line in text.splitlines() if " latency p95 " in line}


def test_the_ideal_anchors_latency_is_not_measured_not_nothing_delivered(tiny, tmp_path, monkeypatch, capsys):
    experiment.main([str(tiny), "--no-oracle", "--oracle-cache", "", "--out", str(tmp_path / "r.json")])
    lines = _latency_lines(capsys.readouterr().out)
    ideal = "- (not measured: ideal channel)"
    assert lines == {"ideal/broadcast": ideal, "ideal/none": ideal, "ns3/ddacom": "0.050 s", "ns3/none": "0.050 s"}
    # a real channel that delivered nothing (no latency: nan) still says so
    monkeypatch.setattr(experiment, "make_component", lambda *a, **k: _StubChannel({}))
    experiment.main([str(tiny), "--no-oracle", "--oracle-cache", "", "--out", str(tmp_path / "r2.json")])
    lines = _latency_lines(capsys.readouterr().out)
    assert lines["ns3/ddacom"] == "- (nothing delivered)" and lines["ns3/none"] == "- (nothing sent)"
    assert lines["ideal/none"] == "- (not measured: ideal channel)"


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        run_script(experiment.main, argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


FOREIGN = {
    "text": "precious notes\n",
    "other_json": '{"a": 1}\n',
    "ddacom_eval": json.dumps({"seeds_done": 2, "summary": {}}),
}


@pytest.mark.parametrize("calibrate", [False, True], ids=["experiment", "calibrate"])
@pytest.mark.parametrize("kind", sorted(FOREIGN) + ["config_itself"])
def test_out_that_is_not_a_results_file_of_the_experiment_is_refused(kind, calibrate, tiny, tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.setattr(experiment, "run", _boom)
    monkeypatch.setattr(experiment, "calibrate", _boom)
    monkeypatch.setattr(experiment, "run_anchors", _boom)
    if kind == "config_itself":
        out = tiny
    else:
        out = tmp_path / f"{kind}.txt"
        out.write_text(FOREIGN[kind])
    before = out.read_text()
    mode = ["--calibrate", "0"] if calibrate else ["--no-oracle", "--oracle-cache", ""]
    err = _refused([str(tiny), *mode, "--out", str(out)], capsys)
    if kind == "config_itself":
        assert err == (f"error: key '--out': {out} is the experiment file this command reads; give --out another "
                       "file (the results JSON)")
    else:
        assert err == (f"error: key '--out': {out} exists and is not a results file of coopsim.comm.ns3.experiment; "
                       "give another --out or remove it")
    assert out.read_text() == before


def test_out_that_is_the_config_under_another_name_is_refused(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(experiment, "run_anchors", _boom)
    link = tmp_path / "link.yaml"
    link.symlink_to(tiny)
    monkeypatch.chdir(tmp_path)
    err = _refused(["./tiny.yaml", "--no-oracle", "--oracle-cache", "", "--out", str(link)], capsys)
    assert err.endswith("is the experiment file this command reads; give --out another file (the results JSON)")


def test_out_of_this_command_is_still_written_an_empty_file_and_a_calibration_too(tiny, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    out.write_text("")  # an empty file holds nothing to lose
    experiment.main([str(tiny), "--no-oracle", "--oracle-cache", "", "--out", str(out)])
    assert json.loads(out.read_text())["seeds_done"] == 1
    # a calibration output of this command is replaced by a calibration, and by an experiment, as before
    monkeypatch.setattr(experiment, "calibrate", lambda cfg, loads: [{"background_bps_per_pair": loads[0]}])
    cal = tmp_path / "cal.json"
    experiment.main([str(tiny), "--calibrate", "0", "--out", str(cal)])
    experiment.main([str(tiny), "--calibrate", "1e6", "--out", str(cal)])
    assert json.loads(cal.read_text())["calibration"] == [{"background_bps_per_pair": 1e6}]
    experiment.main([str(tiny), "--no-oracle", "--oracle-cache", "", "--out", str(cal)])
    assert json.loads(cal.read_text())["seeds_done"] == 1
    # a result of this command: the same command finds nothing to run and leaves it as it is
    experiment.main([str(tiny), "--no-oracle", "--oracle-cache", "", "--out", str(out)])
    assert json.loads(out.read_text())["seeds_done"] == 1
