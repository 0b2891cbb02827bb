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
    with pytest.raises(ValueError, match=r"fb.lost_bytes must be >= 0 \(byte counts\); got a minimum of -5"):
        p.update(fb)
    assert p.estimate_bps.tolist() == [[3200.0, 3200.0]]
