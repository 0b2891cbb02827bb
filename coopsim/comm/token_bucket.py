"""Token buckets with exact integer bookkeeping, and the two-rate three-colour marker of RFC 2698.

Exactness: time advances in whole microseconds and rates are whole bit/s, so a bucket's content is
kept as an integer number of *bit-microseconds* (``tokens_bits * 1_000_000``). Refill over
``elapsed_us`` adds ``rate_bps * elapsed_us`` and is clipped to ``burst_bytes * 8 * 1_000_000``:
an idle bucket never holds more than its burst, however long it idled. Tests can pin every value.

Ranges (so the int64 arithmetic never wraps): rates are finite numbers in ``[0, 1e12]`` bit/s
(:data:`~coopsim.comm.traces.MAX_RATE_BPS`, the traces' bound), depths and packet sizes whole numbers of bytes in
``[0, MAX_BYTES]`` (5e11 B: at most 4e18 bit-microseconds); a refill longer than the time a bucket takes to fill
counts only up to that time, so an idle of any length (hours, or 1e300 s) leaves the bucket exactly full.

All buckets are vectorized: one object holds an array of independent buckets of any ``shape``
(e.g. ``[num_envs, num_agents]``), each with its own rate.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from coopsim.comm.traces import MAX_RATE_BPS, VALID_RATE
from coopsim.errors import short_repr

US_PER_S = 1_000_000
SCALE = US_PER_S  # bit-microseconds per bit
#: largest bucket depth and packet size (bytes): ``MAX_BYTES * 8 * SCALE`` = 4e18 bit-microseconds, half of int64
MAX_BYTES = 5 * 10**11
#: longest refill (us) added as ``rate * elapsed`` directly: 1e12 bit/s * 4e6 us + a full 4e18 bucket < 2**63;
#: a longer one is first clipped to the time each bucket takes to fill
_DIRECT_US = 4_000_000
_INT64_MAX = np.iinfo(np.int64).max


@functools.lru_cache(maxsize=256, typed=True)  # typed: True (refused) is not a cache hit of 1, nor 1 of True
def seconds_to_us(dt_s: float, what: str = "dt_s") -> int:
    """Exact whole microseconds of ``dt_s`` (decimal string conversion, so 0.1 -> 100000).

    ``what`` names the value in the message (the key or argument it came from).

    Raises:
        ValueError: if ``dt_s`` is not a number, not finite, negative or not a whole number of microseconds.
    """
    if isinstance(dt_s, bool) or not isinstance(dt_s, (int, float, np.integer, np.floating)):
        raise ValueError(f"{what}={short_repr(dt_s)} must be a number of seconds (a non-negative whole number of "
                         "microseconds)")
    if not math.isfinite(dt_s):
        raise ValueError(f"{what}={dt_s!r} must be a finite, non-negative whole number of microseconds")
    frac = Fraction(str(dt_s)) * US_PER_S
    if frac.denominator != 1 or frac < 0:
        raise ValueError(f"{what}={dt_s!r} must be a non-negative whole number of microseconds (s with at most 6 "
                         "decimals, e.g. 0.1 or 1e-6)")
    return int(frac)


#: longest step a channel takes (s): 1e9 s = 1e15 us, far from int64 in the queue's time arithmetic
STEP_MAX_S = 1e9


def step_us(dt_s, what: str = "dt_s") -> int:
    """Whole microseconds of a channel's step ``dt_s``, which every channel's ``reset`` checks the same way.

    Raises:
        ValueError: ``dt_s`` not a number (a bool, text), not finite, not whole microseconds, not > 0 or above
            :data:`STEP_MAX_S`.
    """
    us = seconds_to_us(dt_s, what)
    if not 0 < us <= STEP_MAX_S * US_PER_S:
        raise ValueError(f"{what}={dt_s!r} must be > 0 and at most {STEP_MAX_S:g} s (time advances by it each step)")
    return us


def _as_rate(rate_bps, shape) -> np.ndarray:
    a = np.asarray(rate_bps)
    kind = a.dtype.kind
    if kind == "O":  # Python ints beyond int64 (10**30: its range is the message) are numbers; None is not
        kind = "f" if all(isinstance(x, (int, float, np.number)) and not isinstance(x, (bool, np.bool_))
                          for x in a.flat) else "O"
    if kind not in "fiu":  # text ("1000" would parse as a number), None (would be nan), bools
        raise ValueError(f"rate_bps must be {VALID_RATE}; got {short_repr(rate_bps)} (dtype {a.dtype}), not a number")
    try:
        r = np.broadcast_to(a.astype(np.float64, copy=False), shape)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"rate_bps must be {VALID_RATE}, broadcastable to shape {shape}; got "
                         f"{short_repr(rate_bps)} ({exc})") from None
    if not ((r >= 0) & (r <= MAX_RATE_BPS)).all():  # nan fails both
        bad = r[~((r >= 0) & (r <= MAX_RATE_BPS))].flat[0]
        raise ValueError(f"rate_bps must be {VALID_RATE}; got {bad.item()!r}")
    return np.floor(r).astype(np.int64)  # whole bit/s (documented rounding down)


def _whole(x, what: str, limit: int = MAX_BYTES, unit: str = "bytes") -> np.ndarray:
    """int64 array of ``x`` if every value is a whole number in ``[0, limit]`` (integers, or floats with no fraction);
    otherwise a ValueError naming ``what``, the first bad value and the valid range. Vectorized: one mask."""
    a = np.asarray(x)
    kind = a.dtype.kind
    valid = f"a whole number of {unit} in [0, {limit:.3g}]" if limit == MAX_BYTES else f"a whole number of {unit} >= 0"
    if kind in "iu":
        if a.size and (a.min() < 0 or a.max() > limit):
            bad = a[(a < 0) | (a > limit)].flat[0]
            raise ValueError(f"{what} must be {valid}; got {bad.item()!r}")
        return a.astype(np.int64, copy=False)
    if kind == "f":
        a = a.astype(np.float64, copy=False)  # float16 / float32: the limit (5e11) compared exactly, no overflow
        ok = (a >= 0) & (a <= limit) & (a == np.floor(a))  # nan and inf fail
        if not ok.all():
            bad = a[~ok].flat[0]
            raise ValueError(f"{what} must be {valid} (no fraction, no nan or inf); got {bad.item()!r}")
        return a.astype(np.int64)
    raise ValueError(f"{what} must be {valid}; got {short_repr(x)} (dtype {a.dtype})")


def _elapsed(elapsed_s, elapsed_us) -> int:
    """Whole microseconds of exactly one of ``elapsed_s`` / ``elapsed_us`` (a Python int, maybe beyond int64)."""
    if elapsed_s is None and elapsed_us is None:
        raise ValueError("refill needs the elapsed time: give elapsed_s (s, a whole number of microseconds) or "
                         "elapsed_us (whole microseconds)")
    if elapsed_s is not None and elapsed_us is not None:
        raise ValueError(f"give exactly one of elapsed_s and elapsed_us; got both (elapsed_s={elapsed_s!r}, "
                         f"elapsed_us={elapsed_us!r})")
    if elapsed_us is None:
        return seconds_to_us(elapsed_s, "elapsed_s")
    us = elapsed_us
    if isinstance(us, (float, np.floating)) and math.isfinite(us) and float(us).is_integer():
        us = int(us)
    if isinstance(us, bool) or not isinstance(us, (int, np.integer)) or us < 0:
        raise ValueError(f"elapsed_us must be a whole number of microseconds >= 0; got {short_repr(elapsed_us)}")
    return int(us)


def _shaped(x, what: str, shape: tuple[int, ...], dtype=None) -> np.ndarray:
    """``x`` broadcast to the buckets' ``shape`` (a view), or a ValueError naming ``what`` and both shapes."""
    a = np.asarray(x, dtype)
    if a.shape == shape:
        return a
    try:
        return np.broadcast_to(a, shape)
    except ValueError:
        raise ValueError(f"{what} of shape {a.shape} does not broadcast to the buckets' shape {shape}") from None


