"""Confidence sets on the dynamics: which outcomes of an action are still plausible.

Prior knowledge (see ``docs/safety.md``): each agent's next state lies in a known ball around its
intended next state (the prior plausible set, a superset of the true support); every outcome in the
true support has probability at least ``p_min``; the stay action never slips. Counting rule: an
outcome leaves the plausible set of (state, action) once that action has been tried
``n_remove = ceil(ln(|S| / delta') / p_min)`` times in that state without producing it. An outcome of
true probability ``p >= p_min`` goes unseen for ``n`` tries with probability ``(1-p)^n <= exp(-p_min n)``
``<= delta'/|S|``; a union bound over the ``|S|`` = (cells x actions x outcome slots) hypotheses makes
every removal correct with probability at least ``1 - delta'``. ``delta' = delta / num_runs`` where
``num_runs`` is the number of seed x config runs a report covers.

Dynamics are assumed the same for every agent (a property of the world's cells), so the counts are
shared by the team.
"""
from __future__ import annotations

import math

import numpy as np

from coopsim.errors import CoopsimError
from coopsim.safety.state import SafetyState


class PriorViolation(CoopsimError, RuntimeError):
    """An observed outcome lies outside the prior plausible set: the scenario's declared radius is wrong."""


def removal_threshold(union_size: int, delta: float, p_min: float, num_runs: int = 1) -> int:
    """``ceil(ln(union_size / delta') / p_min)`` tries, ``delta' = delta / num_runs``.

    Raises:
        ValueError: for delta or p_min outside (0, 1), or union_size / num_runs < 1.
    """
    if not 0 < delta < 1 or not 0 < p_min <= 1 or union_size < 1 or num_runs < 1:
        raise ValueError(f"need 0<delta<1, 0<p_min<=1, union_size>=1, num_runs>=1; got "
                         f"delta={delta}, p_min={p_min}, union_size={union_size}, num_runs={num_runs}")
    return int(math.ceil(math.log(union_size / (delta / num_runs)) / p_min))


class PlausibleModel:
    """Counts of tries and outcomes per (cell, action, outcome slot); the learned plausible sets.

    Args:
        num_cells: number of discrete states per agent (``|V|``).
        num_actions: ``A``.
        num_slots: ``K`` (outcome slots of the prior plausible set).
        delta, p_min, num_runs: see :func:`removal_threshold`.

    Attributes:
        tries: int64 ``[V, A]`` times each action was taken in each cell.
        seen: int64 ``[V, A, K]`` times each outcome slot was observed.
        n_remove: the removal threshold (tries).
    """

    def __init__(self, num_cells: int, num_actions: int, num_slots: int, *, delta: float = 0.01,
                 p_min: float = 0.05, num_runs: int = 1):
        self.shape = (int(num_cells), int(num_actions), int(num_slots))
        self.tries = np.zeros(self.shape[:2], np.int64)
        self.seen = np.zeros(self.shape, np.int64)
        self.n_remove = removal_threshold(int(np.prod(self.shape)), delta, p_min, num_runs)

    def plausible(self, state: SafetyState, n_remove: int | None = None) -> np.ndarray:
        """bool ``[E, N, A, K]``: prior plausible set minus the outcomes removed by the counting rule.

        ``n_remove``: the removal threshold (tries) to apply to these counts instead of the model's own
        (a shield certifying with a learner's counts under its own, stricter ``delta``/``p_min``/``num_runs``).
        """
        c = np.clip(state.cells, 0, None)
        tries = self.tries[c]  # [E, N, A]
        seen = self.seen[c] > 0  # [E, N, A, K]
        keep = seen | (tries < (self.n_remove if n_remove is None else int(n_remove)))[..., None]
        return state.outcome_mask & keep

    def update(self, state: SafetyState, actions: np.ndarray, next_cells: np.ndarray,
               valid: np.ndarray | None = None) -> None:
        """Record transitions ``state.cells --actions--> next_cells``.

        Args:
            state: the safety state the actions were taken in.
            actions: int64 ``[E, N]`` executed actions.
            next_cells: int64 ``[E, N]`` observed next cells.
            valid: bool ``[E, N]`` transitions to record (default all).

        Raises:
            PriorViolation: an observed next cell is outside the prior plausible set.
        """
        E, N = actions.shape
        valid = np.ones((E, N), bool) if valid is None else valid
        e_idx, i_idx = np.nonzero(valid)
        a = actions[e_idx, i_idx]
        cells = state.cells[e_idx, i_idx]
        slots_cells = state.outcome_cells[e_idx, i_idx, a]  # [M, K]
        match = (slots_cells == next_cells[e_idx, i_idx][:, None]) & state.outcome_mask[e_idx, i_idx, a]
        found = match.any(-1)
        if not found.all():
            m = int(np.argmin(found))
            raise PriorViolation(f"agent {int(i_idx[m])} in env {int(e_idx[m])} moved from cell {int(cells[m])} with action "
                                 f"{int(a[m])} to cell {int(next_cells[e_idx[m], i_idx[m]])}, outside the prior plausible "
                                 f"set {slots_cells[m][state.outcome_mask[e_idx[m], i_idx[m], a[m]]].tolist()}")
        k = match.argmax(-1)
        np.add.at(self.tries, (cells, a), 1)
        np.add.at(self.seen, (cells, a, k), 1)

    def empirical(self) -> np.ndarray:
        """float64 ``[V, A, K]``: empirical outcome frequencies (uniform over slots where untried)."""
        t = self.tries[..., None].astype(np.float64)
        return np.where(t > 0, self.seen / np.maximum(t, 1), 1.0 / self.shape[2])

    def state_dict(self) -> dict:
        return {"tries": self.tries.copy(), "seen": self.seen.copy(), "n_remove": self.n_remove}

    def load_state_dict(self, d: dict) -> None:
        self.tries, self.seen, self.n_remove = d["tries"].copy(), d["seen"].copy(), int(d["n_remove"])
