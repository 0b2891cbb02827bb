"""CoopGame: cooperative Markov games with unknown slip dynamics and coupled hard constraints.

Description:
    ``N`` agents (2..1000) move on a grid (4-connected, optional obstacles) or a planar graph world.
    Each agent has a target cell; the team is rewarded for agents standing on their targets. Moves
    slip: from a *slippery* cell (a hidden, world-seeded subset) a move lands on one of up to two
    cells beside the intended cell with probability ``slip / 2`` each (see
    :mod:`coopsim.scenarios.coop_game.world`). Agents know the map and the intended cell of every
    action, and that every outcome lies within one cell of it (the prior plausible set, exposed by
    :meth:`CoopGameCore.constraints`), but not the probabilities, nor which cells slip.
    Any mix of three coupled hard constraints is in force (``constraints`` param): ``separation``
    (never the same cell, never swap; or a larger ``min_dist``), ``resource`` (the agents of each
    group carry at most ``cap`` load units, a cell's load being 1 on loaded cells, 0 elsewhere) and
    ``connectivity`` (the disc graph of radius ``comm_range`` stays connected, enforced by the shield
    through a spanning tree chosen at each step). The scenario does **not** prevent violations: it
    reports them each step as ``info["cost/<name>"]`` (float32 ``[E]``: violating pairs for separation,
    groups over cap for resource, 1 if disconnected for connectivity); the shield prevents them.
    The world, starts and targets are fixed by ``world_seed`` (so an exact solver applies); the
    episode seed drives only the slips.

Observation (float32 ``[5]``, per agent):

    ===== ============================================ ========== ======
    index meaning                                      range      unit
    ===== ============================================ ========== ======
    0-1   own cell coordinates / world extent          [0, 1]     --
    2-3   target cell coordinates / world extent       [0, 1]     --
    4     elapsed fraction of the episode ``t / H``    [0, 1]     --
    ===== ============================================ ========== ======

Action (Discrete ``A``): grid: 0 stay, 1 up, 2 down, 3 left, 4 right (``A = 5``); graph: 0 stay,
``a >= 1`` move to the ``a``-th neighbour by id (``A = 1 + max degree``). Blocked moves are a stay.

Reward: team reward ``(number of agents on their targets after the step) / N``, the same for every
agent (``info["reward/targets"]``).

Episode end: truncation at ``max_steps`` (the horizon ``H``); no termination.

Arguments: see :class:`CoopGameParams` (world, size, ``num_agents``, ``slip``, ``slippery_frac``,
``constraints``, ``min_dist``, ``cap``, ``group_size``, ``load_frac``, ``comm_range``, ``margin``,
``start_spacing``, ``world_seed``, ``max_steps``).

Capabilities: ``constraints()``, ``known_world()``, ``constraint_set`` (a :class:`~coopsim.safety.state.SafetyState`), ``true_support()``
(for the oracle shield and evaluation only), ``cells()``, ``world()``, ``targets()``, ``positions()``.

Version history: v0 -- initial version.
"""
from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Literal

import gymnasium
import numpy as np
from pydantic import Field, field_validator

from coopsim.errors import ConfigError
from coopsim.platform.scenario import (STEP_BEFORE_RESET, ScenarioCore, ScenarioParams, StepResult,
                                       discrete_joint_actions, reset_ids)
from coopsim.safety.constraints import KeepConnected, ResourceCap, Separation, count_violations
from coopsim.safety.state import SafetyState
from coopsim.scenarios.coop_game.world import World, graph_world, grid_world

ConstraintName = Literal["separation", "resource", "connectivity"]


def regret(v_star: float, team_return: float) -> float:
    """``v_star - team_return``, exactly ``0.0`` when the difference is float rounding (``|d| <= 1e-9 *
    max(1, |v_star|)``; V* and the return sum the same rewards in another order). A realized regret can be
    below 0 (a lucky episode beats the expected optimum V*); that is kept."""
    d = float(v_star) - float(team_return)
    return 0.0 if abs(d) <= 1e-9 * max(1.0, abs(float(v_star))) else d


