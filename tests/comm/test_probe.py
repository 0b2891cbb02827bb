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
