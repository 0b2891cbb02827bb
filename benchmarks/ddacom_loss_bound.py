"""Loss floor of a reactive sender on the issue-6 channels (configs/mpe/channels.yaml).

A sender that knows its link's capacity of the previous step exactly and sends that many whole copies
(``floor(C_(t-1) dt / copy bits)``, at most the full-broadcast demand and the 16-packet queue) is the best
any sender can do that reacts to feedback without predicting the trace: its loss is what capacity falls
cost. Printed per channel for N = 3 and N = 6, over the same seeds (0-4), envs and 250 steps as
``python -m coopsim.agents.ddacom.evaluate``. (The sinusoid row is a floor for a sender that does not
extrapolate; DDACOM extrapolates gradual falls and does better there.)

    .venv/bin/python benchmarks/ddacom_loss_bound.py
"""
from __future__ import annotations

import numpy as np

from coopsim.agents.comm_baselines.team import COPY_BYTES
from coopsim.agents.ddacom.evaluate import load_channels
from coopsim.comm.bandwidth import BandwidthChannel


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


def main() -> None:
    for n, e in ((3, 8), (6, 4)):
        for name, (_, params) in load_channels(n).items():
            print(f"N = {n} {name:<9} reactive-sender loss floor {100 * reactive_loss(n, e, params):.3f} %")


if __name__ == "__main__":
    main()
