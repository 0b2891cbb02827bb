"""Graph-safe RL (``graph_safe-v0``): zero-violation exploration in cooperative Markov games with coupled hard constraints."""
from coopsim.agents.graph_safe.agent import GraphSafeAgent, GraphSafeParams

__all__ = ["GraphSafeAgent", "GraphSafeParams"]
