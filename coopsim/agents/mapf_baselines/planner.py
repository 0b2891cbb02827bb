"""Centralized prioritized planning with space-time A* for (multi-goal) MAPF.

The planner follows prioritized planning (Erdmann & Lozano-Pérez, "On multiple moving objects",
Algorithmica 1987; Silver, "Cooperative Pathfinding", AIIDE 2005): agents plan one after another in a
priority order, each with space-time A* against a reservation table holding the paths of the agents
planned before it. Multi-goal agents (MG-MAPF) plan one search over states ``(cell, time, stage)``,
where ``stage`` counts the goals visited so far in the agent's goal sequence (the given order for
``fixed``, a nearest-neighbour tour by true distance for ``free``). The heuristic is the exact 4-connected
distance to the next goal (breadth-first distance maps, :func:`.common.distance_rows`) plus the
remaining tour length, which is admissible and consistent.

Conflict model (the one :func:`coopsim.scenarios.mapf.validate.validate_plan` checks): no two agents in
one cell at one step (vertex conflict), no two agents exchanging cells in one step (swap / edge
conflict); following into a cell vacated in the same step, and rotations, are allowed. An agent that has
visited all its goals is finished (its cost is the step it finished, the MG-MAPF sum-of-costs convention)
but stays on the map: its path ends in a cell that it keeps for ever and that no higher-priority agent
enters afterwards ("parking"); after finishing it may still move to reach such a cell, which costs
nothing. Parking rule, so that agents planned later stay solvable: no agent keeps for ever a cell that is
the start or a goal of an agent not planned yet, or whose loss would split the free cells nobody keeps
(an articulation point); and during the first ``START_GUARD`` (2) steps no agent enters the start cell of
an agent not planned yet, so that agent is not run over before it can move. After the last reserved step the reservations no longer change, so all later
steps are merged into one state per (cell, stage): the search space is finite.

Failures: an agent without a plan through all its goals (within ``horizon`` steps and ``max_expansions``
nodes) is a *plan failure*; it then plans a goal-less path that only keeps out of the way of the agents
above it and parks. The priority order is restarted with the failed agents first and the rest shuffled
(seeded), up to ``restarts`` times, keeping the attempt with the fewest agents without any path, then the
fewest failures, then the lowest SoC. Agents left without any path at all (trapped at their start by the
traffic above them) are moved to the front of the order until none is left; as a last resort they wait
at their start for the whole plan and every other agent plans around them. The returned paths are
therefore always conflict-free.

Typical CPU cost (one core, ``benchmarks/mapf_planners.py``): 64 agents x 3 goals on random-32-32-10 about
0.1 s; 100 agents x 1-3 goals on every shipped map at most about 4 s (maze-32-32-2 with 3 goals).
"""
from __future__ import annotations

import heapq
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from coopsim.agents.mapf_baselines.common import distance_rows
from coopsim.scenarios.mapf.grid import whole_cells
from coopsim.scenarios.mapf.validate import goal_visits

INF = 1 << 60
#: steps during which no agent enters the start cell of an agent not planned yet (gives it time to get away)
START_GUARD = 2

#: action id -> (dx, dy): 0 wait, 1 up (y-1), 2 down (y+1), 3 left (x-1), 4 right (x+1)
DELTAS = np.array([[0, 0], [0, -1], [0, 1], [-1, 0], [1, 0]], dtype=np.int64)


