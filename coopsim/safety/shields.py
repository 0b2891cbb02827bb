"""Registered shields: ``certificate-v0`` (learned confidence sets) and ``oracle-v0`` (true dynamics).

Both filter a batch env by env: build a :class:`~coopsim.safety.certificate.SafetyCertificate` for the
env's state and plausible sets, keep the proposal if certified, otherwise repair it greedily
(:meth:`SafetyCertificate.repair`). ``SafetyState`` is batched (arrays ``[E, ...]``).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from pydantic import Field

from coopsim.errors import ConfigError
from coopsim.platform.shield import Certificate, Shield, ShieldParams
from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.model import PlausibleModel
from coopsim.safety.state import SafetyState


class CertificateShieldParams(ShieldParams):
    delta: float = Field(0.01, gt=0, lt=1, description="failure probability of the whole report, in (0, 1)")
    p_min: float = Field(0.05, gt=0, le=1, description="lower bound on the probability of every true outcome, in (0, 1]")
    num_runs: int = Field(1, ge=1, description="seed x config runs the report covers; delta' = delta / num_runs (>= 1)")
    learn: bool = Field(True, description="shrink the prior plausible sets with the counting rule (False: prior only)")


def _check_state(state: Any, joint: np.ndarray) -> SafetyState:
    if not isinstance(state, SafetyState):
        raise ConfigError(f"this shield needs the scenario's constraints() to return a SafetyState; got {type(state).__name__}"
                          " (does the scenario support shields? coop_game and mapf in conflicts: allow mode do)")
    if joint.shape != (state.num_envs, state.num_agents):
        raise ValueError(f"joint action has shape {joint.shape}; the safety state has E={state.num_envs}, N={state.num_agents}")
    return state


class CertificateShield(Shield):
    """Shield certified under learned plausible-outcome sets (confidence sets on the dynamics).

    The shield learns by itself: at each ``filter`` call it compares the agents' cells with those of
    the previous call and counts the outcome of the action it let through (envs whose ``t`` is 0 were
    reset and are skipped). Counts persist across episodes (the dynamics do not change).
    """

    Params = CertificateShieldParams
    needs_state = True

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.model: PlausibleModel | None = None
        self._prev: tuple[SafetyState, np.ndarray] | None = None
        #: totals since the shield was built (every episode of a run): :meth:`run_stats`
        self._stats = self._zero_stats()
        #: the same counters for the current episode (since the last ``reset``): :meth:`stats`
        self._episode = self._zero_stats()

    @staticmethod
    def _zero_stats() -> dict[str, float]:
        return {"interventions": 0.0, "changed_agents": 0.0, "max_neighbourhood": 0.0, "filter_s": 0.0, "calls": 0.0}

    def reset(self, seed: int | None, scenario: Any) -> None:
        self.scenario = scenario
        self._prev = None
        self._episode = self._zero_stats()

    def share_model(self, model: PlausibleModel) -> None:
        """Certify with ``model`` (a learner's counts, which the learner updates) instead of learning.

        The shield sees a transition only at its next ``filter`` call, so it never counts the last step
        of an episode; a learner that counts every transition (graph-safe RL) rules outcomes out earlier
        and would otherwise propose joint actions that are certified under its sets but not yet under
        the shield's. With a shared model both certify with the same sets, and the shield still checks
        every proposal. Raises ValueError for an object that is not a :class:`PlausibleModel`.
        """
        if not isinstance(model, PlausibleModel):
            raise ValueError(f"share_model needs a PlausibleModel; got {type(model).__name__}")
        self.model = model
        self._shared = True

    def plausible(self, state: SafetyState) -> np.ndarray:
        """bool ``[E, N, A, K]``: the plausible sets the certificate uses."""
        if self.model is None:
            return state.outcome_mask
        return self.model.plausible(state)

    def _learn(self, state: SafetyState) -> None:
        if not self.params.learn or state.num_cells <= 0 or getattr(self, "_shared", False):
            return
        if self.model is None:
            self.model = PlausibleModel(state.num_cells, state.num_actions, state.outcomes.shape[3],
                                        delta=self.params.delta, p_min=self.params.p_min, num_runs=self.params.num_runs)
        if self._prev is not None:
            prev, acts = self._prev
            if prev.num_envs == state.num_envs:
                valid = np.broadcast_to((state.t > 0)[:, None], acts.shape)
                self.model.update(prev, acts, state.cells, valid=valid)

    def filter(self, safety_state: Any, joint_action: np.ndarray) -> tuple[np.ndarray, Certificate]:
        t0 = time.perf_counter()
        joint = np.asarray(joint_action, np.int64)
        state = _check_state(safety_state, joint)
        self._learn(state)
        plaus = self.plausible(state)
        out = np.array(joint, dtype=np.int64, copy=True)
        certified = np.zeros(state.num_envs, bool)
        changed = np.zeros(joint.shape, bool)
        max_nb = 0
        for e in range(state.num_envs):
            cert = SafetyCertificate(state.env(e), plaus[e])
            out[e], changed[e] = cert.repair(joint[e])
            certified[e] = bool(cert.certified(out[e]))
            max_nb = max(max_nb, cert.graph.max_neighbourhood)
        self._prev = (state, out.copy())
        dt = time.perf_counter() - t0
        for s in (self._stats, self._episode):
            s["interventions"] += float(changed.any(1).sum())
            s["changed_agents"] += float(changed.sum())
            s["max_neighbourhood"] = max(s["max_neighbourhood"], float(max_nb))
            s["filter_s"] += dt
            s["calls"] += 1
        reason = {"max_neighbourhood": max_nb, "n_remove": None if self.model is None else self.model.n_remove}
        return out, Certificate(certified=certified, changed=changed, reason=reason)

    def stats(self) -> dict[str, float]:
        """The current episode's counts (since the last ``reset``): agents changed and the largest conflict
        neighbourhood; the run's totals are :meth:`run_stats`."""
        s = self._episode
        return {"shield/changed_agents": s["changed_agents"], "shield/max_neighbourhood": s["max_neighbourhood"]}

    def run_stats(self) -> dict[str, float]:
        """Totals since the shield was built, over every episode: agents changed, env-steps with a change, filter
        calls and the largest conflict neighbourhood."""
        s = self._stats
        return {"shield/changed_agents": s["changed_agents"], "shield/intervention_steps": s["interventions"],
                "shield/filter_calls": s["calls"], "shield/max_neighbourhood": s["max_neighbourhood"]}

    def episode_timings(self) -> dict[str, float]:
        """``shield/filter_ms_per_call``: mean wall time of one ``filter`` call (ms) since the last ``reset``."""
        s = self._episode
        return {"shield/filter_ms_per_call": 1e3 * s["filter_s"] / max(s["calls"], 1)}


class OracleShieldParams(ShieldParams):
    pass


class OracleShield(CertificateShield):
    """Shield that knows the true dynamics: plausible sets = the true support (``scenario.true_support()``).

    Baseline and upper bound on how permissive a certificate can be; it needs a scenario with the
    ``true_support`` capability (coop_game has it).
    """

    Params = OracleShieldParams  # type: ignore[assignment]
    requires = ("true_support",)

    def reset(self, seed: int | None, scenario: Any) -> None:
        if not hasattr(scenario, "true_support"):
            raise ConfigError(f"oracle-v0 needs a scenario with true_support(); {type(scenario).__name__} has none")
        super().reset(seed, scenario)

    def _learn(self, state: SafetyState) -> None:
        return None

    def plausible(self, state: SafetyState) -> np.ndarray:
        return self.scenario.true_support() & state.outcome_mask
