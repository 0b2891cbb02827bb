"""The ideal channel: every copy sent at step t arrives at step t + 1, nothing is lost."""
from __future__ import annotations

import numpy as np

from coopsim.platform.comm import Channel, Feedback, MessageBatch, concat


class IdealChannel(Channel):
    """Lossless, unlimited-bandwidth channel with a one-step delay.

    Accounting (``stats``): ``messages_sent`` (rows offered), ``copies_offered`` (one per receiver
    of a broadcast), ``offered_bytes``, ``delivered_bytes``; per copy offered = delivered + queued.
    """

    def reset(self, seed, *, num_envs, num_agents, dt_s, scenario=None):
        self.num_agents, self.dt_s = num_agents, dt_s
        self._pending: dict[int, list[MessageBatch]] = {}
        self._num_envs = num_envs
        self._fb = Feedback.zeros(num_envs, num_agents)
        self._stats = dict(messages_sent=0, copies_offered=0, offered_bytes=0, delivered_bytes=0, copies_delivered=0)

    def send(self, t, batch):
        if batch is None or len(batch) == 0:
            return
        copies = batch.expand_broadcast(self.num_agents)
        self._stats["messages_sent"] += len(batch)
        self._stats["copies_offered"] += len(copies)
        self._stats["offered_bytes"] += int(copies.size_bytes(self.params.header_bytes).sum())
        self._pending.setdefault(t + 1, []).append(copies)

    def deliver(self, t):
        out = concat(self._pending.pop(t, []))
        self._stats["copies_delivered"] += len(out)
        self._stats["delivered_bytes"] += int(out.size_bytes(self.params.header_bytes).sum()) if len(out) else 0
        if len(out):
            size = out.size_bytes(self.params.header_bytes)
            np.add.at(self._fb.delivered_copies, (out.env, out.src), 1)
            np.add.at(self._fb.delivered_bytes, (out.env, out.src), size)
        return out

    def feedback(self, t):
        """Per-sender delivered counts of copies delivered up to ``deliver(t)`` (nothing is ever lost)."""
        out, self._fb = self._fb, Feedback.zeros(self._num_envs, self.num_agents)
        return out

    def stats(self):
        s = {f"comm/{k}": float(v) for k, v in self._stats.items()}
        queued = sum(int(b.size_bytes(self.params.header_bytes).sum()) for bs in self._pending.values() for b in bs)
        s["comm/queued_bytes"] = float(queued)
        return s
