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


def distance_rows(blocked: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """4-connected move distances from each flat cell ``y*W + x`` in ``cells`` to every cell.

    Breadth-first search in C (:func:`coopsim.scenarios.mapf.metrics.bfs_distances`, scipy), the same distances as
    :func:`coopsim.scenarios.mapf.grid.distance_maps` at a fraction of the cost on large maps.

    Args:
        blocked: bool ``[H, W]``.
        cells: int ``[M]`` flat source cells (free).

    Returns:
        int32 ``[M, H*W]``, -1 where unreachable or blocked.
    """
    from coopsim.scenarios.mapf.metrics import bfs_distances

    blocked = np.asarray(blocked, dtype=bool)
    h, w = blocked.shape
    cells = np.asarray(cells, dtype=np.int64).reshape(-1)
    if len(cells) == 0:
        return np.zeros((0, h * w), dtype=np.int32)
    d = bfs_distances(blocked, np.stack([cells % w, cells // w], 1)).reshape(len(cells), h * w)
    return np.where(np.isfinite(d), d, -1).astype(np.int32)
