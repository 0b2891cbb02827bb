"""ns-3 network-in-the-loop channel (``ns3-v0``): see :mod:`coopsim.comm.ns3.channel` and docs/ns3.md.

Importing this package needs no ns-3; the channel's first ``reset`` builds (once) and starts the
ns-3 bridge, or raises :class:`coopsim.errors.DependencyNotInstalled` saying how to install ns-3.
"""
from __future__ import annotations

__all__ = ["Ns3Channel", "Ns3Params"]


def __getattr__(name: str):
    if name in __all__:
        from coopsim.comm.ns3 import channel

        return getattr(channel, name)
    raise AttributeError(f"module 'coopsim.comm.ns3' has no attribute {name!r}")
