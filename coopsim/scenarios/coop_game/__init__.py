"""``coop_game``: cooperative Markov games with unknown slip dynamics and coupled hard constraints.

Registered ids (``pyproject.toml``): ``coop_game/Grid-v0`` (any grid), ``coop_game/Graph-v0`` (planar
graph worlds), and fixed-size variants used by the shipped configs: ``coop_game/Grid4x4-v0``,
``coop_game/Grid5x5-v0``, ``coop_game/Grid16x16-v0`` (16 agents, groups of 4), ``coop_game/Grid32x32-v0``
(64 agents, groups of 4). ``solver`` holds the exact dynamic-programming solver for small instances.
"""
from coopsim.platform.registry import Variant
from coopsim.scenarios.coop_game.core import CoopGameCore, CoopGameParams

GraphVariant = Variant(CoopGameCore, {"world": "graph"}, fixed=("world",))
Grid4x4 = Variant(CoopGameCore, {"world": "grid", "height": 4, "width": 4, "max_steps": 8}, fixed=("world", "height", "width"))
Grid5x5 = Variant(CoopGameCore, {"world": "grid", "height": 5, "width": 5, "max_steps": 10}, fixed=("world", "height", "width"))
Grid16x16 = Variant(CoopGameCore, {"world": "grid", "height": 16, "width": 16, "num_agents": 16, "group_size": 4,
                                   "max_steps": 32}, fixed=("world", "height", "width"))
Grid32x32 = Variant(CoopGameCore, {"world": "grid", "height": 32, "width": 32, "num_agents": 64, "group_size": 4,
                                   "max_steps": 48}, fixed=("world", "height", "width"))

__all__ = ["CoopGameCore", "CoopGameParams", "GraphVariant", "Grid4x4", "Grid5x5", "Grid16x16", "Grid32x32"]