@dataclass
class PlanResult:
    """Outcome of :func:`plan_prioritized` for one instance.

    Attributes:
        paths: int32 ``[T+1, N, 2]`` cells (x, y) per step; after its last move an agent stays put.
        failed: bool ``[N]``, agents without a plan (they wait at their start for the whole plan).
        finish_step: int32 ``[N]``, step at which the agent has visited all its goals along ``paths`` (first visits,
            as :func:`coopsim.scenarios.mapf.validate.goal_visits` counts them; -1 if it never does).
        order: int64 ``[N]``, the priority order of the kept attempt (highest first).
        goal_sequence: int64 ``[N, K]``, the order in which each agent visits its goals (indices into ``goals``).
        attempts: number of priority orders tried (1 + restarts used).
        expansions: A* node expansions over all attempts.
        plan_time_s: wall time of the call (s).
    """

    paths: np.ndarray
    failed: np.ndarray
    finish_step: np.ndarray
    order: np.ndarray
    goal_sequence: np.ndarray
    attempts: int
    expansions: int
    plan_time_s: float
    info: dict = field(default_factory=dict)

    @property
    def soc(self) -> int:
        """Sum over agents of ``finish_step`` (only meaningful when no agent failed)."""
        return int(self.finish_step[self.finish_step >= 0].sum())

    @property
    def makespan(self) -> int:
        return int(self.finish_step.max()) if len(self.finish_step) else 0

    def actions(self) -> np.ndarray:
        """int64 ``[T, N]`` action ids that replay ``paths`` (0 wait, 1 up, 2 down, 3 left, 4 right)."""
        return path_actions(self.paths)


def path_actions(paths: np.ndarray) -> np.ndarray:
    """Action ids int64 ``[T, N]`` that move agents along ``paths`` int ``[T+1, N, 2]`` (unit moves only).

    Raises:
        ValueError: a step between consecutive cells is not a wait or a unit move.
    """
    d = np.diff(np.asarray(paths, dtype=np.int64), axis=0)  # [T, N, 2]
    code = (d[..., 0] + 1) * 3 + (d[..., 1] + 1)  # (dx, dy) in {-1,0,1}^2 -> 0..8
    table = np.full(9, -1, dtype=np.int64)
    for a, (dx, dy) in enumerate(DELTAS):
        table[(dx + 1) * 3 + (dy + 1)] = a
    bad = (np.abs(d) > 1).any(-1)
    act = np.where(bad, -1, table[np.clip(code, 0, 8)])
    if (act < 0).any():
        t, i = (int(v) for v in np.argwhere(act < 0)[0])
        raise ValueError(f"agent {i} moves from {paths[t, i].tolist()} to {paths[t + 1, i].tolist()} at step {t + 1}: not a unit move")
    return act


def neighbour_table(blocked: np.ndarray) -> list[list[int]]:
    """For each cell ``y*W + x``: the cells reachable in one step, itself (wait) first; empty for obstacles."""
    blocked = np.asarray(blocked, dtype=bool)
    h, w = blocked.shape
    out: list[list[int]] = []
    for y in range(h):
        for x in range(w):
            if blocked[y, x]:
                out.append([])
                continue
            c = y * w + x
            nb = [c]
            for dx, dy in ((0, -1), (0, 1), (-1, 0), (1, 0)):
                nx, ny = x + dx, y + dy
                if 0 <= nx < w and 0 <= ny < h and not blocked[ny, nx]:
                    nb.append(ny * w + nx)
            out.append(nb)
    return out


def nearest_neighbour_tours(start_cells: np.ndarray, goal_cells: np.ndarray, goal_rows: np.ndarray,
                            dist_rows: np.ndarray) -> np.ndarray:
    """Nearest-neighbour goal order per agent, by true grid distance, vectorized over agents.

    Args:
        start_cells: int ``[N]`` flat start cells.
        goal_cells: int ``[N, K]`` flat goal cells.
        goal_rows: int ``[N, K]`` row of each goal in ``dist_rows``.
        dist_rows: int ``[U, H*W]`` distance from each distinct goal to every cell (-1 unreachable).

    Returns:
        int64 ``[N, K]``: goal indices in visiting order (ties broken by the lower goal index; unreachable last).
    """
    n, k = goal_cells.shape
    big = np.iinfo(np.int64).max // 4
    ar = np.arange(n)
    cur = np.asarray(start_cells, dtype=np.int64)
    left = np.ones((n, k), dtype=bool)
    order = np.empty((n, k), dtype=np.int64)
    for s in range(k):
        dk = dist_rows[goal_rows, cur[:, None]].astype(np.int64)   # [N, K]
        dk = np.where(dk < 0, big, dk)
        dk = np.where(left, dk, big + 1)
        nxt = dk.argmin(1)
        order[:, s] = nxt
        left[ar, nxt] = False
        cur = goal_cells[ar, nxt]
    return order


