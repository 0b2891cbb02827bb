"""The ideal channel: every copy sent at step t arrives at step t + 1 (``deliver(t')`` with ``t' > t`` returns it),
nothing is lost."""
from __future__ import annotations

import numpy as np

from coopsim.comm.token_bucket import step_us
from coopsim.platform.comm import Channel, Feedback, MessageBatch, concat

#: the per-copy counters of :meth:`IdealChannel.per_copy` (every channel's names: ``<what>_{bytes,copies}``)
_FLOWS = ("offered", "delivered", "lost")


class IdealChannel(Channel):
    """Lossless, unlimited-bandwidth channel with a one-step delay: ``deliver(t)`` returns every copy sent before
    step ``t`` not delivered yet (also after skipped ``deliver`` steps).

    Accounting: :meth:`per_copy` (int64 ``[E, N, N]`` per (env, sender, receiver), run totals since ``reset``) and
    ``stats()``: ``comm/{offered,delivered,lost,queued}_{bytes,copies}`` (lost always 0, queued = sent but not delivered
    yet: sent at the latest step, or at earlier ones whose ``deliver`` was skipped) and ``comm/messages_sent`` (rows offered; a broadcast is one message and one copy per
    receiver); per copy offered = delivered + lost + queued, the names of ``bandwidth-v0`` and ``ns3-v0``.
    """

    def reset(self, seed, *, num_envs, num_agents, dt_s, scenario=None):
        """Start an episode. ``dt_s`` is not used (a copy arrives one step later whatever the step's length) but
        checked as ``bandwidth-v0`` checks it, so ``reset`` takes the same arguments on every channel.

        Raises:
            ValueError: ``dt_s`` not a number (a bool, text), not > 0 and at most 1e9 s, not finite or not whole
                microseconds (:func:`~coopsim.comm.token_bucket.step_us`).
        """
        step_us(dt_s, "dt_s")
        self.num_agents, self.dt_s = num_agents, float(dt_s)
        self._latest_step = 0
        self._pending: dict[int, list[MessageBatch]] = {}
        self._num_envs = num_envs
        self._fb = Feedback.zeros(num_envs, num_agents)
        self._totals: dict[str, np.ndarray] | None = None  # allocated at the first copy: a silent run keeps none
        self._messages = 0

    def _zeros(self) -> dict[str, np.ndarray]:
        shape = (self._num_envs, self.num_agents, self.num_agents)
        return {f"{k}_{u}": np.zeros(shape, np.int64) for k in _FLOWS for u in ("bytes", "copies")}

    def _count(self, key: str, copies: MessageBatch, into: dict[str, np.ndarray] | None = None) -> None:
        if into is None:
            if self._totals is None:
                self._totals = self._zeros()
            into = self._totals
        idx = (copies.env, copies.src, copies.dst)
        np.add.at(into[f"{key}_copies"], idx, 1)
        np.add.at(into[f"{key}_bytes"], idx, copies.size_bytes(self.params.header_bytes))

    def send(self, t, batch):
        """Offer the messages of step ``t`` (they arrive at ``t + 1``).

        Raises:
            ValueError: an env, sender or receiver outside the sizes given to ``reset``, or a copy to oneself
                (:meth:`~coopsim.platform.comm.MessageBatch.check_indices`, as ``bandwidth-v0`` checks them); a step
                before the latest one. ChannelError: not reset.
        """
        t = self._step("send", t)
        if batch is None or len(batch) == 0:
            return
        batch.check_indices(self._num_envs, self.num_agents)
        copies = batch.expand_broadcast(self.num_agents)
        self._messages += len(batch)
        self._count("offered", copies)
        self._pending.setdefault(t + 1, []).append(copies)

    def deliver(self, t):
        """Every copy sent before step ``t`` and not delivered yet (sent at ``s``, a copy arrives at ``s + 1``), so a
        ``deliver`` call skipped at some step strands nothing: the next one returns those copies too (as
        ``bandwidth-v0`` does). Raises as :meth:`send` for a bad step."""
        t = self._step("deliver", t)
        due = [k for k in self._pending if k <= t]  # arrival steps (at most a few: one per step since the last call)
        out = concat([b for k in sorted(due) for b in self._pending.pop(k)])
        if len(out):
            self._count("delivered", out)
            size = out.size_bytes(self.params.header_bytes)
            np.add.at(self._fb.delivered_copies, (out.env, out.src), 1)
            np.add.at(self._fb.delivered_bytes, (out.env, out.src), size)
        return out

    def feedback(self, t):
        """Per-sender delivered counts of copies delivered up to ``deliver(t)`` (nothing is ever lost)."""
        self._step("feedback", t)
        out, self._fb = self._fb, Feedback.zeros(self._num_envs, self.num_agents)
        return out

    def per_copy(self) -> dict[str, np.ndarray]:
        """Run totals per (env, sender, receiver): ``{offered,delivered,lost,queued}_{bytes,copies}``."""
        self._started("per_copy")
        out = self._zeros() if self._totals is None else {k: v.copy() for k, v in self._totals.items()}
        queued = {k.replace("offered", "queued"): np.zeros_like(v) for k, v in out.items() if k.startswith("offered")}
        for bs in self._pending.values():
            for b in bs:
                self._count("queued", b, into=queued)
        out.update(queued)
        return out

    def stats(self):
        self._started("stats")
        names = [f"{k}_{u}" for k in _FLOWS + ("queued",) for u in ("bytes", "copies")]
        if self._totals is None:  # nothing ever sent since reset (the pending copies are counted as offered)
            s = {f"comm/{k}": 0.0 for k in names}
        else:
            s = {f"comm/{k}": float(v.sum()) for k, v in self.per_copy().items()}
        s["comm/messages_sent"] = float(self._messages)
        return s
