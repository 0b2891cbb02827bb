"""``mapf/greedy-v0``: every agent follows a shortest path to its nearest remaining goal, ignoring the others."""
from __future__ import annotations

from typing import Any

import numpy as np

from coopsim.agents.mapf_baselines.common import distance_rows, require_capabilities
from coopsim.platform.agent import AgentParams, AgentPlugin
from coopsim.scenarios.mapf.instance import ACTION_DELTAS

BIG = np.iinfo(np.int32).max // 4


def goal_distance_tables(blocked_list: list[np.ndarray], goals_list: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Distance rows of every distinct goal cell and one-step neighbour tables, for a batch of instances.

    Maps are padded to the batch's largest ``H x W`` with obstacles (distances are unchanged). Envs with the
    same map share one breadth-first search (:func:`.common.distance_rows`) over the distinct goal cells of
    all of them.

    Args:
        blocked_list: ``E`` bool ``[H_e, W_e]`` maps.
        goals_list: ``E`` int ``[N, K, 2]`` goal cells (x, y).

    Returns:
        ``(dist, goal_row, nbr, map_of_env, width)``: ``dist`` int32 ``[R, H*W + 1]`` moves from each cell to a goal
        (``BIG`` if unreachable; the last column is a ``BIG`` sentinel), ``goal_row`` int64 ``[E, N, K]`` row of each
        goal in ``dist``, ``nbr`` int64 ``[G, H*W, 5]`` flat cell reached by each action (the sentinel ``H*W`` if the
        move leaves the map or hits an obstacle), ``map_of_env`` int64 ``[E]`` index into ``nbr``, and ``W``.
    """
    h = max(b.shape[0] for b in blocked_list)
    w = max(b.shape[1] for b in blocked_list)
    hw = h * w
    padded = []
    for b in blocked_list:
        p = np.ones((h, w), dtype=bool)
        p[: b.shape[0], : b.shape[1]] = b
        padded.append(p)
    keys: dict[bytes, int] = {}
    map_of_env = np.array([keys.setdefault(p.tobytes(), len(keys)) for p in padded], dtype=np.int64)
    maps = [None] * len(keys)
    for e, g in enumerate(map_of_env):
        maps[g] = padded[e]
    # neighbour tables [G, HW, 5]
    ys, xs = np.divmod(np.arange(hw), w)
    nbr = np.empty((len(maps), hw, 5), dtype=np.int64)
    for g, b in enumerate(maps):
        nx = xs[:, None] + ACTION_DELTAS[None, :, 0]
        ny = ys[:, None] + ACTION_DELTAS[None, :, 1]
        ok = (nx >= 0) & (nx < w) & (ny >= 0) & (ny < h)
        ok[ok] = ~b[ny[ok], nx[ok]]
        nbr[g] = np.where(ok, ny * w + nx, hw)
    # distance rows of the distinct goal cells per map
    e_n = len(goals_list)
    goal_cells = [np.asarray(gl, dtype=np.int64)[..., 1] * w + np.asarray(gl, dtype=np.int64)[..., 0] for gl in goals_list]
    goal_row = np.empty((e_n,) + goal_cells[0].shape, dtype=np.int64)
    rows = []
    offset = 0
    for g, b in enumerate(maps):
        envs = np.flatnonzero(map_of_env == g)
        cells = np.concatenate([goal_cells[e].ravel() for e in envs])
        uniq, inv = np.unique(cells, return_inverse=True)
        dm = distance_rows(b, uniq)
        dm = np.where(dm < 0, BIG, dm).astype(np.int32)
        rows.append(np.concatenate([dm, np.full((len(uniq), 1), BIG, dtype=np.int32)], axis=1))
        inv = inv.reshape(len(envs), *goal_cells[0].shape)
        goal_row[envs] = inv + offset
        offset += len(uniq)
    return np.concatenate(rows), goal_row, nbr, map_of_env, w


class GreedyParams(AgentParams):
    """Parameters of ``mapf/greedy-v0`` (none)."""


class GreedyAgent(AgentPlugin):
    """Independent greedy agents for MG-MAPF (``mapf/greedy-v0``).

    Each agent targets its nearest remaining goal by true grid distance (``free`` order, re-chosen every step,
    ties to the lower goal index; the next goal of the sequence for ``fixed``) and takes the move that decreases that distance most (ties: up, down,
    left, right, in that order); it waits once all its goals are visited or if its goal is unreachable.
    Other agents are ignored, so agents may block each other (the scenario's rules resolve conflicts); with
    one agent it follows a shortest path and its cost is the greedy nearest-neighbour tour length.

    Distance maps of every goal are computed once per ``reset`` by one vectorized BFS per distinct map
    (:func:`goal_distance_tables`); ``act`` is pure array indexing over ``[E, N]``.

    Requires the capabilities ``instance(env)``, ``agent_xy()`` and ``goals_visited()``.
    """

    Params = GreedyParams
    requires = ("instance", "agent_xy", "goals_visited")

    def __init__(self, scenario: Any, **params: Any):
        super().__init__(scenario, **params)
        require_capabilities(scenario, self.requires, "mapf/greedy-v0")
        self._dist = None

    def reset(self, seed: int | None = None) -> None:
        """Compute the goal distance tables of the scenario's current instances (call after ``scenario.reset``)."""
        insts = [self.scenario.instance(e) for e in range(self.scenario.num_envs)]
        self._fixed = insts[0].goal_order == "fixed"
        self._dist, self._goal_row, self._nbr, self._map_of_env, self._w = goal_distance_tables(
            [np.asarray(i.blocked, bool) for i in insts], [np.asarray(i.goals).reshape(i.num_agents, -1, 2) for i in insts])

    def act(self, obs: Any, inbox: Any = None) -> tuple[np.ndarray, None]:
        """int64 ``[E, N]`` actions (no messages)."""
        if self._dist is None:
            self.reset()
        xy = self.scenario.agent_xy().astype(np.int64)
        cell = xy[..., 1] * self._w + xy[..., 0]                           # [E, N]
        visited = self.scenario.goals_visited()                             # [E, N, K]
        if self._fixed:
            k = np.argmax(~visited, axis=-1)
        else:
            d = self._dist[self._goal_row, cell[..., None]]                 # [E, N, K]
            k = np.argmin(np.where(visited, np.iinfo(np.int32).max, d), axis=-1)
        row = np.take_along_axis(self._goal_row, k[..., None], axis=-1)[..., 0]  # [E, N]
        nb = self._nbr[self._map_of_env[:, None], cell]                     # [E, N, 5]
        dn = self._dist[row[..., None], nb]                                 # [E, N, 5]
        a = np.argmin(dn, axis=-1)
        a[visited.all(-1)] = 0
        return a.astype(np.int64), None
