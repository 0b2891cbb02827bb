"""Vectorized Multi-Agent Particle Environment (MPE) physics shared by the MPE tasks.

Re-implements the world of MPE (Lowe et al., "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive
Environments", NeurIPS 2017; Farama's ``mpe2`` package) on arrays ``[E, M, 2]`` (envs x entities x
xy): discrete actions set a force of ``accel`` (5) along one axis; soft contact forces
``contact_force * delta / dist * k * log(1 + exp(-(dist - dist_min) / k))`` between colliding entities;
semi-implicit integration ``pos += vel dt; vel *= 1 - damping; vel += force / mass * dt`` with
``dt = 0.1`` s and damping 0.25. One MPE unit is one metre.

Communication: a speaking agent's utterance of step ``t`` (one-hot, ``dim_c`` wide) reaches the other
agents' observations returned by that step, as in MPE. With a channel attached
(:meth:`MPECore.attach_channel` or the ``comm_channel`` param) the utterances travel as a
:class:`~coopsim.platform.comm.MessageBatch` (payload = the one-hot row, ``float32 [dim_c]``):
``send(t)`` then ``deliver(t + 1)``; a receiver sees zeros for an utterance that did not arrive.
``ideal-v0`` reproduces MPE exactly. ``episode_metrics()`` then reports that channel's accounting of each
env's episode under the names a run's channel uses (``comm/{offered,delivered,lost,queued}_{copies,bytes}``,
``comm/lost_{copies,bytes}/<cause>``, ``comm/messages_sent``; see :meth:`MPECore.episode_metrics`).
"""
from __future__ import annotations

from abc import abstractmethod

from typing import Any, Optional

import gymnasium
import numpy as np
from pydantic import Field

from coopsim.platform.comm import BROADCAST, Channel, MessageBatch
from coopsim.platform.config import ComponentConfig
from coopsim.platform.scenario import (STEP_BEFORE_RESET, ScenarioCore, ScenarioParams, StepResult,
                                       discrete_joint_actions, reset_ids)

