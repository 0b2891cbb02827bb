"""The MPE tasks: simple_spread, simple_reference and simple_speaker_listener (batched cores).

Each reproduces the ``mpe2`` task of the same name step for step (same actions, observations and
rewards within 1e-6 from the same initial state; see ``tests/mpe/test_vs_mpe2.py``).
"""
from __future__ import annotations

from typing import Optional

import gymnasium
import numpy as np
from pydantic import Field

from coopsim.scenarios.mpe.core import MPECore, MPEParams


class SimpleSpreadParams(MPEParams):
    num_agents: int = Field(3, ge=2, le=64, description="agents and landmarks (N), 2..64")
    local_ratio: float = Field(0.5, ge=0, le=1, description="weight of the local (collision) reward, in [0, 1]")
    obs_radius_m: Optional[float] = Field(None, gt=0, description="partial observation: landmarks and agents "
                                          "farther than this (m) read as 0 with visibility flag 0; None = full")


class SimpleSpreadCore(MPECore):
    """simple_spread: N agents cover N landmarks while avoiding collisions.

    Description:
        N agents (radius 0.15 m, colliding) and N landmarks (not colliding) start uniformly in
        [-1, 1]^2 m. Agents are silent. Matches ``mpe2.simple_spread_v3`` (discrete actions).

    Observation (float32, per agent; ``N`` agents):

        ===================== ================================================ ====== =====
        index                 meaning                                          range  unit
        ===================== ================================================ ====== =====
        0:2                   own velocity                                     R      m/s
        2:4                   own position                                     R      m
        4:4+2N                landmark positions relative to self              R      m
        4+2N:2+4N             other agents' positions relative to self         R      m
        2+4N:6N               other agents' utterances (always 0: silent)      0      --
        6N:8N-1 (partial obs) N landmark + N-1 agent visibility flags           {0,1}  --
        ===================== ================================================ ====== =====

    Action (Discrete 5): 0 no-op, 1 -x, 2 +x, 3 -y, 4 +y (force 5 units along the axis).

    Reward (each agent): ``(1 - local_ratio) * global + local_ratio * local`` with
    ``global = -sum_l min_a |p_a - p_l|`` (m) and ``local = -(number of other agents within 0.3 m)``;
    logged as ``reward/global`` and ``reward/collision``.

    Episode end: truncation after ``max_steps`` (25); no termination.

    Arguments: ``num_agents`` (N), ``local_ratio``, ``max_steps``, ``obs_radius_m``, ``comm_channel``.

    Version history: v0 -- initial version (mpe2 simple_spread_v3 dynamics).
    """

    Params = SimpleSpreadParams
    metadata = {"name": "mpe_simple_spread_v0", "render_modes": [], "is_parallelizable": True}

    def _build(self):
        p = self.params
        N = p.num_agents
        self.n_agents = self.n_landmarks = N
        self.agent_ids = tuple(f"agent_{i}" for i in range(N))
        self.sizes = np.r_[np.full(N, 0.15), np.full(N, 0.05)]
        self.collide = np.r_[np.ones(N, bool), np.zeros(N, bool)]
        self.movable = np.r_[np.ones(N, bool), np.zeros(N, bool)]
        self.silent = np.ones(N, bool)
        self.dim_c = 2
        self.action_space = gymnasium.spaces.Discrete(5)

    def _reset_env(self, e, rng):
        N = self.n_agents
        self.pos[e, :N] = rng.uniform(-1, 1, (N, 2))
        self.pos[e, N:] = rng.uniform(-1, 1, (N, 2))

    def _decode(self, a):
        return a % 5, np.full_like(a, -1)

    def _obs(self):
        E, N = self.num_envs, self.n_agents
        ap, lp = self.pos[:, :N], self.pos[:, N:]
        rel_l = lp[:, None, :, :] - ap[:, :, None, :]  # [E, N, L, 2]
        rel_a = ap[:, None, :, :] - ap[:, :, None, :]  # [E, N, N, 2]
        others = ~np.eye(N, dtype=bool)
        rel_o = rel_a[:, others].reshape(E, N, N - 1, 2)
        parts = [self.vel[:, :N], ap]  # 2 + 2
        r = self.params.obs_radius_m
        if r is not None:
            see_l = np.linalg.norm(rel_l, axis=-1) <= r
            see_o = np.linalg.norm(rel_o, axis=-1) <= r
            rel_l = rel_l * see_l[..., None]
            rel_o = rel_o * see_o[..., None]
        parts += [rel_l.reshape(E, N, -1), rel_o.reshape(E, N, -1)]  # 2N + 2(N-1)
        parts.append(self.heard[:, others].reshape(E, N, -1))  # 2(N-1) utterances (zeros: silent)
        if r is not None:
            parts += [see_l.astype(np.float64), see_o.astype(np.float64)]  # N + N-1 flags
        return np.concatenate(parts, axis=-1).astype(np.float32)

    def _reward(self):
        N = self.n_agents
        ap, lp = self.pos[:, :N], self.pos[:, N:]
        d = np.sqrt(np.sum(np.square(ap[:, :, None, :] - lp[:, None, :, :]), axis=-1))  # [E, A, L]
        glob = -d.min(axis=1).sum(axis=1)  # [E]
        da = np.sqrt(np.sum(np.square(ap[:, :, None, :] - ap[:, None, :, :]), axis=-1))
        coll = (da < 0.3) & ~np.eye(N, dtype=bool)[None]
        local = -coll.sum(axis=2).astype(np.float64)
        lr = self.params.local_ratio
        rew = glob[:, None] * (1 - lr) + local * lr
        return rew, {"reward/global": np.broadcast_to(glob[:, None] * (1 - lr), rew.shape),
                     "reward/collision": local * lr}

    def episode_metrics(self):
        N = self.n_agents
        ap, lp = self.pos[:, :N], self.pos[:, N:]
        d = np.sqrt(np.sum(np.square(ap[:, :, None, :] - lp[:, None, :, :]), axis=-1)).min(axis=1)
        return [{"mpe/return": float(self._return[e]), "mpe/final_cover_dist_m": float(d[e].sum()),
                 "mpe/occupied_landmarks": float((d[e] < 0.1).sum())} for e in range(self.num_envs)]


