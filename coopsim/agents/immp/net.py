"""IMMP low-level actor-critic: local window + waypoint features, with an optional neighbour-intent module.

Input ``x`` per agent (float32, widths for ``S = 2R + 1`` and ``F_w`` waypoint features)::

    [ window 3*S*S | previous agent channel, aligned, S*S | waypoint features F_w ]

Actor: with the intent module, ``logits_int = IntentNet([window, previous agents])`` ``[5, S, S]`` and the
expected next occupancy ``occ [S, S]`` they imply are computed first; the encoder MLP reads ``[x | occ]``
(so the predictions feed the policy, and the PPO gradient reaches the intent module too).
``features = [z | pref | logits_int]``: the policy reads ``z`` and ``pref`` (``policy_dim`` wide), the intent
loss reads the logits. Without the module (ablation, decentralized PPO baseline), ``features = [z | pref]``.
``pref`` is the high level's one-hot steepest-descent action (waypoint features ``[5:10]``); the action
logits are ``W z + b + g * pref`` with a learned gain ``g`` (initialised to ``pref_gain``), a residual path
that makes the untrained policy a waypoint follower, so PPO learns when to deviate (wait, sidestep) rather
than the route itself. Every variant, baseline included, has it.
Critic: a separate MLP on ``x`` (decentralized, IPPO style; it never sees other agents' inputs).
"""
from __future__ import annotations

import torch
from torch import nn

from coopsim.agents.ppo.networks import NEG_INF, _layer, _mlp

from .intent import IntentNet, expected_occupancy


class IMMPNet(nn.Module):
    """See the module docstring. Interface of :class:`coopsim.agents.ppo.networks.ActorCritic` (feed-forward).

    Args:
        window: S; waypoint_dim: F_w; num_actions: 5; hidden: MLP widths; activation: 'tanh' or 'relu';
        intent: build the intent module; intent_channels: its conv width.
    """

    recurrent = False
    gru = None

    def __init__(self, window: int, waypoint_dim: int, num_actions: int, hidden: list[int], activation: str,
                 intent: bool, intent_channels: int = 16, pref_gain: float = 2.0):
        super().__init__()
        act = nn.Tanh if activation == "tanh" else nn.ReLU
        s = self.s = int(window)
        self.in_dim = 4 * s * s + int(waypoint_dim)
        self.intent = IntentNet(intent_channels) if intent else None
        self.encoder = _mlp(self.in_dim + (s * s if intent else 0), hidden, act)
        self.z_dim = hidden[-1]
        self.policy_dim = self.z_dim + num_actions
        self.feature_dim = self.policy_dim + (5 * s * s if intent else 0)
        self.pi = _layer(self.z_dim, num_actions, 0.01)
        self.pref_gain = nn.Parameter(torch.tensor(float(pref_gain)))
        self.critic = nn.Sequential(_mlp(self.in_dim, hidden, act), _layer(hidden[-1], 1, 1.0))

    def intent_logits(self, x: torch.Tensor) -> torch.Tensor:
        """float32 ``[B, 5, S, S]`` neighbour move logits (requires the intent module)."""
        s = self.s
        return self.intent(x[:, :4 * s * s].reshape(-1, 4, s, s))

    def features(self, x: torch.Tensor, h: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        """``x [B, in_dim]`` -> features ``[B, feature_dim]`` (see the module docstring), no recurrent state."""
        s = self.s
        pref = x[:, 4 * s * s + 5:4 * s * s + 10]
        if self.intent is None:
            return torch.cat([self.encoder(x), pref], dim=-1), None
        lg = self.intent_logits(x)
        occ = expected_occupancy(x[:, s * s:2 * s * s].reshape(-1, s, s), lg).reshape(-1, s * s)
        z = self.encoder(torch.cat([x, occ], dim=-1))
        return torch.cat([z, pref, lg.reshape(len(x), -1)], dim=-1), None

    def features_seq(self, x, h0, starts):  # pragma: no cover - not recurrent
        raise NotImplementedError("IMMPNet is feed-forward")

    def logits(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked action logits ``[B, 5]`` from the policy part of the features."""
        z, pref = features[:, :self.z_dim], features[:, self.z_dim:self.policy_dim]
        return (self.pi(z) + self.pref_gain * pref).masked_fill(~mask, NEG_INF)

    def value(self, c: torch.Tensor) -> torch.Tensor:
        return self.critic(c).squeeze(-1)
