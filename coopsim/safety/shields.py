"""Registered shields: ``certificate-v0`` (learned confidence sets) and ``oracle-v0`` (true dynamics).

Both filter a batch env by env: build a :class:`~coopsim.safety.certificate.SafetyCertificate` for the
env's state and plausible sets, keep the proposal if certified, otherwise repair it greedily
(:meth:`SafetyCertificate.repair`). ``SafetyState`` is batched (arrays ``[E, ...]``).

A learner with its own confidence sets (graph-safe RL) offers them for its scenario (:func:`offer_model`); a
learning ``certificate-v0`` shield reset in that scenario certifies with them
(:meth:`CertificateShield.share_model`). So ``coopsim run`` / ``coopsim eval``, whose runner builds the agent and
the shield apart, certify a trained policy with the counts of its checkpoint, as ``coopsim train`` does.
"""
from __future__ import annotations

import time
import warnings
import weakref
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from coopsim.errors import ConfigError
from coopsim.platform.shield import Certificate, Shield, ShieldParams
from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.model import PlausibleModel, removal_threshold
from coopsim.safety.state import SafetyState

#: scenario -> weak reference to the learner acting in it that offers its confidence sets (:func:`offer_model`)
_OFFERS: "weakref.WeakKeyDictionary[Any, weakref.ref]" = weakref.WeakKeyDictionary()


def offer_model(scenario: Any, learner: Any) -> None:
    """Offer ``learner.model`` (a :class:`PlausibleModel`) to every learning ``certificate-v0`` shield reset in
    ``scenario``: at its ``reset`` the shield certifies with the learner's counts
    (:meth:`CertificateShield.share_model`) instead of starting from the prior sets and learning its own.

    ``learner.model`` is read at each shield ``reset``, so a checkpoint the learner loads (in place) or a model it
    replaces later is what the shield certifies with. This is how ``coopsim run`` / ``coopsim eval``, whose runner
    builds the agent and the shield apart but hands both the same scenario, share the learner's model with the shield
    as ``coopsim train`` does. Both are held weakly (the scenario as a key, the learner by a weak reference): nothing
    is kept alive. The last learner offered for a scenario wins; a scenario that cannot be weakly referenced gets no
    offer (its shield starts from the prior sets).
    """
    try:
        _OFFERS[scenario] = weakref.ref(learner)
    except TypeError:  # not hashable or not weakly referenceable: nothing to offer through
        pass


def offered_model(scenario: Any) -> PlausibleModel | None:
    """The :class:`PlausibleModel` a learner offered for ``scenario`` (:func:`offer_model`); None when none was
    offered, the learner is gone, or its ``model`` is not a PlausibleModel."""
    try:
        ref = _OFFERS.get(scenario)
    except TypeError:  # None (a shield reset without a scenario), or a key that cannot be weakly referenced
        return None
    model = getattr(ref() if ref is not None else None, "model", None)
    return model if isinstance(model, PlausibleModel) else None


class CertificateShieldParams(ShieldParams):
    delta: float = Field(0.01, gt=0, lt=1, description="failure probability of the whole report, in (0, 1)")
    p_min: float = Field(0.05, gt=0, le=1, description="lower bound on the probability of every true outcome, in (0, 1]")
    num_runs: int = Field(1, ge=1, le=10**9, description="seed x config runs the report covers; delta' = delta / num_runs "
                                                    "(an integer 1 .. 10**9)")
    learn: bool = Field(True, description="shrink the prior plausible sets with the counting rule (False: prior only)")


def _check_state(state: Any, joint_action: Any) -> tuple[SafetyState, np.ndarray]:
    """The safety state and the proposed joint action as int64 ``[E, N]``, both checked before anything is certified.

    Raises:
        ConfigError: ``state`` is not a :class:`SafetyState`.
        ValueError: the joint action's shape is not ``[E, N]``, its dtype is not an integer one (bools and floats,
            NaN included, are refused: a bool mask or a float given by mistake is not an action), or an action is out
            of ``0..A-1``: in the words of the scenario's ``step`` (:func:`~coopsim.platform.scenario.discrete_joint_actions`).
    """
    from coopsim.platform.scenario import discrete_joint_actions

    if not isinstance(state, SafetyState):
        raise ConfigError(f"this shield needs the scenario's constraints() to return a SafetyState; got {type(state).__name__}"
                          " (does the scenario support shields? coop_game and mapf in conflicts: allow mode do)")
    a = joint_action if type(joint_action) is np.ndarray else np.asarray(joint_action)
    shape = (state.num_envs, state.num_agents)
    if a.shape != shape:
        raise ValueError(f"joint action has shape {a.shape}; the safety state has E={state.num_envs}, N={state.num_agents}")
    # never cast: True is not action 1, NaN would become a huge negative index, -1 would index from the end
    return state, discrete_joint_actions(a, shape, int(state.num_actions))


