"""IMMP: intent-aware multi-goal multi-agent path finding (high level, intent module, PPO low level).

Modules: :mod:`.highlevel` (spatially-balanced goal ordering, shared space-time density map,
congestion-weighted fields and waypoints), :mod:`.intent` (neighbour-move labels from local observations,
the intent net and its auxiliary loss), :mod:`.net` (the actor-critic), :mod:`.rewards` (team reward and
goal shaping hook), :mod:`.agent` (the plugin and its registered variants). See docs/immp.md.
"""
from .agent import DPPO, IMMP, IMMP_NOCONG, IMMP_NOINTENT, IMMPAgent, IMMPParams
from .highlevel import HighLevelParams, ScenarioPlanner, TeamPlanner

__all__ = ["DPPO", "IMMP", "IMMP_NOCONG", "IMMP_NOINTENT", "IMMPAgent", "IMMPParams", "HighLevelParams",
           "ScenarioPlanner", "TeamPlanner"]
