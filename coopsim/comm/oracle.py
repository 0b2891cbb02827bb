"""Offline safe-rate oracle and the utilization metric (issue 6 definitions).

Safe rate at step t (per env): the highest constant rate, used by all senders of the env at once,
whose loss stays at most ``max_loss`` (0.3%) over steps ``[t, t + window)`` of that env's channel trace.
It is found by an offline sweep: for every rate of a grid, every sender of every env runs a
constant-bit-rate source (a token bucket at that rate, depth one step + one packet, packets of ``copy_bytes``
sent round-robin to the other agents) through a copy of the channel with the same capacity trace;
the loss of the copies offered at each step is recorded (with a latency bound of one step, a copy's
fate is decided by the next step, so losses are attributed to their send step exactly).

Utilization = sum of delivered bits / sum over steps and senders of ``min(safe_rate_t, demand) * dt_s``.
"""
from __future__ import annotations

import numpy as np

from coopsim.comm.bandwidth import CAPACITY_VALUES_MAX, BandwidthChannel
from coopsim.comm.token_bucket import TokenBucket
from coopsim.platform.comm import Channel, MessageBatch


def safe_rate_oracle(channel: BandwidthChannel, num_steps: int, copy_bytes: int, rates_bps: np.ndarray, *,
                     window: int = 10, max_loss: float = 0.003) -> np.ndarray:
    """Safe rate (bit/s) per step and env, float64 ``[num_steps, E]`` (0 where no grid rate is safe).

    Args:
        channel: a bandwidth channel after ``reset`` (its capacity trace, queue, delay, bound and
            burst-loss settings are used; the channel itself is not advanced).
        num_steps: steps to evaluate (the trace repeats past its horizon, as in the channel).
        copy_bytes: size of one copy (payload + header, bytes).
        rates_bps: increasing grid of candidate rates (bit/s).
        window: steps in the loss window, 10 in the issue's definition.
        max_loss: largest loss fraction counted safe (0.003).
    """
    rates = np.asarray(rates_bps, np.float64)
    R, E, N = len(rates), channel.E, channel.N
    # the steps the sweep reads (0..num_steps), in the trace's own repeat; the copies hold only these rows, and the
    # rates run in blocks whose capacity tables fit the channel's limit, so any num_envs x grid size can be swept
    rows = channel.capacity[np.arange(num_steps + 1) % channel.capacity.shape[0]]
    per_rate = (num_steps + 1) * E * N
    block = max(1, min(R, CAPACITY_VALUES_MAX // max(per_rate, 1)))
    params = {**channel.params.model_dump(), "horizon_steps": num_steps + 1}
    offered = np.zeros((num_steps, R * E))
    lost = np.zeros((num_steps, R * E))
    for r0 in range(0, R, block):
        b = min(block, R - r0)
        sim = BandwidthChannel(**params)
        sim.reset(0, num_envs=b * E, num_agents=N, dt_s=channel.dt_s)
        sim.capacity = np.tile(rows, (1, b, 1))  # same trace realization for every rate block
        cbr = _CBR(np.repeat(rates[r0:r0 + b], E), N, channel.dt_s, copy_bytes,
                   channel.params.header_bytes)  # env r*E + e runs rate r0 + r
        cols = slice(r0 * E, (r0 + b) * E)
        for t in range(num_steps):
            sim.send(t, cbr.batch(t))
            sim.deliver(t + 1)
            ls = sim.last_step
            offered[t, cols] = ls["offered_bytes"].sum(axis=(1, 2))
            lost[t, cols] = sum(ls[f"lost/{c}_bytes"] for c in ("overflow", "late", "burst")).sum(axis=(1, 2))
    return window_safe_rate(offered.reshape(num_steps, R, E), lost.reshape(num_steps, R, E), rates,
                            window=window, max_loss=max_loss)


class _CBR:
    """Constant-bit-rate sources, one per (env, sender): a token bucket at the env's rate, depth one step plus
    one packet (so the long-run offered rate equals the rate: no rounding down to whole packets per step,
    which would make any rate up to the next packet count look safe), copies sent round-robin to the other
    agents."""

    def __init__(self, rate_per_env: np.ndarray, num_agents: int, dt_s: float, copy_bytes: int, header_bytes: int):
        B, N = len(rate_per_env), num_agents
        self.N, self.dt_s, self.copy_bytes = N, dt_s, int(copy_bytes)
        r = np.repeat(np.asarray(rate_per_env, np.float64)[:, None], N, 1)
        self.bucket = TokenBucket(r, 0, shape=(B, N), full=False)
        self.bucket.set_burst(np.floor(r * dt_s / 8) + copy_bytes)
        self.rr = np.zeros((B, N), np.int64)
        self.max_k = int(np.ceil(r.max() * dt_s / 8 / copy_bytes)) + 1
        self.width = max(copy_bytes - header_bytes, 0) // 4
        if self.width * 4 + header_bytes != copy_bytes:
            raise ValueError(f"copy_bytes ({copy_bytes}) - header_bytes ({header_bytes}) must be a multiple of 4 "
                             "(float32 payloads)")

    def batch(self, t: int) -> MessageBatch:
        """The copies of step ``t`` (unicast, ``t_sent_s = t * dt_s``)."""
        self.bucket.refill(self.dt_s)
        k = self.bucket.consume_up_to(self.max_k, self.copy_bytes)  # [B, N]
        env, src = np.nonzero(k > 0)
        reps = k[env, src]
        env, src = np.repeat(env, reps), np.repeat(src, reps)
        j = np.arange(len(env)) - np.repeat(np.cumsum(reps) - reps, reps)
        dst = (src + 1 + (self.rr[env, src] + j) % (self.N - 1)) % self.N
        self.rr += k
        m = len(env)
        return MessageBatch(env.astype(np.int32), src.astype(np.int32), dst.astype(np.int32),
                            np.zeros((m, self.width), np.float32), np.full(m, t * self.dt_s))


ESTIMATORS = ("max", "isotonic")


def window_safe_rate(offered: np.ndarray, lost: np.ndarray, rates_bps: np.ndarray, *, window: int = 10,
                     max_loss: float = 0.003, estimator: str = "max") -> np.ndarray:
    """Highest rate whose loss over steps ``[t, t + window)`` is at most ``max_loss``, float64 ``[T, E]``.

    Args:
        offered, lost: bytes offered at each step and lost of those, float ``[T, R, E]`` (rate r of ``rates_bps``).
        rates_bps: increasing ``[R]``. Windows are cut at ``T``; 0 where no rate is safe. A rate that offered nothing
            in a window adds no evidence there: ``max`` counts it lossless, ``isotonic`` gives it the fitted level
            of the rates below it.
        estimator: ``"max"``: the highest rate whose own window loss is at most ``max_loss`` (exact for a
            deterministic trace, such as ``bandwidth-v0``'s). ``"isotonic"``: the window loss as a function of the
            rate is first fitted non-decreasing by weighted isotonic regression (weights: the window's offered bytes;
            Barlow et al. 1972, the pool-adjacent-violators fit), then the highest rate whose fitted loss is at most
            ``max_loss``. For a stochastic channel (``ns3-v0``: one run per rate, each a different realization) a
            rate above a lossy one may be lossless by luck, and ``"max"`` takes such a rate, more of them the finer
            the grid; the monotone fit pools neighbouring rates instead, so it converges as the grid is refined
            (docs/ns3.md, "The oracle's grid and estimator").

    Raises:
        ValueError: an unknown ``estimator``; ``offered``/``lost`` not both 3-D of one shape ``[T, R, E]``, negative,
            NaN or with more lost than offered; ``rates_bps`` not ``R`` finite increasing values; ``window`` < 1.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}; got {estimator!r}")
    offered, lost = np.asarray(offered, np.float64), np.asarray(lost, np.float64)
    rates = np.asarray(rates_bps, np.float64)
    if offered.ndim != 3 or offered.shape != lost.shape:
        raise ValueError(f"offered and lost must both be [T, R, E] (steps, rates, envs); got shapes {offered.shape} "
                         f"and {lost.shape}")
    if rates.shape != (offered.shape[1],) or not np.all(np.isfinite(rates)) or np.any(np.diff(rates) <= 0):
        raise ValueError(f"rates_bps must be {offered.shape[1]} finite increasing rates (bit/s), one per column of "
                         f"offered; got {rates.tolist()[:8]}{' ...' if rates.size > 8 else ''}")
    bad = ~np.isfinite(offered) | ~np.isfinite(lost) | (offered < 0) | (lost < 0) | (lost > offered)
    if bad.any():
        t, r, e = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"offered/lost bytes must be finite, >= 0, lost <= offered; at step {t}, rate {r}, env {e}: "
                         f"offered {float(offered[t, r, e])!r}, lost {float(lost[t, r, e])!r}")
    if int(window) != window or window < 1:
        raise ValueError(f"window must be a whole number of steps >= 1; got {window!r}")
    window = int(window)
    T = offered.shape[0]
    cs_o = np.concatenate([np.zeros((1,) + offered.shape[1:]), np.cumsum(offered, 0)])
    cs_l = np.concatenate([np.zeros((1,) + lost.shape[1:]), np.cumsum(lost, 0)])
    hi = np.minimum(np.arange(T) + window, T)
    wo = cs_o[hi] - cs_o[:T]
    wl = cs_l[hi] - cs_l[:T]
    if estimator == "max":
        safe = wl <= max_loss * wo  # [T, R, E]
    else:
        # the isotonic fit f (min-max form: f(r) = max_{i<=r} min_{j>=r} weighted mean of y over [i, j], y = wl/wo,
        # weights wo) has f(r) <= max_loss iff every i <= r has a j >= r with sum_{i..j}(wl - max_loss*wo) <= 0,
        # i.e. min_{i<=r} D[i] >= min_{k>r} D[k] for the prefix sums D[k] = sum_{m<k}(wl - max_loss*wo)_m
        d = wl - max_loss * wo
        D = np.concatenate([np.zeros((T, 1) + d.shape[2:]), np.cumsum(d, 1)], 1)  # [T, R + 1, E]
        pre = np.minimum.accumulate(D[:, :-1], axis=1)
        suf = np.minimum.accumulate(D[:, :0:-1], axis=1)[:, ::-1]
        safe = pre >= suf
    R = safe.shape[1]
    idx = np.where(safe.any(axis=1), R - 1 - np.argmax(safe[:, ::-1, :], axis=1), -1)
    return np.where(idx >= 0, np.asarray(rates_bps, np.float64)[np.maximum(idx, 0)], 0.0)


def safe_rate_sweep(channel: Channel, *, seed: int, num_envs: int, num_agents: int, dt_s: float, num_steps: int,
                    copy_bytes: int, rates_bps: np.ndarray, scenario=None, drain_steps: int = 12, window: int = 10,
                    max_loss: float = 0.003, progress=None, estimator: str = "max") -> dict[str, np.ndarray]:
    """The same oracle for a channel without a closed-form trace (``ns3-v0``): one run per rate.

    For every rate of the grid the channel is reset with the same ``seed`` (so the same background
    traffic and random streams), every sender of every env runs the constant-rate source of
    :func:`safe_rate_oracle` for ``num_steps`` steps, then nothing is sent for ``drain_steps`` steps so every
    copy's fate is decided; losses are attributed to their send step with the channel's
    ``lost_bytes_by_send_step``. ``estimator``: how the safe rate is read from the runs (:func:`window_safe_rate`).

    Returns:
        ``safe_bps`` float64 ``[T, E]``, and ``offered_bytes`` / ``lost_bytes`` float64 ``[R, T, E]``.
    """
    rates = np.asarray(rates_bps, np.float64)
    R, E, N = len(rates), num_envs, num_agents
    offered = np.zeros((R, num_steps, E))
    lost = np.zeros((R, num_steps, E))
    for r, rate in enumerate(rates):
        channel.reset(seed, num_envs=E, num_agents=N, dt_s=dt_s, scenario=scenario)
        cbr = _CBR(np.full(E, rate), N, dt_s, copy_bytes, channel.params.header_bytes)
        for t in range(num_steps + drain_steps):
            b = cbr.batch(t) if t < num_steps else None
            if b is not None:
                offered[r, t] = np.bincount(b.env, minlength=E) * copy_bytes
            channel.send(t, b)
            channel.deliver(t + 1)
        lost[r] = channel.lost_bytes_by_send_step(num_steps)
        if progress is not None:
            progress(r, rate, lost[r].sum() / max(offered[r].sum(), 1))
    safe = window_safe_rate(offered.transpose(1, 0, 2), lost.transpose(1, 0, 2), rates, window=window,
                            max_loss=max_loss, estimator=estimator)
    return {"safe_bps": safe, "offered_bytes": offered, "lost_bytes": lost}


def utilization(delivered_bits: np.ndarray, safe_rate_bps: np.ndarray, demand_bps: float, num_senders: int,
                dt_s: float) -> float:
    """Sum of delivered bits over ``sum_t num_senders * min(safe_rate_t, demand) * dt_s``.

    Args:
        delivered_bits: float ``[T, E]`` or total; safe_rate_bps: ``[T, E]`` from :func:`safe_rate_oracle`.
    """
    denom = float(np.sum(num_senders * np.minimum(safe_rate_bps, demand_bps) * dt_s))
    return float(np.sum(delivered_bits)) / denom if denom > 0 else float("nan")
