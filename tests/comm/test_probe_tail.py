"""The probe's latency-tail margin (``tail_frac``): the share arithmetic on hand-made feedback."""
import numpy as np
import pytest

from coopsim.agents.ddacom.sender import DDACOMSender
from coopsim.comm.probe import SafeRateProbe
from coopsim.platform.comm import Feedback


def fb(delivered_bytes, latency_s, lost_bytes=(0, 0)):
    d = np.array([delivered_bytes], np.int64)
    lost = np.array([lost_bytes], np.int64)
    return Feedback(np.where(d > 0, 1, 0), np.where(lost > 0, 1, 0), d, lost, np.array([latency_s], np.float64))


def probe(**kw):
    params = dict(initial_rate_bps=10_000, min_rate_bps=1_000, max_rate_bps=1e6, dt_s=0.1, delay_based=True,
                  target_utilization=1.0, tail_frac=0.8, tail_window=4, tail_share=0.5, tail_min_utilization=0.5)
    return SafeRateProbe((1, 2), **{**params, **kw})


def test_tail_share_and_target_on_hand_made_feedback():
    # both senders measure 80 kbit/s (900 B in 0.09 s, then 500 B in 0.05 s); sender 0's first report is a
    # tail event (0.09 s > 0.8 x 0.1 s), sender 1's latency 0.07 s is not
    p = probe()
    p.update(fb([900, 560], [0.09, 0.07]))
    assert p.tail_share.tolist() == [[0.25, 0.0]]  # 0 + (1 - 0) / 4
    assert p.target_utilization.tolist() == [[0.75, 1.0]]  # 1 - (1 - 0.5) * min(1, 0.25 / 0.5)
    assert np.allclose(p.estimate_bps, [[60_000, 64_000]])  # 0.75 x 80 kbit/s; 1.0 x 4480 bit / 0.07 s
    p.update(fb([500, 560], [0.05, 0.07]))
    assert p.tail_share.tolist() == [[0.1875, 0.0]]  # 0.25 + (0 - 0.25) / 4
    assert p.target_utilization.tolist() == [[0.8125, 1.0]]
    assert np.allclose(p.estimate_bps, [[65_000, 64_000]])


def test_tail_loss_counts_rise_window_and_floor():
    # a report with loss above the threshold is a tail event whatever its latency; with tail_rise_window 1 the
    # share jumps to 1 (target at the floor) and falls by 1/4 of the gap per clean report
    p = probe(tail_rise_window=1)
    p.update(fb([500, 500], [0.05, 0.05], lost_bytes=(100, 0)))
    assert p.tail_share.tolist() == [[1.0, 0.0]] and p.target_utilization.tolist() == [[0.5, 1.0]]
    p.update(fb([500, 500], [0.05, 0.05]))
    assert p.tail_share.tolist() == [[0.75, 0.0]] and p.target_utilization.tolist() == [[0.5, 1.0]]
    p.update(fb([500, 500], [0.05, 0.05]))
    p.update(fb([500, 500], [0.05, 0.05]))
    assert np.allclose(p.tail_share, [[0.421875, 0.0]]) and np.allclose(p.target_utilization, [[0.578125, 1.0]])
    # a report without traffic changes nothing
    p.update(fb([0, 0], [0.0, 0.0]))
    assert np.allclose(p.tail_share, [[0.421875, 0.0]])


def test_tail_initial_share_and_bound():
    p = probe(tail_initial_share=0.5, tail_bound_s=0.2)  # events above 0.16 s
    assert p.target_utilization.tolist() == [[1.0, 1.0]]  # before any report the configured target
    p.update(fb([500, 500], [0.15, 0.17]))
    assert p.tail_share.tolist() == [[0.375, 0.625]]
    assert p.target_utilization.tolist() == [[0.625, 0.5]]


def test_tail_off_by_default_keeps_the_fixed_target():
    p = probe(tail_frac=None, target_utilization=0.5)
    p.update(fb([900, 900], [0.09, 0.09]))
    assert p.target_utilization.tolist() == [[0.5, 0.5]] and p.tail_share.tolist() == [[0.0, 0.0]]
    assert np.allclose(p.estimate_bps, 0.5 * 7200 / 0.09)
    assert DDACOMSender.Params().tail_frac is None  # issue 6's channel experiments are unchanged


def test_tail_needs_a_bound():
    with pytest.raises(ValueError, match="tail_bound_s"):
        probe(dt_s=None)
