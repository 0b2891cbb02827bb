"""Worlds of the ``coop_game`` family: grids and planar graphs, with slip dynamics and cell loads.

A :class:`World` is the cell graph an agent moves on, in arrays:

* action 0 is stay; action ``a >= 1`` moves towards the cell ``nbr[v, a]`` (a move that is blocked
  -- off the grid, into an obstacle, or past the last neighbour of a graph node -- is a bump: the
  intended next cell is ``v`` itself and the agent does not move);
* the prior plausible set of ``(v, a)`` (what agents know): the intended next cell ``u`` and every
  neighbour of ``u`` (graph distance <= 1, the known radius), ``K = 1 + max degree`` slots ordered
  ``[u, neighbours of u by id]``; stay's prior set is ``{v}`` (stay never slips);
* the true dynamics (hidden from agents): a move from a *slippery* cell goes to each of up to two
  lateral neighbours of ``u`` with probability ``slip / 2`` and to ``u`` otherwise; a move from any
  other cell, a bump, and stay are deterministic. Lateral neighbours: on grids the two cells beside
  ``u`` perpendicular to the move; on graphs the two neighbours of ``u`` (other than ``v``) closest
  to ``u``, ties by id.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import Delaunay

from coopsim.errors import ConfigError


@dataclass(frozen=True)
class World:
    """Arrays of a world with ``V`` cells, ``A`` actions and ``K`` outcome slots.

    Attributes:
        coords: float64 ``[V, 2]`` cell coordinates (cells; grid: ``(row, col)``).
        nbr: int64 ``[V, A]`` intended next cell per action (``nbr[:, 0] = v``).
        prior: int64 ``[V, A, K]`` prior plausible outcome cells (-1 padding).
        true_prob: float64 ``[V, A, K]`` true outcome probabilities over the prior slots (sum 1).
        load: float64 ``[V]`` load an agent carries on each cell (resource units).
        slippery: bool ``[V]``.
        adjacency: int64 ``[V, D]`` neighbours (-1 padding).
        shape: ``(height, width)`` for grids, ``None`` for graphs.
        radius: the known plausible-outcome radius in coordinate units (max edge length).
    """

    coords: np.ndarray
    nbr: np.ndarray
    prior: np.ndarray
    true_prob: np.ndarray
    load: np.ndarray
    slippery: np.ndarray
    adjacency: np.ndarray
    shape: tuple[int, int] | None
    radius: float

    @property
    def num_cells(self) -> int:
        return int(self.coords.shape[0])

    @property
    def num_actions(self) -> int:
        return int(self.nbr.shape[1])

    @property
    def num_slots(self) -> int:
        return int(self.prior.shape[2])

    def transition_matrix(self) -> np.ndarray:
        """float64 ``[V, A, V]`` true transition probabilities."""
        V, A, K = self.prior.shape
        T = np.zeros((V, A, V))
        v, a, k = np.nonzero(self.prior >= 0)
        np.add.at(T, (v, a, self.prior[v, a, k]), self.true_prob[v, a, k])
        return T


def _finish(coords, adjacency, nbr, lateral, slippery, load, slip, shape) -> World:
    """Build prior sets and true probabilities from intended cells and lateral slip targets."""
    V, A = nbr.shape
    D = adjacency.shape[1]
    K = 1 + D
    prior = np.full((V, A, K), -1, np.int64)
    prior[:, :, 0] = nbr
    ball = np.where(adjacency >= 0, adjacency, -1)  # neighbours of u, sorted by id (padding last)
    ball = np.where(ball >= 0, ball, np.iinfo(np.int64).max)
    ball = np.sort(ball, axis=1)
    ball = np.where(ball == np.iinfo(np.int64).max, -1, ball)
    prior[:, 1:, 1:] = ball[nbr[:, 1:]]
    # stay: only itself
    prior[:, 0, 1:] = -1
    true_prob = np.zeros((V, A, K))
    true_prob[:, :, 0] = 1.0
    vv = np.arange(V)[:, None]
    moving = (nbr != vv) & (np.arange(A)[None, :] > 0)
    for side in range(lateral.shape[2]):
        lat = lateral[:, :, side]
        active = moving & slippery[:, None] & (lat >= 0)
        slot = np.argmax(prior == lat[..., None], axis=-1)  # lat is a neighbour of u -> in the ball
        v_i, a_i = np.nonzero(active)
        true_prob[v_i, a_i, slot[v_i, a_i]] += slip / 2.0
        true_prob[v_i, a_i, 0] -= slip / 2.0
    radius = float(np.sqrt(((coords[adjacency.clip(0)] - coords[:, None, :]) ** 2).sum(-1))[adjacency >= 0].max(initial=1.0))
    return World(coords=coords, nbr=nbr, prior=prior, true_prob=true_prob, load=load, slippery=slippery,
                 adjacency=adjacency, shape=shape, radius=radius)


def grid_world(height: int, width: int, *, obstacle_frac: float, slip: float, slippery_frac: float,
               load_frac: float, rng: np.random.Generator) -> World:
    """A 4-connected ``height x width`` grid (actions: 0 stay, 1 up, 2 down, 3 left, 4 right).

    Obstacle cells are removed (the free cells must stay connected; retried up to 100 times).

    Raises:
        ConfigError: no connected obstacle layout was found.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    for _ in range(100):
        free = rng.random((height, width)) >= obstacle_frac
        rc = np.argwhere(free)
        idx = -np.ones((height, width), np.int64)
        idx[free] = np.arange(len(rc))
        moves = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])
        tgt = rc[:, None, :] + moves[None]
        inside = (tgt >= 0).all(-1) & (tgt[..., 0] < height) & (tgt[..., 1] < width)
        tc = np.where(inside[..., None], tgt, 0)
        nb = np.where(inside, idx[tc[..., 0], tc[..., 1]], -1)
        V = len(rc)
        nbr = np.where(nb >= 0, nb, np.arange(V)[:, None])
        adjacency = nb[:, 1:]
        r, c = np.nonzero(adjacency >= 0)
        g = coo_matrix((np.ones(len(r)), (r, adjacency[r, c])), shape=(V, V))
        if V >= 1 and connected_components(g, directed=False)[0] == 1:
            break
    else:
        raise ConfigError(f"obstacle_frac={obstacle_frac}: no connected {height}x{width} layout found in 100 tries; use a smaller value")
    # lateral cells beside u perpendicular to the move
    perp = {1: ([0, -1], [0, 1]), 2: ([0, -1], [0, 1]), 3: ([-1, 0], [1, 0]), 4: ([-1, 0], [1, 0])}
    lateral = np.full((V, 5, 2), -1, np.int64)
    urc = rc[nbr]  # [V, 5, 2]
    for a, sides in perp.items():
        for s, off in enumerate(sides):
            t = urc[:, a] + np.array(off)
            ok = (t >= 0).all(-1) & (t[:, 0] < height) & (t[:, 1] < width)
            tt = np.where(ok[:, None], t, 0)
            lateral[:, a, s] = np.where(ok, idx[tt[:, 0], tt[:, 1]], -1)
    slippery = rng.random(V) < slippery_frac
    load = (rng.random(V) < load_frac).astype(np.float64)
    return _finish(rc.astype(np.float64), adjacency, nbr, lateral, slippery, load, slip, (height, width))


