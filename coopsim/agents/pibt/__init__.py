"""Decentralized MG-MAPF heuristics: PIBT-style local priorities (``mapf/pibt-v0``) and greedy with waits
(``mapf/greedy-waits-v0``). See :mod:`.pibt`."""
from .pibt import GreedyWaitsAgent, PIBTAgent, pibt_step

__all__ = ["GreedyWaitsAgent", "PIBTAgent", "pibt_step"]
