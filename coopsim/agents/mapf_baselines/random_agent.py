"""``mapf/random-v0``: seeded uniformly random MG-MAPF actions."""
from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from coopsim.agents.mapf_baselines.common import splitmix64
from coopsim.platform.agent import AgentParams, AgentPlugin


class RandomMAPFParams(AgentParams):
    """Parameters of ``mapf/random-v0``."""

    seed: int = Field(0, ge=0, le=2**31 - 1, description="seed used when reset() gets none (0..2^31-1)")
    p_wait: float = Field(0.2, ge=0.0, le=1.0, description="probability of the wait action (0..1); the four moves "
                                                           "share the rest equally")


class RandomMAPFAgent(AgentPlugin):
    """Uniformly random moves for every agent of every env (``mapf/random-v0``).

    Each agent waits with probability ``p_wait`` and otherwise takes one of the four moves uniformly
    (moves into walls are waits in the scenario). Draws are counter-based (SplitMix64 chained over
    ``(seed, env, step, agent)``), so they are fully vectorized over ``[E, N]`` and env ``e`` of a batch acts
    exactly as a single env would with the same seed and index; the same seed gives the same actions.

    Args:
        scenario: any scenario with ``Discrete(5)`` actions (MG-MAPF: 0 wait, 1 up, 2 down, 3 left, 4 right).
        **params: :class:`RandomMAPFParams`.
    """

    Params = RandomMAPFParams

    def __init__(self, scenario: Any, **params: Any):
        super().__init__(scenario, **params)
        n = getattr(getattr(scenario, "action_space", None), "n", None)
        if n is not None and int(n) != 5:
            from coopsim.errors import ConfigError

            raise ConfigError(f"mapf/random-v0 moves on grids with Discrete(5) actions (wait, up, down, left, right); "
                              f"this scenario has Discrete({int(n)}): use random-v0 for any discrete scenario",
                              key="agents.id", value="mapf/random-v0")
        self._seed = int(self.params.seed)
        self._t = np.zeros(scenario.num_envs, dtype=np.uint64)
        self._envs = np.arange(scenario.num_envs, dtype=np.uint64)
        self._agents = np.arange(scenario.num_agents, dtype=np.uint64)

    def reset(self, seed: int | None = None) -> None:
        """Restart the draws of every env at step 0 (``seed`` overrides ``params.seed``)."""
        self._seed = int(self.params.seed if seed is None else seed)
        self._t[:] = 0

    def act(self, obs: Any, inbox: Any = None) -> tuple[np.ndarray, None]:
        """int64 ``[E, N]`` actions in 0..4 (no messages)."""
        k_env = splitmix64(splitmix64(np.uint64(self._seed)) ^ self._envs)        # [E]
        k_step = splitmix64(k_env ^ self._t)                                         # [E]
        u = (splitmix64(k_step[:, None] ^ self._agents[None, :]) >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)
        pw = self.params.p_wait
        a = np.where(u < pw, 0, 1 + np.minimum(((u - pw) / max(1.0 - pw, 1e-12) * 4).astype(np.int64), 3))
        self._t += np.uint64(1)
        return a.astype(np.int64), None
