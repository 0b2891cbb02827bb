"""Potential-based goal shaping for MG-MAPF, an :class:`~coopsim.platform.hooks.IntrinsicReward` hook.

MG-MAPF's reward (-1 per step until an agent has visited all its goals) carries no signal until an agent
finishes, which random exploration on a 16x16 map with several goals almost never does. This hook adds
``F = gamma * Phi(o') - Phi(o)`` (Ng, Harada & Russell 1999, "Policy invariance under reward
transformations": potential-based shaping leaves the optimal policies unchanged) with the potential

    Phi(o) = -scale * ( min over goals that count now of |dx| + |dy|  +  per_goal * (goals left) )

read from the agent's own observation (``goal_status`` and ``goal_vec`` of ``mapf/MGMAPF-v0``, the first
``4 K`` entries of the flattened Dict observation); ``Phi = 0`` once the agent has no goal left.
"""
from __future__ import annotations

import torch

from coopsim.platform.hooks import HookContext, IntrinsicReward, RolloutBatch, check_number


class MGMAPFGoalShaping(IntrinsicReward):
    """Goal-distance potential shaping for ``mapf/MGMAPF-v0`` observations.

    Args:
        num_goals: goals per agent K (the scenario's ``num_goals``), 1..32.
        gamma: the trainer's discount (``train.gamma``), in [0, 1]; shaping is policy-invariant only if equal.
        scale: reward units per cell of potential, > 0.
        per_goal: cells of potential per goal left (larger than any distance between goals keeps Phi
            increasing when a goal is visited), > 0.
    """

    def __init__(self, num_goals: int, gamma: float = 0.99, scale: float = 0.1, per_goal: float = 64.0):
        self.k = check_number("num_goals", num_goals, integer=True, ge=1, le=32)
        self.gamma = check_number("gamma", gamma, ge=0, le=1)
        self.scale = check_number("scale", scale, gt=0)
        self.per_goal = check_number("per_goal", per_goal, gt=0)

    def setup(self, ctx: HookContext) -> None:
        """Check the observation layout: the scenario (when its params are known) must be MG-MAPF with this hook's
        ``num_goals``, and the observation must hold the ``4 K`` goal entries.

        Raises:
            ValueError: either check fails.
        """
        if ctx.scenario_params and "num_goals" not in ctx.scenario_params:
            raise ValueError("the scenario is not MG-MAPF (its params have no num_goals): this shaping reads "
                             "mapf/MGMAPF-v0's goal_status and goal_vec observation entries; remove train.intrinsic or "
                             "use an MG-MAPF scenario")
        theirs = ctx.scenario_params.get("num_goals")
        if isinstance(theirs, int) and theirs != self.k:
            raise ValueError(f"num_goals={self.k} differs from the scenario's num_goals={theirs}: the shaping would "
                             f"read the wrong observation entries; give train.intrinsic.params.num_goals: {theirs}")
        if ctx.obs_dim < 4 * self.k:
            raise ValueError(f"observation width {ctx.obs_dim} is too small for num_goals={self.k} (needs >= {4 * self.k})")

    def potential(self, obs: torch.Tensor) -> torch.Tensor:
        """float32 ``[...]`` potential of flattened observations ``[..., D]``."""
        k = self.k
        status = obs[..., : 2 * k].reshape(*obs.shape[:-1], k, 2)
        vec = obs[..., 2 * k: 4 * k].reshape(*obs.shape[:-1], k, 2)
        dist = vec.abs().sum(-1)                                   # [..., K] Manhattan cells
        active = status[..., 1] > 0.5
        nearest = torch.where(active, dist, torch.full_like(dist, float("inf"))).min(-1).values
        nearest = torch.where(torch.isfinite(nearest), nearest, torch.zeros_like(nearest))
        left = (status[..., 0] > 0.5).sum(-1).float()
        return -self.scale * (nearest + self.per_goal * left)

    def reward(self, batch: RolloutBatch) -> torch.Tensor:
        return self.gamma * self.potential(batch.next_obs) - self.potential(batch.obs)
