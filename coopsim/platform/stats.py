"""Summary statistics for run reports: mean over seeds of per-seed means, Student-t 95% intervals."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

import numpy as np
from scipy import stats as sstats

#: keys of a metrics.jsonl line that identify an episode rather than measure it
ID_KEYS = ("seed", "episode", "episode_seed")


def t_interval(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of ``values``.

    Returns:
        ``(mean, low, high)``; with fewer than two finite values the interval is ``(nan, nan)``.
    """
    mean, half = t_half_width(values, confidence)
    return mean, mean - half, mean + half


def t_half_width(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float]:
    """:func:`t_interval` as ``(mean, half_width)``: the interval is ``mean -+ half_width`` (the half-width is
    nan with fewer than two finite values; None and non-finite values are left out, as there)."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan
    return mean, float(sstats.t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def summarize(rows: list[dict]) -> dict[str, dict]:
    """Per numeric metric: the mean over seeds of per-seed means, with a 95% t-interval over seeds.

    Args:
        rows: metrics.jsonl lines (dicts with ``seed`` and numeric metrics).

    Returns:
        ``{metric: {"mean", "ci95_low", "ci95_high", "n_seeds", "n_episodes", "per_seed": {seed: mean}}}``.
    """
    per_seed: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for k, v in r.items():
            if k in ID_KEYS or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            per_seed[k][int(r["seed"])].append(float(v))
    out: dict[str, dict] = {}
    for k in sorted(per_seed):
        seed_means = {s: float(np.mean(v)) for s, v in sorted(per_seed[k].items())}
        mean, lo, hi = t_interval(seed_means.values())
        out[k] = {
            "mean": _clean(mean), "ci95_low": _clean(lo), "ci95_high": _clean(hi),
            "n_seeds": len(seed_means), "n_episodes": sum(len(v) for v in per_seed[k].values()),
            "per_seed": {str(s): _clean(m) for s, m in seed_means.items()},
        }
    return out


def _clean(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