class SimpleReferenceParams(MPEParams):
    local_ratio: float = Field(0.5, ge=0, le=1, description="weight of the local reward, in [0, 1]")


LANDMARK_COLORS_REF = np.array([[0.75, 0.25, 0.25], [0.25, 0.75, 0.25], [0.25, 0.25, 0.75]])
LANDMARK_COLORS_SL = np.array([[0.65, 0.15, 0.15], [0.15, 0.65, 0.15], [0.15, 0.15, 0.65]])


class SimpleReferenceCore(MPECore):
    """simple_reference: two agents each know the other's goal landmark and must tell it.

    Description:
        2 agents, 3 landmarks (colours red, green, blue), no collisions. Agent i's goal ``g_i`` is a
        landmark that agent ``1 - i`` must reach; agent i sees ``g_i``'s colour and speaks one of 10
        words per step. Matches ``mpe2.simple_reference_v3`` (discrete actions).

    Observation (float32 ``[21]``): 0:2 own velocity (m/s); 2:8 landmark positions relative to self
    (m); 8:11 colour of own goal landmark ``g_i``; 11:21 the other agent's last utterance (one-hot).

    Action (Discrete 50): ``a % 5`` movement (0 no-op, 1 -x, 2 +x, 3 -y, 4 +y), ``a // 5`` word (0..9).

    Reward: local ``r_i = -|p_{1-i} - p_{g_i}|`` (m), global = mean of the two;
    ``(1 - local_ratio) * global + local_ratio * r_i``.

    Episode end: truncation after ``max_steps`` (25).

    Arguments: ``local_ratio``, ``max_steps``, ``comm_channel``.

    Version history: v0 -- initial version (mpe2 simple_reference_v3 dynamics).
    """

    Params = SimpleReferenceParams
    metadata = {"name": "mpe_simple_reference_v0", "render_modes": [], "is_parallelizable": True}

    def _build(self):
        self.n_agents, self.n_landmarks = 2, 3
        self.agent_ids = ("agent_0", "agent_1")
        self.sizes = np.r_[np.full(2, 0.05), np.full(3, 0.05)]
        self.collide = np.zeros(5, bool)
        self.movable = np.r_[True, True, False, False, False]
        self.silent = np.zeros(2, bool)
        self.dim_c = 10
        self.goal = np.zeros((self.num_envs, 2), np.int64)
        self.action_space = gymnasium.spaces.Discrete(50)

    def _reset_env(self, e, rng):
        self.goal[e, 0] = rng.integers(3)
        self.goal[e, 1] = rng.integers(3)
        self.pos[e, :2] = rng.uniform(-1, 1, (2, 2))
        self.pos[e, 2:] = rng.uniform(-1, 1, (3, 2))

    def _set_extra(self, e, goal):
        self.goal[e] = goal

    def _decode(self, a):
        return a % 5, a // 5

    def _obs(self):
        E = self.num_envs
        ap, lp = self.pos[:, :2], self.pos[:, 2:]
        rel_l = (lp[:, None] - ap[:, :, None]).reshape(E, 2, 6)
        color = LANDMARK_COLORS_REF[self.goal]  # [E, 2, 3]
        other = self.heard[:, [0, 1], [1, 0]]  # agent 0 hears 1, agent 1 hears 0: [E, 2, 10]
        return np.concatenate([self.vel[:, :2], rel_l, color, other], axis=-1).astype(np.float32)  # 2+6+3+10

    def _reward(self):
        ap, lp = self.pos[:, :2], self.pos[:, 2:]
        E = self.num_envs
        goal_pos = lp[np.arange(E)[:, None], self.goal]  # [E, 2, 2]
        local = -np.sqrt(np.sum(np.square(ap[:, ::-1] - goal_pos), axis=-1))  # agent i's goal is for agent 1-i
        glob = local.mean(axis=1, keepdims=True)
        lr = self.params.local_ratio
        rew = glob * (1 - lr) + local * lr
        return rew, {"reward/distance": rew}


