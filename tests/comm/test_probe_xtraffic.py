"""The probe's cross-traffic margin (``xtraffic_gain``): its arithmetic on hand-made feedback."""
import numpy as np

from coopsim.agents.ddacom.sender import DDACOMSender
from coopsim.comm.probe import SafeRateProbe
from coopsim.platform.comm import Feedback


def fb(delivered_bytes, latency_s):
    d = np.array([delivered_bytes], np.int64)
    z = np.zeros_like(d)
    return Feedback(np.where(d > 0, 1, 0), z, d, z, np.array([latency_s], np.float64))


def probe(**kw):
    params = dict(initial_rate_bps=10_000, min_rate_bps=1_000, max_rate_bps=1e6, dt_s=0.1, delay_based=True,
                  extrapolate=False, target_utilization=0.8, xtraffic_gain=1.0, xtraffic_window=2,
                  xtraffic_ref_window=10, xtraffic_min_utilization=0.3)
    return SafeRateProbe((1, 2), **{**params, **kw})


def test_xtraffic_margin_on_hand_made_feedback():
    p = probe()
    p.update(fb([1000, 500], [0.1, 0.05]))  # both read 80 kbit/s: smoothed = reference, no cross traffic
    assert p.capacity_smooth_bps.tolist() == [[80_000, 80_000]] and p.capacity_ref_bps.tolist() == [[80_000, 80_000]]
    assert p.target_utilization.tolist() == [[0.8, 0.8]] and np.allclose(p.estimate_bps, [[64_000, 64_000]])
    # sender 0 now reads 40 kbit/s: smoothed 80k + (40k - 80k) / 2 = 60k, reference max(60k, 0.9 * 80k) = 72k,
    # x = 1 - 60/72 = 1/6, target 0.8 - sqrt(1/6) = 0.39175; sender 1 unchanged
    p.update(fb([500, 500], [0.1, 0.05]))
    assert np.allclose(p.capacity_smooth_bps, [[60_000, 80_000]])
    assert np.allclose(p.capacity_ref_bps, [[72_000, 80_000]])
    assert np.allclose(p.target_utilization, [[0.8 - np.sqrt(1 / 6), 0.8]])
    assert np.allclose(p.estimate_bps, [[(0.8 - np.sqrt(1 / 6)) * 40_000, 64_000]])
    p.update(fb([0, 500], [0.0, 0.05]))  # no copy of sender 0 delivered: its margin state does not move
    assert np.allclose(p.capacity_smooth_bps[0, 0], 60_000) and np.allclose(p.capacity_ref_bps[0, 0], 72_000)
    # 20 kbit/s: smoothed 40k, reference max(40k, 64.8k), x = 1 - 40/64.8, target 0.8 - 0.6186 < floor 0.3
    p.update(fb([250, 500], [0.1, 0.05]))
    assert np.allclose(p.capacity_smooth_bps[0, 0], 40_000) and np.allclose(p.capacity_ref_bps[0, 0], 64_800)
    assert np.allclose(p.target_utilization, [[0.3, 0.8]]) and np.allclose(p.estimate_bps[0, 0], 6_000)


def test_xtraffic_off_by_default_keeps_the_fixed_target():
    p = probe(xtraffic_gain=None)
    p.update(fb([1000, 1000], [0.1, 0.1]))
    p.update(fb([500, 500], [0.1, 0.1]))
    assert p.target_utilization.tolist() == [[0.8, 0.8]] and np.allclose(p.estimate_bps, 0.8 * 40_000)
    assert DDACOMSender.Params().xtraffic_gain is None  # issue 6's channel experiments are unchanged


def test_xtraffic_options_are_the_probes_own_in_the_sender():
    # declared once (coopsim.comm.probe): the sender's options are the probe's, default, bounds and description
    from coopsim.agents.ddacom.sender import DDACOMSenderParams
    from coopsim.comm.probe import XTRAFFIC_KEYS, SafeRateProbeParams

    for k in XTRAFFIC_KEYS:
        assert repr(DDACOMSenderParams.model_fields[k]) == repr(SafeRateProbeParams.model_fields[k]), k
    assert [k for k in SafeRateProbeParams.model_fields if k.startswith("xtraffic")] == list(XTRAFFIC_KEYS)
    assert [k for k in DDACOMSenderParams.model_fields if k.startswith("xtraffic")] == list(XTRAFFIC_KEYS)
