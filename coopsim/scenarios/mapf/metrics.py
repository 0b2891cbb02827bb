"""MG-MAPF lower bound: per agent the shortest tour through its goals from its start (4-connected moves).

* ``fixed`` order: the length of the walk start -> g1 -> g2 -> ... -> gK along shortest paths.
* ``free`` order: the shortest open tour visiting every goal once in the best order, found exactly by
  Held-Karp dynamic programming over goal subsets (Held & Karp, "A dynamic programming approach to
  sequencing problems", 1962), vectorized over agents, for ``K <= EXACT_MAX_GOALS``; above that, the
  weight of a minimum spanning tree over {start, goals} (every open tour is a spanning path, so this is
  a valid, weaker lower bound).

The sum over agents is the instance's LB; ``SoC / LB >= 1`` for every executed MG-MAPF solution (every agent
finished all its goals), since each agent's finishing step is at least its own tour length (moves of other agents
can only delay it). An episode cut off at ``max_steps`` is no solution: charging its unfinished agents
``max_steps`` can give SoC < LB, so ``MGMAPFCore.episode_metrics`` reports ``soc_over_lb`` on solved episodes only
(nan otherwise).
"""
from __future__ import annotations

import numpy as np

EXACT_MAX_GOALS = 10

from coopsim.platform.memory import MEMORY_FRACTION, gib, over_limit
from coopsim.scenarios.mapf.grid import as_cells, grid_shape


