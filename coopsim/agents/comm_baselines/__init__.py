"""Communication baselines on a shared simple_spread team: no comm, full broadcast, periodic, novelty threshold.

Registered agent ids (all :class:`~coopsim.agents.comm_baselines.team.SpreadCommTeam` with the sender fixed):
``comm/no_comm-v0``, ``comm/broadcast-v0``, ``comm/periodic-v0``, ``comm/novelty-v0``.
"""
from coopsim.agents.comm_baselines.senders import (BroadcastSender, NoCommSender, NoveltySender, PeriodicSender,
                                                   Sender)
from coopsim.agents.comm_baselines.team import SpreadCommTeam
from coopsim.platform.registry import Variant

NoCommTeam = Variant(SpreadCommTeam, {"sender": "none"}, fixed=("sender",))
BroadcastTeam = Variant(SpreadCommTeam, {"sender": "broadcast"}, fixed=("sender",))
PeriodicTeam = Variant(SpreadCommTeam, {"sender": "periodic", "sender_params": {"period_steps": 4}}, fixed=("sender",))
NoveltyTeam = Variant(SpreadCommTeam, {"sender": "novelty"}, fixed=("sender",))

__all__ = ["BroadcastSender", "NoCommSender", "NoveltySender", "PeriodicSender", "Sender", "SpreadCommTeam",
           "NoCommTeam", "BroadcastTeam", "PeriodicTeam", "NoveltyTeam"]
