"""QMIX networks (Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent RL").

* :class:`RNNAgent`: shared recurrent agent network ``obs (+ last action + agent id) -> fc -> GRUCell -> Q``.
* :class:`QMixer`: mixes per-agent Q-values into ``Q_tot`` with weights produced by hypernetworks of the
  global state; the weights pass through ``abs`` so ``dQ_tot / dQ_a >= 0`` (monotonic), eq. (5)-(6) of
  the paper; the final bias is a 2-layer network of the state ``V(s)``.
"""
from __future__ import annotations

import torch
from torch import nn


class RNNAgent(nn.Module):
    """``[B, in_dim]`` inputs and ``[B, hidden]`` GRU state -> ``([B, n_actions]`` Q-values, new state)."""

    def __init__(self, in_dim: int, n_actions: int, hidden: int = 64):
        super().__init__()
        self.hidden = hidden
        self.fc1 = nn.Linear(in_dim, hidden)
        self.rnn = nn.GRUCell(hidden, hidden)
        self.fc2 = nn.Linear(hidden, n_actions)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.rnn(torch.relu(self.fc1(x)), h)
        return self.fc2(h), h


class QMixer(nn.Module):
    """Monotonic mixing network: ``Q_tot = w2(s)^T elu(W1(s)^T q + b1(s)) + V(s)`` with ``W1, w2 >= 0``.

    Args:
        n_agents: N; state_dim: S; embed: mixing width (32 in the paper); hyper_embed: hypernet width (64).

    Shapes: ``forward(q [B, N], state [B, S]) -> [B]``.
    """

    def __init__(self, n_agents: int, state_dim: int, embed: int = 32, hyper_embed: int = 64):
        super().__init__()
        self.n_agents, self.embed = n_agents, embed
        self.hyper_w1 = nn.Sequential(nn.Linear(state_dim, hyper_embed), nn.ReLU(), nn.Linear(hyper_embed, embed * n_agents))
        self.hyper_w2 = nn.Sequential(nn.Linear(state_dim, hyper_embed), nn.ReLU(), nn.Linear(hyper_embed, embed))
        self.hyper_b1 = nn.Linear(state_dim, embed)
        self.v = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        b = q.shape[0]
        w1 = torch.abs(self.hyper_w1(state)).view(b, self.n_agents, self.embed)
        b1 = self.hyper_b1(state).view(b, 1, self.embed)
        hidden = torch.nn.functional.elu(torch.bmm(q.view(b, 1, self.n_agents), w1) + b1)
        w2 = torch.abs(self.hyper_w2(state)).view(b, self.embed, 1)
        return (torch.bmm(hidden, w2).view(b) + self.v(state).view(b))
