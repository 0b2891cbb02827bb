"""Decentralized MG-MAPF heuristics: PIBT-style local priorities (``mapf/pibt-v0``) and greedy with waits
(``mapf/greedy-waits-v0``). See :mod:`.pibt`."""
from .pibt import GreedyWaitsAgent, PIBTAgent, PIBTPriorities, pibt_actions, pibt_step, preference_order

__all__ = ["GreedyWaitsAgent", "PIBTAgent", "PIBTPriorities", "pibt_actions", "pibt_step", "preference_order"]
