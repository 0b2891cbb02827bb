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
  certified at every state (:class:`~coopsim.scenarios.coop_game.solver.SafeTable`), plus the
  goal-directed expansion bonus (``goal_bonus``: blockers of the plan over the optimistic feasible set)
  and, once that plan is settled, the resolve bonus (``resolve_bonus``, off by default: every remaining
  blocker, to drive the certified set to the truly safe one; see
  :mod:`coopsim.agents.graph_safe.diagnose` for what can be certified at all); replanned by the UCRL2
  epoch rule (``replan: counts``) or after episodes 1, 2, 4, 8, ... (``replan: doubling``).
* ``factored`` (any N): per-agent optimistic values ``Q_i(t, s_i, a)`` (team reward is a sum of
  per-agent terms), and the joint action maximizing ``sum_i Q_i`` over certified joint actions,
  solved exactly per coupling-graph component by enumeration (variable elimination on a component
  is enumeration when it has at most ``max_enumerate`` joint actions) and by the certificate's
  greedy repair on larger components.

Scenario capabilities used (all public, none of the true dynamics): ``constraints()`` (the
SafetyState), ``cells()``, ``targets()``, ``known_world()`` (map, intended cells, prior sets, loads).

The learner offers its confidence sets (``model``) for its scenario when it is built
(:func:`coopsim.safety.shields.offer_model`), so a learning ``certificate-v0`` shield of the same run certifies
with them: in ``coopsim run`` / ``coopsim eval`` (with ``--checkpoint``, the counts of the checkpoint, which
:meth:`GraphSafeAgent.load` restores in place) as in ``coopsim train``. A fresh shield would certify from the
prior sets only and block most of what the trained policy does.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from coopsim.agents.graph_safe.diagnose import pairs_of
from coopsim.errors import ConfigError
from coopsim.platform.agent import AgentParams, AgentPlugin, Transition
from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.model import PlausibleModel, removal_threshold
from coopsim.safety.shields import offer_model
from coopsim.scenarios.coop_game.solver import joint_table_size, table_size_text

POLICY_FORMAT = "coopsim.graph_safe/1"


#: largest ``joint_limit``: the joint planner keeps several float64 tables of ``V^N * A^N`` entries (see
#: :data:`JOINT_BYTES_PER_ENTRY`), so 1e8 entries already take several GiB
JOINT_LIMIT_MAX = 1e8
#: bytes per joint-table entry the joint planner holds at its peak (float64 bonus, Q and masked-Q tables, the bool
#: safe tables, the constraint sums; measured: about 47 between 3 agents on 4x4 and on 5x5), for the up-front memory check
JOINT_BYTES_PER_ENTRY = 48


def check_joint_planner(V: int, A: int, N: int, params) -> None:
    """Refuse, when the agent is built, a joint planner whose ``V^N * A^N`` table exceeds ``params.joint_limit``
    (``planner: joint`` on a large instance) or does not fit the memory (:func:`coopsim.platform.memory.over_limit`).

    Raises:
        ConfigError: key ``agents.params.planner`` (also ``agents.params.joint_limit``): the table size, the limit,
            and that ``planner: auto`` or ``factored`` runs any instance.
    """
    from coopsim.platform.memory import MEMORY_FRACTION, gib, over_limit

    size = joint_table_size(V, A, N)
    table = f"{V}^{N} joint states x {A}^{N} joint actions = {table_size_text(V, A, N)} entries"
    fix = ("use planner: auto (the joint planner where its table fits joint_limit, the factored planner otherwise) "
           "or planner: factored (any number of agents)")
    if size > params.joint_limit:
        if size <= JOINT_LIMIT_MAX:  # the limit may be raised as far as the table: name that too
            fix = (f"raise agents.params.joint_limit to at least {size:.3g} (at most {JOINT_LIMIT_MAX:.0e}; the "
                   f"memory is checked next), or {fix}")
        raise ConfigError(f"invalid value {params.planner!r}: the joint planner needs a V^N * A^N table of {table}, "
                          f"more than agents.params.joint_limit={params.joint_limit:.3g}; {fix}",
                          key="agents.params.planner", value=params.planner, also=("agents.params.joint_limit",))
    need = int(size) * JOINT_BYTES_PER_ENTRY
    over = over_limit(need)
    if over is not None:
        limit, avail = over
        auto = params.planner == "auto"  # auto picked the joint planner: joint_limit is what let it
        key, value = ("agents.params.joint_limit", params.joint_limit) if auto else ("agents.params.planner", params.planner)
        raise ConfigError(f"invalid value {value!r} (planner: {params.planner}): the joint planner's tables need "
                          f"{gib(need)} ({table} x {JOINT_BYTES_PER_ENTRY} bytes), more than {MEMORY_FRACTION:.0%} of "
                          f"the available memory ({gib(limit)} of {gib(avail)}); lower agents.params.joint_limit below "
                          f"{size:.3g} so that planner: auto picks the factored planner, or use planner: factored",
                          key=key, value=value,
                          also=("agents.params.planner",) if auto else ("agents.params.joint_limit",))


