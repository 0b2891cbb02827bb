from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from coopsim.comm.token_bucket import GREEN, RED, YELLOW, TokenBucket, TwoRateThreeColorMarker, seconds_to_us


def test_seconds_to_us_exact_and_rejects_sub_microsecond():
    assert seconds_to_us(0.1) == 100_000
    assert seconds_to_us(1e-6) == 1
    with pytest.raises(ValueError, match="whole number of microseconds"):
        seconds_to_us(1.5e-7)


def test_refill_is_exact_and_capped_at_burst():
    b = TokenBucket(rate_bps=1000, burst_bytes=100, full=False)  # depth 800 bits
    b.refill(0.1)
    assert b.tokens_exact() == Fraction(100)  # 1000 bit/s * 0.1 s
    b.refill(elapsed_us=333)
    assert b.tokens_exact() == Fraction(100) + Fraction(1000 * 333, 10**6)  # 100.333 bits, exactly
    b.refill(3600.0)  # an hour idle: no credit beyond the burst
    assert b.tokens_exact() == Fraction(800)
    assert list(b.consume_up_to(10, 30).reshape(-1)) == [3]  # 3 * 240 bits = 720 <= 800 < 960
    assert b.tokens_exact() == Fraction(80)


def test_rate_rounds_down_to_whole_bits_and_fractional_refill_accumulates():
    b = TokenBucket(rate_bps=7.9, burst_bytes=10, full=False)
    assert int(b.rate_bps) == 7
    for _ in range(3):
        b.refill(0.1)
    assert b.tokens_exact() == Fraction(21, 10)  # 3 * 0.7 bits, no rounding drift


def test_vectorized_consume_only_where_it_conforms():
    b = TokenBucket(rate_bps=[0, 0, 8000], burst_bytes=[10, 5, 0], shape=(3,))
    sent = b.consume(8)
    assert sent.tolist() == [True, False, False]
    assert b.tokens_bits.tolist() == [16.0, 40.0, 0.0]
    b.refill(0.001)  # 8000 bit/s * 1 ms = 8 bits, but the third has depth 0
    assert b.tokens_bits.tolist() == [16.0, 40.0, 0.0]


def test_trtcm_rfc2698_colour_blind_sequence():
    # CIR 8000 bit/s (1000 B/s), CBS 100 B, PIR 16000 bit/s, PBS 200 B; both buckets start full.
    m = TwoRateThreeColorMarker(8000, 100, 16000, 200)
    col = m.mark(np.array([60, 60, 60, 60]))
    # Tp 200 Tc 100: 60 green (Tp 140, Tc 40); 60 yellow (Tp 80); 60 yellow (Tp 20); 60 red
    assert col.tolist() == [GREEN, YELLOW, YELLOW, RED]
    assert m.peak.tokens_exact() == 20 * 8 and m.committed.tokens_exact() == 40 * 8
    m.refill(0.05)  # +50 B committed -> 90 B; +100 B peak -> 120 B
    assert m.mark(np.array([90, 31])).tolist() == [GREEN, RED]


def test_trtcm_colour_aware_keeps_precolour():
    m = TwoRateThreeColorMarker(8000, 100, 16000, 200)
    col = m.mark(np.array([10, 10, 10]), pre_color=np.array([RED, YELLOW, GREEN]))
    assert col.tolist() == [RED, YELLOW, GREEN]
    assert m.peak.tokens_exact() == (200 - 20) * 8 and m.committed.tokens_exact() == (100 - 10) * 8


def test_trtcm_rejects_pir_below_cir():
    with pytest.raises(ValueError, match="PIR >= CIR"):
        TwoRateThreeColorMarker(100, 10, 50, 10)


@settings(max_examples=60, deadline=None)
@given(rate=st.integers(0, 10**6), burst=st.integers(0, 5000),
       ops=st.lists(st.tuples(st.integers(0, 2_000_000), st.integers(1, 3000)), max_size=30))
def test_tokens_equal_exact_rational_replay(rate, burst, ops):
    """Tokens always equal an independent Fraction replay; never negative, never above the burst."""
    b = TokenBucket(rate, burst)
    ref = Fraction(burst * 8)
    for us, size in ops:
        b.refill(elapsed_us=us)
        ref = min(Fraction(burst * 8), ref + Fraction(rate * us, 10**6))
        ok = bool(b.consume(size))
        assert ok == (ref >= size * 8)
        if ok:
            ref -= size * 8
        assert b.tokens_exact() == ref
        assert 0 <= ref <= burst * 8
