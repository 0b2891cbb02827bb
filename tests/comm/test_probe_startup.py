"""The delay-based probe's startup phase (``startup_growth``): the growth cap is startup_growth x the offered rate
until the first report whose estimate the measured capacity set, or one with loss; then max_growth, for good. And
``app_limited_hold``: a report from a sender with less to send than its allowance keeps its estimate as the growth
cap's floor."""
import re

import numpy as np
import pytest

from coopsim.agents.ddacom.sender import DDACOMSenderParams
from coopsim.comm.probe import SafeRateProbe
from coopsim.platform.comm import Feedback
from coopsim.errors import ConfigError

COPY = 100  # bytes per copy in these reports


def fb(delivered_bytes, latency_s, lost_bytes=(0, 0)):
    d = np.array([delivered_bytes], np.int64)
    lost = np.array([lost_bytes], np.int64)
    return Feedback(d // COPY, lost // COPY, d, lost, np.array([latency_s], np.float64))


def probe(**kw):
    params = dict(initial_rate_bps=8_000, min_rate_bps=1_000, max_rate_bps=1e7, dt_s=0.1, delay_based=True,
                  extrapolate=False, target_utilization=0.5, max_growth=1.25)
    return SafeRateProbe((1, 2), **{**params, **kw})


def test_growth_cap_is_startup_growth_until_capacity_limits():
    p = probe(startup_growth=2.0)
    # 1000 B in 0.01 s: capacity 800 kbit/s, target 0.5 -> 400 kbit/s wanted; offered 8 kbit (80 kbit/s):
    # startup cap (2 * 8000 + 800) / 0.1 = 168 kbit/s (max_growth's would be (1.25 * 8000 + 800) / 0.1 = 108 kbit/s)
    p.update(fb([1000, 1000], [0.01, 0.01]))
    assert np.allclose(p.estimate_bps, 168_000) and p.in_startup.all()
    # sender 0 offers 2100 B (16.8 kbit) at 0.05 s: capacity 336 kbit/s, wanted 168 kbit/s, cap (2 * 16800 + 800) /
    # 0.1 = 344 kbit/s: the capacity set it, the startup ends; sender 1 (capacity 1.68 Mbit/s) is capped at 344 k
    p.update(fb([2100, 2100], [0.05, 0.01]))
    assert np.allclose(p.estimate_bps, [[168_000, 344_000]])
    assert p.in_startup.tolist() == [[False, True]]
    # after the startup, sender 0 grows by max_growth only: capacity 16.8 kbit / 0.0105 s = 1.6 Mbit/s, wanted
    # 800 kbit/s, cap (1.25 * 16800 + 800) / 0.1 = 218 kbit/s; it never returns to the startup cap
    p.update(fb([2100, 2100], [0.0105, 0.0105]))
    assert np.allclose(p.estimate_bps[0, 0], 218_000) and not p.in_startup[0, 0]
    assert np.allclose(p.estimate_bps[0, 1], (2 * 16_800 + 800) / 0.1)  # sender 1 still in startup: 344 kbit/s


def test_loss_ends_the_startup():
    p = probe(startup_growth=2.0)
    # sender 1 loses 200 of 1000 B (20 %) with the last copy at 0.1 s: capacity 6400 bit / 0.1 s = 64 kbit/s, which
    # explains the loss (no loss ceiling); its startup ends, the estimate is 0.5 * 64 kbit/s
    p.update(fb([1000, 800], [0.01, 0.1], lost_bytes=(0, 200)))
    assert p.in_startup.tolist() == [[True, False]]
    assert np.allclose(p.estimate_bps[0, 1], 32_000)
    # then max_growth: 800 B offered at 0.01 s, capacity 640 kbit/s -> wanted 320 k, capped at (1.25 * 6400 + 800)
    # / 0.1 = 88 kbit/s (one copy of the report's mean size, 100 B, is 800 bit); in the startup it would be 136 k
    p.update(fb([1000, 800], [0.01, 0.01]))
    assert np.allclose(p.estimate_bps[0, 1], 88_000) and not p.in_startup[0, 1]


def test_without_startup_growth_nothing_changes():
    a, b = probe(), probe(startup_growth=None)
    for d, lat in ((1000, 0.01), (2100, 0.05), (2100, 0.0105)):
        ea = a.update(fb([d, d], [lat, lat])).copy()
        eb = b.update(fb([d, d], [lat, lat])).copy()
        assert np.array_equal(ea, eb)
    assert not a.in_startup.any()
    assert np.allclose(ea, (1.25 * 16_800 + 800) / 0.1)


@pytest.mark.parametrize("kw, words", [
    (dict(startup_growth=2.0, max_growth=None), "must come with max_growth"),  # fresh37 F4: it would lower the cap
    (dict(startup_growth=1.2, max_growth=1.25), "must be > max_growth (1.25)"),  # ... and here too
    (dict(startup_growth=2.0, delay_based=False), "needs delay_based: true"),  # fresh37 F8: it would do nothing
    (dict(startup_growth=2.0, dt_s=None), "needs dt_s"),
    (dict(app_limited_hold=True, max_growth=None), "needs max_growth (the growth cap whose floor it keeps"),
    (dict(app_limited_hold=True, delay_based=False), "needs delay_based: true"),
])
def test_growth_options_refused_where_they_would_lower_the_cap_or_do_nothing(kw, words):
    key = "startup_growth" if "startup_growth" in kw else "app_limited_hold"
    with pytest.raises(ConfigError) as ei:
        probe(**kw)
    assert ei.value.key == key and words in ei.value.message
    if "dt_s" not in kw:  # DDACOM's sender: its dt_s is the scenario's
        with pytest.raises(Exception, match=re.escape(words)):
            DDACOMSenderParams(**kw)


def test_a_report_with_every_copy_lost_ends_the_startup():
    """fresh37 F3: no copy delivered (no capacity measurement), but loss above the threshold: the phase is over."""
    p = probe(startup_growth=2.0)
    p.update(fb([0, 1000], [0.0, 0.01], lost_bytes=(1000, 0)))
    assert p.in_startup.tolist() == [[False, True]]


@pytest.mark.parametrize("value", [1.0, 0.5, float("nan")])
def test_bad_startup_growth_is_refused_by_name(value):
    with pytest.raises(ConfigError, match="startup_growth"):
        probe(startup_growth=value)
    with pytest.raises(Exception, match="startup_growth"):
        DDACOMSenderParams(startup_growth=value)


def test_app_limited_report_does_not_lower_the_estimate_through_the_growth_cap():
    """app_limited_hold: a sender that offered less than its allowance (active False) keeps its previous estimate as
    the growth cap's floor; the measured capacity still lowers it."""
    for hold in (False, True):
        p = probe(app_limited_hold=hold)
        # 2000 B at 0.02 s: capacity 800 kbit/s, wanted 400 k, cap (1.25 * 16000 + 800) / 0.1 = 208 kbit/s
        p.update(fb([2000, 2000], [0.02, 0.02]), active=np.array([[True, True]]))
        assert np.allclose(p.estimate_bps, 208_000)
        # 200 B (2 copies) at 0.002 s: capacity 800 kbit/s again, wanted 400 k; growth cap (1.25 * 1600 + 800) / 0.1
        # = 28 kbit/s. Sender 0 was application-limited: with the option its cap is at least its 208 k
        p.update(fb([200, 200], [0.002, 0.002]), active=np.array([[False, True]]))
        assert np.allclose(p.estimate_bps, [[208_000 if hold else 28_000, 28_000]])
        # application-limited again, but the capacity fell: 200 B at 0.02 s is 80 kbit/s, wanted 40 k, which sets
        # sender 0's estimate with the option; sender 1's floor is its own 28 k, and without the option both stay
        # at the 28 k cap
        p.update(fb([200, 200], [0.02, 0.02]), active=np.array([[False, False]]))
        assert np.allclose(p.estimate_bps, [[40_000 if hold else 28_000, 28_000]])
    # without active (None: every sender counts as rate-limited) the option changes nothing
    a, b = probe(), probe(app_limited_hold=True)
    for d, lat in ((2000, 0.02), (200, 0.002)):
        assert np.array_equal(a.update(fb([d, d], [lat, lat])), b.update(fb([d, d], [lat, lat])))


def test_startup_ends_when_the_cap_reaches_the_highest_rate():
    """fresh37b N6: a sender whose startup cap reached max_rate_bps (the capacity above it) was never told the
    phase was over, and regrew at startup_growth after any quiet step later in the run."""
    p = probe(startup_growth=2.0, max_rate_bps=100_000)
    # 1000 B at 0.01 s: capacity 800 kbit/s, wanted 400 k; cap (2 * 8000 + 800) / 0.1 = 168 k >= 100 k: over
    p.update(fb([1000, 1000], [0.01, 0.01]))
    assert np.allclose(p.estimate_bps, 100_000) and not p.in_startup.any()


@pytest.mark.parametrize("v, mg, words", [
    (2, None, "give max_growth in (1, 2), e.g. 1.25"),
    (1.1, None, "give max_growth in (1, 1.1), e.g. 1.05"),  # fresh37b N1: the example is valid itself
    (2, 3, "must be > max_growth (3)"),  # fresh37b N2: whole numbers as typed, not 3.0
])
def test_growth_option_messages_name_valid_values(v, mg, words):
    with pytest.raises(ConfigError) as ei:
        probe(startup_growth=v, max_growth=mg)
    assert words in ei.value.message and "2.0" not in ei.value.message
