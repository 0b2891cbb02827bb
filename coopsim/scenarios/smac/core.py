"""SMAC-like unit micromanagement: a batched numpy core with SMAC's interface and SMAX's world.

See :class:`SMACCore` for the full description.
"""
from __future__ import annotations

import math
from typing import ClassVar, Literal

import gymnasium
import numpy as np
from pydantic import Field, field_validator

from coopsim.platform.scenario import ScenarioCore, ScenarioParams, StepResult
from coopsim.scenarios.smac import units as U
from coopsim.scenarios.smac.maps import MapSpec, get_map, map_types

# action layout (SMAC)
NOOP, STOP, NORTH, SOUTH, EAST, WEST = range(6)
N_MOVE_ACTIONS = 6
#: unit direction of actions 0..5 (no-op and stop do not move)
_DIRS = np.array([[0, 0], [0, 0], [0, 1], [0, -1], [1, 0], [-1, 0]], np.float32)
#: SMAX's heuristic ranks directions N, E, S, W (first maximum wins); their SMAC action codes
_HEUR_DIRS = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]], np.float32)
_HEUR_CODES = np.array([NORTH, EAST, SOUTH, WEST], np.int64)

_REWARD_DEATH = 10.0
_REWARD_WIN = 200.0
_REWARD_SCALE = 20.0

_C1 = np.uint64(0x9E3779B97F4A7C15)
_C2 = np.uint64(0xBF58476D1CE4E5B9)
_C3 = np.uint64(0x94D049BB133111EB)


_S27, _S30, _S31, _S40 = (np.uint64(k) for k in (27, 30, 31, 40))
_F24 = np.float32(2.0 ** -24)
_TYPE_IDS = np.arange(len(U.UNIT_TYPES))
#: damage of one hit, float32 ``[attacker type, target type]`` (``units.hit_damage`` of every pair)
_HIT = U.hit_damage(_TYPE_IDS[:, None], _TYPE_IDS[None, :])
#: move probes of SMAC's feasibility test (north, south, east, west), float32 ``[4, 2]``
_PROBE = U.MOVE_AMOUNT * _DIRS[2:6]
assert U.MAP_WIDTH == U.MAP_HEIGHT  # the bounds tests below use one constant for both axes


def _whole(a: np.ndarray) -> np.ndarray:
    return a


