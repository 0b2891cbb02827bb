"""benchmarks/smac_scripted_micro.py: the rules reduce to focus fire where they should, and the Wilson interval."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.errors import ConfigError
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)


@pytest.fixture(scope="module")
def micro():
    return load_benchmark("smac_scripted_micro")


def test_rules_that_never_fire_play_exactly_focus_fire(micro):
    focus = micro.play("3m", "focus", {}, 64, 3)
    assert 0.2 < focus.mean() < 0.9  # 3m's focus fire wins about 60 %: a real mix of wins and losses
    # health is never below 0, a hold of 0 steps holds nothing, and the observed cooldown fraction never exceeds 1
    # (observed 8 ticks after a shot at the earliest)
    np.testing.assert_array_equal(micro.play("3m", "retreat", {"thr": 0.0, "margin": 0.5, "hold": 3}, 64, 3), focus)
    np.testing.assert_array_equal(micro.play("3m", "hold", {"hold": 0}, 64, 3), focus)
    np.testing.assert_array_equal(micro.play("3m", "stutter", {"thr": 1.0, "margin": 0.5}, 64, 3), focus)
    # and a rule that does fire changes the outcome of some episode
    assert not np.array_equal(micro.play("3m", "retreat", {"thr": 0.5, "margin": 0.5, "hold": 3}, 64, 3), focus)


def test_wilson_interval_known_values(micro):
    lo, hi = micro.wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    lo, hi = micro.wilson(0, 512)
    assert lo == 0.0 and hi == pytest.approx(1.96**2 / (512 + 1.96**2), rel=1e-9)


def test_bad_input_is_refused_by_name(micro):
    with pytest.raises(ConfigError, match="marine-only map; valid: 10m_vs_11m"):
        micro.main(["--map", "2s3z"])
    for n in ("0", "100000000000"):
        with pytest.raises(ConfigError, match=r"--episodes must be in 1 \.\. 65536"):
            micro.main(["--episodes", n])
    for seed in ("-1", str(2**31)):
        with pytest.raises(ConfigError, match=r"--seed must be in 0 \.\. 2\*\*31 - 1"):
            micro.main(["--seed", seed])
    with pytest.raises(ConfigError, match="unknown rule 'kite'"):
        micro.play("3m", "kite", {}, 2, 0)
