"""SMAC-like unit micromanagement: a batched core with SMAC's interface and SMAX's world.

See :class:`SMACCore` for the full description. The hot path (every tick of ``step``, the built-in enemy,
observations, masks, ``state()`` and the per-episode part of ``reset``) is compiled with numba
(``coopsim.scenarios.smac._kernels``), one kernel call per method over the whole batch.
"""
from __future__ import annotations

from typing import ClassVar, Literal

import gymnasium
import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from coopsim.platform.scenario import (STEP_BEFORE_RESET, RebindsViews, ScenarioCore, ScenarioParams, StepResult,
                                       check_num_envs, discrete_joint_actions, reset_ids)
from coopsim.scenarios.smac import _kernels as K
from coopsim.scenarios.smac import units as U
from coopsim.scenarios.smac.maps import MapSpec, get_map, map_types

# action layout (SMAC)
NOOP, STOP, NORTH, SOUTH, EAST, WEST = range(6)
N_MOVE_ACTIONS = 6
assert (NOOP, STOP, NORTH, SOUTH, EAST, WEST, N_MOVE_ACTIONS) == (K.NOOP, K.STOP, K.NORTH, K.SOUTH, K.EAST, K.WEST, K.N_MOVE)

_TYPE_IDS = np.arange(len(U.UNIT_TYPES))
#: damage of one hit, float32 ``[attacker type, target type]`` (``units.hit_damage`` of every pair)
_HIT = np.ascontiguousarray(U.hit_damage(_TYPE_IDS[:, None], _TYPE_IDS[None, :]))
_I64 = np.dtype(np.int64)


#: the line :func:`_compile_notice` prints (stderr) before numba compiles the big kernels without a usable cache
COMPILE_NOTICE = "coopsim: compiling the SMAC kernels (first use on this machine, about 15 s; cached afterwards)"
_notice_pending = True  # until the first reset or step of any SMACCore in this process


def _kernel_cached(dispatcher) -> bool:
    """True if ``dispatcher`` is compiled in this process already, or numba's on-disk cache (``NUMBA_CACHE_DIR``, else
    ``__pycache__`` next to ``_kernels.py``) holds a compiled version of it that numba will load: an index entry that
    is fresh (numba drops an index whose source stamp differs) and was built from the same bytecode for this CPU.
    Only reads the small index file; when numba's internals differ from what this expects, falls back to whether
    the index file exists, and to True (no notice) if even that cannot be told."""
    if getattr(dispatcher, "overloads", None):
        return True
    cache = getattr(dispatcher, "_cache", None)
    if cache is None:  # NUMBA_DISABLE_JIT: plain Python, nothing to compile
        return True
    try:
        index = cache._cache_file._load_index()  # {} when missing, of another numba version, or stale
        want = tuple(cache._index_key(None, dispatcher.targetctx.codegen())[1:])  # (CPU and features, bytecode hashes)
        return any(tuple(key[1:]) == want for key in index)
    except Exception:  # pragma: no cover - other numba versions
        try:
            import os

            return os.path.exists(cache._cache_file._index_path)
        except Exception:
            return True


def _compile_notice() -> None:
    """Once per process, before the first kernel call: print :data:`COMPILE_NOTICE` to stderr if numba is about to
    compile ``reset_envs`` or ``step`` (about 5 s and 7 s cold; the other kernels take under 1 s), so a cold start
    does not look like a hang. Prints nothing when the cache is warm."""
    global _notice_pending
    _notice_pending = False
    if not (_kernel_cached(K.reset_envs) and _kernel_cached(K.step)):
        import sys

        print(COMPILE_NOTICE, file=sys.stderr, flush=True)


def _entry_point(dispatcher, args: tuple):
    """The compiled entry point of numba ``dispatcher`` for the types of ``args``: calling it skips the dispatcher's
    per-call type resolution (about 40 ns per argument). Every later call must pass arguments of exactly these
    types (``SMACCore.step`` does: its arrays never change dtype, dimensions or layout). None when numba's
    internals differ from what this expects (then the dispatcher is used)."""
    try:
        from numba import typeof

        return dispatcher.overloads[tuple(typeof(a) for a in args)].entry_point
    except Exception:  # pragma: no cover - other numba versions
        return None
assert U.MAP_WIDTH == U.MAP_HEIGHT == 32.0 and U.TICKS_PER_STEP == 8  # the kernels use these constants