def _splitmix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of a uint64 array (wrapping arithmetic: numpy never checks array overflow)."""
    z = z + _C1
    z = (z ^ (z >> _S30)) * _C2
    z = (z ^ (z >> _S27)) * _C3
    return z ^ (z >> _S31)


class SMACParams(ScenarioParams):
    """Parameters of :class:`SMACCore`."""

    map_name: str = Field("3m", description="SMAC map name (e.g. '3m', '2s3z', 'corridor') or a procedural "
                                            "'<protoss|terran|zerg>_<n>_vs_<m>' (n, m in 1..32)")
    max_steps: int | None = Field(None, ge=1, le=100_000, description="episode limit in agent steps (0.5 s each); "
                                                                       "None = the map's SMAC limit")
    reward_sparse: bool = Field(False, description="True: +1 win, -1 loss, 0 otherwise (SMAC's sparse option)")
    obs_last_action: bool = Field(False, description="append each ally's last action (one-hot) to the ally block")
    obs_own_cooldown: bool = Field(False, description="append the agent's own weapon cooldown / base cooldown (medivac: "
                                                       "energy / 200) to the own block (SMAX's own features have it; "
                                                       "SMAC's do not)")
    state_last_action: bool = Field(True, description="append every ally's last action (one-hot) to state()")
    start_positions: Literal["line", "surrounded", "reflect", "surrounded_and_reflect"] | None = Field(
        None, description="start layout; None = the map's ('line' for SMAC maps, 'surrounded_and_reflect' "
                          "for procedural ones)")
    record_replay: bool | None = Field(
        None, description="keep every env's per-step unit arrays for replay() (coopsim run's replays/*.npz and "
                          "`coopsim report`'s GIF); None = only when num_envs == 1. Memory: (limit + 1) x num_envs "
                          "x units x 25 bytes")

    @field_validator("map_name")
    @classmethod
    def _known_map(cls, v: str) -> str:
        get_map(v)  # raises ValueError listing the valid maps
        return v


class SMACCore(ScenarioCore):
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
        ``state()``: per ally [health, cooldown / base cooldown (medivac: energy / 200), x, y relative to
        the map centre / map size, [shield], [type]], per enemy [health, x, y, [shield], [type]], then
        (``state_last_action``) every ally's last action one-hot.

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
        (SMAC pays again for re-damaging healed health; this keeps the maximum exact). Sparse option:
        +1 win, -1 loss, 0 otherwise. Terms in ``info``: ``reward/damage``, ``reward/kill``, ``reward/win``
        (float32 ``[E]``, unscaled), ``team_reward`` (float32 ``[E]``, what each slot gets).

    Episode end:
        An agent terminates when its unit dies. The episode terminates for every agent when one side has
        no unit left other than medivacs (win, loss, or a draw when both sides die in the same tick), and
        is truncated at the map's limit (SMAC's: 3m 60 steps, ...): a timeout is a truncation and a loss
        (``episode_metrics()["win"] == 0``).

    Arguments:
        ``num_envs`` and :class:`SMACParams` (``map_name``, ``max_steps``, ``reward_sparse``,
        ``obs_last_action``, ``state_last_action``, ``start_positions``).

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
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1; got {num_envs}")
        self.params = p = SMACParams(**params)
        self.num_envs = E = int(num_envs)
        self.map: MapSpec = get_map(p.map_name)
        self.n_allies = A = len(self.map.allies)
        self.n_enemies = M = len(self.map.enemies)
        self.n_units = A + M
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
        self.obs_dim = 4 + M * self.enemy_feats + (A - 1) * self.ally_feats + self.own_feats
        self.state_ally_feats = 4 + self.ally_shield + nb
        self.state_enemy_feats = 3 + self.enemy_shield + nb
        self.state_dim = A * self.state_ally_feats + M * self.state_enemy_feats + (A * self.n_actions if p.state_last_action else 0)
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (self.obs_dim,), np.float32)
        self.state_space = gymnasium.spaces.Box(-1.0, 1.0, (self.state_dim,), np.float32)
        # other allies of ally i, in order
        self._others = np.array([[j for j in range(A) if j != i] for i in range(A)], np.int64).reshape(A, A - 1)

        # state arrays
        Un = self.n_units
        self._type = np.zeros((E, Un), np.int64)
        self._type[:] = np.array(self.map.allies + self.map.enemies, np.int64)
        self._pos = np.zeros((E, Un, 2), np.float32)
        self._health = np.zeros((E, Un), np.float32)
        self._shield = np.zeros((E, Un), np.float32)
        self._cooldown = np.zeros((E, Un), np.float32)
        self._energy = np.zeros((E, Un), np.float32)
        self._since_dmg = np.zeros((E, Un), np.float32)
        self._unit_alive = np.zeros((E, Un), bool)
        self._min_hp = np.zeros((E, M), np.float32)
        self._max_reward = np.ones(E, np.float32)
        self._t = np.zeros(E, np.int64)
        self._over = np.ones(E, bool)
        self._result = np.zeros(E, np.int64)  # 1 win, -1 loss, 0 draw / timeout / running
        self._term = np.ones((E, A), bool)
        self._trunc = np.zeros((E, A), bool)
        self._last_action = np.zeros((E, A), np.int64)
        self._enemy_last = np.full((E, M), -1, np.int64)
        self._enemy_goal = np.zeros((E, M, 2), np.float32)
        self._fired_at = np.full((E, Un), -1, np.int64)
        self._dmg_dealt = np.zeros(E, np.float32)
        self._dmg_taken = np.zeros(E, np.float32)
        self._key = np.zeros(E, np.uint64)
        self._ctr = np.zeros(E, np.uint64)
        self._rngs: list[np.random.Generator] = [np.random.default_rng([0, e]) for e in range(E)]
        self._flat = (np.arange(E) * Un)[:, None]
        # masks of the current positions (set by every observation); code that edits the unit arrays directly
        # (tests) sets it to None, and the next action_masks() or step() then recomputes every cache
        self._masks: np.ndarray | None = None
        self._obs: np.ndarray | None = None  # the last observation of the whole batch (never handed out)
        self._d_ae: np.ndarray | None = None  # ally-enemy distances [E, A, M] of the positions _masks was built on
        self._arange_u64: dict[int, np.ndarray] = {}
        self._rows_ea = np.arange(E * A)
        self._e_idx = np.arange(E)[:, None]
        self._m_idx = np.arange(M)[None, :]
        self._not_eye = ~np.eye(Un, dtype=bool)[None]
        self._pair_base = np.arange(E * Un) * Un  # flat index of (e, u, 0) in [E, U, U]
        self._pw_buf = tuple(np.empty((E, Un, Un), np.float32) for _ in range(4))  # work arrays of _pairwise
        self._close_buf = np.empty((E, Un, Un), bool)
        n_dir = N_MOVE_ACTIONS + max(A, M)
        self._dir_of = np.zeros((n_dir, 2), np.float32)  # move direction of each action index (attacks: none)
        self._dir_of[:N_MOVE_ACTIONS] = _DIRS
        self._cache_types()
        # replay buffers, indexed [step, env, unit] (frame t = state after step t; frame 0 = after reset)
        self._record = bool(p.record_replay) if p.record_replay is not None else E == 1
        if self._record:
            L = self.limit + 1
            self._rp_pos = np.zeros((L, E, Un, 2), np.float32)
            self._rp_health = np.zeros((L, E, Un), np.float32)
            self._rp_shield = np.zeros((L, E, Un), np.float32)
            self._rp_alive = np.zeros((L, E, Un), bool)
            self._rp_target = np.full((L, E, Un), -1, np.int32)

    # ------------------------------------------------------------------ randomness
    def _uniform(self, *tail: int) -> np.ndarray:
        """Counter-based uniform floats in [0, 1), float32 ``[E, *tail]``, one stream per env."""
        k = math.prod(tail)
        ar = self._arange_u64.get(k)
        if ar is None:
            ar = self._arange_u64[k] = np.arange(k, dtype=np.uint64)[None]
        z = _splitmix(self._key[:, None] ^ ((self._ctr[:, None] + ar) * _C3))
        self._ctr += np.uint64(k)
        return ((z >> _S40).astype(np.float32) * _F24).reshape((self.num_envs, *tail))

    def _cache_types(self) -> None:
        """Per-unit arrays that depend only on the unit types (types change only in ``reset``)."""
        t, A = self._type, self.n_allies
        ta, te = t[:, :A], t[:, A:]
        self._cached_type = t.copy()
        r = U.RADIUS[t]
        self._radius = r
        self._rsum = r[:, :, None] + r[:, None, :]
        self._rsum2 = self._rsum * self._rsum
        self._t_mobile = U.SPEED[t] > 0
        self._any_immobile = not bool(self._t_mobile.all())
        self._t_speed_tick = (U.SPEED[t] * np.float32(U.TICK_S))[..., None]
        self._t_range = U.ATTACK_RANGE[t]
        self._t_hmax = U.HEALTH[t]
        self._t_smax = U.SHIELD[t]
        self._t_smax1 = np.maximum(self._t_smax, 1.0)
        self._t_has_shield = self._t_smax > 0
        self._t_healer = U.IS_HEALER[t]
        self._t_nonhealer = ~self._t_healer
        self._t_base_cd = U.COOLDOWN_S[t]
        self._t_splashy = U.IS_LINE_SPLASH[t] | U.IS_SUICIDE_SPLASH[t]
        self._t_suicide = U.IS_SUICIDE_SPLASH[t]
        self._any_heal = bool(self._t_healer.any())
        self._any_heal_a = bool(self._t_healer[:, :A].any())
        self._any_splash = bool(self._t_splashy.any())
        self._any_shield = bool(self._t_has_shield.any())
        healer = self._t_healer
        ally = np.arange(self.n_units) < A
        # action 6 + i targets unit i + base - 6: allies attack enemies (A + i), medivacs heal their own side
        self._tgt_base = np.where(ally, np.where(healer, 0, A), np.where(healer, A, 0)) - N_MOVE_ACTIONS
        self._inv_sight_a = (1.0 / U.SIGHT_RANGE[ta])[..., None]
        self._range_a = U.ATTACK_RANGE[ta][..., None]
        self._mobile_a = self._t_mobile[:, :A]
        self._attacker_a = self._t_nonhealer[:, :A]
        self._sight_e = U.SIGHT_RANGE[te][..., None]
        self._range_e_fighter = np.where(self._t_healer[:, A:], np.float32(-1.0), U.ATTACK_RANGE[te])[..., None]
        nb = self.unit_type_bits
        self._onehot = (self._type_bit[t][..., None] == np.arange(nb)) if nb else None

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None, env_ids: np.ndarray | None = None) -> np.ndarray:
        E, A = self.num_envs, self.n_allies
        ids = np.arange(E) if env_ids is None else np.asarray(env_ids, np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= E):
            raise ValueError(f"env_ids must be in [0, {E}); got {ids.tolist()}")
        if seed is not None:
            for e in ids:
                self._rngs[e] = self.env_rng(seed, e)
        W, H = U.MAP_WIDTH, U.MAP_HEIGHT
        for e in ids:
            rng = self._rngs[e]
            types = np.array(self.map.allies + self.map.enemies, np.int64)
            if self.map.procedural_race is not None:
                tids = np.array([t for t, _ in self.map.type_probs])
                probs = np.array([q for _, q in self.map.type_probs])
                types = tids[rng.choice(len(tids), size=self.n_units, p=probs)]
            self._type[e] = types
            self._pos[e] = self._start_positions(rng, types)
            self._key[e] = np.uint64(rng.integers(0, 2 ** 63))
            self._ctr[e] = 0
        t = self._type[ids]
        self._health[ids] = U.HEALTH[t]
        self._shield[ids] = U.SHIELD[t]
        self._cooldown[ids] = 0.0
        self._energy[ids] = np.where(U.IS_HEALER[t], U.MEDIVAC_ENERGY_START, 0.0)
        self._since_dmg[ids] = 0.0
        self._unit_alive[ids] = True
        self._min_hp[ids] = self._health[ids, A:] + self._shield[ids, A:]
        self._max_reward[ids] = self._min_hp[ids].sum(1) + _REWARD_DEATH * self.n_enemies + _REWARD_WIN
        self._t[ids] = 0
        self._over[ids] = False
        self._result[ids] = 0
        self._term[ids] = False
        self._trunc[ids] = False
        self._last_action[ids] = 0
        self._enemy_last[ids] = -1
        self._fired_at[ids] = -1
        self._dmg_dealt[ids] = 0.0
        self._dmg_taken[ids] = 0.0
        # SMAX's default enemy goal: own start reflected through the map centre
        centre = np.array([W / 2, H / 2], np.float32)
        self._enemy_goal[ids] = 2 * centre - self._pos[ids, A:]
        if self.map.procedural_race is not None or not np.array_equal(self._type, self._cached_type):
            self._cache_types()
        envs = np.zeros(E, bool)
        envs[ids] = True
        self._push_apart(self._rsum2_live(self._unit_alive & envs[:, None]))
        if self._record:
            self._record_frame(ids)
        if env_ids is None or self._obs is None or self._masks is None or 2 * len(ids) > E:
            self._obs = self._observe()
        else:  # the other envs did not change since the last observation: observe the reset ones only
            self._obs[ids] = self._observe(ids)  # self._obs is never handed out (copies are)
        return self._obs.copy()

    def _start_positions(self, rng: np.random.Generator, types: np.ndarray) -> np.ndarray:
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
        else:  # surrounded: allies in the centre, enemies in 2-4 groups around them at distance 9
            ally_c = np.tile([W / 2, H / 2], (A, 1))
            k = int(rng.integers(2, 5))
            phase = rng.uniform(0, 2 * np.pi)
            ang = phase + 2 * np.pi * np.arange(k) / k
            centres = np.stack([W / 2 + 9 * np.cos(ang), H / 2 + 9 * np.sin(ang)], 1)
            enemy_c = centres[np.arange(M) % k]
        pos = np.concatenate([ally_c + rng.uniform(-2, 2, (A, 2)), enemy_c + rng.uniform(-2, 2, (M, 2))])
        immobile = U.SPEED[types] == 0
        pos[immobile] = np.concatenate([ally_c, enemy_c])[immobile]
        return np.clip(pos, 0.5, W - 0.5).astype(np.float32)

    # ------------------------------------------------------------------ capabilities
    @property
    def alive(self) -> np.ndarray:
        """bool ``[E, n_allies]``: agents whose unit lives in a running episode."""
        return self._unit_alive[:, : self.n_allies] & ~self._over[:, None]

    def positions(self) -> np.ndarray:
        """Agent positions float64 ``[E, n_allies, 3]`` (map units; z = 0)."""
        out = np.zeros((self.num_envs, self.n_allies, 3))
        out[..., :2] = self._pos[:, : self.n_allies]
        return out

    def _move_feasible(self, pos: np.ndarray | None = None) -> np.ndarray:
        """bool ``[E, n_allies, 4]``: a probe 2 units north/south/east/west is on the map and outside walls
        (``pos``: unit positions ``[E', U, 2]`` to use instead of the core's)."""
        pos = self._pos if pos is None else pos
        probe = pos[:, : self.n_allies, None, :] + _PROBE
        inside = (probe > 0) & (probe < U.MAP_WIDTH)
        ok = inside[..., 0] & inside[..., 1]
        for x0, y0, x1, y1 in self._walls:
            ok &= ~((probe[..., 0] > x0) & (probe[..., 0] < x1) & (probe[..., 1] > y0) & (probe[..., 1] < y1))
        return ok

    def _dist(self, a: slice, b: slice, pos: np.ndarray | None = None) -> np.ndarray:
        pos = self._pos if pos is None else pos
        d = pos[:, a, None, :] - pos[:, None, b, :]
        return np.sqrt((d * d).sum(-1))

    def action_masks(self) -> np.ndarray:
        """bool ``[E, n_allies, 6 + n_enemies]`` of available actions (SMAC's rules, see the class doc)."""
        if self._masks is None:
            self._cache_types()
            self._d_ae = self._dist(slice(0, self.n_allies), slice(self.n_allies, None))
            self._masks = self._compute_masks(self._d_ae)
        return self._masks.copy()

    def _compute_masks(self, d_ae: np.ndarray | None = None, feasible: np.ndarray | None = None,
                       alive: np.ndarray | None = None, sel: np.ndarray | None = None) -> np.ndarray:
        """Masks ``[E, A, n_actions]`` (``sel``: of those envs only, ``[len(sel), A, n_actions]``)."""
        A, M = self.n_allies, self.n_enemies
        g = _whole if sel is None else (lambda a: a[sel])
        pos, ua = g(self._pos), g(self._unit_alive)
        if alive is None:
            alive = ua[:, :A] & ~g(self._over)[:, None]
        masks = np.empty((len(pos), A, self.n_actions), bool)
        np.logical_not(alive, out=masks[..., NOOP])
        masks[..., STOP] = alive
        if feasible is None:
            feasible = self._move_feasible(pos)
        np.logical_and(feasible, (alive & g(self._mobile_a))[..., None], out=masks[..., NORTH:WEST + 1])
        if d_ae is None:
            d_ae = self._dist(slice(0, A), slice(A, None), pos)
        range_a = g(self._range_a)
        atk = masks[..., N_MOVE_ACTIONS:]
        np.less(d_ae, range_a, out=atk)
        atk &= ua[:, None, A:]
        atk &= (alive & g(self._attacker_a))[..., None]
        if self._any_heal_a:
            ta = g(self._type)[:, :A]
            k = min(A, M)
            d_aa = self._dist(slice(0, A), slice(0, k), pos)
            heal = (d_aa < range_a) & (ua[:, None, :k] & U.IS_BIOLOGICAL[ta[:, None, :k]])
            heal &= ~np.eye(A, k, dtype=bool)[None] & (alive & g(self._t_healer)[:, :A])[..., None]
            masks[..., N_MOVE_ACTIONS:N_MOVE_ACTIONS + k] |= heal
        return masks

    # ------------------------------------------------------------------ observations
    def _observe(self, sel: np.ndarray | None = None) -> np.ndarray:
        """Observations float32 ``[E, n_allies, obs_dim]`` (see the class doc); also caches masks and distances.

        ``sel``: env indices; then only those envs are observed (``[len(sel), n_allies, obs_dim]``) and their
        rows of the caches updated.
        """
        A, M = self.n_allies, self.n_enemies
        nb, Fe, Fa = self.unit_type_bits, self.enemy_feats, self.ally_feats
        g = _whole if sel is None else (lambda a: a[sel])
        pos, ua, health, shield = g(self._pos), g(self._unit_alive), g(self._health), g(self._shield)
        E = len(pos)
        alive = ua[:, :A] & ~g(self._over)[:, None]
        inv_sight = g(self._inv_sight_a)  # [E, A, 1]
        hfrac = health / g(self._t_hmax)
        out = np.empty((E, A, self.obs_dim), np.float32)  # every feature below is written
        feasible = self._move_feasible(pos)
        out[..., 0:4] = feasible
        # enemies: written in place through a view [E, A, M, Fe]; (rx * inv_sight) * vis == rx * (inv_sight * vis)
        # exactly, since vis is 0 or 1. Per-axis arrays keep numpy's inner loops long (an inner axis of 2 is slow).
        x, y = pos[..., 0], pos[..., 1]
        rx = x[:, None, A:] - x[:, :A, None]  # [E, A, M]
        ry = y[:, None, A:] - y[:, :A, None]
        dist = np.sqrt(rx * rx + ry * ry)
        dn = dist * inv_sight
        vis = (dn < 1.0) & ua[:, None, A:]
        masks = self._compute_masks(dist, feasible, alive, sel)
        if sel is None:
            self._d_ae, self._masks = dist, masks
        else:
            self._d_ae[sel], self._masks[sel] = dist, masks
        ev = out[..., 4:4 + M * Fe].reshape(E, A, M, Fe)
        visf = vis.astype(np.float32)
        att = masks[..., N_MOVE_ACTIONS:] & vis
        if self._any_heal_a:
            att &= g(self._attacker_a)[..., None]
        ev[..., 0] = att
        np.multiply(dn, visf, out=ev[..., 1])
        scale = inv_sight * visf
        np.multiply(rx, scale, out=ev[..., 2])
        np.multiply(ry, scale, out=ev[..., 3])
        np.multiply(hfrac[:, None, A:], visf, out=ev[..., 4])
        f = 5
        if self.enemy_shield or self.ally_shield:
            sfrac = shield / g(self._t_smax1)
        if self.enemy_shield:
            np.multiply(sfrac[:, None, A:], visf, out=ev[..., 5])
            f = 6
        onehot = g(self._onehot) if nb else None
        if nb:
            np.logical_and(onehot[:, None, A:], vis[..., None], out=ev[..., f:f + nb], casting="unsafe")
        # allies (others)
        if A > 1:
            oth = self._others
            o = 4 + M * Fe
            av = out[..., o:o + (A - 1) * Fa].reshape(E, A, A - 1, Fa)
            xa, ya = x[:, :A], y[:, :A]
            rx = xa[:, oth] - xa[:, :, None]  # [E, A, A-1]
            ry = ya[:, oth] - ya[:, :, None]
            dist = np.sqrt(rx * rx + ry * ry)
            dn = dist * inv_sight
            vis = (dn < 1.0) & ua[:, :A][:, oth]
            visf = vis.astype(np.float32)
            av[..., 0] = visf
            np.multiply(dn, visf, out=av[..., 1])
            scale = inv_sight * visf
            np.multiply(rx, scale, out=av[..., 2])
            np.multiply(ry, scale, out=av[..., 3])
            np.multiply(hfrac[:, :A][:, oth], visf, out=av[..., 4])
            f = 5
            if self.ally_shield:
                np.multiply(sfrac[:, :A][:, oth], visf, out=av[..., 5])
                f = 6
            if nb:
                np.logical_and(onehot[:, :A][:, oth], vis[..., None], out=av[..., f:f + nb], casting="unsafe")
                f += nb
            if self.params.obs_last_action:
                av[..., f:f + self.n_actions] = (g(self._last_action)[:, oth][..., None] == np.arange(self.n_actions)) & vis[..., None]
        o = self.obs_dim - self.own_feats
        out[..., o] = hfrac[:, :A]
        if self.ally_shield:
            out[..., o + 1] = sfrac[:, :A]
            o += 1
        if nb:
            out[..., o + 1:o + 1 + nb] = onehot[:, :A]
        if self.params.obs_own_cooldown:
            ta = g(self._type)[:, :A]
            out[..., -1] = np.where(U.IS_HEALER[ta], g(self._energy)[:, :A] / U.MEDIVAC_ENERGY_MAX,
                                    np.clip(g(self._cooldown)[:, :A] / U.COOLDOWN_NORM_S[ta], 0.0, 1.0))
        if not alive.all():  # dead agents see zeros (x * 0, as SMAC's zeroing; x * 1 leaves the others exact)
            out *= alive[..., None]
        return out

    def state(self) -> np.ndarray:
        """Global state float32 ``[E, state_dim]`` (SMAC's layout, see the class doc; dead units are zeros)."""
        E, A, M = self.num_envs, self.n_allies, self.n_enemies
        nb = self.unit_type_bits
        t = self._type
        alive = self._unit_alive & ~self._over[:, None]
        hfrac = self._health / U.HEALTH[t]
        smax = U.SHIELD[t]
        sfrac = np.where(smax > 0, self._shield / np.maximum(smax, 1.0), 0.0)
        rel = (self._pos - np.array([U.MAP_WIDTH / 2, U.MAP_HEIGHT / 2], np.float32)) / np.array([U.MAP_WIDTH, U.MAP_HEIGHT], np.float32)
        onehot = (self._type_bit[t][..., None] == np.arange(nb)).astype(np.float32)
        cd = np.where(U.IS_HEALER[t], self._energy / U.MEDIVAC_ENERGY_MAX,
                      np.clip(self._cooldown / U.COOLDOWN_NORM_S[t], 0.0, 1.0))
        af = [hfrac[:, :A, None], cd[:, :A, None], rel[:, :A]]
        if self.ally_shield:
            af.append(sfrac[:, :A, None])
        af.append(onehot[:, :A])
        ally = np.concatenate(af, -1) * alive[:, :A, None]
        ef = [hfrac[:, A:, None], rel[:, A:]]
        if self.enemy_shield:
            ef.append(sfrac[:, A:, None])
        ef.append(onehot[:, A:])
        enemy = np.concatenate(ef, -1) * alive[:, A:, None]
        parts = [ally.reshape(E, -1), enemy.reshape(E, -1)]
        if self.params.state_last_action:
            la = np.zeros((E, A, self.n_actions), np.float32)
            np.put_along_axis(la, self._last_action[..., None], 1.0, axis=2)
            parts.append(la.reshape(E, -1))
        return np.concatenate(parts, -1).astype(np.float32)

    # ------------------------------------------------------------------ built-in enemy
    def _enemy_actions(self, d_ae: np.ndarray | None = None) -> np.ndarray:
        """SMAX's heuristic for every enemy, int64 ``[E, n_enemies]`` in the enemy's own action layout.

        Keep attacking the last target while it is in range, else attack the closest ally in range;
        if none is in range, move (best of N/E/S/W) toward a random visible ally, else toward the own start
        position reflected through the map centre. Medivacs heal the most damaged biological teammate
        in range, else move toward their team's centroid. ``d_ae``: ally-enemy distances ``[E, A, M]`` of the
        current positions when already known (the observation computed them).
        """
        E, A, M = self.num_envs, self.n_allies, self.n_enemies
        te = self._type[:, A:]
        ua = self._unit_alive
        alive_e = ua[:, A:] & ~self._over[:, None]
        pe, pa = self._pos[:, A:], self._pos[:, :A]
        if d_ae is None:
            rel = pa[:, None, :, :] - pe[:, :, None, :]  # [E, M, A, 2]
            d = np.sqrt((rel * rel).sum(-1))
        else:
            d = d_ae.transpose(0, 2, 1)  # |a - e| == |e - a| bit for bit
        vis = ua[:, None, :A] & (d < self._sight_e)
        shoot = vis & (d < self._range_e_fighter)  # medivacs' range is -1: they never shoot
        last = self._enemy_last
        last_ok = (last >= 0) & shoot[self._e_idx, self._m_idx, np.maximum(last, 0)]
        closest = np.argmin(np.where(shoot, d, np.inf), axis=2)
        tgt = np.where(last_ok, last, closest)
        can_shoot = np.logical_or.reduce(shoot, axis=2)
        self._enemy_last = np.where(can_shoot, tgt, -1)
        u = self._uniform(M, A)
        pick = np.argmax(np.where(vis, u, -1.0), axis=2)
        can_see = np.logical_or.reduce(vis, axis=2)
        goal = np.where(can_see[..., None], pa[self._e_idx, pick], self._enemy_goal)
        act = np.where(can_shoot, N_MOVE_ACTIONS + tgt, _HEUR_CODES[np.argmax((goal - pe) @ _HEUR_DIRS.T, axis=-1)])
        healer = self._t_healer[:, A:]
        if healer.any():
            k = min(M, A)
            dm = self._dist(slice(A, None), slice(A, A + k))
            mates = self._unit_alive[:, None, A:A + k] & U.IS_BIOLOGICAL[te[:, None, :k]] & ~np.eye(M, k, dtype=bool)[None]
            hf = self._health[:, A:A + k] / U.HEALTH[te[:, :k]]
            cand = mates & (dm < U.ATTACK_RANGE[te][..., None]) & (hf < 1.0)[:, None, :]
            best = np.argmin(np.where(cand, hf[:, None, :], np.inf), axis=2)
            fighters = (self._unit_alive[:, A:] & ~healer).astype(np.float32)
            cnt = fighters.sum(1, keepdims=True)
            centroid = (pe * fighters[..., None]).sum(1) / np.maximum(cnt, 1.0)
            mv = _HEUR_CODES[np.argmax((centroid[:, None, :] - pe) @ _HEUR_DIRS.T, axis=-1)]
            mv = np.where(cnt > 0, mv, STOP)
            act = np.where(healer, np.where(cand.any(2), N_MOVE_ACTIONS + best, mv), act)
        return np.where(alive_e, act, NOOP)

    # ------------------------------------------------------------------ step
    def _pairwise(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``dx, dy, d2`` float32 ``[E, U, U]``: ``p_i - p_j`` per axis and its squared length (preallocated
        buffers, overwritten by the next call)."""
        x, y = self._pos[..., 0], self._pos[..., 1]
        dx, dy, d2, tmp = self._pw_buf
        np.subtract(x[:, :, None], x[:, None, :], out=dx)
        np.subtract(y[:, :, None], y[:, None, :], out=dy)
        np.multiply(dx, dx, out=d2)
        np.multiply(dy, dy, out=tmp)
        d2 += tmp
        return dx, dy, d2

    def _rsum2_live(self, live: np.ndarray) -> np.ndarray:
        """float32 ``[E, U, U]``: ``(r_i + r_j)^2`` where units ``i != j`` both live (bool ``live [E, U]``), else 0."""
        ok = live[:, :, None] & live[:, None, :]
        ok &= self._not_eye
        return self._rsum2 * ok

    def _push_apart(self, rsum2_live: np.ndarray, pairwise: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        """SMAX's push-apart of overlapping living units (immobile units stay).

        Each unit moves by ``sum_j (p_i - p_j) * max(r_i + r_j - d_ij, 0) / d_ij / 2`` over the living
        ``j != i``; ``rsum2_live`` is :meth:`_rsum2_live` (0 marks the pairs left out: ``d^2 < 0`` never holds).
        Only overlapping pairs are gathered (sparse), so the cost is one pairwise distance test per tick.
        ``pairwise``: :meth:`_pairwise` of the current positions when the caller already has it.
        """
        pos = self._pos
        dx, dy, d2 = pairwise if pairwise is not None else self._pairwise()
        close = np.less(d2, rsum2_live, out=self._close_buf)
        k = close.ravel().nonzero()[0]
        if k.size == 0:
            return
        Un = self.n_units
        dist = np.sqrt(d2.ravel()[k]) + np.float32(1e-6)
        over = (self._rsum.ravel()[k] / dist - 1.0) * 0.5
        flat = k // Un  # env * n_units + i
        if self._any_immobile:
            over *= self._t_mobile.ravel()[flat]
        n = self.num_envs * Un
        sx = np.bincount(flat, weights=dx.ravel()[k] * over, minlength=n)
        sy = np.bincount(flat, weights=dy.ravel()[k] * over, minlength=n)
        pos[..., 0] += sx.astype(np.float32).reshape(self.num_envs, Un)
        pos[..., 1] += sy.astype(np.float32).reshape(self.num_envs, Un)
        self._constrain()

    def _constrain(self) -> None:
        pos = self._pos
        np.maximum(pos, 0.0, out=pos)
        np.minimum(pos, U.MAP_WIDTH, out=pos)
        if len(self._walls):
            r = self._radius
            x, y = pos[..., 0], pos[..., 1]
            for x0, y0, x1, y1 in self._walls:
                pen = np.stack([x - (x0 - r), (x1 + r) - x, y - (y0 - r), (y1 + r) - y], -1)
                inside = (pen > 0).all(-1)
                if not inside.any():
                    continue
                side = np.argmin(pen, -1)
                x[:] = np.where(inside & (side == 0), x0 - r, np.where(inside & (side == 1), x1 + r, x))
                y[:] = np.where(inside & (side == 2), y0 - r, np.where(inside & (side == 3), y1 + r, y))

    def step(self, actions: np.ndarray) -> StepResult:
        """Advance every running env by one agent step (8 ticks); envs already over are left unchanged.

        Args:
            actions: int ``[E, n_allies]`` in ``[0, 6 + n_enemies)``.

        Raises:
            ValueError: wrong shape or an action index out of range.
        """
        E, A, M, Un = self.num_envs, self.n_allies, self.n_enemies, self.n_units
        act = np.asarray(actions)
        if act.shape != (E, A):
            raise ValueError(f"actions must have shape (num_envs, n_allies) = {(E, A)}; got {act.shape}")
        if not np.issubdtype(act.dtype, np.integer):
            if not np.all(np.mod(act, 1) == 0):
                raise ValueError(f"actions must be integers; got dtype {act.dtype}")
        act = act.astype(np.int64)
        if act.min() < 0 or act.max() >= self.n_actions:
            e, i = np.argwhere((act < 0) | (act >= self.n_actions))[0]
            raise ValueError(f"action {act[e, i]} of env {e} agent {i} out of range; valid: 0..{self.n_actions - 1}")
        ua = self._unit_alive
        active = ~self._over
        act_col = active[:, None]
        slot_alive0 = ua[:, :A] & act_col
        if self._masks is not None:
            masks, d_ae = self._masks, self._d_ae
        else:  # unit arrays were edited from outside since the last observation (tests do): refresh every cache
            self._cache_types()
            masks, d_ae = self._compute_masks(), None
        self._masks = self._d_ae = None
        ok = masks.reshape(E * A, -1)[self._rows_ea, act.ravel()].reshape(E, A)
        invalid = slot_alive0 & ~ok
        act = np.where(invalid, STOP, act)
        act = np.where(slot_alive0, act, NOOP)
        self._last_action = np.where(act_col, act, self._last_action)

        act_all = np.concatenate([act, self._enemy_actions(d_ae)], 1)  # [E, U], each side in its own layout
        vel = self._dir_of[act_all] * self._t_speed_tick
        tgt = np.where(act_all >= N_MOVE_ACTIONS, act_all + self._tgt_base, -1)
        t = self._type
        rng_ = self._t_range
        healer = self._t_healer
        has_t = tgt >= 0
        tidx = np.maximum(tgt, 0)
        fidx = (self._flat + tidx).ravel()
        pair_t = self._pair_base + tidx.ravel()  # flat index of (e, u, target of u) in [E, U, U]
        hit = _HIT[t, t.ravel()[fidx].reshape(E, Un)]
        any_splash, any_heal, any_shield = self._any_splash, self._any_heal, self._any_shield
        side = np.zeros(Un, bool)
        side[A:] = True  # True = enemy side
        hp_before = self._health + self._shield
        enemy_alive0 = ua[:, A:].copy()
        self._fired_at.fill(-1)
        n_flat = E * Un
        lo, hi = U.COOLDOWN_JITTER_S
        jitter_all = np.float32(lo) + np.float32(hi - lo) * self._uniform(U.TICKS_PER_STEP, Un)
        tick_act = np.float32(U.TICK_S) * act_col.astype(np.float32)
        posf = self._pos.reshape(-1, 2)
        n_alive = np.count_nonzero(ua)
        live = ua & act_col
        rsum2_live = self._rsum2_live(live)
        stale = True
        for k in range(U.TICKS_PER_STEP):
            if stale:  # first tick, or units died in the last one: everything else that depends on who lives
                stale = False
                step_vec = vel * live[..., None]
                cand = has_t & live & ua.ravel()[fidx].reshape(E, Un)
                if any_shield:
                    regen_ok = live & self._t_has_shield
                if any_heal:
                    energy_gain = np.float32(U.MEDIVAC_ENERGY_REGEN_PER_S * U.TICK_S) * (healer & live)
            self._pos += step_vec
            self._constrain()
            pw = self._pairwise()  # one pairwise pass per tick serves the attacks and the push-apart
            d = np.sqrt(pw[2].ravel()[pair_t]).reshape(E, Un)  # |p_u - p_target| == |p_target - p_u| bit for bit
            engaged = cand & (d < rng_)
            fire = engaged & (self._cooldown <= 0)
            if any_heal:
                heal = engaged & healer
                fire &= self._t_nonhealer
            n_fire = np.count_nonzero(fire)
            if n_fire:
                dmg = np.bincount(fidx, weights=(hit * fire).ravel(), minlength=n_flat)
                if any_splash and (fire & self._t_splashy).any():
                    tpos = posf[fidx].reshape(E, Un, 2)
                    dvec = tpos - self._pos
                    dmg = dmg + self._splash(fire & self._t_splashy, tidx, tpos, dvec, d, live, side)
                    self._health[fire & self._t_suicide] = 0.0
                dmg = dmg.reshape(E, Un).astype(np.float32)
                if any_shield:  # without shields on the map every shield is 0 and absorbs nothing
                    absorbed = np.minimum(self._shield, dmg)
                    self._shield -= absorbed
                    self._health -= dmg - absorbed
                    self._since_dmg[dmg > 0] = 0.0
                else:
                    self._health -= dmg
                np.maximum(self._health, 0.0, out=self._health)
                np.copyto(self._fired_at, tgt, where=fire)
            # healing
            if any_heal and heal.any():
                amount = np.minimum(np.float32(U.MEDIVAC_HEAL_PER_S * U.TICK_S), self._energy * np.float32(U.MEDIVAC_HP_PER_ENERGY)) * heal
                got = np.bincount(fidx, weights=amount.ravel(), minlength=n_flat).reshape(E, Un)
                room = self._t_hmax - self._health
                applied = np.minimum(got, room) * ua
                # energy is spent in proportion to what each medivac's heal actually restored
                frac = np.where(got > 0, applied / np.maximum(got, 1e-9), 0.0)
                spent = amount * frac.ravel()[fidx].reshape(E, Un)
                self._health += applied.astype(np.float32)
                self._energy -= (spent / U.MEDIVAC_HP_PER_ENERGY).astype(np.float32)
                self._fired_at[heal] = tgt[heal]
            if any_heal:
                self._energy += energy_gain
                np.minimum(self._energy, np.float32(U.MEDIVAC_ENERGY_MAX), out=self._energy)
            # cooldowns (SMAX: restart at base + jitter after firing, else count down)
            self._cooldown -= tick_act
            if n_fire:
                np.copyto(self._cooldown, self._t_base_cd + jitter_all[:, k], where=fire)
            # shields regenerate after a delay without damage
            if any_shield:
                self._since_dmg += tick_act
                regen = regen_ok & (self._since_dmg >= U.SHIELD_REGEN_DELAY_S)
                if regen.any():
                    np.copyto(self._shield, np.minimum(self._shield + np.float32(U.SHIELD_REGEN_PER_S * U.TICK_S), self._t_smax), where=regen)
            if n_fire:  # only damage kills
                np.logical_and(ua, self._health > 0, out=ua)
                n = np.count_nonzero(ua)
                if n != n_alive:
                    n_alive, stale = n, True
                    live = ua & act_col
                    rsum2_live = self._rsum2_live(live)
            self._push_apart(rsum2_live, pw)

        # bookkeeping after the 8 ticks
        hp_after = self._health + self._shield
        loss_hp = np.maximum(hp_before - hp_after, 0.0) * act_col
        self._dmg_dealt += loss_hp[:, A:].sum(1)
        self._dmg_taken += loss_hp[:, :A].sum(1)
        ehp = np.where(ua[:, A:], hp_after[:, A:], 0.0)
        new_min = np.minimum(self._min_hp, ehp)
        r_damage = (self._min_hp - new_min).sum(1) * active
        self._min_hp = new_min
        kills = (enemy_alive0 & ~ua[:, A:]).sum(1) * active
        fighters = ua & self._t_nonhealer
        allies_gone = ~np.logical_or.reduce(fighters[:, :A], axis=1)
        enemies_gone = ~np.logical_or.reduce(fighters[:, A:], axis=1)
        ended = active & (allies_gone | enemies_gone)
        win = ended & enemies_gone & ~allies_gone
        lost = ended & allies_gone & ~enemies_gone
        self._t += active
        timeout = active & ~ended & (self._t >= self.limit)
        self._result = np.where(win, 1, np.where(lost, -1, self._result))
        if self.params.reward_sparse:
            team = win.astype(np.float32) - lost.astype(np.float32)
        else:
            team = (r_damage + _REWARD_DEATH * kills + _REWARD_WIN * win) / self._max_reward * _REWARD_SCALE
        team = team.astype(np.float32) * active
        reward = team[:, None] * slot_alive0
        # per-agent ends
        dead_now = ~ua[:, :A] & act_col
        self._term |= dead_now | ended[:, None]
        self._trunc |= timeout[:, None] & ~self._term
        self._over |= ended | timeout
        if self._record:
            self._record_frame(np.flatnonzero(active))
        self._obs = obs = self._observe()
        k = (0.0 if self.params.reward_sparse else _REWARD_SCALE / self._max_reward) * active  # terms on the return's scale
        info = {
            "reward/damage": (r_damage * k).astype(np.float32),
            "reward/kill": (kills * _REWARD_DEATH * k).astype(np.float32),
            "reward/win": (win * _REWARD_WIN * k).astype(np.float32),
            "team_reward": team,
            "battle_won": win,
            "invalid_actions": invalid.sum(1).astype(np.int64),
        }
        return StepResult(obs.copy(), reward.astype(np.float32), self._term.copy(), self._trunc.copy(), info)

    def _splash(self, src: np.ndarray, tidx, tpos, dvec, d, live, side) -> np.ndarray:
        """Extra damage (flat ``[E * n_units]``) from baneling bursts and colossus beams fired this tick."""
        E, Un = self.num_envs, self.n_units
        e_idx, u_idx = np.nonzero(src)
        c = tpos[e_idx, u_idx]  # [K, 2] target centres
        vic = self._pos[e_idx]  # [K, Un, 2]
        own_side = side[u_idx]
        foe = (side[None, :] != own_side[:, None]) & live[e_idx]
        foe[np.arange(len(u_idx)), tidx[e_idx, u_idx]] = False  # the target already took the direct hit
        att_t = self._type[e_idx, u_idx]
        rel = vic - c[:, None, :]
        if True:
            is_bane = U.IS_SUICIDE_SPLASH[att_t]
            in_burst = (np.sqrt((rel * rel).sum(-1)) <= U.BANELING_SPLASH_RADIUS)
            # colossus: distance to the segment through the target perpendicular to the beam
            direc = dvec[e_idx, u_idx] / np.maximum(d[e_idx, u_idx], 1e-6)[:, None]
            perp = np.stack([-direc[:, 1], direc[:, 0]], -1)
            along = np.clip((rel * perp[:, None, :]).sum(-1), -U.COLOSSUS_LINE_HALF_LENGTH, U.COLOSSUS_LINE_HALF_LENGTH)
            closest = c[:, None, :] + along[..., None] * perp[:, None, :]
            gap = np.sqrt(((vic - closest) ** 2).sum(-1))
            on_line = gap <= U.RADIUS[self._type[e_idx]]
            hit_mask = foe & np.where(is_bane[:, None], in_burst, on_line)
        dmg = U.hit_damage(np.broadcast_to(att_t[:, None], hit_mask.shape), self._type[e_idx]) * hit_mask
        flat = (e_idx[:, None] * Un + np.arange(Un)[None]).ravel()
        return np.bincount(flat, weights=dmg.ravel(), minlength=E * Un)

    # ------------------------------------------------------------------ metrics / replay / render
    def _record_frame(self, ids: np.ndarray) -> None:
        """Copy envs ``ids``' unit arrays into the replay buffers at each env's current step."""
        if len(ids) == 0:
            return
        if self.num_envs == 1:  # basic indexing (the runner's case)
            t = int(self._t[0])
            self._rp_pos[t, 0] = self._pos[0]
            self._rp_health[t, 0] = self._health[0]
            self._rp_shield[t, 0] = self._shield[0]
            self._rp_alive[t, 0] = self._unit_alive[0]
            self._rp_target[t, 0] = self._fired_at[0]
            return
        t = self._t[ids]
        self._rp_pos[t, ids] = self._pos[ids]
        self._rp_health[t, ids] = self._health[ids]
        self._rp_shield[t, ids] = self._shield[ids]
        self._rp_alive[t, ids] = self._unit_alive[ids]
        self._rp_target[t, ids] = self._fired_at[ids]

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
    def render_replay(replay: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Captioned RGB frames uint8 ``[536, 512, 3]`` of a replay dict as returned by :meth:`replay`, one per
        step (used by ``coopsim report`` for ``replay_seed<S>_ep<E>.gif``)."""
        from coopsim.scenarios.smac.render import replay_frames

        return replay_frames(replay)
