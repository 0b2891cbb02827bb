"""Helpers shared by the MG-MAPF baseline agents: capability checks and a counter-based random hash."""
from __future__ import annotations

from typing import Any

import numpy as np

from coopsim.errors import ConfigError

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def require_capabilities(scenario: Any, names: tuple[str, ...], agent_id: str) -> None:
    """Raise :class:`ConfigError` unless ``scenario`` has every capability in ``names`` (an MG-MAPF core)."""
    missing = [c for c in names if not callable(getattr(scenario, c, None))]
    if missing:
        raise ConfigError(f"agent '{agent_id}' needs an MG-MAPF scenario (e.g. 'mapf/MGMAPF-v0') with the capabilities "
                          f"{', '.join(n + '()' for n in names)}; {type(scenario).__name__} lacks {', '.join(missing)}",
                          key="scenario.id", value=type(scenario).__name__)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014),
    element-wise on uint64 arrays: a counter-based generator, so draws depend only on their counters."""
    with np.errstate(over="ignore"):
        z = (np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)) & _M64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _M64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _M64
        return z ^ (z >> np.uint64(31))
