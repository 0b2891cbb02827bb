"""The channel contract and the message batch every agent message travels in.

One step's messages are one struct-of-arrays :class:`MessageBatch`. A message's size in bytes is
computed from its payload (``payload_bytes`` of its row) plus a fixed header, never declared.
A broadcast (``dst == BROADCAST``) counts as one copy per receiver in the accounting.
Timing: a message sent at step ``t`` leaves at ``t * dt_s`` seconds; :meth:`Channel.deliver` at step
``t`` returns the copies that have arrived by then (the ideal channel: everything sent
before ``t`` and not delivered yet, i.e. at ``t - 1`` when ``deliver`` is called every step).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

BROADCAST = -1
#: IPv4 (20 bytes) + UDP (8 bytes) header: what each message costs on top of its payload
DEFAULT_HEADER_BYTES = 28
#: the largest ``header_bytes`` a channel accepts: an IPv4 packet's size limit (its 16-bit total length)
HEADER_BYTES_MAX = 65535


_INT32 = np.iinfo(np.int32)


def _index_field(name: str, value: Any) -> np.ndarray:
    """``value`` as int32 ``[M]``: int32 arrays as they are (no copy), other integer arrays cast after a range check,
    an empty numeric ``[0]`` array of any dtype (``[]`` and ``np.array([])`` are float64) as an empty int32 one;
    non-empty floats (0.7 would be truncated to 0), booleans, text and other ranks refused with a ValueError."""
    a = np.asarray(value)
    if a.dtype == np.int32 and a.ndim == 1:
        return a
    if a.size == 0 and a.ndim == 1 and a.dtype.kind in "fiub":
        return np.zeros(0, np.int32)  # no value to truncate: [] and np.array([]) are float64, an empty step is fine
    if a.ndim != 1:
        raise ValueError(f"MessageBatch.{name} must be a 1-D int32 array [M]; got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise ValueError(f"MessageBatch.{name} must hold integers (int32 [M]; a {a.dtype} value such as 0.7 is no "
                         f"{'env' if name == 'env' else 'agent'} index); got dtype {a.dtype}")
    if a.size and (a.min() < _INT32.min or a.max() > _INT32.max):
        raise ValueError(f"MessageBatch.{name} must fit int32; got values in [{a.min()}, {a.max()}]")
    return a.astype(np.int32)


@dataclass
class MessageBatch:
    """Messages of one step, struct of arrays; ``M`` messages with payload width ``P``.

    Arrays of the documented dtypes are kept as given (no copy); others are converted once when the batch is built:
    integer ``env``/``src``/``dst`` of another width to int32, a numeric payload (e.g. numpy's default float64) to
    float32, so a message's size is always ``P * 4`` payload bytes plus the header (:meth:`size_bytes`). An empty
    batch may be built from plain empty lists (``MessageBatch([], [], [], [], [])``: empty arrays take the
    documented dtypes, the payload ``[0, 0]``).

    Attributes:
        env: int32 ``[M]`` env index.
        src: int32 ``[M]`` sender slot.
        dst: int32 ``[M]`` receiver slot, or ``BROADCAST`` (-1).
        payload: float32 ``[M, P]`` (4 bytes per value).
        t_sent_s: float64 ``[M]`` send time (s).

    Raises:
        ValueError: lengths that differ from ``len(src)``, a payload not ``[M, P]``, ``env``/``src``/``dst`` that
            are not 1-D integers within int32 (floats, booleans, text), a payload or ``t_sent_s`` that is not real
            numbers (text, complex), a payload value beyond float32's range (1e300: it would become inf), a
            ``t_sent_s`` that is nan or inf.
    """

    env: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    payload: np.ndarray
    t_sent_s: np.ndarray

    def __post_init__(self) -> None:
        self.env = _index_field("env", self.env)
        self.src = _index_field("src", self.src)
        self.dst = _index_field("dst", self.dst)
        m = len(self.src)
        pay = np.asarray(self.payload)
        if pay.shape == (0,) and m == 0:
            pay = pay.reshape(0, 0)  # a payload of plain [] in an empty batch: no message, no value
        if pay.dtype != np.float32:
            if pay.dtype.kind not in "fiub":
                raise ValueError(f"MessageBatch.payload must be float32 [M, P] (real numbers); got dtype {pay.dtype}")
            with np.errstate(over="ignore"):
                f32 = pay.astype(np.float32)  # 4 bytes per value, as documented and counted
            if pay.dtype.itemsize > 4 and pay.dtype.kind == "f" and pay.size:
                over = np.isinf(f32) & np.isfinite(pay)  # beyond float32 (3.4e38): would become inf silently
                if over.any():
                    raise ValueError(f"MessageBatch.payload must fit float32 (|value| <= 3.4e38); got "
                                     f"{pay[over].flat[0].item()!r}")
            pay = f32
        self.payload = pay
        ts = np.asarray(self.t_sent_s)
        if ts.dtype != np.float64:
            if ts.dtype.kind not in "fiu":
                raise ValueError(f"MessageBatch.t_sent_s must be float64 [M] (seconds); got dtype {ts.dtype}")
            ts = ts.astype(np.float64)
        if ts.ndim != 1:
            raise ValueError(f"MessageBatch.t_sent_s must be a 1-D float64 array [M]; got shape {ts.shape}")
        if ts.size and not np.isfinite(ts).all():  # one vectorized pass; a latency from nan would be nan
            raise ValueError(f"MessageBatch.t_sent_s must be finite seconds; got {ts[~np.isfinite(ts)][0].item()!r}")
        self.t_sent_s = ts
        for name in ("env", "dst", "t_sent_s"):
            if len(getattr(self, name)) != m:
                raise ValueError(f"MessageBatch.{name} has length {len(getattr(self, name))}, expected {m} (len(src))")
        if self.payload.ndim != 2 or self.payload.shape[0] != m:
            raise ValueError(f"MessageBatch.payload must be [M={m}, P]; got shape {self.payload.shape}")

    def check_indices(self, num_envs: int, num_agents: int) -> None:
        """Raise a ValueError unless every ``env`` is in ``[0, num_envs)``, every ``src`` in ``[0, num_agents)`` and
        every ``dst`` a receiver in ``[0, num_agents)`` other than ``src``, or ``BROADCAST`` (the check each channel's
        ``send`` makes; vectorized)."""
        if len(self) == 0:
            return
        bad = ((self.src < 0) | (self.src >= num_agents) | (self.env < 0) | (self.env >= num_envs)
               | (self.dst < BROADCAST) | (self.dst >= num_agents))
        if bad.any():
            i = int(bad.argmax())
            raise ValueError(f"message batch has env/src/dst outside [0, {num_envs}) x [0, {num_agents}) (dst may be "
                             f"-1 = broadcast): message {i} has env {self.env[i]}, src {self.src[i]}, dst {self.dst[i]}")
        own = self.dst == self.src
        if own.any():
            i = int(own.argmax())
            raise ValueError(f"message {i} is sent by agent {self.src[i]} to itself (dst == src) in env {self.env[i]}; "
                             f"a message goes to another agent, or to all others with dst = -1 (broadcast)")

    @classmethod
    def empty(cls, payload_dim: int = 0) -> "MessageBatch":
        return cls(
            env=np.zeros(0, np.int32), src=np.zeros(0, np.int32), dst=np.zeros(0, np.int32),
            payload=np.zeros((0, payload_dim), np.float32), t_sent_s=np.zeros(0, np.float64),
        )

    def __len__(self) -> int:
        return len(self.src)

    def size_bytes(self, header_bytes: int = DEFAULT_HEADER_BYTES) -> np.ndarray:
        """int64 ``[M]``: payload bytes of each row plus ``header_bytes``."""
        row = self.payload.shape[1] * self.payload.dtype.itemsize
        return np.full(len(self), row + header_bytes, dtype=np.int64)

    def select(self, index: np.ndarray) -> "MessageBatch":
        return MessageBatch(self.env[index], self.src[index], self.dst[index], self.payload[index], self.t_sent_s[index])

    def expand_broadcast(self, num_agents: int) -> "MessageBatch":
        """One row per (sender, receiver) copy: broadcasts become ``num_agents - 1`` unicast copies."""
        bc = self.dst == BROADCAST
        if not bc.any():
            return self
        uni = self.select(~bc)
        b = self.select(bc)
        recv = np.arange(num_agents, dtype=np.int32)
        rep_src = np.repeat(b.src, num_agents)
        rep_dst = np.tile(recv, len(b))
        keep = rep_dst != rep_src
        idx = np.repeat(np.arange(len(b)), num_agents)[keep]
        copies = MessageBatch(b.env[idx], b.src[idx], rep_dst[keep], b.payload[idx], b.t_sent_s[idx])
        return concat([uni, copies])


def concat(batches: list[MessageBatch]) -> MessageBatch:
    """Concatenate batches (same payload width)."""
    batches = [b for b in batches if b is not None]
    if not batches:
        return MessageBatch.empty()
    return MessageBatch(
        env=np.concatenate([b.env for b in batches]).astype(np.int32),
        src=np.concatenate([b.src for b in batches]).astype(np.int32),
        dst=np.concatenate([b.dst for b in batches]).astype(np.int32),
        payload=np.concatenate([b.payload for b in batches]),
        t_sent_s=np.concatenate([b.t_sent_s for b in batches]),
    )


@dataclass
class Feedback:
    """Per-sender delivery feedback a channel returns one step later (see :meth:`Channel.feedback`).

    Counts are of (sender, receiver) copies whose fate became known at a ``deliver`` call of an
    earlier step and were not reported before. Arrays are int64 ``[E, N]`` indexed by sender.

    Attributes:
        delivered_copies, lost_copies: copies delivered / lost.
        delivered_bytes, lost_bytes: their bytes (payload + header).
        latency_max_s: float64 ``[E, N]``, the largest latency (s, send to arrival) among the copies
            delivered in this report, 0 where none; None if the channel does not measure latency.
            Delay-based rate control reads queueing from it (copies sent together onto an idle link:
            ``delivered_bytes * 8 / latency_max_s`` is the rate the link served them at).
    """

    delivered_copies: np.ndarray
    lost_copies: np.ndarray
    delivered_bytes: np.ndarray
    lost_bytes: np.ndarray
    latency_max_s: Optional[np.ndarray] = None

    @classmethod
    def zeros(cls, num_envs: int, num_agents: int) -> "Feedback":
        z = lambda: np.zeros((num_envs, num_agents), np.int64)  # noqa: E731
        return cls(z(), z(), z(), z(), np.zeros((num_envs, num_agents)))


class ChannelParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    header_bytes: int = Field(DEFAULT_HEADER_BYTES, ge=0, le=HEADER_BYTES_MAX,
                              description=f"bytes added to each payload (B), 0 .. {HEADER_BYTES_MAX} (an IP packet's "
                                          "size limit); default 28 (IPv4 + UDP headers)")


class Channel(ABC):
    """Carries messages between agents, step by step.

    Lifecycle: ``reset(...)`` at each episode start, then per step ``send(t, batch)`` and
    ``deliver(t + 1)``. ``stats()`` returns totals since the last reset (per copy:
    ``offered_bytes = delivered_bytes + lost_bytes + queued_bytes``). The built-in channels refuse a call before
    ``reset`` (:class:`~coopsim.errors.ChannelError`) and a step that is not an integer >= 0 or is earlier than the
    latest step given to ``send``/``deliver``/``feedback`` (ValueError).
    """

    Params: ClassVar[type[ChannelParams]] = ChannelParams

    def __init__(self, **params: Any):
        from coopsim.platform.registry import checked_params
        self.params = checked_params(self.Params, params, type(self).__name__)
        self._latest_step: int | None = None  # None: not reset yet; else the latest step of send/deliver/feedback

    def _started(self, call: str) -> None:
        """Raise a :class:`~coopsim.errors.ChannelError` if ``reset`` was never called (``call`` names the method)."""
        if getattr(self, "_latest_step", None) is None:
            from coopsim.errors import ChannelError
            raise ChannelError(f"{type(self).__name__}.{call} before reset: call reset(seed, num_envs=..., "
                               f"num_agents=..., dt_s=...) first")

    def _step(self, call: str, t: Any) -> int:
        """The step ``t`` of ``send``/``deliver``/``feedback`` as an int, once the channel is reset, never before the
        latest step given to any of them (time does not go back; ``reset`` starts again at 0).

        Raises:
            ChannelError: not reset. ValueError: ``t`` not an integer >= 0 (a float, a bool), or before the latest
                step.
        """
        self._started(call)
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or t < 0:
            raise ValueError(f"{type(self).__name__}.{call}(t): t must be an integer >= 0 (the step); got {t!r}")
        if t < self._latest_step:
            raise ValueError(f"{type(self).__name__}.{call}({t}) after a call at step {self._latest_step}: steps never "
                             f"go back (per step: send(t), deliver(t + 1), feedback(t + 1); reset starts again)")
        self._latest_step = t = int(t)
        return t

    @abstractmethod
    def reset(self, seed: int | None, *, num_envs: int, num_agents: int, dt_s: float, scenario: Any = None) -> None:
        """Start an episode; ``scenario`` gives access to capabilities such as ``positions()``."""

    @abstractmethod
    def send(self, t: int, batch: MessageBatch | None) -> None:
        """Offer the messages of step ``t``."""

    @abstractmethod
    def deliver(self, t: int) -> MessageBatch:
        """Copies that have arrived by step ``t`` (broadcasts expanded: ``dst`` is always a receiver)."""

    def feedback(self, t: int) -> Feedback | None:
        """Delivery feedback for senders at step ``t``: fates decided at ``deliver(t - 1)`` or earlier
        and not yet reported (None if the channel gives no feedback)."""
        return None

    def per_copy(self) -> dict[str, np.ndarray] | None:
        """Run totals since ``reset`` per (env, sender, receiver), int64 ``[E, N, N]`` per counter, named as in
        ``stats()`` without ``comm/`` (``offered_copies``, ``delivered_bytes``, ``lost_copies``, ``queued_copies``,
        ...); None if the channel does not keep them (a scenario then reports ``stats()`` itself)."""
        return None

    def stats(self) -> dict[str, float]:
        """Totals since ``reset`` as flat ``comm/...`` numbers; every channel names its counters
        ``comm/<what>_{copies,bytes}`` with ``<what>`` in ``offered``, ``delivered``, ``lost``, ``queued``
        (:data:`COMM_COUNTERS`), plus ``comm/messages_sent``."""
        return {}

    def close(self) -> None:
        pass


#: the counters every built-in channel reports in ``stats()`` (run totals; offered = delivered + lost + queued)
COMM_COUNTERS = tuple(f"comm/{k}_{u}" for k in ("offered", "delivered", "lost", "queued") for u in ("copies", "bytes"))


def add_comm_stats(metrics: dict[str, float], stats: dict[str, float]) -> dict[str, float]:
    """Add a channel's ``stats()`` to an episode's ``metrics``, in place (and returned), which may already hold
    ``comm/...`` numbers of another channel: a scenario's own channel (the MPE tasks' ``comm_channel``) reports its
    accounting in ``episode_metrics()`` under the same names as the run's channel.

    A key only one side has is taken as it is. Counters (``comm/..._copies``, ``comm/..._bytes``, their
    ``/<cause>`` parts, ``comm/messages_sent`` and any other ``comm/`` number) add up; of the latencies, ``..._max_s``
    is the larger, ``comm/latency_mean_s`` the mean weighted by each side's ``comm/delivered_copies``, and a
    percentile (``p50``, ``p95``) the larger of the two: an upper bound of the pooled one, exact when only one
    side delivered copies (the usual case: either the agents or the task talk)."""
    mine = {k: v for k, v in metrics.items() if k.startswith("comm/")}
    n_a, n_b = mine.get("comm/delivered_copies", 0.0), stats.get("comm/delivered_copies", 0.0)
    for k, v in stats.items():
        if k not in mine or not k.startswith("comm/"):
            metrics[k] = v
        elif k.startswith("comm/latency_"):
            if not (n_a and n_b):  # the side that delivered nothing has no latency to tell
                metrics[k] = v if n_b else mine[k]
            elif k == "comm/latency_mean_s":
                metrics[k] = (mine[k] * n_a + v * n_b) / (n_a + n_b)
            else:
                metrics[k] = max(mine[k], v)
        else:
            metrics[k] = mine[k] + v
    return metrics
