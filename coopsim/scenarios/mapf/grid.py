"""Grid helpers shared by the MG-MAPF scenario and its planners: 4-connected BFS distance maps.

All functions take ``blocked`` bool ``[H, W]`` (indexed ``[y, x]``) and cells as (x, y).
"""
from __future__ import annotations

import numpy as np

UNREACHABLE = -1


def distance_maps(blocked: np.ndarray, sources_xy: np.ndarray) -> np.ndarray:
    """4-connected shortest-path distances (moves) from each source to every cell.

    Breadth-first search run for all sources at once: each sweep relaxes every cell from its four
    neighbours, vectorized over ``[M, H, W]``; the number of sweeps is the largest finite distance.

    Args:
        blocked: bool ``[H, W]``, True for obstacles.
        sources_xy: int ``[M, 2]`` source cells (x, y); a source on an obstacle gets all-unreachable.

    Returns:
        int32 ``[M, H, W]`` distances in moves, ``UNREACHABLE`` (-1) where no path exists.

    Raises:
        ValueError: if a source lies outside the grid.
    """
    blocked = np.asarray(blocked, dtype=bool)
    src = np.asarray(sources_xy, dtype=np.int64).reshape(-1, 2)
    h, w = blocked.shape
    if len(src) and ((src[:, 0] < 0).any() or (src[:, 0] >= w).any() or (src[:, 1] < 0).any() or (src[:, 1] >= h).any()):
        raise ValueError(f"source cells must lie inside the {w}x{h} grid (x in [0, {w}), y in [0, {h})); got {src.tolist()}")
    m = len(src)
    big = np.iinfo(np.int32).max // 2
    dist = np.full((m, h + 2, w + 2), big, dtype=np.int32)  # padded border stays blocked
    free = np.zeros((h + 2, w + 2), dtype=bool)
    free[1:-1, 1:-1] = ~blocked
    ok = free[src[:, 1] + 1, src[:, 0] + 1]
    dist[np.arange(m)[ok], src[ok, 1] + 1, src[ok, 0] + 1] = 0
    frontier = np.zeros_like(dist, dtype=bool)
    frontier[np.arange(m)[ok], src[ok, 1] + 1, src[ok, 0] + 1] = True
    d = 0
    while frontier.any():
        d += 1
        nxt = np.zeros_like(frontier)
        nxt[:, 1:, :] |= frontier[:, :-1, :]
        nxt[:, :-1, :] |= frontier[:, 1:, :]
        nxt[:, :, 1:] |= frontier[:, :, :-1]
        nxt[:, :, :-1] |= frontier[:, :, 1:]
        nxt &= free[None] & (dist == big)
        dist[nxt] = d
        frontier = nxt
    out = dist[:, 1:-1, 1:-1]
    out[out == big] = UNREACHABLE
    return np.ascontiguousarray(out)


def distance_map(blocked: np.ndarray, source_xy) -> np.ndarray:
    """int32 ``[H, W]`` 4-connected distances from one source cell (x, y); -1 where unreachable."""
    return distance_maps(blocked, np.asarray(source_xy).reshape(1, 2))[0]


def components(blocked: np.ndarray) -> np.ndarray:
    """int32 ``[H, W]`` label of each free cell's 4-connected component (0, 1, ...), -1 on obstacles."""
    from scipy import ndimage

    labels, _ = ndimage.label(~np.asarray(blocked, bool), structure=[[0, 1, 0], [1, 1, 1], [0, 1, 0]])
    return labels.astype(np.int32) - 1
