"""ns3-v0 against a real ns-3 (802.11a ad hoc): range, saturation, determinism, accounting, lifecycle."""
from __future__ import annotations

import math
import os
import signal
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ns3_helpers import Positions, broadcast_all

from coopsim.comm.ns3.channel import Ns3Channel
from coopsim.errors import ChannelError
from coopsim.platform.comm import MessageBatch

pytestmark = pytest.mark.ns3
DT = 0.1


def delivery_ratio(ch: Ns3Channel) -> np.ndarray:
    pc = ch.per_copy()
    return pc["delivered_copies"].sum(axis=(1, 2)) / pc["offered_copies"].sum(axis=(1, 2))


def test_delivery_near_full_at_short_range_and_falling_with_distance(ns3_bridge):
    # one env per distance: two agents that both broadcast every step, 100 steps
    dist = np.array([5.0, 30.0, 45.0, 55.0, 70.0, 150.0])
    pos = np.zeros((len(dist), 2, 3))
    pos[:, 1, 0] = dist
    ch = Ns3Channel()
    ch.reset(3, num_envs=len(dist), num_agents=2, dt_s=DT, scenario=Positions(pos))
    for t in range(100):
        ch.send(t, broadcast_all(len(dist), 2, t, DT))
        ch.deliver(t + 1)
    ratio = delivery_ratio(ch)
    ch.close()
    assert ratio[0] == 1.0  # 5 m: every one of 200 copies
    assert ratio[-1] == 0.0  # 150 m: far below the -82 dBm preamble-detection threshold
    assert np.all(np.diff(ratio) <= 0.05), ratio  # falls with distance (Nakagami: gradually)
    assert 0.2 < ratio[3] < 0.9, ratio  # 55 m: partly delivered, no cliff


def test_eight_agents_one_metre_apart_nearly_all_delivered(ns3_bridge):
    pos = np.zeros((1, 8, 3))
    pos[0, :, 0] = np.arange(8) * 1.0
    ch = Ns3Channel()
    ch.reset(11, num_envs=1, num_agents=8, dt_s=DT, scenario=Positions(pos))
    got = 0
    for t in range(50):
        ch.send(t, broadcast_all(1, 8, t, DT))
        out = ch.deliver(t + 1)
        got += len(out)
        # what arrives at t + 1 was sent at t, to every other agent, payload intact
        assert np.all(out.t_sent_s == pytest.approx(t * DT))
        assert np.all(out.payload[:, 0] == t) and np.all(out.payload[:, 2] == out.src)
        assert np.all(out.dst != out.src)
        assert len(ch.last_latencies_s) == len(out) and np.all((ch.last_latencies_s > 0) & (ch.last_latencies_s < DT))
    s = ch.stats()
    ch.close()
    assert got == s["comm/delivered_copies"]
    assert got >= 0.97 * 50 * 8 * 7  # only DCF backoff collisions (same slot) are lost
    assert 0 < s["comm/latency_max_s"] < DT


def frame_time_s(ip_bytes: int) -> float:
    """802.11a at 6 Mbit/s (IEEE 802.11-2016 17.4.3): preamble 16 us + SIGNAL 4 us + 4 us per symbol of
    24 data bits carrying SERVICE (16) + PSDU (LLC/SNAP 8 + MAC header 24 + FCS 4 + IP bytes) + tail (6)."""
    psdu = ip_bytes + 8 + 24 + 4
    return 20e-6 + 4e-6 * math.ceil((16 + 8 * psdu + 6) / 24)


def test_offered_load_past_saturation_is_capped_by_the_phy_rate(ns3_bridge):
    # 200 broadcasts of 1028 B (IP) per 0.1 s step = 16.4 Mbit/s offered on a 6 Mbit/s PHY
    steps, per_step, width = 20, 200, 250  # 250 float32 = 1000 B payload + 28 B header
    pos = np.array([[[0.0, 0, 0], [3.0, 0, 0]]])
    ch = Ns3Channel()
    ch.reset(5, num_envs=1, num_agents=2, dt_s=DT, scenario=Positions(pos))
    for t in range(steps):
        b = MessageBatch(np.zeros(per_step, np.int32), np.zeros(per_step, np.int32), np.full(per_step, -1, np.int32),
                         np.zeros((per_step, width), np.float32), np.full(per_step, t * DT))
        ch.send(t, b)
        ch.deliver(t + 1)
    s = ch.stats()
    ch.close()
    sim_s = steps * DT
    assert s["comm/offered_bytes"] == steps * per_step * 1028
    delivered_bits = s["comm/delivered_bytes"] * 8
    assert delivered_bits <= 6e6 * sim_s  # never more than the PHY rate
    # sharper: each broadcast frame needs its airtime plus DIFS (34 us) at least
    max_frames = sim_s / (frame_time_s(1028) + 34e-6) + 1
    assert s["comm/delivered_copies"] <= max_frames
    # and saturation is reached: at least 85% of that bound (mean backoff 67.5 us costs ~4.6%)
    assert s["comm/delivered_copies"] >= 0.85 * max_frames
    assert s["comm/lost_copies"] + s["comm/queued_copies"] + s["comm/delivered_copies"] == steps * per_step


