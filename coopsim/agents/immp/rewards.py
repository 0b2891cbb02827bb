"""Reward terms of prediction-guided collaborative PPO, as an intrinsic-reward hook of the shared trainer."""
from __future__ import annotations

import torch

from coopsim.platform.hooks import HookContext, IntrinsicReward, RolloutBatch, check_number


class CollaborativeReward(IntrinsicReward):
    """Team term and goal-progress shaping added to the MG-MAPF reward before GAE.

    ``bonus = team_weight * (mean_alive(r) - r_i) + goal_bonus * (remaining_i(o) - remaining_i(o'))``, so the
    agent optimises ``(1 - team_weight) r_i + team_weight * mean_team(r)`` (finished agents still pay for the
    team's delay, which teaches them to make room) plus a potential-based shaping term with potential
    ``-goal_bonus * remaining goals`` (Ng et al. 1999; with gamma close to 1 it leaves optimal policies
    unchanged). ``remaining`` is read from the observation's ``goal_status[:, 0]`` (its first ``2K`` entries).

    Args:
        team_weight: in [0, 1]. goal_bonus: reward units per goal visited, finite, >= 0. num_goals: K.

    Raises:
        ValueError: team_weight or goal_bonus is not a finite number in its range (a bool, nan, inf).
    """

    def __init__(self, team_weight: float, goal_bonus: float, num_goals: int):
        self.team_weight = check_number("team_weight", team_weight, ge=0, le=1)
        self.goal_bonus = check_number("goal_bonus", goal_bonus, ge=0)
        self.k = int(num_goals)

    def setup(self, ctx: HookContext) -> None:
        return None

    def reward(self, batch: RolloutBatch) -> torch.Tensor:
        r, alive = batch.rewards, batch.alive.float()
        team = (r * alive).sum(-1, keepdim=True) / alive.sum(-1, keepdim=True).clamp(min=1.0)
        bonus = self.team_weight * (team - r)
        rem0 = batch.obs[..., 0:2 * self.k:2].sum(-1)
        rem1 = batch.next_obs[..., 0:2 * self.k:2].sum(-1)
        return (bonus + self.goal_bonus * (rem0 - rem1)) * alive

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        return {}
