"""Independent brute-force references for the safety tests (no certificate tables, no DP tensors)."""
from __future__ import annotations

from functools import lru_cache
from itertools import product

import numpy as np

from coopsim.safety.constraints import KeepConnected, ResourceCap, Separation


def violates_any(constraints, pos: np.ndarray, nxt: np.ndarray, loads: np.ndarray, trees: dict) -> bool:
    """Whether one explicit joint outcome breaks a constraint in force (pairs checked one by one)."""
    N = len(pos)
    for ci, c in enumerate(constraints):
        if isinstance(c, Separation):
            idx = c.members(N)
            for a in range(len(idx)):
                for b in range(a + 1, len(idx)):
                    i, j = int(idx[a]), int(idx[b])
                    if c.violates(pos[i], nxt[i], pos[j], nxt[j]):
                        return True
        elif isinstance(c, KeepConnected):
            for i, j in trees[ci]:
                if c.violates(pos[i], nxt[i], pos[j], nxt[j]):
                    return True
        elif isinstance(c, ResourceCap):
            if c.violations(loads[None])[0].any():
                return True
    return False


def brute_force_safe(state_e, plausible: np.ndarray, joint: np.ndarray) -> bool:
    """Enumerate every combination of plausible outcomes (``K^N`` of them) of a single-env SafetyState."""
    pos = state_e.positions[0]
    N = len(pos)
    trees = {ci: [tuple(e) for e in c.tree_edges(pos).tolist()] for ci, c in enumerate(state_e.constraints)
             if isinstance(c, KeepConnected)}
    opts = [np.flatnonzero(plausible[i, joint[i]]) for i in range(N)]
    for ks in product(*opts):
        nxt = np.stack([state_e.outcomes[0, i, joint[i], k] for i, k in enumerate(ks)])
        loads = np.array([state_e.outcome_loads[0, i, joint[i], k] for i, k in enumerate(ks)])
        if violates_any(state_e.constraints, pos, nxt, loads, trees):
            return False
    return True


def expectimax_value(world, constraints, targets, start, horizon: int) -> float:
    """Optimal safe expected team return by explicit recursion over (t, cells) with the true dynamics."""
    N = len(targets)
    A = world.num_actions
    support = world.true_prob > 0
    coords = world.coords

    def safe(cells, joint) -> bool:
        pos = coords[list(cells)]
        trees = {ci: [tuple(e) for e in c.tree_edges(pos).tolist()] for ci, c in enumerate(constraints)
                 if isinstance(c, KeepConnected)}
        opts = [np.flatnonzero(support[cells[i], joint[i]]) for i in range(N)]
        for ks in product(*opts):
            nc = [world.prior[cells[i], joint[i], k] for i, k in enumerate(ks)]
            if violates_any(constraints, pos, coords[nc], world.load[nc], trees):
                return False
        return True

    @lru_cache(maxsize=None)
    def value(t: int, cells: tuple) -> float:
        if t == horizon:
            return 0.0
        best = None
        for joint in product(range(A), repeat=N):
            if not safe(cells, joint):
                continue
            q = 0.0
            opts = [[(world.prior[cells[i], joint[i], k], world.true_prob[cells[i], joint[i], k])
                     for k in np.flatnonzero(support[cells[i], joint[i]])] for i in range(N)]
            for combo in product(*opts):
                p = float(np.prod([pr for _, pr in combo]))
                nc = tuple(int(c) for c, _ in combo)
                r = sum(nc[i] == targets[i] for i in range(N)) / N
                q += p * (r + value(t + 1, nc))
            best = q if best is None else max(best, q)
        return 0.0 if best is None else best

    return value(0, tuple(int(c) for c in start))
