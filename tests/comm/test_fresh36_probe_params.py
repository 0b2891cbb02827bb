"""SafeRateProbe's documented cross-constraints and bad feedback (fresh36 F12)."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.comm import SafeRateProbe
from coopsim.errors import ConfigError
from coopsim.platform.comm import Feedback

BASE = dict(initial_rate_bps=3200, min_rate_bps=320, max_rate_bps=64000)


@pytest.mark.parametrize("kw, key, text", [
    ({"max_up_factor": 1.01}, "max_up_factor", "invalid value 1.01: must be >= up_factor (1.05)"),
    ({"max_hold_steps": 1}, "max_hold_steps", "invalid value 1: must be >= hold_steps (5)"),
    ({"initial_rate_bps": 10}, "initial_rate_bps", "invalid value 10: must be in [min_rate_bps, max_rate_bps] = [320, 64000]"),
    ({"max_rate_bps": 64}, "max_rate_bps", "invalid value 64: must be >= min_rate_bps (320)"),
    ({"max_rate_bps": float("inf")}, "max_rate_bps", "invalid value inf: must be a finite number"),
    ({"up_factor": float("inf")}, "up_factor", "invalid value inf: must be a finite number"),
    ({"initial_rate_bps": float("nan")}, "initial_rate_bps", "invalid value nan: must be a finite number"),
    ({"max_rate_bps": 2e12}, "max_rate_bps", "less than or equal to 1000000000000"),
])
def test_bad_params_are_config_errors_naming_the_key(kw, key, text):
    with pytest.raises(ConfigError) as ei:
        SafeRateProbe((1, 2), **{**BASE, **kw})
    assert ei.value.key == key and text in str(ei.value)
    assert "pydantic" not in str(ei.value)


def test_equal_limits_are_fine():
    p = SafeRateProbe((1, 2), **BASE, up_factor=1.2, max_up_factor=1.2, hold_steps=7, max_hold_steps=7)
    assert p.params.max_up_factor == 1.2 and p.rate_bps.tolist() == [[3200.0, 3200.0]]


def test_bad_feedback_is_refused_before_it_changes_anything():
    p = SafeRateProbe((1, 2), **BASE)
    with pytest.raises(ValueError, match=r"fb must be a coopsim.platform.comm.Feedback; got None: the channel gives no "
                                         r"feedback \(Channel.feedback returned None\)"):
        p.update(None)
    with pytest.raises(ValueError, match=r"fb.delivered_bytes has shape \(2, 2\), the probe's senders \(1, 2\)"):
        p.update(Feedback.zeros(2, 2))
    fb = Feedback.zeros(1, 2)
    fb.lost_bytes[0, 0] = -5
    with pytest.raises(ValueError, match=r"fb.lost_bytes must be finite and >= 0 \(byte counts\); got -5"):
        p.update(fb)
    assert p.estimate_bps.tolist() == [[3200.0, 3200.0]]


# ------------------------------------------------------------------ fresh36b N5: defaults in the cross-checks, feedback

@pytest.mark.parametrize("kw, key, text", [
    ({"up_factor": 1.2}, "max_up_factor", "invalid value 1.05: must be >= up_factor (1.2); when not given it is its "
                                          "default, 1.05: give max_up_factor >= 1.2 with it"),
    ({"hold_steps": 10}, "max_hold_steps", "invalid value 5: must be >= hold_steps (10); when not given it is its "
                                           "default, 5: give max_hold_steps >= 10 with it"),
])
def test_a_factor_above_the_default_max_is_refused_when_the_max_is_not_given(kw, key, text):
    with pytest.raises(ConfigError) as e:
        SafeRateProbe((1, 2), **{**BASE, **kw})
    assert e.value.key == key and text in str(e.value)
    SafeRateProbe((1, 2), **BASE, up_factor=1.05, hold_steps=5)  # at the defaults: fine


def _fb(**kw):
    fb = Feedback.zeros(1, 2)
    fb.delivered_copies[...] = 1
    fb.delivered_bytes[...] = 400
    fb.latency_max_s[...] = 0.05
    for k, v in kw.items():
        setattr(fb, k, v)
    return fb


@pytest.mark.parametrize("kw, text", [
    ({"latency_max_s": np.zeros((3, 3))}, r"fb.latency_max_s has shape \(3, 3\), the probe's senders \(1, 2\)"),
    ({"latency_max_s": np.array([[-0.1, 0.05]])}, r"fb.latency_max_s must be finite and >= 0 \(seconds\); got -0.1"),
    ({"latency_max_s": np.array([[np.nan, 0.05]])}, r"fb.latency_max_s must be finite and >= 0 \(seconds\); got nan"),
    ({"delivered_copies": np.array([[-1, 1]])}, r"fb.delivered_copies must be finite and >= 0 \(copy counts\); got -1"),
    ({"delivered_bytes": np.array([[np.nan, 400.0]])}, r"fb.delivered_bytes must be finite and >= 0 \(byte counts\); "
                                                       r"got nan"),
    ({"lost_copies": np.array([["a", "b"]])}, r"fb.lost_copies must hold numbers >= 0 \(copy counts\); got dtype <U1"),
])
def test_bad_feedback_values_are_refused_by_name_and_change_nothing(kw, text):
    p = SafeRateProbe((1, 2), **BASE, dt_s=0.1, delay_based=True)
    with pytest.raises(ValueError, match=text):
        p.update(_fb(**kw))
    assert p.estimate_bps.tolist() == [[3200.0, 3200.0]] and np.isnan(p.capacity_bps).all()


def test_active_of_another_shape_is_refused_and_feedback_from_lists_is_read():
    p = SafeRateProbe((1, 2), **BASE, dt_s=0.1, delay_based=True)
    with pytest.raises(ValueError, match=r"active has shape \(3,\), the probe's senders \(1, 2\)"):
        p.update(_fb(), active=np.ones(3, bool))
    q = SafeRateProbe((1, 2), **BASE, dt_s=0.1, delay_based=True)
    fb = _fb()
    lists = Feedback(*(getattr(fb, k).tolist() for k in ("delivered_copies", "lost_copies", "delivered_bytes",
                                                         "lost_bytes", "latency_max_s")))
    assert p.update(fb, active=[[True, True]]).tolist() == q.update(lists).tolist()
    assert np.isfinite(q.capacity_bps).all()  # the delay-based path read the lists' latency
