"""Decentralized MG-MAPF heuristics on the scenario's rules: PIBT-style local priorities and greedy with waits.

Both use the baselines' high level (:class:`coopsim.agents.immp.highlevel.TeamPlanner` with nearest-neighbour
goal order and unweighted BFS distance fields, replanned when an agent visits a goal), so they differ from
IMMP only in how a step is chosen.

* :class:`PIBTAgent` (``mapf/pibt-v0``): Priority Inheritance with Backtracking (Okumura, Machida, Défago,
  Tamura, "Priority inheritance with backtracking for iterative multi-agent path finding", IJCAI 2019 / AIJ
  2022), one step at a time. Priorities grow by 1 each step an agent has a goal left and drop back to their
  tie-break value (``i / N``) when it visits a goal (finished agents stay at the bottom). In decreasing priority,
  an agent without a move picks, among wait and its four moves ordered by distance to its current goal (ties
  broken by a seeded random key), the first cell not reserved for the next step and not the current cell of
  the agent that pushed it (no swaps); if that cell holds an agent that has not moved yet, the priority is
  inherited: the occupant must move first (recursively) and, if it cannot, the next candidate is tried
  (backtracking). The recursion only reaches agents on adjacent cells, so the protocol is local (each agent
  talks to its neighbours); it yields joint moves without vertex or swap conflicts, so under
  ``conflicts: allow`` it records zero collisions. The recursion is sequential by nature (a Python loop over
  agents; candidate orders are computed vectorized). The preference order is a parameter
  (:func:`pibt_actions` takes a key per action): ``mapf/pibt-v0`` orders by distance to the goal, IMMP's
  CS-PIBT low level (:meth:`coopsim.agents.immp.agent.IMMPAgent.resolve`) by its policy's logits, with the same
  priorities (:class:`PIBTPriorities`) and the same resolution.
* :class:`GreedyWaitsAgent` (``mapf/greedy-waits-v0``): each agent takes a move that shortens its distance
  to its current goal, preferring one whose cell is free now (other agents seen in its window); if every
  shortening move leads into an occupied cell it waits, and after ``patience`` consecutive blocked steps it
  takes a random free move (seeded) to break deadlocks. Conflicts are left to the scenario (``block``).
  Fully vectorized over agents.
"""
from __future__ import annotations

import sys
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from coopsim.agents.immp.highlevel import HighLevelParams, ScenarioPlanner
from coopsim.errors import ConfigError
from coopsim.platform.agent import AGENT_SEED_MAX, AgentParams, AgentPlugin

_REQUIRES = ("agent_xy", "goals_xy", "goals_visited", "map_data")


def _baseline_highlevel() -> HighLevelParams:
    return HighLevelParams(ordering="nearest", order_weight=0.0, path_weight=0.0, rounds=0)


def _check(scenario) -> None:
    for c in _REQUIRES:
        if not hasattr(scenario, c):
            raise ConfigError(f"this agent needs an MG-MAPF scenario with {c}(); got {type(scenario).__name__}",
                              key="scenario.id")


class PIBTParams(AgentParams):
    """Parameters of ``mapf/pibt-v0``."""

    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX, description="seed of the random tie-breaking keys, 0 .. 2**32-1")


def pibt_step(cur: np.ndarray, cand: np.ndarray, prio: np.ndarray, num_cells: int) -> np.ndarray:
    """One PIBT step for one environment.

    Args:
        cur: int64 ``[N]`` current flat cells (distinct).
        cand: int64 ``[N, 5]`` candidate next cells of each agent in preference order (wait included; entries
            equal to ``num_cells`` are blocked and skipped).
        prio: float ``[N]`` priorities (higher moves first; distinct).
        num_cells: ``H * W`` (the blocked sentinel).

    Returns:
        int64 ``[N]`` next cells: no two equal (vertex) and no pair exchanging cells (swap).
    """
    n = len(cur)
    occ = np.full(num_cells + 1, -1, np.int64)
    occ[cur] = np.arange(n)
    res = np.full(num_cells + 1, -1, np.int64)
    nxt = np.full(n, -1, np.int64)
    cand_l = cand.tolist()
    cur_l = cur.tolist()
    occ_l = occ.tolist()

    def pibt(i: int, parent: int) -> bool:
        for c in cand_l[i]:
            if c == num_cells or res[c] != -1:
                continue
            if parent != -1 and c == cur_l[parent]:
                continue
            res[c] = i
            nxt[i] = c
            k = occ_l[c]
            if k != -1 and k != i and nxt[k] == -1:
                if not pibt(k, i):
                    continue
            return True
        nxt[i] = cur_l[i]
        res[cur_l[i]] = i
        return False

    limit = sys.getrecursionlimit()
    if limit < 4 * n + 100:
        sys.setrecursionlimit(4 * n + 100)
    for i in np.argsort(-prio, kind="stable").tolist():
        if nxt[i] == -1:
            pibt(i, -1)
    return nxt