class Moving:
    """Six agents spread over 20-60 m that drift each step (exercises per-step position updates)."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.base = rng.uniform(-30, 30, size=(1, 6, 3)) * np.array([1, 1, 0])
        self.t = 0

    def positions(self):
        return self.base + np.array([0.5 * self.t, 0, 0])


def rollout(ch: Ns3Channel, seed: int, steps: int = 40):
    sc = Moving()
    ch.reset(seed, num_envs=1, num_agents=6, dt_s=DT, scenario=sc)
    got = []
    for t in range(steps):
        sc.t = t
        ch.send(t, broadcast_all(1, 6, t, DT))
        out = ch.deliver(t + 1)
        got.append(np.stack([out.src, out.dst, out.payload[:, 0].astype(np.int32)], axis=1))
    return np.concatenate(got), ch.latencies_s()


def test_same_seed_same_deliveries_across_processes_and_resets(ns3_bridge):
    a = Ns3Channel()
    first, lat_first = rollout(a, seed=7)
    pid = a._proc.pid
    other, lat_other = rollout(a, seed=8)
    again, lat_again = rollout(a, seed=7)  # same process, after two resets
    assert a._proc.pid == pid
    a.close()
    b = Ns3Channel()
    fresh, lat_fresh = rollout(b, seed=7)  # a new process
    b.close()
    assert 0 < len(first) < 40 * 6 * 5  # some, not all: the test would see a difference
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, fresh)
    np.testing.assert_array_equal(lat_first, lat_again)
    np.testing.assert_array_equal(lat_first, lat_fresh)
    assert not np.array_equal(lat_first, lat_other)


def _conserved(ch: Ns3Channel) -> None:
    pc = ch.per_copy()
    for u in ("bytes", "copies"):
        np.testing.assert_array_equal(pc[f"offered_{u}"], pc[f"delivered_{u}"] + pc[f"lost_{u}"] + pc[f"queued_{u}"])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**40), width=st.integers(0, 300), p_bc=st.floats(0, 1),
       spread_m=st.floats(1, 80), rate=st.integers(0, 12))
def test_bytes_and_copies_conserved_and_payloads_intact(ns3_bridge, seed, width, p_bc, spread_m, rate):
    E, N, steps = 2, 4, 15
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, spread_m, size=(E, N, 3))
    ch = Ns3Channel(header_bytes=28 + int(rng.integers(0, 40)))
    ch.reset(seed, num_envs=E, num_agents=N, dt_s=DT, scenario=Positions(pos))
    sent: dict[tuple, int] = {}
    fb_delivered = fb_lost = 0
    for t in range(steps):
        m = int(rng.integers(0, rate + 1))
        env = rng.integers(0, E, m).astype(np.int32)
        src = rng.integers(0, N, m).astype(np.int32)
        dst = (src + rng.integers(1, N, m)) % N
        dst = np.where(rng.random(m) < p_bc, -1, dst).astype(np.int32)
        payload = np.zeros((m, width), np.float32)
        key = np.stack([np.full(m, t), np.arange(m)], 1)
        if width >= 2:
            payload[:, :2] = key
        for i in range(m):
            sent[(t, i)] = (int(env[i]), int(src[i]), int(dst[i]))
        ch.send(t, MessageBatch(env, src, dst, payload, np.full(m, t * DT)))
        _conserved(ch)
        out = ch.deliver(t + 1)
        _conserved(ch)
        fb = ch.feedback(t + 1)
        fb_delivered += int(fb.delivered_copies.sum())
        fb_lost += int(fb.lost_copies.sum())
        if width >= 2:
            for e, s, d, row in zip(out.env, out.src, out.dst, out.payload[:, :2].astype(int)):
                e0, s0, d0 = sent[tuple(row)]
                assert (e, s) == (e0, s0) and d != s and (d0 == -1 or d == d0)
    s = ch.stats()
    ch.close()
    assert s["comm/offered_bytes"] == s["comm/delivered_bytes"] + s["comm/lost_bytes"] + s["comm/queued_bytes"]
    assert fb_delivered == s["comm/delivered_copies"] and fb_lost == s["comm/lost_copies"]


def _socket_fds(pid: int) -> int:
    fd_dir = f"/proc/{pid}/fd"
    n = 0
    for fd in os.listdir(fd_dir):
        try:
            n += os.readlink(os.path.join(fd_dir, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def _children(pid: int) -> list[int]:
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    kids.append(int(d))
            except OSError:
                pass
    return kids


def test_twenty_resets_one_child_no_socket_nothing_left(ns3_bridge):
    me = os.getpid()
    kids_before, sockets_before = set(_children(me)), _socket_fds(me)
    ch = Ns3Channel(background_pairs=1, background_rate_bps=1e5)
    pos = np.zeros((2, 3, 3))
    pos[:, :, 0] = [0, 2, 4]
    pids = set()
    for r in range(20):
        ch.reset(r, num_envs=2, num_agents=3, dt_s=DT, scenario=Positions(pos))
        for t in range(2):
            ch.send(t, broadcast_all(2, 3, t, DT))
            ch.deliver(t + 1)
        pids.add(ch._proc.pid)
        assert _socket_fds(ch._proc.pid) == 0  # pipes only: nothing bound, nothing listening
    assert len(pids) == 1  # resets rebuild ns-3 inside the same child
    assert set(_children(me)) - kids_before == pids
    ch.close()
    assert set(_children(me)) - kids_before == set()
    assert not os.path.exists(f"/proc/{pids.pop()}")
    assert _socket_fds(me) == sockets_before


def test_stuck_ns3_raises_channel_error_within_timeout_and_recovers(ns3_bridge):
    pos = np.array([[[0.0, 0, 0], [1.0, 0, 0]]])
    ch = Ns3Channel(step_timeout_s=1.0)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=DT, scenario=Positions(pos))
    pid = ch._proc.pid
    os.kill(pid, signal.SIGSTOP)  # a hung ns-3
    t0 = time.monotonic()
    with pytest.raises(ChannelError, match=r"did not answer within 1 s \(channel\.params\.step_timeout_s: stuck, or a limit too small"):
        ch.send(0, broadcast_all(1, 2, 0, DT))  # returns at once: ns-3 works while the scenario steps
        ch.deliver(1)  # waits for ns-3, at most step_timeout_s
    assert time.monotonic() - t0 < 3.0
    assert not os.path.exists(f"/proc/{pid}")  # killed and reaped
    with pytest.raises(ChannelError, match="call reset"):
        ch.deliver(1)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=DT, scenario=Positions(pos))  # a new child
    assert ch._proc.pid != pid
    os.kill(ch._proc.pid, signal.SIGKILL)  # a crashed ns-3
    with pytest.raises(ChannelError, match="crashed|exited with code"):
        ch.send(0, broadcast_all(1, 2, 0, DT))
        ch.deliver(1)
    ch.close()


def test_unicast_reaches_only_its_receiver_and_background_takes_bandwidth(ns3_bridge):
    pos = np.zeros((1, 3, 3))
    pos[0, :, 0] = [0, 2, 4]

    def saturate(ch):
        ch.reset(1, num_envs=1, num_agents=3, dt_s=DT, scenario=Positions(pos))
        for t in range(10):
            b = MessageBatch(np.zeros(100, np.int32), np.zeros(100, np.int32), np.full(100, 2, np.int32),
                             np.zeros((100, 250), np.float32), np.full(100, t * DT))
            ch.send(t, b)
            out = ch.deliver(t + 1)
            assert np.all(out.dst == 2) and np.all(out.src == 0)
        s = ch.stats()
        ch.close()
        return s

    alone = saturate(Ns3Channel())
    shared = saturate(Ns3Channel(background_pairs=2, background_rate_bps=2e6, background_position_m=(2, 1, 0)))
    assert alone["comm/ns3/background_tx_bytes"] == 0
    assert shared["comm/ns3/background_rx_bytes"] > 0.5 * 2 * 2e6 * 1.0 / 8 * 0.5
    assert shared["comm/delivered_bytes"] < 0.8 * alone["comm/delivered_bytes"]


def test_ddacom_probe_and_token_bucket_work_unchanged_on_ns3_feedback(ns3_bridge):
    """The comm layer's SafeRateProbe + token bucket (DDACOM) read ns3-v0's feedback: under background
    traffic that saturates the 802.11a channel, DDACOM sends less than full broadcast and loses less."""
    from coopsim.agents.ddacom.evaluate import run

    channel = dict(background_pairs=2, background_rate_bps=3e6, background_packet_bytes=2000)
    kw = dict(num_agents=4, obs_radius_m=0.5, num_envs=1, episodes=2, seed=0, oracle=False)
    bc = run("broadcast", "ns3-v0", channel, **kw)
    dd = run("ddacom", "ns3-v0", channel, **kw)
    assert bc["messages_vs_broadcast"] == 1.0 and bc["loss"] > 0.1  # the channel is saturated
    assert dd["messages_vs_broadcast"] < 0.8
    assert dd["loss"] < 0.5 * bc["loss"]
    assert 0 < dd["mean_estimate_frac"] < 1  # the probe's safe-rate estimate moved below the full demand


def _one_frame_latency_s(standard: str, mode: str) -> float:
    ch = Ns3Channel(standard=standard, data_mode=mode, send_jitter_s=0.0)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=DT, scenario=Positions([[[0, 0, 0], [3, 0, 0]]]))
    ch.send(0, MessageBatch(np.zeros(1, np.int32), np.zeros(1, np.int32), np.full(1, -1, np.int32),
                            np.zeros((1, 250), np.float32), np.zeros(1)))
    assert len(ch.deliver(1)) == 1
    lat = ch.latencies_s()
    ch.close()
    return float(lat[0])


@pytest.mark.parametrize("standard, slow, fast, airtime_slow_s, airtime_fast_s, access_s", [
    # OFDM (clause 17): 24 / 216 data bits per 4 us symbol; idle medium: access after DIFS = 16 + 2 x 9 us
    ("802.11a", "OfdmRate6Mbps", "OfdmRate54Mbps", frame_time_s(1028),
     20e-6 + 4e-6 * math.ceil((16 + 8 * 1064 + 6) / 216), 34e-6),
    # DSSS (clause 16): long PLCP preamble + header 192 us, then the PSDU at 1 or 11 Mbit/s
    ("802.11b", "DsssRate1Mbps", "DsssRate11Mbps", 192e-6 + 8 * 1064 / 1e6,
     192e-6 + math.ceil(8 * 1064 / 11) * 1e-6, None),
])
def test_standard_and_rate_set_explicitly_give_the_frame_airtime(ns3_bridge, standard, slow, fast, airtime_slow_s,
                                                                airtime_fast_s, access_s):
    """One 1028 B broadcast on an idle medium, no jitter: latency = channel access + PHY airtime
    (+ 10 ns of propagation over 3 m); the difference between two rates is exactly the airtime difference."""
    lat_slow, lat_fast = _one_frame_latency_s(standard, slow), _one_frame_latency_s(standard, fast)
    assert lat_slow - lat_fast == pytest.approx(airtime_slow_s - airtime_fast_s, abs=1e-6)
    if access_s is not None:
        assert lat_slow == pytest.approx(access_s + airtime_slow_s, abs=1e-6)
        assert lat_fast == pytest.approx(access_s + airtime_fast_s, abs=1e-6)


def test_latency_bound_feedback_latency_and_the_safe_rate_sweep(ns3_bridge):
    """latency_bound_s discards late copies (cause late), feedback carries the largest on-time latency, losses
    are attributed to their send step, and the offline sweep separates a rate the link carries from one it
    cannot (802.11a 6 Mbit/s: a 1028 B unicast frame + ACK takes ~1.7 ms, ~58 per 0.1 s step)."""
    from coopsim.comm.oracle import safe_rate_sweep

    pos = Positions([[[0.0, 0, 0], [3.0, 0, 0]]])
    ch = Ns3Channel(latency_bound_s=0.1)
    ch.reset(2, num_envs=1, num_agents=2, dt_s=DT, scenario=pos)
    lat_max = []
    for t in range(14):
        k = 90 if t < 8 else 0  # 1.5x what the link carries, then drain
        ch.send(t, MessageBatch(np.zeros(k, np.int32), np.zeros(k, np.int32), np.ones(k, np.int32),
                                np.zeros((k, 250), np.float32), np.full(k, t * DT)))
        ch.deliver(t + 1)
        lat_max.append(ch.feedback(t + 1).latency_max_s[0, 0])
    s = ch.stats()
    assert s["comm/latency_max_s"] <= 0.1 + 1e-9 and 0.05 < max(lat_max) <= 0.1 + 1e-9
    assert s["comm/lost_copies/late"] > 0 and s["comm/queued_copies"] == 0
    assert s["comm/offered_copies"] == s["comm/delivered_copies"] + s["comm/lost_copies"] == 8 * 90
    by_step = ch.lost_bytes_by_send_step(8)
    assert by_step.sum() == s["comm/lost_bytes"] and by_step[0, 0] < by_step[-1, 0]  # the backlog grows
    out = safe_rate_sweep(ch, seed=2, num_envs=1, num_agents=2, dt_s=DT, num_steps=10, copy_bytes=1028,
                          rates_bps=np.array([20 * 1028 * 8 / DT, 90 * 1028 * 8 / DT]), scenario=pos, drain_steps=10)
    ch.close()
    assert out["lost_bytes"][0].sum() == 0 and out["lost_bytes"][1].sum() > 0.1 * out["offered_bytes"][1].sum()
    assert (out["safe_bps"][:, 0] == 20 * 1028 * 8 / DT).all()
