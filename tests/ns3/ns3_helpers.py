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


class StubChannel:
    """Stands in for the ns-3 channel in the experiment script's tests: ``stats()`` returns ``stats``."""

    def __init__(self, stats):
        self._stats = stats

    def stats(self):
        return self._stats

    def close(self):
        pass


def fake_run(snd, cid, cparams=None, *, sender_params=None, seed=0, oracle=True, record_series=False, channel=None,
             num_agents=3, obs_radius_m=0.5, num_envs=1, episodes=1, payload_floats=3):
    """A run dict as :func:`coopsim.agents.ddacom.evaluate.run` returns it (no ns-3); the ``none`` sender offers no
    copy."""
    ret = -50.0 - 7.0 * (seed % 3) + {"none": 0.0, "broadcast": 10.0 + seed % 2}.get(snd, 6.0)
    offered = 0.0 if snd == "none" else 10.0
    z = [[0.0] * num_envs for _ in range(25 * episodes)]
    r = {"sender": snd, "channel": cid, "seed": seed, "return": ret,
         "return_per_env_episode": [ret] * (num_envs * episodes), "copies_offered": offered,
         "copies_delivered": offered, "copies_lost": 0.0, "broadcast_equivalent_copies": 20.0, "loss": 0.0,
         "messages_vs_broadcast": offered / 20.0, "demand_bps": 1.0, "copy_bytes": 124}
    if record_series:
        r["series"] = {"delivered_bits": z, "offered_copies": z, "broadcast_copies": z, "lost_copies": z,
                       "return_per_episode": [[ret] * num_envs for _ in range(episodes)]}
    return r


def boom(*a, **k):
    """Patched over the experiment's long work in tests that must stop before it."""
    raise AssertionError("the long work started")
