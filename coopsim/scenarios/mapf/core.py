"""MG-MAPF: multi-goal multi-agent path finding on MovingAI grid maps (``mapf/MGMAPF-v0``).

Description:
    ``N`` agents move on a 4-connected grid map (a MovingAI benchmark map, Stern et al., SoCS 2019, or a
    generated random map). Each agent has ``K`` goals; it is *finished* once it has visited all of them
    (``goal_order="free"``: each at least once, in any order, the MG-MAPF setting; ``"fixed"``: in the
    given sequence, a goal counting only when it is the next one). A goal counts as visited when the
    agent stands on it after a step; a goal that is the agent's own start cell (possible only for a scen
    file's first goal) counts as visited at reset (step 0). Finished agents are *not* removed: they stay on
    the map and may keep moving (to make room); every agent terminates together when all are finished,
    and all truncate at ``max_steps``.

    Instances: with a shipped map, reset with seed ``s`` gives env ``e`` the scen file
    ``<map>-random-<i>.scen`` with ``i = (s + e) % 25 + 1`` (unless ``scen`` is given) and the generator
    ``np.random.default_rng([s, e])``; agent ``j`` takes the start and the first goal of row ``j`` and
    ``K - 1`` more goals sampled from its start's 4-connected region, distinct from every start and every
    other goal (:mod:`coopsim.scenarios.mapf.sampling`). A reset without a seed continues each env's
    generator and draws the scen index from it. With ``map="random"`` every reset generates a connected
    map (side in ``random_size``, obstacle fraction ``random_density``) and random starts and goals; a map
    given by path without ``scen`` gets random starts too.

    Unreachable goals: sampled goals (every goal of a random instance, goals 2..K of a scen instance) are drawn from
    the start's region, so only a scen row's goal (or a goal of a :meth:`MGMAPFCore.from_instance` instance) can lie
    where walls separate it from the start; MovingAI's own scen files (the shipped ones) have none. Such an instance
    is still played, since an unsolvable instance is a valid input for a study of failures, but the scenario warns
    (``RuntimeWarning``, once per scen file or instance, at the first reset that uses it, resp. at ``from_instance``)
    naming the scen file, the line, the agent, its start and goal: no policy can finish that agent, so every episode
    runs to ``max_steps`` with ``success`` 0, and ``lb`` is inf (undefined), which the results leave out as they
    do ``soc_over_lb``.

Movement rules (applied simultaneously to all agents of an env; ``conflicts="block"``):
    1. Actions: 0 wait, 1 up (y-1), 2 down (y+1), 3 left (x-1), 4 right (x+1); x is the column, y the row.
    2. A move off the map or into an obstacle is a wait (counted in ``invalid_moves``).
    3. Two or more agents entering one cell all wait (vertex conflict).
    4. Two agents exchanging cells both wait (swap conflict).
    5. An agent moving into a cell whose occupant does not leave waits; this cascades (an agent whose
       target is vacated only by an agent that now waits, waits too) until stable.
    6. Following into a cell vacated in the same step is allowed; so is a rotation of three or more agents
       along a cycle (every cell of the cycle is vacated).
    Rules 3–5 turn a move into a wait and count one ``blocked_moves`` each. With ``conflicts="allow"`` no move
    is blocked (rule 2 still applies): agents may share cells and swap, and every pair of agents on one cell
    after a step (vertex) and every pair that swapped (edge) counts one ``collisions`` (``cost/collision``).

Observation (``Dict``, per agent, keys in this order):

    =========== ========================= ===========================================================================
    key         shape, dtype              meaning (unit, range)
    =========== ========================= ===========================================================================
    goal_status float32 [K, 2]            [:, 0] 1 if goal k is still to visit; [:, 1] 1 if visiting it now would
                                          count (fixed order: only the next goal; free order: every remaining goal)
    goal_vec    float32 [K, 2]            (dx, dy) = goal k − own cell (cells, x right, y down; |dx| < W, |dy| < H);
                                          zero once visited
    window      float32 [3, 2R+1, 2R+1]   local view centred on the agent, ``window[c, i, j]`` is the cell
                                          (x + j − R, y + i − R): c=0 obstacle or off-map (1/0), c=1 another agent
                                          there (1/0), c=2 one of the agent's own remaining goals there (1/0)
    =========== ========================= ===========================================================================

    The batched ``window`` array ``[E, N, 3, S, S]`` is gathered as ``S`` rows of ``3S`` bytes per agent out of
    channels-last uint8 planes and converted to float32 in one pass, so it is a strided view (memory order
    ``[E, N, S, S, 3]``); index it freely, or call ``np.ascontiguousarray`` before ``.view``-style
    reinterpretation.

Action (``Discrete(5)``): 0 wait, 1 up, 2 down, 3 left, 4 right (no-op: 0).

Reward: −1 per step for each agent that still has goals left at the start of the step, else 0; the team
    return is −SoC, SoC being the sum over agents of the step at which each finished (``max_steps`` if never).
    Logged as ``reward/time``.

Episode end: all agents terminate together at the step the last one finishes; all truncate at ``max_steps``.

State (``state()``, float32 ``[E, 3N + 3NK + 1]``, in this order): agent cells (x/(W-1), y/(H-1)) ``[N, 2]``, goal
cells (same scale) ``[N, K, 2]``, visited flags ``[N, K]``, finished flags ``[N]``, and ``t / max_steps`` ``[1]``.

Arguments (:class:`MGMAPFParams`):

    ================ ===================== ================================================================
    name             default               meaning (unit, valid range)
    ================ ===================== ================================================================
    map              ``random-32-32-10``   shipped map name, a ``.map`` path, or ``random``
    scen             None                  scen index 1..25 or path; None: ``(seed + env) % 25 + 1``
    random_size      (17, 32)              ``map=random``: side length range (cells, 4..512)
    random_density   0.2                   ``map=random``: obstacle fraction (0.1..0.3)
    random_style     ``cells``             ``map=random``: ``cells`` (scattered cells) or ``bars`` (straight bars)
    num_agents       64                    N (1..8192; at most the scen file's rows)
    num_goals        3                     K goals per agent (1..32)
    goal_order       ``free``              ``free`` (any order, MG-MAPF) or ``fixed`` (given sequence)
    conflicts        ``block``             ``block`` (rules 3-5) or ``allow`` (count collisions)
    obs_radius       5                     R, window side 2R+1 (cells, 1..32)
    cell_size_m      1.0                   cell width for ``positions()`` (m, > 0)
    dt_s             1.0                   simulated time per step (s, > 0)
    max_steps        256                   truncation step (1..1e6)
    ================ ===================== ================================================================

Capabilities (public methods for planners, runner and safety layer): ``from_instance``, ``instance(e)``,
``agent_xy()``, ``goals_xy()``, ``goals_visited()``, ``map_data(e)``, ``scen_file(e)``, ``observations()``,
``positions()``, ``replay(e)``, ``lower_bound(e)``, ``episode_metrics()``, ``render(e)``, ``render_replay(replay)``,
``constraints()`` (collision constraints for safety shields).

Metrics (``episode_metrics()``, per env): ``soc``, ``makespan``, ``success``, ``goal_fraction``, ``throughput``
(goals per step), ``blocked_moves``, ``invalid_moves``, ``collisions``, ``lb``, ``soc_over_lb``,
``episode_return``, ``steps``. ``soc`` and ``makespan`` charge an agent that never finished ``max_steps``;
``soc_over_lb`` (SoC / LB) is a quality measure of *solved* episodes, as MAPF papers report it: it is nan for an
episode in which some agent did not finish all its goals (cut off at ``max_steps``, or not done yet), where
``max_steps`` in the SoC would make it meaningless (below 1 for a short cut-off), so that it is >= 1 whenever
defined. The run summary averages it over the episodes that have it (a nan is a missing value there) and reports
``success`` beside it.

Version history:
    v0 — initial version (issue 2).
"""
from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path
from typing import Any, Literal, Optional, Union

