"""``mapf/prioritized-v0``: centralized prioritized planning (space-time A*), replayed step by step."""
from __future__ import annotations

import hashlib
import warnings
from typing import Any, Literal, Optional

import numpy as np
from pydantic import Field

from coopsim.agents.mapf_baselines.common import require_capabilities
from coopsim.agents.mapf_baselines.planner import PlanResult, plan_prioritized
from coopsim.platform.agent import AgentParams, AgentPlugin


def unreachable_agents(blocked: np.ndarray, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """Agents (int64 ``[k]``) with a goal in another 4-connected region of free cells than their start.

    Args:
        blocked: bool ``[H, W]`` walls; starts: int64 ``[N, 2]`` (x, y); goals: int64 ``[N, G, 2]`` (x, y).
    """
    from scipy import ndimage

    region, _ = ndimage.label(~blocked)  # 4-connectivity (the default structure)
    r_start = region[starts[:, 1], starts[:, 0]]
    r_goal = region[goals[..., 1], goals[..., 0]]
    return np.flatnonzero((r_goal != r_start[:, None]).any(axis=1))


class PrioritizedParams(AgentParams):
    """Parameters of ``mapf/prioritized-v0``."""

    priority: Literal["tour_desc", "index", "random"] = Field(
        "tour_desc", description="initial priority order: 'tour_desc' (longest goal tour first), 'index' or 'random'")
    restarts: int = Field(5, ge=0, le=1000, description="further priority orders tried when agents fail (0..1000); "
                                                        "failed agents go first, the rest is shuffled")
    horizon_steps: Optional[int] = Field(None, ge=1, le=1_000_000, description="longest plan in steps (1..1e6); "
                                         "default: the scenario's max_steps")
    max_expansions: int = Field(200_000, ge=100, le=100_000_000, description="A* node budget per agent and attempt "
                                                                             "(100..1e8)")
    time_limit_s: float = Field(60.0, gt=0, le=86_400, description="wall time per instance after which no further "
                                                                   "restart is tried (s, > 0)")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the restart shuffles and of priority='random'")


class PrioritizedAgent(AgentPlugin):
    """Centralized prioritized planner for MG-MAPF (``mapf/prioritized-v0``).

    At ``reset`` it reads every env's instance (``instance(env)`` capability) and plans all agents with
    :func:`coopsim.agents.mapf_baselines.planner.plan_prioritized` (Silver 2005 cooperative A*: agents in a
    priority order, each with space-time A* against a reservation table of the higher-priority paths, swaps
    and finished agents' kept cells included; nearest-neighbour goal tours for ``free`` order). Envs holding
    the same instance share one plan. ``act`` replays the plans by array indexing: the action of env ``e`` at
    its step ``t`` is ``actions[e, t]`` (wait once the plan is over).

    Plans are free of vertex and swap conflicts, so under ``conflicts: allow`` the scenario counts zero
    collisions and under ``block`` nothing is blocked. An agent without a complete plan within the horizon is
    a *plan failure*: it follows a goal-less plan that only gets out of the way (or, as a last resort, waits
    at its start while every other agent plans around it); failures are warned about and listed in
    :meth:`episode_stats` and :attr:`plans`.

    Requires the capability ``instance(env)``; call ``reset`` after each ``scenario.reset``.
    """

    Params = PrioritizedParams
    requires = ("instance",)
    #: replays the plan made at reset without reading observations (a shield that moves an agent breaks it)
    open_loop = True

    def __init__(self, scenario: Any, **params: Any):
        super().__init__(scenario, **params)
        require_capabilities(scenario, self.requires, "mapf/prioritized-v0")
        e = scenario.num_envs
        self.plans: list[PlanResult] = []
        self._actions = np.zeros((e, 1, scenario.num_agents), dtype=np.int64)
        self._t = np.zeros(e, dtype=np.int64)
        self._env_idx = np.arange(e)

    def _horizon(self) -> int:
        if self.params.horizon_steps is not None:
            return int(self.params.horizon_steps)
        ms = getattr(getattr(self.scenario, "params", None), "max_steps", None)
        return int(ms) if ms else 256

    def reset(self, seed: int | None = None) -> None:
        """Plan every env's current instance (``seed`` is unused: plans depend only on the instance and params)."""
        p = self.params
        horizon = self._horizon()
        cache: dict[str, PlanResult] = {}
        self.plans = []
        for e in range(self.scenario.num_envs):
            inst = self.scenario.instance(e)
            blocked = np.asarray(inst.blocked, dtype=bool)
            starts = np.asarray(inst.starts, dtype=np.int64)
            goals = np.asarray(inst.goals, dtype=np.int64).reshape(len(starts), -1, 2)
            h = hashlib.sha1()
            for a in (np.array(blocked.shape), blocked, starts, goals):
                h.update(np.ascontiguousarray(a).tobytes())
            h.update(inst.goal_order.encode())
            key = h.hexdigest()
            if key not in cache:
                cache[key] = plan_prioritized(blocked, starts, goals, inst.goal_order, horizon=horizon, priority=p.priority,
                                              restarts=p.restarts, seed=p.seed, max_expansions=p.max_expansions,
                                              time_limit_s=p.time_limit_s)
                if cache[key].failed.any():
                    r = cache[key]
                    cut = unreachable_agents(blocked, starts, goals)
                    why = (f"; agents {cut[:10].tolist()}{' ...' if len(cut) > 10 else ''} have a goal that walls "
                           f"separate from their start, which no horizon reaches" if len(cut) else "")
                    warnings.warn(f"mapf/prioritized-v0: {int(r.failed.sum())} of {len(r.failed)} agents have no complete "
                                  f"plan within {horizon} steps in env {e} (agents {np.flatnonzero(r.failed)[:10].tolist()}"
                                  f"{' ...' if r.failed.sum() > 10 else ''}); they only keep out of the way{why}",
                                  RuntimeWarning, stacklevel=2)
            self.plans.append(cache[key])
        tmax = max(len(r.paths) - 1 for r in self.plans)
        acts = np.zeros((self.scenario.num_envs, tmax + 1, self.scenario.num_agents), dtype=np.int64)  # last row: wait
        for e, r in enumerate(self.plans):
            a = r.actions()
            acts[e, : len(a)] = a
        self._actions = acts
        self._t[:] = 0

    def act(self, obs: Any, inbox: Any = None) -> tuple[np.ndarray, None]:
        """int64 ``[E, N]``: each env's planned actions at its current step (no messages)."""
        a = self._actions[self._env_idx, np.minimum(self._t, self._actions.shape[1] - 1)]
        self._t += 1
        return a, None

    def episode_metrics(self) -> dict[str, float]:
        """Planning statistics of the current plans (means over envs), deterministic for a seed:
        ``plan/failures`` (agents without a complete plan), ``plan/attempts``, ``plan/expansions``,
        ``plan/soc`` and ``plan/makespan``. The runner adds them to ``metrics.jsonl``.

        ``plan/soc`` and ``plan/makespan`` are means over the envs whose every agent has a complete plan; with no
        such env they are nan (missing: ``metrics.jsonl`` writes null and the summary averages over the episodes
        that have a value), never the -1 of an unfinished agent's ``finish_step`` nor a sum of costs that leaves
        the unfinished agents out. ``plan/failures`` counts the failures."""
        if not self.plans:
            return {}
        r = self.plans
        complete = [x for x in r if len(x.finish_step) == 0 or (x.finish_step >= 0).all()]
        done = [float(x.makespan) for x in complete]
        return {
            "plan/failures": float(np.mean([x.failed.sum() for x in r])),
            "plan/attempts": float(np.mean([x.attempts for x in r])),
            "plan/expansions": float(np.mean([x.expansions for x in r])),
            "plan/soc": float(np.mean([x.soc for x in complete])) if complete else float("nan"),
            "plan/makespan": float(np.mean(done)) if done else float("nan"),
        }

    def episode_timings(self) -> dict[str, float]:
        """``plan/time_s``: mean planning wall time per env (s); the runner writes it to ``timing.jsonl``."""
        return {"plan/time_s": float(np.mean([x.plan_time_s for x in self.plans]))} if self.plans else {}

    def episode_stats(self) -> dict[str, float]:
        """Every planning statistic, wall time included (``episode_metrics`` plus ``episode_timings``)."""
        return {**self.episode_metrics(), **self.episode_timings()}