class CertificateShield(Shield):
    """Shield certified under learned plausible-outcome sets (confidence sets on the dynamics).

    The shield learns by itself: at each ``filter`` call it compares the agents' cells with those of
    the previous call and counts the outcome of the action it let through (envs whose ``t`` is 0 were
    reset and are skipped). Counts persist across episodes (the dynamics do not change).

    Unless a learner shares its counts: explicitly (:meth:`share_model`, as ``coopsim train`` does), or by
    offering them for the scenario (:func:`offer_model`, as ``graph_safe-v0`` does when it is built), which
    :meth:`reset` adopts when the shield learns (``learn``) and has no model of its own yet. A trained policy
    evaluated by ``coopsim eval`` / ``coopsim run --checkpoint`` is then certified with the counts of its
    checkpoint, not from the prior sets (which block most of what it learned).
    """

    Params = CertificateShieldParams
    needs_state = True
    #: whether :meth:`reset` adopts the model a learner offered for the scenario (:func:`offer_model`)
    adopts_offered_model: ClassVar[bool] = True

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
        """Start an episode in ``scenario``; adopt the model a learner offered for it (:meth:`adopt_offered_model`)."""
        self.scenario = scenario
        self._prev = None
        self._episode = self._zero_stats()
        self.adopt_offered_model(scenario)

    def adopt_offered_model(self, scenario: Any) -> bool:
        """Certify with the model a learner offered for ``scenario`` (:func:`offer_model`) when this shield learns
        (``params.learn``), its class adopts offers (``adopts_offered_model``; the oracle does not) and it has no
        model yet, or has one adopted earlier that the learner has replaced since. A model shared explicitly
        (:meth:`share_model`) or learned by the shield itself is kept. Returns whether a model was adopted now."""
        if not (self.adopts_offered_model and self.params.learn):
            return False
        model = offered_model(scenario)
        if model is None or model is self.model or not (self.model is None or getattr(self, "_adopted", False)):
            return False
        self.share_model(model)
        self._adopted = True
        return True

    @property
    def n_remove(self) -> int | None:
        """The removal threshold (tries) the shield certifies with: its model's, and with a shared model never
        less than what the shield's own ``delta``/``p_min``/``num_runs`` give (see :meth:`share_model`); None
        before it has a model."""
        if self.model is None:
            return None
        return max(int(self.model.n_remove), int(getattr(self, "_own_n_remove", 0)))

    def share_model(self, model: PlausibleModel) -> None:
        """Certify with ``model`` (a learner's counts, which the learner updates) instead of learning.

        The shield sees a transition only at its next ``filter`` call, so it never counts the last step
        of an episode; a learner that counts every transition (graph-safe RL) rules outcomes out earlier
        and would otherwise propose joint actions that are certified under its sets but not yet under
        the shield's. With a shared model both certify with the same sets, and the shield still checks
        every proposal. The counts are the learner's, the removal threshold is never below the shield's own
        (``removal_threshold`` of the model's ``|V| A K`` with the shield's ``delta``, ``p_min``, ``num_runs``;
        :attr:`n_remove`): a learner configured with a looser ``delta`` does not loosen the shield (a
        ``UserWarning`` says so when it would have). Raises ValueError for an object that is not a
        :class:`PlausibleModel`.
        """
        if not isinstance(model, PlausibleModel):
            raise ValueError(f"share_model needs a PlausibleModel; got {type(model).__name__}")
        self.model = model
        self._shared = True
        self._adopted = False
        p = self.params
        self._own_n_remove = removal_threshold(int(np.prod(model.shape)), p.delta, p.p_min, p.num_runs)
        if self._own_n_remove > model.n_remove:
            warnings.warn(f"certificate-v0 certifies with the learner's counts but with its own removal threshold, "
                          f"n_remove = {self._own_n_remove} tries (shield delta={p.delta}, p_min={p.p_min}, "
                          f"num_runs={p.num_runs}), stricter than the learner's {model.n_remove}: it can override joint "
                          f"actions the learner certified (shield/interventions > 0); give the shield the agent's "
                          f"delta, p_min and num_runs to certify what the learner does", stacklevel=2)

    def plausible(self, state: SafetyState) -> np.ndarray:
        """bool ``[E, N, A, K]``: the plausible sets the certificate uses."""
        if self.model is None:
            return state.outcome_mask
        return self.model.plausible(state, self.n_remove)

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
        state, joint = _check_state(safety_state, joint_action)
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
        reason = {"max_neighbourhood": max_nb, "n_remove": self.n_remove}
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
    adopts_offered_model = False  # its plausible sets are the true support, no counts

    def reset(self, seed: int | None, scenario: Any) -> None:
        if not hasattr(scenario, "true_support"):
            raise ConfigError(f"oracle-v0 needs a scenario with true_support(); {type(scenario).__name__} has none")
        super().reset(seed, scenario)

    def _learn(self, state: SafetyState) -> None:
        return None

    def plausible(self, state: SafetyState) -> np.ndarray:
        return self.scenario.true_support() & state.outcome_mask
