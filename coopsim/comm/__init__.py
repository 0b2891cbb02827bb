"""coopsim's communication layer: channels, token buckets, rate probes and comm accounting.

Public names: :class:`~coopsim.comm.ideal.IdealChannel` (``ideal-v0``),
:class:`~coopsim.comm.bandwidth.BandwidthChannel` (``bandwidth-v0``),
:class:`~coopsim.comm.token_bucket.TokenBucket`, :class:`~coopsim.comm.token_bucket.TwoRateThreeColorMarker`,
:class:`~coopsim.comm.probe.SafeRateProbe`, the capacity traces of :mod:`coopsim.comm.traces`.
"""
from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.ideal import IdealChannel
from coopsim.comm.probe import SafeRateProbe
from coopsim.comm.token_bucket import TokenBucket, TwoRateThreeColorMarker

__all__ = ["BandwidthChannel", "IdealChannel", "SafeRateProbe", "TokenBucket", "TwoRateThreeColorMarker"]
