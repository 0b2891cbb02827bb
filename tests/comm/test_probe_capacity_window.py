"""The delay-based probe's capacity smoothing (``capacity_window``): a harmonic EWMA, restarted by a lossy report."""
import numpy as np

from coopsim.comm.probe import SafeRateProbe
from coopsim.platform.comm import Feedback


def fb(delivered_bytes, latency_s, lost_bytes=(0, 0)):
    d = np.array([delivered_bytes], np.int64)
    lost = np.array([lost_bytes], np.int64)
    return Feedback(np.where(d > 0, 1, 0), np.where(lost > 0, 1, 0), d, lost, np.array([latency_s], np.float64))


def probe(**kw):
    params = dict(initial_rate_bps=10_000, min_rate_bps=1_000, max_rate_bps=1e6, dt_s=0.1, delay_based=True,
                  extrapolate=False, target_utilization=0.5)
    return SafeRateProbe((1, 2), **{**params, **kw})


def test_window_one_is_the_last_report():
    p = probe()
    for d, lat in ((1000, 0.1), (1000, 0.05)):  # 80 kbit/s, then 160 kbit/s
        p.update(fb([d, d], [lat, lat]))
    assert np.allclose(p.capacity_bps, 160_000) and np.allclose(p.estimate_bps, 80_000)


def test_harmonic_ewma_and_restart_after_loss():
    p = probe(capacity_window=2.0)
    p.update(fb([1000, 1000], [0.1, 0.1]))  # first report: 80 kbit/s as measured
    assert np.allclose(p.capacity_bps, 80_000) and np.allclose(p.estimate_bps, 40_000)
    # sender 0 reads 160 kbit/s: time per bit 1/80k + (1/160k - 1/80k) / 2 = 3/320k -> 106,666.7 bit/s;
    # sender 1 reads 40 kbit/s: 1/80k + (1/40k - 1/80k) / 2 = 3/160k -> 53,333.3 bit/s
    p.update(fb([1000, 500], [0.05, 0.1]))
    assert np.allclose(p.capacity_bps, [[320_000 / 3, 160_000 / 3]])
    assert np.allclose(p.estimate_bps, [[160_000 / 3, 80_000 / 3]])
    # sender 1 reports loss above the threshold: its smoothing restarts from the report's 20 kbit/s (and the estimate
    # is at most the delivered rate, 250 B / 0.1 s = 20 kbit/s); sender 0 keeps smoothing
    p.update(fb([1000, 250], [0.05, 0.1], lost_bytes=(0, 250)))
    assert np.allclose(p.capacity_bps[0, 1], 20_000) and np.allclose(p.estimate_bps[0, 1], 10_000)
    assert np.allclose(p.capacity_bps[0, 0], 1 / ((3 / 320_000 + 1 / 160_000) / 2))


def test_no_delivery_leaves_the_smoothed_capacity():
    p = probe(capacity_window=3.0)
    p.update(fb([1000, 1000], [0.1, 0.1]))
    p.update(fb([0, 1000], [0.0, 0.05]))
    assert np.allclose(p.capacity_bps[0, 0], 80_000)
    assert np.allclose(p.capacity_bps[0, 1], 1 / (1 / 80_000 + (1 / 160_000 - 1 / 80_000) / 3))
