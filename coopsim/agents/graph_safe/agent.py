"""Graph-safe RL: optimistic exploration restricted to certified joint actions, coordinated over the coupling graph.

The plugin learns the dynamics of a ``coop_game``-like scenario with confidence sets
(:class:`coopsim.safety.model.PlausibleModel`: outcomes leave the plausible set after
``ceil(ln(|S|/delta')/p_min)`` tries without them), and acts only through joint actions that the
factored :class:`~coopsim.safety.certificate.SafetyCertificate` certifies under those sets, so a
violation needs a wrong removal (probability at most ``delta'`` per run). Two planners:

* ``joint`` (small instances, ``V^N A^N <= joint_limit``): optimistic finite-horizon DP over joint
  states with the empirical model plus a count bonus ``bonus * mean_i 1/sqrt(max(1, n(s_i, b_i)))``
  (UCRL/UCBVI-style optimism; Jaksch et al. 2010, Azar et al. 2017) and an ``expand_bonus`` on actions
  whose plausible set can still shrink (trying them is what grows the certified set, as the
  "expanders" of SafeMDP, Turchetta et al. 2016), restricted to the joint actions
  certified at every state (:class:`~coopsim.scenarios.coop_game.solver.SafeTable`); replanned with a
  doubling schedule (after episodes 1, 2, 4, 8, ...).
* ``factored`` (any N): per-agent optimistic values ``Q_i(t, s_i, a)`` (team reward is a sum of
  per-agent terms), and the joint action maximizing ``sum_i Q_i`` over certified joint actions,
  solved exactly per coupling-graph component by enumeration (variable elimination on a component
  is enumeration when it has at most ``max_enumerate`` joint actions) and by the certificate's
  greedy repair on larger components.

Scenario capabilities used (all public, none of the true dynamics): ``constraints()`` (the
SafetyState), ``cells()``, ``targets()``, ``known_world()`` (map, intended cells, prior sets, loads).
"""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from coopsim.platform.agent import AgentParams, AgentPlugin, Transition
from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.model import PlausibleModel


class GraphSafeParams(AgentParams):
    delta: float = Field(0.01, gt=0, lt=1, description="failure probability of the whole report, in (0, 1)")
    p_min: float = Field(0.05, gt=0, le=1, description="lower bound on every true outcome's probability, in (0, 1]")
    num_runs: int = Field(1, ge=1, description="seed x config runs the report covers (delta' = delta / num_runs), >= 1")
    bonus: float = Field(0.1, ge=0, description="optimism bonus scale (team-reward units per step), >= 0")
    expand_bonus: float = Field(0.05, ge=0, description="bonus (team-reward units per step) for actions whose plausible set "
                                "can still shrink (tries < removal threshold and unseen prior outcomes): optimism about "
                                "growing the certified set, >= 0")
    planner: Literal["auto", "joint", "factored"] = Field("auto", description="auto: joint when the joint table fits")
    joint_limit: float = Field(4e6, gt=0, description="largest V^N * A^N table the joint planner builds (entries)")
    max_enumerate: int = Field(3125, ge=1, description="largest component joint-action space solved by enumeration")
    greedy: bool = Field(False, description="act greedily w.r.t. the learned model (no bonus, no learning): evaluation mode")


