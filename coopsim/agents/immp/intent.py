"""Neighbour intent prediction: labels from consecutive local observations, the predictor, its loss.

Labels need no privileged information: an agent infers each visible neighbour's move from its own two
consecutive windows. Under the MG-MAPF blocking rules no two agents share a cell and every agent moves at
most one cell, so a neighbour at cell ``c`` (at step t) is at step t+1 in one of the five cells
``c + delta_m`` (m = wait, up, down, left, right). With the t+1 window shifted back into the frame of step
t (the agent's own displacement ``d`` is read from its goal vectors: ``goal_vec_t - goal_vec_{t+1}``), the
neighbour's move is known exactly when ``c`` and its four neighbours lie inside both windows (the t+1
window is shifted by the agent's own move) and *exactly one* of the five candidate cells is occupied at t+1 (the agent itself is never in the agent channel).
Every other neighbour cell is unlabeled (ignored by the loss and the accuracy).

The predictor is a small convolutional net on the window (obstacles, agents, own goals) plus the previous
step's agent channel aligned to the current frame (and, with ``last_move``, each neighbour's identified last
move, :func:`last_moves`); it outputs 5 move logits per cell ``[5, S, S]``, read at the cells holding a
neighbour.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from coopsim.platform.hooks import AuxiliaryLoss, HookContext, Minibatch, check_number

#: (dx, dy) per move: wait, up, down, left, right
MOVES = ((0, 0), (0, -1), (0, 1), (-1, 0), (1, 0))
IGNORE = -100


def shift(x: torch.Tensor, dx: int, dy: int) -> torch.Tensor:
    """``out[..., i, j] = x[..., i + dy, j + dx]`` (zero outside): the value at the cell offset by (dx, dy)."""
    s = x.shape[-1]
    p = F.pad(x, (1, 1, 1, 1))
    return p[..., 1 + dy:1 + dy + s, 1 + dx:1 + dx + s]


def shift_per_sample(x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """``x [B, S, S]`` shifted per sample by ``d`` int ``[B, 2]`` in {-1, 0, 1}^2 (see :func:`shift`): one gather."""
    b, s, _ = x.shape
    p = F.pad(x, (1, 1, 1, 1))
    ar = torch.arange(s)
    rows = (ar[None, :] + 1 + d[:, 1:2]).reshape(b, s, 1)
    cols = (ar[None, :] + 1 + d[:, 0:1]).reshape(b, 1, s)
    return p[torch.arange(b)[:, None, None], rows, cols]


def move_labels(agents_t: torch.Tensor, agents_t1: torch.Tensor, own_d: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Neighbour moves between two windows, per cell of the step-t window.

    Args:
        agents_t: float ``[B, S, S]`` agent channel at step t (1 = another agent there).
        agents_t1: float ``[B, S, S]`` agent channel at step t+1 (in the t+1 frame).
        own_d: int64 ``[B, 2]`` own displacement (dx, dy) from t to t+1, in {-1, 0, 1}.
        valid: bool ``[B]`` samples whose displacement is known.

    Returns:
        int64 ``[B, S, S]``: move 0..4 of the neighbour at each cell, ``IGNORE`` (-100) where there is no
        neighbour or its move is ambiguous / not visible.
    """
    b, s, _ = agents_t.shape
    o1 = shift_per_sample(agents_t1, -own_d)                         # t+1 occupancy in the t frame
    cand = torch.stack([shift(o1, dx, dy) for dx, dy in MOVES], 1)   # [B, 5, S, S]: occupied c + delta_m
    occ = cand > 0.5
    n_occ = occ.sum(1)
    lab = (occ * torch.arange(5).view(1, 5, 1, 1)).sum(1)             # the occupied move where n_occ == 1
    # every candidate cell must be seen in both windows (the t+1 window is shifted by the own move)
    seen1 = shift_per_sample(torch.ones_like(agents_t1), -own_d) > 0.5  # t-frame cells inside the t+1 window
    seen_all = torch.stack([shift(seen1.float(), dx, dy) for dx, dy in MOVES], 1).min(1).values > 0.5
    interior = torch.zeros(s, s, dtype=torch.bool)
    interior[1:-1, 1:-1] = True
    ok = (agents_t > 0.5) & (n_occ == 1) & interior & seen_all & valid[:, None, None]
    return torch.where(ok, lab, torch.full_like(lab, IGNORE))


