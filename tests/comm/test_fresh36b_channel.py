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
