"""One working example of each trainer hook (:mod:`coopsim.platform.hooks`), used by the tests.

* :class:`SimHashCountBonus` -- intrinsic reward ``beta / sqrt(n(phi(o')))`` with ``phi`` a SimHash of
  the next observation (Tang et al. 2017, "#Exploration: A Study of Count-Based Exploration for Deep RL").
* :class:`NextObsPrediction` -- auxiliary loss: a linear head predicts the agent's next observation from
  its features (mean squared error over alive agent-steps).
* :class:`MeanBroadcast` -- communication: each alive agent broadcasts a fixed random projection of its
  features; a receiver reads the mean payload of the copies it got and their count.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from coopsim.platform.comm import BROADCAST, MessageBatch
from coopsim.platform.hooks import (AuxiliaryLoss, CommModule, HookContext, IntrinsicReward, Minibatch, RolloutBatch,
                                    check_number)


class SimHashCountBonus(IntrinsicReward):
    """Count-based bonus on SimHash codes of next observations (Tang et al. 2017).

    ``code(o) = sum_j 2^j [ (A o)_j > 0 ]`` with ``A`` float64 ``[bits, D]`` drawn from N(0, 1) by
    ``default_rng([seed, 7])``; counts ``int64 [2^bits]`` are updated by :meth:`update` after the bonus
    of a rollout is computed (so the bonus of a rollout uses the counts of earlier rollouts).

    Args:
        beta: bonus scale (reward units), finite, >= 0 and at most 1e6.
        bits: hash width k in [1, 24].

    Raises:
        ValueError: a param that is not a finite number in its range (a bool, a string, nan, inf), naming it.
    """

    def __init__(self, beta: float = 0.1, bits: int = 16):
        self.beta = check_number("beta", beta, ge=0, le=1e6)
        self.bits = check_number("bits", bits, integer=True, ge=1, le=24)
        self.A: np.ndarray | None = None
        self.counts = np.zeros(2**self.bits, dtype=np.int64)

    def setup(self, ctx: HookContext) -> None:
        self.A = np.random.default_rng([ctx.seed, 7]).standard_normal((self.bits, ctx.obs_dim))

    def codes(self, obs: np.ndarray) -> np.ndarray:
        """int64 ``[...]`` codes of float ``[..., D]`` observations."""
        bits = (np.asarray(obs, dtype=np.float64) @ self.A.T) > 0
        return (bits * (1 << np.arange(self.bits))).sum(-1).astype(np.int64)

    def reward(self, batch: RolloutBatch) -> torch.Tensor:
        n = self.counts[self.codes(batch.next_obs.numpy())]
        return torch.as_tensor(self.beta / np.sqrt(np.maximum(n, 1)), dtype=torch.float32)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        c = self.codes(batch.next_obs.numpy())[batch.alive.numpy()]
        np.add.at(self.counts, c, 1)
        return {"distinct_codes": float((self.counts > 0).sum())}

    def state_dict(self) -> dict:
        return {"counts": self.counts.copy(), "A": None if self.A is None else self.A.copy()}

    def load_state_dict(self, s: dict) -> None:
        self.counts, self.A = s["counts"].copy(), s["A"]


class NextObsPrediction(nn.Module, AuxiliaryLoss):
    """Auxiliary loss: ``W f + b`` predicts the next observation; MSE over alive agent-steps.

    Args:
        coef: weight of the loss in the PPO objective, finite, >= 0.

    Raises:
        ValueError: ``coef`` is not a finite number >= 0 (a bool, a string, nan, inf).
    """

    def __init__(self, coef: float = 0.1):
        nn.Module.__init__(self)
        self.coef = check_number("coef", coef, ge=0)
        self.head: nn.Linear | None = None

    def setup(self, ctx: HookContext) -> None:
        self.head = nn.Linear(ctx.feature_dim, ctx.obs_dim)

    def loss(self, mb: Minibatch, features: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        w = mb.alive.float()
        err = ((self.head(features) - mb.next_obs) ** 2).mean(-1)
        return (err * w).sum() / w.sum().clamp(min=1.0), {}


class MeanBroadcast(nn.Module, CommModule):
    """Broadcast a fixed random projection of the features; receive the mean payload and the copy count.

    Payload: float32 ``[M, width]`` = ``tanh(features @ P)`` with ``P`` from ``default_rng([seed, 11])``
    (not trained: messages are data, the receiver learns to read them). ``receive`` returns
    ``[E, N, width + 1]``: the mean of received payloads (0 if none) and the number of copies / (N - 1).

    Args:
        width: payload floats per message, an integer in [1, 1024].

    Raises:
        ValueError: ``width`` is not an integer in [1, 1024] (a bool, a string, 2.5).
    """

    def __init__(self, width: int = 8):
        nn.Module.__init__(self)
        self.width = check_number("width", width, integer=True, ge=1, le=1024)
        self.input_dim = self.width + 1
        self.register_buffer("proj", torch.zeros(0))

    def setup(self, ctx: HookContext) -> None:
        rng = np.random.default_rng([ctx.seed, 11])
        self.proj = torch.as_tensor(rng.standard_normal((ctx.feature_dim, self.width)) / np.sqrt(ctx.feature_dim),
                                    dtype=torch.float32)

    def messages(self, features: torch.Tensor, alive: np.ndarray, t: int, dt_s: float) -> MessageBatch:
        env, src = np.nonzero(alive)
        payload = torch.tanh(features.detach()[torch.as_tensor(env), torch.as_tensor(src)] @ self.proj).numpy()
        return MessageBatch(env=env.astype(np.int32), src=src.astype(np.int32),
                            dst=np.full(len(env), BROADCAST, np.int32), payload=payload.astype(np.float32),
                            t_sent_s=np.full(len(env), t * dt_s))

    def receive(self, inbox: MessageBatch, num_envs: int, num_agents: int) -> np.ndarray:
        total = np.zeros((num_envs, num_agents, self.width), np.float64)
        count = np.zeros((num_envs, num_agents), np.float64)
        if len(inbox):
            np.add.at(total, (inbox.env, inbox.dst), inbox.payload)
            np.add.at(count, (inbox.env, inbox.dst), 1.0)
        mean = total / np.maximum(count, 1.0)[..., None]
        return np.concatenate([mean, (count / max(num_agents - 1, 1))[..., None]], axis=-1).astype(np.float32)
