"""MG-MAPF: multi-goal multi-agent path finding on MovingAI benchmark maps (``mapf/MGMAPF-v0``).

Modules: :mod:`.core` (the batched simulator, :class:`MGMAPFCore`), :mod:`.loaders` (MovingAI ``.map`` /
``.scen`` files, octile distances), :mod:`.sampling` (seeded instances), :mod:`.generator` (random connected
maps), :mod:`.metrics` (tour lower bound), :mod:`.render` (numpy frames), :mod:`.grid` (BFS distance maps).
"""
from coopsim.scenarios.mapf.core import ACTION_DELTAS, ACTION_NAMES, MGMAPFCore, MGMAPFParams
from coopsim.scenarios.mapf.loaders import MapData, ScenData, load_map, load_scen, octile_distances, resolve_map

__all__ = ["ACTION_DELTAS", "ACTION_NAMES", "MGMAPFCore", "MGMAPFParams", "MapData", "ScenData", "load_map",
           "load_scen", "octile_distances", "resolve_map"]
