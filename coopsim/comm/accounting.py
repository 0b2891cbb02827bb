"""Per-copy accounting shared by every channel with losses (``bandwidth-v0``, ``ns3-v0``).

A channel keeps run totals per (env, sender, receiver) copy as int64 ``[E, N, N]`` arrays named
``offered_{bytes,copies}``, ``delivered_{...}``, ``lost/<cause>_{...}``, plus what is still queued; these
helpers turn them into the ``per_copy()`` view and the flat ``comm/...`` numbers of ``stats()``.
Invariant (tested per channel): offered = delivered + lost + queued, per copy, in bytes and in copies.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from coopsim.platform.comm import Feedback


def scatter_add(target: np.ndarray, index, values: np.ndarray | None = None) -> None:
    """``target[index] += values`` with repeated indices summed (1 per index when ``values`` is None), in place.

    ``index`` is a tuple of index arrays, one per axis of ``target``, or one array of flat indices into
    ``target.reshape(-1)``. int64 in, int64 out: one bincount over the flat index, exact while every sum is
    below 2**53.
    """
    if isinstance(index, tuple):
        if len(index[0]) == 0:
            return
        flat = np.ravel_multi_index(tuple(np.asarray(i, np.int64) for i in index), target.shape)
    else:
        if len(index) == 0:
            return
        flat = np.asarray(index, np.int64)
    w = None if values is None else np.asarray(values, np.float64)
    target.reshape(-1)[...] += np.rint(np.bincount(flat, w, minlength=target.size)).astype(np.int64)


def per_copy_view(totals: dict[str, np.ndarray], queued: dict[str, np.ndarray], causes: Iterable[str]) -> dict[str, np.ndarray]:
    """Copies of the run totals plus ``lost_{bytes,copies}`` summed over ``causes`` and the queued arrays."""
    out = {k: v.copy() for k, v in totals.items()}
    for u in ("bytes", "copies"):
        out[f"lost_{u}"] = sum(out[f"lost/{c}_{u}"] for c in causes)
    out.update(queued)
    return out


def flat_stats(per_copy: dict[str, np.ndarray], causes: Iterable[str], messages_sent: int,
               latencies_s: np.ndarray) -> dict[str, float]:
    """``comm/<total>``, ``comm/lost_{bytes,copies}/<cause>``, ``comm/messages_sent`` and latency percentiles (s)."""
    s = {f"comm/{k}": float(v.sum()) for k, v in per_copy.items() if "/" not in k}
    for c in causes:
        for u in ("bytes", "copies"):
            s[f"comm/lost_{u}/{c}"] = float(per_copy[f"lost/{c}_{u}"].sum())
    s["comm/messages_sent"] = float(messages_sent)
    if len(latencies_s):
        s.update({"comm/latency_mean_s": float(latencies_s.mean()), "comm/latency_p50_s": float(np.percentile(latencies_s, 50)),
                  "comm/latency_p95_s": float(np.percentile(latencies_s, 95)), "comm/latency_max_s": float(latencies_s.max())})
    return s


def pop_feedback(pending: dict[int, Feedback], t: int, num_envs: int, num_agents: int) -> Feedback:
    """Sum (latency: max) and remove every pending per-step :class:`Feedback` recorded at a step ``<= t`` (``[E, N]`` arrays)."""
    due = [k for k in pending if k <= t]
    if len(due) == 1 and pending[due[0]].latency_max_s is not None:  # the usual case: one report, handed over as is
        return pending.pop(due[0])
    out = Feedback.zeros(num_envs, num_agents)
    for k in due:
        fb = pending.pop(k)
        for name in ("delivered_copies", "lost_copies", "delivered_bytes", "lost_bytes"):
            getattr(out, name)[...] += getattr(fb, name)
        if fb.latency_max_s is not None:
            np.maximum(out.latency_max_s, fb.latency_max_s, out=out.latency_max_s)
    return out
