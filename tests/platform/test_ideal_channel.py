"""Ideal channel and MessageBatch: broadcast copies, sizes from payload + header, one-step delivery."""
import numpy as np

from coopsim.comm.ideal import IdealChannel
from coopsim.platform.comm import BROADCAST, MessageBatch


def batch():
    return MessageBatch(env=np.array([0, 0], np.int32), src=np.array([0, 2], np.int32),
                        dst=np.array([BROADCAST, 1], np.int32), payload=np.arange(8, dtype=np.float32).reshape(2, 4),
                        t_sent_s=np.array([0.0, 0.0]))


def test_sizes_and_broadcast_copies():
    b = batch()
    np.testing.assert_array_equal(b.size_bytes(28), [16 + 28, 16 + 28])
    c = b.expand_broadcast(4)
    # unicast 2->1 kept, broadcast from 0 becomes copies to 1, 2, 3
    assert sorted(zip(c.src.tolist(), c.dst.tolist())) == [(0, 1), (0, 2), (0, 3), (2, 1)]
    np.testing.assert_array_equal(c.payload[c.src == 0], np.tile(b.payload[0], (3, 1)))


def test_ideal_channel_delivers_next_step_and_conserves_bytes():
    ch = IdealChannel(header_bytes=28)
    ch.reset(0, num_envs=1, num_agents=4, dt_s=0.1)
    ch.send(0, batch())
    assert len(ch.deliver(0)) == 0
    s = ch.stats()
    assert s["comm/offered_bytes"] == 4 * 44 and s["comm/queued_bytes"] == 4 * 44
    got = ch.deliver(1)
    assert len(got) == 4
    s = ch.stats()
    assert s["comm/messages_sent"] == 2 and s["comm/offered_copies"] == 4
    assert s["comm/offered_bytes"] == s["comm/delivered_bytes"] + s["comm/queued_bytes"] == 176
