"""Tabular baselines for ``coop_game``: independent Q-learning (no shield) and Lagrangian Q-learning.

Both learn per-agent tables indexed by ``(t, own cell, action)`` (finite horizon) from the shared team
reward, with epsilon-greedy exploration; updates are vectorized over envs and agents.

* :class:`IndependentQAgent` (``safe_baselines/iql-v0``): Q-learning on the team reward (Tan, 1993;
  Watkins & Dayan, 1992). It ignores constraints, so without a shield it violates them.
* :class:`LagrangianQAgent` (``safe_baselines/lagrangian-v0``): a second table estimates the
  expected constraint cost (the sum of the step's ``cost/<name>`` terms, shared by the team); actions
  maximize ``Q_r - lambda Q_c``; ``lambda`` follows dual ascent on the episode cost against a budget
  (Altman, 1999; the tabular analogue of MAPPO-Lagrangian, Gu et al. 2023). It bounds *expected*
  cost, not every step, so it still violates while learning.

The oracle baseline is a shield, not an agent: run either agent with ``shield: {id: oracle-v0}``.
"""
from __future__ import annotations

import copy

import numpy as np
from pydantic import Field

from coopsim.errors import ConfigError
from coopsim.platform.agent import AGENT_SEED_MAX, AgentParams, AgentPlugin, Transition


class TabularQParams(AgentParams):
    alpha: float = Field(0.2, gt=0, le=1, description="learning rate, (0, 1]")
    epsilon: float = Field(0.2, ge=0, le=1, description="initial exploration rate, [0, 1]")
    epsilon_decay: float = Field(0.99, gt=0, le=1, description="per-episode multiplicative decay of epsilon, (0, 1]")
    epsilon_min: float = Field(0.02, ge=0, le=1, description="exploration floor, [0, 1]")
    optimistic_init: float = Field(0.0, description="initial Q value (return units)")
    greedy: bool = Field(False, description="evaluation mode: no exploration, no learning")
    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX, description="seed of the exploration generator, 0 .. 2**32-1")