class _Reservations:
    """Reservation table of the agents planned so far (flat cells ``c = y*W + x``).

    ``vertex`` holds ``t*HW + c`` for every (step, cell) occupied, ``edge`` holds ``(t*HW + a)*HW + b`` for every move
    a -> b between steps t and t+1, ``park[c]`` is the step from which c is occupied for ever (``INF`` if never) and
    ``last[c]`` the last step at which c is occupied by a moving agent (-1 if never).

    Parking rule (keeps lower-priority agents solvable): an agent may not keep for ever a cell that is the start or a
    goal of an agent not planned yet (``protect[c] > 0``), nor a cell whose loss would split the free cells that
    nobody keeps (an articulation point of that graph, tested lazily and cached until the next agent parks).
    """

    def __init__(self, nbrs: list[list[int]], protect: list[int]):
        self.hw = hw = len(nbrs)
        self.nbrs = nbrs
        self.vertex: set[int] = set()
        self.edge: set[int] = set()
        self.park = [INF] * hw
        self.last = [-1] * hw
        self.tmax = 0
        self.protect = protect
        self.guard = [0] * self.hw   # > 0: the start of an agent not planned yet
        self._cut: dict[int, bool] = {}

    def add(self, cells: list[int]) -> None:
        hw, vertex, edge, last = self.hw, self.vertex, self.edge, self.last
        tp = len(cells) - 1
        if tp > self.tmax:
            self.tmax = tp
        for t, c in enumerate(cells):
            vertex.add(t * hw + c)
            if t < tp:
                if last[c] < t:
                    last[c] = t
                n = cells[t + 1]
                if n != c:
                    edge.add((t * hw + c) * hw + n)
        self._keep(cells[-1], tp)

    def add_static(self, c: int) -> None:
        self._keep(c, 0)

    def _keep(self, c: int, t: int) -> None:
        if self.park[c] > t:
            self.park[c] = t
        self._cut.clear()

    def can_keep(self, c: int) -> bool:
        """May an agent keep ``c`` for ever (``c`` not protected and not a cut cell of the unkept free graph)?"""
        if self.protect[c] > 0:
            return False
        r = self._cut.get(c)
        if r is None:
            r = self._cut[c] = not self._is_cut(c)
        return r

    def _is_cut(self, c: int) -> bool:
        park, nbrs = self.park, self.nbrs
        targets = [n for n in nbrs[c][1:] if park[n] >= INF]
        if len(targets) <= 1:
            return False
        want = set(targets[1:])
        seen = {c, targets[0]}
        queue = deque([targets[0]])
        pop = queue.popleft
        while queue:
            u = pop()
            for v in nbrs[u][1:]:
                if v not in seen and park[v] >= INF:
                    if v in want:
                        want.discard(v)
                        if not want:
                            return False
                    seen.add(v)
                    queue.append(v)
        return True