class SpeakerListenerParams(MPEParams):
    utterances: bool = Field(True, description="False: the speaker's words reach nobody (the listener's "
                             "observation 8:11 reads 0), so the goal reaches the listener only through a comm "
                             "module's messages (coopsim.agents.ddacom.train --task speaker_listener)")


class SimpleSpeakerListenerCore(MPECore):
    """simple_speaker_listener: a static speaker tells a listener which landmark to reach.

    Description:
        ``speaker_0`` (slot 0, immobile) sees the goal landmark's colour and says one of 3 words;
        ``listener_0`` (slot 1, silent) sees landmarks and the word and moves. Matches
        ``mpe2.simple_speaker_listener_v4`` (discrete actions). Both agents share one action space
        (Discrete 5) and one observation width (11): the speaker's actions 3 and 4 are masked
        (:meth:`action_masks`) and its observation is zero-padded.

    Observation (float32 ``[11]``): speaker: 0:3 goal colour, 3:11 zeros; listener: 0:2 own velocity
    (m/s), 2:8 landmark positions relative to self (m), 8:11 the speaker's utterance (one-hot).

    Action (Discrete 5): speaker: word 0..2; listener: 0 no-op, 1 -x, 2 +x, 3 -y, 4 +y.

    Reward (both): ``-|p_listener - p_goal|^2`` (m^2).

    Episode end: truncation after ``max_steps`` (25).

    Arguments: ``max_steps``, ``comm_channel``, ``utterances`` (False: the listener hears nothing through
    the task, its observation 8:11 reads 0; messages of a comm module are then its only way to the goal).

    Version history: v0 -- initial version (mpe2 simple_speaker_listener_v4 dynamics).
    """

    Params = SpeakerListenerParams
    metadata = {"name": "mpe_simple_speaker_listener_v0", "render_modes": [], "is_parallelizable": True}

    def _build(self):
        self.n_agents, self.n_landmarks = 2, 3
        self.agent_ids = ("speaker_0", "listener_0")
        self.sizes = np.r_[0.075, 0.075, np.full(3, 0.04)]
        self.collide = np.zeros(5, bool)
        self.movable = np.r_[False, True, False, False, False]
        self.silent = np.array([False, True])
        self.dim_c = 3
        self.goal = np.zeros(self.num_envs, np.int64)
        self.action_space = gymnasium.spaces.Discrete(5)

    def _reset_env(self, e, rng):
        self.goal[e] = rng.integers(3)
        self.pos[e, :2] = rng.uniform(-1, 1, (2, 2))
        self.pos[e, 2:] = rng.uniform(-1, 1, (3, 2))

    def _set_extra(self, e, goal):
        self.goal[e] = goal

    def _decode(self, a):
        return np.where(np.arange(2)[None] == 1, a, -1), np.where(np.arange(2)[None] == 0, a % 3, -1)

    def action_masks(self):
        m = super().action_masks()
        m[:, 0, 3:] = False
        return m

    def _obs(self):
        E = self.num_envs
        out = np.zeros((E, 2, 11))
        out[:, 0, :3] = LANDMARK_COLORS_SL[self.goal]
        lp = self.pos[:, 2:]
        out[:, 1, 0:2] = self.vel[:, 1]
        out[:, 1, 2:8] = (lp - self.pos[:, 1:2]).reshape(E, 6)
        if self.params.utterances:
            out[:, 1, 8:11] = self.heard[:, 1, 0]
        return out.astype(np.float32)

    def _reward(self):
        E = self.num_envs
        goal_pos = self.pos[np.arange(E), 2 + self.goal]
        d2 = np.sum(np.square(self.pos[:, 1] - goal_pos), axis=-1)
        rew = np.broadcast_to(-d2[:, None], (E, 2))
        return rew, {"reward/distance": rew}
