"""Why a truly safe joint action is not certified: the conservativeness diagnosis of graph-safe RL.

Conservativeness (``GraphSafeAgent.conservativeness``) is certified / truly safe over all ``(joint state,
joint action)`` pairs. A truly safe pair ``(s, b)`` is uncertified exactly when one of its agents'
``(cell, action) = (s_i, b_i)`` is *unresolved*: its plausible set still holds a prior outcome outside the
true support, and that extra outcome makes some constraint fail for some combination of outcomes. Such an
outcome leaves the plausible set only after ``n_remove`` tries of ``(s_i, b_i)``, and the learner tries only
certified joint actions. So a pair can be resolved only if some certified joint action, at a joint state
the team can reach from its start cells within the horizon, lets an agent take it; resolving pairs
certifies more joint actions, which can make further pairs triable. The fixed point of that process is
the set of pairs the learner can ever resolve under the prior, and it fixes which truly safe joint
actions are *certifiable at all* (from these start cells, with this horizon). This is the safe-expansion
closure of SafeMDP (Turchetta et al. 2016, the "R_safe" operator) applied to the certificate's sets.

Classes of a truly safe, uncertified ``(s, b)`` (:func:`diagnose`):

* ``triable_now``: resolving the unresolved pairs that are triable under the *current* certified set
  certifies it; only tries (budget, or an exploration incentive) are missing.
* ``triable_later``: certifiable, but only after other pairs have been resolved first.
* ``unreachable``: certifiable in principle (its pairs appear in certified joint actions somewhere once
  everything resolvable is resolved), but only at joint states the team never reaches from its start
  cells within the horizon under certified joint actions.
* ``never``: some blocking pair occurs in no certified joint action at any joint state even with every
  other pair resolved: ruling its radius-prior outcome out would need an uncertified (possibly unsafe) try.

Everything here reads the true support (evaluation only); the learner never uses it to act.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from coopsim.scenarios.coop_game.solver import _LETTERS, joint_index


def pairs_of(table, rows: np.ndarray, cols: np.ndarray, V: int, A: int) -> np.ndarray:
    """bool ``[V, A]``: the ``(cell, action)`` of every agent in joint entries ``(rows, cols)`` of ``table``
    (a :class:`~coopsim.scenarios.coop_game.solver.SafeTable`); ``rows``/``cols`` int ``[M]``."""
    out = np.zeros((V, A), bool)
    for i in range(table.N):
        out[table.states[rows, i], table.actions[cols, i]] = True
    return out


def reachable(allowed: np.ndarray, support: np.ndarray, world, starts: np.ndarray, horizon: int) -> np.ndarray:
    """bool ``[H, S]``: joint states reachable at steps ``0 .. H-1`` from the joint states ``starts`` int ``[E]``
    when any ``allowed`` bool ``[S, B]`` joint action may be taken and each agent's outcome is any cell of
    ``support`` bool ``[V, A, K]`` (the true support: what actually happens with positive probability).

    The successor set is contracted agent by agent (``numpy.einsum`` over ``[V, A, V]`` 0/1 tensors), so a
    step costs ``O(S B V)`` at most."""
    V, A, _ = world.prior.shape
    N = int(round(np.log(allowed.shape[0]) / np.log(V)))
    T = np.zeros((V, A, V))
    v, a, k = np.nonzero(support & (world.prior >= 0))
    T[v, a, world.prior[v, a, k]] = 1.0
    s, b, n = _LETTERS[:N], _LETTERS[N:2 * N], _LETTERS[2 * N:3 * N]
    spec = f"{s}{b}," + ",".join(f"{s[i]}{b[i]}{n[i]}" for i in range(N)) + f"->{n}"
    out = np.zeros((horizon, allowed.shape[0]), bool)
    cur = np.zeros(allowed.shape[0], bool)
    cur[np.asarray(starts).reshape(-1)] = True
    for t in range(horizon):
        out[t] = cur
        if t == horizon - 1:
            break
        M = (cur[:, None] & allowed).astype(np.float64).reshape((V,) * N + (A,) * N)
        cur = np.einsum(spec, M, *([T] * N), optimize="greedy").reshape(-1) > 0
    return out


def triable(allowed: np.ndarray, reach: np.ndarray, table, V: int, A: int) -> np.ndarray:
    """bool ``[V, A]``: pairs some agent takes in an ``allowed`` joint action at a state of ``reach`` (bool
    ``[H, S]``, any step)."""
    rows, cols = np.nonzero(reach.any(0)[:, None] & allowed)
    return pairs_of(table, rows, cols, V, A)


@dataclass
class Diagnosis:
    """Result of :func:`diagnose` (counts are of ``(joint state, joint action)`` pairs unless said otherwise).

    Attributes:
        truly_safe, certified: totals over all joint states.
        certifiable: truly safe pairs certified once every resolvable ``(cell, action)`` is resolved.
        classes: uncertified truly safe pairs per class (``triable_now``, ``triable_later``,
            ``unreachable``, ``never``); they sum to ``truly_safe - certified``.
        unresolved: bool ``[V, A]`` pairs whose plausible set still holds an outcome outside the true support.
        blocking: bool ``[V, A]`` unresolved pairs of some truly safe uncertified joint action.
        triable_now: bool ``[V, A]`` pairs a certified joint action at a reachable state lets an agent try.
        resolvable: bool ``[V, A]`` unresolved pairs in the closure (triable now or after others).
        rounds: closure iterations.
        per_pair: list of dicts per blocking pair (cell, action, tries, n_remove, blocked joint actions,
            class of the pair: ``triable_now`` / ``triable_later`` / ``unreachable`` / ``never``).
    """

    truly_safe: int
    certified: int
    certifiable: int
    classes: dict[str, int]
    unresolved: np.ndarray
    blocking: np.ndarray
    triable_now: np.ndarray
    resolvable: np.ndarray
    rounds: int
    per_pair: list[dict] = field(default_factory=list)

    @property
    def raw(self) -> float:
        """certified / truly safe."""
        return self.certified / max(self.truly_safe, 1)

    @property
    def of_certifiable(self) -> float:
        """certified / certifiable (truly safe pairs that can be certified at all from the start cells)."""
        return self.certified / max(self.certifiable, 1)

    def summary(self) -> dict:
        return {"truly_safe": self.truly_safe, "certified": self.certified, "certifiable": self.certifiable,
                "raw": self.raw, "of_certifiable": self.of_certifiable, "classes": dict(self.classes),
                "unresolved_pairs": int(self.unresolved.sum()), "blocking_pairs": int(self.blocking.sum()),
                "triable_now_blocking_pairs": int((self.blocking & self.triable_now).sum()),
                "resolvable_blocking_pairs": int((self.blocking & self.resolvable).sum()), "rounds": self.rounds,
                "per_pair": self.per_pair}


def closure(table, world, plausible: np.ndarray, true_support: np.ndarray, starts: np.ndarray, horizon: int,
            use_reach: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    """Fixed point of "resolve every pair a certified joint action lets an agent try".

    Args:
        plausible, true_support: bool ``[V, A, K]``.
        starts: int ``[E]`` joint start states; ``use_reach=False`` ignores reachability (every joint state
            counts as reachable).

    Returns:
        ``(resolved, support, rounds)``: bool ``[V, A]`` pairs resolved at the fixed point (including those
        that were never unresolved), the support bool ``[V, A, K]`` there, and the number of rounds.
    """
    V, A, _ = plausible.shape
    prior = world.prior >= 0
    plausible, true_support = plausible & prior, true_support & prior
    resolved = ~(plausible & ~true_support).any(-1)
    rounds = 0
    while True:
        sup = np.where(resolved[..., None], true_support, plausible)
        allowed = table.safe(sup)
        if use_reach:
            reach = reachable(allowed, true_support, world, starts, horizon)
        else:
            reach = np.ones((1, allowed.shape[0]), bool)
        new = triable(allowed, reach, table, V, A) & ~resolved
        if not new.any():
            return resolved, sup, rounds
        resolved |= new
        rounds += 1


def diagnose(table, world, plausible: np.ndarray, true_support: np.ndarray, starts_cells: np.ndarray, horizon: int,
             tries: np.ndarray | None = None, n_remove: int | None = None) -> Diagnosis:
    """Classify every truly safe but uncertified ``(joint state, joint action)`` (see the module docstring).

    Args:
        table: the learner's :class:`~coopsim.scenarios.coop_game.solver.SafeTable`.
        world: the world (``prior`` int ``[V, A, K]`` is read).
        plausible: bool ``[V, A, K]`` the learner's plausible sets; ``true_support`` bool ``[V, A, K]``.
        starts_cells: int ``[E, N]`` (or ``[N]``) start cells of the episodes.
        horizon: episode length H (a try needs a step ``t < H``).
        tries: optional int ``[V, A]`` counts, reported per blocking pair; ``n_remove`` likewise.
    """
    V, A, _ = plausible.shape
    starts = np.asarray(joint_index(np.atleast_2d(np.asarray(starts_cells)), V)).reshape(-1)
    prior = world.prior >= 0
    plausible, true_support = plausible & prior, true_support & prior
    truly = table.safe(true_support)
    cert = table.safe(plausible)
    if (cert & ~truly).any():
        raise AssertionError("a certified joint action is not truly safe: the plausible sets lost a true outcome")
    unresolved = (plausible & ~true_support).any(-1)
    reach_now = reachable(cert, true_support, world, starts, horizon)
    trial_now = triable(cert, reach_now, table, V, A) & unresolved
    now_sup = np.where(trial_now[..., None], true_support, plausible)
    res_reach, sup_reach, rounds = closure(table, world, plausible, true_support, starts, horizon)
    res_any, sup_any, _ = closure(table, world, plausible, true_support, starts, horizon, use_reach=False)
    ok_now, ok_reach, ok_any = table.safe(now_sup), table.safe(sup_reach), table.safe(sup_any)
    gap = truly & ~cert
    classes = {
        "triable_now": int((gap & ok_now).sum()),
        "triable_later": int((gap & ~ok_now & ok_reach).sum()),
        "unreachable": int((gap & ~ok_reach & ok_any).sum()),
        "never": int((gap & ~ok_any).sum()),
    }
    rows, cols = np.nonzero(gap)
    blocking = pairs_of(table, rows, cols, V, A) & unresolved
    per_pair = []
    resolvable = res_reach & unresolved
    for v, a in zip(*np.nonzero(blocking)):
        kind = ("triable_now" if trial_now[v, a] else "triable_later" if res_reach[v, a]
                else "unreachable" if res_any[v, a] else "never")
        n_blocked = 0
        for i in range(table.N):
            sel = (table.states[rows, i] == v) & (table.actions[cols, i] == a)
            n_blocked += int(sel.sum())
        per_pair.append({"cell": int(v), "action": int(a), "class": kind, "blocked_joint_actions": n_blocked,
                         "tries": None if tries is None else int(tries[v, a]), "n_remove": n_remove,
                         "extra_outcomes": [int(c) for c in world.prior[v, a][plausible[v, a] & ~true_support[v, a]]]})
    return Diagnosis(truly_safe=int(truly.sum()), certified=int(cert.sum()), certifiable=int((truly & ok_reach).sum()),
                     classes=classes, unresolved=unresolved, blocking=blocking, triable_now=trial_now,
                     resolvable=resolvable, rounds=rounds, per_pair=per_pair)


def diagnose_agent(agent) -> Diagnosis:
    """:func:`diagnose` for a trained joint-planner :class:`~coopsim.agents.graph_safe.agent.GraphSafeAgent` on a
    scenario with ``world()`` (evaluation only)."""
    sc = agent.scenario
    return diagnose(agent.ensure_table(), agent.world, agent.plausible_support(), sc.world().true_prob > 0,
                    np.asarray(sc.starts()), agent.H, agent.model.tries, agent.model.n_remove)
