"""The SMAC map table (units per side, episode limits, walls) and the SMACv2-style procedural maps.

Start positions (a documented choice, SMAX's): allies around ``(W/4, H/2)`` and enemies around
``(3W/4, H/2)``, each unit jittered uniformly by ±2 map units per axis, then pushed apart.
Immobile units (spine crawler) stand exactly at ``(3W/4, H/2)``. ``corridor`` adds two wall blocks
that leave a 4-unit-wide corridor across the middle of the map (SMAC's map has a diagonal
choke; the walls keep its point: allies can fight the zergling swarm at a choke).
Procedural maps ``<race>_<n>_vs_<m>`` follow SMACv2: unit types drawn per unit (45 % / 45 % / 10 %:
protoss stalker/zealot/colossus, terran marine/marauder/medivac, zerg zergling/hydralisk/baneling),
the enemy team drawn the same way; "surrounded" or "reflect" starts (see ``SMACCore``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from coopsim.scenarios.smac.units import MAP_HEIGHT, TYPE_ID


@dataclass(frozen=True)
class MapSpec:
    """One map: unit types of each side (type ids in slot order), episode limit (agent steps), walls."""

    name: str
    allies: tuple[int, ...]
    enemies: tuple[int, ...]
    limit: int
    #: axis-aligned wall rectangles ``(x0, y0, x1, y1)`` in map units
    walls: tuple[tuple[float, float, float, float], ...] = ()
    procedural_race: str | None = None
    start: str = "line"
    type_probs: tuple[tuple[int, float], ...] = field(default=())


def _units(*groups: tuple[str, int]) -> tuple[int, ...]:
    out: list[int] = []
    for name, n in groups:
        out += [TYPE_ID[name]] * n
    return tuple(out)


_MMM = (("medivac", 1), ("marauder", 2), ("marine", 7))
_TABLE: list[tuple[str, tuple, tuple, int]] = [
    ("3m", (("marine", 3),), (("marine", 3),), 60),
    ("8m", (("marine", 8),), (("marine", 8),), 120),
    ("25m", (("marine", 25),), (("marine", 25),), 150),
    ("2s3z", (("stalker", 2), ("zealot", 3)), (("stalker", 2), ("zealot", 3)), 120),
    ("3s5z", (("stalker", 3), ("zealot", 5)), (("stalker", 3), ("zealot", 5)), 150),
    ("1c3s5z", (("colossus", 1), ("stalker", 3), ("zealot", 5)), (("colossus", 1), ("stalker", 3), ("zealot", 5)), 180),
    ("MMM", _MMM, _MMM, 150),
    ("5m_vs_6m", (("marine", 5),), (("marine", 6),), 70),
    ("8m_vs_9m", (("marine", 8),), (("marine", 9),), 120),
    ("10m_vs_11m", (("marine", 10),), (("marine", 11),), 150),
    ("27m_vs_30m", (("marine", 27),), (("marine", 30),), 180),
    ("MMM2", _MMM, (("medivac", 1), ("marauder", 3), ("marine", 8)), 180),
    ("3s5z_vs_3s6z", (("stalker", 3), ("zealot", 5)), (("stalker", 3), ("zealot", 6)), 170),
    ("2s_vs_1sc", (("stalker", 2),), (("spine_crawler", 1),), 300),
    ("3s_vs_5z", (("stalker", 3),), (("zealot", 5),), 250),
    ("6h_vs_8z", (("hydralisk", 6),), (("zealot", 8),), 150),
    ("corridor", (("zealot", 6),), (("zergling", 24),), 400),
    ("bane_vs_bane", (("zergling", 20), ("baneling", 4)), (("zergling", 20), ("baneling", 4)), 200),
    ("so_many_baneling", (("zealot", 7),), (("baneling", 32),), 100),
    ("2c_vs_64zg", (("colossus", 2),), (("zergling", 64),), 400),
]

_CORRIDOR_WALLS = ((12.0, 0.0, 20.0, MAP_HEIGHT / 2 - 2.0), (12.0, MAP_HEIGHT / 2 + 2.0, 20.0, MAP_HEIGHT))

MAPS: dict[str, MapSpec] = {
    name: MapSpec(name, _units(*a), _units(*e), limit, _CORRIDOR_WALLS if name == "corridor" else ())
    for name, a, e, limit in _TABLE
}

#: SMACv2 unit-type distributions per race: (type id, probability)
RACE_TYPES: dict[str, tuple[tuple[int, float], ...]] = {
    "protoss": ((TYPE_ID["stalker"], 0.45), (TYPE_ID["zealot"], 0.45), (TYPE_ID["colossus"], 0.10)),
    "terran": ((TYPE_ID["marine"], 0.45), (TYPE_ID["marauder"], 0.45), (TYPE_ID["medivac"], 0.10)),
    "zerg": ((TYPE_ID["zergling"], 0.45), (TYPE_ID["hydralisk"], 0.45), (TYPE_ID["baneling"], 0.10)),
}
PROCEDURAL_RE = re.compile(r"^(protoss|terran|zerg)_(\d+)_vs_(\d+)$")
PROCEDURAL_LIMIT = 200
#: procedural maps registered as ids (any ``<race>_<n>_vs_<m>`` with 1 <= n, m <= 32 is accepted)
PROCEDURAL_IDS = tuple(f"{r}_{n}_vs_{n}" for r in ("protoss", "terran", "zerg") for n in (5, 10))


def get_map(name: str) -> MapSpec:
    """The :class:`MapSpec` of ``name`` (a SMAC map or ``<race>_<n>_vs_<m>``).

    Raises:
        ValueError: unknown name (lists the valid ones).
    """
    if name in MAPS:
        return MAPS[name]
    m = PROCEDURAL_RE.match(name)
    if m:
        race, n, k = m.group(1), int(m.group(2)), int(m.group(3))
        if not (1 <= n <= 32 and 1 <= k <= 32):
            raise ValueError(f"procedural map {name!r}: unit counts must be in 1..32")
        types = RACE_TYPES[race]
        # slots hold the first listed type; the actual types are drawn per episode
        return MapSpec(name, (types[0][0],) * n, (types[0][0],) * k, PROCEDURAL_LIMIT, (),
                       procedural_race=race, start="surrounded_and_reflect", type_probs=types)
    raise ValueError(f"unknown SMAC map {name!r}; valid: {', '.join(MAPS)} or '<protoss|terran|zerg>_<n>_vs_<m>'")


def map_types(spec: MapSpec) -> tuple[int, ...]:
    """Sorted unit type ids that can appear on ``spec`` (defines the one-hot ``unit_type_bits``)."""
    if spec.procedural_race is not None:
        return tuple(sorted(t for t, _ in spec.type_probs))
    return tuple(sorted(set(spec.allies) | set(spec.enemies)))
