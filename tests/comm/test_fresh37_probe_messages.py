"""fresh37 F6, F7: the probe's max >= pair message prints the bound exactly (an int as an int, a float that reads
back as itself), so "give max_... >= X" never names a rounded value."""
from __future__ import annotations

import pytest

from coopsim.comm.probe import SafeRateProbe
from coopsim.errors import ConfigError

RATES = dict(initial_rate_bps=8000, min_rate_bps=1000, max_rate_bps=1e7)


@pytest.mark.parametrize("kw, text", [
    (dict(hold_steps=1234567, max_hold_steps=1234000),
     "must be >= hold_steps (1234567); when not given it is its default, 5: give max_hold_steps >= 1234567 with it"),
    (dict(hold_steps=10**7, max_hold_steps=3), "give max_hold_steps >= 10000000 with it"),
    (dict(up_factor=1.0000004, max_up_factor=1.0000002),
     "must be >= up_factor (1.0000004); when not given it is its default, 1.05: give max_up_factor >= 1.0000004 with"),
    (dict(up_factor=1.2), "must be >= up_factor (1.2); when not given it is its default, 1.05: give max_up_factor >= "
                          "1.2 with it"),
])
def test_max_ge_pair_message_prints_the_bound_exactly(kw, text):
    with pytest.raises(ConfigError) as e:
        SafeRateProbe((1,), **RATES, **kw)
    assert text in str(e.value)
    assert "e+0" not in str(e.value)


def test_the_bound_named_is_accepted():
    # the value the message asks for is itself valid (F7: "give max_up_factor >= 1" named a refused value)
    p = SafeRateProbe((1,), **RATES, up_factor=1.0000004, max_up_factor=1.0000004)
    assert p.params.max_up_factor == p.params.up_factor == 1.0000004
    p = SafeRateProbe((1,), **RATES, hold_steps=1234567, max_hold_steps=1234567)
    assert p.params.max_hold_steps == p.params.hold_steps == 1234567
