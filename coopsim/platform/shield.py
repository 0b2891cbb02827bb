"""The shield contract: every joint action passes a shield before it reaches the scenario.

``Shield.filter(safety_state, joint_action) -> (safe_joint_action, certificate)`` returns a new array
(it never mutates its input). The certificate says, per env, whether the returned joint action is
certified, and which agents the shield changed. Interventions and violations are counted by the
recorder as ``shield/interventions`` and ``cost/<constraint>`` terms, never hidden.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict


@dataclass
class Certificate:
    """Outcome of one ``filter`` call on a batch of ``E`` envs with ``N`` agents.

    Attributes:
        certified: bool ``[E]``, the returned joint action is certified safe.
        changed: bool ``[E, N]``, agents whose action the shield replaced.
        reason: free-form per-component explanation (which constraints, which components).
    """

    certified: np.ndarray
    changed: np.ndarray
    reason: dict[str, Any] = field(default_factory=dict)


class ShieldParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Shield(ABC):
    """Filters joint actions. ``needs_state`` says whether the runner must ask the scenario for
    ``constraints()`` each step (the pass-through shield does not); ``requires`` names further scenario
    capabilities the shield calls (e.g. ``true_support``). The runner checks both when it builds the run's
    components (:func:`required_capabilities`), so ``coopsim validate`` and ``coopsim run`` refuse a shield on a
    scenario without them alike."""

    Params: ClassVar[type[ShieldParams]] = ShieldParams
    needs_state: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **params: Any):
        from coopsim.platform.registry import checked_params
        self.params = checked_params(self.Params, params, type(self).__name__)

    def reset(self, seed: int | None, scenario: Any) -> None:
        """Start an episode in ``scenario`` (a batched core)."""

    @abstractmethod
    def filter(self, safety_state: Any, joint_action: np.ndarray) -> tuple[np.ndarray, Certificate]:
        """Return a certified joint action int64 ``[E, N]`` (a new array) and its certificate."""

    def stats(self) -> dict[str, float]:
        """Deterministic statistics of the shield's current episode (since the last ``reset``: per-episode counts,
        never running totals); the runner adds them to each episode's ``metrics.jsonl`` row. Wall times go in
        :meth:`episode_timings` instead, so metrics stay byte-reproducible."""
        return {}

    def run_stats(self) -> dict[str, float]:
        """Totals over every episode since the shield was built; the runner writes them to ``summary.json``,
        under ``totals``."""
        return {}

    def episode_timings(self) -> dict[str, float]:
        """Wall-time statistics of the shield's last episode; the runner writes them to ``timing.jsonl`` (and their
        means over episodes to ``summary.json``, under ``timing``)."""
        return {}


def required_capabilities(shield_cls: Any) -> tuple[str, ...]:
    """The scenario capabilities a shield class needs: ``constraints`` when it ``needs_state``, then its
    ``requires``."""
    need = ("constraints",) if getattr(shield_cls, "needs_state", False) else ()
    return need + tuple(c for c in getattr(shield_cls, "requires", ()) if c not in need)
