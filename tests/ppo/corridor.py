"""A tiny real scenario core for the trainer tests: agents on a 1-D corridor with masks, conflicts and Dict obs.

Description: ``N`` agents on cells ``0 .. length-1``; each walks to its goal and leaves the corridor when
it arrives (terminated). Two agents may not end a step on the same cell nor swap cells: every agent in
such a conflict stays. Starts and goals are fixed (``starts``/``goals``) or drawn per episode.

Observation (Dict, per agent): ``goal`` one-hot ``[length]``, ``pos`` one-hot ``[length]`` (space order:
goal, pos). Action (Discrete 3): 0 stay, 1 left, 2 right; moves off the corridor are masked out.
Reward: -1 per step per agent not yet at its goal. Episode end: all arrived, or ``max_steps`` (truncated).
State: float32 ``[N * length + N * length]`` positions one-hot (zeros once arrived) and goals one-hot.
"""
from __future__ import annotations

import heapq
import itertools

import gymnasium
import numpy as np
from pydantic import Field

from coopsim.platform.scenario import ScenarioCore, ScenarioParams, StepResult


class CorridorParams(ScenarioParams):
    num_agents: int = Field(2, ge=1, le=8)
    length: int = Field(5, ge=2, le=64)
    max_steps: int = Field(16, ge=1)
    starts: list[int] | None = None
    goals: list[int] | None = None


class CorridorCore(ScenarioCore):
    Params = CorridorParams
    dt_s = 1.0

    def __init__(self, num_envs: int = 1, **params):
        self.params = p = self.Params(**params)
        self.num_envs = e = int(num_envs)
        n, L = p.num_agents, p.length
        self.agent_ids = tuple(f"agent_{i}" for i in range(n))
        box = gymnasium.spaces.Box(0.0, 1.0, (L,), np.float32)
        self.observation_space = gymnasium.spaces.Dict({"pos": box, "goal": box})
        self.action_space = gymnasium.spaces.Discrete(3)
        self.state_space = gymnasium.spaces.Box(0.0, 1.0, (2 * n * L,), np.float32)
        self.pos = np.zeros((e, n), np.int64)
        self.goal = np.zeros((e, n), np.int64)
        self._alive = np.zeros((e, n), bool)
        self.t = np.zeros(e, np.int64)
        self.cost = np.zeros((e, n), np.int64)
        self.trunc = np.zeros(e, bool)
        self.rngs = [self.env_rng(0, i) for i in range(e)]

    def reset(self, seed=None, env_ids=None):
        p = self.params
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids, np.int64)
        for e in ids:
            if seed is not None:
                self.rngs[e] = self.env_rng(seed, e)
            if p.starts is not None:
                self.pos[e], self.goal[e] = p.starts, p.goals
            else:
                cells = self.rngs[e].permutation(p.length)
                self.pos[e] = cells[: p.num_agents]
                self.goal[e] = self.rngs[e].permutation(p.length)[: p.num_agents]
        self._alive[ids] = self.pos[ids] != self.goal[ids]
        self.t[ids], self.cost[ids], self.trunc[ids] = 0, 0, False
        return self._obs()

    def _obs(self):
        L = self.params.length
        eye = np.eye(L, dtype=np.float32)
        return {"goal": eye[self.goal], "pos": eye[self.pos] * self._alive[..., None]}

    def action_masks(self):
        m = np.ones((self.num_envs, self.num_agents, 3), bool)
        m[..., 1] &= self.pos > 0
        m[..., 2] &= self.pos < self.params.length - 1
        m[~self._alive] = [True, False, False]
        return m

    def step(self, actions):
        a = np.where(self._alive & np.take_along_axis(self.action_masks(), np.asarray(actions)[..., None], -1)[..., 0],
                     actions, 0)
        nxt = self.pos + np.array([0, -1, 1])[a]
        alive = self._alive
        # conflicts among alive agents: same target cell, or swapping cells -> those agents stay
        for _ in range(self.num_agents):
            same = (nxt[:, :, None] == nxt[:, None, :]) & alive[:, :, None] & alive[:, None, :]
            swap = (nxt[:, :, None] == self.pos[:, None, :]) & (nxt[:, None, :] == self.pos[:, :, None]) \
                & alive[:, :, None] & alive[:, None, :]
            np.einsum("eii->ei", same)[...] = False
            np.einsum("eii->ei", swap)[...] = False
            bad = (same | swap).any(-1)
            if not bad.any():
                break
            nxt = np.where(bad, self.pos, nxt)
        was = alive.copy()
        self.pos = np.where(was, nxt, self.pos)
        reward = np.where(was, -1.0, 0.0).astype(np.float32)
        self.cost += was
        self.t += was.any(1)
        arrived = was & (self.pos == self.goal)
        self._alive = was & ~arrived
        tr = self._alive.any(1) & (self.t >= self.params.max_steps)
        self.trunc |= tr
        self._alive &= ~tr[:, None]
        term = self.pos == self.goal
        return StepResult(self._obs(), reward, term, ~term & self.trunc[:, None], {})

    @property
    def alive(self):
        return self._alive

    def state(self):
        L, n = self.params.length, self.num_agents
        eye = np.eye(L, dtype=np.float32)
        pos = (eye[self.pos] * self._alive[..., None]).reshape(self.num_envs, n * L)
        return np.concatenate([pos, eye[self.goal].reshape(self.num_envs, n * L)], 1)

    def episode_metrics(self):
        return [{"soc": float(self.cost[e].sum()), "success": float(not self.trunc[e])} for e in range(self.num_envs)]


def optimal_soc(length: int, starts: list[int], goals: list[int]) -> int:
    """Brute-force optimal sum of costs: Dijkstra over joint (positions, arrived) states, stepping the core itself.

    A step costs the number of agents not yet arrived (the core's -reward).
    """
    core = CorridorCore(1, num_agents=len(starts), length=length, starts=starts, goals=goals, max_steps=10**6)
    core.reset(seed=0)
    n = len(starts)
    start = (tuple(starts), tuple(s == g for s, g in zip(starts, goals)))
    best = {start: 0}
    heap = [(0, start)]
    while heap:
        cost, s = heapq.heappop(heap)
        if cost > best[s]:
            continue
        if all(s[1]):
            return cost
        for joint in itertools.product(range(3), repeat=n):
            core.pos[0], core._alive[0] = s[0], [not d for d in s[1]]
            core.t[0], core.trunc[0] = 0, False
            res = core.step(np.array([joint]))
            ns = (tuple(int(x) for x in core.pos[0]), tuple(bool(x) for x in res.terminated[0]))
            nc = cost + int(sum(not d for d in s[1]))
            if nc < best.get(ns, 1 << 60):
                best[ns] = nc
                heapq.heappush(heap, (nc, ns))
    raise ValueError("no solution")
