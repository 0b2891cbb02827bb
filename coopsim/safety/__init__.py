"""The safety-certificate layer: constraints, coupling graph, safety state, confidence sets, certificates, shields.

See ``docs/safety.md``. Registered shields: ``passthrough-v0`` (certifies nothing), ``certificate-v0``
(learned confidence sets), ``oracle-v0`` (true dynamics).
"""
from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.constraints import Constraint, KeepConnected, PairConstraint, ResourceCap, Separation, count_violations
from coopsim.safety.graph import CouplingGraph
from coopsim.safety.model import PlausibleModel, PriorViolation, removal_threshold
from coopsim.safety.shields import CertificateShield, OracleShield
from coopsim.safety.state import SafetyState, SafetyStateError

__all__ = ["Constraint", "PairConstraint", "Separation", "ResourceCap", "KeepConnected", "count_violations",
           "CouplingGraph", "SafetyState", "SafetyStateError", "PlausibleModel", "PriorViolation", "removal_threshold",
           "SafetyCertificate", "CertificateShield", "OracleShield"]
