"""Training loop of graph-safe RL (and the tabular baselines), conforming to :mod:`coopsim.platform.trainer`.

:func:`run_episode` is the loop read top to bottom: the agent acts, the shield filters (it also counts
interventions), the scenario steps, the agent observes the executed joint action. :class:`EpisodeTrainer`
wraps it as a :class:`~coopsim.platform.trainer.Trainer` (one iteration = one episode of every env), so
``coopsim train`` drives it with checkpoints and exact resume; :func:`train_seed` is the plain-function
form used by the experiment script.
"""
from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from coopsim.platform.agent import Transition
from coopsim.platform.trainer import TrainSchedule


class GraphSafeTrainConfig(TrainSchedule):
    """``train:`` section for the tabular safe learners (``total_env_steps`` counts env steps)."""

    num_envs: int = Field(1, ge=1, le=1024, description="envs stepped together, 1..1024")
    shield: str = Field("certificate-v0", description="shield applied to the learner's actions during training (registry id)")
    shield_params: dict[str, Any] = Field(default_factory=dict, description="params of the training shield")


def run_episode(sc, agent, shield, seed: int | None, *, v_star: float | None = None) -> dict[str, float]:
    """Run one episode in every env of ``sc``; returns summed metrics (over envs and steps).

    Keys: ``episode/return`` (team return, mean over envs), ``cost/<name>`` (violations, summed over
    envs), ``violations`` (their total), ``shield/interventions`` (agents changed), ``shield/uncertified``
    (env-steps whose returned action was not certified), ``steps``; with ``v_star`` also ``regret``
    (``v_star - return``, mean over envs). :func:`train_seed` adds ``expected_regret`` (``v_star`` minus the
    expected return of the plan the episode followed, under the true dynamics) for the joint planner.
    """
    obs = sc.reset(seed=seed)
    agent.reset(seed)
    shield.reset(seed, sc)
    ret = np.zeros(sc.num_envs)
    costs: dict[str, float] = {}
    interventions = uncertified = steps = 0
    while not sc.done.all():
        actions, _ = agent.act(obs, None)
        state = sc.constraints() if shield.needs_state else None
        safe, cert = shield.filter(state, actions)
        interventions += int(cert.changed.sum())
        uncertified += int((~cert.certified).sum()) if shield.needs_state else 0
        alive = sc.alive.copy()
        res = sc.step(safe)
        agent.observe(Transition(obs, safe, res.reward, res.terminated, res.truncated, res.obs, alive, res.info))
        ret += res.reward[:, 0]
        for k, v in res.info.items():
            if k.startswith("cost/"):
                costs[k] = costs.get(k, 0.0) + float(np.sum(v))
        obs = res.obs
        steps += 1
    out = {"episode/return": float(ret.mean()), "violations": float(sum(costs.values())),
           "shield/interventions": float(interventions), "shield/uncertified": float(uncertified), "steps": float(steps)}
    out.update(costs)
    if v_star is not None:
        from coopsim.scenarios.coop_game.core import regret

        out["regret"] = regret(v_star, float(ret.mean()))
    return out