def space_time_astar(start: int, goal_seq: list[int], dist: list[list[int]], tail: list[int], nbrs: list[list[int]],
                     res: _Reservations, horizon: int, max_expansions: int) -> tuple[list[int] | None, int, int]:
    """Space-time A* for one agent through its goals in the order ``goal_seq`` (flat cells).

    States are ``(cell, step, stage)`` with ``stage`` the number of goals of ``goal_seq`` visited. Every step
    costs 1 until the last goal is visited; afterwards moves are free and the search only looks for a cell
    the agent can keep for ever. After the last reserved step nothing changes any more, so all later steps
    are merged into one (the search space is finite even without a horizon).

    Args:
        start: flat start cell.
        goal_seq: flat goal cells in visiting order (``K``, may be empty: then the agent only needs a parking cell).
        dist: ``K`` lists of length H*W: distance of every cell to goal ``s`` (-1 unreachable).
        tail: ``K+1`` remaining tour lengths: ``tail[s]`` = distance goal s -> s+1 -> ... -> K-1.
        nbrs: :func:`neighbour_table` of the grid.
        res: reservations of higher-priority agents.
        horizon: last step a path may reach (steps).
        max_expansions: node budget of the search.

    Returns:
        ``(cells, finish_step, expansions)``: the path as flat cells per step ``0..T`` ending in a cell the agent can
        keep for ever, the step at which the last goal was visited; ``(None, -1, expansions)`` on failure.
    """
    k = len(goal_seq)
    hw = res.hw
    vertex, edge, park, last, guard = res.vertex, res.edge, res.park, res.last, res.guard
    tcap = res.tmax + 1  # from this step on the reservations no longer change
    s0 = 0
    while s0 < k and goal_seq[s0] == start:
        s0 += 1
    span = (k + 1) * hw
    if s0 < k:
        h0 = dist[s0][start]
        if h0 < 0:
            return None, -1, 0
        f0 = h0 + tail[s0]
    else:
        f0, h0 = 0, 0
    key0 = s0 * hw + start
    parent = {key0: -1}
    best = {key0: f0}
    closed = set()
    heap = [(f0, h0, 0, start, s0, 0, key0)]
    expansions = 0
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        f, hh, t, c, s, tf, key = pop(heap)
        if key in closed:
            continue
        closed.add(key)
        expansions += 1
        if s == k and last[c] < t and park[c] >= INF and res.can_keep(c):
            cells = []
            while key >= 0:
                cells.append(key % hw)
                key = parent[key]
            cells.reverse()
            return cells, tf, expansions
        if expansions > max_expansions:
            break
        t1 = t + 1
        if t1 > horizon:
            continue
        vbase = t1 * hw
        ebase = t * hw
        kbase = (t1 if t1 < tcap else tcap) * span
        for n in nbrs[c]:
            if vbase + n in vertex or park[n] <= t1 or (t1 <= START_GUARD and guard[n] and n != start):
                continue
            if n != c and (ebase + n) * hw + c in edge:
                continue
            ns = s
            if s < k:
                if n == goal_seq[s]:
                    ns += 1
                    while ns < k and goal_seq[ns] == n:
                        ns += 1
                if ns < k:
                    d = dist[ns][n]
                    if d < 0:
                        continue
                    nh = d + tail[ns]
                    nf, ntf = t1 + nh, 0
                else:
                    nh, nf, ntf = 0, t1, t1
            else:
                nh, nf, ntf = 0, tf, tf
            nkey = kbase + ns * hw + n
            if nkey in closed or best.get(nkey, INF) <= nf:
                continue
            best[nkey] = nf
            parent[nkey] = key
            push(heap, (nf, nh, t1, n, ns, ntf, nkey))
    return None, -1, expansions


def _tour_tails(goal_seq: list[int], dist: list[list[int]]) -> list[int] | None:
    k = len(goal_seq)
    tail = [0] * (k + 1)
    for s in range(k - 2, -1, -1):
        d = dist[s + 1][goal_seq[s]]
        if d < 0:
            return None
        tail[s] = tail[s + 1] + d
    return tail