def _type_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per-type tables of the kernels: float32 ``[n_types, K.NF]`` and bool ``[n_types, K.NB]`` (columns
    ``K.F_*`` / ``K.B_*``), each value computed with numpy exactly as the former numpy core did."""
    tf = np.zeros((len(U.UNIT_TYPES), K.NF), np.float32)
    tf[:, K.F_SPEED_TICK] = U.SPEED * np.float32(U.TICK_S)
    tf[:, K.F_RANGE] = U.ATTACK_RANGE
    tf[:, K.F_SIGHT] = U.SIGHT_RANGE
    tf[:, K.F_INV_SIGHT] = 1.0 / U.SIGHT_RANGE
    tf[:, K.F_RADIUS] = U.RADIUS
    tf[:, K.F_HMAX] = U.HEALTH
    tf[:, K.F_SMAX] = U.SHIELD
    tf[:, K.F_SMAX1] = np.maximum(U.SHIELD, 1.0)
    tf[:, K.F_BASE_CD] = U.COOLDOWN_S
    tf[:, K.F_CD_NORM] = U.COOLDOWN_NORM_S
    tf[:, K.F_RANGE_EF] = np.where(U.IS_HEALER, np.float32(-1.0), U.ATTACK_RANGE)
    tb = np.zeros((len(U.UNIT_TYPES), K.NB), bool)
    tb[:, K.B_BIO] = U.IS_BIOLOGICAL
    tb[:, K.B_HEALER] = U.IS_HEALER
    tb[:, K.B_SUICIDE] = U.IS_SUICIDE_SPLASH
    tb[:, K.B_LINE] = U.IS_LINE_SPLASH
    tb[:, K.B_SPLASHY] = U.IS_LINE_SPLASH | U.IS_SUICIDE_SPLASH
    tb[:, K.B_MOBILE] = U.SPEED > 0
    tb[:, K.B_HAS_SHIELD] = U.SHIELD > 0
    return tf, tb


_TF, _TB = _type_tables()
#: step constants (float32): heal per tick, medivac energy regen per tick, shield regen per tick, shield regen
#: delay (s), cooldown jitter low (s), jitter span (s), tick (s)
_CONSTS = np.array([np.float32(U.MEDIVAC_HEAL_PER_S * U.TICK_S), np.float32(U.MEDIVAC_ENERGY_REGEN_PER_S * U.TICK_S),
                    np.float32(U.SHIELD_REGEN_PER_S * U.TICK_S), np.float32(U.SHIELD_REGEN_DELAY_S),
                    np.float32(U.COOLDOWN_JITTER_S[0]), np.float32(U.COOLDOWN_JITTER_S[1] - U.COOLDOWN_JITTER_S[0]),
                    np.float32(U.TICK_S)], np.float32)
assert U.MEDIVAC_HP_PER_ENERGY == 3.0 and U.MEDIVAC_ENERGY_MAX == 200.0 and U.MEDIVAC_ENERGY_START == 50.0
assert U.BANELING_SPLASH_RADIUS == 2.2 and U.COLOSSUS_LINE_HALF_LENGTH == 1.4 and U.MOVE_AMOUNT == 2.0


class SMACParams(ScenarioParams):
    """Parameters of :class:`SMACCore`."""

    map_name: str = Field("3m", description="SMAC map name (e.g. '3m', '2s3z', 'corridor') or a procedural "
                                            "'<protoss|terran|zerg>_<n>_vs_<m>' (n, m in 1..32)")
    max_steps: int | None = Field(None, ge=1, le=100_000, description="episode limit in agent steps (0.5 s each); "
                                                                       "None = the map's SMAC limit")
    reward_sparse: bool = Field(False, description="True: +1 win, -1 loss, 0 otherwise (SMAC's sparse option)")
    reward_only_positive: bool = Field(True, description="SMAC's option of that name: True (default) rewards damage "
                                                         "dealt, kills and the win only; False also subtracts "
                                                         "reward_negative_scale x (damage taken + 10 per ally lost)")
    reward_negative_scale: float = Field(0.5, ge=0.0, le=10.0, allow_inf_nan=False,
                                         description="SMAC's reward_negative_scale: weight of damage taken and allies "
                                                     "lost when reward_only_positive is False")
    obs_last_action: bool = Field(False, description="append each ally's last action (one-hot) to the ally block")
    obs_own_cooldown: bool = Field(False, description="append the agent's own weapon cooldown / base cooldown (medivac: "
                                                       "energy / 200) to the own block (SMAX's own features have it; "
                                                       "SMAC's do not)")
    obs_enemy_targets: bool = Field(False, description="append, per enemy in sight, whether it is shooting at this "
                                                       "agent and its weapon cooldown / base cooldown (2 x n_enemies "
                                                       "values at the end of the observation); in neither SMAC's nor "
                                                       "SMAX's observation")
    obs_state: bool = Field(False, description="append state() (the global state, the same for every living agent, "
                                               "zeros for dead ones) to each agent's observation, after any "
                                               "obs_enemy_targets block: a diagnostic that gives the actors the "
                                               "critic's information, so the policy no longer acts on its own "
                                               "observation alone (not SMAC's setting)")
    state_last_action: bool = Field(True, description="append every ally's last action (one-hot) to state()")
    state_enemy_details: bool = Field(False, description="append, per enemy, its weapon cooldown / base cooldown and "
                                                         "the ally it is shooting at (one-hot over allies) to state(): "
                                                         "privileged information for a centralised critic, in "
                                                         "neither SMAC's nor SMAX's state; observations are unchanged")
    start_positions: Literal["line", "surrounded", "reflect", "surrounded_and_reflect"] | None = Field(
        None, description="start layout; None = the map's ('line' for SMAC maps, 'surrounded_and_reflect' "
                          "for procedural ones)")
    record_replay: bool | None = Field(
        None, description="keep every env's per-step unit arrays for replay() (coopsim run's replays/*.npz and "
                          "`coopsim report`'s GIF); None = only when num_envs == 1. Memory: (limit + 1) x num_envs "
                          "x units x 25 bytes")

    @field_validator("reward_negative_scale")
    @classmethod
    def _scale_used(cls, v: float, info: ValidationInfo) -> float:
        # runs only when the scale is given: a scale the reward would ignore is a mistake, not a no-op
        if info.data.get("reward_sparse"):
            raise ValueError("has no effect with reward_sparse: true (+1 win, -1 loss only); remove it or set "
                             "reward_sparse: false and reward_only_positive: false")
        if info.data.get("reward_only_positive", True):
            raise ValueError("has no effect while reward_only_positive is true (its default is true): also set "
                             "scenario.params.reward_only_positive=false, or leave the scale out")
        return v

    @field_validator("map_name")
    @classmethod
    def _known_map(cls, v: str) -> str:
        get_map(v)  # raises ValueError listing the valid maps
        return v


def _params(params: dict) -> SMACParams:
    """``params`` validated as :class:`SMACParams` with the registry's checks (:func:`~coopsim.platform.registry.
    reject_bools`, :func:`~coopsim.platform.registry.pydantic_to_config_error`), so a core built directly refuses a bad
    param as ``make_scenario`` does.

    Raises:
        ConfigError: names the key (e.g. ``map_name``), the value and what is valid (the map names).
    """
    from coopsim.platform.registry import checked_params

    return checked_params(SMACParams, params, "SMACCore")


class SMACCore(RebindsViews, ScenarioCore):
    """SMAC-like StarCraft unit micromanagement, batched over envs and vectorized over units.

    Description:
        A continuous 2-D battle on a 32x32 map between the agents' team (allies, one agent per unit)
        and a built-in heuristic enemy, with SMAC's maps and SMAC's observation/action/reward layout.
        Unit stats and world timing follow JaxMARL's SMAX where SMAX defines the unit
        (``coopsim.scenarios.smac.units`` freezes every number): each agent step is 8 ticks of 1/16 s;
        in each tick units move, attacks in range with a ready weapon resolve simultaneously (draws are
        possible), cooldowns restart at the base cooldown plus a uniform jitter in [-1/16, 2/16] s,
        overlapping units are pushed apart by their radii. Shields absorb damage before health and
        regenerate after 7.1 s without damage; medivacs heal a biological ally in range at 12.6 health/s
        using energy; a baneling's attack damages every enemy within 2.2 of its target and kills the
        baneling; a colossus's beam hits every enemy touching a 2.8-long line through its target;
        walls (corridor) block movement. An attack order whose target is out of range does nothing (SMAX).

    Observation (float32, per agent, SMAC's blocks; all zeros for a dead agent):
        ========================  =====================================================  ===========
        block                     features (each)                                        range
        ========================  =====================================================  ===========
        move (4)                  can move north, south, east, west (probe 2 units)      {0, 1}
        enemies (n_enemies x Fe)  attackable, distance, rel x, rel y (/ own sight),      [-1, 1]
                                  health / max, [shield / max if the enemy side has
                                  shields], [unit type one-hot if the allies mix types]
        allies (n_allies-1 x Fa)  visible, distance, rel x, rel y (/ own sight), health,  [-1, 1]
                                  [shield], [type one-hot], [last action one-hot]
        own (Fo)                  health, [shield], [type one-hot]                       [0, 1]
        ========================  =====================================================  ===========
        Units out of the observer's sight range (or dead) are all zeros. ``3m``: 30 dims, ``8m``: 80.
        ``obs_own_cooldown`` appends the own cooldown to the own block; ``obs_enemy_targets`` appends, per enemy
        in sight, [shoots at this agent (1/0), cooldown / base cooldown] at the end (off by default);
        ``obs_state`` (off by default, a diagnostic) then appends :meth:`state` to every living agent's observation.
        ``state()``: per ally [health, cooldown / base cooldown (medivac: energy / 200), x, y relative to
        the map centre / map size, [shield], [type]], per enemy [health, x, y, [shield], [type]], then
        (``state_last_action``) every ally's last action one-hot, then (``state_enemy_details``, off by
        default) per enemy [cooldown / base cooldown, the ally it shoots at one-hot].

    Action (``Discrete(6 + n_enemies)``, masks from :meth:`action_masks`):
        0 no-op (only for dead agents), 1 stop, 2 north (+y), 3 south, 4 east (+x), 5 west (moves
        at the unit's speed for the whole step), ``6 + i`` attack enemy ``i`` (available when it is alive
        and within the unit's attack range); a medivac's ``6 + i`` heals ally ``i`` instead (alive,
        biological, another unit, within 4). A living agent never has no-op; a dead one has only no-op.
        An unavailable action of a living agent is replaced by stop and counted in
        ``info["invalid_actions"]``; an index outside ``[0, 6 + n_enemies)`` raises ``ValueError``.

    Reward (team reward, given to every agent slot alive at the start of the step):
        Shaped (SMAC's default, only positive): damage dealt to enemy health and shields + 10 per enemy
        killed + 200 on a win, divided by the maximum (sum of enemy health and shields + 10 per enemy
        + 200) and multiplied by 20, so a full win returns exactly 20. Damage is counted as the drop of
        each enemy's lowest-ever health + shield, so shield regeneration and healing never earn reward
        (SMAC pays again for re-damaging healed health; this keeps the maximum exact). With
        ``reward_only_positive: false`` (SMAC's option) the team reward also loses ``reward_negative_scale``
        (0.5) x (health + shield lost by allies + 10 per ally killed), on the same scale, so only a win without
        damage taken returns 20 and a step can be negative. Sparse option:
        +1 win, -1 loss, 0 otherwise. Terms in ``info``: ``reward/damage``, ``reward/kill``, ``reward/win``
        (float32 ``[E]``, on the reward's scale), with ``reward_only_positive: false`` also ``reward/penalty``
        (<= 0; the terms then add up to the team reward), ``team_reward`` (float32 ``[E]``, what each slot gets).

    Episode end:
        An agent terminates when its unit dies. The episode terminates for every agent when one side has
        no unit left other than medivacs (win, loss, or a draw when both sides die in the same tick), and
        is truncated at the map's limit (SMAC's: 3m 60 steps, ...): a timeout is a truncation and a loss
        (``episode_metrics()["win"] == 0``).

    Arguments:
        ``num_envs`` and :class:`SMACParams` (``map_name``, ``max_steps``, ``reward_sparse``,
        ``obs_last_action``, ``state_last_action``, ``start_positions``).

    Raises:
        ConfigError: an invalid param (an unknown ``map_name``, a bool for a number, ...), naming the key, the value
            and what is valid, as building it through the registry (``make_scenario("smac/SMAC-v0", ...)``) does.

    Version history:
        v0: first version (SMAX 0.2 stats and timing; StarCraft II values for medivac, colossus,
        baneling, spine crawler).
    """

    Params: ClassVar[type[SMACParams]] = SMACParams
    metadata: ClassVar[dict] = {"name": "smac", "render_modes": ["rgb_array"], "is_parallelizable": True}
    noop_action: ClassVar[int] = NOOP
    team_reward: ClassVar[bool] = True  # SMAC's shared reward: a full win returns 20 once, not 20 per agent
    dt_s: float = U.STEP_S

    def __init__(self, num_envs: int = 1, **params):
        self.num_envs = E = check_num_envs(num_envs)
        self.params = p = _params(params)
        self.map: MapSpec = get_map(p.map_name)
        self.n_allies = A = len(self.map.allies)
        self.n_enemies = M = len(self.map.enemies)
        self.n_units = A + M
        if max(A, M) > 64:  # the kernels' pairwise sums (_kernels._pw_sum) cover up to 240 units per side
            raise ValueError(f"map {p.map_name!r}: at most 64 units per side; got {A} vs {M}")
        self.limit = int(p.max_steps) if p.max_steps is not None else self.map.limit
        self.start = p.start_positions or self.map.start
        self.agent_ids = tuple(f"ally_{i}" for i in range(A))
        self.n_actions = N_MOVE_ACTIONS + M
        self.action_space = gymnasium.spaces.Discrete(self.n_actions)
        self._walls = np.array(self.map.walls, np.float32).reshape(-1, 4)

        # feature layout
        # SMAC: one bit per ally unit type when the allies mix several types (enemy units of another type get none)
        types = map_types(self.map) if self.map.procedural_race else tuple(sorted(set(self.map.allies)))
        self.unit_type_bits = len(types) if len(types) > 1 else 0
        self._type_bit = np.full(len(U.UNIT_TYPES), -1, np.int64)
        for b, t in enumerate(types):
            self._type_bit[t] = b
        ally_types = types if self.map.procedural_race else set(self.map.allies)
        enemy_types = types if self.map.procedural_race else set(self.map.enemies)
        self.ally_shield = int(any(U.SHIELD[t] > 0 for t in ally_types))
        self.enemy_shield = int(any(U.SHIELD[t] > 0 for t in enemy_types))
        nb = self.unit_type_bits
        self.enemy_feats = 5 + self.enemy_shield + nb
        self.ally_feats = 5 + self.ally_shield + nb + (self.n_actions if p.obs_last_action else 0)
        self.own_feats = 1 + self.ally_shield + nb + (1 if p.obs_own_cooldown else 0)
        self._obs_base = 4 + M * self.enemy_feats + (A - 1) * self.ally_feats + self.own_feats
        self._obs_targets = bool(p.obs_enemy_targets)
        self.state_ally_feats = 4 + self.ally_shield + nb
        self.state_enemy_feats = 3 + self.enemy_shield + nb
        self._state_base = A * self.state_ally_feats + M * self.state_enemy_feats + (A * self.n_actions if p.state_last_action else 0)
        self._state_details = bool(p.state_enemy_details)
        self.state_dim = self._state_base + (M * (1 + A) if self._state_details else 0)
        self._obs_state = bool(p.obs_state)
        self.obs_dim = self._obs_base + (2 * M if self._obs_targets else 0) + (self.state_dim if self._obs_state else 0)
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (self.obs_dim,), np.float32)
        self.state_space = gymnasium.spaces.Box(-1.0, 1.0, (self.state_dim,), np.float32)
        # state arrays, packed by dtype for the kernels (layout in ``_kernels``' docstring); the named attributes
        # below are views the kernels read and write in place (tests may edit them, then set _masks = None)
        Un = self.n_units
        self._type = np.zeros((E, Un), np.int64)
        self._type[:] = np.array(self.map.allies + self.map.enemies, np.int64)
        self._pos = np.zeros((E, Un, 2), np.float32)
        self._uf = np.zeros((5, E, Un), np.float32)
        self._unit_alive = np.zeros((E, Un), bool)
        self._min_hp = np.zeros((E, M), np.float32)
        self._ef = np.zeros((7, E), np.float32)
        self._ef[0] = 1.0
        self._ei = np.zeros((3, E), np.int64)
        self._eb = np.zeros((3, E), bool)
        self._eb[0] = True
        self._at = np.zeros((2, E, A), bool)
        self._at[0] = True
        self._last_action = np.zeros((E, A), np.int64)
        self._enemy_last = np.full((E, M), -1, np.int64)
        self._enemy_goal = np.zeros((E, M, 2), np.float32)
        self._fired_at = np.full((E, Un), -1, np.int64)
        self._kc = np.zeros((2, E), np.uint64)
        self._never_reset = True  # step() refuses to run until reset() or copy_envs() has set every env
        self._rngs: list[np.random.Generator] = [np.random.default_rng([0, e]) for e in range(E)]
        #: kernel layout flags (int64): [nb, enemy_shield, ally_shield, obs_last_action, obs_own_cooldown, n_actions,
        #: n_allies, limit, reward_sparse, record_replay, state_last_action, reward_only_positive]
        self._record = bool(p.record_replay) if p.record_replay is not None else E == 1
        self._icfg = np.array([nb, self.enemy_shield, self.ally_shield, int(p.obs_last_action), int(p.obs_own_cooldown),
                               self.n_actions, A, self.limit, int(p.reward_sparse), int(self._record),
                               int(p.state_last_action), int(p.reward_only_positive)], np.int64)
        self._consts = np.append(_CONSTS, np.float32(p.reward_negative_scale)).astype(np.float32)
        self._penalised = not p.reward_only_positive and not p.reward_sparse
        # output and work buffers the kernels write (outputs are handed out only as copies)
        self._obs_buf = np.zeros((E, A, self._obs_base), np.float32)  # the kernels' SMAC layout
        self._mask_buf = np.zeros((E, A, self.n_actions), bool)
        self._reward_buf = np.zeros((E, A), np.float32)
        ws = K.work_sizes(E, A, M)
        self._wf32, self._wf64 = np.zeros(ws["wf32"], np.float32), np.zeros(ws["wf64"], np.float64)
        self._wi64, self._wb = np.zeros(ws["wi64"], np.int64), np.zeros(ws["wb"], bool)
        self._all_envs = np.arange(E, dtype=np.int64)
        # start draws of reset (float64 [E, U, 2]): group centres (fixed for the line layout) and jitter
        self._start_c = np.zeros((E, Un, 2), np.float64)
        if self.start == "line":
            self._start_c[:] = self._start_centres(np.random.default_rng(0))  # draws nothing for "line"
        self._start_j = np.zeros((E, Un, 2), np.float64)
        if self.map.procedural_race is not None:
            self._type_ids = np.array([t for t, _ in self.map.type_probs])
            self._type_p = np.array([q for _, q in self.map.type_probs])
        # masks / observation of the current state (set by every observation); code that edits the unit arrays
        # directly (tests) sets _masks to None, and the next action_masks(), step() or reset() then recomputes them
        self._masks: np.ndarray | None = None
        self._obs: np.ndarray | None = None  # the last observation of the whole batch (never handed out)
        # replay buffers, indexed [step, env, unit] (frame t = state after step t; frame 0 = after reset), written by
        # the kernels; without recording they are 1-frame dummies
        L, Er, Ur = (self.limit + 1, E, Un) if self._record else (1, 1, 1)
        self._rpf = np.zeros((L, Er, Ur, 4), np.float32)  # x, y, health, shield
        self._rp_alive = np.zeros((L, Er, Ur), bool)
        self._rp_target = np.full((L, Er, Ur), -1, np.int32)
        self._act_shape = (E, A)
        self._bind()

    def _bind(self) -> None:
        """Named views of the packed arrays and the kernels' argument tuples (after ``__init__`` and unpickling:
        pickle stores a view as a copy of its own)."""
        self._health, self._shield, self._cooldown, self._energy, self._since_dmg = self._uf
        self._max_reward, self._dmg_dealt, self._dmg_taken = self._ef[0], self._ef[1], self._ef[2]
        self._t, self._result, self._invalid = self._ei  # result: 1 win, -1 loss, 0 draw / timeout / running
        self._over, self._info_won, self._active = self._eb
        self._term, self._trunc = self._at
        self._key, self._ctr = self._kc
        self._rp_pos, self._rp_health, self._rp_shield = self._rpf[..., 0:2], self._rpf[..., 2], self._rpf[..., 3]
        # the kernels' argument tuples (every array above is updated in place, never rebound)
        self._step_args = (self._mask_buf, self._type, self._pos, self._uf, self._unit_alive, self._min_hp, self._ef,
                           self._ei, self._eb, self._at, self._last_action, self._enemy_last, self._enemy_goal,
                           self._fired_at, self._kc, _TF, _TB, _HIT, self._type_bit, self._walls, self._icfg, self._consts,
                           self._obs_buf, self._reward_buf, self._wf32, self._wf64, self._wi64, self._wb, self._rpf,
                           self._rp_alive, self._rp_target)
        self._obs_args = (self._type, self._pos, self._uf, self._unit_alive, self._eb, self._last_action, _TF, _TB,
                          self._type_bit, self._walls, self._icfg, self._mask_buf, self._obs_buf)
        self._info_rows = tuple(self._ef[3:7])  # reward/damage, reward/kill, reward/win, team reward [E] views
        self._step_ep = None  # compiled entry point of K.step for these argument types (set by the first step)
        self._done_ep = None  # the same for K.done

    _VIEWS = ("_health", "_shield", "_cooldown", "_energy", "_since_dmg", "_max_reward", "_dmg_dealt", "_dmg_taken",
              "_t", "_result", "_invalid", "_over", "_info_won", "_active", "_term", "_trunc", "_key", "_ctr",
              "_rp_pos", "_rp_health", "_rp_shield", "_step_args", "_obs_args", "_info_rows", "_step_ep", "_done_ep")

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None, env_ids: np.ndarray | None = None) -> np.ndarray:
        E = self.num_envs
        ids = self._all_envs if env_ids is None else np.ascontiguousarray(reset_ids(env_ids, E))
        id_list = ids.tolist()
        if seed is not None:
            for e in id_list:
                self._rngs[e] = self.env_rng(seed, e)
        # per env, from its numpy Generator in this order: unit types (procedural maps), start layout and group
        # centres, every unit's jitter, the key of the env's counter-based RNG
        procedural = self.map.procedural_race is not None
        line = self.start == "line"
        Un = self.n_units
        for e in id_list:
            rng = self._rngs[e]
            if procedural:
                self._type[e] = self._type_ids[rng.choice(len(self._type_ids), size=Un, p=self._type_p)]
            if not line:
                self._start_c[e] = self._start_centres(rng)
            self._start_j[e] = rng.uniform(-2, 2, (Un, 2))
            self._kc[0, e] = rng.integers(0, 2 ** 63)
        observe_all = env_ids is None or self._obs is None or self._masks is None or 2 * len(ids) > E
        if _notice_pending:
            _compile_notice()
        K.reset_envs(ids, self._type, self._start_c, self._start_j, self._pos, self._uf, self._unit_alive, self._min_hp,
                     self._ef, self._ei, self._eb, self._at, self._last_action, self._enemy_last, self._enemy_goal,
                     self._fired_at, self._kc, _TF, _TB, self._type_bit, self._walls, self._icfg, self._wf64[:E],
                     self._wf64[E:2 * E], self._rpf, self._rp_alive, self._rp_target, self._mask_buf, self._obs_buf,
                     observe_all)  # observes every env, or (the others did not change) only the reset ones
        self._obs, self._masks = self._obs_buf, self._mask_buf
        self._never_reset = False
        return self._obs_out()

    def _start_centres(self, rng: np.random.Generator) -> np.ndarray:
        """Group centre of every unit, float64 ``[n_units, 2]`` (map units), of a start layout drawn from ``rng``
        (``line``: allies around (W/4, H/2), enemies around (3W/4, H/2); ``reflect``: allies around a random
        point of the left half, enemies around its mirror image; ``surrounded``: allies in the centre, enemies
        in 2-4 groups around them at distance 9). Each unit then gets a uniform jitter in [-2, 2] per axis
        (immobile units none), and the start is clipped to [0.5, W - 0.5] (``_kernels.reset_envs``)."""
        A, M = self.n_allies, self.n_enemies
        W, H = U.MAP_WIDTH, U.MAP_HEIGHT
        layout = self.start
        if layout == "surrounded_and_reflect":
            layout = "surrounded" if rng.random() < 0.5 else "reflect"
        if layout == "line":
            ally_c = np.tile([W / 4, H / 2], (A, 1))
            enemy_c = np.tile([3 * W / 4, H / 2], (M, 1))
        elif layout == "reflect":
            c = np.array([rng.uniform(4.0, W / 2 - 4.0), rng.uniform(4.0, H - 4.0)])
            ally_c = np.tile(c, (A, 1))
            enemy_c = np.tile([W - c[0], c[1]], (M, 1))
        else:  # surrounded
            ally_c = np.tile([W / 2, H / 2], (A, 1))
            k = int(rng.integers(2, 5))
            phase = rng.uniform(0, 2 * np.pi)
            ang = phase + 2 * np.pi * np.arange(k) / k
            centres = np.stack([W / 2 + 9 * np.cos(ang), H / 2 + 9 * np.sin(ang)], 1)
            enemy_c = centres[np.arange(M) % k]
        return np.concatenate([ally_c, enemy_c])

    # ------------------------------------------------------------------ planning
    #: every per-env state array and the axis its env index is on (the step reads and writes only these)
    _ENV_STATE: ClassVar[tuple[tuple[str, int], ...]] = (
        ("_type", 0), ("_pos", 0), ("_uf", 1), ("_unit_alive", 0), ("_min_hp", 0), ("_ef", 1), ("_ei", 1),
        ("_eb", 1), ("_at", 1), ("_last_action", 0), ("_enemy_last", 0), ("_enemy_goal", 0), ("_fired_at", 0),
        ("_kc", 1))

    def copy_envs(self, src: "SMACCore", src_ids: np.ndarray, dst_ids: np.ndarray,
                  stream_keys: np.ndarray | None = None) -> None:
        """Put this core's envs ``dst_ids`` in the exact state of ``src``'s envs ``src_ids`` (units, cooldowns,
        the built-in enemy's memory, step count, episode outcome, random stream), for lookahead planners that
        roll a state forward many times (Monte-Carlo rollouts, search). ``src`` may be this core.

        Args:
            src: a core of the same map and scenario params.
            src_ids, dst_ids: int ``[K]`` env indices (a source may repeat: one state into many envs).
            stream_keys: uint64 ``[K]``, or None to keep the source's random stream. With keys, each copy draws
                the built-in enemy's target picks and the cooldown jitter from a new stream (counter restarted),
                so rollouts do not share the source's future randomness.

        Raises:
            ValueError: ``src`` plays another map or params, or the index arrays differ in length or are out of
                range.
        """
        if src.params != self.params:
            raise ValueError(f"copy_envs needs a core of the same map and params; got {src.params} for {self.params}")
        s = np.asarray(src_ids, np.int64).reshape(-1)
        d = np.asarray(dst_ids, np.int64).reshape(-1)
        if len(s) != len(d) or (len(s) and (s.min() < 0 or s.max() >= src.num_envs or d.min() < 0
                                            or d.max() >= self.num_envs)):
            raise ValueError(f"src_ids ({len(s)} in [0, {src.num_envs})) and dst_ids ({len(d)} in "
                             f"[0, {self.num_envs})) must be index arrays of one length within range")
        for name, axis in self._ENV_STATE:
            a, b = getattr(self, name), getattr(src, name)
            if axis == 0:
                a[d] = b[s]
            else:
                a[:, d] = b[:, s]
        if stream_keys is not None:
            self._kc[0, d] = np.asarray(stream_keys, np.uint64).reshape(-1)
            self._kc[1, d] = 0
        self._observe_into(np.ascontiguousarray(d))
        self._never_reset = False  # a planner's rollout core is filled by copies, never reset

    def game_state(self) -> dict[str, np.ndarray]:
        """The arrays that make up every env's exact game state, by name: what :meth:`copy_envs` copies (units,
        cooldowns, the built-in enemy's memory, step count, episode outcome, random stream), read-only views. Two
        cores whose ``game_state()`` arrays are equal play the same games, whatever each one observes
        (``obs_*`` and ``state_*`` params change observations, never the game)."""
        out = {}
        for name, _ in self._ENV_STATE:
            v = getattr(self, name).view()
            v.flags.writeable = False
            out[name] = v
        return out

    # ------------------------------------------------------------------ capabilities
    @property
    def alive(self) -> np.ndarray:
        """bool ``[E, n_allies]``: agents whose unit lives in a running episode."""
        return self._unit_alive[:, : self.n_allies] & ~self._over[:, None]

    @property
    def won(self) -> np.ndarray:
        """bool ``[E]``: envs whose current episode has ended in a win (all enemies dead first); stays set until the
        env is reset, unlike ``info["battle_won"]``, which marks only the step the battle was won."""
        return self._result == 1

    @property
    def done(self) -> np.ndarray:
        """bool ``[E]``: envs whose episode has ended (no agent alive; ``~alive.any(1)``, one compiled call)."""
        out = np.empty(self.num_envs, bool)
        ep = self._done_ep
        if ep is None:
            K.done(self.n_allies, self._unit_alive, self._eb, out)
            self._done_ep = _entry_point(K.done, (self.n_allies, self._unit_alive, self._eb, out)) or K.done
        else:
            ep(self.n_allies, self._unit_alive, self._eb, out)
        return out

    def positions(self) -> np.ndarray:
        """Agent positions float64 ``[E, n_allies, 3]`` (map units; z = 0)."""
        out = np.zeros((self.num_envs, self.n_allies, 3))
        out[..., :2] = self._pos[:, : self.n_allies]
        return out


    def _obs_out(self, sel: np.ndarray | None = None) -> np.ndarray:
        """A copy of the observations ``[E or len(sel), n_allies, obs_dim]``: the kernels' SMAC blocks, then with
        ``obs_enemy_targets`` per enemy [shoots at this agent (1/0), cooldown / base cooldown], zeros for enemies out
        of the agent's sight and for dead agents, then with ``obs_state`` the global :meth:`state` (zeros for dead
        agents)."""
        base = self._obs_buf if sel is None else self._obs_buf[sel]
        if not (self._obs_targets or self._obs_state):
            return base.copy()
        ids = self._all_envs if sel is None else sel
        A, M = self.n_allies, self.n_units - self.n_allies
        out = np.empty(base.shape[:2] + (self.obs_dim,), np.float32)
        out[..., :self._obs_base] = base
        if self._obs_state:
            st = self.state()[ids]                                                     # [n, state_dim]
            out[..., self.obs_dim - self.state_dim:] = st[:, None, :] * self._unit_alive[ids, :A, None]
        if not self._obs_targets:
            return out
        # an enemy is in sight when its distance feature is set: the enemy block's entry 1 is distance / sight,
        # written only for visible enemies (SMACCore's layout), and its health entry 4 is > 0 for a living one
        blk = base[..., 4:4 + M * self.enemy_feats].reshape(base.shape[0], A, M, self.enemy_feats)
        seen = blk[..., 4] > 0                                                         # [n, A, M]
        live = self._unit_alive[ids, A:] & ~self._eb[0][ids][:, None]                 # [n, M]
        tgt = (self._enemy_last[ids][:, None, :] == np.arange(A)[None, :, None])      # [n, A, M]: enemy m shoots a
        cd = np.clip(self._cooldown[ids, A:] / _TF[self._type[ids, A:], K.F_CD_NORM], 0.0, 1.0) * live
        ext = out[..., self._obs_base:self._obs_base + 2 * M].reshape(base.shape[0], A, M, 2)
        ext[..., 0] = tgt & seen
        ext[..., 1] = cd[:, None, :] * seen
        return out

    def action_entities(self) -> tuple[int, int, int, int]:
        """Which actions act on which observed entity, for entity-aware policies (PPO's ``actor: asn``):
        ``(first_action, n_entities, offset, feats)``: action ``first_action + j`` (6 + j, attack enemy j) acts on
        the enemy whose observation features are ``obs[..., offset + j * feats : offset + (j + 1) * feats]`` (the
        enemy block after the 4 move flags). On a medivac the same actions heal ally j instead (SMAC's layout), so
        there the pairing is positional only."""
        return 6, self.n_enemies, 4, self.enemy_feats

    def action_masks(self) -> np.ndarray:
        """bool ``[E, n_allies, 6 + n_enemies]`` of available actions (SMAC's rules, see the class doc)."""
        if self._masks is None:
            self._refresh_masks()
        return self._masks.copy()

    def _refresh_masks(self) -> None:
        """Recompute the masks of every env from the current state (after outside edits of the unit arrays)."""
        K.masks_only(self._type, self._pos, self._unit_alive, self._eb, _TF, _TB, self._walls, self._icfg, self._mask_buf)
        self._masks = self._mask_buf

    # ------------------------------------------------------------------ observations
    def _observe_into(self, sel: np.ndarray) -> None:
        """Observe envs ``sel`` (int64 indices; empty = every env) into the observation and mask buffers."""
        K.observe(sel, *self._obs_args)
        self._obs, self._masks = self._obs_buf, self._mask_buf

    def _observe(self, sel: np.ndarray | None = None) -> np.ndarray:
        """Observations float32 ``[E, n_allies, obs_dim]`` recomputed from the state (see the class doc); also
        refreshes the cached masks. ``sel``: env indices; then only those envs (``[len(sel), n_allies, obs_dim]``)."""
        if sel is None:
            self._observe_into(self._all_envs[:0])
            return self._obs_out()
        sel = np.ascontiguousarray(sel, np.int64).reshape(-1)
        self._observe_into(sel)
        return self._obs_out(sel)

    def state(self) -> np.ndarray:
        """Global state float32 ``[E, state_dim]`` (SMAC's layout, see the class doc; dead units are zeros)."""
        out = np.empty((self.num_envs, self.state_dim), np.float32)
        K.state(self._type, self._pos, self._uf, self._unit_alive, self._eb, self._last_action, _TF, _TB,
                self._type_bit, self._icfg, out)
        if self._state_details:
            self._enemy_details_into(out[:, self._state_base:])
        return out

    def _enemy_details_into(self, out: np.ndarray) -> None:
        """``state_enemy_details``: per enemy [cooldown / base cooldown in [0, 1], target one-hot over allies] into
        ``out`` float32 ``[E, n_enemies * (1 + n_allies)]``; zeros for dead enemies and for envs that are over."""
        A = self.n_allies
        M = self.n_units - A
        live = self._unit_alive[:, A:] & ~self._eb[0][:, None]                        # [E, M]
        cd = np.clip(self._cooldown[:, A:] / _TF[self._type[:, A:], K.F_CD_NORM], 0.0, 1.0) * live
        tgt = (self._enemy_last[:, :, None] == np.arange(A)) & live[:, :, None]       # [E, M, A]; -1 matches none
        blk = out.reshape(self.num_envs, M, 1 + A)
        blk[:, :, 0] = cd
        blk[:, :, 1:] = tgt

    # ------------------------------------------------------------------ step
    def step(self, actions: np.ndarray) -> StepResult:
        """Advance every running env by one agent step (8 ticks); envs already over are left unchanged.

        One compiled kernel call (``_kernels.step``) does the whole batch: the built-in enemy (SMAX's heuristic:
        keep attacking the last target while it is in range, else the closest ally in range, else move (best
        of N/E/S/W) toward a random visible ally or the own start reflected through the map centre; medivacs
        heal the most damaged biological teammate in range, else follow their fighters' centroid), then per
        tick: moves, the clamp to the map and walls, simultaneous attacks (baneling bursts, colossus beams),
        heals, cooldowns, shield regeneration, deaths and push-apart; then rewards, episode ends, and the next
        observation and masks.

        Args:
            actions: int ``[E, n_allies]`` in ``[0, 6 + n_enemies)``.

        Raises:
            ValueError: wrong shape, a dtype that is not integer, bool or float (strings, objects, complex), a
                non-integral value, or an action index out of range (the value as given, e.g. 2**63 of a uint64
                array, not its int64 cast).
            RuntimeError: before the first :meth:`reset` (or :meth:`copy_envs`).
        """
        if self._never_reset:
            raise RuntimeError(STEP_BEFORE_RESET)
        act = actions if type(actions) is np.ndarray else np.asarray(actions)
        if act.shape != self._act_shape:
            from coopsim.platform.scenario import given_shape

            raise ValueError(f"actions must have shape (num_envs, n_allies) = {self._act_shape}; got "
                             f"{given_shape(actions, act)}")
        fl = act.flags
        if act.dtype is not _I64 or not fl.c_contiguous or not fl.writeable:  # the kernel's exact argument type
            # dtype and range checked in the given dtype (a uint64 2**63 cast to int64 first was reported negative)
            act = np.ascontiguousarray(discrete_joint_actions(act, self._act_shape, self.n_actions,
                                                              scenario=f"SMACCore (map {self.map.name!r})"))
        if self._masks is None:  # unit arrays were edited from outside since the last observation (tests do)
            self._refresh_masks()
        ep = self._step_ep
        if ep is None:  # first step: compile (or load from numba's cache), then keep the compiled entry point
            if _notice_pending:
                _compile_notice()
            bad = K.step(act, *self._step_args)
            self._step_ep = _entry_point(K.step, (act, *self._step_args)) or K.step
        else:
            bad = ep(act, *self._step_args)
        if bad >= 0:
            e, i = divmod(bad, self.n_allies)
            raise ValueError(f"action {act[e, i]} of env {e} agent {i} out of range; valid: 0..{self.n_actions - 1}")
        self._obs, self._masks = self._obs_buf, self._mask_buf
        r_dmg, r_kill, r_win, team = self._info_rows
        info = {
            "reward/damage": r_dmg.copy(),
            "reward/kill": r_kill.copy(),
            "reward/win": r_win.copy(),
            "team_reward": team.copy(),
            "battle_won": self._info_won.copy(),
            "invalid_actions": self._invalid.copy(),
        }
        if self._penalised:  # reward_only_positive: false: the part for damage taken and allies lost (<= 0)
            info["reward/penalty"] = team - r_dmg - r_kill - r_win
        return StepResult(self._obs_out(), self._reward_buf.copy(), self._term.copy(), self._trunc.copy(), info)

    # ------------------------------------------------------------------ metrics / replay / render
    def replay(self, env_index: int = 0) -> dict[str, np.ndarray]:
        """Replay arrays of env ``env_index``'s episode so far (saved by ``coopsim run`` as ``replays/*.npz``).

        Returns (``T`` = steps taken, ``U`` = allies then enemies):
            ``pos`` float32 ``[T+1, U, 2]`` unit centres (map units) after reset and after each step,
            ``health``, ``shield`` float32 ``[T+1, U]`` hit points, ``alive`` bool ``[T+1, U]``,
            ``target`` int32 ``[T+1, U]`` unit index each unit last fired at (or healed) during the step
            ending at that frame (-1 none), ``types`` int32 ``[U]``, ``n_allies`` int, ``walls`` float32
            ``[W, 4]``, ``map_name`` str, ``outcome`` str (win, loss, draw, timeout or running).

        Raises:
            RuntimeError: the core does not record (``record_replay=False``, or None with ``num_envs > 1``).
            IndexError: ``env_index`` outside ``[0, num_envs)``.
        """
        if not self._record:
            raise RuntimeError(f"this SMACCore does not record replays (num_envs={self.num_envs}, record_replay="
                               f"{self.params.record_replay}); build it with record_replay=True")
        e = int(env_index)
        if not 0 <= e < self.num_envs:
            raise IndexError(f"env_index must be in [0, {self.num_envs}); got {env_index}")
        T = int(self._t[e])
        m = self.episode_metrics_of(e)
        outcome = ("win" if m["win"] else "draw" if m["draw"] else "timeout" if m["timeout"]
                   else "loss" if self._over[e] else "running")
        return {
            "pos": self._rp_pos[:T + 1, e].copy(),
            "health": self._rp_health[:T + 1, e].copy(),
            "shield": self._rp_shield[:T + 1, e].copy(),
            "alive": self._rp_alive[:T + 1, e].copy(),
            "target": self._rp_target[:T + 1, e].copy(),
            "types": self._type[e].astype(np.int32),
            "n_allies": np.int64(self.n_allies),
            "walls": self._walls.copy(),
            "map_name": np.str_(self.map.name),
            "outcome": np.str_(outcome),
        }

    def episode_metrics(self) -> list[dict[str, float]]:
        """Per env: ``win`` (1/0), ``draw``, ``timeout``, ``allies_left``, ``enemies_left``, ``damage_dealt``,
        ``damage_taken`` (health + shield points), ``episode_steps``; valid once the env is done."""
        return [self.episode_metrics_of(e) for e in range(self.num_envs)]

    def episode_metrics_of(self, e: int) -> dict[str, float]:
        """:meth:`episode_metrics` of env ``e`` alone."""
        A = self.n_allies
        ua = self._unit_alive[e]
        return {
            "win": float(self._result[e] == 1),
            "draw": float(self._over[e] and self._result[e] == 0 and not ua[:A].any() and not ua[A:].any()),
            "timeout": float(bool(self._trunc[e].any())),
            "allies_left": float(ua[:A].sum()),
            "enemies_left": float(ua[A:].sum()),
            "damage_dealt": float(self._dmg_dealt[e]),
            "damage_taken": float(self._dmg_taken[e]),
            "episode_steps": float(self._t[e]),
        }

    def render(self, env_index: int = 0) -> np.ndarray:
        """RGB frame uint8 ``[512, 512, 3]`` of env ``env_index`` (matplotlib): walls, units as circles of their
        radius (allies blue, enemies red) labelled with their type's letter (``render.TYPE_LETTER``), health
        (green) and shield (cyan) bars, lines for attacks (yellow) and heals (green) of the last step, dead
        units as grey crosses."""
        from coopsim.scenarios.smac.render import draw_frames

        e = int(env_index)
        return draw_frames(self._pos[e][None], self._health[e][None], self._shield[e][None], self._unit_alive[e][None],
                           self._fired_at[e][None], self._type[e], self.n_allies, self._walls)[0]

    @staticmethod
    def render_replay(replay: dict[str, np.ndarray], max_frames: int | None = None) -> list[np.ndarray]:
        """Captioned RGB frames uint8 ``[536, 512, 3]`` of a replay dict as returned by :meth:`replay`, one per
        step, or at most ``max_frames`` at evenly spaced steps (used by ``coopsim report`` for
        ``replay_seed<S>_ep<E>.gif``)."""
        from coopsim.scenarios.smac.render import replay_frames

        return replay_frames(replay, max_frames=max_frames)
