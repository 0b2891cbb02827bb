"""Bad input to the channels that used to be accepted silently or fail late with a traceback (fresh36 F5-F9)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.errors import ConfigError
from coopsim.platform.config import load_config
from coopsim.platform.registry import make_scenario

ROOT = Path(__file__).resolve().parents[2]
MARKOV = str(ROOT / "configs" / "mpe" / "spread-po-ddacom-markov.yaml")
REFERENCE = str(ROOT / "configs" / "mpe" / "simple_reference-bandwidth.yaml")
WHOLE_US = "must be a whole number of microseconds (at most 6 decimals, e.g. 0.1 or 0.000001)"


# ------------------------------------------------------------------ F5: times that are not whole microseconds

@pytest.mark.parametrize("override, key", [
    ("channel.params.latency_bound_s=0.1000001", "channel.params.latency_bound_s"),
    ("channel.params.delay_s=0.0000005", "channel.params.delay_s"),
])
def test_a_time_between_microseconds_is_a_config_error_naming_the_key(override, key):
    with pytest.raises(ConfigError) as ei:
        load_config(MARKOV, [override])
    assert ei.value.key == key
    assert WHOLE_US in str(ei.value) and "dt_s" not in str(ei.value)


@pytest.mark.parametrize("params, key, text", [
    ({"latency_bound_s": 0.10000001}, "comm_channel.params.latency_bound_s", WHOLE_US),
    ({"delay_s": 1.5e-7}, "comm_channel.params.delay_s", WHOLE_US),
    ({"latency_bound_s": float("inf")}, "comm_channel.params.latency_bound_s", "must be a finite number"),
    ({"delay_s": float("inf")}, "comm_channel.params.delay_s", "must be a finite number"),
    ({"delay_s": float("nan")}, "comm_channel.params.delay_s", "must be a finite number"),
])
def test_bad_times_in_the_scenarios_channel_are_refused_as_the_run_channels_are(params, key, text):
    with pytest.raises(ConfigError) as ei:
        make_scenario("mpe/simple_reference-v0", comm_channel={"id": "bandwidth-v0", "params": params})
    assert ei.value.key == key and text in str(ei.value)


@pytest.mark.parametrize("cfg, override", [
    (MARKOV, "channel.params.latency_bound_s=0.1000001"),
    (REFERENCE, "scenario.params.comm_channel.params.latency_bound_s=0.10000001"),
])
def test_coopsim_validate_reports_the_key_without_a_traceback(cfg, override):
    r = subprocess.run([sys.executable, "-m", "coopsim", "validate", cfg, override],
                       capture_output=True, text=True, cwd="/tmp", timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    key, value = override.split("=")
    assert f"key '{key}': invalid value {value}: " + WHOLE_US in " ".join(r.stderr.split())


def test_python_api_refuses_bad_times_when_built_and_bad_steps_at_reset():
    with pytest.raises(ConfigError, match="key 'latency_bound_s': invalid value inf: must be a finite number"):
        BandwidthChannel(latency_bound_s=float("inf"))
    with pytest.raises(ConfigError, match=re.escape(f"key 'delay_s': invalid value 5e-07: {WHOLE_US}")):
        BandwidthChannel(delay_s=5e-7)
    ch = BandwidthChannel(latency_bound_s=0.000001, delay_s=0.25)  # whole microseconds: fine
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    assert (ch.bound_us, ch.delay_us) == (1, 250_000)
    with pytest.raises(ValueError, match="dt_s=nan must be a finite"):
        ch.reset(0, num_envs=1, num_agents=2, dt_s=float("nan"))
    with pytest.raises(ValueError, match=r"dt_s=0.0 must be > 0"):
        ch.reset(0, num_envs=1, num_agents=2, dt_s=0.0)
    with pytest.raises(ValueError, match="dt_s=1.5e-07 must be a non-negative whole number of microseconds"):
        ch.reset(0, num_envs=1, num_agents=2, dt_s=1.5e-7)


# ------------------------------------------------------------------ F10: the scenario's comm_channel schema

def test_a_misspelled_comm_channel_key_is_refused_not_replaced_by_the_default_channel():
    with pytest.raises(ConfigError) as ei:
        make_scenario("mpe/simple_reference-v0", comm_channel={"id": "bandwidth-v0", "parms": {"queue_packets": 2}})
    assert ei.value.key == "comm_channel.parms"
    assert "(did you mean 'params'?); valid keys of 'comm_channel': id, params" in str(ei.value)
    with pytest.raises(ConfigError) as ei:
        make_scenario("mpe/simple_reference-v0", comm_channel={"idd": "bandwidth-v0"})
    assert ei.value.key == "comm_channel.id"
    assert "missing required key 'comm_channel.id' ('comm_channel' is given, so it needs its 'id' too)" in str(ei.value)
    ok = make_scenario("mpe/simple_reference-v0", comm_channel={"id": "bandwidth-v0", "params": {"queue_packets": 2}})
    assert ok.channel.params.queue_packets == 2
    assert make_scenario("mpe/simple_reference-v0", comm_channel={"id": "ideal-v0", "params": None}).channel is not None


@pytest.mark.parametrize("old, new, key, text", [
    ("      params: {trace", "      parms: {trace", "scenario.params.comm_channel.parms", "did you mean 'params'?"),
    ("      id: bandwidth-v0", "      idd: bandwidth-v0", "scenario.params.comm_channel.id",
     "missing required key 'comm_channel.id'"),
])
def test_coopsim_validate_refuses_a_comm_channel_typo(tmp_path, old, new, key, text):
    src = Path(REFERENCE).read_text()
    assert old in src
    bad = tmp_path / "typo.yaml"
    bad.write_text(src.replace(old, new))
    with pytest.raises(ConfigError) as ei:
        load_config(bad)
    assert ei.value.key == key and text in str(ei.value)


# ------------------------------------------------------------------ F6: CSV rate columns by name

@pytest.mark.parametrize("header, col, got, want", [
    ("time_s,rate_1,rate_0", 2, "rate_1", "rate_0"),
    ("time_s,rate_0,rate_2", 3, "rate_2", "rate_1"),
    ("time_s,bw", 2, "bw", "rate_0"),
    ("time_s,rate,rate_1", 2, "rate", "rate_0"),
])
def test_a_csv_header_other_than_rate_or_rate_0_to_n_is_refused(tmp_path, header, col, got, want):
    path = tmp_path / "cap.csv"
    path.write_text(f"{header}\n0,1000,2000\n" if header.count(",") == 2 else f"{header}\n0,1000\n")
    with pytest.raises(ConfigError) as ei:
        BandwidthChannel(trace={"kind": "csv", "path": str(path)})
    assert ei.value.key == "channel.params.trace.path" and ei.value.file == str(path)
    assert f"line 1: rate column {col} is named {got!r}, expected {want!r}" in str(ei.value)
    assert f"got {header!r}" in str(ei.value)


def test_a_csv_in_order_gives_sender_i_its_column(tmp_path):
    path = tmp_path / "cap.csv"
    path.write_text("time_s, rate_0 ,rate_1\n0,1000,2000\n")
    ch = BandwidthChannel(trace={"kind": "csv", "path": str(path)}, horizon_steps=2)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    assert ch.capacity[0, 0].tolist() == [1000, 2000]
    one = tmp_path / "one.csv"
    one.write_text("time_s,rate_0\n0,700\n")  # a single column, named rate or rate_0: every sender's
    ch = BandwidthChannel(trace={"kind": "csv", "path": str(one)}, horizon_steps=2)
    ch.reset(0, num_envs=1, num_agents=3, dt_s=0.1)
    assert ch.capacity[0, 0].tolist() == [700, 700, 700]


# ------------------------------------------------------------------ F7: MessageBatch dtypes

from coopsim.comm.ideal import IdealChannel  # noqa: E402
from coopsim.platform.comm import MessageBatch  # noqa: E402


def _one(payload, src=(0,), env=(0,), dst=(1,)):
    return MessageBatch(np.asarray(env, np.int32), np.asarray(src, np.int32), np.asarray(dst, np.int32), payload,
                        np.zeros(len(src)))


@pytest.mark.parametrize("payload", [np.zeros((1, 3)), np.zeros((1, 3), np.float16), np.zeros((1, 3), np.int64)])
def test_a_payload_of_another_dtype_counts_4_bytes_per_value(payload):
    ch = BandwidthChannel()
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    b = _one(payload)
    assert b.payload.dtype == np.float32 and b.size_bytes().tolist() == [3 * 4 + 28]
    ch.send(0, b)
    assert ch.stats()["comm/offered_bytes"] == 40.0  # P * 4 + 28, as documented (was 52 for float64, 34 for float16)


def test_documented_dtypes_are_kept_without_a_copy_and_bad_ones_refused():
    env, src, dst = np.zeros(2, np.int32), np.array([0, 1], np.int32), np.array([1, 0], np.int32)
    pay, ts = np.zeros((2, 3), np.float32), np.zeros(2)
    b = MessageBatch(env, src, dst, pay, ts)
    assert b.env is env and b.src is src and b.dst is dst and b.payload is pay and b.t_sent_s is ts
    b64 = MessageBatch(env.astype(np.int64), src.astype(np.int64), dst.astype(np.int64), pay, ts)
    assert b64.src.dtype == np.int32 and b64.src.tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"MessageBatch.payload must be float32 \[M, P\] \(real numbers\); got dtype <U1"):
        MessageBatch(np.zeros(1, np.int32), np.zeros(1, np.int32), np.ones(1, np.int32), np.array([["a", "b"]]),
                     np.zeros(1))
    with pytest.raises(ValueError, match="MessageBatch.src must hold integers .* got dtype float64"):
        MessageBatch(np.zeros(1, np.int32), np.array([0.7]), np.ones(1, np.int32), np.zeros((1, 2)), np.zeros(1))
    with pytest.raises(ValueError, match=r"MessageBatch.env must be a 1-D int32 array \[M\]; got shape \(1, 1\)"):
        MessageBatch(np.zeros((1, 1), np.int32), np.zeros(1, np.int32), np.ones(1, np.int32), np.zeros((1, 2)),
                     np.zeros(1))
    with pytest.raises(ValueError, match="MessageBatch.dst must fit int32"):
        MessageBatch(np.zeros(1, np.int32), np.zeros(1, np.int32), np.array([2**32], np.int64), np.zeros((1, 2)),
                     np.zeros(1))
    with pytest.raises(ValueError, match="MessageBatch.t_sent_s must be float64 .* got dtype <U"):
        MessageBatch(np.zeros(1, np.int32), np.zeros(1, np.int32), np.ones(1, np.int32), np.zeros((1, 2)),
                     np.array(["0"]))


# ------------------------------------------------------------------ F8: the ideal channel checks indices as bandwidth-v0

OUTSIDE = r"message batch has env/src/dst outside \[0, 1\) x \[0, 3\) \(dst may be -1 = broadcast\)"


@pytest.mark.parametrize("channel", [IdealChannel, BandwidthChannel])
@pytest.mark.parametrize("env, src, dst, match", [
    (0, -2, 1, OUTSIDE + ": message 0 has env 0, src -2, dst 1"),
    (0, 0, -2, OUTSIDE + ": message 0 has env 0, src 0, dst -2"),
    (-1, 0, 1, OUTSIDE + ": message 0 has env -1, src 0, dst 1"),
    (1, 0, 1, OUTSIDE),
    (0, 3, 1, OUTSIDE),
    (0, 1, 1, r"message 0 is sent by agent 1 to itself \(dst == src\) in env 0; a message goes to another agent"),
])
def test_bad_indices_are_refused_by_every_channel(channel, env, src, dst, match):
    ch = channel()
    ch.reset(0, num_envs=1, num_agents=3, dt_s=0.1)
    with pytest.raises(ValueError, match=match):
        ch.send(0, _one(np.zeros((1, 2), np.float32), src=[src], env=[env], dst=[dst]))
    assert ch.stats()["comm/offered_copies"] == 0.0  # nothing counted
    ch.send(0, _one(np.zeros((1, 2), np.float32), src=[2], env=[0], dst=[-1]))  # a good broadcast still goes
    assert ch.stats()["comm/offered_copies"] == 2.0


# ------------------------------------------------------------------ F9: lifecycle misuse

from coopsim.errors import ChannelError  # noqa: E402


@pytest.mark.parametrize("channel", [IdealChannel, BandwidthChannel])
def test_calls_before_reset_and_steps_that_go_back_are_refused(channel):
    name = channel.__name__
    ch = channel()
    for call, f in (("deliver", lambda: ch.deliver(1)), ("stats", ch.stats), ("per_copy", ch.per_copy),
                    ("send", lambda: ch.send(0, None)), ("feedback", lambda: ch.feedback(1))):
        with pytest.raises(ChannelError, match=rf"{name}\.{call} before reset: call reset\(seed, num_envs="):
            f()
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    b = _one(np.zeros((1, 2), np.float32))
    ch.send(0, b)
    ch.deliver(5)
    with pytest.raises(ValueError, match=rf"{name}\.send\(3\) after a call at step 5: steps never go back"):
        ch.send(3, b)
    for t in (-1, 2.5, True, "6"):
        with pytest.raises(ValueError, match=rf"{name}\.send\(t\): t must be an integer >= 0 \(the step\); got "):
            ch.send(t, b)
    with pytest.raises(ValueError, match=rf"{name}\.deliver\(t\): t must be an integer >= 0"):
        ch.deliver(-5)
    assert ch.stats()["comm/offered_copies"] == 1.0  # the refused sends counted nothing
    ch.send(np.int64(5), b)  # the same step again, as a numpy integer: fine
    ch.feedback(6)
    ch.reset(1, num_envs=1, num_agents=2, dt_s=0.1)  # a reset starts again at step 0
    ch.send(0, b)
    assert ch.stats()["comm/offered_copies"] == 1.0
