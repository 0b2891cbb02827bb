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


# ---- fresh36 F1-F4: long idles, rate/burst ranges, bad sizes and arguments -------------------------------------

@pytest.mark.parametrize("rate, burst, idle_s", [(1e9, 1500, 10000.0), (1e6, 1500, 1e7), (1e12, 1500, 10.0),
                                                 (1e12, 5 * 10**11, 1e300)])
def test_a_long_idle_leaves_the_bucket_exactly_full_not_wrapped(rate, burst, idle_s):
    b = TokenBucket(rate, burst, shape=(2,), full=False)
    b.refill(idle_s)  # rate * us passes int64 here: only the time to fill counts
    assert b.tokens_exact((0,)) == Fraction(burst * 8) and b.tokens_exact((1,)) == Fraction(burst * 8)
    assert b.conforms(burst).tolist() == [True, True]


def test_a_long_refill_is_exact_for_partly_full_buckets_and_any_split():
    one, two = TokenBucket([1e9, 7, 0], 1500, shape=(3,)), TokenBucket([1e9, 7, 0], 1500, shape=(3,))
    for b in (one, two):
        b.consume(1000)  # 500 B (4000 bits) left in each; the third (rate 0) refills nothing
    one.refill(10000.0)
    two.refill(5000.0)
    two.refill(5000.0)
    assert [one.tokens_exact((i,)) for i in range(3)] == [12000, 12000, 4000]
    assert [two.tokens_exact((i,)) for i in range(3)] == [12000, 12000, 4000]
    b = TokenBucket(7, 1500, full=False)
    b.refill(elapsed_us=5_000_001)  # just past the direct path: 7 bit/s * 5.000001 s = 35.000007 bits
    assert b.tokens_exact() == Fraction(7 * 5_000_001, 10**6)


def test_rates_above_1e12_and_bursts_beyond_int64_are_refused_with_the_range():
    for rate in (1e30, 1e19, 1e13, float("nan"), -1):
        with pytest.raises(ValueError, match=r"rate_bps must be a finite number of bit/s in \[0, 1e12\]"):
            TokenBucket(rate, 100)
    with pytest.raises(ValueError, match=r"rate_bps .*\[0, 1e12\].*got 1e\+30"):
        TokenBucket(1e6, 100).set_rate(1e30)
    with pytest.raises(ValueError, match=r"rate_bps .*got 1e\+30"):
        TwoRateThreeColorMarker(8000, 100, 1e30, 200)
    for burst, shown in ((10**15, "1000000000000000"), (2**60, str(2**60)), (1.5, "1.5"), (float("nan"), "nan"),
                         (float("inf"), "inf"), (-1, "-1")):
        with pytest.raises(ValueError, match=rf"burst_bytes must be a whole number of bytes in \[0, 5e\+11\].*got {shown}"):
            TokenBucket(1e6, burst)
    with pytest.raises(ValueError, match="burst_bytes must be a whole number"):
        TokenBucket(1e6, 10).set_burst(np.array([3.5]))
    top = TokenBucket(1e12, 5 * 10**11)  # the largest bucket: exact, positive
    assert top.tokens_exact() == Fraction(4 * 10**12) and int(top.rate_bps) == 10**12


def test_negative_or_fractional_sizes_and_counts_are_refused_and_tokens_stay_put():
    tb = TokenBucket(1000, 10)  # full: 80 bits
    with pytest.raises(ValueError, match="size_bytes must be a whole number of bytes in .* got -5"):
        tb.consume(-5)
    with pytest.raises(ValueError, match="size_bytes must be a whole number of bytes .*no fraction.* got 1.7"):
        tb.consume(1.7)
    with pytest.raises(ValueError, match="size_bytes .* got -1"):
        tb.conforms(np.array([3, -1]))
    assert tb.tokens_exact() == 80
    tb3 = TokenBucket(8000, 100)
    with pytest.raises(ValueError, match="count must be a whole number of packets >= 0; got -3"):
        tb3.consume_up_to(-3, 10)
    with pytest.raises(ValueError, match="size_bytes must be a whole number of bytes .* got -10"):
        tb3.consume_up_to(5, -10)
    assert tb3.tokens_exact() == 800
    assert int(tb3.consume_up_to(5.0, np.float64(40))) == 2  # whole floats are whole numbers (np.floor results)
    m = TwoRateThreeColorMarker(8000, 100, 16000, 200)
    with pytest.raises(ValueError, match="size_bytes .* got -1000"):
        m.mark(np.array([-1000]))
    assert m.committed.tokens_exact() == 800 and m.peak.tokens_exact() == 1600


def test_refill_and_mark_argument_errors_are_clear():
    tb = TokenBucket(10, 10)
    with pytest.raises(ValueError, match="refill needs the elapsed time: give elapsed_s"):
        tb.refill()
    with pytest.raises(ValueError, match="elapsed_s=nan must be a finite"):
        tb.refill(float("nan"))
    with pytest.raises(ValueError, match="exactly one of elapsed_s and elapsed_us; got both"):
        tb.refill(0.1, elapsed_us=5)
    with pytest.raises(ValueError, match="elapsed_us must be a whole number of microseconds >= 0; got 2.5"):
        tb.refill(elapsed_us=2.5)
    with pytest.raises(ValueError, match="elapsed_us .* got -1"):
        tb.refill(elapsed_us=-1)
    with pytest.raises(ValueError, match="elapsed_s='1' must be a number"):
        tb.refill("1")
    tb.refill(1e300)  # huge but finite: full
    assert tb.tokens_exact() == 80
    m = TwoRateThreeColorMarker(8000, 100, 16000, 200)
    with pytest.raises(ValueError, match=r"size_bytes must have shape \(\) \+ \(M,\).*e.g. \[50\].*got shape \(\)"):
        m.mark(50)
    with pytest.raises(ValueError, match=r"pre_color must hold GREEN \(0\), YELLOW \(1\) or RED \(2\)"):
        m.mark(np.array([10]), pre_color=np.array([7]))
    with pytest.raises(ValueError, match="pre_color must have the shape of size_bytes"):
        m.mark(np.array([10, 10]), pre_color=np.array([0]))
    assert m.peak.tokens_exact() == 1600  # nothing marked
    assert m.mark(np.array([50])).tolist() == [GREEN]


def test_seconds_to_us_names_the_value_it_checks():
    with pytest.raises(ValueError, match=r"latency_bound_s=0.1000001 must be a non-negative whole number of microseconds"):
        seconds_to_us(0.1000001, "latency_bound_s")
    with pytest.raises(ValueError, match="dt_s=inf must be a finite"):
        seconds_to_us(float("inf"))
