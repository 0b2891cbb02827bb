"""Frozen unit statistics and world timing of the SMAC-like scenario (one constants module).

Every number a battle outcome depends on lives here; changing any of them is a behaviour change
and bumps the version of every ``smac/*`` id.

Sources and choices (see ``docs/smac.md``):

* Units JaxMARL's SMAX defines (marine, marauder, stalker, zealot, zergling, hydralisk): speed,
  damage, attack range, sight range, radius, health and weapon cooldown are SMAX's values exactly
  (``jaxmarl/environments/smax/smax_env.py``), ranges measured centre to centre as in SMAX. SMAX
  folds protoss shields into health (stalker 160, zealot 150); here they are split into health +
  shield (stalker 80 + 80, zealot 100 + 50, StarCraft II values), so the total is SMAX's.
* Units SMAX leaves out (medivac, colossus, baneling, spine crawler): StarCraft II (LotV, "faster"
  game speed) values from public unit databases; melee/edge ranges converted to SMAX's centre-to-centre
  convention. Damage bonuses (+light / +armoured) and armour apply only to these four units' attacks
  and to the spine crawler's armour, so every SMAX-only map keeps SMAX's arithmetic.
* World timing is SMAX's: one agent step = 8 ticks of 1/16 s = 0.5 s; after firing the cooldown is the
  base cooldown plus a uniform jitter in [-1/16, +2/16] s.
* Shields regenerate 2.8 shield/s after 7.1 s without damage (StarCraft II's 2/s after 10 s at
  "normal" speed, converted to "faster"). The reward never pays for regenerated shield.
"""
from __future__ import annotations

import numpy as np

#: Unit type names; the index is the type id used in every array. The first six follow SMAX's order.
UNIT_TYPES: tuple[str, ...] = (
    "marine", "marauder", "stalker", "zealot", "zergling", "hydralisk",
    "medivac", "colossus", "baneling", "spine_crawler",
)
TYPE_ID: dict[str, int] = {name: i for i, name in enumerate(UNIT_TYPES)}
MARINE, MARAUDER, STALKER, ZEALOT, ZERGLING, HYDRALISK, MEDIVAC, COLOSSUS, BANELING, SPINE_CRAWLER = range(10)

RACE_OF: dict[str, str] = {
    "marine": "terran", "marauder": "terran", "medivac": "terran",
    "stalker": "protoss", "zealot": "protoss", "colossus": "protoss",
    "zergling": "zerg", "hydralisk": "zerg", "baneling": "zerg", "spine_crawler": "zerg",
}

# ---- world timing (SMAX) -------------------------------------------------------------------
MAP_WIDTH: float = 32.0
MAP_HEIGHT: float = 32.0
TICK_S: float = 1.0 / 16.0          # one game tick (s)
TICKS_PER_STEP: int = 8             # ticks per agent step
STEP_S: float = TICK_S * TICKS_PER_STEP  # 0.5 s per agent step
COOLDOWN_JITTER_S: tuple[float, float] = (-1.0 / 16.0, 2.0 / 16.0)
MOVE_AMOUNT: float = 2.0            # SMAC's move-feasibility probe distance (map units)

# ---- per-type statistics (index = type id) -------------------------------------------------
#                          marine marauder stalker zealot zergling hydra  medivac colossus bane  spine
SPEED = np.array(        [3.15,  2.25,    4.13,   3.15,  4.13,    3.15,  3.5,    3.15,    3.5,  0.0], np.float32)
DAMAGE = np.array(       [9.0,   10.0,    13.0,   8.0,   5.0,     12.0,  0.0,    20.0,    16.0, 25.0], np.float32)
BONUS_VS_LIGHT = np.array([0,    0,       0,      0,     0,       0,     0,      10.0,    19.0, 0], np.float32)
BONUS_VS_ARMORED = np.array([0,  0,       0,      0,     0,       0,     0,      0,       0,    5.0], np.float32)
ATTACK_RANGE = np.array( [5.0,   6.0,     6.0,    2.0,   2.0,     5.0,   4.0,    7.0,     1.75, 7.0], np.float32)
SIGHT_RANGE = np.array(  [9.0,   10.0,    10.0,   9.0,   8.0,     9.0,   11.0,   10.0,    8.0,  11.0], np.float32)
RADIUS = np.array(       [0.375, 0.5625,  0.625,  0.5,   0.375,   0.625, 0.75,   1.0,     0.375, 1.0], np.float32)
HEALTH = np.array(       [45.0,  125.0,   80.0,   100.0, 35.0,    80.0,  150.0,  200.0,   30.0, 300.0], np.float32)
SHIELD = np.array(       [0,     0,       80.0,   50.0,  0,       0,     0,      150.0,   0,    0], np.float32)
ARMOR = np.array(        [0,     0,       0,      0,     0,       0,     0,      0,       0,    2.0], np.float32)
COOLDOWN_S = np.array(   [0.61,  1.07,    1.87,   0.86,  0.5,     0.59,  0.0,    1.07,    0.0625, 1.32], np.float32)
IS_LIGHT = np.array(     [1,     0,       0,      1,     1,       0,     0,      0,       0,    0], bool)
IS_ARMORED = np.array(   [0,     1,       1,      0,     0,       1,     1,      1,       0,    1], bool)
IS_BIOLOGICAL = np.array([1,     1,       0,      1,     1,       1,     0,      0,       1,    1], bool)
IS_HEALER = np.array(    [0,     0,       0,      0,     0,       0,     1,      0,       0,    0], bool)
#: units whose attack kills themselves and damages an area around the target
IS_SUICIDE_SPLASH = np.array([0, 0,       0,      0,     0,       0,     0,      0,       1,    0], bool)
#: units whose attack damages a short line through the target, perpendicular to the attack
IS_LINE_SPLASH = np.array([0,    0,       0,      0,     0,       0,     0,      1,       0,    0], bool)

# ---- special mechanics -----------------------------------------------------------------------
BANELING_SPLASH_RADIUS: float = 2.2     # map units, centre of target to centre of victims
COLOSSUS_LINE_HALF_LENGTH: float = 1.4  # map units, half the length of the beam line through the target
MIN_DAMAGE: float = 0.5                 # StarCraft II: armour never reduces a hit below 0.5
MEDIVAC_HEAL_PER_S: float = 12.6        # health per second to one biological ally in range
MEDIVAC_HP_PER_ENERGY: float = 3.0      # health restored per energy point
MEDIVAC_ENERGY_MAX: float = 200.0
MEDIVAC_ENERGY_START: float = 50.0
MEDIVAC_ENERGY_REGEN_PER_S: float = 0.7875
SHIELD_REGEN_PER_S: float = 2.8
SHIELD_REGEN_DELAY_S: float = 7.1

#: SMAC's maximum cooldowns in game loops, used only to normalise the cooldown feature of ``state()``
COOLDOWN_NORM_S = np.maximum(COOLDOWN_S, TICK_S)


def hit_damage(attacker: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Damage of one hit of unit type ``attacker`` on unit type ``target`` (same shapes, int type ids).

    ``damage + bonus vs light/armoured - armour``, at least :data:`MIN_DAMAGE` (float32, health points).
    """
    dmg = (DAMAGE[attacker] + BONUS_VS_LIGHT[attacker] * IS_LIGHT[target]
           + BONUS_VS_ARMORED[attacker] * IS_ARMORED[target] - ARMOR[target])
    return np.maximum(dmg, MIN_DAMAGE).astype(np.float32)
