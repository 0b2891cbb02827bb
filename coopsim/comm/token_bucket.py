"""Token buckets with exact integer bookkeeping, and the two-rate three-colour marker of RFC 2698.

Exactness: time advances in whole microseconds and rates are whole bit/s, so a bucket's content is
kept as an integer number of *bit-microseconds* (``tokens_bits * 1_000_000``). Refill over
``elapsed_us`` adds ``rate_bps * elapsed_us`` and is clipped to ``burst_bytes * 8 * 1_000_000``:
an idle bucket never holds more than its burst, however long it idled. Tests can pin every value.

All buckets are vectorized: one object holds an array of independent buckets of any ``shape``
(e.g. ``[num_envs, num_agents]``), each with its own rate.
"""
from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

US_PER_S = 1_000_000
SCALE = US_PER_S  # bit-microseconds per bit


@functools.lru_cache(maxsize=256)
def seconds_to_us(dt_s: float) -> int:
    """Exact whole microseconds of ``dt_s`` (decimal string conversion, so 0.1 -> 100000).

    Raises:
        ValueError: if ``dt_s`` is negative or not a whole number of microseconds.
    """
    frac = Fraction(str(dt_s)) * US_PER_S
    if frac.denominator != 1 or frac < 0:
        raise ValueError(f"dt_s={dt_s!r} must be a non-negative whole number of microseconds")
    return int(frac)


def _as_rate(rate_bps, shape) -> np.ndarray:
    r = np.broadcast_to(np.asarray(rate_bps, dtype=np.float64), shape)
    if (r < 0).any() or not np.isfinite(r).all():
        raise ValueError(f"rate_bps must be finite and >= 0; got {np.asarray(rate_bps)!r}")
    return np.floor(r).astype(np.int64)  # whole bit/s (documented rounding down)