#: force direction of each discrete movement action: no-op, -x, +x, -y, +y
MOVES = np.array([[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])


class MPEParams(ScenarioParams):
    max_steps: int = Field(25, ge=1, le=1_000_000, description="episode length (steps of dt_s = 0.1 s), 1..1e6")
    comm_channel: Optional[ComponentConfig] = Field(
        None, description="channel for the task's own utterances: {'id': 'bandwidth-v0', 'params': {...}} (these two "
                          "keys only, as a run config's channel); None = direct (as MPE)")


class MPECore(ScenarioCore):
    """Batched MPE world; subclasses define entities, action decoding, observations and rewards.

    Subclass hooks: ``_build()`` sets ``n_agents``, ``n_landmarks``, ``sizes`` (float64 ``[M]``, m),
    ``collide`` (bool ``[M]``), ``movable`` (bool ``[M]``), ``silent`` (bool ``[N]``), ``dim_c``,
    ``action_space`` (``Discrete``, shared by all agents; ``step`` rejects actions outside it);
    ``_reset_env(e, rng)`` draws env ``e``'s initial state; ``_decode(a)`` returns movement index
    (int ``[E, N]``) and utterance index (int ``[E, N]``, -1 = silent); ``_obs()`` and ``_reward()``.
    """

    Params = MPEParams
    dt_s = 0.1
    damping = 0.25
    contact_force = 100.0
    contact_margin = 1e-3
    accel = 5.0

    def __init__(self, num_envs: int = 1, **params: Any):
        from coopsim.platform.registry import checked_params
        from coopsim.platform.scenario import check_num_envs
        num_envs = check_num_envs(num_envs)  # as make_scenario: 0, 2.5, True or '2' used to build a core
        self.params = checked_params(self.Params, params, type(self).__name__)
        self.num_envs = num_envs
        self._never_reset = True
        self._build()
        E, N, M = self.num_envs, self.n_agents, self.n_agents + self.n_landmarks
        self.mass = np.ones(M)
        self.pos = np.zeros((E, M, 2))
        self.vel = np.zeros((E, M, 2))
        self.c = np.zeros((E, N, max(self.dim_c, 1)))  # utterance state (one-hot), zeros when silent
        self.heard = np.zeros((E, N, N, max(self.dim_c, 1)))  # [receiver, sender] last utterance received
        self._t = np.zeros(E, np.int64)
        self._alive = np.zeros((E, N), bool)
        self._rngs = [self.env_rng(0, e) for e in range(E)]
        self._return = np.zeros(E)
        self._global_t = 0
        self._episode_start_t = np.zeros(E, np.int64)
        self.channel: Channel | None = None
        self._comm_base: dict[str, np.ndarray] | None = None  # per-env channel totals at each env's reset, [E]
        self._comm_messages = np.zeros(E, np.int64)  # utterances sent in each env's episode
        if self.params.comm_channel is not None:
            from coopsim.platform.registry import make_component

            from coopsim.errors import ConfigError

            cc = self.params.comm_channel
            try:
                channel = make_component("channel", cc.id, **cc.params)
            except ConfigError as exc:  # the channel names its own keys: address them inside comm_channel
                rel = exc.key.removeprefix("channel.params.") if exc.key else None
                key = f"comm_channel.params.{rel}" if rel and rel != "channel.id" else "comm_channel"
                raise ConfigError(exc.message, file=exc.file, key=key, value=exc.value, also=exc.also) from None
            self.attach_channel(channel)
        obs = self._obs()
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, shape=obs.shape[2:], dtype=np.float32)
        self.state_space = gymnasium.spaces.Box(-np.inf, np.inf, shape=(N * obs.shape[2],), dtype=np.float32)

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _build(self) -> None:
        """Create the task's entities (sizes, colours, counts)."""

    @abstractmethod
    def _reset_env(self, e: int, rng: np.random.Generator) -> None:
        """Draw env ``e``'s initial state from ``rng``."""

    @abstractmethod
    def _decode(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint discrete actions -> (movement forces, utterances)."""

    @abstractmethod
    def _obs(self) -> np.ndarray:
        """float32 ``[E, N, obs_dim]`` observations."""

    @abstractmethod
    def _reward(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """float32 ``[E, N]`` rewards and their named terms."""

    # ------------------------------------------------------------------ comm
    def attach_channel(self, channel: Channel | None) -> None:
        """Route the task's utterances through ``channel`` (None: directly, as MPE)."""
        self.channel = channel
        self._comm_base, self._comm_messages[:] = None, 0
        if channel is not None:
            channel.reset(0, num_envs=self.num_envs, num_agents=self.n_agents, dt_s=self.dt_s, scenario=self)
            self._global_t = 0

    def _comm_totals(self) -> dict[str, np.ndarray] | None:
        """The channel's run totals per env (int64 ``[E]`` per counter of ``per_copy()``), None without them."""
        pc = self.channel.per_copy() if self.channel is not None else None
        return None if pc is None else {k: v.sum(axis=(1, 2)) for k, v in pc.items()}

    def _comm_metrics(self) -> list[dict[str, float]]:
        """Per env, the channel's accounting of its episode (see :meth:`episode_metrics`)."""
        tot = self._comm_totals()
        if tot is None:  # a channel without per_copy(): its run totals since the last full reset, for every env
            s = self.channel.stats()
            return [dict(s) for _ in range(self.num_envs)]
        base = self._comm_base or {}
        out: list[dict[str, float]] = [{} for _ in range(self.num_envs)]
        for k, v in tot.items():
            if not k.startswith("queued"):  # flows: since the env's reset; queued: a stock, as it is now
                v = v - base[k] if k in base else v
            what, unit = k.rsplit("_", 1)
            name = f"comm/{what}_{unit}" if "/" not in what else f"comm/lost_{unit}/{what.split('/', 1)[1]}"
            for e in range(self.num_envs):
                out[e][name] = float(v[e])
        for e in range(self.num_envs):
            out[e]["comm/messages_sent"] = float(self._comm_messages[e])
        return out

    def _route_comm(self, speaking_env: np.ndarray) -> None:
        N = self.n_agents
        speak = ~self.silent[None, :] & speaking_env[:, None]  # [E, N]
        if self.channel is None:
            h = np.broadcast_to(self.c[:, None, :, :], self.heard.shape).copy()  # [E, recv, send, C]
            eye = np.eye(N, dtype=bool)[None, :, :, None]
            self.heard = np.where(eye, 0.0, h)
            return
        t = self._global_t
        env, src = np.nonzero(speak)
        self._comm_messages += np.bincount(env, minlength=self.num_envs)
        self.channel.send(t, MessageBatch(env.astype(np.int32), src.astype(np.int32),
                                          np.full(len(env), BROADCAST, np.int32),
                                          self.c[env, src].astype(np.float32), np.full(len(env), t * self.dt_s)))
        got = self.channel.deliver(t + 1)
        self.heard[speaking_env] = 0.0
        if len(got):
            fresh = np.round(got.t_sent_s / self.dt_s).astype(np.int64) >= self._episode_start_t[got.env]
            g = got.select(fresh)
            self.heard[g.env, g.dst, g.src] = g.payload

    # ------------------------------------------------------------------ ScenarioCore
    def reset(self, seed: int | None = None, env_ids: np.ndarray | None = None) -> np.ndarray:
        """Reset all envs (``env_ids`` None) or only ``env_ids``; returns the whole batch's observations.

        Raises:
            ValueError: an env id outside ``[0, num_envs)``.
        """
        ids = reset_ids(env_ids, self.num_envs)
        for e in ids:
            if seed is not None:
                self._rngs[e] = self.env_rng(seed, int(e))
            self.vel[e] = 0.0
            self._reset_env(int(e), self._rngs[e])
        self.c[ids] = 0.0
        self.heard[ids] = 0.0
        self._t[ids] = 0
        self._return[ids] = 0.0
        self._alive[ids] = True
        if env_ids is None and self.channel is not None:
            self.channel.reset(seed, num_envs=self.num_envs, num_agents=self.n_agents, dt_s=self.dt_s, scenario=self)
            self._global_t = 0
            self._comm_base = None
        elif self.channel is not None:  # the channel runs on: remember where these envs' new episodes start
            tot = self._comm_totals()
            if tot is not None:
                base = self._comm_base or {k: np.zeros(self.num_envs, np.int64) for k in tot}
                for k, v in tot.items():
                    base.setdefault(k, np.zeros(self.num_envs, np.int64))[ids] = v[ids]
                self._comm_base = base
        self._comm_messages[ids] = 0
        self._episode_start_t[ids] = self._global_t
        self._never_reset = False
        return self._obs()

    def _physics(self, move: np.ndarray, active: np.ndarray) -> None:
        N = self.n_agents
        force = np.zeros_like(self.pos)
        force[:, :N] = MOVES[np.maximum(move, 0)] * self.accel * (move >= 0)[..., None]
        col = np.flatnonzero(self.collide)
        if len(col) > 1:
            p = self.pos[:, col]
            delta = p[:, :, None, :] - p[:, None, :, :]  # [E, K, K, 2]
            dist = np.sqrt(np.sum(np.square(delta), axis=-1))
            dmin = self.sizes[col][:, None] + self.sizes[col][None, :]
            k = self.contact_margin
            pen = np.logaddexp(0, -(dist - dmin) / k) * k
            off = ~np.eye(len(col), dtype=bool)[None]
            with np.errstate(invalid="ignore", divide="ignore"):
                f = self.contact_force * delta / dist[..., None] * pen[..., None]
            f = np.where(off[..., None], f, 0.0)
            force[:, col] += f.sum(axis=2)
        mov = self.movable[None, :, None] & active[:, None, None]
        new_pos = self.pos + self.vel * self.dt_s
        new_vel = self.vel * (1 - self.damping) + force / self.mass[None, :, None] * self.dt_s
        self.pos = np.where(mov, new_pos, self.pos)
        self.vel = np.where(mov, new_vel, self.vel)

    def _check_actions(self, actions: Any) -> np.ndarray:
        """``actions`` as int64 ``[E, N]`` if it has that shape and holds integers (any integer dtype; bool and
        float arrays are refused) in ``0 .. action_space.n - 1``; every slot is checked, alive or not. Actions that are in
        the space but masked (the speaker's 3 and 4 in simple_speaker_listener) pass, as PettingZoo requires.

        Raises:
            ValueError: wrong shape, a non-integer value or dtype, or an action out of range (naming the env, the
                agent and the valid range).
        """
        return discrete_joint_actions(actions, (self.num_envs, self.n_agents), int(self.action_space.n),
                                      agent_names=self.agent_ids)

    def step(self, actions: np.ndarray) -> StepResult:
        """Advance every running env by one step with joint actions int ``[E, N]`` (slots not alive take the no-op).

        Raises:
            ValueError: wrong shape, a non-integer, or an action outside the action space (see ``_check_actions``).
            RuntimeError: before the first :meth:`reset`.
        """
        if self._never_reset:
            raise RuntimeError(STEP_BEFORE_RESET)
        a = np.where(self._alive, self._check_actions(actions), self.noop_action)
        active = self._alive.any(axis=1)
        move, say = self._decode(a)
        move = np.where(self.movable[None, : self.n_agents], move, -1)
        self._physics(move, active)
        if self.dim_c > 0:
            c = np.zeros_like(self.c)
            e_idx, a_idx = np.nonzero((say >= 0) & ~self.silent[None, :])
            c[e_idx, a_idx, say[e_idx, a_idx]] = 1.0
            self.c = np.where(active[:, None, None], c, self.c)
            self._route_comm(active)
        self._global_t += 1
        reward, info = self._reward()
        reward = np.where(self._alive, reward, 0.0).astype(np.float32)
        info = {k: np.where(self._alive, v, 0.0).astype(np.float32) for k, v in info.items()}
        self._return += reward.sum(axis=1)
        self._t += active
        ended = active & (self._t >= self.params.max_steps)
        self._alive &= ~ended[:, None]
        truncated = np.broadcast_to((self._t >= self.params.max_steps)[:, None], self._alive.shape).copy()
        terminated = np.zeros_like(truncated)
        return StepResult(self._obs(), reward, terminated, truncated, info)

    @property
    def alive(self) -> np.ndarray:
        return self._alive

    def state(self) -> np.ndarray:
        obs = self._obs()
        return obs.reshape(self.num_envs, -1).astype(np.float32)

    def positions(self) -> np.ndarray:
        """float64 ``[E, N, 3]`` agent positions (m, z = 0)."""
        out = np.zeros((self.num_envs, self.n_agents, 3))
        out[..., :2] = self.pos[:, : self.n_agents]
        return out

    def landmark_positions(self) -> np.ndarray:
        """float64 ``[E, L, 2]`` landmark positions (m)."""
        return self.pos[:, self.n_agents:].copy()

    def episode_metrics(self) -> list[dict[str, float]]:
        """Per env: ``mpe/return``; with a ``comm_channel`` also the channel's accounting of the env's episode, as a
        run's channel reports it: ``comm/{offered,delivered,lost,queued}_{copies,bytes}`` (a broadcast utterance is
        one copy per other agent), ``comm/lost_{copies,bytes}/<cause>`` (``bandwidth-v0``: ``overflow``, ``late``,
        ``burst``) and ``comm/messages_sent`` (utterances). Offered, delivered and lost count since the env's reset;
        queued is what is still waiting or in flight now, so after a full reset (every run episode) offered =
        delivered + lost + queued exactly; after a reset of some envs only (training), copies still queued from the
        env's previous episode count when they are delivered or lost. A channel without ``per_copy()`` gives its
        ``stats()`` (run totals since the last full reset) to every env."""
        out = [{"mpe/return": float(self._return[e])} for e in range(self.num_envs)]
        if self.channel is not None:
            for m, c in zip(out, self._comm_metrics()):
                m.update(c)
        return out

    def set_env_state(self, e: int, agent_pos: np.ndarray, landmark_pos: np.ndarray,
                      agent_vel: np.ndarray | None = None, **extra: Any) -> None:
        """Overwrite env ``e``'s state (m, m/s), e.g. to copy another simulator's initial state.

        Args:
            agent_pos: float64 ``[N, 2]``; landmark_pos: ``[L, 2]``; agent_vel: ``[N, 2]`` (zeros if None);
            extra: task-specific state (e.g. ``goal`` indices), see the subclass.
        """
        N = self.n_agents
        self.pos[e, :N] = agent_pos
        self.pos[e, N:] = landmark_pos
        self.vel[e] = 0.0
        if agent_vel is not None:
            self.vel[e, :N] = agent_vel
        if extra:
            self._set_extra(e, **extra)

    def _set_extra(self, e: int, **extra: Any) -> None:
        raise TypeError(f"{type(self).__name__} has no extra state {sorted(extra)}")

    def observe(self) -> np.ndarray:
        """Current observations ``[E, N, obs_dim]`` (float32)."""
        return self._obs()
