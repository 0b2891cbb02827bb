"""Exact optimal safe policy of a small ``coop_game`` instance: dynamic programming over joint states.

The joint state is the tuple of agent cells (``S = V^N`` states, agent 0 the most significant digit);
joint actions are ``B = A^N`` tuples in the same order. A joint action is *safe* at a state when every
combination of outcomes in the given support (the true support for the optimum; a learner's plausible
sets for its certified set) satisfies every constraint in force -- exactly the condition of
:class:`coopsim.safety.certificate.SafetyCertificate`, tabulated for every state at once. Finite-horizon
backward induction (Bellman, 1957) over horizon ``H`` with the team reward of the scenario:

    Q_t(s, b) = sum_{s'} prod_i T(s'_i | s_i, b_i) [r(s') + V_{t+1}(s')],   V_t(s) = max_{b safe at s} Q_t(s, b)

The product transition is contracted agent by agent (``numpy.einsum``), so one backup costs
``O(S B V)`` flops at most. Sizes are limited by ``S * B <= max_table`` (default 4e6 entries: 3 agents on
a 5x5 grid).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product

import numpy as np

from coopsim.errors import ConfigError
from coopsim.safety.constraints import KeepConnected, PairConstraint, ResourceCap
from coopsim.scenarios.coop_game.world import World

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def joint_states(V: int, N: int) -> np.ndarray:
    """int64 ``[V**N, N]`` all joint states, row ``s`` = digits of ``s`` in base ``V`` (agent 0 first)."""
    return np.array(list(product(range(V), repeat=N)), np.int64).reshape(-1, N)


def joint_index(cells: np.ndarray, base: int) -> np.ndarray:
    """int64 ``[...]`` index of joint tuples ``cells`` int ``[..., N]`` in base ``base``."""
    N = cells.shape[-1]
    w = base ** np.arange(N - 1, -1, -1, dtype=np.int64)
    return (cells * w).sum(-1)


def joint_table_size(V: int, A: int, N: int) -> float:
    """Entries ``V^N * A^N`` of the joint table, as a float; ``math.inf`` where it exceeds the float range
    (``V^N`` alone does from N ~ 103 on a 32x32 grid), so comparisons against a limit still hold."""
    try:
        return float(V) ** N * float(A) ** N  # a product beyond the float range is inf already
    except OverflowError:  # float ** int raises instead
        return math.inf


def table_size_text(V: int, A: int, N: int) -> str:
    """``V^N * A^N`` as ``'5.19e+49'``, also beyond the float range (``'1.09e+3787'``, from its logarithm)."""
    size = joint_table_size(V, A, N)
    if math.isfinite(size):
        return f"{size:.3g}"
    exp10 = N * (math.log10(V) + math.log10(A))
    e = math.floor(exp10)
    m = 10 ** (exp10 - e)
    if round(m, 2) >= 10:
        m, e = m / 10, e + 1
    return f"{m:.3g}e+{e}"


def check_size(V: int, A: int, N: int, max_table: float = 4e6) -> None:
    """Raises ConfigError when the joint table ``V^N x A^N`` exceeds ``max_table`` entries."""
    if joint_table_size(V, A, N) > max_table:
        raise ConfigError(f"exact solver: {V}^{N} joint states x {A}^{N} joint actions = {table_size_text(V, A, N)} "
                          f"entries exceeds the limit {max_table:.3g}; use a smaller instance", key="num_agents", value=N)


def _tree_membership(pos: np.ndarray, idx: np.ndarray, c: KeepConnected) -> np.ndarray:
    """bool ``[S, P]``: member pair ``p`` (``triu_indices`` order over ``idx``) is an edge of the tree that
    :meth:`KeepConnected.tree_edges` picks at each joint state ``pos`` float ``[S, N, d]`` (vectorized for up
    to 3 members, where the first two in-range edges in Kruskal order form the tree)."""
    S = pos.shape[0]
    ii, jj = np.triu_indices(len(idx), 1)
    gi, gj = idx[ii], idx[jj]
    d = np.sqrt(((pos[:, gi] - pos[:, gj]) ** 2).sum(-1))  # [S, P]
    within = d <= c.range_m + 1e-9
    if len(idx) <= 2:
        return within
    if len(idx) == 3:
        # pairs are in (i, j) order, so a stable sort by rounded distance is Kruskal's (distance, i, j) order
        key = np.where(within, np.round(d, 9), np.inf)
        rank = np.argsort(np.argsort(key, axis=1, kind="stable"), axis=1, kind="stable")
        return within & (rank < 2)
    out = np.zeros((S, len(ii)), bool)
    pairs = np.stack([gi, gj], 1)
    for s in range(S):
        e = c.tree_edges(pos[s])
        if len(e):
            out[s] = (pairs[:, None, :] == e[None]).all(-1).any(-1)
    return out


class SafeTable:
    """Tabulates which joint actions are safe at every joint state for a given outcome support.

    Args:
        world: the world (only coords, prior, load are read: the known map).
        constraints: the constraints in force.
        num_agents: N.

    The spanning trees of keep-connected constraints depend only on the joint state and are computed
    once (:meth:`KeepConnected.tree_edges`, the same rule the shield uses).
    """

    def __init__(self, world: World, constraints, num_agents: int, max_table: float = 4e6):
        self.world, self.constraints, self.N = world, tuple(constraints), int(num_agents)
        V, A = world.num_cells, world.num_actions
        check_size(V, A, self.N, max_table)
        self.states = joint_states(V, self.N)
        self.actions = joint_states(A, self.N)
        self._trees: dict[int, np.ndarray] = {}
        for ci, c in enumerate(self.constraints):
            if isinstance(c, KeepConnected):
                idx = c.members(self.N)
                in_tree = _tree_membership(world.coords[self.states], idx, c)
                self._trees[ci] = in_tree

    def pair_table(self, c: PairConstraint, support: np.ndarray) -> np.ndarray:
        """bool ``[V, V, A, A]``: ``ok[x, y, a, b]`` every supported outcome pair satisfies ``c``."""
        w = self.world
        pr = np.where(w.prior >= 0, w.prior, np.arange(w.num_cells)[:, None, None])
        o = w.coords[pr]  # [V, A, K, d]
        V, A, K, d = o.shape
        oi = o[:, None, :, None, :, None, :]
        oj = o[None, :, None, :, None, :, :]
        pi = w.coords[:, None, None, None, None, None, :]
        pj = w.coords[None, :, None, None, None, None, :]
        m = support[:, None, :, None, :, None] & support[None, :, None, :, None, :]
        bad = c.violates(pi, oi, pj, oj) & m
        return ~bad.any(axis=(-1, -2))

    def safe(self, support: np.ndarray) -> np.ndarray:
        """bool ``[S, B]`` safe joint actions under outcome support bool ``[V, A, K]`` (subset of the prior)."""
        w, N = self.world, self.N
        support = support & (w.prior >= 0)
        S, B = len(self.states), len(self.actions)
        out = np.ones((S, B), bool)
        cs, ab = self.states, self.actions
        for ci, c in enumerate(self.constraints):
            if isinstance(c, PairConstraint):
                tab = self.pair_table(c, support)
                idx = c.members(N)
                ii, jj = np.triu_indices(len(idx), 1)
                for p, (i, j) in enumerate(zip(idx[ii], idx[jj])):
                    ok = tab[cs[:, i][:, None], cs[:, j][:, None], ab[:, i][None, :], ab[:, j][None, :]]
                    if isinstance(c, KeepConnected):
                        ok = ok | ~self._trees[ci][:, p][:, None]
                    out &= ok
            elif isinstance(c, ResourceCap):
                wl = np.where(support, w.load[np.where(w.prior >= 0, w.prior, 0)], -np.inf).max(-1)  # [V, A]
                g = c.group_array(N)
                caps = c.cap_array()
                for gi in range(len(caps)):
                    members = np.flatnonzero(g == gi)
                    tot = np.zeros((S, B))
                    for i in members:
                        tot += wl[cs[:, i][:, None], ab[:, i][None, :]]
                    out &= tot <= caps[gi] + 1e-9
            else:
                raise TypeError(f"unsupported constraint {type(c).__name__}")
        return out


def team_reward(world: World, targets: np.ndarray) -> np.ndarray:
    """float64 ``[V]*N`` tensor: ``r(s') = (agents on their targets) / N``."""
    N, V = len(targets), world.num_cells
    r = np.zeros((V,) * N)
    for i, tg in enumerate(targets):
        sl = [None] * N
        sl[i] = slice(None)
        onehot = np.zeros(V)
        onehot[tg] = 1.0
        r = r + onehot[tuple(sl)]
    return r / N


def backup(T: np.ndarray, W: np.ndarray, N: int) -> np.ndarray:
    """``Q[s, b] = sum_{s'} prod_i T[s_i, b_i, s'_i] W[s']``: float64 ``[V^N, A^N]``.

    Args:
        T: float ``[V, A, V]`` per-agent transition matrix.
        W: float ``[V]*N`` value of next states.
    """
    V, A, _ = T.shape
    s, a, n = _LETTERS[:N], _LETTERS[N:2 * N], _LETTERS[2 * N:3 * N]
    spec = ",".join(f"{s[i]}{a[i]}{n[i]}" for i in range(N)) + f",{n}->{s}{a}"
    Q = np.einsum(spec, *([T] * N), W, optimize="greedy")
    return Q.reshape(V ** N, A ** N)


@dataclass
class Solution:
    """Result of :func:`solve`.

    Attributes:
        values: float64 ``[H + 1, S]`` optimal values ``V_t(s)`` (0 at ``t = H``).
        policy: int64 ``[H, S]`` joint action index per step and state (lowest index among ties).
        safe: bool ``[S, B]`` the allowed joint actions.
    """

    values: np.ndarray
    policy: np.ndarray
    safe: np.ndarray

    def value(self, cells: np.ndarray, num_cells: int, t: int = 0) -> float:
        return float(self.values[t, joint_index(np.asarray(cells), num_cells)])


def solve(T: np.ndarray, reward: np.ndarray, allowed: np.ndarray, horizon: int, *,
          bonus: np.ndarray | None = None, clip: bool = False) -> Solution:
    """Finite-horizon backward induction restricted to ``allowed`` joint actions.

    Args:
        T: float ``[V, A, V]`` transition matrix (true for the optimum, estimated for a learner).
        reward: float ``[V]*N`` reward of the next state.
        allowed: bool ``[S, B]``; a state with no allowed action gets value 0 and all-stay (index 0).
        horizon: H.
        bonus: optional float ``[S, B]`` optimism bonus added to Q (per step).
        clip: clip ``Q_t`` at the largest possible return ``H - t`` (optimistic planning).
    """
    N = reward.ndim
    V = T.shape[0]
    S, B = allowed.shape
    values = np.zeros((horizon + 1, S))
    policy = np.zeros((horizon, S), np.int64)
    r = reward.reshape(-1)
    any_allowed = allowed.any(1)
    for t in range(horizon - 1, -1, -1):
        Q = backup(T, (r + values[t + 1]).reshape((V,) * N), N)
        if bonus is not None:
            Q = Q + bonus
        if clip:
            Q = np.minimum(Q, float(horizon - t))
        Q = np.where(allowed, Q, -np.inf)
        pol = np.argmax(Q, axis=1)
        policy[t] = np.where(any_allowed, pol, 0)
        values[t] = np.where(any_allowed, Q[np.arange(S), pol], 0.0)
    return Solution(values=values, policy=policy, safe=allowed)


def evaluate(T: np.ndarray, reward: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """Expected return of a (time-dependent) joint policy: float64 ``[H + 1, S]`` values ``V^pi_t(s)``.

    Args:
        T: float ``[V, A, V]`` transition matrix (the true one to measure regret).
        reward: float ``[V]*N`` reward of the next state.
        policy: int ``[H, S]`` joint action index per step and state.
    """
    N = reward.ndim
    V = T.shape[0]
    H, S = policy.shape
    values = np.zeros((H + 1, S))
    r = reward.reshape(-1)
    for t in range(H - 1, -1, -1):
        Q = backup(T, (r + values[t + 1]).reshape((V,) * N), N)
        values[t] = Q[np.arange(S), policy[t]]
    return values


def solve_scenario(core, max_table: float = 4e6) -> tuple[Solution, SafeTable]:
    """Optimal safe policy of a ``CoopGameCore`` under its true dynamics (true support for safety).

    Returns:
        ``(solution, table)``; ``solution.value(core.starts(), V)`` is the optimal expected team return.
    """
    w = core.world()
    table = SafeTable(w, core.constraint_set, core.num_agents, max_table)
    safe = table.safe(w.true_prob > 0)
    return solve(w.transition_matrix(), team_reward(w, core.targets()), safe, core.params.max_steps), table
