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