class GraphSafeAgent(AgentPlugin):
    """Graph-safe RL team (see the module docstring). Needs ``constraints``, ``cells``, ``targets``, ``known_world``."""

    Params = GraphSafeParams
    requires = ("constraints", "cells", "targets", "known_world")

    from coopsim.agents.graph_safe.train import GraphSafeTrainConfig as TrainConfig

    @classmethod
    def make_trainer(cls, agent, train, seed, *, channel=None, file=None):
        """Trainer for ``coopsim train`` (one iteration = one episode; see :mod:`coopsim.agents.graph_safe.train`)."""
        from coopsim.agents.graph_safe.train import EpisodeTrainer

        return EpisodeTrainer(agent, train, seed)

    def __init__(self, scenario, **params):
        super().__init__(scenario, **params)
        p = self.params
        self.world = scenario.known_world()
        self.targets = scenario.targets()
        self.N = scenario.num_agents
        self.H = int(scenario.params.max_steps)
        w = self.world
        self.model = PlausibleModel(w.num_cells, w.num_actions, w.num_slots, delta=p.delta, p_min=p.p_min, num_runs=p.num_runs)
        size = float(w.num_cells) ** self.N * float(w.num_actions) ** self.N
        self.mode = p.planner if p.planner != "auto" else ("joint" if size <= p.joint_limit else "factored")
        self.episodes = 0
        self._next_plan = 0
        self._plan = None
        self._table = None
        self._t = np.zeros(scenario.num_envs, np.int64)
        self._last_state = None
        self.visited: np.ndarray | None = None  # joint states seen (joint planner)
        self.plans_made = 0

    # --- model -----------------------------------------------------------------------------------
    def plausible_support(self) -> np.ndarray:
        """bool ``[V, A, K]`` plausible sets per cell and action (prior minus removed outcomes)."""
        keep = (self.model.seen > 0) | (self.model.tries < self.model.n_remove)[..., None]
        return (self.world.prior >= 0) & keep

    def slot_estimate(self) -> np.ndarray:
        """float64 ``[V, A, K]``: empirical outcome frequencies over the prior slots; untried actions
        uniform over their plausible set."""
        sup = self.plausible_support()
        tries = self.model.tries[..., None]
        return np.where(tries > 0, self.model.seen / np.maximum(tries, 1), sup / np.maximum(sup.sum(-1, keepdims=True), 1))

    def transition_estimate(self) -> np.ndarray:
        """float64 ``[V, A, V]``: empirical transitions; untried actions uniform over their plausible set."""
        w = self.world
        P = self.slot_estimate()
        T = np.zeros((w.num_cells, w.num_actions, w.num_cells))
        v, a, k = np.nonzero(w.prior >= 0)
        np.add.at(T, (v, a, w.prior[v, a, k]), P[v, a, k])
        return T

    def _bonus_va(self) -> np.ndarray:
        if self.params.greedy:
            return np.zeros(self.model.tries.shape)
        b = self.params.bonus / np.sqrt(np.maximum(self.model.tries, 1))
        prior = self.world.prior >= 0
        can_shrink = (self.model.tries < self.model.n_remove) & ((self.model.seen == 0) & prior).any(-1)
        return b + self.params.expand_bonus * can_shrink

    # --- planning --------------------------------------------------------------------------------
    def plan(self) -> None:
        """Recompute the optimistic plan from the current counts (joint DP or per-agent values)."""
        from coopsim.scenarios.coop_game.solver import SafeTable, solve, team_reward

        b = self._bonus_va()
        self.plans_made += 1
        if self.mode == "joint":
            T = self.transition_estimate()
            if self._table is None:
                self._table = SafeTable(self.world, self.scenario.constraint_set, self.N, self.params.joint_limit)
            tab = self._table
            allowed = tab.safe(self.plausible_support())
            cs, ab = tab.states, tab.actions
            bonus = np.zeros(allowed.shape)
            for i in range(self.N):
                bonus += b[cs[:, i][:, None], ab[:, i][None, :]]
            bonus /= self.N
            self._plan = solve(T, team_reward(self.world, self.targets), allowed, self.H, bonus=bonus)
            self._allowed = allowed
        else:
            # per-agent optimistic values, reward 1{s' = target_i} / N; transitions over the K prior slots
            w = self.world
            P = self.slot_estimate()  # [V, A, K]
            nxt = np.where(w.prior >= 0, w.prior, 0)
            V, A = w.num_cells, w.num_actions
            Qs = np.zeros((self.H, self.N, V, A))
            W = np.zeros((self.N, V))
            onehot = np.zeros((self.N, V))
            onehot[np.arange(self.N), self.targets] = 1.0 / self.N
            for t in range(self.H - 1, -1, -1):
                Q = ((onehot + W)[:, nxt] * P[None]).sum(-1) + b[None] / self.N  # [N, V, A]
                Qs[t] = Q
                W = Q.max(-1)
            self._plan = Qs

    def ensure_table(self):
        """The joint planner's :class:`~coopsim.scenarios.coop_game.solver.SafeTable` (built once)."""
        from coopsim.scenarios.coop_game.solver import SafeTable

        if self._table is None:
            self._table = SafeTable(self.world, self.scenario.constraint_set, self.N, self.params.joint_limit)
        return self._table

    # --- plugin API --------------------------------------------------------------------------
    def reset(self, seed=None):
        self._t[:] = 0
        self._last_state = None
        if self.episodes >= self._next_plan or self._plan is None:
            self.plan()
            self._next_plan = max(1, 2 * self.episodes)

    def act(self, obs, inbox=None):
        from coopsim.scenarios.coop_game.solver import joint_index

        state = self.scenario.constraints()
        self._last_state = state
        t = np.minimum(state.t, self.H - 1)
        if self.mode == "joint":
            s = joint_index(state.cells, self.world.num_cells)
            if self.visited is None:
                self.visited = np.zeros(len(self._table.states), bool)
            self.visited[s] = True
            joint = self._table.actions[self._plan.policy[t, s]]
            return joint.astype(np.int64), None
        plaus = self.model.plausible(state)
        out = np.zeros((state.num_envs, self.N), np.int64)
        for e in range(state.num_envs):
            cert = SafetyCertificate(state.env(e), plaus[e])
            scores = self._plan[t[e], np.arange(self.N), state.cells[e]]  # [N, A]
            out[e], _ = cert.maximize(scores, self.params.max_enumerate)
        return out, None

    def observe(self, transition: Transition) -> None:
        if self._last_state is None or self.params.greedy:
            return
        valid = transition.alive.copy()
        self.model.update(self._last_state, np.asarray(transition.actions, np.int64), self.scenario.cells(), valid=valid)
        if transition.truncated.all() or transition.terminated.all():
            self.episodes += 1

    # --- diagnostics -------------------------------------------------------------------------------
    def conservativeness(self, true_support: np.ndarray, visited_only: bool = False) -> float:
        """Fraction of truly safe (state, joint action) pairs that are certified, over every joint state or
        (``visited_only``) over the joint states the agent has acted in; ``true_support`` bool ``[V, A, K]``.

        Raises:
            AssertionError: a certified joint action is not truly safe (a true outcome was removed).
        """
        self.ensure_table()
        truly = self._table.safe(true_support)
        cert = self._table.safe(self.plausible_support())
        if (cert & ~truly).any():
            raise AssertionError("a certified joint action is not truly safe: the plausible sets lost a true outcome")
        if visited_only and self.visited is not None:
            truly, cert = truly[self.visited], cert[self.visited]
        return float(cert.sum() / max(truly.sum(), 1))

    def save(self, path):
        with open(path, "wb") as f:
            pickle.dump({"model": self.model.state_dict(), "episodes": self.episodes}, f)

    def load(self, path):
        with open(Path(path), "rb") as f:
            d = pickle.load(f)
        self.model.load_state_dict(d["model"])
        self.episodes = int(d["episodes"])
        self._plan = None
