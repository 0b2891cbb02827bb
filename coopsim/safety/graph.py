"""The coupling graph: agents as nodes, the constraints in force as hyperedges."""
from __future__ import annotations

from functools import cached_property

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components


class CouplingGraph:
    """Agents coupled by the constraints in force at one step (one env).

    Args:
        num_agents: N.
        pairs: int64 ``[M, 2]`` pairwise hyperedges (agent indices).
        pair_names: names of the constraint behind each pair (length M).
        hyperedges: list of (name, int64 ``[k]``) group hyperedges (e.g. resource-cap groups).

    The primal graph joins two agents when some hyperedge contains both; components and
    neighbourhoods are taken on it. :attr:`nx` is the ``networkx`` graph (nodes 0..N-1, edge
    attribute ``constraints``: the names of the hyperedges behind the edge), built on first use.
    """

    def __init__(self, num_agents: int, pairs: np.ndarray, pair_names: list[str] | None = None,
                 hyperedges: list[tuple[str, np.ndarray]] | None = None):
        self.num_agents = int(num_agents)
        self.pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        self.pair_names = list(pair_names) if pair_names is not None else ["pair"] * len(self.pairs)
        self.hyperedges = [(n, np.asarray(m, np.int64)) for n, m in (hyperedges or [])]
        rows, cols = [self.pairs[:, 0]], [self.pairs[:, 1]]
        for _, m in self.hyperedges:
            if len(m) > 1:
                a, b = np.triu_indices(len(m), 1)
                rows.append(m[a])
                cols.append(m[b])
        r = np.concatenate(rows)
        c = np.concatenate(cols)
        lo, hi = np.minimum(r, c), np.maximum(r, c)
        key = np.unique(lo * self.num_agents + hi)
        lo, hi = key // max(self.num_agents, 1), key % max(self.num_agents, 1)
        self.edges = np.stack([lo, hi], 1).astype(np.int64)  # primal edges, i < j, unique
        ends = np.concatenate([lo, hi])
        other = np.concatenate([hi, lo])
        order = np.lexsort((other, ends))
        self._nbr = other[order].astype(np.int64)
        self._ptr = np.searchsorted(ends[order], np.arange(self.num_agents + 1))

    @cached_property
    def adjacency(self):
        """scipy CSR ``[N, N]`` primal adjacency (0/1)."""
        return csr_matrix((np.ones(len(self._nbr), np.int8), self._nbr, self._ptr), shape=(self.num_agents,) * 2)

    def neighbours(self, i: int) -> np.ndarray:
        """int64 sorted agents sharing a hyperedge with agent ``i`` (excluding ``i``)."""
        return self._nbr[self._ptr[i]:self._ptr[i + 1]]

    @cached_property
    def degrees(self) -> np.ndarray:
        """int64 ``[N]`` primal-graph degrees."""
        return np.diff(self._ptr).astype(np.int64)

    @property
    def max_neighbourhood(self) -> int:
        """Size of the largest closed neighbourhood (degree + 1); the certificate's cost grows with it."""
        return int(self.degrees.max(initial=0)) + 1

    @cached_property
    def labels(self) -> np.ndarray:
        """int64 ``[N]`` component label of each agent (components numbered by smallest member)."""
        _, lab = connected_components(self.adjacency, directed=False)
        first = np.full(lab.max(initial=-1) + 1, self.num_agents, np.int64)
        np.minimum.at(first, lab, np.arange(self.num_agents))
        order = np.argsort(first, kind="stable")
        remap = np.empty_like(order)
        remap[order] = np.arange(len(order))
        return remap[lab].astype(np.int64)

    def components(self) -> list[np.ndarray]:
        """Connected components as sorted int64 arrays, ordered by their smallest agent."""
        lab = self.labels
        order = np.argsort(lab, kind="stable")
        splits = np.flatnonzero(np.diff(lab[order])) + 1
        return [np.sort(c) for c in np.split(order, splits)] if self.num_agents else []

    @cached_property
    def nx(self) -> nx.Graph:
        g = nx.Graph()
        g.add_nodes_from(range(self.num_agents))
        for (i, j), name in zip(self.pairs.tolist(), self.pair_names):
            if g.has_edge(i, j):
                g[i][j]["constraints"].append(name)
            else:
                g.add_edge(i, j, constraints=[name])
        for name, m in self.hyperedges:
            for a in range(len(m)):
                for b in range(a + 1, len(m)):
                    i, j = int(m[a]), int(m[b])
                    if g.has_edge(i, j):
                        g[i][j]["constraints"].append(name)
                    else:
                        g.add_edge(i, j, constraints=[name])
        return g
