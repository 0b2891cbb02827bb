import numpy as np
import pytest

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.probe import SafeRateProbe
from coopsim.comm.token_bucket import TokenBucket
from coopsim.platform.comm import Feedback, MessageBatch


def run_probe(capacity_bps, steps=400, E=2):
    """A greedy sender per env offers what a token bucket at the probing rate allows; returns estimate history."""
    ch = BandwidthChannel(trace={"kind": "constant", "rate": capacity_bps}, latency_bound_s=0.1, queue_packets=64)
    ch.reset(0, num_envs=E, num_agents=2, dt_s=0.1)
    probe = SafeRateProbe((E, 2), initial_rate_bps=4000, min_rate_bps=1000, max_rate_bps=400_000,
                          up_after=2)
    bucket = TokenBucket(probe.rate_bps, burst_bytes=0, shape=(E, 2), full=False)
    hist = []
    for t in range(steps):
        bucket.set_rate(probe.rate_bps)
        bucket.set_burst(np.floor(probe.rate_bps * 0.1 / 8))  # depth follows the rate: one step of tokens
        bucket.refill(0.1)
        k = bucket.consume_up_to(1000, 40)[:, 0]  # sender 0 of each env sends k copies of 40 B to agent 1
        env = np.repeat(np.arange(E), k)
        n = len(env)
        ch.send(t, MessageBatch(env.astype(np.int32), np.zeros(n, np.int32), np.ones(n, np.int32),
                                np.zeros((n, 3), np.float32), np.full(n, t * 0.1)))
        ch.deliver(t + 1)
        probe.update(ch.feedback(t + 1), active=np.ones((E, 2), bool))
        hist.append(probe.estimate_bps[:, 0].copy())
    return np.array(hist), ch


@pytest.mark.parametrize("capacity", [16_000, 64_000, 161_600])
def test_probe_converges_to_constant_capacity(capacity):
    hist, ch = run_probe(capacity)
    last = hist[-100:]
    # Copies are 320 bits and leave at most once per 0.1 s step, so offered rates are quantized to
    # 3200 bit/s: the estimate settles within one probing step (x1.05) and one copy per step of C.
    copy_bps = 320 / 0.1
    assert (last <= capacity + copy_bps).all()
    assert (last >= capacity / 1.05 - copy_bps).all()
    s = ch.stats()
    # only failed probes lose: the 5% overshoot plus two copies of quantization, at most once every
    # up_after + hold_steps + 1 = 8 steps
    assert s["comm/lost_copies"] / s["comm/offered_copies"] < (0.05 * capacity / copy_bps + 2) / 8 / (capacity / copy_bps)


def test_probe_falls_back_on_failed_probe_steps_down_on_capacity_drop_and_holds():
    p = SafeRateProbe((1,), initial_rate_bps=10_000, min_rate_bps=1000, max_rate_bps=1e6, up_after=1, hold_steps=2,
                      max_hold_steps=4)
    fb = lambda d, l: Feedback(np.zeros((1,), np.int64), np.zeros((1,), np.int64), np.array([d]), np.array([l]))  # noqa: E731
    p.update(fb(100, 0))  # safe at 10000: probe 10500
    assert p.estimate_bps[0] == 10_000 and p.rate_bps[0] == pytest.approx(10_500)
    p.update(fb(90, 10))  # 10% loss while probing: back to the estimate, which stays
    assert p.rate_bps[0] == 10_000 and p.estimate_bps[0] == 10_000
    p.update(fb(100, 0))  # holding (2 -> 1)
    assert p.rate_bps[0] == 10_000
    p.update(fb(100, 0))  # hold over: confirm and probe again
    assert p.rate_bps[0] == pytest.approx(10_500)
    p.update(fb(99, 1))  # 1% loss while probing: back, and the hold doubles (2 -> 4)
    assert p._hold[0] == 4
    p.update(fb(97, 3))  # 3% loss at the estimate: capacity fell, step down by 0.85
    assert p.estimate_bps[0] == pytest.approx(8500) and p.rate_bps[0] == pytest.approx(8500)
    p.update(fb(0, 0))  # no traffic: nothing learnt, hold not consumed
    p.update(fb(0, 0))
    for _ in range(3):  # the hold is 4 reports now
        p.update(fb(100, 0))
        assert p.rate_bps[0] == pytest.approx(8500)
    p.update(fb(100, 0))
    assert p.rate_bps[0] == pytest.approx(8500 * 1.05)


