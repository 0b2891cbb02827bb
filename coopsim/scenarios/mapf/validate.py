"""Plan validator for (multi-goal) MAPF: conflicts, legality of moves, and the plan's costs.

A *plan* is the cell of every agent at every step, int ``[T+1, N, 2]`` as (x = column, y = row), step 0
being the starts. It is valid under the conflict model of the MAPF benchmark definitions (Stern et al.,
"Multi-Agent Pathfinding: Definitions, Variants, and Benchmarks", SoCS 2019) that the MG-MAPF scenario
enforces (see :mod:`coopsim.scenarios.mapf.core`):

============ ===========================================================================================
kind         rejected when
============ ===========================================================================================
``shape``    the array is not ``[T+1, N, 2]`` with ``T >= 0`` and the instance's ``N``, or not integral
``start``    an agent's cell at step 0 is not its start
``off_map``  a cell lies outside the ``W x H`` grid
``obstacle`` a cell is an obstacle
``teleport`` an agent moves more than one cell (4-connected) between two steps
``vertex``   two or more agents occupy one cell at one step (vertex conflict)
``swap``     two agents exchange their cells in one step (edge conflict)
============ ===========================================================================================

Following (entering a cell its occupant leaves in the same step) and rotations of three or more agents
along a cycle are allowed. Each violation is reported at the step it happens (for moves: the step the
agent arrives); the report keeps the first violation of each kind and the number of occurrences
(``vertex`` and ``swap`` count agent pairs, as the scenario's ``collisions`` metric does; the others count
agent-steps).

Costs follow the MG-MAPF convention of issue 2: goal ``k`` of agent ``i`` is visited at the first step the
agent stands on it (step 0 if it starts there); with ``goal_order="fixed"`` a goal counts only once all
goals before it in the sequence are visited; an agent *finishes* at the step its last goal is visited.
SoC is the sum over agents of the finishing step, makespan the largest one; an agent that never finishes
costs ``max_steps`` if given, else ``T``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coopsim.errors import CoopsimError

KINDS = ("shape", "start", "off_map", "obstacle", "teleport", "vertex", "swap")


@dataclass(frozen=True)
class Violation:
    """The first occurrence of one kind of violation.

    Attributes:
        kind: one of :data:`KINDS`.
        step: the step it happens at (for moves, the step of arrival); -1 for ``shape``.
        agents: the agents involved (sorted).
        cells: the cells involved, (x, y) each.
        count: occurrences of this kind in the whole plan (pairs for ``vertex``/``swap``, agent-steps otherwise).
        message: a sentence naming step, agents, cells and the rule.
    """

    kind: str
    step: int
    agents: tuple[int, ...]
    cells: tuple[tuple[int, int], ...]
    count: int
    message: str


@dataclass
class PlanReport:
    """What :func:`validate_plan` found.

    Attributes:
        ok: no violation of any kind.
        violations: the first violation of each kind found, ordered by step (then by :data:`KINDS` order).
        counts: occurrences per kind (every kind of :data:`KINDS`, 0 if none).
        num_steps: ``T`` (the plan has ``T+1`` rows).
        goal_reached_at: int32 ``[N, K]``, first-visit step of each goal (-1 never).
        finish_step: int32 ``[N]``, step at which each agent finished (-1 never).
        soc: sum of costs (an agent that never finishes costs ``max_steps`` or ``T``).
        makespan: largest cost.
        goals_visited: number of goals visited (of ``N*K``).
        complete: every agent finished.
    """

    ok: bool
    violations: list[Violation]
    counts: dict[str, int]
    num_steps: int
    goal_reached_at: np.ndarray
    finish_step: np.ndarray
    soc: int
    makespan: int
    goals_visited: int
    complete: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def first(self) -> Violation | None:
        """The earliest violation, or None."""
        return self.violations[0] if self.violations else None

    def by_kind(self, kind: str) -> Violation | None:
        """The first violation of ``kind``, or None."""
        for v in self.violations:
            if v.kind == kind:
                return v
        return None


class InvalidPlanError(CoopsimError, ValueError):
    """A plan failed :func:`assert_valid`; ``report`` holds the full :class:`PlanReport`."""

    def __init__(self, message: str, report: PlanReport):
        self.report = report
        super().__init__(message)


def _instance_arrays(instance: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    blocked = np.asarray(instance.blocked, dtype=bool)
    starts = np.asarray(instance.starts, dtype=np.int64).reshape(-1, 2)
    goals = np.asarray(instance.goals, dtype=np.int64)
    if goals.ndim == 2:
        goals = goals[:, None, :]
    order = str(getattr(instance, "goal_order", "free") or "free")
    if order not in ("free", "fixed"):
        raise ValueError(f"instance.goal_order must be 'free' or 'fixed'; got {order!r}")
    return blocked, starts, goals, order


def goal_visits(paths: np.ndarray, goals: np.ndarray, goal_order: str = "free") -> np.ndarray:
    """First-visit step of every goal along ``paths`` (MG-MAPF semantics, see the module docstring).

    Args:
        paths: int ``[T+1, N, 2]`` cells (x, y).
        goals: int ``[N, K, 2]`` goal cells (x, y) in the given order.
        goal_order: ``"free"`` or ``"fixed"``.

    Returns:
        int32 ``[N, K]``: step of the first (for ``fixed``: first in-sequence) visit, -1 if never.

    Raises:
        ValueError: unknown ``goal_order`` (as :func:`coopsim.scenarios.mapf.metrics.tour_lower_bound`).
    """
    if goal_order not in ("fixed", "free"):
        raise ValueError(f"goal_order must be 'fixed' or 'free'; got {goal_order!r}")
    paths = np.asarray(paths, dtype=np.int64)
    goals = np.asarray(goals, dtype=np.int64)
    n, k = goals.shape[:2]
    t1 = paths.shape[0]
    at = (paths[:, :, None, :] == goals[None]).all(-1)  # [T+1, N, K]
    steps = np.arange(t1)[:, None]
    if goal_order == "free":
        hit = at.any(0)
        first = at.argmax(0)
        return np.where(hit, first, -1).astype(np.int32)
    out = np.full((n, k), -1, dtype=np.int64)
    prev = np.zeros(n, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    for j in range(k):
        m = at[:, :, j] & (steps >= prev[None, :]) & alive[None, :]
        hit = m.any(0)
        first = m.argmax(0)
        out[hit, j] = first[hit]
        alive &= hit
        prev = np.where(hit, first, prev)
    return out.astype(np.int32)


def _cells_str(cells) -> str:
    return ", ".join(f"({int(x)}, {int(y)})" for x, y in cells)


def validate_plan(instance: Any, paths: np.ndarray, max_steps: int | None = None) -> PlanReport:
    """Check a plan against an instance and compute its costs; never raises for a bad plan.

    Args:
        instance: a :class:`coopsim.scenarios.mapf.instance.MAPFInstance` (or any object with ``blocked`` bool
            ``[H, W]`` indexed ``[y, x]``, ``starts`` int ``[N, 2]``, ``goals`` int ``[N, K, 2]`` as (x, y), and
            ``goal_order`` ``"free"``/``"fixed"``).
        paths: int ``[T+1, N, 2]`` cells (x, y) per step.
        max_steps: cost of an agent that never finishes (default: ``T``).

    Returns:
        :class:`PlanReport` (``ok`` False with the violations if the plan breaks a rule of the module docstring).

    Raises:
        ValueError: only for a malformed *instance* (unknown ``goal_order``).
    """
    blocked, starts, goals, order = _instance_arrays(instance)
    h, w = blocked.shape
    n, k = goals.shape[:2]
    counts = {kd: 0 for kd in KINDS}
    arr = np.asarray(paths)
    shape_msg = None
    if arr.ndim != 3 or arr.shape[0] < 1 or arr.shape[2] != 2 or arr.shape[1] != n:
        shape_msg = f"paths must be [T+1, N, 2] with T >= 0 and N = {n} agents; got shape {tuple(arr.shape)}"
    elif not np.issubdtype(arr.dtype, np.integer) and not (np.issubdtype(arr.dtype, np.number) and np.all(np.mod(arr, 1) == 0)):
        shape_msg = f"paths must hold integer cells; got dtype {arr.dtype}"
    if shape_msg is not None:
        counts["shape"] = 1
        v = Violation("shape", -1, (), (), 1, shape_msg)
        return PlanReport(ok=False, violations=[v], counts=counts, num_steps=max(int(arr.shape[0]) - 1, 0) if arr.ndim else 0,
                          goal_reached_at=np.full((n, k), -1, np.int32), finish_step=np.full(n, -1, np.int32),
                          soc=0, makespan=0, goals_visited=0, complete=False)
    p = arr.astype(np.int64)
    T = p.shape[0] - 1
    x, y = p[..., 0], p[..., 1]
    found: list[Violation] = []

    def first_agent_step(mask: np.ndarray) -> tuple[int, list[int]]:
        t = int(np.argmax(mask.any(1)))
        return t, np.flatnonzero(mask[t]).tolist()

    # start
    bad = (p[0] != starts).any(-1)
    if bad.any():
        ag = np.flatnonzero(bad).tolist()
        counts["start"] = len(ag)
        found.append(Violation("start", 0, tuple(ag), tuple((int(a), int(b)) for a, b in p[0, ag]), len(ag),
                               f"step 0: agent(s) {ag} not at their start: at {_cells_str(p[0, ag])}, "
                               f"starts {_cells_str(starts[ag])}"))
    # off map / obstacle
    off = (x < 0) | (x >= w) | (y < 0) | (y >= h)
    if off.any():
        counts["off_map"] = int(off.sum())
        t, ag = first_agent_step(off)
        found.append(Violation("off_map", t, tuple(ag), tuple((int(a), int(b)) for a, b in p[t, ag]), counts["off_map"],
                               f"step {t}: agent(s) {ag} off the {w}x{h} map at {_cells_str(p[t, ag])} "
                               f"(valid x in [0, {w}), y in [0, {h}))"))
    onb = np.zeros_like(off)
    onb[~off] = blocked[y[~off], x[~off]]
    if onb.any():
        counts["obstacle"] = int(onb.sum())
        t, ag = first_agent_step(onb)
        found.append(Violation("obstacle", t, tuple(ag), tuple((int(a), int(b)) for a, b in p[t, ag]), counts["obstacle"],
                               f"step {t}: agent(s) {ag} on an obstacle at {_cells_str(p[t, ag])}"))
    # teleports
    if T > 0:
        jump = np.abs(np.diff(p, axis=0)).sum(-1) > 1  # [T, N]
        if jump.any():
            counts["teleport"] = int(jump.sum())
            t, ag = first_agent_step(jump)
            found.append(Violation("teleport", t + 1, tuple(ag), tuple((int(a), int(b)) for a, b in p[t + 1, ag]),
                                   counts["teleport"],
                                   f"step {t + 1}: agent(s) {ag} moved more than one cell, from {_cells_str(p[t, ag])} "
                                   f"to {_cells_str(p[t + 1, ag])}"))
    # compact cell ids (robust to off-map values)
    _, cid = np.unique(p.reshape(-1, 2), axis=0, return_inverse=True)
    cid = cid.reshape(T + 1, n).astype(np.int64)
    c_n = int(cid.max()) + 1 if cid.size else 1
    # vertex conflicts
    keys = (np.arange(T + 1, dtype=np.int64)[:, None] * c_n + cid).ravel()
    srt = np.argsort(keys, kind="stable")
    sk = keys[srt]
    uk, idx, cnt = np.unique(sk, return_index=True, return_counts=True)
    dup = cnt > 1
    if dup.any():
        counts["vertex"] = int((cnt[dup] * (cnt[dup] - 1) // 2).sum())
        g = int(np.flatnonzero(dup)[0])
        flat = srt[idx[g]: idx[g] + cnt[g]]
        t = int(uk[g] // c_n)
        ag = sorted(int(f % n) for f in flat)
        cell = (int(p[t, ag[0], 0]), int(p[t, ag[0], 1]))
        found.append(Violation("vertex", t, tuple(ag), (cell,), counts["vertex"],
                               f"step {t}: agents {ag} occupy the same cell {_cells_str([cell])} (vertex conflict)"))
    # swaps
    if T > 0:
        a, b = cid[:-1], cid[1:]
        mv = a != b
        tt = np.broadcast_to(np.arange(T, dtype=np.int64)[:, None], a.shape)
        fwd = ((tt * c_n + a) * c_n + b)[mv]
        rev = ((tt * c_n + b) * c_n + a)[mv]
        uf, cf = np.unique(fwd, return_counts=True)
        pos = np.searchsorted(uf, rev).clip(max=max(len(uf) - 1, 0))
        match = (uf[pos] == rev) if len(uf) else np.zeros(0, dtype=bool)   # this move has a reverse partner
        if match.any():
            # pairs: per unordered edge {a, b} and step, count(a->b) * count(b->a), taken once from the a < b side
            lo = match & (a < b)[mv]
            edges, first = np.unique(fwd[lo], return_index=True)
            counts["swap"] = int((cf[np.searchsorted(uf, edges)] * cf[pos[lo][first]]).sum())
            ts, ag_idx = np.nonzero(mv)
            mts, mags = ts[match], ag_idx[match]
            t0 = int(mts.min())
            at_t = np.flatnonzero(mts == t0)
            i = int(mags[at_t[0]])
            # partner: an agent doing the reverse move at the same step
            j = int(np.flatnonzero((cid[t0] == cid[t0 + 1, i]) & (cid[t0 + 1] == cid[t0, i]))[0])
            ag = sorted((i, j))
            cells = ((int(p[t0, ag[0], 0]), int(p[t0, ag[0], 1])), (int(p[t0, ag[1], 0]), int(p[t0, ag[1], 1])))
            found.append(Violation("swap", t0 + 1, tuple(ag), cells, counts["swap"],
                                   f"step {t0 + 1}: agents {ag} swap cells {_cells_str(cells)} (edge conflict)"))
    found.sort(key=lambda v: (v.step, KINDS.index(v.kind)))
    # costs
    reached = goal_visits(p, goals, order)
    all_done = (reached >= 0).all(1)
    if k == 0:
        finish = np.zeros(n, dtype=np.int32)
    elif order == "fixed":
        finish = np.where(all_done, reached[:, -1], -1).astype(np.int32)
    else:
        finish = np.where(all_done, reached.max(1), -1).astype(np.int32)
    miss = T if max_steps is None else int(max_steps)
    cost = np.where(finish >= 0, finish, miss).astype(np.int64)
    return PlanReport(ok=not found, violations=found, counts=counts, num_steps=T, goal_reached_at=reached,
                      finish_step=finish, soc=int(cost.sum()), makespan=int(cost.max()) if n else 0,
                      goals_visited=int((reached >= 0).sum()), complete=bool(all_done.all()))


def assert_valid(instance: Any, paths: np.ndarray, *, require_complete: bool = False, max_steps: int | None = None) -> PlanReport:
    """:func:`validate_plan`, raising on the first violation.

    Args:
        instance, paths, max_steps: as for :func:`validate_plan`.
        require_complete: also require every agent to visit all its goals.

    Returns:
        the :class:`PlanReport` of a valid plan.

    Raises:
        InvalidPlanError: (a :class:`coopsim.errors.CoopsimError`) naming the first violation, its step and agents,
            and how many violations of each kind the plan has; or the agents that do not finish if
            ``require_complete``.
    """
    rep = validate_plan(instance, paths, max_steps=max_steps)
    if not rep.ok:
        others = ", ".join(f"{kd}: {c}" for kd, c in rep.counts.items() if c)
        raise InvalidPlanError(f"invalid plan: {rep.first.message} [violations {others}]", rep)
    if require_complete and not rep.complete:
        ag = np.flatnonzero(rep.finish_step < 0).tolist()
        raise InvalidPlanError(f"incomplete plan: agent(s) {ag[:20]}{' ...' if len(ag) > 20 else ''} ({len(ag)} of "
                               f"{len(rep.finish_step)}) do not visit all their goals within {rep.num_steps} steps", rep)
    return rep
