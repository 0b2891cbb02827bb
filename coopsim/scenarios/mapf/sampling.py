"""Seeded MG-MAPF instance sampling: starts and goal sequences for N agents with K goals each.

Rule (issue 2, "Instances"):

* From a scen file: agent ``i`` (``i < N``) takes the start and the goal of row ``i`` of the file as its
  start and first goal. Each agent then gets ``K - 1`` more goals, sampled uniformly (seeded) from the
  free cells of its start's 4-connected region, distinct from every start, from every first goal and
  from every other sampled goal, so K goals per agent work for any N the region can hold.
* Without a scen file (generated or unlisted maps): the N starts and the first goals are sampled the same
  way, so every start and every goal of the instance is a distinct free cell.

Sampling is vectorized: the candidate cells get random keys, are sorted by (region, key), and the
``r``-th agent of a region with ``n`` agents takes the candidates of rank ``r, r + n, r + 2n, ...``
of that region (a uniformly random assignment of distinct cells).
"""
from __future__ import annotations

import numpy as np

from coopsim.errors import ConfigError
from coopsim.scenarios.mapf.grid import as_cells, components, grid_shape
from coopsim.scenarios.mapf.loaders import MapData, ScenData


def sample_extra_goals(blocked: np.ndarray, starts_xy: np.ndarray, taken_xy: np.ndarray, count: int,
                       rng: np.random.Generator, labels: np.ndarray | None = None, *,
                       extra: bool = True) -> np.ndarray:
    """``count`` goals per agent from free cells of its start's 4-connected region, all distinct.

    Args:
        blocked: bool ``[H, W]``.
        starts_xy: int ``[N, 2]`` start cells (x, y) (free, distinct).
        taken_xy: int ``[M, 2]`` cells no sampled goal may use (the starts and any goals already fixed).
        count: goals to sample per agent (>= 0).
        rng: generator.
        labels: optional precomputed :func:`coopsim.scenarios.mapf.grid.components` of ``blocked``.
        extra: the goals are extra goals after first goals fixed elsewhere (a scen file's), as the error message
            says; False: they are all of each agent's goals (a random instance).

    Returns:
        int32 ``[N, count, 2]`` cells (x, y), pairwise distinct and distinct from ``taken_xy``.

    Raises:
        ConfigError: a region has fewer free cells than its agents need (names the region size and demand), or a
            start lies on an obstacle.
        ValueError: ``blocked`` not 2-D, or a start or taken cell that is not a whole-number cell inside the grid
            (naming the cell and the grid size: :func:`coopsim.scenarios.mapf.grid.as_cells`).
    """
    blocked, h, w = grid_shape(blocked)
    starts = as_cells(starts_xy, h, w, "starts_xy").reshape(-1, 2)
    n = len(starts)
    taken = as_cells(taken_xy, h, w, "taken_xy").reshape(-1, 2)
    if count <= 0 or n == 0:
        return np.zeros((n, max(count, 0), 2), dtype=np.int32)
    labels = components(blocked) if labels is None else labels
    lab_flat = labels.ravel()
    avail = ~blocked.ravel()
    avail[taken[:, 1] * w + taken[:, 0]] = False
    cells = np.flatnonzero(avail)
    cell_lab = lab_flat[cells]
    order = np.lexsort((rng.random(len(cells)), cell_lab))
    cells, cell_lab = cells[order], cell_lab[order]
    n_lab = int(labels.max()) + 1
    first = np.searchsorted(cell_lab, np.arange(n_lab))          # first candidate of each region
    have = np.bincount(cell_lab, minlength=n_lab)
    agent_lab = lab_flat[starts[:, 1] * w + starts[:, 0]]
    if (agent_lab < 0).any():
        bad = starts[agent_lab < 0][0]
        raise ConfigError(f"start ({int(bad[0])}, {int(bad[1])}) lies on an obstacle", key="starts", value=bad.tolist())
    need = np.bincount(agent_lab, minlength=n_lab)
    short = need * count > have
    if short.any():
        r = int(np.flatnonzero(short)[0])
        if extra:
            msg = (f"cannot sample {count} extra goal(s) for each of the {int(need[r])} agents of a region with only "
                   f"{int(have[r])} free cells left (after starts and first goals); use fewer agents or goals")
        else:
            size = int(have[r]) + int(need[r])  # a random instance takes only the starts before its goals
            msg = (f"cannot sample {count} goal(s) for each of the {int(need[r])} agents of a region with only "
                   f"{int(have[r])} free cells left after their starts (every start and goal is a distinct cell: "
                   f"num_agents x (1 + num_goals) = {int(need[r]) * (1 + count)} > {size} free cells of the region); "
                   f"use fewer agents or goals, or a larger map")
        raise ConfigError(msg, key="num_goals", value=count, also=("num_agents", "map", "scen", "random_size"))
    # rank of each agent within its region (stable, by agent index)
    ao = np.argsort(agent_lab, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[ao] = np.arange(n) - np.searchsorted(agent_lab[ao], agent_lab[ao])
    pick = first[agent_lab][:, None] + rank[:, None] + need[agent_lab][:, None] * np.arange(count)[None, :]
    flat = cells[pick]
    return np.stack([flat % w, flat // w], axis=-1).astype(np.int32)


def instance_from_scen(map_data: MapData, scen: ScenData, num_agents: int, num_goals: int,
                       rng: np.random.Generator, labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Starts and goal sequences from the first ``num_agents`` rows of ``scen`` plus sampled goals.

    Returns:
        ``(starts_xy int32 [N, 2], goals_xy int32 [N, K, 2])``; ``goals_xy[:, 0]`` are the scen goals.

    Raises:
        ConfigError: the scen file has fewer rows than agents, two agents share a start (naming the file, both
            lines and the cell), or the regions cannot hold the sampled goals.
    """
    if num_agents > len(scen):
        raise ConfigError(f"num_agents={num_agents} exceeds the {len(scen)} rows of scen file "
                          f"{scen.path.name if scen.path else scen.map_name!r}", key="num_agents", value=num_agents)
    starts = scen.start_xy[:num_agents].astype(np.int32)
    first = scen.goal_xy[:num_agents].astype(np.int32)
    w = map_data.width
    sflat = starts[:, 1].astype(np.int64) * w + starts[:, 0]
    _, first_row, which = np.unique(sflat, return_index=True, return_inverse=True)
    later = np.flatnonzero(first_row[which.ravel()] != np.arange(len(sflat)))
    if len(later):
        j = int(later[0])
        i = int(first_row[which.ravel()[j]])
        x, y = (int(v) for v in starts[j])
        where = str(scen.path) if scen.path else f"scen file of map {scen.map_name!r}"
        raise ConfigError(f"{where}, lines {scen.line_of(i)} and {scen.line_of(j)}: agents {i} and {j} both start at "
                          f"({x}, {y}); two agents cannot start on one cell: use fewer agents (num_agents <= {j}) or "
                          f"fix the file", key="scen", value=str(scen.path) if scen.path else None, also=("num_agents",))
    taken = np.concatenate([starts, first])
    extra = sample_extra_goals(map_data.blocked, starts, taken, num_goals - 1, rng, labels)
    goals = np.concatenate([first[:, None, :], extra], axis=1)
    return starts, goals


def random_instance(map_data: MapData, num_agents: int, num_goals: int, rng: np.random.Generator,
                    labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct random starts on free cells, then ``num_goals`` sampled goals each (see the module rule).

    Starts are drawn from the largest 4-connected region (all of a generated map); goals from the same region.

    Returns:
        ``(starts_xy int32 [N, 2], goals_xy int32 [N, K, 2])``.

    Raises:
        ConfigError: fewer free cells than agents, or a region cannot hold its agents' goals.
    """
    blocked = map_data.blocked
    labels = components(blocked) if labels is None else labels
    lab = labels.ravel()
    main = int(np.argmax(np.bincount(lab[lab >= 0]))) if (lab >= 0).any() else 0
    free = np.flatnonzero(lab == main)
    if num_agents > len(free):
        raise ConfigError(f"num_agents={num_agents} exceeds the {len(free)} cells of the largest free region of map {map_data.name!r}",
                          key="num_agents", value=num_agents)
    w = map_data.width
    sflat = rng.choice(free, size=num_agents, replace=False)
    starts = np.stack([sflat % w, sflat // w], axis=-1).astype(np.int32)
    goals = sample_extra_goals(blocked, starts, starts, num_goals, rng, labels, extra=False)
    return starts, goals
