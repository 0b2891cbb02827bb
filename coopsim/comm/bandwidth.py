"""The bandwidth channel: per-sender capacity from a trace, a finite FIFO queue, burst loss, latency bound.

Model (one link per sender, every (sender, receiver) copy is one packet on it):

* A message sent at step ``t`` (time ``t * dt_s``) is expanded into copies (a broadcast is one copy per
  other agent); each copy is ``payload bytes + header_bytes`` long. Copies join the sender's FIFO queue
  in order; a copy that finds ``queue_packets`` copies already queued is dropped (cause ``overflow``).
* During step interval ``[k dt, (k+1) dt)`` the link serves its queue at the trace's capacity ``C_k``
  (bit/s, rounded down to whole bit/s): ``C_k * dt`` bits of service, head first; a copy that does
  not finish keeps its remaining bits for the next interval (work-conserving, no credit while idle).
  Service arithmetic is exact (integers in bit-microseconds, see :mod:`coopsim.comm.token_bucket`);
  capacities are at most :data:`~coopsim.comm.traces.MAX_RATE_BPS` (1e12 bit/s), and ``C_k * dt`` must stay
  below 2**62 bit-microseconds (``reset`` refuses a longer step at such a rate).
* A copy finishing transmission at time ``f`` arrives at ``f + delay_s`` (latency = queueing +
  transmission + fixed delay); ``deliver(k)`` returns the copies that arrived by ``k * dt_s``.
* Latency bound ``latency_bound_s``: a queued copy that can no longer arrive within the bound is dropped
  from the queue at the start of an interval, and a transmitted copy that arrives later than the bound
  is discarded by its receiver; both count as lost (cause ``late``).
* Optional Gilbert-Elliott burst loss (Gilbert 1960, Elliott 1963): each sender's link is in a good or bad
  state, a two-state Markov chain stepped once per interval; each transmitted copy is lost with the
  state's loss probability (cause ``burst``).

Accounting is per (env, sender, receiver) copy, per step and per run; the invariant
``offered = delivered + lost (all causes) + queued`` (queued = waiting or in flight) holds in bytes and
in copies at every call. :meth:`feedback` returns per-sender delivered/lost counts one step later.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from coopsim.comm.token_bucket import SCALE, STEP_MAX_S, seconds_to_us, step_us
from coopsim.comm.traces import MAX_RATE_BPS, VALID_RATE, ConstantTrace, Trace
from coopsim.errors import ConfigError
from coopsim.comm.accounting import flat_stats, per_copy_view, pop_feedback, scatter_add
from coopsim.platform.comm import ChannelParams, Channel, Feedback, MessageBatch

CAUSES = ("overflow", "late", "burst")
_EPS_US = 1e-3  # tolerance on arrival-time comparisons (microseconds)
#: most steps of trace drawn at reset (the trace repeats after them)
HORIZON_STEPS_MAX = 1_000_000
#: most values of the capacity table ``horizon_steps x num_envs x num_agents`` (int64): 2**26, 512 MiB (drawing a
#: markov trace takes a few times that while it is drawn)
CAPACITY_VALUES_MAX = 2**26
#: most bit-microseconds of service per step (``rate * dt_us``): the queue's sums of bits stay far from int64's 2**63
_CREDIT_MAX = 2**62
#: largest delay_s / latency_bound_s (s), as of a step: 1e15 us, far from int64 in the queue's time arithmetic
TIME_MAX_S = STEP_MAX_S


class GilbertElliottParams(BaseModel):
    """Two-state burst-loss model, one chain per sender link, stepped once per step."""

    model_config = ConfigDict(extra="forbid")
    p_good_to_bad: float = Field(..., ge=0, le=1, description="per-step probability good -> bad, in [0, 1]")
    p_bad_to_good: float = Field(..., ge=0, le=1, description="per-step probability bad -> good, in [0, 1]")
    loss_good: float = Field(0.0, ge=0, le=1, description="loss probability of a copy in the good state, in [0, 1]")
    loss_bad: float = Field(1.0, ge=0, le=1, description="loss probability of a copy in the bad state, in [0, 1]")


class BandwidthParams(ChannelParams):
    model_config = ConfigDict(extra="forbid")
    trace: Trace = Field(default_factory=lambda: ConstantTrace(rate=1e6),
                         description="per-sender capacity trace (bit/s): constant, step, sinusoid, markov or csv")
    queue_packets: int = Field(64, ge=1, description="FIFO queue size per sender (copies), >= 1")
    delay_s: float = Field(0.0, ge=0, le=TIME_MAX_S, allow_inf_nan=False,
                           description="fixed propagation/processing delay added to every copy (s), a whole number of "
                                       "microseconds in [0, 1e9]")
    latency_bound_s: Optional[float] = Field(None, gt=0, le=TIME_MAX_S, allow_inf_nan=False,
                                             description="latency past which a copy is lost (s), a whole number of "
                                                         "microseconds in (0, 1e9]; None = no bound")
    gilbert_elliott: Optional[GilbertElliottParams] = Field(None, description="burst loss model, None = no burst loss")
    horizon_steps: int = Field(4096, ge=1, le=HORIZON_STEPS_MAX,
                               description=f"steps of trace drawn at reset, 1 .. {HORIZON_STEPS_MAX:,}; the trace "
                                           "repeats after it; horizon_steps x num_envs x num_agents must be at most "
                                           f"{CAPACITY_VALUES_MAX:,} (2**26, a 512 MiB capacity table)")

    @field_validator("delay_s", "latency_bound_s", mode="before")
    @classmethod
    def _numpy_float(cls, v):
        """A numpy float32 (``np.float32(0.1)``) is read by its decimal text ('0.1'), as ``reset`` reads ``dt_s``; as a
        Python float it would be 0.10000000149 (no whole number of microseconds)."""
        if isinstance(v, np.floating) and not isinstance(v, float):
            return float(str(v))
        return v

    @field_validator("delay_s", "latency_bound_s")
    @classmethod
    def _whole_us(cls, v, info):
        """The channel keeps time in whole microseconds: a value between two is refused here (at `coopsim validate`),
        not at the first ``reset``."""
        if v is not None:
            try:
                seconds_to_us(v, info.field_name)
            except ValueError:
                raise ValueError("must be a whole number of microseconds (at most 6 decimals, e.g. 0.1 or "
                                 "0.000001)") from None
        return v


def _channel_key(exc: ConfigError) -> ConfigError:
    """A trace's error (key ``trace.path``, as the trace names its own key) addressed to the run config's key,
    ``channel.params.trace.path``, so the message names it and the override that set it."""
    key = exc.key if not exc.key or exc.key.startswith("channel.") else f"channel.params.{exc.key}"
    return ConfigError(exc.message, file=exc.file, key=key, value=exc.value)


_FIELDS = ("env", "src", "dst", "t_sent_us", "size", "rem", "seq", "arrive_us", "inflight")
# the queue is one int64 array [len(_FIELDS), M] (one row per field, one column per queued or in-flight copy,
# in FIFO order), so keeping or dropping copies is one column selection, not one per field. Row "inflight" is
# 0 = waiting, 1 = transmitted (in flight), 2 = lost (counted already, column removed at the next compaction)
_ENV, _SRC, _DST, _TSENT, _SIZE, _REM, _SEQ, _ARR, _INFL = range(len(_FIELDS))
_WAITING, _INFLIGHT, _GONE = 0, 1, 2
# run totals are folded in once this many copies (or events) are pending: per-copy scattered adds into
# [E, N, N] counters cost a cache miss each at large E, one dense bincount per counter does not
_FLUSH_COPIES = 1 << 20
_FLUSH_EVENTS = 4096


class BandwidthChannel(Channel):
    """Trace-driven bandwidth-limited channel with a finite FIFO queue per sender (see module docstring).

    ``stats()`` keys (run totals since ``reset``): ``comm/{offered,delivered,lost,queued}_{bytes,copies}``,
    ``comm/lost_{bytes,copies}/{overflow,late,burst}``, ``comm/messages_sent``,
    ``comm/latency_{mean,p50,p95,max}_s``. :meth:`per_copy` gives the same counters as int64
    ``[E, N, N]`` arrays (env, sender, receiver); :attr:`last_step` those of the latest step.
    """

    Params = BandwidthParams

    def __init__(self, **params):
        super().__init__(**params)
        try:  # a CSV trace is read now, so a bad file fails when the channel is built (`coopsim validate`)
            self.params.trace.check()
        except ConfigError as exc:
            raise _channel_key(exc) from None

    # ------------------------------------------------------------------ lifecycle
    def reset(self, seed, *, num_envs, num_agents, dt_s, scenario=None):
        """Start an episode: draw the trace and empty the queues.

        Args:
            dt_s: step length (s), a finite whole number of microseconds > 0 (at most 1e9), checked as every
                channel checks it (:func:`~coopsim.comm.token_bucket.step_us`; a numpy float32 read by its decimal
                text, so ``np.float32(0.1)`` is 0.1 s).

        Raises:
            ValueError: ``dt_s`` not a number (a bool, text), not > 0, not finite or not whole microseconds.
            ConfigError: a trace that does not fit the sizes or the step (see the module docstring).
        """
        p = self.params
        self.dt_us = step_us(dt_s, "dt_s")
        self.E, self.N, self.dt_s = int(num_envs), int(num_agents), float(dt_s)
        cells = p.horizon_steps * self.E * self.N
        if cells > CAPACITY_VALUES_MAX:
            fit = max(CAPACITY_VALUES_MAX // max(self.E * self.N, 1), 1)
            raise ConfigError(f"horizon_steps {p.horizon_steps} x num_envs {self.E} x num_agents {self.N} = {cells:,} "
                              f"capacity values (int64, {cells * 8 / 2**30:.1f} GiB); at most {CAPACITY_VALUES_MAX:,} "
                              f"(512 MiB): use horizon_steps <= {fit} (the trace repeats after it)",
                              key="channel.params.horizon_steps", value=p.horizon_steps)
        rng = np.random.default_rng([0 if seed is None else int(seed), 0x6177])
        self._rng = np.random.default_rng([0 if seed is None else int(seed), 0x6c6f])
        try:  # what only the sizes reveal (a CSV trace's rate columns against num_agents)
            cap = p.trace.sample(p.horizon_steps, self.E, self.N, self.dt_s, rng)
        except ConfigError as exc:
            raise _channel_key(exc) from None
        peak = float(cap.max()) if cap.size else 0.0
        if not (np.isfinite(cap).all() and peak <= MAX_RATE_BPS):  # each trace checks its values; this guards the cast
            raise ConfigError(f"the trace gives capacity {peak!r} bit/s; every rate must be {VALID_RATE}",
                              key="channel.params.trace", value=peak)
        if int(peak) * self.dt_us > _CREDIT_MAX:
            raise ConfigError(f"capacity {peak:g} bit/s over a step of {self.dt_s:g} s is {peak * self.dt_us:.3g} "
                              f"bit-microseconds, more than the channel's int64 arithmetic takes ({_CREDIT_MAX:.3g}); "
                              f"with this step the capacity must be at most {_CREDIT_MAX // self.dt_us:g} bit/s",
                              key="channel.params.trace", value=peak)
        self.capacity = np.floor(cap).astype(np.int64)
        self.bound_us = None if p.latency_bound_s is None else seconds_to_us(p.latency_bound_s, "latency_bound_s")
        self.delay_us = seconds_to_us(p.delay_s, "delay_s")
        self._qa = np.zeros((len(_FIELDS), 0), np.int64)
        self._gone = False  # some columns of _qa are lost copies awaiting compaction
        self._payload = None
        self._seq = 0
        self._served_to = 0  # intervals [0, _served_to) have been served
        self._ge_bad = np.zeros((self.E, self.N), bool)
        shape = (self.E, self.N, self.N)
        keys = ["offered", "delivered"] + [f"lost/{c}" for c in CAUSES]
        self._totals = {f"{k}_{u}": np.zeros(shape, np.int64) for k in keys for u in ("bytes", "copies")}
        self._pending: list = []  # (key, flat index, size) events not yet folded into the totals
        self._pending_n = 0
        self._step_events: list = []
        self._messages = 0
        self._latencies: list[np.ndarray] = []
        self._fb: dict[int, Feedback] = {}
        self._latest_step = 0

    def capacity_bps(self, t: int) -> np.ndarray:
        """int64 ``[E, N]``: each sender's capacity during step ``t`` (bit/s), for metrics and oracles."""
        return self.capacity[t % self.capacity.shape[0]]

    # ------------------------------------------------------------------ bookkeeping helpers
    def _count(self, key, env, src, dst, size):
        """Record copies for the run totals (folded in lazily, see :meth:`_flush`) and this step's event list."""
        if len(env) == 0:
            return
        N = self.N
        ev = (key, (np.asarray(env, np.int64) * N + src) * N + dst, np.asarray(size, np.int64))
        self._step_events.append(ev)
        self._pending.append(ev)
        self._pending_n += len(env)
        if self._pending_n > _FLUSH_COPIES or len(self._pending) > _FLUSH_EVENTS:
            self._flush()

    def _flush(self) -> None:
        """Fold the pending events into the run totals: one dense bincount per counter (exact: integer sums)."""
        if not self._pending:
            return
        by_key: dict[str, list] = {}
        for key, idx, size in self._pending:
            by_key.setdefault(key, []).append((idx, size))
        for key, evs in by_key.items():
            idx = np.concatenate([e[0] for e in evs])
            scatter_add(self._totals[f"{key}_copies"], idx)
            scatter_add(self._totals[f"{key}_bytes"], idx, np.concatenate([e[1] for e in evs]))
        self._pending = []
        self._pending_n = 0

    @property
    def totals(self) -> dict[str, np.ndarray]:
        """Run totals since ``reset``, int64 ``[E, N, N]`` per counter (``offered_bytes``, ``lost/late_copies``, ...)."""
        self._started("totals")
        self._flush()
        return self._totals

    @property
    def last_step(self) -> dict[str, np.ndarray]:
        """Counters of the latest step (since the last ``send``), int64 ``[E, N, N]`` per key (built on access)."""
        out = {k: np.zeros_like(v) for k, v in self._totals.items()}
        for key, idx, size in self._step_events:
            np.add.at(out[f"{key}_bytes"].reshape(-1), idx, size)
            np.add.at(out[f"{key}_copies"].reshape(-1), idx, 1)
        return out

    def _fate(self, decided, env, src, size, delivered: bool, latency_s=None):
        if len(env) == 0:
            return
        fb = self._fb.get(decided)
        if fb is None:
            fb = self._fb[decided] = Feedback.zeros(self.E, self.N)
        idx = env * self.N + src
        if delivered:
            np.add.at(fb.delivered_copies.reshape(-1), idx, 1)
            np.add.at(fb.delivered_bytes.reshape(-1), idx, size)
            if latency_s is not None:
                np.maximum.at(fb.latency_max_s.reshape(-1), idx, latency_s)
        else:
            np.add.at(fb.lost_copies.reshape(-1), idx, 1)
            np.add.at(fb.lost_bytes.reshape(-1), idx, size)

    def _lose(self, mask, cause, decided):
        """Count the queue's copies where ``mask`` as lost by ``cause`` (fate reported at ``decided``) and drop them."""
        sel = mask.nonzero()[0]
        q = self._qa[:, sel]
        self._count(f"lost/{cause}", q[_ENV], q[_SRC], q[_DST], q[_SIZE])
        self._fate(decided, q[_ENV], q[_SRC], q[_SIZE], False)
        self._qa[_INFL, sel] = _GONE  # removed at the next compaction (column indices stay valid until then)
        self._gone = True

    def _keep(self, keep):
        """Keep only the queue's columns where ``keep`` (and compact away lost ones)."""
        if self._gone:
            keep = keep & (self._qa[_INFL] != _GONE)
            self._gone = False
        idx = keep.nonzero()[0]
        self._qa = self._qa[:, idx]
        if self._payload is not None:
            self._payload = self._payload[idx]

    # ------------------------------------------------------------------ the link
    def _serve(self, k: int) -> None:
        """Serve every sender's queue during interval ``[k dt, (k+1) dt)``."""
        start_us = k * self.dt_us
        if self.bound_us is not None:
            self._drop_stale(start_us, k)
        q = self._qa
        ge = self.params.gilbert_elliott
        if ge is not None:
            u = self._rng.random((self.E, self.N))
            self._ge_bad = np.where(self._ge_bad, u >= ge.p_bad_to_good, u < ge.p_good_to_bad)
        idx = (q[_INFL] == _WAITING).nonzero()[0]  # waiting copies, in FIFO order
        if len(idx) == 0:
            if self.bound_us is not None:
                self._drop_stale((k + 1) * self.dt_us, k + 1)
            return
        cap = self.capacity_bps(k)
        sender = q[_ENV, idx] * self.N + q[_SRC, idx]
        if len(sender) > 1 and (sender[1:] < sender[:-1]).any():
            order = np.argsort(sender, kind="stable")  # the queue is kept in seq (FIFO) order
            idx, sender = idx[order], sender[order]
        rem = q[_REM, idx]
        cum = np.cumsum(rem)
        first = np.empty(len(idx), bool)
        first[0] = True
        np.not_equal(sender[1:], sender[:-1], out=first[1:])
        seg_start = np.maximum.accumulate(np.where(first, np.arange(len(idx)), 0))
        before = cum - rem  # bits of the copies ahead, over all senders
        cum_in = cum - before[seg_start]  # segmented cumsum: bits up to and including this copy
        prev_in = cum_in - rem
        rate = cap.reshape(-1)[sender]
        credit = rate * self.dt_us
        done = (cum_in <= credit) & (rate > 0)
        partial = ~done & (prev_in < credit)
        if partial.any():
            q[_REM, idx[partial]] -= credit[partial] - prev_in[partial]
        if not done.any():
            if self.bound_us is not None:
                self._drop_stale((k + 1) * self.dt_us, k + 1)
            return
        di = idx[done]
        finish_us = start_us + cum_in[done] / np.maximum(rate[done], 1)
        q[_REM, di] = 0
        q[_INFL, di] = _INFLIGHT
        q[_ARR, di] = np.ceil(finish_us - _EPS_US).astype(np.int64) + self.delay_us
        # only the copies that finished now can be newly late (earlier ones were checked when they finished)
        late_di = None if self.bound_us is None else q[_ARR, di] - q[_TSENT, di] > self.bound_us
        if ge is not None:
            pl = np.where(self._ge_bad[q[_ENV, di], q[_SRC, di]], ge.loss_bad, ge.loss_good)
            burst = self._rng.random(len(di)) < pl
            if burst.any():
                lost_b = np.zeros(q.shape[1], bool)
                lost_b[di[burst]] = True
                if late_di is not None:  # a copy lost to the burst is not also late
                    late_di = late_di & ~burst
                self._lose(lost_b, "burst", k + 1)
        if self.bound_us is not None:
            if late_di.any():
                late = np.zeros(q.shape[1], bool)
                late[di[late_di]] = True
                self._lose(late, "late", k + 1)
            self._drop_stale((k + 1) * self.dt_us, k + 1)

    def _drop_stale(self, now_us: int, decided: int) -> None:
        """Drop queued copies that can no longer arrive within the latency bound (cause ``late``)."""
        q = self._qa
        if q.shape[1] == 0:
            return
        # a queued copy has bits left, so it finishes after `now`: it is late if now + delay - t_sent >= bound
        stale = (q[_INFL] == _WAITING) & (q[_TSENT] <= now_us + self.delay_us - self.bound_us)
        if stale.any():
            self._lose(stale, "late", decided)

    def _advance_to(self, k: int, compact: bool = True) -> None:
        while self._served_to < k:
            self._serve(self._served_to)
            self._served_to += 1
        if compact and self._gone:
            self._keep(np.ones(self._qa.shape[1], bool))

    # ------------------------------------------------------------------ Channel API
    def send(self, t: int, batch: MessageBatch | None) -> None:
        """Offer the messages of step ``t`` (serves every earlier interval first)."""
        t = self._step("send", t)
        self._advance_to(t)
        self._step_events = []
        if batch is None or len(batch) == 0:
            return
        batch.check_indices(self.E, self.N)
        self._messages += len(batch)
        c = batch.expand_broadcast(self.N)
        m = len(c)
        size = c.size_bytes(self.params.header_bytes)
        env64, src64, dst64 = c.env.astype(np.int64), c.src.astype(np.int64), c.dst.astype(np.int64)
        self._count("offered", env64, src64, dst64, size)
        if m == 0:
            return
        # drop-tail: rank of each new copy within its sender, after the copies already queued
        q = self._qa
        sender = env64 * self.N + src64
        waiting = q[_INFL] == _WAITING
        queued_now = np.bincount(q[_ENV, waiting] * self.N + q[_SRC, waiting], minlength=self.E * self.N)
        if m > 1 and (sender[1:] < sender[:-1]).any():
            order = np.argsort(sender, kind="stable")
            s_sorted = sender[order]
        else:  # already grouped by sender (the usual batch order): no sort needed
            order, s_sorted = None, sender
        first = np.empty(m, bool)
        first[0] = True
        np.not_equal(s_sorted[1:], s_sorted[:-1], out=first[1:])
        start = np.maximum.accumulate(np.where(first, np.arange(m), 0))
        if order is None:
            rank = np.arange(m) - start
        else:
            rank = np.empty(m, np.int64)
            rank[order] = np.arange(m) - start
        fits = queued_now[sender] + rank < self.params.queue_packets
        if fits.all():
            keep = None
            n = m
        else:
            drop = ~fits
            self._count("lost/overflow", env64[drop], src64[drop], dst64[drop], size[drop])
            self._fate(t, env64[drop], src64[drop], size[drop], False)
            keep = fits.nonzero()[0]  # ascending: keeps each sender's order (FIFO)
            n = len(keep)
        new = np.empty((len(_FIELDS), n), np.int64)
        sel = (lambda a: a) if keep is None else (lambda a: a[keep])
        new[_ENV], new[_SRC], new[_DST] = sel(env64), sel(src64), sel(dst64)
        new[_TSENT] = t * self.dt_us
        new[_SIZE] = sel(size)
        new[_REM] = new[_SIZE] * 8 * SCALE
        new[_SEQ] = self._seq + np.arange(n, dtype=np.int64)
        new[_ARR] = 0
        new[_INFL] = _WAITING
        self._seq += n
        self._qa = np.concatenate([q, new], axis=1) if q.shape[1] else new
        pay = sel(c.payload)
        self._payload = pay if self._payload is None or len(self._payload) == 0 else np.concatenate([self._payload, pay])

    def deliver(self, t: int) -> MessageBatch:
        """Copies that arrived by ``t * dt_s`` (serves every interval before step ``t`` first)."""
        t = self._step("deliver", t)
        self._advance_to(t, compact=False)  # the lost columns go with the delivered ones, in one compaction
        q = self._qa
        arrived = (q[_INFL] == _INFLIGHT) & (q[_ARR] <= t * self.dt_us)
        a = arrived.nonzero()[0]
        if len(a) == 0:
            if self._gone:
                self._keep(np.ones(q.shape[1], bool))
            width = 0 if self._payload is None else self._payload.shape[1]
            return MessageBatch.empty(width)
        qa = q[:, a]
        out = MessageBatch(qa[_ENV].astype(np.int32), qa[_SRC].astype(np.int32), qa[_DST].astype(np.int32),
                           self._payload[a], qa[_TSENT] / 1e6)
        lat = (qa[_ARR] - qa[_TSENT]) / 1e6
        self._count("delivered", qa[_ENV], qa[_SRC], qa[_DST], qa[_SIZE])
        self._fate(t, qa[_ENV], qa[_SRC], qa[_SIZE], True, lat)
        self._latencies.append(lat)
        self._keep(~arrived)
        return out

    def feedback(self, t: int) -> Feedback:
        """Per-sender delivered/lost counts decided up to ``deliver(t)`` and not reported before.

        Call after ``deliver(t)``: the fate of a copy sent at step ``s`` with latency within one step is
        reported at ``feedback(s + 1)``.
        """
        t = self._step("feedback", t)
        self._advance_to(t)
        return pop_feedback(self._fb, t, self.E, self.N)

    # ------------------------------------------------------------------ accounting
    def queued(self) -> dict[str, np.ndarray]:
        """int64 ``[E, N, N]`` copies and bytes waiting in queues or in flight."""
        self._started("queued")
        q = self._qa  # every public call leaves the queue compacted: no lost (_GONE) columns in it
        out = {"queued_bytes": np.zeros((self.E, self.N, self.N), np.int64)}
        out["queued_copies"] = np.zeros_like(out["queued_bytes"])
        scatter_add(out["queued_bytes"], (q[_ENV], q[_SRC], q[_DST]), q[_SIZE])
        scatter_add(out["queued_copies"], (q[_ENV], q[_SRC], q[_DST]))
        return out

    def per_copy(self) -> dict[str, np.ndarray]:
        """Run totals per (env, sender, receiver): offered/delivered/lost-by-cause/queued, bytes and copies."""
        self._started("per_copy")
        return per_copy_view(self.totals, self.queued(), CAUSES)

    def latencies_s(self) -> np.ndarray:
        """float64 latencies (s) of every delivered copy since reset."""
        self._started("latencies_s")
        return np.concatenate(self._latencies) if self._latencies else np.zeros(0)

    def stats(self) -> dict[str, float]:
        self._started("stats")
        s = flat_stats(self.per_copy(), CAUSES, self._messages, self.latencies_s())
        return s
