"""Independent brute-force optimum of small MG-MAPF instances (the learning test's ground truth).

Implements the movement rules of ``mapf/MGMAPF-v0`` (``conflicts="block"``, ``goal_order="free"``) for
*two* agents from its docstring, without using the core: invalid moves wait; both entering one cell
wait; swapping agents wait; an agent moving into the cell of an agent that stays (or is forced to wait)
waits; following into a vacated cell is allowed. Cost = sum over agents of the step at which each has
visited all of its goals (finished agents may keep moving). Dijkstra over (cells, visited flags).
"""
from __future__ import annotations

import heapq
import itertools

import numpy as np

DELTAS = [(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)]  # wait, up, down, left, right as (dx, dy)


def _step2(blocked: np.ndarray, pos: tuple, acts: tuple) -> tuple:
    h, w = blocked.shape
    tgt = []
    for (x, y), a in zip(pos, acts):
        nx, ny = x + DELTAS[a][0], y + DELTAS[a][1]
        tgt.append((nx, ny) if 0 <= nx < w and 0 <= ny < h and not blocked[ny, nx] else (x, y))
    (p0, p1), (t0, t1) = pos, tgt
    if t0 == t1 or (t0 == p1 and t1 == p0):
        return (p0, p1)
    if t0 == p1 and t1 == p1:  # agent 1 stays: agent 0 cannot enter
        t0 = p0
    if t1 == p0 and t0 == p0:
        t1 = p1
    return (t0, t1)


def optimal_soc_2agents(blocked: np.ndarray, starts: list, goals: list) -> int:
    """Optimal sum of costs for two agents; ``starts`` [(x, y)] x 2, ``goals`` [[(x, y)] * K] x 2 (free order)."""
    blocked = np.asarray(blocked, bool)
    k = len(goals[0])

    def visit(pos, vis):
        return tuple(tuple(v or (pos[i] == tuple(goals[i][j])) for j, v in enumerate(vis[i])) for i in range(2))

    start = (tuple(tuple(s) for s in starts), tuple((False,) * k for _ in range(2)))
    best = {start: 0}
    heap = [(0, start)]
    while heap:
        cost, (pos, vis) = heapq.heappop(heap)
        if cost > best[(pos, vis)]:
            continue
        done = [all(v) for v in vis]
        if all(done):
            return cost
        step_cost = sum(not d for d in done)
        for acts in itertools.product(range(5), repeat=2):
            npos = _step2(blocked, pos, acts)
            ns = (npos, visit(npos, vis))
            if cost + step_cost < best.get(ns, 1 << 60):
                best[ns] = cost + step_cost
                heapq.heappush(heap, (cost + step_cost, ns))
    raise ValueError("unsolvable instance")