def run_delay_probe(trace, steps, queue_packets=64, E=2, N=2, **probe_kw):
    """Sender 0 of each env sends what a one-step token bucket at the delay-based probe's rate allows."""
    ch = BandwidthChannel(trace=trace, latency_bound_s=0.1, queue_packets=queue_packets)
    ch.reset(0, num_envs=E, num_agents=N, dt_s=0.1)
    probe = SafeRateProbe((E, N), initial_rate_bps=4000, min_rate_bps=1000, max_rate_bps=400_000,
                          dt_s=0.1, delay_based=True, hold_steps=5, max_hold_steps=40, **probe_kw)
    bucket = TokenBucket(probe.rate_bps, burst_bytes=0, shape=(E, N), full=False)
    sent, lost, est = [], [], []
    for t in range(steps):
        bucket.set_rate(probe.rate_bps)
        bucket.set_burst(np.maximum(np.floor(probe.rate_bps * 0.1 / 8), 40))
        bucket.refill(0.1)
        k = bucket.consume_up_to(1000, 40)[:, 0]
        env = np.repeat(np.arange(E), k)
        n = len(env)
        ch.send(t, MessageBatch(env.astype(np.int32), np.zeros(n, np.int32), np.ones(n, np.int32),
                                np.zeros((n, 3), np.float32), np.full(n, t * 0.1)))
        ch.deliver(t + 1)
        fb = ch.feedback(t + 1)
        probe.update(fb)
        sent.append(k.copy())
        lost.append(fb.lost_copies[:, 0].copy())
        est.append(probe.estimate_bps[:, 0].copy())
    return np.array(sent), np.array(lost), np.array(est), ch


