"""IMMP high level: spatially-balanced goal ordering and congestion-aware path planning (no learning).

What it does for one environment (all arrays numpy, vectorized over agents; cells are flat ``y * W + x``):

1. **Distance tables.** 4-connected BFS distances from every goal to every cell, ``float32 [N*K, H*W]``
   (:func:`coopsim.scenarios.mapf.metrics.bfs_distances`), and a neighbour table ``int64 [H*W, 5]``
   (wait, up, down, left, right; ``H*W`` marks a blocked move).
2. **Shared space-time density map.** Every agent's plan -- the cells it will occupy at steps
   ``t_now .. t_now + horizon`` when it follows shortest paths through its goals in its chosen order -- is
   added to ``counts float32 [L, H*W]`` (agents per cell per step, for the window of absolute steps
   ``t_base .. t_base + L - 1``). The planners read a smoothed version ``S = K_time * K_space * counts``
   (box filter of half-width ``time_window`` steps, 5-point spatial cross with neighbour weight
   ``spatial_weight``): the expected number of *other* agents near a cell around a step. Only steps
   ``t_now - time_window .. t_now + horizon + time_window`` are ever read, so the window holds
   :func:`density_rows` steps (``horizon + 2 * time_window + 18``, whatever ``max_steps``) and slides forward
   as the episode advances; the counts it drops are never read again (the same numbers as a map over every
   step of the episode, which took ``(max_steps + horizon + 2) x H*W`` floats: GBs on large maps).
   :func:`check_planner_memory` refuses, before allocating, arrays that do not fit.
3. **Spatially-balanced goal ordering.** An agent with free-order goals picks, among all orders of its
   remaining goals (exhaustive, ``K <= 6``), the one minimizing
   ``tour length + order_weight * sum over the tour's cells of S[t, cell]`` (cells sampled every
   ``path_stride`` steps and weighted by it; steps beyond the horizon cost nothing). At reset every agent
   starts from its shortest tour; then ``rounds`` best-response rounds follow, each visiting the agents in
   ``groups`` random groups (Gauss-Seidel): a group's plans are taken out of the map, each member's best
   response to everyone else is computed (vectorized over the group), and the new plans go back in.
   This is best-response dynamics in a congestion game (Rosenthal 1973), stopped after a few rounds.
4. **Congestion-weighted paths.** The low level follows a cost-to-go field ``F_i [H*W]`` to the agent's
   current goal, computed by Dijkstra (scipy, C) with entering cost ``1 + path_weight * rho_i(cell)``,
   ``rho_i`` = the time-aggregated density of the *other* agents' plans over the horizon (own plan
   subtracted exactly). Waypoints are the next ``num_waypoints`` cells of steepest descent on ``F_i``.
5. **Replanning** at reset (all agents, with rounds) and whenever an agent visits a goal (only the agents
   that visited one in that step: best response of their remaining goals from where they stand, new
   plans into the map, new fields).

With ``ordering="nearest"`` and ``order_weight = path_weight = 0`` this is the baselines' high level:
nearest-neighbour goal order and unweighted shortest paths.

What is shared: only the density map (the union of the team's plans). Over the comm layer each agent
would broadcast its own plan as ``horizon + 1`` cell indices (2 bytes each for maps up to 65k cells) when it
replans; every receiver adds it to its copy of ``counts`` (and removes the sender's previous plan), so each
agent holds the same map without a central server (see docs/immp.md).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import sparse
from scipy.sparse.csgraph import dijkstra

from coopsim.errors import ConfigError
from coopsim.platform.agent import AGENT_SEED_MAX
from coopsim.platform.memory import MEMORY_FRACTION, gib, over_limit
from coopsim.scenarios.mapf.metrics import bfs_distances

#: action id -> (dx, dy): 0 wait, 1 up (y-1), 2 down (y+1), 3 left (x-1), 4 right (x+1)
DELTAS = np.array([[0, 0], [0, -1], [0, 1], [-1, 0], [1, 0]], dtype=np.int64)
BIG = np.float32(1e9)
MAX_PERM_GOALS = 6
#: steps the density window holds beyond the ones read (``horizon + 2 * time_window + 1``): it slides every
#: ``DENSITY_SLACK + 1`` steps or so, moving ``L`` rows of ``H*W`` floats
DENSITY_SLACK = 17


class HighLevelParams(BaseModel):
    """Parameters of the IMMP high level (all costs in moves, times in steps)."""

    model_config = ConfigDict(extra="forbid")
    ordering: Literal["balanced", "nearest"] = Field(
        "balanced", description="'balanced': exhaustive order search with the congestion term and best-response rounds; "
                                "'nearest': nearest-neighbour goal order (baselines)")
    order_weight: float = Field(0.1, ge=0, le=100, description="moves charged per expected other agent on the tour, 0..100 "
                                "(0.1: tuned with the PIBT low level on held-out scen files 11-15, docs/immp.md)")
    path_weight: float = Field(0.02, ge=0, le=100, description="extra entering cost per unit of others' density, 0..100 "
                               "(0.02: tuned like order_weight)")
    rounds: int = Field(3, ge=0, le=20, description="best-response rounds at reset, 0..20")
    groups: int = Field(4, ge=1, le=64, description="Gauss-Seidel groups per round, 1..64")
    horizon: int = Field(64, ge=4, le=1024, description="plan length written into the density map (steps), 4..1024")
    time_window: int = Field(2, ge=0, le=16, description="temporal half-width of the density smoothing (steps), 0..16")
    spatial_weight: float = Field(0.5, ge=0, le=1, description="weight of the 4 neighbour cells in the smoothing, 0..1")
    path_stride: int = Field(2, ge=1, le=8, description="tour cells sampled every this many steps for the order cost, 1..8")
    num_waypoints: int = Field(4, ge=1, le=16, description="waypoints given to the low level, 1..16")
    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX, description="seed of the group shuffles, 0 .. 2**32-1 (combined with "
                      "the episode seed that the agent's reset(seed) passes on)")


def density_rows(horizon: int, time_window: int, max_steps: int) -> int:
    """Steps ``L`` of the density window: ``horizon + 2 * time_window + 1`` read around the current step plus
    :data:`DENSITY_SLACK`, or the whole episode (``max_steps + horizon + 2``) if that is shorter."""
    return int(min(max_steps + horizon + 2, horizon + 2 * time_window + 1 + DENSITY_SLACK))


def planner_bytes(h: int, w: int, num_agents: int, num_goals: int, params: "HighLevelParams", max_steps: int) -> int:
    """Peak bytes of one environment's high-level arrays: the density window (``float32 [L, H*W]``), the goal
    distance tables (``float32 [N, K, H*W + 1]``, plus two float64 ``[N*K, H*W]`` while they are built from
    :func:`bfs_distances`), the cost-to-go fields (``float32 [N, H*W + 1]``) and, when the congestion term is on,
    the smoothed density with its temporaries (at most three ``float32 [horizon + 2 * time_window + 2, H*W + 1]``
    at a time, :meth:`TeamPlanner.smoothed`)."""
    hw = h * w
    p = params
    rows = density_rows(p.horizon, p.time_window, max_steps)
    need = 4 * rows * hw + (4 + 16) * num_agents * num_goals * (hw + 1) + 4 * num_agents * (hw + 1)
    if (p.ordering == "balanced" and p.order_weight > 0) or p.path_weight > 0:
        need += 3 * 4 * (p.horizon + 2 * p.time_window + 2) * (hw + 1)
    return int(need)


def check_planner_memory(h: int, w: int, num_agents: int, num_goals: int, params: "HighLevelParams", max_steps: int,
                         horizon_key: str | None = None) -> None:
    """Refuse, before allocating, high-level arrays (:func:`planner_bytes`) larger than :data:`MEMORY_FRACTION` of
    the available memory.

    Raises:
        ConfigError: key ``scenario.params.map``; names the map size, the bytes needed and the limit, and what to
            lower (``horizon_key``, e.g. ``agents.params.highlevel.horizon``, when the agent exposes the horizon).
    """
    need = planner_bytes(h, w, num_agents, num_goals, params, max_steps)
    over = over_limit(need)
    if over is None:
        return
    limit, avail = over
    rows = density_rows(params.horizon, params.time_window, max_steps)
    lower = "scenario.params.num_agents or num_goals, or use a smaller map"
    if horizon_key:
        lower = f"{horizon_key} (now {params.horizon}), {lower}"
    raise ConfigError(
        f"the high-level planner of one environment needs {gib(need)} on a {h}x{w} map ({h * w} cells): a density "
        f"window of {rows} steps (horizon {params.horizon} + 2 x time_window {params.time_window} + {DENSITY_SLACK + 1}) "
        f"x cells x 4 bytes, distance tables of {num_agents} agents x {num_goals} goals x cells and the "
        f"cost-to-go fields; that is more than {MEMORY_FRACTION:.0%} of the available memory ({gib(limit)} of "
        f"{gib(avail)}): lower {lower}", key="scenario.params.map")


def neighbour_table(blocked: np.ndarray) -> np.ndarray:
    """int64 ``[H*W, 5]``: the cell reached by each action (wait, up, down, left, right); ``H*W`` if blocked/off-map."""
    blocked = np.asarray(blocked, bool)
    h, w = blocked.shape
    ys, xs = np.divmod(np.arange(h * w), w)
    out = np.full((h * w, 5), h * w, dtype=np.int64)
    for m, (dx, dy) in enumerate(DELTAS):
        nx, ny = xs + dx, ys + dy
        ok = (nx >= 0) & (nx < w) & (ny >= 0) & (ny < h)
        ok[ok] &= ~blocked[ny[ok], nx[ok]]
        out[ok, m] = ny[ok] * w + nx[ok]
    out[blocked.ravel()] = h * w
    return out


def descend(field: np.ndarray, nbr: np.ndarray, cells: np.ndarray, steps: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Steepest-descent walks on cost-to-go fields, vectorized over walks.

    Args:
        field: float32 ``[F, H*W + 1]`` cost-to-go fields (last column = blocked sentinel, BIG).
        nbr: int64 ``[H*W + 1, 5]`` neighbour table (the sentinel row points to itself).
        cells: int64 ``[M]`` start cells.
        steps: walk length.
        rows: int64 ``[M]`` field of each walk (default: walk ``i`` uses field ``i``, ``F == M``).

    Returns:
        int64 ``[M, steps + 1]`` cells; a walk stays put once no neighbour is strictly lower (its target).
    """
    m = len(cells)
    out = np.empty((m, steps + 1), dtype=np.int64)
    cur = np.asarray(cells, dtype=np.int64).copy()
    out[:, 0] = cur
    rows = (np.arange(m) if rows is None else np.asarray(rows, np.int64))[:, None]
    for s in range(1, steps + 1):
        cand = nbr[cur]                                  # [M, 5], wait first: ties keep the agent put
        val = field[rows, cand]
        cur = cand[np.arange(m), val.argmin(1)]
        out[:, s] = cur
    return out