def plan_prioritized(blocked: np.ndarray, starts_xy: np.ndarray, goals_xy: np.ndarray, goal_order: str = "free", *,
                     horizon: int = 512, priority: str = "tour_desc", restarts: int = 5, seed: int = 0,
                     max_expansions: int = 200_000, time_limit_s: float | None = None) -> PlanResult:
    """Prioritized planning with space-time A* for MG-MAPF (see the module docstring).

    Args:
        blocked: bool ``[H, W]`` obstacles, indexed ``[y, x]``.
        starts_xy: int ``[N, 2]`` start cells (x, y), distinct and free (any integer dtype, or floats holding whole
            numbers).
        goals_xy: int ``[N, K, 2]`` goal cells (x, y) per agent (``[N, 2]``: one goal each), as ``starts_xy``.
        goal_order: ``"fixed"`` (visit in the given order) or ``"free"`` (nearest-neighbour tour by true distance).
        horizon: last step any path may reach (steps, >= 1).
        priority: initial order: ``"tour_desc"`` (longest goal tour first, ties by index), ``"index"`` or ``"random"``.
        restarts: further orders tried when agents fail (failed agents first, the rest shuffled), >= 0.
        seed: seeds the shuffles of restarts and of ``priority="random"``.
        max_expansions: A* node budget per agent and attempt.
        time_limit_s: stop trying new orders once this much wall time is spent (None: no limit).

    Returns:
        :class:`PlanResult`; its paths are conflict-free in every case (failed agents wait at their start).

    Raises:
        ValueError: bad shapes, unknown ``goal_order``/``priority``, a cell that is not a whole number (``0.7``:
            naming the entry), a start or goal off the map or on an obstacle, or two agents sharing a start.
    """
    t_start = time.perf_counter()
    blocked = np.asarray(blocked, dtype=bool)
    starts = whole_cells(starts_xy, "starts_xy")  # a float cell is refused, not truncated to another cell
    goals = whole_cells(goals_xy, "goals_xy")
    if blocked.ndim != 2:
        raise ValueError(f"blocked must be [H, W]; got shape {blocked.shape}")
    if goals.ndim == 2:
        goals = goals[:, None, :]
    if starts.ndim != 2 or starts.shape[1] != 2 or goals.ndim != 3 or goals.shape[0] != starts.shape[0] or goals.shape[2] != 2:
        raise ValueError(f"starts must be [N, 2] and goals [N, K, 2]; got {starts.shape} and {goals.shape}")
    if goal_order not in ("fixed", "free"):
        raise ValueError(f"goal_order must be 'fixed' or 'free'; got {goal_order!r}")
    if priority not in ("tour_desc", "index", "random"):
        raise ValueError(f"priority must be 'tour_desc', 'index' or 'random'; got {priority!r}")
    if horizon < 1 or restarts < 0 or max_expansions < 1:
        raise ValueError(f"need horizon >= 1, restarts >= 0, max_expansions >= 1; got {horizon}, {restarts}, {max_expansions}")
    h, w = blocked.shape
    hw = h * w
    n, k = goals.shape[:2]
    for what, cells in (("start", starts), ("goal", goals.reshape(-1, 2))):
        if len(cells) == 0:
            continue
        off = (cells[:, 0] < 0) | (cells[:, 0] >= w) | (cells[:, 1] < 0) | (cells[:, 1] >= h)
        if off.any():
            raise ValueError(f"{what} {cells[off][0].tolist()} is off the {w}x{h} map")
        onb = blocked[cells[:, 1], cells[:, 0]]
        if onb.any():
            raise ValueError(f"{what} {cells[onb][0].tolist()} lies on an obstacle")
    sc = starts[:, 1] * w + starts[:, 0]
    if len(np.unique(sc)) != n:
        raise ValueError("two agents share a start cell")
    gc = goals[..., 1] * w + goals[..., 0]  # [N, K]
    rng = np.random.default_rng(seed)

    # distance maps of the distinct goal cells (one BFS call); as lists for the A* inner loop (~8 bytes per entry)
    ucells, inv = np.unique(gc.ravel(), return_inverse=True)
    dm = distance_rows(blocked, ucells)
    if goal_order == "free":
        seq = nearest_neighbour_tours(sc, gc, inv.reshape(n, k), dm)
    else:
        seq = np.broadcast_to(np.arange(k), (n, k)).copy()
    ar = np.arange(n)[:, None]
    seq_cells = gc[ar, seq]  # [N, K]
    seq_rows = inv.reshape(n, k)[ar, seq]
    dm_lists = [row.tolist() for row in dm]
    nbrs = neighbour_table(blocked)
    per_agent = []
    tour_len = np.zeros(n, dtype=np.int64)
    for i in range(n):
        dist = [dm_lists[r] for r in seq_rows[i]]
        gseq = [int(c) for c in seq_cells[i]]
        tail = _tour_tails(gseq, dist)
        first = dist[0][int(sc[i])] if k else 0
        if tail is None or first < 0:
            per_agent.append(None)
            tour_len[i] = INF
        else:
            per_agent.append((int(sc[i]), gseq, dist, tail))
            tour_len[i] = first + tail[0] if k else 0

    if priority == "tour_desc":
        order = np.lexsort((np.arange(n), -tour_len))
    elif priority == "index":
        order = np.arange(n)
    else:
        order = rng.permutation(n)

    total_exp = 0

    def attempt(order: np.ndarray, static: set[int]):
        """Plan every agent in ``order``; returns paths, finish steps, goal failures and agents left without any plan."""
        nonlocal total_exp
        protect = [0] * hw
        own = {}
        for i in range(n):
            if i not in static:
                own[i] = {int(sc[i]), *(int(c) for c in gc[i])}
                for c in own[i]:
                    protect[c] += 1
        res = _Reservations(nbrs, protect)
        for i in range(n):
            if i not in static:
                res.guard[int(sc[i])] += 1
        for i in static:
            res.add_static(int(sc[i]))
        paths: list[list[int] | None] = [None] * n
        finish = np.full(n, -1, dtype=np.int64)
        failed: list[int] = []
        stuck: list[int] = []
        for i in order:
            i = int(i)
            if i in static:
                continue
            for c in own[i]:
                protect[c] -= 1
            res.guard[int(sc[i])] -= 1
            spec = per_agent[i]
            cells = None
            if spec is not None:
                cells, tf, ex = space_time_astar(spec[0], spec[1], spec[2], spec[3], nbrs, res, horizon, max_expansions)
                total_exp += ex
            if cells is None:
                failed.append(i)
                # fall back to a goal-less plan: only dodge the agents above and keep some cell
                cells, tf, ex = space_time_astar(int(sc[i]), [], [], [0], nbrs, res, horizon, max_expansions)
                total_exp += ex
                tf = -1
                if cells is None:
                    stuck.append(i)
                    continue
            paths[i], finish[i] = cells, tf
            res.add(cells)
        return paths, finish, failed, stuck

    best = None
    attempts = 0
    for a in range(restarts + 1):
        attempts += 1
        paths, finish, failed, stuck = attempt(order, set())
        cand = (len(stuck), len(failed), int(finish[finish >= 0].sum()), paths, finish, failed, stuck, order.copy())
        if best is None or cand[:3] < best[:3]:
            best = cand
        if not failed or (time_limit_s is not None and time.perf_counter() - t_start > time_limit_s):
            break
        fs = set(failed)
        rest = np.array([i for i in order if i not in fs], dtype=np.int64)
        order = np.concatenate([np.array(failed, dtype=np.int64), rng.permutation(rest)]).astype(np.int64)
    _, _, _, paths, finish, failed, stuck, order = best
    # agents left without any plan (trapped by the traffic of agents above them) move to the front until none is left
    front: list[int] = []
    bump_rounds = 0
    while stuck and bump_rounds < n and not (time_limit_s is not None and time.perf_counter() - t_start > time_limit_s):
        bump_rounds += 1
        attempts += 1
        front += [i for i in stuck if i not in front]
        fs = set(front)
        order = np.array(front + [int(i) for i in order if int(i) not in fs], dtype=np.int64)
        paths, finish, failed, stuck = attempt(order, set())
    static: set[int] = set()
    static_rounds = 0
    while stuck:
        # last resort, conflict-free: agents without any plan wait at their start and everyone else plans around them
        static_rounds += 1
        static |= set(stuck)
        paths, finish, failed, stuck = attempt(order, static)
    failed = sorted(set(failed) | static)
    fail_mask = np.zeros(n, dtype=bool)
    fail_mask[failed] = True
    tmax = max([len(p) - 1 for p in paths if p is not None] + [0])
    out = np.empty((tmax + 1, n), dtype=np.int64)
    for i in range(n):
        p = paths[i] if paths[i] is not None else [int(sc[i])]
        out[: len(p), i] = p
        out[len(p):, i] = p[-1]
    xy = np.stack([out % w, out // w], -1).astype(np.int32)
    # costs under the instance's own semantics (a free-order agent may pass over a later goal early)
    reached = goal_visits(xy, goals, goal_order)
    done = (reached >= 0).all(1)
    finish = np.where(done, reached.max(1) if k else 0, -1)
    fail_mask &= ~done  # a goal-less path may still pass over every goal
    return PlanResult(paths=xy, failed=fail_mask, finish_step=finish.astype(np.int32), order=np.asarray(order, dtype=np.int64),
                      goal_sequence=seq, attempts=attempts, expansions=total_exp, plan_time_s=time.perf_counter() - t_start,
                      info={"bump_rounds": bump_rounds, "static_rounds": static_rounds, "static_agents": sorted(static)})