import gymnasium
import numpy as np
from pydantic import Field, field_validator, model_validator

from coopsim.scenarios.mapf.instance import MAPFInstance
from coopsim.errors import ConfigError
from coopsim.platform.scenario import (STEP_BEFORE_RESET, RebindsViews, ScenarioCore, ScenarioParams, StepResult,
                                       check_num_envs, discrete_joint_actions, reset_ids)
from coopsim.scenarios.mapf.generator import MAX_DENSITY, MIN_DENSITY, random_bars_map, random_map
from coopsim.scenarios.mapf.grid import components, unreachable_goals
from coopsim.scenarios.mapf.loaders import DATA_DIR, MapData, load_map, load_scen, resolve_map, resolve_scen, shipped_scens
from coopsim.scenarios.mapf.metrics import EXACT_MAX_GOALS, check_replay_memory, tour_lower_bound
from coopsim.scenarios.mapf.render import draw_frame
from coopsim.scenarios.mapf.sampling import instance_from_scen, random_instance

#: action id -> (dx, dy): 0 wait, 1 up (y-1), 2 down (y+1), 3 left (x-1), 4 right (x+1)
ACTION_DELTAS = np.array([[0, 0], [0, -1], [0, 1], [-1, 0], [1, 0]], dtype=np.int64)
ACTION_NAMES = ("wait", "up", "down", "left", "right")


class MGMAPFParams(ScenarioParams):
    """Parameters of ``mapf/MGMAPF-v0``."""

    map: str = Field("random-32-32-10", description="shipped MovingAI map name (e.g. 'random-32-32-10'), a path to a "
                                                    ".map file, or 'random' for a generated connected map per reset",
                     json_schema_extra={"file": True})
    scen: Optional[Union[int, str]] = Field(None, description="scen file: index 1..25 of the shipped '<map>-random-<i>.scen' "
                                                              "or a path; None: chosen by the seed ((seed + env) % 25 + 1)",
                                            json_schema_extra={"file": True})
    random_size: tuple[int, int] = Field((17, 32), description="map='random': side length range [lo, hi] in cells, 4..512")
    random_density: float = Field(0.2, ge=MIN_DENSITY, le=MAX_DENSITY,
                                  description="map='random': obstacle fraction, 0.1..0.3")
    random_style: Literal["cells", "bars"] = Field("cells", description="map='random': 'cells' (obstacles scattered "
                                                   "cell by cell, MovingAI random-* style) or 'bars' (straight 1-cell "
                                                   "bars of 2..8 cells, which leave corridors)")
    num_agents: int = Field(64, ge=1, le=8192, description="agents N, 1..8192")
    num_goals: int = Field(3, ge=1, le=32, description="goals per agent K, 1..32 (exact free-order LB for K <= 10)")
    goal_order: Literal["fixed", "free"] = Field("free", description="'fixed': visit goals in the given order; "
                                                                     "'free': each at least once, any order")
    conflicts: Literal["block", "allow"] = Field("block", description="'block': conflicting moves become waits; "
                                                                      "'allow': moves happen and conflicts count as collisions")
    obs_radius: int = Field(5, ge=1, le=32, description="observation window radius R in cells, 1..32")
    cell_size_m: float = Field(1.0, gt=0, description="cell width in metres (positions()), > 0")
    dt_s: float = Field(1.0, gt=0, description="simulated seconds per step, > 0")
    max_steps: int = Field(256, ge=1, le=1_000_000, description="episode step limit, 1..1e6")

    @field_validator("map")
    @classmethod
    def _check_map(cls, v: str) -> str:
        if v != "random":
            try:
                resolve_map(v)
            except ConfigError as exc:  # the registry names the key and the value: keep the reason and the list only
                raise ValueError(str(exc).split(f"unknown map {v!r}: ", 1)[-1]) from None
        return v

    @field_validator("scen", mode="before")
    @classmethod
    def _scen_is_index_or_path(cls, v: Any) -> Any:
        """An index (an int, or a whole float as YAML may give it) >= 1 or a path; anything else is refused here, so
        the error names the key ``scen`` (pydantic's union would name its branch, ``scen.int``)."""
        import os

        from coopsim.errors import short_repr

        if v is None or isinstance(v, str):
            return v
        if isinstance(v, os.PathLike):
            return os.fspath(v)
        if isinstance(v, (bool, np.bool_)):
            raise ValueError(f"scen must be an integer index 1..25 of a shipped scen file or a path to a .scen file, "
                             f"not a boolean ({v!r})")
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, (int, np.integer)):
            if v < 1:
                raise ValueError(f"scen index {int(v)} is out of range: the shipped scen files of a map are numbered "
                                 f"1..25 (or give a path to a .scen file)")
            return int(v)
        raise ValueError(f"scen must be an integer index 1..25 of a shipped scen file or a path to a .scen file, not "
                         f"a {type(v).__name__} ({short_repr(v)})")

    @field_validator("random_size", mode="before")
    @classmethod
    def _size_is_a_pair(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)) and len(v) != 2:
            raise ValueError(f"random_size must be a pair [lo, hi] of side lengths in cells (4 <= lo <= hi <= 512), "
                             f"e.g. [16, 16] for 16x16 maps; got {list(v)}")
        return v

    @field_validator("random_size")
    @classmethod
    def _check_size(cls, v: tuple[int, int]) -> tuple[int, int]:
        lo, hi = int(v[0]), int(v[1])
        if not (4 <= lo <= hi <= 512):
            raise ValueError(f"random_size must be [lo, hi] cells with 4 <= lo <= hi <= 512; got {list(v)}")
        return (lo, hi)

    @model_validator(mode="after")
    def _check_scen(self):
        if self.scen is not None and self.map == "random":
            raise ValueError("scen cannot be given with map='random' (generated maps have no scen file)")
        return self


@functools.lru_cache(maxsize=64)
def _cached_map(path: str) -> MapData:
    return load_map(path)


@functools.lru_cache(maxsize=256)
def _cached_scen(path: str, map_path: str):
    sc = load_scen(path, _cached_map(map_path))
    for arr in (sc.bucket, sc.start_xy, sc.goal_xy, sc.optimal_length, sc.line):
        arr.setflags(write=False)  # shared by every core through the cache
    return sc


@functools.lru_cache(maxsize=64)
def _cached_labels(path: str) -> np.ndarray:
    labels = components(_cached_map(path).blocked)
    labels.setflags(write=False)
    return labels