class CoopGameParams(ScenarioParams):
    world: Literal["grid", "graph"] = Field("grid", description="grid (4-connected) or graph (planar, Delaunay)")
    height: int = Field(5, ge=1, le=1024, description="grid rows (cells), 1..1024")
    width: int = Field(5, ge=1, le=1024, description="grid columns (cells), 1..1024")
    obstacle_frac: float = Field(0.0, ge=0, lt=0.5, description="fraction of grid cells that are obstacles, [0, 0.5)")
    num_nodes: int = Field(64, ge=4, le=100_000, description="graph world: number of nodes, >= 4")
    num_agents: int = Field(2, ge=2, le=1000, description="agents, 2..1000")
    slip: float = Field(0.2, ge=0, le=0.9, description="probability that a move from a slippery cell slips (split over two lateral cells), [0, 0.9]")
    slippery_frac: float = Field(0.5, ge=0, le=1, description="fraction of cells whose moves slip, [0, 1]")
    constraints: list[ConstraintName] = Field(default_factory=lambda: ["separation"],
                                              description="constraint kinds in force: any of separation, resource, connectivity")
    min_dist: float = Field(1.0, gt=0, description="separation distance (cells), > 0; 1 = never the same cell")
    no_swap: bool = Field(True, description="separation also forbids swapping cells in one step")
    cap: float = Field(1.0, ge=0, description="resource cap per group (load units; a loaded cell carries 1), >= 0")
    group_size: int = Field(0, ge=0, description="agents per resource group (consecutive ids); 0 = one group of all agents")
    load_frac: float = Field(0.25, ge=0, le=1, description="fraction of cells that carry load 1, [0, 1]")
    comm_range: float = Field(3.0, gt=0, description="connectivity range (cells), > 0")
    margin: float = Field(0.0, ge=0, description="safety margin added to every constraint (cells or load units), >= 0")
    start_spacing: float = Field(1.0, gt=0, description="minimum distance between start cells (cells), > 0")
    world_seed: int = Field(0, ge=0, description="seed of the world, slippery cells, loads, starts and targets, >= 0")
    max_steps: int = Field(16, ge=1, le=100_000, description="episode horizon H (steps), >= 1")

    @field_validator("constraints")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"constraint kinds must not repeat; got {v}")
        return v