def split_obs(obs: torch.Tensor, k: int, s: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flattened MG-MAPF observation ``[B, 4K + 3S^2]`` -> goal_status ``[B, K, 2]``, goal_vec ``[B, K, 2]``,
    window ``[B, 3, S, S]`` (Dict-space key order)."""
    gs = obs[:, :2 * k].reshape(-1, k, 2)
    gv = obs[:, 2 * k:4 * k].reshape(-1, k, 2)
    win = obs[:, 4 * k:4 * k + 3 * s * s].reshape(-1, 3, s, s)
    return gs, gv, win


def own_displacement(obs: torch.Tensor, next_obs: torch.Tensor, k: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 ``[B, 2]`` own move (dx, dy) from the goal vectors, and bool ``[B]`` whether it is known
    (some goal still remaining after the step)."""
    _, gv0, _ = split_obs(obs, k, s)
    gs1, gv1, _ = split_obs(next_obs, k, s)
    rem = gs1[..., 0] > 0.5                                          # [B, K]
    d = (gv0 - gv1)                                                  # [B, K, 2]
    idx = rem.float().argmax(1)
    dd = d[torch.arange(len(d)), idx].round().long()
    valid = rem.any(1) & (dd.abs() <= 1).all(1)
    return dd.clamp(-1, 1), valid


def last_moves(prev: torch.Tensor, agents: torch.Tensor) -> torch.Tensor:
    """Each visible neighbour's last move, one-hot at the cell it holds now.

    Args:
        prev: float ``[B, S, S]`` the previous step's agent channel, already aligned to the current frame.
        agents: float ``[B, S, S]`` the current agent channel.

    Returns:
        float32 ``[B, 5, S, S]``: ``out[:, m, q] = 1`` where the neighbour now at ``q`` made move ``m``
        (wait, up, down, left, right) in the last step, identified as in :func:`move_labels` (the neighbour's
        previous cell and its four neighbours visible, exactly one candidate occupied now); all zero where the
        move is not identifiable. These are the facts a "repeats its last move" predictor uses.
    """
    lab = move_labels(prev, agents, torch.zeros(len(prev), 2, dtype=torch.long),
                      torch.ones(len(prev), dtype=torch.bool))                  # at the cell left, frame t
    onehot = torch.stack([(lab == m).float() for m in range(5)], 1)          # [B, 5, S, S]
    return torch.stack([shift(onehot[:, m], -dx, -dy) for m, (dx, dy) in enumerate(MOVES)], 1)


class IntentNet(nn.Module):
    """Per-cell neighbour move logits ``[B, 5, S, S]`` from ``[B, 4, S, S]`` (window + previous agent channel):
    ``depth`` 3x3 conv layers of ``channels`` (ReLU; receptive field ``2 * depth + 1`` cells) and a 1x1 output.

    With ``last_move`` the input gains the five channels of :func:`last_moves` (computed here from the agent
    and previous-agent channels, so the caller's input is unchanged): the module sees each neighbour's last
    move explicitly, which a 2-layer 3x3 net otherwise has to infer from two occupancy maps.
    """

    def __init__(self, channels: int = 16, last_move: bool = False, depth: int = 2):
        super().__init__()
        if int(depth) < 1:
            raise ValueError(f"depth must be >= 1 (3x3 conv layers); got {depth}")
        self.last_move, self.depth = bool(last_move), int(depth)
        layers: list[nn.Module] = [nn.Conv2d(9 if last_move else 4, channels, 3, padding=1), nn.ReLU()]
        for _ in range(self.depth - 1):
            layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU()]
        self.body = nn.Sequential(*layers, nn.Conv2d(channels, 5, 1))

    def forward(self, x: torch.Tensor, inertia: torch.Tensor | None = None) -> torch.Tensor:
        """``x [B, 4, S, S]`` -> logits ``[B, 5, S, S]``; ``inertia`` float ``[B]`` (optional) adds
        ``inertia * onehot(last move)`` at each neighbour whose last move is known (:class:`InertiaCalibration`)."""
        lm = last_moves(x[:, 3], x[:, 1]) if (self.last_move or inertia is not None) else None
        out = self.body(torch.cat([x, lm], 1) if self.last_move else x)
        if inertia is not None:
            out = out + inertia[:, None, None, None] * lm
        return out

    def with_last_move(self) -> "IntentNet":
        """A copy that also reads :func:`last_moves`, computing exactly what this module computes until trained
        (the new input channels' first-layer weights are zero)."""
        out = IntentNet(self.body[0].out_channels, last_move=True, depth=self.depth)
        with torch.no_grad():
            out.load_state_dict({k: v for k, v in self.state_dict().items() if k != "body.0.weight"}, strict=False)
            out.body[0].weight.zero_()
            out.body[0].weight[:, :self.body[0].in_channels] = self.body[0].weight
        return out


