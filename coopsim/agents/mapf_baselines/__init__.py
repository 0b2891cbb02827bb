"""Baseline agents of the MG-MAPF scenario (issue 2) and their planner.

* ``mapf/random-v0`` (:class:`RandomMAPFAgent`): seeded random actions.
* ``mapf/greedy-v0`` (:class:`GreedyAgent`): shortest path to the nearest remaining goal, ignoring others.
* ``mapf/prioritized-v0`` (:class:`PrioritizedAgent`): centralized prioritized planning with space-time A*
  (:mod:`.planner`), conflict-free, replayed step by step.
"""
from coopsim.agents.mapf_baselines.greedy import GreedyAgent
from coopsim.agents.mapf_baselines.planner import PlanResult, plan_prioritized, space_time_astar
from coopsim.agents.mapf_baselines.prioritized import PrioritizedAgent
from coopsim.agents.mapf_baselines.random_agent import RandomMAPFAgent

__all__ = ["GreedyAgent", "PlanResult", "PrioritizedAgent", "RandomMAPFAgent", "plan_prioritized", "space_time_astar"]
