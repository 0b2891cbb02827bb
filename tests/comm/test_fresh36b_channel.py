"""fresh36b N1-N3: empty batches from plain lists, ideal-v0's skipped deliver steps, and the channels' input checks."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.ideal import IdealChannel
from coopsim.platform.comm import MessageBatch


# ------------------------------------------------------------------ N1: an empty batch from plain lists

@pytest.mark.parametrize("empty", [[], np.array([]), np.zeros(0, np.int64), np.zeros(0, bool)])
def test_an_empty_batch_from_plain_lists_is_accepted_with_the_documented_dtypes(empty):
    b = MessageBatch(empty, empty, empty, np.zeros((0, 2), np.float32), [])
    assert len(b) == 0 and b.env.dtype == b.src.dtype == b.dst.dtype == np.int32 and b.t_sent_s.dtype == np.float64
    b = MessageBatch([], [], [], [], [])  # a payload of [] too: [0, 0]
    assert b.payload.shape == (0, 0) and b.payload.dtype == np.float32
    for ch in (IdealChannel(), BandwidthChannel()):
        ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
        ch.send(0, b)  # a step in which nobody sends
        assert len(ch.deliver(1)) == 0 and ch.stats()["comm/offered_copies"] == 0.0


def test_a_non_empty_float_index_is_still_refused():
    with pytest.raises(ValueError, match="MessageBatch.src must hold integers .* got dtype float64"):
        MessageBatch([0], [0.7], [1], np.zeros((1, 2)), [0.0])


# ------------------------------------------------------------------ N2: a skipped deliver step strands nothing

def _bc(src, t, n=1):
    """``n`` broadcasts of ``src`` at step ``t`` (payload: the step, to tell them apart)."""
    return MessageBatch(np.zeros(n, np.int32), np.full(n, src, np.int32), np.full(n, -1, np.int32),
                        np.full((n, 2), t, np.float32), np.full(n, t * 0.1))


def _conserved(ch):
    pc = ch.per_copy()
    for u in ("bytes", "copies"):
        assert (pc[f"offered_{u}"] == pc[f"delivered_{u}"] + pc[f"lost_{u}"] + pc[f"queued_{u}"]).all()


@pytest.mark.parametrize("channel", [IdealChannel, BandwidthChannel])
def test_deliver_after_a_skipped_step_returns_what_arrived_before(channel):
    ch = channel()
    ch.reset(0, num_envs=1, num_agents=3, dt_s=0.1)
    ch.send(0, _bc(0, 0))
    _conserved(ch)
    out = ch.deliver(2)  # deliver(1) skipped
    assert len(out) == 2 and sorted(out.dst.tolist()) == [1, 2]
    assert ch.feedback(3).delivered_copies.tolist() == [[2, 0, 0]]
    s = ch.stats()
    assert (s["comm/offered_copies"], s["comm/delivered_copies"], s["comm/queued_copies"]) == (2.0, 2.0, 0.0)
    _conserved(ch)


def test_ideal_deliver_returns_several_skipped_steps_in_send_order_and_keeps_later_ones():
    ch = IdealChannel()
    ch.reset(0, num_envs=1, num_agents=3, dt_s=0.1)
    for t in range(4):
        ch.send(t, _bc(t % 3, t, n=2))
        _conserved(ch)
    out = ch.deliver(3)  # sent at 0, 1, 2 (not 3: it arrives at 4)
    assert out.payload[:, 0].tolist() == [0.0] * 4 + [1.0] * 4 + [2.0] * 4
    s = ch.stats()
    assert (s["comm/offered_copies"], s["comm/delivered_copies"], s["comm/queued_copies"]) == (16.0, 12.0, 4.0)
    _conserved(ch)
    assert ch.deliver(10).payload[:, 0].tolist() == [3.0] * 4 and ch.stats()["comm/queued_bytes"] == 0.0
    _conserved(ch)


# ------------------------------------------------------------------ N3: input checks of the channels and buckets

import warnings  # noqa: E402

from coopsim.comm.token_bucket import TokenBucket, TwoRateThreeColorMarker  # noqa: E402


@pytest.mark.parametrize("channel", [IdealChannel, BandwidthChannel])
@pytest.mark.parametrize("dt_s, text", [
    (float("nan"), "dt_s=nan must be a finite"), (0.0, r"dt_s=0.0 must be > 0"), (-0.1, "dt_s=-0.1 must be a non-neg"),
    (1e-7, "dt_s=1e-07 must be a non-negative whole number of microseconds"), ("0.1", "dt_s='0.1' must be a number"),
    (True, "dt_s=True must be a number"), (np.True_, "must be a number"), (2e9, "at most 1e\\+09 s"),
])
def test_every_channel_checks_dt_s_at_reset_the_same_way(channel, dt_s, text):
    ch = channel()
    ch.reset(0, num_envs=1, num_agents=2, dt_s=1)  # 1 first: True must not be a cache hit of it
    with pytest.raises(ValueError, match=text):
        ch.reset(0, num_envs=1, num_agents=2, dt_s=dt_s)


def test_a_numpy_float32_time_reads_as_its_decimal_text_everywhere():
    ch = BandwidthChannel(latency_bound_s=np.float32(0.1), delay_s=np.float32(0.002))
    assert ch.params.latency_bound_s == 0.1 and ch.params.delay_s == 0.002
    ch.reset(0, num_envs=1, num_agents=2, dt_s=np.float32(0.1))
    assert (ch.dt_us, ch.bound_us, ch.delay_us) == (100_000, 100_000, 2_000)
    IdealChannel().reset(0, num_envs=1, num_agents=2, dt_s=np.float32(0.1))


def test_a_payload_beyond_float32_and_a_nan_send_time_are_refused():
    with pytest.raises(ValueError, match=r"MessageBatch.payload must fit float32 \(\|value\| <= 3.4e38\); got 1e\+300"):
        MessageBatch([0], [0], [1], np.array([[0.0, 1e300]]), [0.0])
    b = MessageBatch([0], [0], [1], np.array([[np.inf, np.nan]]), [0.0])  # inf / nan stay what they were
    assert np.isinf(b.payload[0, 0]) and np.isnan(b.payload[0, 1])
    for t in (np.nan, np.inf):
        with pytest.raises(ValueError, match="MessageBatch.t_sent_s must be finite seconds; got"):
            MessageBatch([0], [0], [1], np.zeros((1, 2)), [t])


@pytest.mark.parametrize("rate", ["1000", None, True, np.array(["1", "2"])])
def test_a_rate_that_is_not_a_number_is_refused_by_name(rate):
    with pytest.raises(ValueError, match=r"rate_bps must be a finite number of bit/s in \[0, 1e12\].* not a number"):
        TokenBucket(rate, 100)
    with pytest.raises(ValueError, match="rate_bps must be .* not a number"):
        TwoRateThreeColorMarker(8000, 100, rate, 200)
    with pytest.raises(ValueError, match="rate_bps must be .* not a number"):
        TokenBucket(1000, 100).set_rate(rate)


def test_trtcm_checks_still_hold_and_a_big_python_int_gets_the_range():
    with pytest.raises(ValueError, match="RFC 2698 needs PIR >= CIR"):
        TwoRateThreeColorMarker(8000, 100, 4000, 200)
    with pytest.raises(ValueError, match="burst sizes must be > 0 bytes"):
        TwoRateThreeColorMarker(8000, 0, 16000, 200)
    with pytest.raises(ValueError, match=r"rate_bps must be .*; got 1e\+30"):
        TokenBucket(10**30, 100)


def test_masks_and_counts_of_another_shape_are_refused_by_name():
    b = TokenBucket(1000, 100, shape=(2, 3))
    with pytest.raises(ValueError, match=r"mask of shape \(2,\) does not broadcast to the buckets' shape \(2, 3\)"):
        b.set_rate(5, mask=np.ones(2, bool))
    with pytest.raises(ValueError, match=r"mask of shape \(4,\) does not broadcast"):
        b.consume(10, mask=np.ones(4, bool))
    with pytest.raises(ValueError, match=r"mask must be a bool array of the buckets' shape \(2, 3\); got dtype int64"):
        b.set_rate(5, mask=np.ones((2, 3), np.int64))
    with pytest.raises(ValueError, match=r"count of shape \(2,\) does not broadcast to the buckets' shape \(2, 3\)"):
        b.consume_up_to(np.ones(2, np.int64), 10)
    with pytest.raises(ValueError, match=r"size_bytes of shape \(4,\) does not broadcast"):
        b.consume(np.ones(4, np.int64))
    b.set_rate(5, mask=np.array([True, False, True]))  # broadcastable: fine
    assert b.rate_bps.tolist() == [[5, 1000, 5]] * 2
    assert b.consume_up_to(np.array([1, 2, 3]), 10).tolist() == [[1, 2, 3]] * 2


def test_a_float16_size_is_compared_without_overflow():
    b = TokenBucket(1000, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert b.consume(np.float16(2)) and b.consume_up_to(np.float16(3), np.float16(2)) == 3
