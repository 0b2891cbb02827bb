"""Actor-critic networks of the PPO plugin, observation flattening and value normalisation."""
from __future__ import annotations

import math

import gymnasium
import numpy as np
import torch
from torch import nn

NEG_INF = -1e9


def obs_dim(space: gymnasium.Space) -> int:
    """Width of one agent's flattened observation (``Box`` or ``Dict`` of ``Box``)."""
    if isinstance(space, gymnasium.spaces.Dict):
        return sum(obs_dim(s) for s in space.spaces.values())
    if space.shape is None:
        raise TypeError(f"PPO needs Box or Dict-of-Box observations; got {space}")
    return int(np.prod(space.shape)) if len(space.shape) else 1


def flatten_obs(obs, space: gymnasium.Space) -> np.ndarray:
    """float32 ``[E, N, D]`` from ``[E, N, *shape]`` or a dict of such arrays (Dict space key order)."""
    if isinstance(space, gymnasium.spaces.Dict):
        parts = [np.asarray(obs[k]).reshape(obs[k].shape[0], obs[k].shape[1], -1) for k in space.spaces]
        return np.concatenate(parts, axis=-1).astype(np.float32, copy=False)
    obs = np.asarray(obs)
    return obs.reshape(obs.shape[0], obs.shape[1], -1).astype(np.float32, copy=False)


def _layer(i: int, o: int, std: float = math.sqrt(2)) -> nn.Linear:
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


