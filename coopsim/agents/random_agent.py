"""Uniform random team: each alive agent picks uniformly among its available actions (any discrete scenario)."""
from __future__ import annotations

import numpy as np

from coopsim.platform.agent import AgentParams, AgentPlugin


class RandomAgent(AgentPlugin):
    """Uniform over ``scenario.action_masks()``, seeded by ``reset(seed)`` (generator ``default_rng([seed, 1])``)."""

    Params = AgentParams

    def __init__(self, scenario, **params):
        super().__init__(scenario, **params)
        self.rng = np.random.default_rng(0)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng([int(seed), 1])

    def act(self, obs, inbox=None):
        masks = self.scenario.action_masks()
        u = self.rng.random(masks.shape) * masks
        return np.argmax(u, axis=-1).astype(np.int64), None
