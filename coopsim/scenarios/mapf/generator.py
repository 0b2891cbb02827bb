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
    h, w = (int(size), int(size)) if np.isscalar(size) else (int(size[0]), int(size[1]))
    if not (MIN_SIZE <= h <= MAX_SIZE and MIN_SIZE <= w <= MAX_SIZE):
        raise ConfigError(f"random map size must be in [{MIN_SIZE}, {MAX_SIZE}] cells per side; got height={h}, width={w}",
                          key="random_size", value=size)
    if not (MIN_DENSITY - 1e-9 <= float(density) <= MAX_DENSITY + 1e-9):
        raise ConfigError(f"random map obstacle density must be in [{MIN_DENSITY}, {MAX_DENSITY}]; got {density}",
                          key="random_density", value=density)
    n = h * w
    target = int(round(float(density) * n))
    blocked = np.zeros(n, dtype=bool)
    blocked[rng.choice(n, size=target, replace=False)] = True
    blocked = blocked.reshape(h, w)
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
    blocked.setflags(write=False)
    return MapData(name=f"generated-{h}-{w}-{int(round(100 * float(density)))}", blocked=blocked, path=None)