@pytest.mark.parametrize("capacity", [16_000, 17_000, 64_000])
def test_delay_based_probe_reads_constant_capacity_without_loss(capacity):
    # copies of 320 bits sent together finish at k * 320 / C: the last one's latency gives C from the first
    # report on, so the sender never offers more than the link serves in a step
    sent, lost, est, ch = run_delay_probe({"kind": "constant", "rate": capacity}, 60)
    assert np.allclose(est[1:], capacity, rtol=1e-4)  # latencies are whole microseconds
    assert (sent[2:] == capacity * 0.1 // 320).all()
    assert lost.sum() == 0 and ch.stats()["comm/lost_copies"] == 0


def test_delay_based_probe_loses_only_at_the_drop_and_recovers_in_one_report():
    trace = {"kind": "step", "high": 16_000, "low": 6_400, "drop_at_s": 3.0, "recover_at_s": 6.0}
    sent, lost, est, ch = run_delay_probe(trace, 90)
    # step 30 sends 5 copies into a link that serves 2 per step: 3 are lost, nothing else ever is
    assert sent[30].tolist() == [5, 5] and lost[30].tolist() == [3, 3]  # reported at feedback(31)
    assert lost.sum() == 6 and ch.stats()["comm/lost_copies"] == 6
    assert (sent[31:60] == 2).all() and np.allclose(est[30:59], 6_400, rtol=1e-4)
    # capacity returns at step 60: the copies of that step finish early, and the next step uses all of it
    assert (sent[61:] == 5).all()


def test_delay_based_probe_caps_at_a_queue_it_cannot_see_with_bounded_loss():
    # 64000 bit/s serves 20 copies per step but the queue holds 8: the overflow is a loss the measured
    # capacity does not explain, so a loss ceiling at the delivered rate (8 copies) takes over; it is probed
    # upward after a hold that doubles (5, 10, 20, 40) at each repeated failure
    sent, lost, est, ch = run_delay_probe({"kind": "constant", "rate": 64_000}, 300, queue_packets=8)
    assert (sent[100:] <= 9).all() and (sent[100:] >= 8).all()
    assert (sent[100:] == 8).mean() > 0.9
    # one copy lost per re-probe, and the re-probes thin out: the hold doubles up to 40 reports
    events = np.flatnonzero(lost[:, 0])
    assert lost[events[1:], 0].tolist() == [1] * (len(events) - 1)
    assert (np.diff(events)[-3:] >= 40).all() and len(events) <= 10
    s = ch.stats()
    assert s["comm/lost_copies"] == s["comm/lost_copies/overflow"]
    assert s["comm/lost_copies"] / s["comm/offered_copies"] < 0.01


@pytest.mark.parametrize("curvature", [False, True])
def test_delay_based_probe_curvature_sees_the_top_of_a_smooth_swell(curvature):
    # capacity 10400 + 2400 sin(2 pi t / 10 s): exactly 4 copies of 320 bits per step at step 25 (the peak),
    # 3.998 at steps 24 and 26. First order, the sender reads 4.000 at step 25 and rising, sends 4 copies at
    # step 26 and loses one per peak; second order, the rise slowed (12781, 12795, 12800 bit/s at steps
    # 23-25: d = 14 then 5), so the prediction 12800 + 2 * 5 - 14 = 12796 bit/s < 4 copies: step 26 sends 3
    trace = {"kind": "sinusoid", "mean": 10_400, "amplitude": 2_400, "period_s": 10.0}
    sent, lost, est, ch = run_delay_probe(trace, 230, curvature=curvature)
    if curvature:
        assert lost.sum() == 0 and ch.stats()["comm/lost_copies"] == 0
        assert sent[26].tolist() == [3, 3]
    else:
        assert sent[26].tolist() == [4, 4] and lost[26].tolist() == [1, 1]
        assert lost.sum() == 6 and lost[[26, 126, 226]].sum() == 6  # one per sender and peak
    # away from the peaks both send what the capacity serves in a step, or one copy less
    cap = np.floor(10_400 + 2_400 * np.sin(2 * np.pi * np.arange(230) * 0.1 / 10)) * 0.1 // 320
    assert (sent[2:, 0] <= cap[2:]).sum() >= 228 - 3 and (sent[2:, 0] >= cap[2:] - 1).all()


@pytest.mark.parametrize("limited_only", [False, True])
def test_delay_based_probe_keeps_its_loss_ceiling_while_capacity_is_below_it(limited_only):
    # 20 copies per step behind an 8-packet queue, then 5 per step for 10 s, then 20 again. The loss ceiling
    # (8 copies) is learnt in the first phase; in the second the sender sends 5 (capacity-limited). Counting
    # those reports as tests of the ceiling raises it to nothing, and recovery sends 20 copies into the queue
    # (12 overflow); counting only reports limited by the ceiling keeps it and recovery sends 8
    trace = {"kind": "step", "high": 64_000, "low": 16_000, "drop_at_s": 10.0, "recover_at_s": 20.0}
    sent, lost, est, ch = run_delay_probe(trace, 300, queue_packets=8, ceiling_limited_only=limited_only)
    assert (sent[101:200, 0] == 5).all() and lost[100, 0] == 3  # the drop step: 8 sent, 5 served
    events = np.flatnonzero(lost[:, 0])
    assert events[events <= 100].tolist() == [1, 9, 22, 45, 88, 100]  # identical up to the drop
    s = ch.stats()
    if limited_only:
        assert sent[201, 0] == 8
        assert events[events > 100].tolist() == [232, 275] and lost[[232, 275], 0].tolist() == [1, 1]
        assert s["comm/lost_copies/overflow"] == 36
    else:
        assert sent[201, 0] == 20 and lost[201, 0] == 12
        assert s["comm/lost_copies/overflow"] == 60
    assert s["comm/lost_copies/late"] == 6  # 3 per env at the drop
