"""Shared vocabulary of the MG-MAPF family: coordinates, actions and the instance record.

Coordinates follow MovingAI: a cell is ``(x, y)`` with ``x`` the column and ``y`` the row; grids
are indexed ``grid[y, x]``. Actions (int): 0 wait, 1 up (y-1), 2 down (y+1), 3 left (x-1),
4 right (x+1). Planners and agents may import this module and :mod:`coopsim.scenarios.mapf.grid`
(public helpers); they read instances through the scenario's ``instance(env_index)`` capability.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

WAIT, UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3, 4
NUM_ACTIONS = 5
#: (dx, dy) per action, int32 [5, 2]
ACTION_DELTAS = np.array([[0, 0], [0, -1], [0, 1], [-1, 0], [1, 0]], dtype=np.int32)
ACTION_NAMES = ("wait", "up", "down", "left", "right")


@dataclass(frozen=True)
class MAPFInstance:
    """One MG-MAPF instance.

    Attributes:
        blocked: bool ``[H, W]``, True where a cell is an obstacle (indexed ``[y, x]``).
        starts: int32 ``[N, 2]`` start cells as (x, y).
        goals: int32 ``[N, K, 2]`` goal cells as (x, y); for ``fixed`` order, the visiting sequence.
        goal_order: ``"fixed"`` (visit in the given sequence) or ``"free"`` (each at least once, any order).
        map_name: e.g. ``"random-32-32-10"``.
    """

    blocked: np.ndarray
    starts: np.ndarray
    goals: np.ndarray
    goal_order: Literal["fixed", "free"] = "free"
    map_name: str = ""

    @property
    def height(self) -> int:
        return int(self.blocked.shape[0])

    @property
    def width(self) -> int:
        return int(self.blocked.shape[1])

    @property
    def num_agents(self) -> int:
        return int(self.starts.shape[0])

    @property
    def num_goals(self) -> int:
        return int(self.goals.shape[1])