class CoopGameCore(ScenarioCore):
    """Cooperative Markov game with slip dynamics and coupled hard constraints (see the module docstring)."""

    Params = CoopGameParams
    metadata = {"name": "coop_game_v0", "render_modes": ["rgb_array"], "is_parallelizable": True}
    dt_s = 1.0
    noop_action = 0
    team_reward: ClassVar[bool] = True  # every agent gets the team reward: the runner counts it once per step

    def __init__(self, num_envs: int = 1, **params):
        from coopsim.platform.registry import checked_params
        from coopsim.platform.scenario import check_num_envs
        num_envs = check_num_envs(num_envs)  # as make_scenario: 0, 2.5, True or '2' used to build a core
        self.params = p = checked_params(self.Params, params, type(self).__name__)
        self.num_envs = num_envs
        self._never_reset = True
        rng = np.random.default_rng([p.world_seed, 7919])
        if p.world == "grid":
            self._world = grid_world(p.height, p.width, obstacle_frac=p.obstacle_frac, slip=p.slip,
                                     slippery_frac=p.slippery_frac, load_frac=p.load_frac, rng=rng)
        else:
            self._world = graph_world(p.num_nodes, slip=p.slip, slippery_frac=p.slippery_frac,
                                      load_frac=p.load_frac, rng=rng)
        w = self._world
        if w.shape is None:  # a graph world has no frame (render() gives None): it claims no render mode
            self.metadata = {**type(self).metadata, "render_modes": []}
        if p.num_agents > w.num_cells:
            raise ConfigError(f"num_agents={p.num_agents} exceeds the {w.num_cells} free cells of the world", key="num_agents",
                              value=p.num_agents)
        N = p.num_agents
        self.agent_ids = tuple(f"agent_{i}" for i in range(N))
        self.action_space = gymnasium.spaces.Discrete(w.num_actions)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, shape=(5,), dtype=np.float32)
        self.state_space = gymnasium.spaces.Box(0.0, 1.0, shape=(4 * N + 1,), dtype=np.float32)
        self._extent = np.maximum(w.coords.max(0) - w.coords.min(0), 1.0)
        self._origin = w.coords.min(0)
        self._constraints = self._make_constraints()
        self._start, self._target = self._place(rng)
        E = self.num_envs
        self._cells = np.tile(self._start, (E, 1))
        self._t = np.zeros(E, np.int64)
        self._alive = np.zeros((E, N), bool)
        self._ret = np.zeros(E)
        self._viol = np.zeros(E)
        self._rngs = [self.env_rng(0, e) for e in range(E)]
        self._cum = np.cumsum(w.true_prob, axis=-1)

    # --- construction -------------------------------------------------------------------------
    def _make_constraints(self):
        p, N = self.params, self.params.num_agents
        cons = []
        if "separation" in p.constraints:
            cons.append(Separation(name="separation", margin=p.margin, min_dist=p.min_dist, no_swap=p.no_swap))
        if "resource" in p.constraints:
            gs = p.group_size or N
            groups = tuple(int(i // gs) for i in range(N))
            G = (N + gs - 1) // gs
            cons.append(ResourceCap(name="resource", margin=p.margin, groups=groups, caps=(float(p.cap),) * G))
        if "connectivity" in p.constraints:
            cons.append(KeepConnected(name="connectivity", margin=p.margin, range_m=p.comm_range))
        return tuple(cons)

    def _place(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Starts satisfying every constraint (unloaded cells, separated, connected) and random targets."""
        p, w, N = self.params, self._world, self.params.num_agents
        sep = max(p.min_dist + p.margin if "separation" in p.constraints else 0.0, p.start_spacing)
        rng_c = p.comm_range - p.margin
        free = np.flatnonzero(w.load == 0) if "resource" in p.constraints else np.arange(w.num_cells)
        if p.cap - p.margin < 0 and "resource" in p.constraints:
            raise ConfigError(f"cap - margin = {p.cap - p.margin} < 0: no state satisfies the resource constraint", key="cap", value=p.cap)
        for attempt in range(20):
            root = int(rng.choice(free)) if len(free) else 0
            # BFS over the cell graph from root
            order, seen, frontier = [], {root}, [root]
            while frontier:
                order += frontier
                nxt = []
                for v in frontier:
                    for u in w.adjacency[v]:
                        if u >= 0 and u not in seen:
                            seen.add(int(u))
                            nxt.append(int(u))
                frontier = nxt
            allowed = set(free.tolist())
            chosen: list[int] = []
            for v in order:
                if v not in allowed:
                    continue
                c = w.coords[v]
                if chosen:
                    d = np.sqrt(((w.coords[chosen] - c) ** 2).sum(-1))
                    if sep > 0 and d.min() < sep - 1e-9:
                        continue
                    if "connectivity" in p.constraints and d.min() > rng_c + 1e-9:
                        continue
                chosen.append(v)
                if len(chosen) == N:
                    break
            if len(chosen) == N:
                start = np.array(chosen, np.int64)
                target = rng.choice(w.num_cells, size=N, replace=False).astype(np.int64)
                return start, target
        raise ConfigError(f"could not place {N} agents satisfying {p.constraints} (min_dist={p.min_dist}, comm_range={p.comm_range}, "
                          f"load_frac={p.load_frac}); use a larger world or looser constraints", key="num_agents", value=N,
                          also=("min_dist", "comm_range", "load_frac", "constraints", "margin", "start_spacing",
                                "height", "width"))

    # --- core API -------------------------------------------------------------------------------
    def reset(self, seed=None, env_ids=None):
        ids = reset_ids(env_ids, self.num_envs)
        for e in ids:
            if seed is not None:
                self._rngs[e] = self.env_rng(seed, int(e))
        self._cells[ids] = self._start
        self._t[ids] = 0
        self._alive[ids] = True
        self._ret[ids] = 0.0
        self._viol[ids] = 0.0
        self._never_reset = False
        return self._obs()

    def _obs(self) -> np.ndarray:
        w = self._world
        own = (w.coords[self._cells] - self._origin) / self._extent
        tgt = np.broadcast_to((w.coords[self._target] - self._origin) / self._extent, own.shape)
        tf = np.broadcast_to((self._t / self.params.max_steps)[:, None, None], own.shape[:2] + (1,))
        return np.clip(np.concatenate([own, tgt, tf], -1), 0.0, 1.0).astype(np.float32)

    def step(self, actions):
        if self._never_reset:
            raise RuntimeError(STEP_BEFORE_RESET)
        w, p = self._world, self.params
        E, N = self.num_envs, self.num_agents
        actions = discrete_joint_actions(actions, (E, N), w.num_actions)  # shape, integers (1.7 was 1), range
        live = self._alive.any(1)
        a = np.where(self._alive, actions, self.noop_action)
        u = np.stack([self._rngs[e].random(N) if live[e] else np.ones(N) for e in range(E)])
        cum = self._cum[self._cells, a]  # [E, N, K]
        k = np.minimum((cum <= u[..., None] - 1e-12).sum(-1), cum.shape[-1] - 1)
        nxt = w.prior[self._cells, a, k]
        nxt = np.where(live[:, None], nxt, self._cells)
        pos, npos = w.coords[self._cells], w.coords[nxt]
        costs = count_violations(self._constraints, pos, npos, w.load[nxt])
        self._cells = nxt
        on = (nxt == self._target[None]).mean(1).astype(np.float32)
        team = np.where(live, on, 0.0).astype(np.float32)
        reward = np.broadcast_to(team[:, None], (E, N)).astype(np.float32).copy()
        self._t += live
        self._ret += team
        info = {"reward/targets": reward}
        for name, v in costs.items():
            v = np.where(live, v, 0.0).astype(np.float32)
            self._viol += v
            info[f"cost/{name}"] = v
        ended = live & (self._t >= p.max_steps)
        self._alive[ended] = False
        truncated = ~self._alive
        terminated = np.zeros((E, N), bool)
        return StepResult(self._obs(), reward, terminated, truncated, info)

    @property
    def alive(self):
        return self._alive

    def state(self):
        w = self._world
        own = ((w.coords[self._cells] - self._origin) / self._extent).reshape(self.num_envs, -1)
        tgt = np.broadcast_to(((w.coords[self._target] - self._origin) / self._extent).reshape(1, -1), (self.num_envs, 2 * self.num_agents))
        return np.clip(np.concatenate([own, tgt, (self._t / self.params.max_steps)[:, None]], 1), 0, 1).astype(np.float32)

    def episode_metrics(self):
        """Per env: ``team_return``, ``violations`` (constraint violations summed over the episode), and on
        instances the exact solver handles (``V^N A^N <= 4e6``) ``optimal_return`` (V*, the expected team
        return of the exact optimal safe policy from the start cells) and ``regret`` (``V* - team_return``,
        the realized regret of the episode)."""
        v_star = self.optimal_return()
        out = []
        for e in range(self.num_envs):
            m = {"team_return": float(self._ret[e]), "violations": float(self._viol[e])}
            if v_star is not None:
                m.update(optimal_return=v_star, regret=regret(v_star, float(self._ret[e])))
            out.append(m)
        return out

    def optimal_return(self, max_table: float = 4e6) -> float | None:
        """V*: expected team return of the exact optimal safe policy from the start cells (true dynamics,
        truly safe joint actions; :func:`coop_game.solver.solve_scenario`), or None when ``V^N A^N`` exceeds
        ``max_table``. Computed once per instance (a few seconds for 3 agents on 5x5)."""
        if not hasattr(self, "_v_star"):
            from coopsim.scenarios.coop_game.solver import joint_table_size, solve_scenario

            w = self._world
            if joint_table_size(w.num_cells, w.num_actions, self.num_agents) > max_table:
                self._v_star = None
            else:
                sol, _ = solve_scenario(self, max_table)
                self._v_star = sol.value(self._start, w.num_cells)
        return self._v_star

    # --- capabilities ---------------------------------------------------------------------------
    def positions(self) -> np.ndarray:
        """float64 ``[E, N, 3]`` (m; one cell = 1 m; grid: x = column, y = row)."""
        c = self._world.coords[self._cells]
        out = np.zeros((self.num_envs, self.num_agents, 3))
        out[..., 0], out[..., 1] = (c[..., 1], c[..., 0]) if self._world.shape is not None else (c[..., 0], c[..., 1])
        return out

    def cells(self) -> np.ndarray:
        """int64 ``[E, N]`` current cell of each agent (a copy)."""
        return self._cells.copy()

    def world(self) -> World:
        """The world including its true dynamics (solvers, oracle, evaluation; learners use :meth:`known_world`)."""
        return self._world

    def known_world(self) -> World:
        """What agents know of the world: map, intended cells, prior plausible sets, loads.

        ``true_prob`` is NaN and ``slippery`` all False (the true dynamics are hidden).
        """
        return replace(self._world, true_prob=np.full(self._world.true_prob.shape, np.nan),
                       slippery=np.zeros_like(self._world.slippery))

    def targets(self) -> np.ndarray:
        """int64 ``[N]`` target cell of each agent."""
        return self._target.copy()

    def starts(self) -> np.ndarray:
        """int64 ``[N]`` start cell of each agent."""
        return self._start.copy()

    @property
    def constraint_set(self):
        return self._constraints

    def constraints(self) -> SafetyState:
        """The :class:`SafetyState` of the batch (prior plausible sets: radius one cell around intended)."""
        w, c = self._world, self._cells
        oc = w.prior[c]  # [E, N, A, K]
        mask = oc >= 0
        safe_oc = np.where(mask, oc, c[..., None, None])
        return SafetyState(
            positions=w.coords[c], loads=w.load[c], intended=w.coords[w.nbr[c]],
            outcomes=w.coords[safe_oc], outcome_loads=w.load[safe_oc], outcome_mask=mask,
            cells=c.copy(), outcome_cells=np.where(mask, oc, -1), num_cells=w.num_cells, radius=w.radius,
            constraints=self._constraints, stay_action=0, t=self._t.copy(),
        )

    def true_support(self) -> np.ndarray:
        """bool ``[E, N, A, K]`` true support over the prior slots (oracle shield, evaluation; never for learners)."""
        return self._world.true_prob[self._cells] > 0

    def render(self, env_index: int = 0):
        """RGB uint8 ``[16 H, 16 W, 3]`` of env ``env_index`` on a grid world; None on a graph world (whose
        ``metadata["render_modes"]`` is then empty)."""
        w = self._world
        if w.shape is None:
            return None
        H, W = w.shape
        img = np.full((H, W, 3), 30, np.uint8)  # obstacles dark
        rc = w.coords.astype(np.int64)
        img[rc[:, 0], rc[:, 1]] = np.where(w.load[:, None] > 0, [255, 220, 150], [235, 235, 235])
        t = rc[self._target]
        img[t[:, 0], t[:, 1]] = [120, 200, 120]
        a = rc[self._cells[env_index]]
        img[a[:, 0], a[:, 1]] = [40, 80, 220]
        return np.kron(img, np.ones((16, 16, 1), np.uint8))
