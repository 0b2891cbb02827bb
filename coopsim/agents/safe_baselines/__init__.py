"""Baselines for safe cooperative MARL: independent Q-learning (no shield), tabular Lagrangian Q-learning;
the oracle baseline is the ``oracle-v0`` shield (true dynamics)."""
from coopsim.agents.safe_baselines.tabular import IndependentQAgent, LagrangianQAgent

__all__ = ["IndependentQAgent", "LagrangianQAgent"]