def graph_world(num_nodes: int, *, slip: float, slippery_frac: float, load_frac: float,
                rng: np.random.Generator, max_degree: int = 6) -> World:
    """A planar graph: the Delaunay triangulation of ``num_nodes`` random points in a square of side
    ``sqrt(num_nodes)`` (unit density), keeping at most ``max_degree`` shortest edges per node while
    staying connected (edges of a minimum spanning tree are always kept).
    Actions: 0 stay, ``a >= 1`` move to the ``a``-th neighbour by id.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    side = float(np.sqrt(num_nodes))
    pts = rng.random((num_nodes, 2)) * side
    tri = Delaunay(pts)
    e = np.concatenate([tri.simplices[:, [0, 1]], tri.simplices[:, [1, 2]], tri.simplices[:, [0, 2]]])
    e = np.unique(np.sort(e, 1), axis=0)
    length = np.sqrt(((pts[e[:, 0]] - pts[e[:, 1]]) ** 2).sum(-1))
    mst = minimum_spanning_tree(coo_matrix((length + 1e-12, (e[:, 0], e[:, 1])), shape=(num_nodes,) * 2)).tocoo()
    keep = set(map(tuple, np.sort(np.stack([mst.row, mst.col], 1), 1).tolist()))
    deg = np.zeros(num_nodes, np.int64)
    for i, j in keep:
        deg[i] += 1
        deg[j] += 1
    for k in np.argsort(length, kind="stable"):
        i, j = map(int, e[k])
        if (i, j) in keep:
            continue
        if deg[i] < max_degree and deg[j] < max_degree:
            keep.add((i, j))
            deg[i] += 1
            deg[j] += 1
    D = int(deg.max())
    adjacency = np.full((num_nodes, D), -1, np.int64)
    fill = np.zeros(num_nodes, np.int64)
    for i, j in sorted(keep):
        adjacency[i, fill[i]] = j
        fill[i] += 1
        adjacency[j, fill[j]] = i
        fill[j] += 1
    adjacency = np.sort(np.where(adjacency >= 0, adjacency, np.iinfo(np.int64).max), 1)
    adjacency = np.where(adjacency == np.iinfo(np.int64).max, -1, adjacency)
    V = num_nodes
    nbr = np.concatenate([np.arange(V)[:, None], np.where(adjacency >= 0, adjacency, np.arange(V)[:, None])], 1)
    # lateral: two neighbours of u (not v) closest to u
    lateral = np.full((V, D + 1, 2), -1, np.int64)
    for v in range(V):
        for a in range(1, D + 1):
            u = nbr[v, a]
            if u == v:
                continue
            cand = [w for w in adjacency[u] if w >= 0 and w != v]
            cand.sort(key=lambda w: (float(np.sum((pts[w] - pts[u]) ** 2)), w))
            for s, w in enumerate(cand[:2]):
                lateral[v, a, s] = w
    slippery = rng.random(V) < slippery_frac
    load = (rng.random(V) < load_frac).astype(np.float64)
    return _finish(pts, adjacency, nbr, lateral, slippery, load, slip, None)