class TokenBucket:
    """An array of token buckets (rate in bit/s, depth in bytes), exact to the bit-microsecond.

    Args:
        rate_bps: refill rate (bit/s), scalar or array broadcastable to ``shape``; rounded down to whole bit/s.
        burst_bytes: bucket depth (bytes) >= 0, scalar or array broadcastable to ``shape``.
        shape: shape of the bucket array (``()`` for a single bucket).
        full: start full (True, as RFC 2698 prescribes) or empty.

    Raises:
        ValueError: negative or non-finite rate, negative burst.
    """

    def __init__(self, rate_bps, burst_bytes, shape: tuple[int, ...] = (), *, full: bool = True):
        self.shape = tuple(shape)
        self.rate_bps = _as_rate(rate_bps, self.shape).copy()
        burst = np.broadcast_to(np.asarray(burst_bytes, dtype=np.int64), self.shape)
        if (burst < 0).any():
            raise ValueError(f"burst_bytes must be >= 0; got {burst_bytes!r}")
        self.burst_bytes = burst.copy()
        self._cap = self.burst_bytes * 8 * SCALE
        self._tokens = self._cap.copy() if full else np.zeros(self.shape, np.int64)

    # ---------------------------------------------------------------------------------------
    def set_rate(self, rate_bps, mask: np.ndarray | None = None) -> None:
        """Change the refill rate (bit/s) from now on, for all buckets or those where ``mask`` is True."""
        r = _as_rate(rate_bps, self.shape)
        if mask is None:
            self.rate_bps = r.copy()
        else:
            self.rate_bps = np.where(mask, r, self.rate_bps)

    def set_burst(self, burst_bytes) -> None:
        """Change the depth (bytes); content above the new depth is discarded."""
        burst = np.broadcast_to(np.asarray(burst_bytes, dtype=np.int64), self.shape)
        if (burst < 0).any():
            raise ValueError(f"burst_bytes must be >= 0; got {burst_bytes!r}")
        self.burst_bytes = burst.copy()
        self._cap = self.burst_bytes * 8 * SCALE
        self._tokens = np.minimum(self._tokens, self._cap)

    def refill(self, elapsed_s: float | None = None, *, elapsed_us: int | None = None) -> None:
        """Add ``rate * elapsed`` tokens, clipped to the burst (no credit beyond the burst after idling).

        Give exactly one of ``elapsed_s`` (s, whole microseconds) or ``elapsed_us``.
        """
        us = seconds_to_us(elapsed_s) if elapsed_us is None else int(elapsed_us)
        if us < 0:
            raise ValueError(f"elapsed time must be >= 0; got {us} us")
        self._tokens = np.minimum(self._tokens + self.rate_bps * us, self._cap)

    @property
    def tokens_bits(self) -> np.ndarray:
        """Current content in bits (float64; exact value via :meth:`tokens_exact`)."""
        return self._tokens / SCALE

    def tokens_exact(self, index=()) -> Fraction:
        """Exact content in bits of the bucket at ``index``."""
        return Fraction(int(np.asarray(self._tokens)[index]), SCALE)

    def conforms(self, size_bytes) -> np.ndarray:
        """bool: a packet of ``size_bytes`` fits in each bucket now (nothing is taken)."""
        return self._tokens >= np.asarray(size_bytes, np.int64) * 8 * SCALE

    def consume(self, size_bytes, mask: np.ndarray | None = None) -> np.ndarray:
        """Take one packet of ``size_bytes`` from each bucket (where ``mask``) if it conforms.

        Returns:
            bool array of ``shape``: which buckets sent the packet (tokens taken only there).
        """
        need = np.broadcast_to(np.asarray(size_bytes, np.int64) * 8 * SCALE, self.shape)
        ok = self._tokens >= need
        if mask is not None:
            ok &= mask
        self._tokens = self._tokens - np.where(ok, need, 0)
        return ok

    def consume_up_to(self, count, size_bytes) -> np.ndarray:
        """Send as many of ``count`` equal packets of ``size_bytes`` as the tokens allow.

        Returns:
            int64 array of ``shape``: packets sent, ``min(count, floor(tokens / size))`` (tokens taken).
        """
        cost = np.asarray(size_bytes, np.int64) * 8 * SCALE
        cnt = np.asarray(count, np.int64)
        if cnt.shape != self.shape:
            cnt = np.broadcast_to(cnt, self.shape)
        if cost.ndim == 0 and cost > 0:  # one packet size for all buckets (the usual case)
            fit = self._tokens // cost
        else:
            cost = np.broadcast_to(cost, self.shape)
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
        ValueError: PIR < CIR or non-positive burst sizes.
    """

    def __init__(self, cir_bps, cbs_bytes, pir_bps, pbs_bytes, shape: tuple[int, ...] = ()):
        if np.any(np.asarray(pir_bps) < np.asarray(cir_bps)):
            raise ValueError(f"RFC 2698 needs PIR >= CIR; got PIR={pir_bps!r} < CIR={cir_bps!r}")
        if np.any(np.asarray(cbs_bytes) <= 0) or np.any(np.asarray(pbs_bytes) <= 0):
            raise ValueError(f"burst sizes must be > 0 bytes; got CBS={cbs_bytes!r}, PBS={pbs_bytes!r}")
        self.committed = TokenBucket(cir_bps, cbs_bytes, shape)
        self.peak = TokenBucket(pir_bps, pbs_bytes, shape)
        self.shape = tuple(shape)

    def refill(self, elapsed_s: float | None = None, *, elapsed_us: int | None = None) -> None:
        self.committed.refill(elapsed_s, elapsed_us=elapsed_us)
        self.peak.refill(elapsed_s, elapsed_us=elapsed_us)

    def mark(self, size_bytes, valid: np.ndarray | None = None, pre_color: np.ndarray | None = None) -> np.ndarray:
        """Mark packets arriving together, in order along the last axis.

        Args:
            size_bytes: int ``[*shape, M]`` packet sizes (bytes), packet ``m`` of each flow marked before ``m+1``.
            valid: bool ``[*shape, M]``, False for padding slots (marked -1, no tokens taken).
            pre_color: int ``[*shape, M]`` colours for colour-aware mode (None: colour-blind).

        Returns:
            int8 ``[*shape, M]``: GREEN (0), YELLOW (1), RED (2), or -1 for padding.
        """
        size = np.asarray(size_bytes, np.int64)
        if size.shape[:-1] != self.shape:
            raise ValueError(f"size_bytes must have shape {self.shape} + (M,); got {size.shape}")
        m = size.shape[-1]
        valid = np.ones(size.shape, bool) if valid is None else np.asarray(valid, bool)
        out = np.full(size.shape, -1, np.int8)
        for k in range(m):  # packets of one flow are sequential by definition; flows are vectorized
            b = size[..., k]
            v = valid[..., k]
            pc = np.full(self.shape, GREEN) if pre_color is None else np.asarray(pre_color)[..., k]
            red = v & ((pc == RED) | ~self.peak.conforms(b))
            rest = v & ~red
            yellow = rest & ((pc == YELLOW) | ~self.committed.conforms(b))
            green = rest & ~yellow
            self.peak.consume(b, mask=rest)
            self.committed.consume(b, mask=green)
            out[..., k] = np.where(red, RED, np.where(yellow, YELLOW, np.where(green, GREEN, -1)))
        return out
