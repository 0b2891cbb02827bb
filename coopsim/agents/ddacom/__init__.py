"""DDACOM: dual-decoupled adaptive communication (sending half; see :mod:`coopsim.agents.ddacom.sender`).

Registered agent id ``ddacom/spread-v0``: the simple_spread team of
:mod:`coopsim.agents.comm_baselines.team` with DDACOM's sender (deviation ranking + dynamic token bucket
following the probed safe rate). Evaluation: ``python -m coopsim.agents.ddacom.evaluate``.
"""
from coopsim.agents.comm_baselines.team import SpreadCommTeam
from coopsim.agents.ddacom.sender import DDACOMSender
from coopsim.platform.registry import Variant

DDACOMSpreadTeam = Variant(SpreadCommTeam, {"sender": "ddacom"}, fixed=("sender",))

__all__ = ["DDACOMSender", "DDACOMSpreadTeam"]
