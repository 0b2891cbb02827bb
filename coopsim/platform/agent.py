"""The agent-plugin contract: one object acts for the whole team on batched arrays.

A plugin sees observations ``[E, N, ...]`` and returns joint actions int64 ``[E, N]``; per-agent
dicts never appear. Learners are torch modules inside a plugin; planners are plain numpy.
A plugin may use the scenario's declared capabilities (``action_masks()``, ``state()``, or a
family's own, such as MG-MAPF's ``instance()``), never its private attributes.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from coopsim.platform.comm import Feedback, MessageBatch
    from coopsim.platform.scenario import Obs, ScenarioCore

#: largest agent ``seed`` param: 2**32 - 1, which every generator an agent seeds takes (numpy's ``default_rng``
#: and legacy ``RandomState``, ``torch.Generator.manual_seed``); a larger or negative seed used to pass the params
#: and fail as a traceback in the agent's first ``reset``. Run seeds are at most 2**31 - 1 (``SEED_MAX``).
AGENT_SEED_MAX = 2**32 - 1


class AgentParams(BaseModel):
    """Base params schema of an agent plugin."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class Transition:
    """One batched step as a plugin's ``observe`` receives it (arrays ``[E, N, ...]``)."""

    obs: Any
    actions: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    next_obs: Any
    alive: np.ndarray
    info: dict[str, np.ndarray] = field(default_factory=dict)


class AgentPlugin(ABC):
    """A team policy or planner.

    Args:
        scenario: the batched core it acts in (for spaces, ``num_agents``, ``num_envs`` and capabilities).
        **params: validated against ``Params``.
    """

    Params: ClassVar[type[AgentParams]] = AgentParams
    #: capabilities the plugin needs from the scenario, checked when a run is built
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, scenario: "ScenarioCore", **params: Any):
        self.scenario = scenario
        from coopsim.platform.registry import checked_params
        self.params = checked_params(self.Params, params, type(self).__name__)

    def trained_on(self) -> dict[str, Any]:
        """``{"id", "params"}`` of the scenario, as a policy file records it
        (:func:`coopsim.platform.trainer.scenario_identity`; computed once: it scans the registry)."""
        if getattr(self, "_trained_on", None) is None:
            from coopsim.platform.trainer import scenario_identity

            self._trained_on = scenario_identity(self.scenario)
        return self._trained_on

    def reset(self, seed: int | None = None) -> None:
        """Called after ``scenario.reset``; a planner plans here."""

    @abstractmethod
    def act(self, obs: "Obs", inbox: "MessageBatch | None" = None) -> tuple[np.ndarray, "MessageBatch | None"]:
        """Joint actions int64 ``[E, N]`` and the messages to send this step (or None)."""

    def on_feedback(self, feedback: "Feedback") -> None:
        """Per-sender delivery feedback of the channel, one step after sending (rate-adaptive senders use it)."""

    def observe(self, transition: Transition) -> None:
        """Receive the step's outcome (learners store it)."""

    def episode_metrics(self) -> dict[str, float]:
        """Deterministic per-episode statistics of the plugin (e.g. a planner's failures); the runner adds them to
        ``metrics.jsonl``. Wall times go in :meth:`episode_timings` instead, so metrics stay byte-reproducible."""
        return {}

    def episode_timings(self) -> dict[str, float]:
        """Per-episode wall times (s) of the plugin; the runner writes them to ``timing.jsonl``."""
        return {}

    def update(self) -> dict[str, float]:
        """One learning update; returns named losses/statistics."""
        return {}

    def save(self, path: str | Path) -> None:
        """Write the plugin's parameters to ``path`` (planners have none)."""

    def load(self, path: str | Path) -> None:
        """Read parameters written by :meth:`save`.

        Raises:
            CoopsimError: the plugin has no parameters (planners and scripted agents take no checkpoint).
        """
        from coopsim.errors import CoopsimError

        raise CoopsimError(f"agent {type(self).__name__} has no learned parameters and takes no checkpoint; "
                           "drop --checkpoint or use a learning agent")