class IndependentQAgent(AgentPlugin):
    """Independent tabular Q-learners on the team reward (needs ``cells()``)."""

    Params = TabularQParams
    requires = ("cells",)

    from coopsim.agents.graph_safe.train import GraphSafeTrainConfig as TrainConfig

    @classmethod
    def make_trainer(cls, agent, train, seed, *, channel=None, file=None):
        """Trainer for ``coopsim train`` (one iteration = one episode; shield from ``train.shield``)."""
        from coopsim.agents.graph_safe.train import EpisodeTrainer

        return EpisodeTrainer(agent, train, seed, file=file)

    def __init__(self, scenario, **params):
        super().__init__(scenario, **params)
        self.N, self.A = scenario.num_agents, int(scenario.action_space.n)
        self.H = int(scenario.params.max_steps)
        V = scenario.known_world().num_cells if hasattr(scenario, "known_world") else int(scenario.cells().max()) + 1
        self.q = np.full((self.H + 1, self.N, V, self.A), self.params.optimistic_init, np.float64)
        self.q[self.H] = 0.0
        self.eps = self.params.epsilon
        self.rng = np.random.default_rng([self.params.seed, 17])
        self._t = np.zeros(scenario.num_envs, np.int64)
        self._cells = None

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng([self.params.seed, int(seed), 17])
        self._t = np.zeros(self.scenario.num_envs, np.int64)

    def values(self, t: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """float ``[E, N, A]`` action values used for acting."""
        return self.q[np.minimum(t, self.H - 1)[:, None], np.arange(self.N)[None, :], cells]

    def act(self, obs, inbox=None):
        cells = self.scenario.cells()
        self._cells = cells
        q = self.values(self._t, cells)
        noise = self.rng.random(q.shape) * 1e-9  # random tie-breaking
        a = np.argmax(q + noise, -1)
        if not self.params.greedy:
            explore = self.rng.random(a.shape) < self.eps
            a = np.where(explore, self.rng.integers(0, self.A, a.shape), a)
        return a.astype(np.int64), None

    def _td(self, table: np.ndarray, signal: np.ndarray, acts: np.ndarray, nxt: np.ndarray, valid: np.ndarray,
            minimize: bool = False) -> None:
        E, N = acts.shape
        t = np.minimum(self._t, self.H - 1)
        t1 = np.minimum(self._t + 1, self.H)
        ag = np.arange(N)[None, :]
        nq = table[t1[:, None], ag, nxt]
        boot = nq.min(-1) if minimize else nq.max(-1)
        target = signal + boot
        cur = table[t[:, None], ag, self._cells, acts]
        upd = cur + self.params.alpha * (target - cur)
        e_i, n_i = np.nonzero(valid)
        table[t[e_i], n_i, self._cells[e_i, n_i], acts[e_i, n_i]] = upd[e_i, n_i]

    def observe(self, transition: Transition) -> None:
        if self.params.greedy:
            self._t += 1
            return
        nxt = self.scenario.cells()
        self._td(self.q, np.asarray(transition.reward, np.float64), np.asarray(transition.actions), nxt, transition.alive)
        self._t += 1
        if (transition.truncated | transition.terminated).all():
            self.eps = max(self.params.epsilon_min, self.eps * self.params.epsilon_decay)

    POLICY_FORMAT = "coopsim.safe_baselines.iql/1"
    POLICY_KIND = "safe_baselines/iql-v0"
    #: scenario params a policy file's record may differ in (:func:`~coopsim.agents.graph_safe.agent.world_mismatch`):
    #: the team reward does not read the constraints, so graph-safe's list (the table's shape covers num_agents and
    #: max_steps)
    from coopsim.agents.graph_safe.agent import NOT_WORLD_PARAMS as NOT_COMPARED
    #: what the message says holds only where the file was learned
    HELD = "its Q-values hold only in the world they were learned in"

    def policy_state(self) -> dict:
        """What :meth:`save` writes (and a training checkpoint holds under ``"policy"``): the tables and exploration
        state (``__getstate_dict__``) and the world they were learned in (``scenario``: ``{"id", "params"}``,
        :meth:`~coopsim.platform.agent.AgentPlugin.trained_on`, checked by :meth:`load`)."""
        return {"format": self.POLICY_FORMAT, **copy.deepcopy(self.__getstate_dict__()), "scenario": self.trained_on()}

    def save(self, path):
        from coopsim.platform.trainer import atomic_save

        atomic_save(self.policy_state(), path)

    def __getstate_dict__(self):
        return {"q": self.q, "eps": self.eps}

    def load(self, path):
        """Read a ``policy.pt`` written by :meth:`save`, a training ``checkpoint.pt`` or a seed directory.

        The Q-values hold only in the world they were learned in: a file that records its scenario
        (:meth:`policy_state`) is refused when a scenario param the dynamics depend on differs from this run's (as
        graph-safe policy files are: :func:`~coopsim.agents.graph_safe.agent.check_policy_world`); an older file
        without that record loads with a warning that its world cannot be checked.

        Raises:
            ConfigError: a policy of another agent, or one of another scenario (its table's shape differs: key
                ``scenario.params.<k>`` or ``scenario.id`` when the file records one differing param or another id,
                :func:`~coopsim.platform.trainer.policy_size_mismatch`) or world (key ``scenario.params.<k>``).
        """
        from coopsim.agents.graph_safe.agent import check_policy_world, warn_unrecorded_world
        from coopsim.agents.graph_safe.train import read_policy

        d, file = read_policy(path, self.POLICY_FORMAT, self.POLICY_KIND)
        missing = set(self.__getstate_dict__()) - set(d)
        if missing:
            raise ConfigError(f"not a {self.POLICY_KIND} policy file (no {sorted(missing)})", file=str(file))
        if np.shape(d["q"]) != self.q.shape:  # names the scenario param that differs (max_steps, num_agents, ...)
            from coopsim.platform.trainer import policy_size_mismatch

            raise policy_size_mismatch("q_shape", np.shape(d["q"]), self.q.shape, d.get("scenario"),
                                       self.trained_on(), file=str(file))
        if not check_policy_world(d.get("scenario"), self.trained_on(), file, held=self.HELD,
                                  ignore=self.NOT_COMPARED):
            warn_unrecorded_world(file, self.POLICY_KIND, "Q-values from another world need not hold here")
        for k in self.__getstate_dict__():
            setattr(self, k, d[k])


class LagrangianQParams(TabularQParams):
    cost_budget: float = Field(0.0, ge=0, description="allowed expected constraint cost per episode (violations), >= 0")
    lambda_lr: float = Field(0.05, gt=0, description="dual ascent step on lambda per episode, > 0")
    lambda_max: float = Field(100.0, gt=0, description="upper bound on lambda, > 0")


class LagrangianQAgent(IndependentQAgent):
    """Tabular Lagrangian Q-learning on expected constraint cost (see the module docstring)."""

    Params = LagrangianQParams
    POLICY_FORMAT = "coopsim.safe_baselines.lagrangian/1"
    POLICY_KIND = "safe_baselines/lagrangian-v0"
    #: every scenario param is compared: the cost table ``qc`` is the expected constraint cost under the file's
    #: constraints and their params (constraints, min_dist, no_swap, cap, group_size, load_frac, comm_range, margin)
    #: and the starts (start_spacing) they were counted from
    NOT_COMPARED: frozenset = frozenset()
    HELD = ("its Q-values hold only in the world they were learned in, and its cost table only under the constraints "
            "(and their params) it was learned under")

    def __init__(self, scenario, **params):
        super().__init__(scenario, **params)
        self.qc = np.zeros_like(self.q)
        self.lam = 0.0
        self._ep_cost = np.zeros(scenario.num_envs)

    def values(self, t, cells):
        tt = np.minimum(t, self.H - 1)[:, None]
        ag = np.arange(self.N)[None, :]
        return self.q[tt, ag, cells] - self.lam * self.qc[tt, ag, cells]

    def observe(self, transition: Transition) -> None:
        if self.params.greedy:
            self._t += 1
            return
        cost = sum((np.asarray(v, np.float64) for k, v in transition.info.items() if k.startswith("cost/")),
                   np.zeros(transition.reward.shape[0]))
        cost = cost.reshape(cost.shape[0], -1).sum(1) if cost.ndim > 1 else cost
        self._ep_cost += cost
        nxt = self.scenario.cells()
        acts = np.asarray(transition.actions)
        self._td(self.qc, np.broadcast_to(cost[:, None], acts.shape).astype(np.float64), acts, nxt, transition.alive)
        super().observe(transition)
        if (transition.truncated | transition.terminated).all():
            self.lam = float(np.clip(self.lam + self.params.lambda_lr * (self._ep_cost.mean() - self.params.cost_budget),
                                     0.0, self.params.lambda_max))
            self._ep_cost[:] = 0.0

    def __getstate_dict__(self):
        return {"q": self.q, "qc": self.qc, "lam": self.lam, "eps": self.eps}
