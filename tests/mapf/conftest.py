"""Helpers for the MG-MAPF scenario tests: tiny hand-made instances from ASCII pictures."""
from __future__ import annotations


import numpy as np

from coopsim.scenarios.mapf.instance import MAPFInstance
import pytest

from coopsim.scenarios.mapf.core import MGMAPFCore

WAIT, UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3, 4


def grid(picture: str) -> np.ndarray:
    """bool [H, W] from rows of '.' (free) and '@' (obstacle); blank lines and indentation ignored."""
    rows = [r.strip() for r in picture.strip().splitlines() if r.strip()]
    return np.array([[c == "@" for c in r] for r in rows], dtype=bool)


def make_instance(blocked, starts, goals, goal_order="free"):
    """A MAPFInstance as ``MGMAPFCore.from_instance`` takes it (blocked, starts [N,2], goals [N,K,2] or [N,2])."""
    starts = np.asarray(starts, dtype=np.int32).reshape(-1, 2)
    goals = np.asarray(goals, dtype=np.int32)
    if goals.ndim == 2:
        goals = goals[:, None, :]
    return MAPFInstance(blocked=np.asarray(blocked, bool), starts=starts, goals=goals, goal_order=goal_order)


def make_core(picture: str, starts, goals, goal_order="free", num_envs=1, **params) -> MGMAPFCore:
    """A reset core playing one hand-made instance (x = column, y = row)."""
    core = MGMAPFCore.from_instance(make_instance(grid(picture), starts, goals, goal_order), num_envs=num_envs, **params)
    core.reset(seed=0)
    return core


def act(core: MGMAPFCore, *actions: int):
    """Step env 0 (of a 1-env core) with one action per agent."""
    return core.step(np.array([actions], dtype=np.int64))


class Tiny:
    """What the ``tiny`` fixture gives tests: builders for hand-made instances and a stepping helper."""

    WAIT, UP, DOWN, LEFT, RIGHT = WAIT, UP, DOWN, LEFT, RIGHT
    grid = staticmethod(grid)
    instance = staticmethod(make_instance)
    core = staticmethod(make_core)
    act = staticmethod(act)


@pytest.fixture
def tiny() -> Tiny:
    return Tiny()
