"""Helpers shared by the ns-3 tests."""
from __future__ import annotations

import numpy as np


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