class EpisodeTrainer:
    """:class:`~coopsim.platform.trainer.Trainer` for the tabular safe learners: one iteration = one episode.

    The training shield (default ``certificate-v0`` with the agent's ``delta``/``p_min``/``num_runs``)
    filters the learner's actions; for graph-safe RL it never has to intervene (its actions are
    certified already), for the baselines it is what keeps them safe (use ``passthrough-v0`` to train
    them unshielded).
    """

    def __init__(self, agent, train: GraphSafeTrainConfig, seed: int, *, file: str | None = None):
        self.agent, self.sc, self.seed = agent, agent.scenario, int(seed)
        params = dict(train.shield_params)
        if train.shield == "certificate-v0":
            for k in ("delta", "p_min", "num_runs"):
                if hasattr(agent.params, k):
                    params.setdefault(k, getattr(agent.params, k))
        self.shield = make_training_shield(train.shield, params, file=file)
        _share(self.shield, agent)
        self.env_steps = 0
        self.iteration = 0
        #: the run's totals of :data:`RUN_TOTAL_KEYS` (and every ``cost/<name>``) over every iteration so far
        self.totals: dict[str, float] = {}

    def train_iteration(self) -> dict[str, float]:
        """One episode of every env: :func:`run_episode`'s metrics, plus ``episodes`` (this iteration's count, the
        number of envs, which the progress line weighs its means by) and ``run_total/<key>``: the run's totals so far
        of ``violations``, ``shield/uncertified``, ``shield/interventions`` and each ``cost/<name>`` (the last row
        of ``metrics.csv`` and ``train_summary.json``'s ``final_metrics`` hold the whole run's)."""
        seed = self.seed * 1_000_003 + self.iteration
        m = run_episode(self.sc, self.agent, self.shield, seed)
        self.env_steps += int(m["steps"]) * self.sc.num_envs
        self.iteration += 1
        m["episodes"] = float(self.sc.num_envs)
        for k, v in list(m.items()):
            if k in RUN_TOTAL_KEYS or k.startswith("cost/"):
                self.totals[k] = self.totals.get(k, 0.0) + float(v)
        for k in RUN_TOTAL_KEYS:
            self.totals.setdefault(k, 0.0)
        m.update({f"run_total/{k}": v for k, v in self.totals.items()})
        return m

    def state_dict(self) -> dict[str, Any]:
        # "policy": what save_policy writes, so the agent's load() takes a checkpoint.pt (or a seed dir) too
        return {"blob": pickle.dumps((self.agent.__dict__.get("model"), _agent_state(self.agent), self.shield,
                                      self.env_steps, self.iteration)),
                "policy": self.agent.policy_state(), "totals": dict(self.totals)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # a checkpoint written before the totals were kept: they count from the resume
        self.totals = dict(state.get("totals") or {})
        model, agent_state, shield, self.env_steps, self.iteration = pickle.loads(state["blob"])
        if model is not None:
            self.agent.model = model
        for k, v in agent_state.items():
            setattr(self.agent, k, v)
        if getattr(self.agent, "mode", None) == "joint":
            self.agent.ensure_table()
        self.shield = shield

    def save_policy(self, path: str | Path) -> None:
        self.agent.save(path)


#: per-iteration metrics whose run totals :class:`EpisodeTrainer` reports as ``run_total/<key>`` (with every
#: ``cost/<name>``); ``coopsim train`` warns when ``run_total/violations`` is above 0
RUN_TOTAL_KEYS = ("violations", "shield/uncertified", "shield/interventions")


def make_training_shield(shield_id: str, params: dict[str, Any], *, file: str | None = None):
    """The training shield ``train.shield`` with ``params`` (``train.shield_params``, plus the agent's ``delta``,
    ``p_min``, ``num_runs`` for ``certificate-v0``), its errors addressed to those keys as every config error is.

    Raises:
        ConfigError: key ``train.shield`` (an unknown id: the registered ones are listed) or
            ``train.shield_params.<k>`` (an unknown or invalid param), with ``file``.
    """
    from coopsim.errors import ConfigError, RegistryError
    from coopsim.platform import registry
    from coopsim.platform.config import check_component_params

    try:
        registry.spec("shield", shield_id)
    except RegistryError as exc:
        raise ConfigError(str(exc), file=file, key="train.shield", value=shield_id) from None
    check_component_params("shield", shield_id, params, file=file, key_prefix="train.shield_params.")
    return registry.make_component("shield", shield_id, **params)


def read_policy(path, fmt: str, what: str) -> tuple[dict[str, Any], Path]:
    """The policy dict of format ``fmt`` that a tabular safe learner's ``load`` restores, from a ``policy.pt``,
    a training ``checkpoint.pt`` or a seed dir (:func:`coopsim.platform.trainer.load_policy`); a file in the
    plain-pickle form written before the format tag is read too.

    Raises:
        ConfigError: missing or unreadable, or not a ``what`` policy (the file is named).
    """
    from coopsim.errors import ConfigError
    from coopsim.platform.trainer import load_policy, resolve_policy_path

    try:
        ck, file = load_policy(path)
    except ConfigError as exc:
        file = resolve_policy_path(path)
        try:
            with open(file, "rb") as f:
                ck = pickle.load(f)
        except Exception:  # noqa: BLE001 - not a legacy file either: the checkpoint loader's message
            ck = None
        if not (isinstance(ck, dict) and "format" not in ck):
            raise exc from None
        ck = {**ck, "format": fmt}
    if not isinstance(ck, dict) or ck.get("format") != fmt:
        found = ck.get("format") if isinstance(ck, dict) else None
        raise ConfigError(f"not a {what} policy file (format {found!r}, expected {fmt!r})", file=str(file))
    return ck, file


def _share(shield, agent) -> None:
    """A learner with its own confidence sets (``agent.model``) shares them with a learning certificate
    shield (see :meth:`coopsim.safety.shields.CertificateShield.share_model`); others are left alone. The runner of
    ``coopsim run`` / ``eval`` gets the same sharing from the agent's offer (:func:`coopsim.safety.shields.offer_model`),
    which the shield adopts at ``reset``; sharing here first makes it explicit (the shield then keeps this model)."""
    from coopsim.safety.model import PlausibleModel
    from coopsim.safety.shields import CertificateShield

    model = getattr(agent, "model", None)
    if isinstance(model, PlausibleModel) and type(shield) is CertificateShield and shield.params.learn:
        shield.share_model(model)


def _agent_state(agent) -> dict[str, Any]:
    keep = ("episodes", "_next_plan", "_plan", "_plan_tries", "_plan_support", "_plan_observed", "plans_made", "visited", "q", "qc", "lam", "eps", "rng", "_ep_cost")
    return {k: copy.deepcopy(getattr(agent, k)) for k in keep if hasattr(agent, k)}


def make_trainer(cls, agent, train: GraphSafeTrainConfig, seed: int, *, channel=None, file=None) -> EpisodeTrainer:
    """``make_trainer`` classmethod body shared by the tabular safe learners."""
    return EpisodeTrainer(agent, train, seed, file=file)


def train_seed(scenario_id: str, scenario_params: dict, agent_id: str, agent_params: dict, shield_id: str,
               shield_params: dict, seed: int, episodes: int, eval_episodes: int = 0, *, v_star: float | None = None,
               true_support_every: int = 0, agent_out: list | None = None) -> list[dict[str, float]]:
    """Train ``episodes`` and then evaluate ``eval_episodes`` (greedy) in one seed; one record per episode.

    Records have ``phase`` 0 (train) / 1 (eval), ``episode``, and the keys of :func:`run_episode`; with
    ``true_support_every > 0`` graph-safe records also get ``conservativeness`` every that many episodes.
    ``agent_out``: when given, the trained agent is appended to it (for diagnostics after the run).
    """
    from coopsim.platform import registry

    sc = registry.make_scenario(scenario_id, num_envs=1, **scenario_params)
    agent = registry.make_component("agent", agent_id, sc, **agent_params)
    shield = registry.make_component("shield", shield_id, **shield_params)
    _share(shield, agent)
    if agent_out is not None:
        agent_out.append(agent)
    recs = []
    plan_value: dict[int, float] = {}
    for ep in range(episodes + eval_episodes):
        phase = int(ep >= episodes)
        if phase and hasattr(agent.params, "greedy"):
            agent.params.greedy = True
            if hasattr(agent, "plan") and ep == episodes:
                agent.plan()
        m = run_episode(sc, agent, shield, seed * 1_000_003 + ep, v_star=v_star)
        m.update(phase=float(phase), episode=float(ep))
        plan = getattr(agent, "_plan", None)
        if v_star is not None and getattr(agent, "mode", None) == "joint" and plan is not None and m["shield/interventions"] == 0:
            # the episode followed the plan exactly: its expected return is the plan's value under the true dynamics
            key = agent.plans_made
            if key not in plan_value:
                from coopsim.scenarios.coop_game.solver import evaluate, joint_index, team_reward

                w = sc.world()
                vals = evaluate(w.transition_matrix(), team_reward(w, sc.targets()), plan.policy)
                plan_value.clear()
                plan_value[key] = float(vals[0, joint_index(sc.starts(), w.num_cells)])
            from coopsim.scenarios.coop_game.core import regret

            m["expected_regret"] = regret(v_star, plan_value[key])
        if true_support_every and hasattr(agent, "conservativeness") and (ep % true_support_every == 0 or ep == episodes - 1):
            m["conservativeness"] = agent.conservativeness(sc.world().true_prob > 0)
            m["conservativeness_visited"] = agent.conservativeness(sc.world().true_prob > 0, visited_only=True)
        recs.append(m)
    return recs
