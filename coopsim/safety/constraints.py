"""Coupled instantaneous hard constraints: predicates over the states and actions of a subset of agents.

A constraint is a hyperedge of the coupling graph: it names the agents it involves and a predicate
that must hold for the joint transition at every step. Three built-ins cover the issue's needs:

* :class:`Separation` -- pairwise: agents' next positions at least ``min_dist`` apart (Euclidean, in
  cells/metres), plus, on grids, no edge swap (i moves onto j's cell while j moves onto i's).
  With ``min_dist = 1`` on a unit grid this is "never the same cell, never swap".
* :class:`ResourceCap` -- group: the sum of the group members' loads after the step is at most ``cap``.
* :class:`KeepConnected` -- global, enforced through a local sufficient condition: at each step a
  spanning tree of the current communication graph (range ``range_m``) is chosen deterministically
  (Kruskal on edges ordered by ``(distance, i, j)``) and each tree edge must stay within range after
  the step. If every tree edge stays within range the graph stays connected; at the next step the new
  tree again has every edge within range (a connected graph's minimum spanning tree uses only edges
  of the graph).

Every predicate is vectorized: it evaluates arrays of candidate outcomes with arbitrary leading
axes, so the same code serves the shield's certificate, the scenario's violation counting and the
exact solver. ``margin`` tightens each constraint (separation by ``+margin``, range by ``-margin``,
cap by ``-margin``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial import cKDTree

_EPS = 1e-9


@dataclass(frozen=True)
class Constraint:
    """Base class of a constraint.

    Attributes:
        name: the cost term the violations are reported under (``cost/<name>``).
        margin: safety margin (same unit as the constraint's threshold, >= 0).
        agents: int64 indices of the agents the constraint applies to; ``None`` = every agent.
    """

    name: str
    margin: float = 0.0
    agents: tuple[int, ...] | None = None
    kind: ClassVar[str] = "constraint"

    def __post_init__(self) -> None:
        """Check the fields (sequences are stored as tuples).

        Raises:
            ValueError: naming the argument, the value and what is valid.
        """
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{type(self).__name__}: name must be a non-empty string; got {self.name!r}")
        object.__setattr__(self, "margin", _real(self, "margin", self.margin, ge=0))
        if self.agents is not None:
            object.__setattr__(self, "agents", _int_tuple(self, "agents", self.agents, ge=0, unique=True))

    def members(self, num_agents: int) -> np.ndarray:
        """int64 ``[n]`` indices of the agents this constraint involves.

        Raises:
            ValueError: ``agents`` names an index >= ``num_agents`` (naming the constraint and N).
        """
        if self.agents is None:
            return np.arange(num_agents, dtype=np.int64)
        out = [i for i in self.agents if i >= num_agents]
        if out:
            raise ValueError(f"{type(self).__name__} '{self.name}': agents {tuple(self.agents)} names agent {out[0]}, "
                             f"but there are N={num_agents} agents (indices 0..{num_agents - 1})")
        return np.asarray(self.agents, dtype=np.int64)


@dataclass(frozen=True)
class PairConstraint(Constraint, ABC):
    """A constraint made of pairwise predicates (separation, keep-connected tree edges)."""

    kind: ClassVar[str] = "pair"

    def interaction_radius(self) -> float:
        """Two agents whose next positions are farther apart than this cannot violate a separation
        constraint (used to find the active pairs); ``inf`` when every pair may matter."""
        return np.inf

    @abstractmethod
    def violates(self, p_i: np.ndarray, o_i: np.ndarray, p_j: np.ndarray, o_j: np.ndarray) -> np.ndarray:
        """bool ``[...]``: the transition ``p_i -> o_i``, ``p_j -> o_j`` (float ``[..., d]``) violates."""


@dataclass(frozen=True)
class Separation(PairConstraint):
    """Pairwise separation: ``|o_i - o_j| >= min_dist + margin`` and (if ``no_swap``) no edge swap.

    Attributes:
        min_dist: minimum distance between agents after the step (cells or m, > 0).
        no_swap: also forbid exchanging positions in one step (grid worlds).
    """

    name: str = "separation"
    min_dist: float = 1.0
    no_swap: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "min_dist", _real(self, "min_dist", self.min_dist, gt=0))
        if not isinstance(self.no_swap, (bool, np.bool_)):
            raise ValueError(f"Separation: no_swap must be True or False; got {self.no_swap!r}")

    def interaction_radius(self) -> float:
        return float(self.min_dist + self.margin)

    def violates(self, p_i, o_i, p_j, o_j):
        d = np.sqrt(((o_i - o_j) ** 2).sum(-1))
        bad = d < self.min_dist + self.margin - _EPS
        if self.no_swap:
            swap = (np.abs(o_i - p_j).sum(-1) < _EPS) & (np.abs(o_j - p_i).sum(-1) < _EPS) & \
                   (np.abs(p_i - p_j).sum(-1) > _EPS)
            bad = bad | swap
        return bad


@dataclass(frozen=True)
class KeepConnected(PairConstraint):
    """Keep the communication graph (disc of radius ``range_m``) of the member agents connected.

    Enforced through the edges of a spanning tree chosen at each step (:meth:`tree_edges`): each
    tree edge must satisfy ``|o_i - o_j| <= range_m - margin`` after the step.

    Attributes:
        range_m: communication range (cells or m, > 0).
    """

    name: str = "connectivity"
    range_m: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "range_m", _real(self, "range_m", self.range_m, gt=0))

    def violates(self, p_i, o_i, p_j, o_j):
        d = np.sqrt(((o_i - o_j) ** 2).sum(-1))
        return d > self.range_m - self.margin + _EPS

    def tree_edges(self, positions: np.ndarray) -> np.ndarray:
        """int64 ``[M, 2]`` (i < j, agent indices) edges of the spanning tree/forest chosen at ``positions``.

        Kruskal over the member pairs within ``range_m``, edges ordered by ``(distance, i, j)``
        (deterministic, no ties); a forest when the current graph is already disconnected.

        Args:
            positions: float ``[N, d]`` current positions of all agents.
        """
        idx = self.members(positions.shape[0])
        if idx.size < 2:
            return np.zeros((0, 2), np.int64)
        pts = positions[idx]
        pairs = _pairs_within(pts, self.range_m + _EPS)
        if pairs.size == 0:
            return np.zeros((0, 2), np.int64)
        dist = np.sqrt(((pts[pairs[:, 0]] - pts[pairs[:, 1]]) ** 2).sum(-1))
        order = np.lexsort((pairs[:, 1], pairs[:, 0], np.round(dist, 9)))
        if len(idx) <= 64:
            t = _kruskal(len(idx), pairs[order])
            e = np.sort(idx[t], axis=1) if len(t) else np.zeros((0, 2), np.int64)
        else:
            rank = np.empty(len(order), np.float64)
            rank[order] = np.arange(1, len(order) + 1)  # distinct weights: the MST is Kruskal's in this order
            g = coo_matrix((rank, (pairs[:, 0], pairs[:, 1])), shape=(len(idx), len(idx))).tocsr()
            tr = minimum_spanning_tree(g).tocoo()
            e = np.sort(np.stack([idx[tr.row], idx[tr.col]], axis=1), axis=1)
        return e[np.lexsort((e[:, 1], e[:, 0]))].astype(np.int64)

    @staticmethod
    def connected(positions: np.ndarray, members: np.ndarray, range_m: float) -> bool:
        """Whether the disc graph of ``positions[members]`` with radius ``range_m`` is connected."""
        pts = positions[members]
        if len(pts) < 2:
            return True
        pairs = _pairs_within(pts, range_m + _EPS)
        if len(pts) <= 64:
            return len(_kruskal(len(pts), pairs)) == len(pts) - 1
        from scipy.sparse.csgraph import connected_components

        g = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])) if len(pairs) else ([], ([], [])),
                       shape=(len(pts), len(pts)))
        return connected_components(g, directed=False)[0] == 1


def _real(c: Constraint, arg: str, v, *, gt: float | None = None, ge: float | None = None) -> float:
    """``v`` as a finite float (not a bool), above ``gt`` / at least ``ge``; else ValueError naming ``arg``."""
    ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    f = float(v) if ok else float("nan")
    if not ok or not np.isfinite(f) or (gt is not None and not f > gt) or (ge is not None and not f >= ge):
        want = "a finite number" + (f" > {gt:g}" if gt is not None else "") + (f" >= {ge:g}" if ge is not None else "")
        raise ValueError(f"{type(c).__name__}: {arg} must be {want}; got {v!r}")
    return f


def _int_tuple(c: Constraint, arg: str, v, *, ge: int, unique: bool = False) -> tuple[int, ...]:
    """``v`` (a flat sequence of integers >= ``ge``) as a tuple; else ValueError naming ``arg``."""
    what = f"a flat sequence of integers >= {ge}" + (", each once" if unique else "")
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise ValueError(f"{type(c).__name__}: {arg} must be {what}; got {v!r}")
    out = []
    for x in v:
        if not isinstance(x, (int, np.integer)) or isinstance(x, (bool, np.bool_)) or int(x) < ge:
            raise ValueError(f"{type(c).__name__}: {arg} must be {what}; got {list(v)!r} (entry {x!r})")
        out.append(int(x))
    if unique and len(set(out)) != len(out):
        raise ValueError(f"{type(c).__name__}: {arg} must be {what}; got {out!r} (repeated)")
    return tuple(out)


def _pairs_within(pts: np.ndarray, r: float) -> np.ndarray:
    """int64 ``[M, 2]`` index pairs ``i < j`` with ``|pts_i - pts_j| <= r`` (brute force for small sets)."""
    n = len(pts)
    if n <= 64:
        i, j = np.triu_indices(n, 1)
        d = np.sqrt(((pts[i] - pts[j]) ** 2).sum(-1))
        sel = d <= r
        return np.stack([i[sel], j[sel]], 1).astype(np.int64)
    p = cKDTree(pts).query_pairs(r, output_type="ndarray")
    return np.sort(p, 1).astype(np.int64) if p.size else np.zeros((0, 2), np.int64)


def _kruskal(n: int, ordered_pairs: np.ndarray) -> np.ndarray:
    """Edges accepted by Kruskal (union-find) scanning ``ordered_pairs`` in order; int64 ``[<=n-1, 2]``."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    out = []
    for a, b in ordered_pairs.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            out.append((a, b))
            if len(out) == n - 1:
                break
    return np.array(out, np.int64).reshape(-1, 2)


@dataclass(frozen=True)
class ResourceCap(Constraint):
    """Shared resource caps: for each group g, ``sum_{i in g} load_i <= caps[g] - margin`` after the step.

    Attributes:
        groups: group id per agent (tuple of length N, -1 = in no group).
        caps: cap per group (load units, >= 0).
    """

    name: str = "resource"
    groups: tuple[int, ...] = ()
    caps: tuple[float, ...] = ()
    kind: ClassVar[str] = "group"

    def __post_init__(self) -> None:
        super().__post_init__()
        groups = _int_tuple(self, "groups", self.groups, ge=-1)
        caps = self.caps
        if isinstance(caps, (str, bytes)) or not hasattr(caps, "__iter__"):
            raise ValueError(f"ResourceCap: caps must be a sequence of numbers (one cap per group, load units >= 0); "
                             f"got {caps!r}")
        caps = tuple(_real(self, f"caps[{g}]", c, ge=0) for g, c in enumerate(caps))
        need = max(groups, default=-1) + 1
        if len(caps) != need:
            raise ValueError(f"ResourceCap: caps has {len(caps)} entries but groups uses group ids 0..{need - 1} "
                             f"({need} groups): give one cap per group id" if need else
                             f"ResourceCap: caps has {len(caps)} entries but groups puts no agent in a group (all -1): "
                             f"give caps=()")
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "caps", caps)

    def group_array(self, num_agents: int) -> np.ndarray:
        g = np.asarray(self.groups, dtype=np.int64)
        if g.shape != (num_agents,):
            raise ValueError(f"ResourceCap '{self.name}': groups has {g.size} entries, expected one per agent ({num_agents})")
        return g

    def cap_array(self) -> np.ndarray:
        return np.asarray(self.caps, dtype=np.float64) - self.margin

    def violations(self, loads: np.ndarray) -> np.ndarray:
        """int ``[..., G]``: 1 where group g's summed load exceeds its cap; ``loads`` float ``[..., N]``."""
        g = self.group_array(loads.shape[-1])
        caps = self.cap_array()
        onehot = (g[:, None] == np.arange(len(caps))[None, :]).astype(np.float64)  # [N, G]
        return (loads @ onehot > caps + _EPS).astype(np.int64)


