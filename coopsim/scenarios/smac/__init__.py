"""SMAC-like unit micromanagement (``smac/<map>-v0``): see :class:`SMACCore`.

Every SMAC map and the SMACv2-style procedural maps are registered as :class:`~coopsim.platform.registry.Variant`
objects named ``map_<name>`` in this module (entry points in ``pyproject.toml``).
"""
from __future__ import annotations

from coopsim.platform.registry import Variant
from coopsim.scenarios.smac.core import SMACCore, SMACParams
from coopsim.scenarios.smac.maps import MAPS, PROCEDURAL_IDS, get_map

__all__ = ["SMACCore", "SMACParams", "MAPS", "get_map", "VARIANTS"]

#: attribute name -> Variant, one per registered map
VARIANTS: dict[str, Variant] = {}
for _name in list(MAPS) + list(PROCEDURAL_IDS):
    VARIANTS[f"map_{_name}"] = Variant(SMACCore, {"map_name": _name}, fixed=("map_name",))
globals().update(VARIANTS)
