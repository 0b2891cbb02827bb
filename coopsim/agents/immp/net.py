"""IMMP low-level actor-critic: local window + waypoint features, with an optional neighbour-intent module.

Input ``x`` per agent (float32, widths for ``S = 2R + 1`` and ``F_w`` waypoint features)::

    [ window 3*S*S | previous agent channel, aligned, S*S | waypoint features F_w ]

Actor: with the intent module, ``logits_int = IntentNet([window, previous agents])`` ``[5, S, S]`` (with
``intent_last_move``, plus the neighbours' last moves derived from those two channels) and the
expected next occupancy ``occ [S, S]`` they imply are computed first; the encoder MLP reads ``[x | occ]``
(so the predictions feed the policy, and the PPO gradient reaches the intent module too).

``features = [z | pref | valid | risk | logits_int]`` (the last two only with the module): the policy reads
the first ``policy_dim`` columns, the intent loss reads the logits.

* ``pref [5]``: the high level's one-hot steepest-descent action (waypoint features ``[5:10]``);
* ``valid [5]``: 1 where the move's target cell is free of obstacles in the agent's own window (wait always
  1): moves into obstacles or off the map are masked, as the scenario would turn them into waits anyway;
* ``risk [5]`` (intent module only): the predicted chance that the move is blocked by a neighbour at the
  next step, ``occ[target] + P(the neighbour on the target moves into my cell)`` (vertex and swap conflict
  of the MG-MAPF blocking rules), computed from the intent predictions (no gradient); 0 for wait.

Action logits: ``W z + b + g * pref - g_r * risk``, masked by ``valid`` and the scenario's mask, with learned
gains ``g`` (initialised to ``pref_gain``) and ``g_r`` (``risk_gain``, intent module only). The ``pref``
path makes the untrained policy a waypoint follower, so PPO learns when to deviate (wait, sidestep) rather
than the route itself (every variant, baseline included, has it); the ``risk`` path is IMMP's decentralized
use of predicted neighbour moves at decision time (the IMMP low level resolves conflicts in real time with
the predicted intents of its neighbours): a move into a cell a neighbour is predicted to keep or enter is
discouraged before it is blocked, so the agent sidesteps or waits instead of wasting the step.
Critic: a separate MLP on ``x`` (decentralized, IPPO style; it never sees other agents' inputs).
"""
from __future__ import annotations

import torch
from torch import nn

from coopsim.agents.ppo.networks import NEG_INF, _layer, _mlp

from .intent import MOVES, IntentNet, expected_occupancy

#: opposite move of each move (wait, up, down, left, right)
OPPOSITE = (0, 2, 1, 4, 3)


