"""What a scenario hands the safety layer: :class:`SafetyState`, batched over ``E`` envs.

The state is batched (arrays with a leading env axis ``E``); :meth:`SafetyState.env` gives the
single-env view the certificate works on. It carries no flat global state, only what constraints
need: positions, loads, and for each agent and action the *prior plausible outcomes* -- every next
state within the known radius of the intended next state (a superset of the true support). Learned
confidence sets (:class:`coopsim.safety.model.PlausibleModel`) shrink this prior; they never add to it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from coopsim.errors import CoopsimError
from coopsim.safety.constraints import Constraint


class SafetyStateError(CoopsimError, ValueError):
    """A :class:`SafetyState` has inconsistent shapes or values."""


@dataclass(frozen=True)
class SafetyState:
    """Safety-relevant state of a batch of ``E`` envs with ``N`` agents, ``A`` actions, ``K`` outcome slots.

    Attributes:
        positions: float64 ``[E, N, d]`` current positions (cells or m).
        loads: float64 ``[E, N]`` current loads (resource units).
        intended: float64 ``[E, N, A, d]`` intended next position per agent per action.
        outcomes: float64 ``[E, N, A, K, d]`` prior plausible next positions (within ``radius`` of intended).
        outcome_loads: float64 ``[E, N, A, K]`` load an agent would carry at each outcome.
        outcome_mask: bool ``[E, N, A, K]`` valid outcome slots (the prior plausible set).
        cells: int64 ``[E, N]`` discrete state id of each agent (-1 in continuous worlds).
        outcome_cells: int64 ``[E, N, A, K]`` discrete id of each outcome (-1 for padding).
        num_cells: number of discrete states (0 in continuous worlds).
        radius: the known plausible-outcome radius (same unit as positions).
        constraints: the constraints in force (shared by every env of the batch).
        stay_action: the action that never slips (all-stay is the fallback).
        t: int64 ``[E]`` step index within the episode (0 right after reset).
    """

    positions: np.ndarray
    loads: np.ndarray
    intended: np.ndarray
    outcomes: np.ndarray
    outcome_loads: np.ndarray
    outcome_mask: np.ndarray
    cells: np.ndarray
    outcome_cells: np.ndarray
    num_cells: int
    radius: float
    constraints: tuple[Constraint, ...]
    stay_action: int = 0
    t: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))

    @property
    def num_envs(self) -> int:
        return int(self.positions.shape[0])

    @property
    def num_agents(self) -> int:
        return int(self.positions.shape[1])

    @property
    def num_actions(self) -> int:
        return int(self.intended.shape[2])

    def validate(self) -> "SafetyState":
        """Check shapes and the stay rule; returns self.

        Raises:
            SafetyStateError: naming the field, its shape and the expected shape.
        """
        E, N, d = self.positions.shape
        A = self.intended.shape[2]
        K = self.outcomes.shape[3]
        expect = {
            "loads": (E, N), "intended": (E, N, A, d), "outcomes": (E, N, A, K, d),
            "outcome_loads": (E, N, A, K), "outcome_mask": (E, N, A, K), "cells": (E, N),
            "outcome_cells": (E, N, A, K), "t": (E,),
        }
        for name, shape in expect.items():
            got = np.shape(getattr(self, name))
            if got != shape:
                raise SafetyStateError(f"SafetyState.{name} has shape {got}; expected {shape} (E={E}, N={N}, A={A}, K={K}, d={d})")
        if not 0 <= self.stay_action < A:
            raise SafetyStateError(f"SafetyState.stay_action={self.stay_action} is not an action in [0, {A})")
        if not self.outcome_mask.any(-1).all():
            raise SafetyStateError("SafetyState.outcome_mask: every agent/action needs at least one plausible outcome")
        return self

    def env(self, e: int) -> "SafetyState":
        """The single-env view (leading axis of size 1) of env ``e``."""
        sl = slice(e, e + 1)
        return replace(self, positions=self.positions[sl], loads=self.loads[sl], intended=self.intended[sl],
                       outcomes=self.outcomes[sl], outcome_loads=self.outcome_loads[sl],
                       outcome_mask=self.outcome_mask[sl], cells=self.cells[sl],
                       outcome_cells=self.outcome_cells[sl], t=self.t[sl])
