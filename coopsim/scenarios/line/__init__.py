"""LineWalk: the smallest complete coopsim scenario (a template for scenario authors, and a fast test bed).

Description:
    ``N`` agents live on cells ``0 .. length-1`` of a line. Each has a target cell; an agent that
    stands on its target is finished and leaves the episode (PettingZoo semantics: terminated).
    Agents may share cells. The episode ends when all agents are finished or at ``max_steps``.

Observation (float32 ``[4]``, per agent):

    ====== ======================================== ========== ======
    index  meaning                                  range      unit
    ====== ======================================== ========== ======
    0      own position / (length - 1)              [0, 1]     —
    1      own target / (length - 1)                [0, 1]     —
    2      signed distance to target / (length - 1) [-1, 1]    —
    3      fraction of agents still walking         [0, 1]     —
    ====== ======================================== ========== ======

Action (Discrete 3): 0 stay, 1 left (−1 cell), 2 right (+1 cell); moves off the line are a stay.
``step`` raises ValueError for actions of another shape than ``[num_envs, num_agents]``, non-integers
and values outside 0..2.

Reward: −1 per step for each agent not yet on its target (team return = −sum of costs).

Episode end: an agent terminates on reaching its target; all truncate at ``max_steps``.

Arguments: ``num_agents`` (1–1024), ``length`` (cells, ≥ 2), ``max_steps``, ``cell_size_m`` (m).

Version history: v0 — initial version.
"""
from __future__ import annotations

import gymnasium
import numpy as np
from pydantic import Field

from coopsim.platform.scenario import (STEP_BEFORE_RESET, ScenarioCore, ScenarioParams, StepResult,
                                       discrete_joint_actions, reset_ids)


class LineWalkParams(ScenarioParams):
    num_agents: int = Field(3, ge=1, le=1024, description="agents, 1..1024")
    length: int = Field(8, ge=2, le=10_000, description="cells on the line, >= 2")
    max_steps: int = Field(32, ge=1, le=1_000_000, description="episode step limit, 1..1e6")
    cell_size_m: float = Field(1.0, gt=0, description="cell width in metres, > 0")


class LineWalkCore(ScenarioCore):
    """N agents walk to their targets on a line (see the module docstring)."""

    Params = LineWalkParams
    metadata = {"name": "line_walk_v0", "render_modes": [], "is_parallelizable": True}  # render() draws nothing
    dt_s = 1.0

    def __init__(self, num_envs: int = 1, **params):
        from coopsim.platform.registry import checked_params
        from coopsim.platform.scenario import check_num_envs
        num_envs = check_num_envs(num_envs)  # as make_scenario: 0, 2.5, True or '2' used to build a core
        self.params = checked_params(self.Params, params, type(self).__name__)
        p = self.params
        self.num_envs = num_envs
        self._never_reset = True
        self.agent_ids = tuple(f"agent_{i}" for i in range(p.num_agents))
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(3)
        self.state_space = gymnasium.spaces.Box(0.0, 1.0, shape=(2 * p.num_agents + 1,), dtype=np.float32)
        e, n = self.num_envs, p.num_agents
        self._pos = np.zeros((e, n), np.int64)
        self._target = np.zeros((e, n), np.int64)
        self._alive = np.zeros((e, n), bool)
        self._t = np.zeros(e, np.int64)
        self._cost = np.zeros((e, n), np.int64)
        self._truncated = np.zeros(e, bool)
        self._rngs = [self.env_rng(0, i) for i in range(e)]

    def reset(self, seed=None, env_ids=None):
        ids = reset_ids(env_ids, self.num_envs)
        p = self.params
        for e in ids:
            if seed is not None:
                self._rngs[e] = self.env_rng(seed, e)
            rng = self._rngs[e]
            self._pos[e] = rng.integers(0, p.length, p.num_agents)
            self._target[e] = rng.integers(0, p.length, p.num_agents)
        self._alive[ids] = self._pos[ids] != self._target[ids]
        self._t[ids] = 0
        self._cost[ids] = 0
        self._truncated[ids] = False
        self._never_reset = False
        return self._obs()

    def _obs(self):
        scale = np.float32(self.params.length - 1)
        walking = self._alive.mean(axis=1, dtype=np.float32)[:, None]
        return np.stack([
            self._pos / scale, self._target / scale, (self._target - self._pos) / scale,
            np.broadcast_to(walking, self._pos.shape),
        ], axis=-1).astype(np.float32)

    def _check_actions(self, actions):
        """``actions`` as int64 ``[E, N]``, or ValueError: wrong shape, a non-integer, or an action outside 0..2
        (every slot is checked, alive or not; vectorized, so cheap for valid input)."""
        return discrete_joint_actions(actions, (self.num_envs, self.num_agents), 3, "0..2 (0 stay, 1 left, 2 right)")

    def step(self, actions):
        if self._never_reset:
            raise RuntimeError(STEP_BEFORE_RESET)
        a = np.where(self._alive, self._check_actions(actions), 0)
        delta = np.array([0, -1, 1], np.int64)[a]
        self._pos = np.clip(self._pos + delta, 0, self.params.length - 1)
        was_alive = self._alive.copy()
        reward = np.where(was_alive, -1.0, 0.0).astype(np.float32)
        self._cost += was_alive
        self._t += np.any(was_alive, axis=1)
        arrived = was_alive & (self._pos == self._target)
        self._alive &= ~arrived
        trunc_env = np.any(self._alive, axis=1) & (self._t >= self.params.max_steps)
        self._truncated |= trunc_env
        self._alive &= ~trunc_env[:, None]
        finished = self._pos == self._target
        terminated = finished & ~self._alive
        truncated = ~finished & self._truncated[:, None]
        return StepResult(self._obs(), reward, terminated, truncated, {"reward/step": reward})

    @property
    def alive(self):
        return self._alive

    def state(self):
        scale = np.float32(self.params.length - 1)
        return np.concatenate([self._pos / scale, self._target / scale,
                               (self._t / self.params.max_steps)[:, None]], axis=1).astype(np.float32)

    def positions(self):
        out = np.zeros((self.num_envs, self.num_agents, 3))
        out[..., 0] = (self._pos + 0.5) * self.params.cell_size_m
        return out

    def episode_metrics(self):
        return [{"soc": float(self._cost[e].sum()), "success": float(not self._truncated[e]),
                 "makespan": float(self._t[e])} for e in range(self.num_envs)]
