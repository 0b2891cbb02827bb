"""QMIX (``qmix/qmix-v0``): monotonic value factorisation with recurrent agents, hypernetwork mixer,
target networks, epsilon schedule and episode replay; usable on any coopsim scenario with discrete
actions and a global state."""
from coopsim.agents.qmix.agent import QMIXAgent
from coopsim.agents.qmix.config import QMIXAgentParams, QMIXTrainConfig

__all__ = ["QMIXAgent", "QMIXAgentParams", "QMIXTrainConfig"]