def target_cells(s: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column indices (int64 ``[5]``) of each move's target cell in an ``S x S`` window centred on the agent."""
    r = s // 2
    return (torch.tensor([r + dy for dx, dy in MOVES]), torch.tensor([r + dx for dx, dy in MOVES]))


def move_risk(agents: torch.Tensor, logits: torch.Tensor, occ: torch.Tensor | None = None) -> torch.Tensor:
    """float32 ``[B, 5]``: predicted chance that each own move is blocked by a neighbour (0 for wait).

    ``risk_m = occ[c_m] + agents[c_m] * p(opposite(m) | c_m)`` with ``c_m`` the move's target cell, ``occ``
    the expected next occupancy (:func:`.intent.expected_occupancy`) and ``p`` the softmax of the intent
    logits ``[B, 5, S, S]`` at ``c_m`` (the swap case: that neighbour moves into my cell). ``agents`` is
    ``[B, S, S]``; ``occ`` ``[B, S, S]`` may be passed if already computed.
    """
    s = agents.shape[-1]
    rows, cols = target_cells(s)
    occ = (expected_occupancy(agents, logits) if occ is None else occ)[:, rows, cols]   # [B, 5]
    p = torch.softmax(logits, 1)[:, :, rows, cols]                                 # [B, 5 moves, 5 cells]
    swap = agents[:, rows, cols] * p[:, torch.tensor(OPPOSITE), torch.arange(5)]   # [B, 5]
    risk = occ + swap
    risk[:, 0] = 0.0
    return risk


class IMMPNet(nn.Module):
    """See the module docstring. Interface of :class:`coopsim.agents.ppo.networks.ActorCritic` (feed-forward).

    Args:
        window: S; waypoint_dim: F_w; num_actions: 5; hidden: MLP widths; activation: 'tanh' or 'relu';
        intent: build the intent module; intent_channels: its conv width; pref_gain, risk_gain: initial gains;
        intent_last_move: the intent module also reads each neighbour's last move (:func:`.intent.last_moves`);
        intent_depth: its number of 3x3 conv layers.
    """

    recurrent = False
    gru = None

    def __init__(self, window: int, waypoint_dim: int, num_actions: int, hidden: list[int], activation: str,
                 intent: bool, intent_channels: int = 16, pref_gain: float = 2.0, risk_gain: float = 3.0,
                 intent_last_move: bool = False, intent_depth: int = 2):
        super().__init__()
        act = nn.Tanh if activation == "tanh" else nn.ReLU
        s = self.s = int(window)
        self.in_dim = 4 * s * s + int(waypoint_dim)
        self.intent = IntentNet(intent_channels, intent_last_move, intent_depth) if intent else None
        self.encoder = _mlp(self.in_dim + (s * s if intent else 0), hidden, act)
        self.z_dim = hidden[-1]
        self.policy_dim = self.z_dim + 2 * num_actions + (num_actions if intent else 0)
        self.feature_dim = self.policy_dim + (5 * s * s if intent else 0)
        self.pi = _layer(self.z_dim, num_actions, 0.01)
        self.pref_gain = nn.Parameter(torch.tensor(float(pref_gain)))
        if intent:
            self.risk_gain = nn.Parameter(torch.tensor(float(risk_gain)))
        self.critic = nn.Sequential(_mlp(self.in_dim, hidden, act), _layer(hidden[-1], 1, 1.0))
        self._rows, self._cols = target_cells(s)
        #: float32 ``[B]`` or None: per-agent inertia weight added to the intent logits at decision time
        #: (:class:`.intent.InertiaCalibration`; set by the agent around a decision, never during training)
        self.inertia: torch.Tensor | None = None

    def intent_logits(self, x: torch.Tensor) -> torch.Tensor:
        """float32 ``[B, 5, S, S]`` neighbour move logits (requires the intent module), with :attr:`inertia`
        applied when it is set for this batch."""
        s = self.s
        if self.inertia is not None and len(self.inertia) != len(x):
            raise ValueError(f"inertia has {len(self.inertia)} rows for a batch of {len(x)}")
        return self.intent(x[:, :4 * s * s].reshape(-1, 4, s, s), self.inertia)

    def features(self, x: torch.Tensor, h: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        """``x [B, in_dim]`` -> features ``[B, feature_dim]`` (see the module docstring), no recurrent state."""
        s = self.s
        pref = x[:, 4 * s * s + 5:4 * s * s + 10]
        valid = 1.0 - x[:, :s * s].reshape(-1, s, s)[:, self._rows, self._cols]
        valid[:, 0] = 1.0
        if self.intent is None:
            return torch.cat([self.encoder(x), pref, valid], dim=-1), None
        lg = self.intent_logits(x)
        agents = x[:, s * s:2 * s * s].reshape(-1, s, s)
        occ = expected_occupancy(agents, lg)
        z = self.encoder(torch.cat([x, occ.reshape(-1, s * s)], dim=-1))
        with torch.no_grad():
            risk = move_risk(agents, lg.detach(), occ.detach())
        return torch.cat([z, pref, valid, risk, lg.reshape(len(x), -1)], dim=-1), None

    def features_seq(self, x, h0, starts):  # pragma: no cover - not recurrent
        raise NotImplementedError("IMMPNet is feed-forward")

    def logits(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked action logits ``[B, 5]`` from the policy part of the features."""
        z0 = self.z_dim
        z, pref, valid = features[:, :z0], features[:, z0:z0 + 5], features[:, z0 + 5:z0 + 10] > 0.5
        out = self.pi(z) + self.pref_gain * pref
        if self.intent is not None:
            out = out - self.risk_gain * features[:, z0 + 10:z0 + 15]
        return out.masked_fill(~(mask & valid), NEG_INF)

    def value(self, c: torch.Tensor) -> torch.Tensor:
        return self.critic(c).squeeze(-1)