@dataclass
class EnvPlan:
    """High-level state of one environment (see :class:`TeamPlanner`)."""

    h: int
    w: int
    nbr: np.ndarray          # int64 [HW + 1, 5]
    goals: np.ndarray        # int64 [N, K] flat goal cells
    dgoal: np.ndarray        # float32 [N, K, HW + 1] BFS distance from goal (BIG unreachable / sentinel)
    order: np.ndarray        # int64 [N, K] goal indices in visiting order
    visited: np.ndarray      # bool [N, K]
    counts: np.ndarray       # float32 [L, HW] planned agents per cell, row r = absolute step t_base + r
    plan: np.ndarray         # int64 [N, horizon + 1] planned cells from plan_t0
    plan_t0: np.ndarray      # int64 [N]
    fields: np.ndarray       # float32 [N, HW + 1] cost-to-go to the current goal (0 when finished)
    target: np.ndarray       # int64 [N] current goal index (-1 finished)
    t_last: int = -1
    replans: int = 0
    t_base: int = 0          # absolute step of counts' first row (the window slides forward, TeamPlanner._advance)


class TeamPlanner:
    """The IMMP high level for a batch of environments of an MG-MAPF core.

    Uses only the scenario's public capabilities: ``map_data(e).blocked``, ``agent_xy()``, ``goals_xy()``,
    ``goals_visited()``, ``params.goal_order`` and ``params.max_steps``.

    Args:
        params: :class:`HighLevelParams`.
    """

    def __init__(self, params: HighLevelParams | None = None, *, horizon_key: str | None = None):
        self.p = params or HighLevelParams()
        #: the config key of this planner's horizon, named by the memory check (None: the agent does not expose it)
        self.horizon_key = horizon_key
        self.envs: list[EnvPlan | None] = []
        self.reseed(None)
        self.stats = {"full_replans": 0, "agent_replans": 0}

    def reseed(self, seed: int | None = None) -> None:
        """Restart the generator of the best-response group shuffles: from ``params.seed`` alone (``None``, as at
        construction), or from it and an episode seed. The agents call this from ``reset(seed)``, so an episode's
        plans depend on its own seed only, not on the episodes run before it (the platform's rule: episode ``e`` of
        seed ``s`` resets every component with ``s * episodes + e``)."""
        self.rng = np.random.default_rng([self.p.seed, 17] if seed is None else [self.p.seed, 17, int(seed)])

    # ----------------------------------------------------------------------------------------------
    def reset_env(self, e: int, blocked: np.ndarray, starts_xy: np.ndarray, goals_xy: np.ndarray, visited: np.ndarray,
                  goal_order: str, max_steps: int, t_now: int = 0) -> EnvPlan:
        """Plan env ``e`` from scratch: distance tables, orders (with best-response rounds), density, fields.

        Args:
            blocked: bool ``[H, W]``; starts_xy: int ``[N, 2]`` current cells (x, y);
            goals_xy: int ``[N, K, 2]``; visited: bool ``[N, K]``; goal_order: 'free' or 'fixed';
            max_steps: episode limit (steps); t_now: current step.
        """
        blocked = np.asarray(blocked, bool)
        h, w = blocked.shape
        n, k = goals_xy.shape[:2]
        hw = h * w
        check_planner_memory(h, w, n, k, self.p, max_steps, getattr(self, "horizon_key", None))
        nbr = np.concatenate([neighbour_table(blocked), np.full((1, 5), hw, np.int64)])
        goals = (goals_xy[..., 1].astype(np.int64) * w + goals_xy[..., 0])
        d = bfs_distances(blocked, goals_xy.reshape(-1, 2)).reshape(n, k, hw)
        dgoal = np.full((n, k, hw + 1), BIG, np.float32)
        dgoal[..., :hw] = np.where(np.isfinite(d), d, BIG)
        hz, tw = self.p.horizon, self.p.time_window
        rows = density_rows(hz, tw, max_steps)
        env = EnvPlan(h=h, w=w, nbr=nbr, goals=goals, dgoal=dgoal, order=np.tile(np.arange(k), (n, 1)),
                      visited=np.asarray(visited, bool).copy(), counts=np.zeros((rows, hw), np.float32),
                      plan=np.zeros((n, hz + 1), np.int64), plan_t0=np.full(n, t_now, np.int64),
                      fields=np.zeros((n, hw + 1), np.float32), target=np.full(n, -1, np.int64), t_last=t_now,
                      t_base=max(t_now - tw, 0))
        while len(self.envs) <= e:
            self.envs.append(None)
        self.envs[e] = env
        cells = starts_xy[:, 1].astype(np.int64) * w + starts_xy[:, 0]
        everyone = np.arange(n)
        # initial orders: shortest tour (balanced) or nearest neighbour, no congestion
        self._choose_orders(env, everyone, cells, t_now, goal_order, congestion=False)
        self._write_plans(env, everyone, cells, t_now)
        if self.p.ordering == "balanced" and goal_order == "free" and self.p.order_weight > 0:
            for _ in range(self.p.rounds):
                for grp in np.array_split(self.rng.permutation(n), self.p.groups):
                    if len(grp) == 0:
                        continue
                    self._erase_plans(env, grp)
                    self._choose_orders(env, grp, cells[grp], t_now, goal_order, congestion=True)
                    self._write_plans(env, grp, cells[grp], t_now)
        self._update_fields(env, everyone)
        self.stats["full_replans"] += 1
        return env

    def on_progress(self, e: int, cells_xy: np.ndarray, visited: np.ndarray, goal_order: str, t_now: int) -> np.ndarray:
        """Replan the agents of env ``e`` whose visited set grew since the last call.

        Args:
            cells_xy: int ``[N, 2]`` current cells; visited: bool ``[N, K]``; t_now: current step.

        Returns:
            int64 indices of the replanned agents.
        """
        env = self.envs[e]
        self._advance(env, t_now)
        visited = np.asarray(visited, bool)
        changed = np.flatnonzero((visited & ~env.visited).any(1))
        env.visited = visited.copy()
        env.t_last = t_now
        if len(changed) == 0:
            return changed
        cells = cells_xy[changed, 1].astype(np.int64) * env.w + cells_xy[changed, 0]
        self._erase_plans(env, changed)
        self._choose_orders(env, changed, cells, t_now, goal_order,
                            congestion=self.p.ordering == "balanced" and self.p.order_weight > 0)
        self._write_plans(env, changed, cells, t_now)
        self._update_fields(env, changed)
        self.stats["agent_replans"] += len(changed)
        env.replans += 1
        return changed

    # --- density map ------------------------------------------------------------------------------
    def _advance(self, env: EnvPlan, t_now: int) -> None:
        """Slide the density window so that it holds steps ``t_now - time_window .. t_now + horizon`` (what a
        plan written now reaches; later steps hold no plan yet, so reading past the window's end reads zeros, as
        the full map did). Dropped rows are steps before ``t_now - time_window``, which nothing reads again."""
        hz, tw = self.p.horizon, self.p.time_window
        rows = len(env.counts)
        if t_now + hz < env.t_base + rows:
            return
        base = max(t_now - tw, 0)
        d = base - env.t_base
        if d >= rows:
            env.counts[:] = 0.0
        else:  # rows move down by d in blocks of d, each block's source and target apart: no temporary copy
            for i in range(0, rows - d, d):  # (a whole-window copy was a second window's memory, fresh35b N8)
                j = min(i + d, rows - d)
                env.counts[i:j] = env.counts[i + d:j + d]
            env.counts[rows - d:] = 0.0
        env.t_base = base

    def density_at(self, e: int, t: int) -> np.ndarray:
        """float32 ``[H*W]``: planned agents per cell at absolute step ``t`` of env ``e`` (zeros outside the window:
        steps before ``t_now - time_window`` are dropped, steps after ``t_now + horizon`` have no plan yet)."""
        env = self.envs[e]
        r = t - env.t_base
        return env.counts[r].copy() if 0 <= r < len(env.counts) else np.zeros(env.counts.shape[1], np.float32)

    def _plan_cells(self, env: EnvPlan, agents: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """int64 ``[G, horizon + 1]``: cells along unweighted shortest paths through the remaining goals in order."""
        hz = self.p.horizon
        g = len(agents)
        out = np.empty((g, hz + 1), np.int64)
        cur = cells.copy()
        out[:, 0] = cur
        rows = np.arange(g)
        rem = ~env.visited[agents]                                      # [G, K]
        ordr = env.order[agents]
        # stage s = position in the order of the goal being walked to; skip visited ones
        stage = np.zeros(g, np.int64)
        k = env.goals.shape[1]
        done_mask = rem[rows[:, None], ordr] == False  # noqa: E712 - visited goals in order position
        for s in range(1, hz + 1):
            while True:  # advance past visited goals and reached ones
                st = np.minimum(stage, k - 1)
                reached = (stage < k) & (done_mask[rows, st] | (env.goals[agents, ordr[rows, st]] == cur))
                if not reached.any():
                    break
                done_mask[rows[reached], st[reached]] = True
                stage = stage + reached
            st = np.minimum(stage, k - 1)
            active = stage < k
            cand = env.nbr[cur]
            val = env.dgoal[agents[:, None], ordr[rows, st][:, None], cand]   # [G, 5]
            nxt = cand[rows, val.argmin(1)]
            cur = np.where(active, nxt, cur)
            out[:, s] = cur
        return out

    def _write_plans(self, env: EnvPlan, agents: np.ndarray, cells: np.ndarray, t_now: int) -> None:
        plan = self._plan_cells(env, agents, cells)
        env.plan[agents] = plan
        env.plan_t0[agents] = t_now
        self._advance(env, t_now)
        r = t_now - env.t_base + np.arange(plan.shape[1])
        np.add.at(env.counts, (np.broadcast_to(r, plan.shape), plan), 1.0)

    def _erase_plans(self, env: EnvPlan, agents: np.ndarray) -> None:
        plan = env.plan[agents]
        r = env.plan_t0[agents][:, None] - env.t_base + np.arange(plan.shape[1])[None, :]
        keep = r >= 0                                                    # steps before the window: dropped already
        np.subtract.at(env.counts, (r[keep], plan[keep]), 1.0)

    def smoothed(self, env: EnvPlan, t_now: int) -> np.ndarray:
        """float32 ``[horizon + 1, H*W + 1]``: smoothed density of the plans now in the map, steps ``t_now..``
        (last column 0, the blocked sentinel)."""
        hz, tw = self.p.horizon, self.p.time_window
        lo = max(t_now - tw, 0)
        c = env.counts[lo - env.t_base:t_now + hz + tw + 1 - env.t_base]
        cs = np.zeros((len(c) + 1, c.shape[1]), np.float32)
        np.cumsum(c, 0, out=cs[1:])
        idx = np.arange(t_now, t_now + hz + 1) - lo
        a = np.clip(idx - tw, 0, len(c))
        b = np.clip(idx + tw + 1, 0, len(c))
        out = np.zeros((hz + 1, c.shape[1] + 1), np.float32)
        out[:, :-1] = cs[b]
        out[:, :-1] -= cs[a]                                             # box filter over time: [hz+1, HW]
        del cs                                                           # (at most three such arrays at a time)
        if self.p.spatial_weight > 0:
            nb = env.nbr[:-1, 1:]                                        # [HW, 4]
            side = out[:, nb[:, 0]]                                      # one neighbour at a time: [hz+1, HW], not
            for j in (1, 2, 3):                                          # [hz+1, HW, 4] (integer counts: exact sums)
                side += out[:, nb[:, j]]
            out[:, :-1] += self.p.spatial_weight * side
        out[:, -1] = 0.0
        return out

    # --- goal ordering ----------------------------------------------------------------------------
    def _choose_orders(self, env: EnvPlan, agents: np.ndarray, cells: np.ndarray, t_now: int, goal_order: str,
                       congestion: bool) -> None:
        k = env.goals.shape[1]
        if goal_order == "fixed":
            env.order[agents] = np.arange(k)
            return
        vis = env.visited[agents]
        nrem = (~vis).sum(1)
        dens = self.smoothed(env, t_now) if congestion else None
        for r in np.unique(nrem):
            sel = nrem == r
            ag, c0 = agents[sel], cells[sel]
            if r == 0:
                continue
            rem = np.argsort(vis[sel], axis=1, kind="stable")[:, :r]     # indices of remaining goals [G, r]
            if self.p.ordering == "nearest" or r > MAX_PERM_GOALS:
                best = self._nearest(env, ag, c0, rem)
            else:
                best = self._best_perm(env, ag, c0, rem, t_now, dens)
            done_part = np.argsort(~vis[sel], axis=1, kind="stable")[:, :k - r]
            env.order[ag] = np.concatenate([best, done_part], axis=1)

    def _nearest(self, env: EnvPlan, ag: np.ndarray, c0: np.ndarray, rem: np.ndarray) -> np.ndarray:
        g, r = rem.shape
        rows = np.arange(g)
        left = np.ones((g, r), bool)
        cur = c0.copy()
        out = np.empty((g, r), np.int64)
        for s in range(r):
            d = env.dgoal[ag[:, None], rem, cur[:, None]]               # [G, r]
            d = np.where(left, d, np.inf)
            j = d.argmin(1)
            out[:, s] = rem[rows, j]
            left[rows, j] = False
            cur = env.goals[ag, rem[rows, j]]
        return out

    def _best_perm(self, env: EnvPlan, ag: np.ndarray, c0: np.ndarray, rem: np.ndarray, t_now: int,
                   dens: np.ndarray | None) -> np.ndarray:
        """Best order of the remaining goals ``rem [G, r]``: tour length (+ congestion if ``dens``)."""
        g, r = rem.shape
        perms = np.array(list(itertools.permutations(range(r))), dtype=np.int64)   # [P, r]
        gc = env.goals[ag[:, None], rem]                                # [G, r] goal cells
        nodes = np.concatenate([c0[:, None], gc], axis=1)               # [G, r+1]: 0 = here, 1.. goals
        # dist[a, b] = d(node a -> goal b)
        dist = env.dgoal[ag[:, None, None], rem[:, None, :], nodes[:, :, None]]    # [G, r+1, r]
        prev = np.concatenate([np.zeros((len(perms), 1), np.int64), perms[:, :-1] + 1], axis=1)  # [P, r] from-node
        seg = dist[:, prev, perms]                                      # [G, P, r]
        tour = seg.sum(-1)                                              # [G, P]
        cost = tour.astype(np.float64)
        if dens is not None and self.p.order_weight > 0:
            hz, st = self.p.horizon, self.p.path_stride
            L = hz
            # walk every (from-node, goal) segment once, then read the density along it at each order's times
            a_idx, b_idx = np.meshgrid(np.arange(r + 1), np.arange(r), indexing="ij")  # [r+1, r]
            starts = nodes[:, a_idx.ravel()].reshape(-1)                               # [G*(r+1)*r]
            kk = env.goals.shape[1]
            frow = np.repeat(ag, (r + 1) * r) * kk + np.tile(rem[:, None, :], (1, r + 1, 1)).reshape(-1)
            walks = descend(env.dgoal.reshape(-1, env.dgoal.shape[-1]), env.nbr, starts, L,
                            rows=frow).reshape(g, r + 1, r, L + 1)                     # [G, r+1, r, L+1]
            s_idx = np.arange(0, L + 1, st)                                             # sampled steps
            t0 = np.concatenate([np.zeros((g, len(perms), 1)), np.cumsum(seg, -1)[..., :-1]], axis=-1)  # [G, P, r]
            t0 = np.minimum(t0, hz + 1).astype(np.int64)
            cells = walks[:, prev, perms][..., s_idx]                   # [G, P, r, S]
            tt = t0[..., None] + s_idx                                  # [G, P, r, S]
            within = (tt <= hz) & (s_idx <= np.minimum(seg, hz)[..., None])
            val = dens[np.minimum(tt, hz), cells] * within
            cost = cost + self.p.order_weight * st * val.sum((-1, -2))
        best = cost.argmin(1)
        return rem[np.arange(g)[:, None], perms[best]]

    # --- weighted fields --------------------------------------------------------------------------
    def _update_fields(self, env: EnvPlan, agents: np.ndarray) -> None:
        hw = env.h * env.w
        rows = np.arange(len(agents))
        vis = env.visited[agents]
        ordr = env.order[agents]
        nxt_pos = (~vis[rows[:, None], ordr]).argmax(1)
        finished = vis.all(1)
        tgt = np.where(finished, -1, ordr[rows, nxt_pos])
        env.target[agents] = tgt
        if self.p.path_weight == 0:
            f = env.dgoal[agents, np.maximum(tgt, 0)].copy()
            f[finished] = 0.0
            f[:, hw] = BIG
            env.fields[agents] = f
            return
        # others' time-aggregated density (own plan subtracted exactly)
        hz = self.p.horizon
        t_now = int(env.plan_t0[agents].max()) if len(agents) else 0
        total = env.counts[t_now - env.t_base:t_now + hz + 1 - env.t_base].sum(0)   # [HW]
        src = np.repeat(np.arange(hw), 4)
        dst = env.nbr[:-1, 1:].reshape(-1)
        ok = dst < hw
        src, dst = src[ok], dst[ok]
        for i, a in enumerate(agents):
            if finished[i]:
                env.fields[a] = 0.0
                env.fields[a, hw] = BIG
                continue
            own = np.bincount(env.plan[a], minlength=hw)[:hw].astype(np.float32)
            rho = np.maximum(total - own, 0.0)
            if self.p.spatial_weight > 0:
                rho = rho + self.p.spatial_weight * np.where(env.nbr[:-1, 1:] < hw,
                                                             np.append(rho, 0.0)[env.nbr[:-1, 1:]], 0.0).sum(1)
            cost = 1.0 + self.p.path_weight * rho
            # reversed graph: edge v -> u carries the cost of entering v (Dijkstra from the goal)
            gph = sparse.csr_matrix((cost[dst], (dst, src)), shape=(hw, hw))
            f = dijkstra(gph, directed=True, indices=int(env.goals[a, tgt[i]]))
            env.fields[a, :hw] = np.where(np.isfinite(f), f, BIG)
            env.fields[a, hw] = BIG

    # --- features for the low level ---------------------------------------------------------------
    def features(self, e: int, cells_xy: np.ndarray, radius: int) -> np.ndarray:
        """float32 ``[N, 5 + 5 + 2M + 2]`` low-level input of env ``e`` (``M = num_waypoints``).

        Columns: ``[0:5]`` field decrease of each action (wait 0; a step down the field is 1 for unit cost;
        clipped to [-2, 2]; blocked -2); ``[5:10]`` one-hot of the steepest-descent action (wait if at the
        goal or finished); ``[10:10+2M]`` waypoint offsets (dx, dy) / radius of the next M descent cells;
        then ``finished`` (1/0) and the cost-to-go / (H + W), clipped to [0, 4].
        """
        env = self.envs[e]
        hw = env.h * env.w
        n = len(cells_xy)
        m = self.p.num_waypoints
        cells = cells_xy[:, 1].astype(np.int64) * env.w + cells_xy[:, 0]
        rows = np.arange(n)
        cand = env.nbr[cells]                                           # [N, 5]
        f = env.fields
        fc = f[rows, cells]
        fn = f[rows[:, None], cand]
        dec = np.clip(fc[:, None] - fn, -2.0, 2.0)
        dec[cand == hw] = -2.0
        fin = env.target < 0
        out = np.zeros((n, 12 + 2 * m), np.float32)
        out[:, 0:5] = np.where(fin[:, None], np.where(cand == hw, -2.0, 0.0), dec)
        best = np.where(fin, 0, fn.argmin(1))
        out[rows, 5 + best] = 1.0
        walk = descend(f, env.nbr, cells, m)[:, 1:]                     # [N, M]
        wy, wx = np.divmod(walk, env.w)
        out[:, 10:10 + 2 * m:2] = (wx - cells_xy[:, :1]) / radius
        out[:, 11:11 + 2 * m:2] = (wy - cells_xy[:, 1:2]) / radius
        out[:, 10 + 2 * m] = fin
        out[:, 11 + 2 * m] = np.clip(np.where(fin, 0.0, fc) / (env.h + env.w), 0.0, 4.0)
        return out

    @staticmethod
    def feature_dim(num_waypoints: int) -> int:
        return 12 + 2 * num_waypoints

    def preferred_actions(self, e: int, cells_xy: np.ndarray) -> np.ndarray:
        """int64 ``[N]``: the steepest-descent action of each agent of env ``e`` (0 at the goal / finished)."""
        env = self.envs[e]
        cells = cells_xy[:, 1].astype(np.int64) * env.w + cells_xy[:, 0]
        rows = np.arange(len(cells))
        fn = env.fields[rows[:, None], env.nbr[cells]]
        return np.where(env.target < 0, 0, fn.argmin(1))


class ScenarioPlanner:
    """Keeps a :class:`TeamPlanner` in sync with a batched MG-MAPF core (resets and goal visits).

    :meth:`sync` is called once per decision step, before acting: envs whose step counter went back (a reset)
    are planned from scratch, the others replan the agents that visited a goal since the last call.
    """

    def __init__(self, core, params: HighLevelParams | None = None, *, horizon_key: str | None = None):
        self.core = core
        self.planner = TeamPlanner(params, horizon_key=horizon_key)
        self.force = np.ones(core.num_envs, bool)

    def invalidate(self) -> None:
        """Mark every env for a full replan (call after ``core.reset``)."""
        self.force[:] = True

    def reset(self, seed: int | None = None) -> None:
        """New episodes: every env is replanned from scratch at the next :meth:`sync`, with the planner's generator
        reseeded from ``seed`` (:meth:`TeamPlanner.reseed`; ``None``: from the high level's own seed)."""
        self.planner.reseed(seed)
        self.invalidate()

    def step_counters(self) -> np.ndarray:
        ms = self.core.params.max_steps
        return np.rint(self.core.state()[:, -1] * ms).astype(np.int64)

    def sync(self) -> np.ndarray:
        """Replan what changed since the last call; returns the step counters int64 ``[E]``."""
        core, pl = self.core, self.planner
        t = self.step_counters()
        xy = core.agent_xy()
        vis = core.goals_visited()
        order = core.params.goal_order
        goals = None
        for e in range(core.num_envs):
            env = pl.envs[e] if e < len(pl.envs) else None
            if self.force[e] or env is None or t[e] < env.t_last or (t[e] == 0 and env.t_last != 0):
                goals = core.goals_xy() if goals is None else goals
                pl.reset_env(e, core.map_data(e).blocked, xy[e], goals[e], vis[e], order,
                             core.params.max_steps, int(t[e]))
                self.force[e] = False
            else:
                pl.on_progress(e, xy[e], vis[e], order, int(t[e]))
        return t

    def features(self) -> np.ndarray:
        """float32 ``[E, N, feature_dim]`` (call :meth:`sync` first)."""
        xy = self.core.agent_xy()
        r = self.core.params.obs_radius
        return np.stack([self.planner.features(e, xy[e], r) for e in range(self.core.num_envs)])

    def preferred_actions(self) -> np.ndarray:
        xy = self.core.agent_xy()
        return np.stack([self.planner.preferred_actions(e, xy[e]) for e in range(self.core.num_envs)])