def _action_of(cur: np.ndarray, nxt: np.ndarray, w: int) -> np.ndarray:
    """Action 0..4 (wait, up, down, left, right: flat offsets 0, -w, +w, -1, +1) taking ``cur`` to ``nxt``."""
    d = nxt - cur
    return np.select([d == 0, d == -w, d == w, d == -1, d == 1], [0, 1, 2, 3, 4], 0)


def preference_order(cand: np.ndarray, key: np.ndarray, num_cells: int) -> np.ndarray:
    """Candidate cells ``cand`` int64 ``[N, 5]`` (action order: wait, up, down, left, right; ``num_cells`` =
    blocked) sorted per agent by ``key`` float ``[N, 5]`` (lower = preferred; blocked cells go last). Stable,
    so equal keys keep the action order. Vectorized over agents."""
    key = np.where(cand == num_cells, np.inf, key)
    order = np.argsort(key, axis=1, kind="stable")
    return np.take_along_axis(cand, order, 1)


def pibt_actions(cur: np.ndarray, nbr: np.ndarray, key: np.ndarray, prio: np.ndarray, w: int, num_cells: int) -> np.ndarray:
    """PIBT joint actions of one environment with a given per-agent preference over the five actions.

    This is the one PIBT of the code base: :class:`PIBTAgent` calls it with ``key`` = distance to the goal
    (plus a random tie-break), IMMP's CS-PIBT low level (:mod:`coopsim.agents.immp.agent`) with ``key`` =
    minus the policy's (perturbed) logits.

    Args:
        cur: int64 ``[N]`` current flat cells ``y*w + x`` (distinct).
        nbr: int64 ``[H*W + 1, 5]`` neighbour table (action order; ``num_cells`` where the move is off the
            map or into an obstacle).
        key: float ``[N, 5]`` preference key per action (lower = tried first).
        prio: float ``[N]`` distinct priorities (higher resolves first).
        w: map width; num_cells: ``H * W``.

    Returns:
        int64 ``[N]`` actions 0..4 whose joint move has no vertex and no swap conflict.
    """
    cand = preference_order(nbr[cur], key, num_cells)
    return _action_of(cur, pibt_step(cur, cand, prio, num_cells), w)


class PIBTPriorities:
    """PIBT's priorities per environment ``[E, N]``: +1 per step while an agent has a goal left, back to the
    tie-break value ``i / N`` when it visits a goal, finishes, or the episode restarts (Okumura et al.)."""

    def __init__(self, num_envs: int, num_agents: int):
        self.base = np.arange(num_agents) / num_agents
        self.prio = np.tile(self.base, (num_envs, 1))
        self.nvis: np.ndarray | None = None

    def update(self, t: np.ndarray, visited: np.ndarray) -> np.ndarray:
        """``t`` int ``[E]`` step counters, ``visited`` bool ``[E, N, K]`` -> priorities float ``[E, N]``."""
        nvis = visited.sum(-1)
        if self.nvis is None or self.nvis.shape != nvis.shape:
            self.nvis = nvis.copy()
        fresh = t == 0
        self.prio[fresh] = self.base
        reached = (nvis > self.nvis) & ~fresh[:, None]
        self.prio = np.where(reached | visited.all(-1), self.base, self.prio + 1.0)
        self.nvis = nvis
        return self.prio