class GraphSafeParams(AgentParams):
    delta: float = Field(0.01, gt=0, lt=1, description="failure probability of the whole report, in (0, 1)")
    p_min: float = Field(0.05, gt=0, le=1, description="lower bound on every true outcome's probability, in (0, 1]")
    num_runs: int = Field(1, ge=1, le=10**9, description="seed x config runs the report covers (delta' = delta / num_runs), "
                                                    "an integer 1 .. 10**9")
    bonus: float = Field(0.1, ge=0, description="optimism bonus scale (team-reward units per step), >= 0")
    expand_bonus: float = Field(0.05, ge=0, description="bonus (team-reward units per step) for actions whose plausible set "
                                "can still shrink (tries < removal threshold and unseen prior outcomes) and that block the "
                                "certification of some joint action that the observed outcomes do not rule out: optimism "
                                "about growing the certified set, >= 0")
    goal_bonus: float = Field(1.0, ge=0, description="bonus for each try of a blocking action of the optimistic plan, in "
                              "units of the horizon H (the largest episode return): actions that can still shrink and make "
                              "a joint action uncertified that the plan over the optimistic feasible set (joint actions safe "
                              "under the observed outcomes) takes in a state it reaches; with >= 1 a try outweighs any "
                              "episode's reward, so these tries come first (joint planner), >= 0")
    resolve_bonus: float = Field(0.0, ge=0, description="bonus for each try of an unresolved action once the optimistic "
                                 "plan is settled (no goal-directed expansion left), in units of the horizon H: actions that "
                                 "can still shrink and make some joint action of the optimistic feasible set uncertified; "
                                 "with >= 1 the plan spends whole episodes on such tries (inside certified joint actions) "
                                 "until every one it can reach is resolved, driving the certified set towards every truly "
                                 "safe joint action that can be certified at all (joint planner; 0 = off), >= 0")
    replan: Literal["counts", "doubling"] = Field("counts", description="counts: replan before an episode when a plausible "
                                                  "set changed or a (cell, action) count doubled since the last plan (the "
                                                  "UCRL2 epoch rule); doubling: after episodes 1, 2, 4, 8, ...")
    planner: Literal["auto", "joint", "factored"] = Field("auto", description="auto: joint when the joint table fits")
    joint_limit: float = Field(4e6, gt=0, le=JOINT_LIMIT_MAX,
                               description="largest V^N * A^N table the joint planner builds (entries), in (0, 1e8]: "
                               "the planner keeps several float64 tables of that size (about 4.5 GiB at 1e8); larger "
                               "instances need planner: auto or factored")
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

        return EpisodeTrainer(agent, train, seed, file=file)

    def __init__(self, scenario, **params):
        super().__init__(scenario, **params)
        p = self.params
        self.world = scenario.known_world()
        self.targets = scenario.targets()
        self.N = scenario.num_agents
        self.H = int(scenario.params.max_steps)
        w = self.world
        self.model = PlausibleModel(w.num_cells, w.num_actions, w.num_slots, delta=p.delta, p_min=p.p_min, num_runs=p.num_runs)
        # the run's certificate-v0 shield certifies with these counts (read at its reset: load() and a
        # resumed trainer's model are what it gets)
        offer_model(scenario, self)
        size = joint_table_size(w.num_cells, w.num_actions, self.N)  # inf beyond the float range (N >~ 100)
        self.mode = p.planner if p.planner != "auto" else ("joint" if size <= p.joint_limit else "factored")
        if self.mode == "joint":
            check_joint_planner(w.num_cells, w.num_actions, self.N, p)
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

    def observed_support(self) -> np.ndarray:
        """bool ``[V, A, K]``: outcomes observed at least once, plus stay's own cell (stay never slips).

        These are certainly in the true support, so joint actions safe under them are a superset of the
        truly safe ones: the *optimistic* feasible set (the certified set is the pessimistic one).
        """
        sup = (self.model.seen > 0) & (self.world.prior >= 0)
        sup[:, 0, 0] = True
        return sup

    def can_shrink(self) -> np.ndarray:
        """bool ``[V, A]``: the plausible set of (cell, action) can still lose an outcome (fewer tries than
        the removal threshold, and a prior outcome not observed yet)."""
        prior = self.world.prior >= 0
        return (self.model.tries < self.model.n_remove) & ((self.model.seen == 0) & prior).any(-1)

    def _bonus_va(self) -> np.ndarray:
        """float64 ``[V, A]`` count bonus ``bonus / sqrt(max(1, n))`` (0 in greedy mode)."""
        if self.params.greedy:
            return np.zeros(self.model.tries.shape)
        return self.params.bonus / np.sqrt(np.maximum(self.model.tries, 1))

    def _mark(self, mask: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """bool ``[V, A]``: the (cell, action) of every agent in joint entries ``(rows, cols)`` of the table,
        within ``mask``."""
        return pairs_of(self._table, rows, cols, self.world.num_cells, self.world.num_actions) & mask

    def reach(self, policy: np.ndarray, starts: np.ndarray, tol: float = 1e-4) -> np.ndarray:
        """float64 ``[H, S]``: probability of each joint state at each step following ``policy`` int ``[H, S]``
        from joint states ``starts`` int ``[E]`` (uniform over them) under the estimated dynamics; states
        below ``tol`` are dropped. Successors are enumerated over the ``K`` outcome slots of each agent
        (``K^N`` per state), so the cost is that of the states actually reached."""
        w, tab = self.world, self._table
        P = self.slot_estimate()
        nxt = np.where(w.prior >= 0, w.prior, 0)
        S = len(tab.states)
        d = np.bincount(starts, minlength=S) / len(starts)
        out = np.zeros((self.H, S))
        for t in range(self.H):
            live = np.flatnonzero(d > tol)
            out[t, live] = d[live]
            cs, ab = tab.states[live], tab.actions[policy[t, live]]
            prob, idx = d[live][:, None], np.zeros((len(live), 1), np.int64)
            for i in range(self.N):
                p_i, c_i = P[cs[:, i], ab[:, i]], nxt[cs[:, i], ab[:, i]]  # [L, K]
                prob = (prob[:, :, None] * p_i[:, None, :]).reshape(len(live), -1)
                idx = (idx[:, :, None] * w.num_cells + c_i[:, None, :]).reshape(len(live), -1)
            d = np.bincount(idx.ravel(), prob.ravel(), minlength=S)
        return out

    # --- planning --------------------------------------------------------------------------------
    def plan(self) -> None:
        """Recompute the optimistic plan from the current counts (joint DP or per-agent values).

        Joint planner: the bonus per (cell, action) is the count bonus, plus ``expand_bonus`` when the
        action can still shrink and blocks a joint action of the optimistic feasible set somewhere, plus
        ``goal_bonus * H`` per try when it blocks a joint action that the optimal plan over the optimistic feasible set
        (count bonus included) takes in a state that plan reaches from the current start states (with
        probability > 1e-4 under the estimated dynamics), plus, once no such action is left (the optimal plan
        is settled), ``resolve_bonus * H`` per try of any action that can still shrink and blocks a joint
        action of the optimistic feasible set (the resolve phase). The plan itself is restricted to certified joint
        actions, so these bonuses direct tries, within the certified set, to where the certified set must
        grow for the learner to reach the optimum (safe expansion as in SafeMDP, Turchetta et al. 2016, and
        SNO-MDP, Wachi & Sui 2020).
        """
        from coopsim.scenarios.coop_game.solver import joint_index, solve, team_reward

        b = self._bonus_va()
        self.plans_made += 1
        self._plan_tries = self.model.tries.copy()
        self._plan_support = self.plausible_support()
        self._plan_observed = self.observed_support()
        if self.mode == "joint":
            T = self.transition_estimate()
            tab = self.ensure_table()
            allowed = tab.safe(self._plan_support)
            cs, ab = tab.states, tab.actions
            R = team_reward(self.world, self.targets)
            self.expanding = np.zeros(b.shape, bool)
            self.goal_expanding = np.zeros(b.shape, bool)
            self.resolving = np.zeros(b.shape, bool)
            if not self.params.greedy:
                shrink = self.can_shrink()
                optimistic = tab.safe(self._plan_observed)  # superset of allowed
                gap = optimistic & ~allowed
                blockers = self._mark(shrink, *np.nonzero(gap)) if gap.any() else np.zeros(b.shape, bool)
                if self.params.expand_bonus > 0:
                    self.expanding = blockers
                # with no gap the optimistic plan takes certified joint actions only: nothing blocks it
                if self.params.goal_bonus > 0 and shrink.any() and gap.any():
                    pair = np.zeros(allowed.shape)
                    for i in range(self.N):
                        pair += b[cs[:, i][:, None], ab[:, i][None, :]]
                    # prefer certified joint actions among ties, so only real gains count as blocking
                    opt = solve(T, R, optimistic, self.H, bonus=pair / self.N + 1e-9 * allowed)
                    starts = joint_index(np.asarray(self.scenario.cells()), self.world.num_cells)
                    reach = self.reach(opt.policy, np.asarray(starts).reshape(-1))
                    tt, ss = np.nonzero(reach > 0)
                    bb = opt.policy[tt, ss]
                    blocked = ~allowed[ss, bb]
                    self.goal_expanding = self._mark(shrink, ss[blocked], bb[blocked])
                if self.params.resolve_bonus > 0 and not self.goal_expanding.any():
                    # the optimal plan is settled: spend tries on every remaining blocker (resolve phase)
                    self.resolving = blockers
                # the joint bonus averages over agents: N * H * goal_bonus makes one agent's try worth H * goal_bonus
                b = (b + self.params.expand_bonus * self.expanding + (self.params.goal_bonus * self.H * self.N) * self.goal_expanding
                     + (self.params.resolve_bonus * self.H * self.N) * self.resolving)
            bonus = np.zeros(allowed.shape)
            for i in range(self.N):
                bonus += b[cs[:, i][:, None], ab[:, i][None, :]]
            bonus /= self.N
            self._plan = solve(T, R, allowed, self.H, bonus=bonus)
            self._allowed = allowed
        else:
            if not self.params.greedy:
                b = b + self.params.expand_bonus * self.can_shrink()
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

    def should_replan(self) -> bool:
        """Whether :meth:`reset` replans (see the ``replan`` param)."""
        if self._plan is None:
            return True
        if self.params.replan == "doubling":
            return self.episodes >= self._next_plan
        t, t0 = self.model.tries, self._plan_tries
        return bool((t >= t0 + np.maximum(t0, 1)).any() or (self.plausible_support() != self._plan_support).any()
                    or (self.observed_support() != self._plan_observed).any())

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
        if self.should_replan():
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
    def episode_metrics(self) -> dict[str, float]:
        """Recorded by the runner each episode: ``plans`` (plans made so far), ``outcomes_removed`` (prior
        outcomes ruled out so far, over all cells and actions), ``expanding_actions`` (cell, action pairs
        with an expansion bonus in the current plan), and for the joint planner on a scenario with
        ``world()`` (evaluation only: it reads the true support, which the learner never uses to act)
        ``conservativeness`` (see :meth:`conservativeness`; recomputed only when a plausible set changed)."""
        sup = self.plausible_support()
        out = {"plans": float(self.plans_made), "outcomes_removed": float(((self.world.prior >= 0) & ~sup).sum())}
        if self.mode == "joint":
            out["expanding_actions"] = float((getattr(self, "expanding", 0) | getattr(self, "goal_expanding", 0)).sum())
            out["resolving_actions"] = float(getattr(self, "resolving", np.zeros(1, bool)).sum())
            if hasattr(self.scenario, "world"):
                key = sup.tobytes()
                if getattr(self, "_cons_key", None) != key:
                    self._cons_key, self._cons = key, self.conservativeness(self.scenario.world().true_prob > 0)
                out["conservativeness"] = self._cons
        return out

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
            raise AssertionError("a certified joint action is not truly safe: the plausible sets lost a true outcome "
                                 "(counts loaded from a policy file learned in another world do this; load() refuses "
                                 "those that record their world, and older ones that contradict this scenario's world)")
        if visited_only and self.visited is not None:
            truly, cert = truly[self.visited], cert[self.visited]
        return float(cert.sum() / max(truly.sum(), 1))

    def policy_state(self) -> dict:
        """What :meth:`save` writes (and a training checkpoint holds under ``"policy"``): the counts (``model``),
        the episodes learned, the world they were learned in (``scenario``: ``{"id", "params"}``,
        :meth:`~coopsim.platform.agent.AgentPlugin.trained_on`, checked by :meth:`load`) and the ``delta``, ``p_min``,
        ``num_runs`` the removal threshold came from (``params``)."""
        return {"format": POLICY_FORMAT, "model": self.model.state_dict(), "episodes": self.episodes,
                "scenario": self.trained_on(),
                "params": {k: getattr(self.params, k) for k in THRESHOLD_PARAMS}}

    def save(self, path):
        from coopsim.platform.trainer import atomic_save

        atomic_save(self.policy_state(), path)

    def load(self, path):
        """Read a ``policy.pt`` written by :meth:`save`, a training ``checkpoint.pt`` or a seed directory.

        The counts are restored into the agent's own ``model`` object, which the agent offered for its scenario
        when it was built (:func:`coopsim.safety.shields.offer_model`): the run's learning ``certificate-v0``
        shield certifies with exactly these counts (``coopsim eval`` / ``coopsim run --checkpoint``).

        The counts hold only in the world they were learned in: a file that records its scenario
        (:meth:`policy_state`) is refused when a scenario param the dynamics depend on differs from this run's
        (:func:`world_mismatch`); an older file without that record loads with a warning that its world cannot be
        checked, and on a scenario that exposes its true dynamics (``world()``, as ``coop_game`` does for evaluation)
        it is refused when its counts contradict them (:meth:`_check_unrecorded_counts`). The removal threshold is
        this agent's own (its ``delta``, ``p_min``, ``num_runs``, as every other param of the config): when it
        differs from the one the file was trained with, a note says so.

        Raises:
            ConfigError: not a graph-safe policy, a key missing from the file, or one of another world (a scenario
                param the counts depend on differs, key ``scenario.params.<k>``; the model's shape differs; or a
                file without the record whose counts contradict this scenario's true dynamics).
        """
        from coopsim.agents.graph_safe.train import read_policy

        d, file = read_policy(path, POLICY_FORMAT, "graph_safe-v0")
        model = _checked_policy(d, file)
        shape = np.shape(model["seen"])
        if shape != self.model.seen.shape:  # names the scenario param that differs (height, num_nodes, ...)
            from coopsim.platform.trainer import policy_size_mismatch

            raise policy_size_mismatch("model_shape", shape, self.model.seen.shape, d.get("scenario"),
                                       self.trained_on(), file=str(file))
        recorded = check_policy_world(d.get("scenario"), self.trained_on(), file, held=(
            "its counts (and the outcomes they ruled out) hold only in the world they were learned in, so the "
            "certificate would not be sound here"))
        n_remove = self._threshold_from_config(d, int(model["n_remove"]), file)
        if not recorded:
            fits = self._check_unrecorded_counts(model, n_remove, file)
            warn_unrecorded_world(file, "graph_safe-v0", "counts from another world make the certificate unsound",
                                  fits_dynamics=fits)
        self.model.load_state_dict(model)
        self.model.n_remove = n_remove
        self.episodes = int(d["episodes"])
        self._plan = None

    def _check_unrecorded_counts(self, model: dict, n_remove: int, file) -> bool:
        """Refuse the counts of a policy file that does not record its world (see :meth:`load`) when this scenario
        exposes its true dynamics (``world()``, evaluation only: nothing the learner acts on) and the counts contradict
        them: an outcome the counts rule out at threshold ``n_remove`` that this world has (the certificate would not be
        sound: the joint planner's ``conservativeness`` check stopped with an AssertionError), or an outcome observed
        that this world never produces. In the world the counts were learned in, neither happens (a wrong removal has
        probability at most ``delta'``). Without ``world()`` nothing can be checked (the warning stands).

        Returns:
            True when the counts were checked against this scenario's true dynamics and fit them; False when the
            scenario has no ``world()``.

        Raises:
            ConfigError: names the file, that it predates the world record, and one contradicting outcome.
        """
        if not hasattr(self.scenario, "world"):
            return False
        truth = (self.scenario.world().true_prob > 0) & (self.world.prior >= 0)  # [V, A, K]
        seen = model["seen"] > 0
        lost = truth & ~seen & (model["tries"] >= n_remove)[..., None]
        foreign = seen & ~truth
        if not (lost.any() or foreign.any()):
            return True
        parts = []
        for what, mask in (("rule out {n} outcome(s) that this world has", lost),
                           ("record {n} outcome(s) that this world never produces", foreign)):
            if mask.any():
                v, a, k = (int(x) for x in np.argwhere(mask)[0])
                parts.append(what.format(n=int(mask.sum())) + f" (e.g. cell {v}, action {a} -> cell "
                             f"{int(self.world.prior[v, a, k])})")
        raise ConfigError(
            f"this graph_safe-v0 policy file predates the world record (written by an older coopsim) and does not fit "
            f"this scenario's world ({self.trained_on().get('id') or 'this scenario'}): its counts {' and '.join(parts)}, so "
            f"they were learned in another world (another scenario.params.world_seed, slip, slippery_frac, size or "
            f"obstacles) and the certificate would not be sound here. Use it with its training run's config.yaml, or "
            f"train in this world", file=str(file))

    def _threshold_from_config(self, d: dict, theirs: int, file) -> int:
        """The removal threshold this agent's ``delta``/``p_min``/``num_runs`` give; a note when the file's differs."""
        import sys

        ours = removal_threshold(int(np.prod(self.model.shape)), self.params.delta, self.params.p_min,
                                 self.params.num_runs)
        if ours != theirs:
            tp = d.get("params") if isinstance(d.get("params"), dict) else {}
            was = ", ".join(f"{k}={tp[k]!r}" for k in THRESHOLD_PARAMS if k in tp)
            now = ", ".join(f"{k}={getattr(self.params, k)!r}" for k in THRESHOLD_PARAMS)
            print(f"note: {file}: the policy was trained with n_remove={theirs} tries" + (f" ({was})" if was else "")
                  + f"; this config's agents.params ({now}) give n_remove={ours}, which the learner now certifies "
                  f"with (the counts are the checkpoint's)", file=sys.stderr)
        return ours


#: the agent params the removal threshold ``n_remove`` is computed from (recorded in the policy file)
THRESHOLD_PARAMS = ("delta", "p_min", "num_runs")

#: scenario params the learned counts do not depend on: the team, its starts and targets, the constraints (the
#: certificate reads them from this run's scenario) and the horizon. Every other param of the scenario a policy
#: file records must equal this run's (:func:`world_mismatch`); on ``coop_game`` those are ``world``, the size
#: (``height``/``width``/``obstacle_frac`` on grids, ``num_nodes`` on graphs), ``slip``, ``slippery_frac`` and
#: ``world_seed``
NOT_WORLD_PARAMS = frozenset({"num_agents", "constraints", "min_dist", "no_swap", "cap", "group_size", "load_frac",
                              "comm_range", "margin", "start_spacing", "max_steps"})
#: params that only one kind of ``coop_game`` world reads (the other kind ignores them)
_WORLD_KIND_PARAMS = {"grid": ("num_nodes",), "graph": ("height", "width", "obstacle_frac")}


def world_mismatch(theirs: dict, ours: dict, ignore: frozenset = NOT_WORLD_PARAMS) -> list[str]:
    """The scenario params (names, in ``ours``' order) that differ between the params a policy file records
    (``theirs``) and this run's (``ours``) and that the learned values depend on: every param except ``ignore``
    (default :data:`NOT_WORLD_PARAMS`, what graph-safe's counts do not depend on; a learner whose values also
    depend on the constraints passes a smaller set) and, on ``coop_game``, those the other world kind ignores. A
    param present in only one of them differs."""
    skip = set(ignore)
    kind = ours.get("world")
    if kind == theirs.get("world"):
        skip.update(_WORLD_KIND_PARAMS.get(kind, ()))
    keys = list(ours) + [k for k in theirs if k not in ours]
    missing = object()
    return [k for k in keys if k not in skip and theirs.get(k, missing) != ours.get(k, missing)]


def check_policy_world(theirs: Any, ours: dict, file, *, held: str, ignore: frozenset = NOT_WORLD_PARAMS) -> bool:
    """Refuse a policy file learned in another world: the safety learners' ``load`` (graph-safe counts, the tabular
    baselines' Q-tables) compares the scenario record the file holds with this run's.

    Args:
        theirs: the file's ``scenario`` record as stored (``{"id", "params"}``,
            :meth:`~coopsim.platform.agent.AgentPlugin.trained_on`); anything else for a file written before the record.
        ours: this run's :meth:`~coopsim.platform.agent.AgentPlugin.trained_on`.
        file: the policy file (named in the error).
        held: what holds only in the file's world and what that breaks here, for the message (e.g. ``"its Q-values
            hold only in the world they were learned in"``).
        ignore: the scenario params not compared (:func:`world_mismatch`; default :data:`NOT_WORLD_PARAMS`).

    Returns:
        True when the file records its world (the same as this run's, as far as :func:`world_mismatch` compares);
        False for a file without the record (nothing was checked: :func:`warn_unrecorded_world`).

    Raises:
        ConfigError: key ``scenario.params.<k>`` (the first param that differs), naming the file's and this
            config's values of up to four of them; or the first param the file records that this coopsim does not
            know (a file from a newer coopsim), naming up to four of them.
    """
    if not isinstance(theirs, dict) or not isinstance(theirs.get("params"), dict):
        return False
    diff = world_mismatch(theirs["params"], ours["params"], ignore)
    unknown = [k for k in diff if k not in ours["params"]]  # ours holds every param this coopsim knows (defaults too)
    if unknown:
        vals = ", ".join(f"{k}={theirs['params'][k]!r}" for k in unknown[:4])
        raise ConfigError(
            f"the policy file records scenario params this coopsim does not know ({vals}): it was written by a newer "
            f"coopsim (or edited by hand), so whether its world is this run's cannot be told; load it with the coopsim "
            f"that trained it", file=str(file), key=f"scenario.params.{unknown[0]}", value=theirs["params"][unknown[0]])
    if diff:
        k = diff[0]
        tp, op = theirs["params"], ours["params"]
        vals = ", ".join(f"scenario.params.{j}={tp.get(j)!r} (this config: {op.get(j)!r})" for j in diff[:4])
        raise ConfigError(
            f"the policy was learned in another world: the checkpoint was trained on {theirs.get('id') or 'a scenario'} "
            f"with {vals}; {held}. Use the checkpoint with its training run's config.yaml, or train in this world",
            file=str(file), key=f"scenario.params.{k}", value=op.get(k))
    return True


def warn_unrecorded_world(file, learner: str, risk: str, fits_dynamics: bool = False) -> None:
    """Warn (stderr) that ``file``, a ``learner`` policy file, does not record its world (:func:`check_policy_world`
    returned False); ``risk``: what a file from another world does here; ``fits_dynamics``: its counts were checked
    against this scenario's true dynamics and fit them (a world with the same dynamics can still differ elsewhere)."""
    import sys

    how = ("so only its counts could be checked (they fit this scenario's true dynamics, which other worlds can "
           "share)" if fits_dynamics else "so its world cannot be checked")
    print(f"warning: {file}: this {learner} policy file does not record the scenario it was learned in "
          f"(written by an older coopsim), {how}: use it only with its training "
          f"run's config.yaml (the same scenario.params.world_seed, slip, slippery_frac, size and obstacles); "
          f"{risk}", file=sys.stderr)


def _checked_policy(d: dict, file) -> dict:
    """The ``model`` part of a graph-safe policy dict, with the keys :meth:`GraphSafeAgent.load` reads checked.

    Raises:
        ConfigError: a key is missing or of the wrong type (names the file and the key).
    """
    from coopsim.platform.trainer import require_policy_keys

    require_policy_keys(d, {"model": dict, "episodes": (int, np.integer)}, file, "graph_safe-v0")
    model = d["model"]
    require_policy_keys(model, {"tries": np.ndarray, "seen": np.ndarray, "n_remove": (int, np.integer)}, file,
                        "graph_safe-v0 (model part)")
    if model["tries"].shape != model["seen"].shape[:2]:
        raise ConfigError(f"graph_safe-v0 policy file is damaged: its model's tries have shape {model['tries'].shape}, "
                          f"its seen counts {model['seen'].shape}", file=str(file))
    return model
