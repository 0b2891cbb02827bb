"""Grid helpers shared by the MG-MAPF scenario and its planners: 4-connected BFS distance maps.

All functions take ``blocked`` bool ``[H, W]`` (indexed ``[y, x]``) and cells as (x, y).
"""
from __future__ import annotations

import numpy as np

UNREACHABLE = -1


def grid_shape(blocked: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(blocked as bool [H, W], H, W)``.

    Raises:
        ValueError: ``blocked`` is not 2-D.
    """
    b = np.asarray(blocked, dtype=bool)
    if b.ndim != 2:
        raise ValueError(f"blocked must be bool [H, W] (indexed [y, x]); got shape {b.shape}")
    return b, int(b.shape[0]), int(b.shape[1])


def as_cells(cells, h: int, w: int, name: str = "cells") -> np.ndarray:
    """``cells`` as int64 ``[..., 2]`` (x, y), checked to be whole numbers inside an ``H x W`` grid.

    Any integer dtype is taken as is, floats only when every value is a whole number (``2.0``, not ``2.7``, which
    would be truncated to another cell); an empty input keeps its shape when its last axis is 2, else gives int64
    ``[0, 2]``. Used by every distance helper of the MG-MAPF scenario (:func:`distance_maps`,
    ``loaders.octile_distances`` / ``octile_pair_distances``, ``metrics.bfs_distances`` / ``bfs_pair_distances`` /
    ``tour_lower_bound``, ``sampling.sample_extra_goals``), so an off-grid cell is refused instead of wrapping to
    another row (``x = W`` would be cell ``(0, y + 1)`` of the flattened grid, ``x = -1`` the last cell of the row
    above).

    Raises:
        ValueError: the last axis is not 2 (x, y); a value that is not a whole number or a dtype that is not numeric;
            a cell outside the grid. The message names ``name``, the first bad entry's index and value, and the
            grid size, e.g. ``sources_xy[0] = (6, 0) lies outside the 6x4 grid (x in [0, 6), y in [0, 4))``.
    """
    arr = np.asarray(cells)
    if arr.size == 0:
        return arr.astype(np.int64) if arr.ndim >= 2 and arr.shape[-1] == 2 else np.zeros((0, 2), dtype=np.int64)
    if arr.ndim == 0 or arr.shape[-1] != 2:
        raise ValueError(f"{name} must be cells (x, y) along a last axis of length 2, e.g. int [M, 2]; got shape "
                         f"{arr.shape}")
    out = whole_cells(arr, name)
    flat = out.reshape(-1, 2)
    off = (flat[:, 0] < 0) | (flat[:, 0] >= w) | (flat[:, 1] < 0) | (flat[:, 1] >= h)
    if off.any():
        j = int(np.argmax(off))
        at = ", ".join(str(int(v)) for v in np.unravel_index(j, out.shape[:-1]))
        more = f" ({int(off.sum())} of {len(flat)} cells are outside)" if off.sum() > 1 else ""
        where = f"{name}[{at}]" if at else name
        raise ValueError(f"{where} = ({int(flat[j, 0])}, {int(flat[j, 1])}) lies outside the {w}x{h} grid "
                         f"(x in [0, {w}), y in [0, {h})){more}")
    return out


def whole_cells(cells, name: str = "cells") -> np.ndarray:
    """``cells`` (x, y) as int64 of the same shape: any integer dtype as is, floats only when every value is a whole
    number (``2.0``; ``2.7`` would be truncated to another cell). No bounds check (:func:`as_cells` adds one).

    Raises:
        ValueError: a value that is not a whole number (naming ``name``, the entry and the dtype), or a dtype that is
            not numeric (bools, strings, objects).
    """
    arr = np.asarray(cells)
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        # no grid is that large, and the int64 cast would show a wrapped (negative) value in the bounds message
        i = np.unravel_index(int(np.argmax(arr.reshape(-1))), arr.shape)
        raise ValueError(f"{name}[{', '.join(str(int(v)) for v in i)}] = {int(arr[i])} lies outside any grid (dtype {arr.dtype}; cells are "
                         f"0 <= x < width, 0 <= y < height)")
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad.reshape(-1))), arr.shape)
            if arr.shape[-1] == 2:  # name the whole cell (x, y)
                cell, shown = i[:-1], f"({', '.join(repr(float(v)) for v in arr[i[:-1]])})"
            else:
                cell, shown = i, repr(float(arr[i]))
            at = ", ".join(str(int(v)) for v in cell)
            raise ValueError(f"{name} must be whole-number cells (x, y); {name}{f'[{at}]' if at else ''} = {shown} is "
                             f"not (dtype {arr.dtype}; a fraction would be cut to another cell)")
        return arr.astype(np.int64)
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind == "O" and all(isinstance(v, int) and not isinstance(v, bool) for v in arr.reshape(-1)):
        # Python ints too large for int64 (numpy keeps them as objects): name the value, not the dtype
        i = np.unravel_index(int(np.argmax([abs(v) for v in arr.reshape(-1)])), arr.shape)
        raise ValueError(f"{name}[{', '.join(str(int(v)) for v in i)}] = {arr[i]} lies outside any grid (too large for int64; cells are "
                         f"0 <= x < width, 0 <= y < height)")
    raise ValueError(f"{name} must be integer cells (x, y); got dtype {arr.dtype}")


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
        ValueError: ``blocked`` not 2-D, or a source that is not a whole-number cell inside the grid (:func:`as_cells`).
    """
    blocked, h, w = grid_shape(blocked)
    src = as_cells(sources_xy, h, w, "sources_xy").reshape(-1, 2)
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


def unreachable_goals(labels: np.ndarray, starts_xy: np.ndarray, goals_xy: np.ndarray) -> np.ndarray:
    """bool ``[N, K]``: goals in another 4-connected region of free cells than their agent's start (walls separate
    them, so no path reaches the goal and the agent can never finish).

    Args:
        labels: int ``[H, W]`` regions as :func:`components` gives them (-1 on obstacles).
        starts_xy: int ``[N, 2]`` (x, y) free cells inside the grid; goals_xy: int ``[N, K, 2]`` (x, y).
    """
    starts = np.asarray(starts_xy, dtype=np.int64).reshape(-1, 2)
    goals = np.asarray(goals_xy, dtype=np.int64).reshape(len(starts), -1, 2)
    return labels[goals[..., 1], goals[..., 0]] != labels[starts[:, 1], starts[:, 0]][:, None]