class _BaselineFollower(AgentPlugin):
    """Shared set-up of the decentralized baselines: nearest-neighbour goal order and unweighted shortest
    paths from the baseline high level (no congestion term), read through the scenario's capabilities."""

    requires: ClassVar[tuple[str, ...]] = _REQUIRES

    def __init__(self, scenario, **params: Any):
        super().__init__(scenario, **params)
        _check(scenario)
        self.hl = ScenarioPlanner(scenario, _baseline_highlevel())
        self.reset(self.params.seed)


class PIBTAgent(_BaselineFollower):
    """PIBT-style decentralized heuristic for MG-MAPF (see the module docstring). Acts on ``[E, N]``."""

    Params: ClassVar = PIBTParams

    def reset(self, seed: int | None = None) -> None:
        e, n = self.scenario.num_envs, self.scenario.num_agents
        self.rng = np.random.default_rng([self.params.seed if seed is None else int(seed), 23])
        self.prios = PIBTPriorities(e, n)
        self.hl.reset(seed)

    def preference_keys(self, env, cur: np.ndarray) -> np.ndarray:
        """float ``[N, 5]``: distance to the current goal after each action plus a random tie-break in [0, 0.5)."""
        n = len(cur)
        f = env.fields[np.arange(n)[:, None], env.nbr[cur]]
        return f + 0.5 * self.rng.random(f.shape)

    def act(self, obs, inbox=None):
        core = self.scenario
        self.hl.sync()
        prio = self.prios.update(self.hl.step_counters(), core.goals_visited())
        xy = core.agent_xy().astype(np.int64)
        e_, n = xy.shape[:2]
        out = np.zeros((e_, n), np.int64)
        for e in range(e_):
            env = self.hl.planner.envs[e]
            hw = env.h * env.w
            cur = xy[e, :, 1] * env.w + xy[e, :, 0]
            out[e] = pibt_actions(cur, env.nbr, self.preference_keys(env, cur), prio[e], env.w, hw)
        out[~core.alive] = core.noop_action
        return out, None


class GreedyParams(AgentParams):
    """Parameters of ``mapf/greedy-waits-v0``."""

    patience: int = Field(3, ge=1, le=1000, description="blocked steps before a random free move, 1..1000")
    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX, description="seed of the random moves and tie-breaks, 0 .. 2**32-1")


class GreedyWaitsAgent(_BaselineFollower):
    """Decentralized greedy with waits (see the module docstring). Acts on ``[E, N]``, vectorized."""

    Params: ClassVar = GreedyParams

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng([self.params.seed if seed is None else int(seed), 29])
        self.waited = np.zeros((self.scenario.num_envs, self.scenario.num_agents), np.int64)
        self.hl.reset(seed)

    def act(self, obs, inbox=None):
        core = self.scenario
        self.hl.sync()
        t = self.hl.step_counters()
        self.waited[t == 0] = 0
        xy = core.agent_xy().astype(np.int64)
        e_, n = xy.shape[:2]
        out = np.zeros((e_, n), np.int64)
        rows = np.arange(n)
        for e in range(e_):
            env = self.hl.planner.envs[e]
            hw = env.h * env.w
            cur = xy[e, :, 1] * env.w + xy[e, :, 0]
            occ = np.zeros(hw + 1, bool)
            occ[cur] = True
            cand = env.nbr[cur]                                          # [N, 5]
            f = env.fields[rows[:, None], cand]
            better = (f < f[:, :1]) & (cand != hw)
            better[:, 0] = False
            free_better = better & ~occ[cand]
            key = self.rng.random((n, 5))
            pick_free = np.where(free_better, key, -1).argmax(1)
            act = np.where(free_better.any(1), pick_free, 0)
            blocked = ~free_better.any(1) & better.any(1)
            self.waited[e] = np.where(blocked, self.waited[e] + 1, 0)
            free_move = (cand != hw) & ~occ[cand]
            free_move[:, 0] = False
            rand_pick = np.where(free_move, key, -1).argmax(1)
            stuck = (self.waited[e] >= self.params.patience) & free_move.any(1)
            act = np.where(stuck, rand_pick, act)
            self.waited[e][stuck] = 0
            out[e] = act
        out[~core.alive] = core.noop_action
        return out, None
