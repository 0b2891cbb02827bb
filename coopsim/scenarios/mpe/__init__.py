"""MPE tasks on a vectorized core of coopsim's own (see :mod:`coopsim.scenarios.mpe.core`).

Registered ids: ``mpe/simple_spread-v0`` (N=3), ``mpe/simple_spread_n6-v0`` (N=6),
``mpe/simple_reference-v0``, ``mpe/simple_speaker_listener-v0``.
"""
from coopsim.platform.registry import Variant
from coopsim.scenarios.mpe.core import MPECore
from coopsim.scenarios.mpe.tasks import SimpleReferenceCore, SimpleSpeakerListenerCore, SimpleSpreadCore

SimpleSpreadN6 = Variant(SimpleSpreadCore, {"num_agents": 6}, fixed=("num_agents",))

__all__ = ["MPECore", "SimpleReferenceCore", "SimpleSpeakerListenerCore", "SimpleSpreadCore", "SimpleSpreadN6"]