class InertiaCalibration:
    """Online, per-agent calibration of the intent module's trust in "the neighbour keeps its last move".

    How much a neighbour's last move predicts its next one depends on the map (long aisles: often; cluttered
    maps: rarely), which a module trained on generated maps cannot know. Each agent therefore keeps one scalar
    ``beta`` and predicts with ``logits + beta * onehot(last move)`` (a product of the module's distribution
    and an inertia expert, at the neighbours whose last move it has identified; others are unchanged). After
    every step it takes one online gradient step on the cross-entropy of its previous predictions against the
    moves it then saw its neighbours make (the same self-supervised labels as training,
    :func:`move_labels`; no privileged information, nothing shared)::

        beta <- clip(beta - lr * sum_j (p_j(last_j) - [y_j == last_j]), -bound, bound)

    over the neighbours ``j`` with a known last move and an identifiable next move; ``p_j`` is the calibrated
    softmax at ``j``'s cell. ``beta`` starts at 0 (the module as trained) in every episode. This is online
    logistic regression on one feature (Zinkevich 2003, online gradient descent; a test-time adaptation of the
    module's output layer). Vectorized over agents and envs; float32 tensors ``[B]`` with ``B = E * N``.

    Args:
        lr: step size, > 0 (per labelled neighbour-step).
        bound: ``|beta|`` limit, > 0.
    """

    def __init__(self, lr: float, bound: float = 5.0):
        if lr <= 0 or bound <= 0:
            raise ValueError(f"lr and bound must be > 0; got lr={lr}, bound={bound}")
        self.lr, self.bound = float(lr), float(bound)
        self.reset()

    def reset(self) -> None:
        self.beta: torch.Tensor | None = None
        self._prev = None

    def step(self, x4: torch.Tensor, xy: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        """Learn from the moves seen since the last call, then return ``beta`` float32 ``[B]`` for this step.

        Args:
            x4: float ``[B, 4, S, S]`` this step's intent input (window channels + previous agent channel).
            xy: int64 ``[B, 2]`` each agent's own cell (x, y) now.
            fresh: bool ``[B]`` agents whose episode just started (beta back to 0, nothing learned).
        """
        b = len(x4)
        if self.beta is None or len(self.beta) != b:
            self.beta, self._prev = torch.zeros(b), None
        if self._prev is not None:
            agents0, xy0, raw0, lm0 = self._prev
            d = (xy - xy0).clamp(-1, 1)
            ok = ~fresh & ((xy - xy0).abs() <= 1).all(1)
            lab = move_labels(agents0, x4[:, 1], d, ok)                              # [B, S, S]
            known = lm0.sum(1) > 0.5                                                 # last move identified
            use = (lab != IGNORE) & known
            p = torch.softmax(raw0 + self.beta[:, None, None, None] * lm0, 1)
            p_last = (p * lm0).sum(1)                                                # [B, S, S]
            hit = torch.gather(lm0, 1, lab.clamp(min=0)[:, None]).squeeze(1)         # 1 where y == last
            grad = torch.where(use, p_last - hit, torch.zeros_like(p_last)).sum((1, 2))
            self.beta = (self.beta - self.lr * grad).clamp(-self.bound, self.bound)
        self.beta = torch.where(fresh, torch.zeros_like(self.beta), self.beta)
        return self.beta

    def remember(self, x4: torch.Tensor, xy: torch.Tensor, logits: torch.Tensor) -> None:
        """Keep this step's input and calibrated logits ``[B, 5, S, S]`` (made with :meth:`step`'s beta)."""
        lm = last_moves(x4[:, 3], x4[:, 1])
        raw = logits - self.beta[:, None, None, None] * lm
        self._prev = (x4[:, 1].clone(), xy.clone(), raw, lm)


def expected_occupancy(agents: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """float ``[B, S, S]``: expected number of neighbours in each cell at the next step,
    ``sum_c agents[c] * p(m | c) * [c + delta_m = q]`` (moves out of the window are dropped)."""
    p = torch.softmax(logits, 1) * agents[:, None]
    out = torch.zeros_like(agents)
    for m, (dx, dy) in enumerate(MOVES):
        out = out + shift(p[:, m], -dx, -dy)
    return out


class IntentLoss(nn.Module, AuxiliaryLoss):
    """Auxiliary loss of prediction-guided collaborative PPO: cross-entropy of the intent logits (carried in
    the policy features by :class:`coopsim.agents.immp.net.IMMPNet`) against the neighbours' actual moves,
    labelled from each minibatch sample's observation and next observation (:func:`move_labels`).

    Args:
        coef: weight in the PPO loss, finite, >= 0 (else ValueError).
        num_goals: K of the scenario (observation layout).
        window: S = 2R + 1.
        policy_dim: width of the policy part of the features (the intent logits follow it).
    """

    def __init__(self, coef: float, num_goals: int, window: int, policy_dim: int):
        nn.Module.__init__(self)
        self.coef = check_number("coef", coef, ge=0)
        self.k, self.s, self.policy_dim = int(num_goals), int(window), int(policy_dim)

    def setup(self, ctx: HookContext) -> None:
        return None

    def loss(self, mb: Minibatch, features: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        s = self.s
        logits = features[:, self.policy_dim:].reshape(-1, 5, s, s)
        _, _, w0 = split_obs(mb.obs, self.k, s)
        _, _, w1 = split_obs(mb.next_obs, self.k, s)
        d, valid = own_displacement(mb.obs, mb.next_obs, self.k, s)
        lab = move_labels(w0[:, 1], w1[:, 1], d, valid & mb.alive)
        n = (lab != IGNORE).sum()
        if int(n) == 0:
            return features.sum() * 0.0, {"labels": 0.0}
        ce = F.cross_entropy(logits, lab, ignore_index=IGNORE, reduction="sum") / n
        with torch.no_grad():
            lg = logits.detach()
            picked = lg.gather(1, lab.clamp(min=0)[:, None])[:, 0]
            acc = ((picked >= lg.max(1).values) & (lab != IGNORE)).sum().float() / n
        return ce, {"accuracy": float(acc), "labels": float(n)}