def check_distance_memory(num_sources: int, num_unique: int, h: int, w: int) -> None:
    """Refuse, before allocating, distance maps (float64 ``[num_unique + num_sources, H*W]`` at the peak of
    :func:`bfs_distances`) larger than :data:`MEMORY_FRACTION` of the available memory.

    Raises:
        ConfigError: key ``scenario.params.num_agents``; names the bytes needed, the limit, and the largest
            number of goal cells that fits on this map size.
    """
    from coopsim.errors import ConfigError

    per_source = h * w * 8
    need = (num_unique + num_sources) * per_source
    over = over_limit(need)
    if over is None:
        return
    limit, avail = over
    fits = max(limit // (2 * per_source), 0)
    raise ConfigError(
        f"the agent's distance maps need {gib(need)} (({num_unique} distinct source cells + {num_sources} rows, "
        f"one per agent goal) x {h}x{w} cells x 8 bytes), more than {MEMORY_FRACTION:.0%} of the available memory "
        f"({gib(limit)} of {gib(avail)}); on a {h}x{w} map at most about {fits} goal cells fit "
        f"(num_agents x num_goals): lower scenario.params.num_agents or num_goals, or use a smaller map "
        f"(scenario.params.random_size / map)", key="scenario.params.num_agents")


def replay_bytes_per_step_agent(num_envs: int) -> int:
    """Bytes per (step, agent) an episode's replay takes at its peak: the int32 trajectory of every env (twice that
    while it doubles: the old rows and the new array), or that plus, at the episode's end, the replay's int32
    ``positions`` (x, y) of one env and its compressed ``.npz`` (up to that size again)."""
    traj = 4 * num_envs
    return traj + max(traj, 2 * 4 + 2 * 4)


def check_replay_memory(max_steps: int, num_agents: int, num_envs: int = 1) -> None:
    """Refuse, before an episode starts, a replay (``(max_steps + 1) x num_agents`` positions, recorded every step;
    :func:`replay_bytes_per_step_agent` bytes each) larger than :data:`MEMORY_FRACTION` of the available memory:
    a long episode of many agents would otherwise fail at its end, with nothing kept.

    Raises:
        ConfigError: key ``scenario.params.max_steps`` (also ``scenario.params.num_agents``); names the bytes
            needed, the limit, and the largest max_steps (at this num_agents) and num_agents (at this max_steps)
            that fit.
    """
    from coopsim.errors import ConfigError

    per = replay_bytes_per_step_agent(num_envs)
    rows = max_steps + 1
    need = rows * num_agents * per
    over = over_limit(need)
    if over is None:
        return
    limit, avail = over
    fit_steps, fit_agents = limit // (num_agents * per) - 1, limit // (rows * per)
    fits = [f"max_steps <= {fit_steps} at num_agents {num_agents}"] if fit_steps >= 1 else []
    fits += [f"num_agents <= {fit_agents} at max_steps {max_steps}"] if fit_agents >= 1 else []
    envs = f" x {num_envs} envs" if num_envs > 1 else ""
    raise ConfigError(
        f"invalid value {max_steps} (with scenario.params.num_agents {num_agents}): the episode replay needs "
        f"{gib(need)} ({rows} steps x {num_agents} agents{envs}, {per} bytes per agent-step: the recorded positions "
        f"and the replay file written at the episode's end), more than {MEMORY_FRACTION:.0%} of the available memory "
        f"({gib(limit)} of {gib(avail)}); "
        + (f"what fits: {', or '.join(fits)}" if fits else "lower max_steps and num_agents")
        + " (max_steps is the top-level max_steps or scenario.params.max_steps)",
        key="max_steps", value=max_steps, also=("num_agents",))


def _grid_graph(blocked: np.ndarray):
    from scipy import sparse

    h, w = blocked.shape
    free = ~blocked
    idx = np.arange(h * w).reshape(h, w)
    r = free[:, :-1] & free[:, 1:]
    d = free[:-1, :] & free[1:, :]
    a = np.concatenate([idx[:, :-1][r], idx[:-1, :][d]])
    b = np.concatenate([idx[:, 1:][r], idx[1:, :][d]])
    return sparse.coo_matrix((np.ones(2 * len(a)), (np.concatenate([a, b]), np.concatenate([b, a]))),
                             shape=(h * w, h * w)).tocsr()


def bfs_distances(blocked: np.ndarray, sources_xy: np.ndarray) -> np.ndarray:
    """4-connected move distances from each source to every cell (breadth-first search in C via scipy).

    Args:
        blocked: bool ``[H, W]`` (indexed ``[y, x]``).
        sources_xy: int ``[M, 2]`` cells (x, y) inside the grid (any integer dtype, or floats holding whole numbers).

    Returns:
        float64 ``[M, H, W]`` distances in moves; ``inf`` where unreachable (and on obstacles).

    Raises:
        ValueError: ``blocked`` not 2-D, or a source that is not a whole-number cell inside the grid (naming the cell
            and the grid size: :func:`coopsim.scenarios.mapf.grid.as_cells`).
        ConfigError: the distance maps would not fit the memory (:func:`check_distance_memory`).
    """
    from scipy.sparse.csgraph import shortest_path

    blocked, h, w = grid_shape(blocked)
    src = as_cells(sources_xy, h, w, "sources_xy").reshape(-1, 2)
    uniq, inv = np.unique(src[:, 1] * w + src[:, 0], return_inverse=True)
    check_distance_memory(len(src), len(uniq), h, w)
    dist = shortest_path(_grid_graph(blocked), method="D", directed=True, unweighted=True, indices=uniq)
    dist = dist.reshape(len(uniq), h, w)[inv.ravel()]
    dist[:, blocked] = np.inf
    return dist


def bfs_pair_distances(blocked: np.ndarray, sources_xy: np.ndarray, targets_xy: np.ndarray, chunk: int = 512) -> np.ndarray:
    """4-connected move distances from source ``i`` to each of its targets ``targets_xy[i]``.

    Breadth-first searches run from the distinct sources, ``chunk`` per scipy call, so memory stays at
    ``chunk * H * W`` floats whatever the number of sources.

    Args:
        blocked: bool ``[H, W]`` (indexed ``[y, x]``).
        sources_xy: int ``[M, 2]`` (x, y) inside the grid.
        targets_xy: int ``[M, T, 2]`` (x, y) inside the grid, row ``i`` the targets of source ``i`` (``[M, 2]`` is
            taken as ``T = 1``). Cells of any integer dtype, or floats holding whole numbers.
        chunk: sources per scipy call (>= 1).

    Returns:
        float64 ``[M, T]``; ``inf`` where unreachable or a cell is blocked.

    Raises:
        ValueError: ``blocked`` not 2-D; a cell that is not a whole number or lies outside the grid (naming the cell
            and the grid size); ``targets_xy`` without one row per source; ``chunk < 1``.
    """
    from scipy.sparse.csgraph import shortest_path

    blocked, h, w = grid_shape(blocked)
    src = as_cells(sources_xy, h, w, "sources_xy").reshape(-1, 2)
    tgt = as_cells(targets_xy, h, w, "targets_xy")
    if tgt.ndim == 2 and len(tgt) == len(src):
        tgt = tgt[:, None, :]
    if tgt.ndim != 3 or len(tgt) != len(src):
        if not (tgt.size == 0 and len(src) == 0):
            raise ValueError(f"targets_xy must be [M, T, 2] with one row per source (M = {len(src)}); got shape "
                             f"{np.shape(targets_xy)}")
        tgt = tgt.reshape(0, 0, 2)
    if int(chunk) < 1:
        raise ValueError(f"chunk must be >= 1 (sources per scipy call); got {chunk}")
    tflat = tgt[..., 1] * w + tgt[..., 0]
    uniq, inv = np.unique(src[:, 1] * w + src[:, 0], return_inverse=True)
    inv = inv.ravel()
    graph = _grid_graph(blocked)
    out = np.empty(tflat.shape)
    for c0 in range(0, len(uniq), chunk):
        d = shortest_path(graph, method="D", directed=True, unweighted=True, indices=uniq[c0:c0 + chunk])
        sel = np.flatnonzero((inv >= c0) & (inv < c0 + chunk))
        out[sel] = d[(inv[sel] - c0)[:, None], tflat[sel]]
    out[blocked.ravel()[tflat]] = np.inf
    out[blocked.ravel()[src[:, 1] * w + src[:, 0]]] = np.inf
    return out


def _held_karp(d0: np.ndarray, dg: np.ndarray) -> np.ndarray:
    """Shortest open tour from a start through all K goals; ``d0 [N, K]``, ``dg [N, K, K]``; returns ``[N]``."""
    n, k = d0.shape
    full = (1 << k) - 1
    dp = np.full((n, 1 << k, k), np.inf)
    bits = 1 << np.arange(k)
    dp[:, bits, np.arange(k)] = d0
    in_mask = (np.arange(1 << k)[:, None] & bits[None, :]) != 0  # [2^K, K]
    for mask in range(1, full):
        cur = dp[:, mask, :]                                     # [N, K] ending at each goal
        if not np.isfinite(cur).any():
            continue
        cand = (cur[:, :, None] + dg).min(axis=1)                # [N, K] best cost to append goal j
        nxt = np.flatnonzero(~in_mask[mask])
        tgt = mask | bits[nxt]
        dp[:, tgt, nxt] = np.minimum(dp[:, tgt, nxt], cand[:, nxt])
    return dp[:, full, :].min(axis=1)


def _mst_bound(d0: np.ndarray, dg: np.ndarray) -> np.ndarray:
    from scipy.sparse.csgraph import minimum_spanning_tree

    n, k = d0.shape
    out = np.empty(n)
    for i in range(n):  # only for K > EXACT_MAX_GOALS, off the step path
        m = np.zeros((k + 1, k + 1))
        m[0, 1:] = d0[i]
        m[1:, 0] = d0[i]
        m[1:, 1:] = dg[i]
        if not np.isfinite(m).all():
            out[i] = np.inf
            continue
        m = np.where(m == 0, 1e-12, m)  # scipy treats 0 as "no edge"; distinct cells are >= 1 apart
        np.fill_diagonal(m, 0.0)
        out[i] = round(float(minimum_spanning_tree(m).sum()))
    return out


def tour_lower_bound(blocked: np.ndarray, starts_xy: np.ndarray, goals_xy: np.ndarray, goal_order: str) -> np.ndarray:
    """Per-agent shortest tour through its goals from its start, in 4-connected moves.

    Args:
        blocked: bool ``[H, W]`` (indexed ``[y, x]``).
        starts_xy: int ``[N, 2]`` (x, y) inside the grid.
        goals_xy: int ``[N, K, 2]`` (x, y) inside the grid, in the given order (``[N, 2]`` is taken as ``K = 1``).
            Cells of any integer dtype, or floats holding whole numbers.
        goal_order: ``"fixed"`` (the given order) or ``"free"`` (best order; exact for K <= 10).

    Returns:
        float64 ``[N]`` tour lengths in moves (``inf`` if a goal is unreachable from the start or from another goal:
        walls separate them, so no plan finishes that agent and the bound is undefined).

    Raises:
        ValueError: unknown ``goal_order``; ``blocked`` not 2-D; a cell that is not a whole number or lies outside
            the grid (naming the cell and the grid size); ``goals_xy`` without one row per start.
    """
    if goal_order not in ("fixed", "free"):
        raise ValueError(f"goal_order must be 'fixed' or 'free'; got {goal_order!r}")
    blocked, h, w = grid_shape(blocked)
    starts = as_cells(starts_xy, h, w, "starts_xy").reshape(-1, 2)
    goals = as_cells(goals_xy, h, w, "goals_xy")
    if goals.ndim == 2 and len(goals) == len(starts) and len(starts):
        goals = goals[:, None, :]
    if goals.ndim != 3 or len(goals) != len(starts):
        if len(starts) == 0 and goals.size == 0:
            return np.zeros(0)
        raise ValueError(f"goals_xy must be [N, K, 2] with one row per start (N = {len(starts)}); got shape "
                         f"{np.shape(goals_xy)}")
    n, k = goals.shape[:2]
    if n == 0:
        return np.zeros(0)
    # from every goal (n, k) to the agent's start and to each of its goals
    targets = np.concatenate([starts[:, None, :], goals], axis=1)                    # [N, K+1, 2]
    d = bfs_pair_distances(blocked, goals.reshape(-1, 2), np.repeat(targets, k, axis=0)).reshape(n, k, k + 1)
    d0 = d[:, :, 0]                                                                 # [N, K] start -> goal
    dg = d[:, :, 1:]                                                                # [N, K, K] goal -> goal
    if goal_order == "fixed" or k == 1:
        legs = dg[:, np.arange(k - 1), np.arange(1, k)] if k > 1 else np.zeros((n, 0))
        return d0[:, 0] + legs.sum(axis=1)
    if k <= EXACT_MAX_GOALS:
        return _held_karp(d0, dg)
    return _mst_bound(d0, dg)
