"""Summary statistics for run reports: mean over seeds of per-seed means, Student-t 95% intervals."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

import numpy as np
from scipy import stats as sstats

#: keys of a metrics.jsonl line that identify an episode rather than measure it
ID_KEYS = ("seed", "episode", "episode_seed")


#: per-episode metrics whose mean is a rate in [0, 1] (matched on the name's last ``/`` part, e.g.
#: ``episode/win``): :func:`summarize` clips their intervals to [0, 1]
RATE_METRICS = ("success", "win", "draw", "timeout", "goal_fraction")


def rate_bounds(metric: str) -> tuple[float, float] | None:
    """``(0.0, 1.0)`` for a metric of :data:`RATE_METRICS`, else None (no bounds): the ``bounds`` of
    :func:`t_interval` for that metric."""
    return (0.0, 1.0) if metric.rsplit("/", 1)[-1] in RATE_METRICS else None


#: per-episode metrics that count or cost something and so cannot be negative (matched on the name's last ``/``
#: part): :func:`summarize` clips their intervals' low end to 0 when every sample is >= 0. Returns and rewards,
#: which can be negative, are not here.
NONNEGATIVE_METRICS = ("soc", "sum_of_costs", "makespan", "steps", "episode_steps", "episode_length", "length",
                       "collisions", "interventions", "violations", "invalid_moves", "blocked_moves", "throughput",
                       "soc_over_lb", "allies_left", "enemies_left", "damage_dealt", "damage_taken", "failures",
                       "attempts", "expansions", "time_s", "wall_s", "occupied_landmarks", "final_cover_dist_m")
#: metric families whose every member is a counter, a size, a duration or a cost (>= 0), e.g. ``comm/lost_copies``
NONNEGATIVE_PREFIXES = ("comm/", "shield/", "plan/", "cost/")


#: per-episode metrics that cannot be positive (full names): MPE's returns and reward terms, each minus a distance
#: or a collision count (coopsim/scenarios/mpe/tasks.py); :func:`metric_bounds` clips their intervals' high end to 0
#: when every sample is <= 0
NONPOSITIVE_METRICS = ("mpe/return", "reward/global", "reward/collision", "reward/distance")


#: per-episode metrics with a lower bound above 0 (last ``/`` part): SoC over the sum of the agents' shortest-path
#: lengths is >= 1 (the denominator is a lower bound on any plan's SoC); :func:`metric_bounds` clips the interval
#: there when every sample is at least that bound
AT_LEAST = {"soc_over_lb": 1.0}


def is_nonnegative_kind(metric: str) -> bool:
    """Whether ``metric`` is a quantity that cannot be negative: in :data:`NONNEGATIVE_METRICS` (last ``/`` part)
    or under one of :data:`NONNEGATIVE_PREFIXES`."""
    return metric.startswith(NONNEGATIVE_PREFIXES) or metric.rsplit("/", 1)[-1] in NONNEGATIVE_METRICS


def metric_bounds(metric: str, values: Iterable[float] = ()) -> tuple[float, float] | None:
    """The ``bounds`` of :func:`t_interval` for ``metric``: ``(0, 1)`` for a rate (:func:`rate_bounds`) whose finite
    ``values`` (its samples) all lie in [0, 1]; ``(0, inf)`` for a non-negative kind (:func:`is_nonnegative_kind`)
    whose finite samples are all >= 0 (``(1, inf)`` for :data:`AT_LEAST`'s ``soc_over_lb`` when they are all >= 1);
    ``(-inf, 0)`` for :data:`NONPOSITIVE_METRICS` whose finite samples are all <= 0; else None. A metric named like
    a rate or a count whose samples leave that range (``reward/win``: the win bonus, 0 or 10.96 per episode) is not
    one and is left unclipped."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    rb = rate_bounds(metric)
    if rb is not None and all(rb[0] <= v <= rb[1] for v in finite):
        return rb
    low = AT_LEAST.get(metric.rsplit("/", 1)[-1])
    if low is not None and all(v >= low for v in finite):
        return (low, math.inf)
    if is_nonnegative_kind(metric) and all(v >= 0 for v in finite):
        return (0.0, math.inf)
    if metric in NONPOSITIVE_METRICS and all(v <= 0 for v in finite):
        return (-math.inf, 0.0)
    return None


def t_interval(values: Iterable[float], confidence: float = 0.95, *,
               bounds: tuple[float, float] | None = None) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of ``values``.

    Args:
        bounds: ``(low, high)`` the quantity cannot leave, e.g. ``(0.0, 1.0)`` for a win or success rate: the
            interval's ends are clipped to it (the t-interval of a rate near 1 would otherwise reach above 1, as
            ``[0.93, 1.014]``); the clipped interval is no longer ``mean -+`` one half-width. None (the default):
            no clipping.

    Returns:
        ``(mean, low, high)``; with fewer than two finite values the interval is ``(nan, nan)`` (never clipped).

    Raises:
        ValueError: ``confidence`` not strictly between 0 and 1 (:func:`check_confidence`).
    """
    mean, half = t_half_width(values, confidence)
    low, high = mean - half, mean + half
    if bounds is not None and not math.isnan(half):
        low, high = min(max(low, bounds[0]), bounds[1]), max(min(high, bounds[1]), bounds[0])
    return mean, low, high


def check_confidence(confidence: float) -> float:
    """``confidence`` as a float if it is a probability strictly between 0 and 1 (0.95: a 95% interval).

    Raises:
        ValueError: a bool, a non-number, nan, or a value outside (0, 1): 1 or more would give an infinite or nan
            interval, 0 or less a zero-width or negative one; the message names the value (and suggests 0.95 for a
            value that looks like a percentage, 50 to 100, e.g. 95).
    """
    ok = isinstance(confidence, (int, float, np.integer, np.floating)) and not isinstance(confidence, (bool, np.bool_))
    if not ok or not 0.0 < float(confidence) < 1.0:
        hint = (f" (a percentage? give {float(confidence) / 100:g} for {float(confidence):g}%)"
                if ok and 50.0 <= float(confidence) < 100.0 else "")
        raise ValueError(f"confidence must be a probability strictly between 0 and 1, e.g. 0.95 for a 95% interval; "
                         f"got {confidence!r}{hint}")
    return float(confidence)


def t_half_width(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float]:
    """:func:`t_interval` as ``(mean, half_width)``: the interval is ``mean -+ half_width`` (the half-width is
    nan with fewer than two finite values; None and non-finite values are left out, as there). Never clipped: for
    a bounded quantity (a rate) use :func:`t_interval` with ``bounds``.

    Raises:
        ValueError: ``confidence`` not strictly between 0 and 1 (:func:`check_confidence`).
    """
    check_confidence(confidence)
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan
    return mean, float(sstats.t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def summarize(rows: list[dict]) -> dict[str, dict]:
    """Per numeric metric: the mean over seeds of per-seed means (a mean within float rounding of 0, at most
    :data:`SNAP_REL` times its largest sample, is exactly 0), with a 95% t-interval over seeds (clipped to
    [0, 1] for a rate, at 0 from below for a count or cost whose samples are all >= 0, and at 0 from above for an
    MPE return or reward term whose samples are all <= 0: :func:`metric_bounds`).

    Args:
        rows: metrics.jsonl lines (dicts with ``seed`` and numeric metrics). A missing value (null, nan, inf) is
            left out: a metric's mean is over the episodes and seeds that have a value, ``n_episodes`` and
            ``n_seeds`` count those.

    Returns:
        ``{metric: {"mean", "ci95_low", "ci95_high", "n_seeds", "n_episodes", "per_seed": {seed: mean}}}``.
    """
    per_seed: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for k, v in r.items():
            if k in ID_KEYS or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue  # a nan (or null in metrics.jsonl) is a missing value: averaged over the episodes with one
            per_seed[k][int(r["seed"])].append(float(v))
    out: dict[str, dict] = {}
    for k in sorted(per_seed):
        samples = [v for vs in per_seed[k].values() for v in vs]
        scale = max((abs(v) for v in samples), default=0.0)  # float rounding of a mean is relative to its samples
        seed_means = {s: _snap(float(np.mean(v)), scale) for s, v in sorted(per_seed[k].items())}
        mean, lo, hi = t_interval(seed_means.values(), bounds=metric_bounds(k, samples))
        mean = _snap(mean, scale)
        out[k] = {
            "mean": _clean(mean), "ci95_low": _clean(lo), "ci95_high": _clean(hi),
            "n_seeds": len(seed_means), "n_episodes": sum(len(v) for v in per_seed[k].values()),
            "per_seed": {str(s): _clean(m) for s, m in seed_means.items()},
        }
    return out


#: a mean whose size is at most this fraction of its largest sample's is float rounding of a zero sum (e.g. regrets
#: +0.95 and -0.95 averaging to -1.776e-16): it is reported as exactly 0
SNAP_REL = 1e-9


def _snap(x: float | None, scale: float) -> float | None:
    """``x``, or ``0.0`` when ``|x| <= SNAP_REL * scale`` (rounding of a sum of samples of size up to ``scale``)."""
    if x is None or not math.isfinite(x):
        return x
    return 0.0 if abs(x) <= SNAP_REL * scale else x


def _clean(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