def count_violations(constraints, positions, next_positions, next_loads) -> dict[str, np.ndarray]:
    """Violations of each constraint by a realized batch of transitions.

    Separation counts violating pairs; resource caps count groups over their cap; keep-connected
    counts 1 when the member agents' communication graph is disconnected after the step (the
    constraint itself, not its sufficient condition).

    Args:
        constraints: sequence of :class:`Constraint`.
        positions: float ``[E, N, d]`` before the step.
        next_positions: float ``[E, N, d]`` after the step.
        next_loads: float ``[E, N]`` after the step.

    Returns:
        ``{name: float32 [E]}`` (names summed when several constraints share one).

    Raises:
        ValueError: ``positions`` is not 3-D or has no coordinates (d = 0), or the shapes do not agree (``next_positions`` not ``positions``' shape,
            ``next_loads`` not its ``[E, N]``: another number of envs or agents; naming both shapes); a position or
            load is NaN or infinite (naming the argument, env and agent): a non-finite position is neither "apart" nor
            "together", so it is refused rather than counted as no violation; a constraint's ``agents`` names an
            index >= N (naming the constraint and N).
        TypeError: ``constraints`` is one constraint rather than a sequence of them.
    """
    if isinstance(constraints, Constraint):  # used to be "TypeError: 'Separation' object is not iterable"
        raise TypeError(f"count_violations: constraints must be a sequence of constraints (e.g. [{type(constraints).__name__}"
                        f"(...)]); got one {type(constraints).__name__}")
    positions, next_positions, next_loads = _float64(positions), _float64(next_positions), _float64(next_loads)
    if positions.ndim != 3 or positions.shape[2] == 0:  # [E, N, 0]: every distance 0, every pair "together"
        raise ValueError(f"count_violations: positions must be [E, N, d] (envs, agents, coordinates) with d >= 1; got "
                         f"shape {positions.shape}")
    if next_positions.shape != positions.shape:
        raise ValueError(f"count_violations: next_positions has shape {next_positions.shape} but positions has shape "
                         f"{positions.shape}: both are [E, N, d] of the same envs and agents")
    if next_loads.shape != positions.shape[:2]:
        raise ValueError(f"count_violations: next_loads has shape {next_loads.shape} but positions has shape "
                         f"{positions.shape}: next_loads must be [E, N] = {positions.shape[:2]} (the same envs and "
                         f"agents)")
    for arg, a in (("positions", positions), ("next_positions", next_positions), ("next_loads", next_loads)):
        bad = ~np.isfinite(a)
        if bad.any():
            idx = np.argwhere(bad)[0]
            raise ValueError(f"count_violations: {arg} must be finite; got {a[tuple(idx)].item()!r} at env {idx[0]} agent "
                             f"{idx[1]}" if a.ndim >= 2 else f"count_violations: {arg} must be finite")
    E, N, _ = positions.shape
    out: dict[str, np.ndarray] = {}
    for c in constraints:
        v = np.zeros(E, np.float64)
        if isinstance(c, Separation):
            idx = c.members(N)
            ii, jj = np.triu_indices(len(idx), 1)
            a, b = idx[ii], idx[jj]
            bad = c.violates(positions[:, a], next_positions[:, a], positions[:, b], next_positions[:, b])
            v = bad.sum(-1).astype(np.float64)
        elif isinstance(c, ResourceCap):
            v = c.violations(next_loads).sum(-1).astype(np.float64)
        elif isinstance(c, KeepConnected):
            idx = c.members(N)
            v = np.array([0.0 if KeepConnected.connected(next_positions[e], idx, c.range_m - c.margin) else 1.0
                          for e in range(E)])
        else:  # pragma: no cover - user constraint types report through their own scenario
            continue
        out[c.name] = out.get(c.name, np.zeros(E)) + v
    return {k: v.astype(np.float32) for k, v in out.items()}


def _float64(a) -> np.ndarray:
    """``a`` as a float64 array: itself when it is one already (no conversion on every step of a core)."""
    return a if type(a) is np.ndarray and a.dtype == np.float64 else np.asarray(a, np.float64)
