"""Random connected grid maps for training (MovingAI-style ``random-H-W-P`` maps, generated).

The generator places exactly ``round(density * H * W)`` obstacles uniformly at random, then keeps the free
space 4-connected: free cells outside the largest 4-connected component are filled, and as many obstacles
adjacent to that component are cleared again (chosen at random; repeated until no cell is left to clear),
so the obstacle count stays exact and every free cell is reachable from every other one. This follows the construction of the MovingAI ``random-*``
maps (Stern et al., SoCS 2019, Sec. 5) with connectivity enforced, as POGEMA's generator also does.
"""
from __future__ import annotations

import numpy as np

from coopsim.errors import ConfigError
from coopsim.scenarios.mapf.grid import components
from coopsim.scenarios.mapf.loaders import MapData

MIN_DENSITY, MAX_DENSITY = 0.1, 0.3
MIN_SIZE, MAX_SIZE = 4, 512


def random_map(rng: np.random.Generator | int, size: int | tuple[int, int], density: float) -> MapData:
    """A random map whose free cells form one 4-connected component.

    Args:
        rng: generator (or seed for ``np.random.default_rng``); the map is a deterministic function of it.
        size: ``S`` (square) or ``(height, width)`` in cells, each in [4, 512].
        density: obstacle fraction in [0.1, 0.3]; the map has exactly ``round(density * H * W)`` obstacles.

    Returns:
        :class:`MapData` named ``"generated-H-W-<percent>"``, ``path`` None.

    Raises:
        ConfigError: size or density out of range.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    h, w = _check(size, density)
    n = h * w
    target = int(round(float(density) * n))
    blocked = np.zeros(n, dtype=bool)
    blocked[rng.choice(n, size=target, replace=False)] = True
    blocked = _connect(blocked.reshape(h, w), target, rng)
    blocked.setflags(write=False)
    return MapData(name=f"generated-{h}-{w}-{int(round(100 * float(density)))}", blocked=blocked, path=None)


def random_bars_map(rng: np.random.Generator | int, size: int | tuple[int, int], density: float,
                    max_len: int = 8) -> MapData:
    """A random map of straight obstacle bars whose free cells form one 4-connected component.

    Scattered single-cell obstacles (:func:`random_map`) leave no long straight corridors; bars do, so a
    policy trained on both meets corridors and open clutter. Bars are one cell thick, horizontal or
    vertical with probability 1/2, of length uniform in ``[2, max_len]`` cells, placed uniformly at random
    (overlaps allowed) until exactly ``round(density * H * W)`` cells are blocked (the last bar is cut
    short); connectivity is then restored as in :func:`random_map`, keeping the obstacle count exact.

    Args:
        rng: generator (or seed); the map is a deterministic function of it.
        size: ``S`` or ``(height, width)`` in cells, each in [4, 512].
        density: obstacle fraction in [0.1, 0.3].
        max_len: longest bar in cells, >= 2.

    Returns:
        :class:`MapData` named ``"generated-bars-H-W-<percent>"``, ``path`` None.

    Raises:
        ConfigError: size, density or max_len out of range.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    h, w = _check(size, density)
    if int(max_len) < 2:
        raise ConfigError(f"random bar length must be >= 2 cells; got max_len={max_len}", key="max_len", value=max_len)
    target = int(round(float(density) * h * w))
    blocked = np.zeros((h, w), dtype=bool)
    count = 0
    while count < target:
        length = int(rng.integers(2, int(max_len) + 1))
        horizontal = rng.random() < 0.5
        y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
        cells = blocked[y, x:x + length] if horizontal else blocked[y:y + length, x]   # views into blocked
        free = np.flatnonzero(~cells)[:target - count]
        cells[free] = True
        count += len(free)
    blocked = _connect(blocked, target, rng)
    blocked.setflags(write=False)
    return MapData(name=f"generated-bars-{h}-{w}-{int(round(100 * float(density)))}", blocked=blocked, path=None)


def _check(size: int | tuple[int, int], density: float) -> tuple[int, int]:
    h, w = (int(size), int(size)) if np.isscalar(size) else (int(size[0]), int(size[1]))
    if not (MIN_SIZE <= h <= MAX_SIZE and MIN_SIZE <= w <= MAX_SIZE):
        raise ConfigError(f"random map size must be in [{MIN_SIZE}, {MAX_SIZE}] cells per side; got height={h}, width={w}",
                          key="random_size", value=size)
    if not (MIN_DENSITY - 1e-9 <= float(density) <= MAX_DENSITY + 1e-9):
        raise ConfigError(f"random map obstacle density must be in [{MIN_DENSITY}, {MAX_DENSITY}]; got {density}",
                          key="random_density", value=density)
    return h, w


def _connect(blocked: np.ndarray, target: int, rng: np.random.Generator) -> np.ndarray:
    """Fill free cells outside the largest 4-connected component and clear as many obstacles adjacent to it
    (at random), until the free space is one component with exactly ``target`` obstacles; returns the map."""
    while True:  # each round enlarges the main component, so this ends (at most H*W rounds)
        labels = components(blocked)
        counts = np.bincount(labels[labels >= 0])
        main = int(np.argmax(counts))
        pockets = (labels >= 0) & (labels != main)
        extra = int(pockets.sum()) + int(blocked.sum()) - target
        if extra <= 0 and not pockets.any():
            break
        blocked |= pockets
        free = ~blocked
        touch = np.zeros_like(free)
        touch[1:, :] |= free[:-1, :]
        touch[:-1, :] |= free[1:, :]
        touch[:, 1:] |= free[:, :-1]
        touch[:, :-1] |= free[:, 1:]
        cand = np.flatnonzero((blocked & touch).ravel())
        # clearing a cell adjacent to the only free component joins it, so connectivity holds for any subset
        clear = rng.choice(cand, size=min(extra, len(cand)), replace=False)
        blocked.ravel()[clear] = False
    return blocked
