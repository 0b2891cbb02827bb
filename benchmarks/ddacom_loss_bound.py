"""Loss floor of a reactive sender on the issue-6 channels (configs/mpe/channels.yaml), and what headroom buys.

A sender that knows its link's capacity of the previous step exactly and sends that many whole copies
(``floor(C_(t-1) dt / copy bits)``, at most the full-broadcast demand and the 16-packet queue) is the best
any sender can do that reacts to feedback without predicting the trace: its loss is what capacity falls
cost. Printed per channel for N = 3 and N = 6, over the same seeds (0-4), envs and 250 steps as
``python -m coopsim.agents.ddacom.evaluate``. (The sinusoid row is a floor for a sender that does not
extrapolate; DDACOM extrapolates gradual falls and does better there.)

``--headroom`` adds the trade-off a safety margin ``m`` gives the same sender: it aims at ``m * C_(t-1)``,
either as whole copies per step (``floor``: what DDACOM's one-step token bucket does) or with the
fraction carried over to the next step (``carry``: a token bucket one step plus one copy deep, so the long-run
rate is ``m * C_(t-1)``), and the table gives its loss and its utilization against the oracle's safe rate
(:mod:`coopsim.comm.oracle`, the evaluation's definition). A copy is delivered iff it finishes within the
one-step latency bound, i.e. it is among the first ``floor(C_t dt / copy bits)`` copies of its step.

    .venv/bin/python benchmarks/ddacom_loss_bound.py [--headroom]
"""
from __future__ import annotations

import argparse

import numpy as np

from coopsim.agents.comm_baselines.team import COPY_BYTES
from coopsim.agents.ddacom.evaluate import load_channels
from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.oracle import safe_rate_oracle, utilization

_ORACLE: dict = {}  # (N, E, channel, seed, steps) -> safe rate [T, E]: the oracle does not depend on the sender


def reactive_loss(num_agents: int, num_envs: int, channel_params: dict, seeds=range(5), steps: int = 250) -> float:
    bits = COPY_BYTES * 8
    demand = (1 + num_agents) * (num_agents - 1)
    lost = sent = 0.0
    for seed in seeds:
        ch = BandwidthChannel(**channel_params)
        ch.reset(seed, num_envs=num_envs, num_agents=num_agents, dt_s=0.1)
        cap = np.minimum(np.floor(ch.capacity[:steps] * 0.1 / bits), ch.params.queue_packets)  # copies per step
        send = np.minimum(cap[:-1], demand)
        lost += np.maximum(send - cap[1:], 0).sum()
        sent += send.sum()
    return lost / sent


def headroom_trade(num_agents: int, num_envs: int, channel_params: dict, margin: float, carry: bool,
                   seeds=range(5), steps: int = 250) -> tuple[float, float]:
    """(loss, utilization) of the reactive sender aiming at ``margin * C_(t-1)``, pooled over ``seeds``."""
    bits = COPY_BYTES * 8
    demand = (1 + num_agents) * (num_agents - 1)
    dem_bps = demand * bits / 0.1
    lost = sent = 0.0
    delivered_bits, safe = [], []  # [T, E] per seed
    for seed in seeds:
        ch = BandwidthChannel(**channel_params)
        ch.reset(seed, num_envs=num_envs, num_agents=num_agents, dt_s=0.1)
        in_time = np.minimum(np.floor(ch.capacity[:steps] * 0.1 / bits + 1e-9), ch.params.queue_packets)  # [T, E, N]
        aim = margin * ch.capacity[:steps] * 0.1 / bits  # copies per step the sender aims at, from C_t
        k = np.zeros_like(in_time)
        tokens = np.zeros(in_time.shape[1:])
        for t in range(1, steps):  # step t uses the capacity measured at t - 1
            if carry:
                tokens = np.minimum(tokens + aim[t - 1], np.floor(aim[t - 1]) + 1)
                k[t] = np.minimum(np.floor(tokens + 1e-9), demand)
                tokens -= k[t]
            else:
                k[t] = np.minimum(np.floor(aim[t - 1] + 1e-9), demand)
        k = np.minimum(k, ch.params.queue_packets)  # more would overflow the queue
        got = np.minimum(k, in_time)
        lost += (k - got).sum()
        sent += k.sum()
        key = (num_agents, num_envs, repr(channel_params), seed, steps)
        if key not in _ORACLE:
            _ORACLE[key] = safe_rate_oracle(ch, steps, COPY_BYTES, np.linspace(0.01, 1.0, 100) * demand * bits / 0.1)
        safe.append(_ORACLE[key])
        delivered_bits.append(got.sum(axis=2) * bits)
    return lost / sent, utilization(np.concatenate(delivered_bits), np.concatenate(safe), dem_bps, num_agents, 0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headroom", action="store_true", help="also print the margin trade-off table")
    a = ap.parse_args()
    for n, e in ((3, 8), (6, 4)):
        for name, (_, params) in load_channels(n).items():
            print(f"N = {n} {name:<9} reactive-sender loss floor {100 * reactive_loss(n, e, params):.3f} %")
    if not a.headroom:
        return
    print(f"\n{'N':>2} {'channel':<9} {'margin':>6} {'floor: loss %':>14} {'util':>6} {'carry: loss %':>14} {'util':>6}")
    for n, e in ((3, 8), (6, 4)):
        for name, (_, params) in load_channels(n).items():
            for m in (1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5):
                lf, uf = headroom_trade(n, e, params, m, carry=False)
                lc, uc = headroom_trade(n, e, params, m, carry=True)
                print(f"{n:>2} {name:<9} {m:>6.2f} {100 * lf:>14.3f} {uf:>6.3f} {100 * lc:>14.3f} {uc:>6.3f}", flush=True)


if __name__ == "__main__":
    from coopsim.errors import run_script

    run_script(main)