def _mask(mask, shape: tuple[int, ...]) -> np.ndarray | None:
    """A bool ``mask`` of the buckets' ``shape`` (or broadcastable to it), None as is; ValueError otherwise."""
    if mask is None:
        return None
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"mask must be a bool array of the buckets' shape {shape}; got dtype {m.dtype}")
    return _shaped(m, "mask", shape)


class TokenBucket:
    """An array of token buckets (rate in bit/s, depth in bytes), exact to the bit-microsecond.

    Args:
        rate_bps: refill rate (bit/s), a finite number in ``[0, 1e12]`` (:data:`~coopsim.comm.traces.MAX_RATE_BPS`),
            scalar or array broadcastable to ``shape``; rounded down to whole bit/s. Text (``"1000"``), None and
            booleans are refused.
        burst_bytes: bucket depth (bytes), a whole number in ``[0, MAX_BYTES]`` (5e11), scalar or array broadcastable
            to ``shape``.
        shape: shape of the bucket array (``()`` for a single bucket).
        full: start full (True, as RFC 2698 prescribes) or empty.

    Raises:
        ValueError: a rate outside ``[0, 1e12]`` or not finite; a burst that is not a whole number of bytes in
            ``[0, MAX_BYTES]``. The methods raise ValueError for sizes and counts that are negative or not whole.
    """

    def __init__(self, rate_bps, burst_bytes, shape: tuple[int, ...] = (), *, full: bool = True):
        self.shape = tuple(shape)
        self.rate_bps = _as_rate(rate_bps, self.shape).copy()
        self.burst_bytes = self._burst(burst_bytes)
        self._cap = self.burst_bytes * 8 * SCALE
        self._tokens = self._cap.copy() if full else np.zeros(self.shape, np.int64)

    # ---------------------------------------------------------------------------------------
    def _burst(self, burst_bytes) -> np.ndarray:
        burst = _whole(burst_bytes, "burst_bytes")
        try:
            return np.broadcast_to(burst, self.shape).copy()
        except ValueError:
            raise ValueError(f"burst_bytes of shape {burst.shape} does not broadcast to the buckets' shape "
                             f"{self.shape}") from None

    def set_rate(self, rate_bps, mask: np.ndarray | None = None) -> None:
        """Change the refill rate (bit/s, a finite number in ``[0, 1e12]``) from now on, for all buckets or those
        where ``mask`` (bool, of the buckets' shape or broadcastable to it) is True. Raises ValueError for a rate
        outside that range or a mask of another shape or dtype."""
        r = _as_rate(rate_bps, self.shape)
        mask = _mask(mask, self.shape)
        if mask is None:
            self.rate_bps = r.copy()
        else:
            self.rate_bps = np.where(mask, r, self.rate_bps)

    def set_burst(self, burst_bytes) -> None:
        """Change the depth (bytes, a whole number in ``[0, MAX_BYTES]``; ValueError otherwise); content above the
        new depth is discarded."""
        self.burst_bytes = self._burst(burst_bytes)
        self._cap = self.burst_bytes * 8 * SCALE
        self._tokens = np.minimum(self._tokens, self._cap)

    def refill(self, elapsed_s: float | None = None, *, elapsed_us: int | None = None) -> None:
        """Add ``rate * elapsed`` tokens, clipped to the burst (no credit beyond the burst after idling).

        Give exactly one of ``elapsed_s`` (s, a finite whole number of microseconds >= 0) or ``elapsed_us`` (a whole
        number >= 0). Any length is exact: a refill longer than a bucket takes to fill leaves it exactly full.

        Raises:
            ValueError: neither or both given, or a negative, non-finite or fractional-microsecond time.
        """
        us = _elapsed(elapsed_s, elapsed_us)
        if us <= _DIRECT_US:
            self._tokens = np.minimum(self._tokens + self.rate_bps * us, self._cap)
            return
        # rate * us could pass int64: count only the (ceiled) time each bucket takes to fill, which fills it exactly
        to_full = -((self._tokens - self._cap) // np.maximum(self.rate_bps, 1))
        us = np.minimum(min(us, _INT64_MAX), to_full)
        self._tokens = np.minimum(self._tokens + self.rate_bps * us, self._cap)

    @property
    def tokens_bits(self) -> np.ndarray:
        """Current content in bits (float64; exact value via :meth:`tokens_exact`)."""
        return self._tokens / SCALE

    def tokens_exact(self, index=()) -> Fraction:
        """Exact content in bits of the bucket at ``index``."""
        return Fraction(int(np.asarray(self._tokens)[index]), SCALE)

    def conforms(self, size_bytes) -> np.ndarray:
        """bool: a packet of ``size_bytes`` (whole bytes in ``[0, MAX_BYTES]``; ValueError otherwise) fits in each
        bucket now (nothing is taken)."""
        return self._tokens >= _whole(size_bytes, "size_bytes") * 8 * SCALE

    def consume(self, size_bytes, mask: np.ndarray | None = None) -> np.ndarray:
        """Take one packet of ``size_bytes`` (whole bytes in ``[0, MAX_BYTES]``) from each bucket (where ``mask``)
        if it conforms.

        Returns:
            bool array of ``shape``: which buckets sent the packet (tokens taken only there).

        Raises:
            ValueError: a negative or fractional size (which would add credit, or truncate); a size or ``mask`` (bool)
                that does not broadcast to the buckets' shape.
        """
        return self._take(_whole(size_bytes, "size_bytes") * 8 * SCALE, mask)

    def _take(self, need_bits_us: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        need = _shaped(need_bits_us, "size_bytes", self.shape)
        ok = self._tokens >= need
        if mask is not None:
            ok &= _mask(mask, self.shape)
        self._tokens = self._tokens - np.where(ok, need, 0)
        return ok

    def consume_up_to(self, count, size_bytes) -> np.ndarray:
        """Send as many of ``count`` equal packets of ``size_bytes`` as the tokens allow.

        Args:
            count: whole number(s) of packets >= 0, scalar or broadcastable to ``shape``.
            size_bytes: whole bytes in ``[0, MAX_BYTES]``, scalar or broadcastable to ``shape``.

        Returns:
            int64 array of ``shape``: packets sent, ``min(count, floor(tokens / size))`` (tokens taken).

        Raises:
            ValueError: a negative or fractional count or size, or one that does not broadcast to the buckets' shape.
        """
        cost = _whole(size_bytes, "size_bytes") * 8 * SCALE
        cnt = _shaped(_whole(count, "count", limit=2**62, unit="packets"), "count", self.shape)
        if cost.ndim == 0 and cost > 0:  # one packet size for all buckets (the usual case)
            fit = self._tokens // cost
        else:
            cost = _shaped(cost, "size_bytes", self.shape)
            fit = np.where(cost > 0, self._tokens // np.maximum(cost, 1), cnt)
        sent = np.minimum(cnt, fit)
        self._tokens = self._tokens - sent * cost
        return sent


GREEN, YELLOW, RED = 0, 1, 2


class TwoRateThreeColorMarker:
    """Two-rate three-colour marker (trTCM) after RFC 2698, vectorized over independent flows.

    A flow has a committed bucket C (rate CIR, depth CBS) and a peak bucket P (rate PIR, depth PBS),
    both full at start. Colour-blind marking of a packet of B bytes (RFC 2698 section 3):
    red if ``Tp < B``; else yellow if ``Tc < B`` (and ``Tp -= B``); else green (``Tp -= B``, ``Tc -= B``).
    In colour-aware mode a pre-coloured red packet stays red and a yellow one is never green.

    Args:
        cir_bps, pir_bps: committed and peak information rates (bit/s; RFC 2698 counts bytes/s,
            here bits/s), PIR >= CIR.
        cbs_bytes, pbs_bytes: committed and peak burst sizes (bytes) > 0.
        shape: flow-array shape.

    Raises:
        ValueError: PIR < CIR, non-positive burst sizes, or a rate / burst outside :class:`TokenBucket`'s ranges.
    """

    def __init__(self, cir_bps, cbs_bytes, pir_bps, pbs_bytes, shape: tuple[int, ...] = ()):
        # the buckets check each rate and burst first (a number in range), so the comparisons below are of numbers
        self.committed = TokenBucket(cir_bps, cbs_bytes, shape)
        self.peak = TokenBucket(pir_bps, pbs_bytes, shape)
        self.shape = tuple(shape)
        if np.any(np.asarray(pir_bps, np.float64) < np.asarray(cir_bps, np.float64)):
            raise ValueError(f"RFC 2698 needs PIR >= CIR; got PIR={pir_bps!r} < CIR={cir_bps!r}")
        if np.any(self.committed.burst_bytes <= 0) or np.any(self.peak.burst_bytes <= 0):
            raise ValueError(f"burst sizes must be > 0 bytes; got CBS={cbs_bytes!r}, PBS={pbs_bytes!r}")

    def refill(self, elapsed_s: float | None = None, *, elapsed_us: int | None = None) -> None:
        self.committed.refill(elapsed_s, elapsed_us=elapsed_us)
        self.peak.refill(elapsed_s, elapsed_us=elapsed_us)

    def mark(self, size_bytes, valid: np.ndarray | None = None, pre_color: np.ndarray | None = None) -> np.ndarray:
        """Mark packets arriving together, in order along the last axis.

        Args:
            size_bytes: int ``[*shape, M]`` packet sizes (whole bytes in ``[0, MAX_BYTES]``), packet ``m`` of each
                flow marked before ``m+1`` (one flow, ``shape == ()``: ``[M]``, e.g. ``[50]`` for one packet).
            valid: bool ``[*shape, M]``, False for padding slots (marked -1, no tokens taken).
            pre_color: int ``[*shape, M]`` colours GREEN / YELLOW / RED (0 / 1 / 2) for colour-aware mode
                (None: colour-blind).

        Returns:
            int8 ``[*shape, M]``: GREEN (0), YELLOW (1), RED (2), or -1 for padding.

        Raises:
            ValueError: a shape other than ``[*shape, M]`` (a scalar too), a negative or fractional size, or a
                pre-colour outside 0..2.
        """
        size = _whole(size_bytes, "size_bytes")
        if size.ndim == 0 or size.shape[:-1] != self.shape:
            raise ValueError(f"size_bytes must have shape {self.shape} + (M,) (M packets per flow, e.g. [50] for one "
                             f"packet of one flow); got shape {size.shape}")
        m = size.shape[-1]
        valid = np.ones(size.shape, bool) if valid is None else np.asarray(valid, bool)
        if valid.shape != size.shape:
            raise ValueError(f"valid must have the shape of size_bytes {size.shape}; got {valid.shape}")
        if pre_color is not None:
            pre_color = np.asarray(pre_color)
            if pre_color.shape != size.shape:
                raise ValueError(f"pre_color must have the shape of size_bytes {size.shape}; got {pre_color.shape}")
            if pre_color.dtype.kind not in "iu" or (pre_color.size and (pre_color.min() < GREEN
                                                                        or pre_color.max() > RED)):
                raise ValueError(f"pre_color must hold GREEN (0), YELLOW (1) or RED (2); got {short_repr(pre_color)}")
        need = size * 8 * SCALE
        out = np.full(size.shape, -1, np.int8)
        for k in range(m):  # packets of one flow are sequential by definition; flows are vectorized
            b = need[..., k]
            v = valid[..., k]
            pc = GREEN if pre_color is None else pre_color[..., k]
            red = v & ((pc == RED) | (self.peak._tokens < b))
            rest = v & ~red
            yellow = rest & ((pc == YELLOW) | (self.committed._tokens < b))
            green = rest & ~yellow
            self.peak._take(b, mask=rest)
            self.committed._take(b, mask=green)
            out[..., k] = np.where(red, RED, np.where(yellow, YELLOW, np.where(green, GREEN, -1)))
        return out
