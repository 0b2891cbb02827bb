"""Helpers shared by the ns-3 tests."""
from __future__ import annotations

import numpy as np

#: the smallest experiment file of ``python -m coopsim.comm.ns3.experiment`` (3 agents, 1 env, 1 episode, 1 seed,
#: 2 anchor seeds), for tests of its command line
TINY_EXPERIMENT = {
    "scenario": {"num_agents": 3, "obs_radius_m": 0.5, "payload_floats": 24},
    "senders": ["ddacom", "none"],
    "num_envs": 1, "episodes": 1, "seeds": 1, "anchor_seeds": 2,
    "channel": {"id": "ns3-v0", "params": {"latency_bound_s": 0.1}},
}


class Positions:
    """A stand-in scenario: only the ``positions()`` capability, float64 [E, N, 3] (m)."""

    def __init__(self, pos):
        self.pos = np.asarray(pos, dtype=np.float64)

    def positions(self):
        return self.pos


def broadcast_all(num_envs: int, num_agents: int, t: int, dt_s: float, width: int = 18, value_base: float = 0.0):
    """Every agent of every env broadcasts one message; payload encodes (t, env, src)."""
    from coopsim.platform.comm import MessageBatch

    env = np.repeat(np.arange(num_envs, dtype=np.int32), num_agents)
    src = np.tile(np.arange(num_agents, dtype=np.int32), num_envs)
    payload = np.zeros((len(src), width), np.float32)
    payload[:, 0] = value_base + t
    payload[:, 1] = env
    if width > 2:
        payload[:, 2] = src
    return MessageBatch(env, src, np.full(len(src), -1, np.int32), payload, np.full(len(src), t * dt_s))
