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

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.token_bucket import TokenBucket
from coopsim.platform.comm import MessageBatch


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
    sim = BandwidthChannel(**channel.params.model_dump())
    sim.reset(0, num_envs=R * E, num_agents=N, dt_s=channel.dt_s)
    sim.capacity = np.tile(channel.capacity, (1, R, 1))  # same trace realization for every rate block
    rate_env = np.repeat(rates, E)  # env r*E + e runs rate r
    bucket = TokenBucket(np.repeat(rate_env[:, None], N, 1), 0, shape=(R * E, N), full=False)
    # depth one step plus one packet: the long-run offered rate equals the rate (no rounding down to
    # whole packets per step, which would make any rate up to the next packet count look safe)
    bucket.set_burst(np.floor(np.repeat(rate_env[:, None], N, 1) * channel.dt_s / 8) + copy_bytes)
    offered = np.zeros((num_steps, R * E))
    lost = np.zeros((num_steps, R * E))
    rr = np.zeros((R * E, N), np.int64)
    max_k = int(np.ceil(rates.max() * channel.dt_s / 8 / copy_bytes)) + 1
    width = max(copy_bytes - channel.params.header_bytes, 0) // 4
    for t in range(num_steps):
        bucket.refill(channel.dt_s)
        k = bucket.consume_up_to(max_k, copy_bytes)  # [R*E, N]
        env, src = np.nonzero(k > 0)
        reps = k[env, src]
        env, src = np.repeat(env, reps), np.repeat(src, reps)
        j = np.arange(len(env)) - np.repeat(np.cumsum(reps) - reps, reps)
        dst = (src + 1 + (rr[env, src] + j) % (N - 1)) % N
        rr += k
        m = len(env)
        sim.send(t, MessageBatch(env.astype(np.int32), src.astype(np.int32), dst.astype(np.int32),
                                 np.zeros((m, width), np.float32), np.full(m, t * channel.dt_s)))
        sim.deliver(t + 1)
        ls = sim.last_step
        offered[t] = ls["offered_bytes"].sum(axis=(1, 2))
        lost[t] = sum(ls[f"lost/{c}_bytes"] for c in ("overflow", "late", "burst")).sum(axis=(1, 2))
    # window sums [t, t + window)
    cs_o = np.vstack([np.zeros((1, R * E)), np.cumsum(offered, 0)])
    cs_l = np.vstack([np.zeros((1, R * E)), np.cumsum(lost, 0)])
    hi = np.minimum(np.arange(num_steps) + window, num_steps)
    wo = cs_o[hi] - cs_o[:num_steps]
    wl = cs_l[hi] - cs_l[:num_steps]
    safe = (wl <= max_loss * wo).reshape(num_steps, R, E)  # [T, R, E]
    idx = np.where(safe.any(axis=1), R - 1 - np.argmax(safe[:, ::-1, :], axis=1), -1)
    return np.where(idx >= 0, rates[np.maximum(idx, 0)], 0.0)


def utilization(delivered_bits: np.ndarray, safe_rate_bps: np.ndarray, demand_bps: float, num_senders: int,
                dt_s: float) -> float:
    """Sum of delivered bits over ``sum_t num_senders * min(safe_rate_t, demand) * dt_s``.

    Args:
        delivered_bits: float ``[T, E]`` or total; safe_rate_bps: ``[T, E]`` from :func:`safe_rate_oracle`.
    """
    denom = float(np.sum(num_senders * np.minimum(safe_rate_bps, demand_bps) * dt_s))
    return float(np.sum(delivered_bits)) / denom if denom > 0 else float("nan")