def _mlp(i: int, widths: list[int], act: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for w in widths:
        layers += [_layer(i, w), act()]
        i = w
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Shared-parameter actor and a (local or centralised) feed-forward critic.

    Actor: ``x [.., in_dim] -> MLP(hidden) -> [GRU] -> features [.., F] -> logits [.., A]``.
    Critic: ``c [.., critic_dim] -> MLP(critic_hidden or hidden) -> value [..]`` (normalised units if value norm
    is on).
    Orthogonal init, policy head std 0.01, value head std 1 (CleanRL ppo.py).
    """

    def __init__(self, in_dim: int, critic_dim: int, num_actions: int, hidden: list[int], activation: str, recurrent: bool,
                 critic_hidden: list[int] | None = None):
        super().__init__()
        act = nn.Tanh if activation == "tanh" else nn.ReLU
        self.encoder = _mlp(in_dim, hidden, act)
        self.feature_dim = hidden[-1]
        self.gru = nn.GRU(self.feature_dim, self.feature_dim) if recurrent else None
        if self.gru is not None:
            for name, p in self.gru.named_parameters():
                if "weight" in name:
                    nn.init.orthogonal_(p)
                else:
                    nn.init.zeros_(p)
        self.pi = _layer(self.feature_dim, num_actions, 0.01)
        ch = list(critic_hidden) if critic_hidden else list(hidden)
        self.critic = nn.Sequential(_mlp(critic_dim, ch, act), _layer(ch[-1], 1, 1.0))

    @property
    def recurrent(self) -> bool:
        return self.gru is not None

    def features(self, x: torch.Tensor, h: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One step: ``x [B, in]``, ``h [B, F]`` (zeros at episode start) -> features ``[B, F]``, next ``h``."""
        z = self.encoder(x)
        if self.gru is None:
            return z, None
        out, h1 = self.gru(z.unsqueeze(0), h.unsqueeze(0))
        return out[0], h1[0]

    def features_seq(self, x: torch.Tensor, h0: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """Sequences: ``x [L, B, in]``, ``h0 [B, F]``, ``starts`` bool ``[L, B]`` (zero h before the step) -> ``[L, B, F]``."""
        z = self.encoder(x)
        if self.gru is None:
            return z
        h = h0
        outs = []
        for t in range(z.shape[0]):
            h = h * (~starts[t]).unsqueeze(-1).float()
            out, h1 = self.gru(z[t].unsqueeze(0), h.unsqueeze(0))
            h = h1[0]
            outs.append(out[0])
        return torch.stack(outs)

    def logits(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked logits ``[.., A]``: unavailable actions get -1e9."""
        return self.pi(features).masked_fill(~mask, NEG_INF)

    def value(self, c: torch.Tensor) -> torch.Tensor:
        return self.critic(c).squeeze(-1)


class ASNActorCritic(ActorCritic):
    """Action-semantics actor (ASN, Wang et al. 2020, "Action Semantics Network: Considering the Effects of
    Actions in Multiagent Systems", ICLR) with the same critic as :class:`ActorCritic`.

    The actions ``first_action + j`` (``j < n_entities``) each act on one entity (SMAC: attack enemy ``j``) whose
    features are the observation slice ``x[offset + j * feats : offset + (j + 1) * feats]``. The other actions'
    logits come from the MLP over the whole input, as in :class:`ActorCritic`: ``z = MLP(x) [.., F]``,
    ``logits[:first_action] = W z``. Each entity gets an embedding from one shared layer over its own features,
    ``e_j = act(W_e x_j + b_e) [.., F]``, and its action's logit is ``(Q z) . e_j`` (``Q [F, F]`` initialised at std
    0.01, like the policy head, so the first policy is near uniform). So the logit of attacking an enemy depends
    on that enemy's own features through a weight shared over enemies, rather than on a separate output unit per
    enemy slot. Features handed to :meth:`logits` are ``[.., F + n_entities * F]`` (``z`` then every ``e_j``).
    No comm module (the agent refuses one with ``actor: asn``).

    With ``recurrent=True`` a GRU follows the encoder as in :class:`ActorCritic` (``z`` is the GRU's output, the
    recurrent state ``h [B, F]``), so both the move logits and the query ``Q z`` of the attack logits carry memory;
    the entity embeddings stay feed-forward (they read the current observation).

    With ``frames > 1`` the input holds ``frames`` stacked observations of width ``frame_dim`` each (newest first,
    then any agent id and inbox); entity ``j``'s features are then its slice from every frame, concatenated
    (``[.., frames * feats]``), so its embedding sees how that entity changed (an enemy losing health is one being
    shot at).

    Raises:
        ValueError: ``first_action + n_entities != num_actions`` or the entity slice does not fit ``in_dim``.
    """

    def __init__(self, in_dim: int, critic_dim: int, num_actions: int, hidden: list[int], activation: str, *,
                 first_action: int, n_entities: int, offset: int, feats: int, frames: int = 1, frame_dim: int = 0,
                 recurrent: bool = False, critic_hidden: list[int] | None = None):
        super().__init__(in_dim, critic_dim, num_actions, hidden, activation, recurrent=recurrent,
                         critic_hidden=critic_hidden)
        frame_dim = frame_dim if frames > 1 else in_dim
        if first_action + n_entities != num_actions or first_action < 1 or n_entities < 1:
            raise ValueError(f"ASN needs first_action + n_entities == num_actions ({first_action} + {n_entities} "
                             f"!= {num_actions})")
        if offset < 0 or feats < 1 or offset + n_entities * feats > frame_dim or frames * frame_dim > in_dim:
            raise ValueError(f"entity features [{offset}, {offset + n_entities * feats}) do not fit frames of width "
                             f"{frame_dim} ({frames} of them in an input of width {in_dim})")
        act = nn.Tanh if activation == "tanh" else nn.ReLU
        self.first_action, self.n_entities, self.offset, self.feats = first_action, n_entities, offset, feats
        self.frames, self.frame_dim = int(frames), int(frame_dim)
        self.pi = _layer(self.feature_dim, first_action, 0.01)
        self.entity = _mlp(feats * self.frames, [hidden[-1]], act)  # one layer: it runs once per entity, the encoder once
        self.q = _layer(self.feature_dim, self.feature_dim, 0.01)

    def _entities(self, x: torch.Tensor) -> torch.Tensor:
        n, w = self.n_entities, self.feats
        if self.frames == 1:  # the common case: a view of the one frame, no copy
            return self.entity(x[..., self.offset:self.offset + n * w].reshape(*x.shape[:-1], n, w)).flatten(-2)
        ent = torch.cat([x[..., f * self.frame_dim + self.offset:f * self.frame_dim + self.offset + n * w]
                         .reshape(*x.shape[:-1], n, w) for f in range(self.frames)], dim=-1)
        return self.entity(ent).flatten(-2)

    def features(self, x: torch.Tensor, h: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        z, h1 = super().features(x, h)
        return torch.cat([z, self._entities(x)], dim=-1), h1

    def features_seq(self, x: torch.Tensor, h0: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        return torch.cat([super().features_seq(x, h0, starts), self._entities(x)], dim=-1)

    def logits(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        F = self.feature_dim
        z = features[..., :F]
        e = features[..., F:].reshape(*features.shape[:-1], self.n_entities, F)
        per_entity = (self.q(z).unsqueeze(-2) * e).sum(-1)
        return torch.cat([self.pi(z), per_entity], dim=-1).masked_fill(~mask, NEG_INF)


class ValueNorm(nn.Module):
    """Running mean/variance of value targets (parallel Welford, Chan et al. 1979), as buffers.

    The critic predicts normalised values; ``denormalize`` maps them back for GAE. Used by MAPPO
    (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games").
    """

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().double().reshape(-1)
        if x.numel() == 0:
            return
        bm, bv, bc = x.mean(), x.var(unbiased=False), float(x.numel())
        if self.count == 0:
            self.mean.copy_(bm)
            self.var.copy_(bv)
            self.count.fill_(bc)
            return
        delta = bm - self.mean
        tot = self.count + bc
        m2 = self.var * self.count + bv * bc + delta**2 * self.count * bc / tot
        self.mean.add_(delta * bc / tot)
        self.var.copy_(m2 / tot)
        self.count.copy_(tot)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return ((x.double() - self.mean) / torch.sqrt(self.var + self.eps)).float()

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x.double() * torch.sqrt(self.var + self.eps) + self.mean).float()