class MGMAPFCore(RebindsViews, ScenarioCore):
    """Batched MG-MAPF simulator on MovingAI grid maps (see the module docstring for the full specification).

    Args:
        num_envs: environments stepped together (``E``).
        **params: :class:`MGMAPFParams`.

    Raises:
        ConfigError: an invalid param (names the key and the value, as the registry does); a map, scen file or
            instance request that cannot be served (e.g. more agents than rows).
        MapFormatError: a malformed map or scen file.
    """

    Params = MGMAPFParams
    metadata = {"name": "mgmapf_v0", "render_modes": ["rgb_array"], "is_parallelizable": True}
    noop_action = 0
    #: envs never reset since the core was built (after a first ``reset(env_ids=...)`` of some envs only)
    _unreset: tuple[int, ...] = ()

    def __init__(self, num_envs: int = 1, **params: Any):
        from coopsim.platform.registry import checked_params
        num_envs = check_num_envs(num_envs)  # as make_scenario: 0, 2.5, True or '2' used to build a core
        self.params = checked_params(self.Params, params, type(self).__name__)
        self._fixed: Optional[tuple[MapData, np.ndarray, np.ndarray]] = None
        self._init(num_envs)

    # construction ------------------------------------------------------------------------------------
    @classmethod
    def from_instance(cls, instance: Any, num_envs: int = 1, **params: Any) -> "MGMAPFCore":
        """A core whose every env, on every reset, plays the given instance (tests, planners, replays).

        Args:
            instance: a :class:`coopsim.scenarios.mapf.instance.MAPFInstance` (or any object with
                ``blocked`` bool ``[H, W]``, ``starts`` int ``[N, 2]`` (x, y) and ``goals`` int ``[N, K, 2]``).
                Its ``goal_order`` (if any) is used unless ``goal_order`` is passed.
            num_envs: environments, all with this instance.
            **params: other :class:`MGMAPFParams` (``conflicts``, ``obs_radius``, ``max_steps``, ...);
                ``map``, ``scen``, ``num_agents`` and ``num_goals`` come from the instance.

        Raises:
            ConfigError: starts or goals outside the grid or on obstacles, or two agents sharing a start; an invalid
                param, checked as ``MGMAPFCore(...)`` checks it (names the key and the value; for ``num_agents``,
                ``num_goals`` and ``goal_order`` taken from the instance, says so), or ``map``, ``scen``,
                ``num_agents`` or ``num_goals`` passed.

        Warns:
            RuntimeWarning: a goal that walls separate from its agent's start (no episode can be solved; ``lb`` is
                inf), naming the agent, its start and goal (see "Unreachable goals" in the module docstring).

        Example (conformance check of such a core: pass a factory, since ``params`` alone do not hold the
        instance)::

            check_scenario(lambda n: MGMAPFCore.from_instance(inst, num_envs=n, max_steps=64))
        """
        num_envs = check_num_envs(num_envs)
        blocked, starts, goals, order, name = _instance_arrays(instance)
        params = dict(params)
        for k in ("map", "scen", "num_agents", "num_goals"):
            if k in params:
                raise ConfigError(f"'{k}' comes from the instance in from_instance(); do not pass it", key=k, value=params[k])
        from coopsim.platform.registry import checked_params

        derived = {"num_agents": f"its starts have shape {tuple(starts.shape)}",
                   "num_goals": f"its goals have shape {tuple(goals.shape)}"}
        if order is not None and "goal_order" not in params:
            params["goal_order"] = order
            derived["goal_order"] = f"its goal_order is {order!r}"
        self = cls.__new__(cls)
        try:  # as MGMAPFCore(...) and the registry check them: a ConfigError naming the key, not pydantic's error
            self.params = checked_params(cls.Params, {"num_agents": len(starts), "num_goals": goals.shape[1], **params},
                                         f"{cls.__name__}.from_instance")
        except ConfigError as exc:
            if exc.key not in derived:
                raise
            raise ConfigError(f"{exc.message}; the value comes from the instance ({name!r}): {derived[exc.key]}",
                              key=exc.key, value=exc.value) from None
        self._fixed = (MapData(name=name, blocked=blocked), starts, goals)
        self._init(num_envs)
        cut = unreachable_goals(components(blocked), starts, goals)
        if cut.any():  # once per instance: every reset plays it
            warnings.warn(unreachable_message(self._fixed[0], starts, goals, cut), RuntimeWarning, stacklevel=2)
        return self

    def _label(self) -> str:
        """``MGMAPFCore (map 'random-32-32-10')`` for messages: the instance's map for a :meth:`from_instance` core
        (whose ``params.map`` is the unused default)."""
        fixed = getattr(self, "_fixed", None)
        if fixed is not None:
            return f"{type(self).__name__}.from_instance (map {fixed[0].name!r})"
        return f"{type(self).__name__} (map {self.params.map!r})"

    def _init(self, num_envs: int) -> None:
        p = self.params
        self.num_envs = e = num_envs
        self._never_reset = True
        self.dt_s = float(p.dt_s)
        n, k, r = p.num_agents, p.num_goals, p.obs_radius
        self.agent_ids = tuple(f"agent_{i}" for i in range(n))
        # map source and canvas size
        if self._fixed is not None:
            h, w = self._fixed[0].blocked.shape
            self._map_path = None
        elif p.map == "random":
            h = w = p.random_size[1]
            self._map_path = None
        else:
            self._map_path = str(resolve_map(p.map))
            md = _cached_map(self._map_path)
            h, w = md.blocked.shape
            if p.scen is not None:
                self._scen_paths = [str(resolve_scen(md, p.scen))]
            elif Path(self._map_path).resolve().parent == DATA_DIR:
                self._scen_paths = [str(q) for q in shipped_scens(md.name)]
            else:
                self._scen_paths = []
            if self._scen_paths:
                rows = {q: len(_cached_scen(q, self._map_path)) for q in self._scen_paths}
                q_min = min(rows, key=rows.get)
                if p.num_agents > rows[q_min]:
                    raise ConfigError(f"num_agents={p.num_agents} exceeds the {rows[q_min]} rows of scen file "
                                      f"{Path(q_min).name!r}", key="num_agents", value=p.num_agents)
        self._hmax, self._wmax = h, w
        self._R = r
        self._S = 2 * r + 1
        self._Hc, self._Wc = h + 2 * r, w + 2 * r
        self._C = self._Hc * self._Wc
        wc = self._Wc
        self._delta = np.array([0, -wc, wc, -1, 1], dtype=np.int64)
        self._eoff = (np.arange(e, dtype=np.int64) * self._C)[:, None]  # [E, 1]
        # spaces
        lim = float(max(h, w))
        self.action_space = gymnasium.spaces.Discrete(5)
        self.observation_space = gymnasium.spaces.Dict({
            "goal_status": gymnasium.spaces.Box(0.0, 1.0, shape=(k, 2), dtype=np.float32),
            "goal_vec": gymnasium.spaces.Box(-lim, lim, shape=(k, 2), dtype=np.float32),
            "window": gymnasium.spaces.Box(0.0, 1.0, shape=(3, self._S, self._S), dtype=np.float32),
        })
        self.state_space = gymnasium.spaces.Box(0.0, 1.0, shape=(3 * n + 3 * n * k + 1,), dtype=np.float32)
        # state arrays
        # canvas = each env's map padded by R blocked cells (off-map), flat index (y + R) * Wc + (x + R)
        self._blk = np.ones(e * self._C, dtype=bool)                # obstacle / off-map
        self._cnt = np.zeros(e * self._C, dtype=np.int32)           # agents on the cell (maintained in 'allow' mode)
        self._occ = np.full(e * self._C, -1, dtype=np.int32)        # agent index on the cell (block mode)
        self._claim = np.zeros(e * self._C, dtype=np.int32)         # scratch: a mover claiming the cell (block mode)
        self._contested = np.zeros(e * self._C, dtype=bool)         # scratch: cell claimed by 2+ movers (kept False)
        # uint8 observation planes [E, Hc, Wc, 3]: obstacles, occupied, zeros (goal plane filled per agent).
        # Channels last, so a window row (S cells x 3 channels) is 3S contiguous bytes: ``_win`` views the planes
        # as [cell, S] overlapping 3S-byte items (item (g, i) = the row of S cells starting i rows below cell g), so
        # one fancy index per agent (its window's top-left cell) copies its S rows, memcpy-like; converted to
        # float32 afterwards (4x less gathered memory than float planes)
        self._planes = np.zeros((e, self._Hc, self._Wc, 3), dtype=np.uint8)
        self._planes[..., 0] = 1
        self._bind()
        self._corner = r * self._Wc + r                 # centre cell - top-left cell of a window
        self._e_idx = np.arange(e)[:, None]
        self._aoff = (np.arange(e, dtype=np.int64) * n)[:, None]  # [E, 1] agent offsets into flattened [E*N]
        self._maps: list[Optional[MapData]] = [None] * e
        self._size = np.zeros((e, 2), dtype=np.int64)         # (W, H) of each env's map
        self._gpos = np.zeros((e, n), dtype=np.int64)          # canvas flat index
        self._xy = np.zeros((e, n, 2), dtype=np.int64)
        self._starts = np.zeros((e, n, 2), dtype=np.int32)
        self._goals_xy = np.zeros((e, n, k, 2), dtype=np.int64)
        self._goals = np.zeros((e, n, k), dtype=np.int64)       # canvas flat index
        self._goals_c = np.zeros((e, n, k), dtype=np.complex64)  # goal cells as x + iy (goal_vec in one subtraction)
        self._visited = np.zeros((e, n, k), dtype=bool)
        self._reached_at = np.full((e, n, k), -1, dtype=np.int32)
        self._finish = np.full((e, n), -1, dtype=np.int32)
        self._t = np.zeros(e, dtype=np.int64)
        self._done = np.ones(e, dtype=bool)
        self._term = np.zeros(e, dtype=bool)
        self._trunc = np.zeros(e, dtype=bool)
        self._blocked_moves = np.zeros(e, dtype=np.int64)
        self._invalid_moves = np.zeros(e, dtype=np.int64)
        self._collisions = np.zeros(e, dtype=np.int64)
        self._return = np.zeros(e, dtype=np.float64)
        # trajectory of canvas cells per step (for replay()); grows by doubling up to max_steps + 1 rows: refused
        # here (validate time) when a whole episode's replay would not fit the memory
        check_replay_memory(p.max_steps, n, e)
        self._traj = np.zeros((min(p.max_steps, 512) + 1, e, n), dtype=np.int32)
        self._lb: list[Optional[float]] = [None] * e
        self._scen_used: list[Optional[str]] = [None] * e
        self._rngs = [self.env_rng(0, i) for i in range(e)]
        self._ar_k = np.arange(k)

    #: attributes that are views of ``_planes`` (rebuilt, not pickled: pickle would store each as its own copy)
    _VIEWS = ("_pflat", "_win")

    def _bind(self) -> None:
        """``_pflat`` and ``_win``: views of ``_planes`` (``step`` writes the planes through ``_pflat``,
        ``_observe`` reads windows through ``_win``)."""
        self._pflat = self._planes.reshape(-1)          # view; plane c of global cell g = e*C + cell at 3*g + c
        self._win = np.ndarray(shape=(self.num_envs * self._C - (self._S - 1) * self._Wc - self._S + 1, self._S),
                               dtype=np.dtype((np.void, 3 * self._S)), buffer=self._planes, strides=(3, 3 * self._Wc))

    # ScenarioCore API -------------------------------------------------------------------------------
    @property
    def alive(self) -> np.ndarray:
        """bool ``[E, N]``: every slot of an env is alive until the env's episode ends (agents end together)."""
        return np.repeat(~self._done[:, None], len(self.agent_ids), axis=1)

    @property
    def done(self) -> np.ndarray:
        """bool ``[E]``: envs whose episode has ended."""
        return self._done.copy()

    def reset(self, seed: int | None = None, env_ids: np.ndarray | None = None):
        """Reset all envs or ``env_ids``; returns the whole batch's observations (see the module docstring).

        Raises:
            ValueError: an env id outside ``[0, num_envs)``.
        """
        ids = reset_ids(env_ids, self.num_envs)
        for e in ids:
            e = int(e)
            if seed is not None:
                self._rngs[e] = self.env_rng(seed, e)
            self._load_env(e, self._new_instance(e, seed))
        if self._never_reset or self._unreset:  # a first reset of some envs only: step() refuses until all are reset
            self._unreset = tuple(i for i, m in enumerate(self._maps) if m is None)
        self._never_reset = False
        return self._observe()

    def step(self, actions: np.ndarray) -> StepResult:
        """Advance every env that is not done by one step with ``actions`` int ``[E, N]`` in 0..4.

        Raises:
            ValueError: wrong shape, a dtype that is not an integer one (bools, floats, strings and objects are
                refused, not cast: ``'3'`` moved as 3), or an action outside 0..4 (naming env and agent;
                :func:`~coopsim.platform.scenario.discrete_joint_actions`).
            RuntimeError: before the first :meth:`reset`, or while some env has never been reset (the first resets
                covered other ``env_ids`` only); naming the env.
        """
        if self._never_reset:
            raise RuntimeError(STEP_BEFORE_RESET)
        if self._unreset:
            e, E = self._unreset[0], self.num_envs
            done = [i for i in range(E) if i not in self._unreset]
            raise RuntimeError(f"step(): env {e} has not been reset (the resets so far covered only env_ids {done} of "
                               f"{E} envs), so it has no instance to step; call reset() for every env, or "
                               f"reset(env_ids={list(self._unreset)}) first")
        E, N = self.num_envs, self.num_agents
        a = discrete_joint_actions(actions, (E, N), 5, "0..4 (wait, up, down, left, right)",
                                   scenario=self._label())
        active = ~self._done
        all_active = bool(active.all())
        if not all_active:
            if not active.any():
                return self._result(np.zeros((E, N), np.float32), np.zeros(E, np.float32))
            a = np.where(active[:, None], a, 0)
        pos = self._gpos
        gpos = pos + self._eoff
        step = self._delta[a]
        gtgt = gpos + step
        blk = self._blk[gtgt]                      # off-map or obstacle: wait
        moving = (step != 0) & ~blk
        invalid = (step != 0) & blk
        gtgt = np.where(blk, gpos, gtgt)
        collisions = np.zeros(E, np.int64)
        if not moving.any():
            new = pos
        elif self.params.conflicts == "block":
            moving0 = moving.copy()
            # rule 3, vertex: two or more agents entering one cell all wait. Every mover writes its id into its
            # target's claim slot; a mover that reads back another id shares its target, which is then contested
            # (scratch arrays instead of a bincount over all E*C cells; ``_claim`` needs no clearing since every
            # slot read was just written, ``_contested`` is cleared after use)
            mv = np.flatnonzero(moving)
            tg = gtgt.ravel()[mv]
            self._claim[tg] = mv
            shared = tg[self._claim[tg] != mv]
            if len(shared):
                self._contested[shared] = True
                moving &= ~self._contested[gtgt]   # a waiter's own cell may be contested: it stays not moving
                self._contested[shared] = False
            # rules 4-5 concern followers only: movers whose target is occupied at the start of the step
            # (flat [E*N] indices ``f``, occupant ``j``)
            mflat, m0, gt, gp = moving.reshape(-1), moving0.reshape(-1), gtgt.reshape(-1), gpos.reshape(-1)
            occ = self._occ[gt]
            f = np.flatnonzero(m0 & (occ >= 0))
            j = occ[f] + (f - f % N)
            # rule 4, swap: j targets my cell
            swap = m0[j] & (gt[j] == gp[f])
            mflat[f[swap]] = False
            # rule 5, cascade: the occupant of my target does not leave -> I wait; until stable
            while True:
                stuck = mflat[f] & ~mflat[j]
                if not stuck.any():
                    break
                mflat[f[stuck]] = False
            moving = mflat.reshape(E, N)
            self._blocked_moves += (moving0 & ~moving).sum(1)
            mi = np.flatnonzero(mflat)
            go, gn = gp[mi], gt[mi]
            ids = self._occ[go]                # old cells are unique and new cells are unique: clear, then set
            self._occ[go] = -1
            self._occ[gn] = ids
            self._pflat[go * 3 + 1] = 0
            self._pflat[gn * 3 + 1] = 1
            new = np.where(moving, gtgt - self._eoff, pos)
        else:
            go, gn = gpos[moving], gtgt[moving]
            EC = E * self._C
            self._cnt += (np.bincount(gn, minlength=EC) - np.bincount(go, minlength=EC)).astype(np.int32)
            self._pflat[go * 3 + 1] = self._cnt[go] > 0
            self._pflat[gn * 3 + 1] = 1
            # swap pairs: edges (from, to) with their reverse among movers (global cells, so per env)
            C = E * self._C
            key, rev = go * C + gn, gn * C + go
            sk = np.sort(key)
            nrev = np.searchsorted(sk, rev, side="right") - np.searchsorted(sk, rev, side="left")
            collisions += np.bincount(np.nonzero(moving)[0], weights=nrev, minlength=E).astype(np.int64) // 2
            new = gtgt - self._eoff
        if self.params.conflicts == "allow":
            # vertex pairs: sum over agents of (agents on its cell - 1) = 2 * pairs
            collisions += (self._cnt[new + self._eoff] - 1).sum(1) // 2
            if not all_active:
                collisions[~active] = 0
            self._collisions += collisions
        self._invalid_moves += invalid.sum(1)
        self._gpos = new
        np.subtract(new % self._Wc, self._R, out=self._xy[..., 0])
        np.subtract(new // self._Wc, self._R, out=self._xy[..., 1])
        if all_active:
            self._t += 1
        else:
            self._t[active] += 1
        t = self._t
        # goals and rewards
        unfinished = self._finish < 0
        if not all_active:
            unfinished &= active[:, None]
        reward = np.where(unfinished, np.float32(-1.0), np.float32(0.0))
        newly = self._visit(new)
        if not all_active:
            newly &= active[:, None, None]
        if newly.any():
            self._visited |= newly
            np.copyto(self._reached_at, t[:, None, None], where=newly, casting="unsafe")
            fin_now = unfinished & self._all_visited()
            if fin_now.any():
                self._finish[fin_now] = np.broadcast_to(t[:, None], fin_now.shape)[fin_now]
        self._return += reward.sum(1)
        all_fin = (self._finish >= 0).all(1)
        trunc = ~all_fin & (t >= self.params.max_steps)
        if not all_active:
            all_fin &= active
            trunc &= active
        self._term |= all_fin
        self._trunc |= trunc
        self._done |= all_fin | trunc
        if self._traj.shape[0] <= int(t.max()):
            rows = min(2 * self._traj.shape[0], self.params.max_steps + 1)
            self._traj = np.concatenate([self._traj, np.zeros((rows - self._traj.shape[0],) + self._traj.shape[1:],
                                                              dtype=np.int32)])
        if all_active:
            self._traj[t, self._e_idx[:, 0]] = new
        else:
            ea = np.flatnonzero(active)
            self._traj[t[ea], ea] = new[ea]
        return self._result(reward, collisions.astype(np.float32))

    def _result(self, reward: np.ndarray, collisions: np.ndarray) -> StepResult:
        E, N = self.num_envs, self.num_agents
        term = np.empty((E, N), dtype=bool)
        term[:] = self._term[:, None]
        trunc = np.empty((E, N), dtype=bool)
        trunc[:] = self._trunc[:, None]
        return StepResult(obs=self._observe(), reward=reward, terminated=term, truncated=trunc,
                          info={"reward/time": reward, "cost/collision": collisions})

    def state(self) -> np.ndarray:
        """Global state float32 ``[E, 3N + 3NK + 1]``: agent cells, goal cells (normalized by W, H), visited
        flags, finished flags, ``t / max_steps`` (see the module docstring)."""
        E = self.num_envs
        size = np.maximum(self._size - 1, 1).astype(np.float32)  # (W-1, H-1)
        xy = (self._xy / size[:, None, :]).reshape(E, -1)
        g = (self._goals_xy / size[:, None, None, :]).reshape(E, -1)
        return np.concatenate([
            xy, g, self._visited.reshape(E, -1), (self._finish >= 0),
            (np.minimum(self._t, self.params.max_steps) / self.params.max_steps)[:, None],
        ], axis=1).astype(np.float32)

    # observations ---------------------------------------------------------------------------------
    def observations(self) -> dict[str, np.ndarray]:
        """The current observations of the whole batch (as ``reset``/``step`` return them; fresh arrays)."""
        return self._observe()

    def _visit(self, gpos: np.ndarray) -> np.ndarray:
        """bool ``[E, N, K]``: goals newly visited by agents standing on ``gpos`` (canvas flat index)."""
        on = self._goals == gpos[:, :, None]
        if self.params.goal_order == "free":
            return on & ~self._visited
        nxt = self._visited.sum(-1)
        return on & (self._ar_k == nxt[:, :, None])

    def _all_visited(self) -> np.ndarray:
        """bool ``[E, N]``: agents that have visited every goal (an AND over the short K axis, unrolled)."""
        v = self._visited
        out = v[..., 0].copy()
        for k in range(1, v.shape[-1]):
            out &= v[..., k]
        return out

    def _active_goals(self) -> np.ndarray:
        rem = ~self._visited
        if self.params.goal_order == "free":
            return rem
        return self._ar_k == self._visited.sum(-1)[:, :, None]

    def _observe(self) -> dict[str, np.ndarray]:
        E, N, K = self.num_envs, self.num_agents, self.params.num_goals
        R, S = self._R, self._S
        xy = self._xy
        gpos = self._gpos + self._eoff                                     # [E, N] global centre cell
        # S rows of 3S bytes per agent out of the uint8 planes: uint8 [E, N, S, S, 3] (C order)
        mem = self._win[gpos - self._corner].view(np.uint8).reshape(E, N, S, S, 3)
        if self.params.conflicts == "block":
            mem[:, :, R, R, 1] = 0                                         # not oneself
        else:
            mem[:, :, R, R, 1] = self._cnt[gpos] > 1                       # others on my cell
        rem = ~self._visited
        # (dx, dy) pairs as complex64 dx + i dy: one subtraction over [E, N, K] (exact: |dx|, |dy| < 2^24)
        xyc = np.empty((E, N), dtype=np.complex64)
        xyc.view(np.float32).reshape(E, N, 2)[...] = xy
        gv = self._goals_c - xyc[:, :, None]                              # complex64 [E, N, K]
        np.copyto(gv, 0, where=self._visited)                              # zero once visited
        inwin = (np.abs(gv.real) <= R) & (np.abs(gv.imag) <= R) & rem
        # goal plane: scatter through flat indices of ``mem`` (laid out [E, N, S, S, 3]); flat (e, n, k) -> agent // K
        sel = np.flatnonzero(inwin)
        g = gv.reshape(-1)[sel]
        mem.reshape(-1)[(sel // K) * (S * S * 3) + ((g.imag * S + g.real).astype(np.int64) + R * S + R) * 3 + 2] = 1
        window = mem.astype(np.float32).transpose(0, 1, 4, 2, 3)            # float32 [E, N, 3, S, S] view
        goal_vec = gv.view(np.float32).reshape(E, N, K, 2)                  # float32 [E, N, K, 2] (dx, dy)
        status = np.empty((E, N, K, 2), dtype=np.float32)
        status[..., 0] = rem
        status[..., 1] = self._active_goals()
        return {"goal_status": status, "goal_vec": goal_vec, "window": window}

    # instances ------------------------------------------------------------------------------------
    def _new_instance(self, e: int, seed: int | None) -> tuple[MapData, np.ndarray, np.ndarray, Optional[str]]:
        p = self.params
        rng = self._rngs[e]
        if self._fixed is not None:
            md, s, g = self._fixed
            return md, s, g, None
        if p.map == "random":
            lo, hi = p.random_size
            side = (int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1)))
            md = (random_bars_map if p.random_style == "bars" else random_map)(rng, side, p.random_density)
            s, g = random_instance(md, p.num_agents, p.num_goals, rng)
            return md, s, g, None
        md = _cached_map(self._map_path)
        labels = _cached_labels(self._map_path)
        if not self._scen_paths:
            s, g = random_instance(md, p.num_agents, p.num_goals, rng, labels)
            return md, s, g, None
        if len(self._scen_paths) == 1:
            i = 0
        elif seed is not None:
            i = (int(seed) + e) % len(self._scen_paths)
        else:
            i = int(rng.integers(len(self._scen_paths)))
        path = self._scen_paths[i]
        sc = _cached_scen(path, self._map_path)
        s, g = instance_from_scen(md, sc, p.num_agents, p.num_goals, rng, labels)
        checked = self.__dict__.setdefault("_reach_checked", set())
        if path not in checked:  # once per scen file: only its rows' goals can be cut off (sampled ones never are)
            checked.add(path)
            cut = unreachable_goals(labels, s, g)
            if cut.any():
                warnings.warn(unreachable_message(md, s, g, cut, sc), RuntimeWarning, stacklevel=3)
        return md, s, g, path

    def _load_env(self, e: int, inst: tuple) -> None:
        md, starts, goals, scen_path = inst
        R, Wc = self._R, self._Wc
        h, w = md.blocked.shape
        base = np.ones((self._Hc, Wc), dtype=bool)
        base[R:R + h, R:R + w] = md.blocked
        self._maps[e] = md
        self._size[e] = (w, h)
        starts = np.asarray(starts, dtype=np.int64)
        goals = np.asarray(goals, dtype=np.int64)
        gp = (starts[:, 1] + R) * Wc + starts[:, 0] + R
        sl = slice(e * self._C, (e + 1) * self._C)
        self._blk[sl] = base.ravel()
        cnt = np.zeros(self._C, dtype=np.int32)
        np.add.at(cnt, gp, 1)
        self._cnt[sl] = cnt
        occ = np.full(self._C, -1, dtype=np.int32)
        occ[gp] = np.arange(len(gp), dtype=np.int32)
        self._occ[sl] = occ
        self._planes[e, :, :, 0] = base
        self._planes[e, :, :, 1] = (cnt > 0).reshape(self._Hc, Wc)
        self._gpos[e] = gp
        self._xy[e] = starts
        self._starts[e] = starts
        self._goals_xy[e] = goals
        self._goals_c[e].view(np.float32).reshape(goals.shape)[...] = goals
        self._goals[e] = (goals[..., 1] + R) * Wc + goals[..., 0] + R
        self._visited[e] = False
        self._reached_at[e] = -1
        self._finish[e] = -1
        # goals on the start cell count as visited at reset (step 0)
        on = self._goals[e] == gp[:, None]
        if self.params.goal_order == "free":
            first = on
        else:
            first = on & (self._ar_k == 0)
        self._visited[e] = first
        self._reached_at[e][first] = 0
        self._finish[e][self._visited[e].all(-1)] = 0
        self._t[e] = 0
        self._done[e] = bool((self._finish[e] >= 0).all())
        self._term[e] = self._done[e]
        self._trunc[e] = False
        self._blocked_moves[e] = 0
        self._invalid_moves[e] = 0
        self._collisions[e] = 0
        self._return[e] = 0.0
        self._traj[0, e] = gp
        self._lb[e] = None
        self._scen_used[e] = scen_path

    # capabilities ---------------------------------------------------------------------------------
    def positions(self) -> np.ndarray:
        """float64 ``[E, N, 3]``: agent cell centres in metres, ((x + 0.5) * cell, (y + 0.5) * cell, 0),
        x along columns and y along rows."""
        c = self.params.cell_size_m
        out = np.zeros((self.num_envs, self.num_agents, 3))
        out[..., :2] = (self._xy + 0.5) * c
        return out

    def agent_xy(self) -> np.ndarray:
        """int32 ``[E, N, 2]``: agent cells (x = column, y = row)."""
        return self._xy.astype(np.int32)

    def goals_visited(self) -> np.ndarray:
        """bool ``[E, N, K]``: goals visited so far (a copy)."""
        return self._visited.copy()

    def goals_xy(self) -> np.ndarray:
        """int32 ``[E, N, K, 2]``: every agent's goal cells (x, y) in the given order."""
        return self._goals_xy.astype(np.int32)

    def constraints(self):
        """Safety-layer view of the batch (a :class:`coopsim.safety.state.SafetyState`) for shields.

        The collision rules are one ``Separation`` constraint named ``collision`` (never two agents on one
        cell after a step, never a swap). Positions are cells (x, y); ``cells`` are canvas indices
        (``num_cells`` = canvas size). The intended cell of each action is the move's target (a move off the
        map or into an obstacle is a wait). With ``conflicts="allow"`` moves are deterministic: the prior
        plausible set is the intended cell alone (radius 0). With ``conflicts="block"`` a conflicting move
        becomes a wait, so the current cell is a second plausible outcome (radius 1).
        """
        from coopsim.safety.constraints import Separation
        from coopsim.safety.state import SafetyState

        E, N = self.num_envs, self.num_agents
        here = self._gpos + self._eoff                                   # [E, N] global canvas index
        tgt = here[..., None] + self._delta                              # [E, N, 5]
        tgt = np.where(self._blk[tgt], here[..., None], tgt) - self._eoff[..., None]
        cells = np.stack([tgt, np.broadcast_to(self._gpos[..., None], tgt.shape)], -1)  # [E, N, 5, 2] outcome slots
        mask = np.zeros(cells.shape, dtype=bool)
        mask[..., 0] = True
        if self.params.conflicts == "block":
            mask[..., 1] = cells[..., 1] != cells[..., 0]
        xy = np.stack([cells % self._Wc - self._R, cells // self._Wc - self._R], -1).astype(np.float64)
        return SafetyState(
            positions=self._xy.astype(np.float64), loads=np.zeros((E, N)), intended=xy[..., 0, :],
            outcomes=xy, outcome_loads=np.zeros(cells.shape), outcome_mask=mask, cells=self._gpos.copy(),
            outcome_cells=np.where(mask, cells, -1), num_cells=self._C, radius=0.0 if self.params.conflicts == "allow" else 1.0,
            constraints=(Separation(name="collision", min_dist=1.0, no_swap=True),), stay_action=0, t=self._t.copy(),
        )

    def instance(self, env_index: int = 0):
        """The current instance of env ``env_index`` as a :class:`coopsim.scenarios.mapf.instance.MAPFInstance`.

        Attributes used: ``blocked`` bool ``[H, W]``, ``starts`` int32 ``[N, 2]`` (x, y), ``goals`` int32
        ``[N, K, 2]``, ``goal_order``, ``map_name``.
        ``MGMAPFCore.from_instance(core.instance(e))`` replays it.

        Raises:
            IndexError: ``env_index`` outside ``0..num_envs-1`` (negative indices too); ValueError: not an integer.
            RuntimeError: before the first ``reset`` of that env.
        """
        e = self._env(env_index, "instance()")
        return _make_instance(self._maps[e], self._starts[e].copy(), self._goals_xy[e].astype(np.int32),
                              self.params.goal_order)

    def map_data(self, env_index: int = 0) -> MapData:
        """The :class:`MapData` of env ``env_index`` (blocked ``[H, W]``); raises as :meth:`instance`."""
        return self._maps[self._env(env_index, "map_data()")]

    def scen_file(self, env_index: int = 0) -> Optional[str]:
        """Path of the scen file env ``env_index`` took its starts and first goals from (None if sampled or not reset
        yet). Raises IndexError / ValueError for an env index as :meth:`instance`."""
        return self._scen_used[self._env(env_index, "scen_file()", loaded=False)]

    def _env(self, env_index: Any, what: str, *, loaded: bool = True) -> int:
        """``env_index`` as an int in ``0..num_envs-1`` (with ``loaded``: of an env that has been reset).

        Raises:
            ValueError: not an integer (a bool, float or string). IndexError: outside ``0..num_envs-1``; a negative
                index is refused, not counted from the end. RuntimeError: with ``loaded``, the env was never reset.
        """
        E = self.num_envs
        if isinstance(env_index, (bool, np.bool_)) or not isinstance(env_index, (int, np.integer)):
            raise ValueError(f"{what}: env_index must be an integer in 0..{E - 1}; got {env_index!r}")
        e = int(env_index)
        if not 0 <= e < E:
            raise IndexError(f"{what}: env_index {e} is out of range: this core has {E} env{'s' if E != 1 else ''}, "
                             f"valid 0..{E - 1}")
        if loaded and self._maps[e] is None:
            if self._never_reset:
                raise RuntimeError(f"{what} needs reset() first")
            raise RuntimeError(f"{what}: env {e} has not been reset yet (the resets so far covered other envs): call "
                               f"reset() or reset(env_ids=[{e}]) first")
        return e

    def replay(self, env_index: int = 0) -> dict[str, np.ndarray]:
        """Replay arrays of env ``env_index``'s episode so far (saved by the runner as ``replays/*.npz``).

        Returns:
            ``positions`` int32 ``[T+1, N, 2]`` (x, y) per step, ``goals`` int32 ``[N, K, 2]``,
            ``goal_reached_at`` int32 ``[N, K]`` (first-visit step, -1 never), ``blocked`` bool ``[H, W]``.

        Raises:
            IndexError / ValueError / RuntimeError: a bad or not yet reset ``env_index``, as :meth:`instance`.
        """
        env_index = self._env(env_index, "replay()")
        T = int(min(self._t[env_index], self.params.max_steps))
        fl = self._traj[:T + 1, env_index]  # int32 canvas cells >= 0: x, y computed in int32 (8 bytes per agent-step)
        pos = np.empty(fl.shape + (2,), np.int32)
        np.remainder(fl, self._Wc, out=pos[..., 0])
        np.floor_divide(fl, self._Wc, out=pos[..., 1])
        pos -= self._R
        return {
            "positions": pos,
            "goals": self._goals_xy[env_index].astype(np.int32),
            "goal_reached_at": self._reached_at[env_index].copy(),
            "blocked": np.array(self.map_data(env_index).blocked, dtype=bool),
        }

    @staticmethod
    def params_warning(params: MGMAPFParams) -> str | None:
        """The run's warning for ``params`` whose ``lb`` is the weaker bound: with ``goal_order`` 'free' and
        ``num_goals`` above :data:`~coopsim.scenarios.mapf.metrics.EXACT_MAX_GOALS` it is a spanning tree's weight,
        not the exact shortest tour, so ``soc_over_lb`` means something else there; None otherwise."""
        if params.goal_order != "free" or params.num_goals <= EXACT_MAX_GOALS:
            return None
        return (f"scenario.params.num_goals {params.num_goals} > {EXACT_MAX_GOALS} with goal_order 'free': lb is a "
                f"weaker lower bound (a spanning tree over each agent's start and goals, not the exact shortest tour), "
                f"so soc_over_lb is higher than against the exact bound and not comparable with runs of num_goals <= "
                f"{EXACT_MAX_GOALS}")

    def lower_bound(self, env_index: int = 0) -> float:
        """LB of env ``env_index``'s instance: sum over agents of the shortest tour through its goals
        (see :func:`coopsim.scenarios.mapf.metrics.tour_lower_bound`); cached per episode. ``inf`` (undefined) when
        walls separate a goal from its agent's start (the scenario warned at reset). Raises for a bad or not yet
        reset ``env_index`` as :meth:`instance`."""
        env_index = self._env(env_index, "lower_bound()")
        if self._lb[env_index] is None:
            md = self.map_data(env_index)
            self._lb[env_index] = float(tour_lower_bound(md.blocked, self._starts[env_index], self._goals_xy[env_index],
                                                         self.params.goal_order).sum())
        return self._lb[env_index]

    def episode_metrics(self) -> list[dict[str, float]]:
        """Per-env metrics of the current episode (final once the env is done).

        Returns:
            One dict per env (float values): ``soc`` sum over agents of the finishing step (steps; ``max_steps``
            for an agent that has not finished), ``makespan`` the largest of those (steps), ``success`` 1.0 if
            every agent finished, else 0.0, ``goal_fraction`` visited goals / (N K) in [0, 1], ``throughput``
            goals visited per step, ``blocked_moves`` moves turned into waits by conflicts, ``invalid_moves``
            moves off the map or into obstacles, ``collisions`` conflict pairs (``conflicts='allow'``), ``lb`` the
            instance's lower bound on SoC (steps, :meth:`lower_bound`; nan before the first reset; inf when a goal
            is unreachable from its agent's start, which the run summary leaves out as a missing value),
            ``soc_over_lb`` = soc / lb (>= 1) on a *solved* episode (``success == 1``) only, else nan: an
            unfinished agent's ``max_steps`` is no cost of a solution, and a short cut-off would put the ratio
            below 1 (better than optimal); nan too when ``lb`` is 0 (every goal on its agent's start).
            ``episode_return`` (= −soc once done), ``steps`` steps taken.
        """
        ms = self.params.max_steps
        out = []
        for e in range(self.num_envs):
            fin = self._finish[e]
            cost = np.where(fin >= 0, fin, ms).astype(np.int64)
            steps = int(self._t[e])
            visited = int(self._visited[e].sum())
            lb = self.lower_bound(e) if self._maps[e] is not None else float("nan")
            soc = float(cost.sum())
            solved = bool((fin >= 0).all())
            out.append({
                "soc": soc,
                "makespan": float(cost.max()) if len(cost) else 0.0,
                "success": float(solved),
                "goal_fraction": visited / max(self._visited[e].size, 1),
                "throughput": visited / steps if steps else 0.0,
                "blocked_moves": float(self._blocked_moves[e]),
                "invalid_moves": float(self._invalid_moves[e]),
                "collisions": float(self._collisions[e]),
                "lb": lb,
                # solved episodes only: with an agent charged max_steps the ratio is no solution's quality.
                # math.nan is one object, so equal episodes still give equal metric dicts (nan != nan otherwise)
                "soc_over_lb": soc / lb if solved and lb > 0 else math.nan,
                "episode_return": float(self._return[e]),
                "steps": float(steps),
            })
        return out

    def render(self, env_index: int = 0, cell_px: int = 8) -> np.ndarray | None:
        """RGB uint8 ``[H * cell_px, W * cell_px, 3]`` of env ``env_index`` (agents coloured, remaining goals); None
        before the env's first reset. Raises IndexError / ValueError for an env index as :meth:`instance`."""
        env_index = self._env(env_index, "render()", loaded=False)
        if self._maps[env_index] is None:
            return None
        return draw_frame(self._maps[env_index].blocked, self._xy[env_index], self._goals_xy[env_index],
                          self._visited[env_index], cell_px)

    @staticmethod
    def render_replay(replay: dict[str, np.ndarray], cell_px: int = 12, max_frames: int | None = None) -> list[np.ndarray]:
        """Captioned frames (RGB uint8) of a replay dict as returned by :meth:`replay` (used by ``coopsim report``);
        at most ``max_frames``, at evenly spaced steps, when given."""
        from coopsim.scenarios.mapf.render import replay_frames

        return replay_frames(replay, cell_px, max_frames)


def _instance_arrays(inst: Any):
    blocked = np.array(getattr(inst, "blocked"), dtype=bool)  # a copy: the caller's array stays writable
    starts = np.asarray(getattr(inst, "starts"), dtype=np.int64).reshape(-1, 2)
    goals = np.asarray(getattr(inst, "goals"), dtype=np.int64)
    if goals.ndim == 2:
        goals = goals[:, None, :]
    order = getattr(inst, "goal_order", None)
    name = str(getattr(inst, "map_name", None) or getattr(inst, "name", None) or "instance")
    h, w = blocked.shape
    n = len(starts)
    if goals.shape[0] != n or goals.shape[-1] != 2:
        raise ConfigError(f"instance goals must be [N, K, 2] with N={n}; got {goals.shape}", key="goals")
    for what, c in (("start", starts), ("goal", goals.reshape(-1, 2))):
        out = (c[:, 0] < 0) | (c[:, 0] >= w) | (c[:, 1] < 0) | (c[:, 1] >= h)
        if out.any():
            raise ConfigError(f"{what} {c[out][0].tolist()} is outside the {w}x{h} map", key=what + "s")
        on = blocked[c[:, 1], c[:, 0]]
        if on.any():
            raise ConfigError(f"{what} {c[on][0].tolist()} lies on an obstacle", key=what + "s")
    idx = starts[:, 1] * w + starts[:, 0]
    if len(np.unique(idx)) != n:
        order_ = np.argsort(idx, kind="stable")
        dup = np.flatnonzero(idx[order_][1:] == idx[order_][:-1])[0]
        a, b = sorted((int(order_[dup]), int(order_[dup + 1])))
        x, y = (int(v) for v in starts[a])
        raise ConfigError(f"two agents share a start cell: agents {a} and {b} both start at ({x}, {y}); every agent "
                          "needs its own start cell", key="starts")
    blocked.setflags(write=False)
    return blocked, starts, goals, order, name


def unreachable_message(md: MapData, starts: np.ndarray, goals: np.ndarray, cut: np.ndarray, scen: Any = None) -> str:
    """The warning for an instance with goals that walls separate from their agent's start (``cut`` bool ``[N, K]``,
    :func:`~coopsim.scenarios.mapf.grid.unreachable_goals`): the scen file and line (``scen``, a
    :class:`~coopsim.scenarios.mapf.loaders.ScenData`; else the instance's map), the first such agent, its start and
    goal, the others, and what it means for the episode and its ``lb``."""
    agents = np.flatnonzero(cut.any(1))
    i = int(agents[0])
    k = int(np.argmax(cut[i]))
    (sx, sy), (gx, gy) = (int(v) for v in starts[i]), (int(v) for v in goals[i, k])
    shown = [int(a) for a in agents[1:6]]
    rest = f" and {len(agents) - 6} more" if len(agents) > 6 else ""
    if scen is not None:
        where = f"{scen.path}, line {scen.line_of(i)}" if scen.path else f"scen file of map {md.name!r}, row {i}"
        head = (f"{where}: agent {i}'s goal ({gx}, {gy}) is not reachable from its start ({sx}, {sy}) on map "
                f"{md.name!r}: walls separate them (the row's optimal_length column says "
                f"{float(scen.optimal_length[i]):g}, which no path achieves)")
        listed = ", ".join(f"{a} (line {scen.line_of(a)})" for a in shown) + rest
        more = (f"; so {'is the goal of agent' if len(agents) == 2 else 'are the goals of agents'} {listed}"
                if shown else "")
        source = "this scen file"
        fix = (f"; fix the row{'s' if shown else ''} of the scen file"
               + (f", or use only the agents before it (scenario.params.num_agents <= {i})" if i else ""))
    else:
        goal = "goal" if goals.shape[1] == 1 else f"goal {k}"
        head = (f"MGMAPFCore.from_instance (map {md.name!r}): agent {i}'s {goal} ({gx}, {gy}) is not reachable from "
                f"its start ({sx}, {sy}): walls separate them")
        more = (f"; so {'is a goal of agent' if len(agents) == 2 else 'are goals of agents'} "
                f"{', '.join(map(str, shown))}{rest}" if shown else "")
        source, fix = "this instance", ""
    who = "this agent" if len(agents) == 1 else f"these {len(agents)} agents"
    return (f"{head}{more}. No policy can finish {who}: every episode on {source} runs to max_steps with success 0, "
            f"and its lb (the lower bound on soc) is undefined (inf), so lb and soc_over_lb are left out of the "
            f"results{fix}")


def _make_instance(md: MapData, starts: np.ndarray, goals: np.ndarray, goal_order: str) -> MAPFInstance:
    return MAPFInstance(blocked=md.blocked, starts=starts, goals=goals, goal_order=goal_order, map_name=md.name)
