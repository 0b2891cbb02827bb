"""Scripted baselines for the SMAC-like scenario: focus fire, and uniform random valid actions.

Both use only the scenario's declared capabilities (``action_masks()``) and its public observation layout
(``enemy_feats``, ``ally_feats``, ``n_enemies``, ``n_allies``, ``unit_type_bits`` of
:class:`~coopsim.scenarios.smac.SMACCore`), never its private state.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from coopsim.errors import ConfigError
from coopsim.platform.agent import AGENT_SEED_MAX, AgentParams, AgentPlugin

_STOP, _NORTH, _SOUTH, _EAST, _WEST = 1, 2, 3, 4, 5
_N_MOVE = 6
#: the observation layout of a ``smac/*`` scenario (:class:`~coopsim.scenarios.smac.SMACCore`) focus fire reads
SMAC_LAYOUT = ("n_enemies", "n_allies", "enemy_feats", "ally_feats", "enemy_shield")


class RandomParams(AgentParams):
    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX, description="seed of the agent's own generator, 0 .. 2**32-1")


class RandomValidAgent(AgentPlugin):
    """Uniform random choice among each agent's available actions (``action_masks()``), batched.

    Works on any coopsim scenario with a ``Discrete`` action space. Seeded: ``reset(seed)`` or ``Params.seed``.
    """

    Params: ClassVar[type[RandomParams]] = RandomParams
    requires: ClassVar[tuple[str, ...]] = ("action_masks",)

    def __init__(self, scenario, **params):
        super().__init__(scenario, **params)
        self.rng = np.random.default_rng(self.params.seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, obs, inbox=None):
        masks = self.scenario.action_masks()
        u = self.rng.random(masks.shape) * masks
        return u.argmax(-1).astype(np.int64), None


def _ally_slot_of(n_agents: int, k: int) -> np.ndarray:
    """int ``[n_agents, k]``: the slot of agent ``j`` in agent ``i``'s ally block (SMAC lists the other agents in
    index order, so agent ``j`` sits in slot ``j`` if ``j < i`` else ``j - 1``), -1 where ``j == i``."""
    i = np.arange(n_agents)[:, None]
    j = np.arange(k)[None, :]
    return np.where(j == i, -1, np.where(j < i, j, j - 1))


class FocusFireParams(AgentParams):
    pass


class FocusFireAgent(AgentPlugin):
    """Scripted focus fire for ``smac/*`` scenarios (the classic SMAC heuristic baseline).

    Each living unit attacks, among the enemies it can attack now, the one with the lowest health + shield
    fraction (ties: lowest index), so units in range of the same enemies fire at the same one. With no
    enemy in range it moves toward the closest visible enemy (the best of N/S/E/W), else east (toward the
    enemy's start in SMAC's layout), else stops. A medivac heals the available ally with the lowest health,
    else follows the closest visible ally.
    """

    Params: ClassVar[type[FocusFireParams]] = FocusFireParams
    requires: ClassVar[tuple[str, ...]] = ("action_masks",)

    def __init__(self, scenario, **params):
        """Raises:
            ConfigError: key ``agents.id``: ``scenario`` is not a ``smac/*`` scenario (it lacks SMAC's observation
                layout :data:`SMAC_LAYOUT`).
        """
        missing = [a for a in SMAC_LAYOUT if not hasattr(scenario, a)]
        if missing:
            from coopsim.platform.trainer import scenario_identity

            sid = scenario_identity(scenario)["id"] or type(scenario).__name__
            raise ConfigError(f"agent 'smac/focus-fire-v0' cannot act on scenario '{sid}': it needs a smac/* scenario "
                              f"(e.g. smac/3m-v0), whose observation layout it reads ({', '.join(missing)}); for any "
                              f"scenario use random-v0 or smac/random-valid-v0",
                              key="agents.id", value="smac/focus-fire-v0")
        super().__init__(scenario, **params)

    def act(self, obs, inbox=None):
        sc = self.scenario
        masks = sc.action_masks()
        obs = np.asarray(obs)
        E, N, _ = obs.shape
        M, Fe, Fa = sc.n_enemies, sc.enemy_feats, sc.ally_feats
        enemy = obs[..., 4:4 + M * Fe].reshape(E, N, M, Fe)
        shield = enemy[..., 5] if sc.enemy_shield else 0.0
        hp = enemy[..., 4] + shield
        can_attack = masks[..., _N_MOVE:]
        # is this agent a healer? its attack slots address allies, so the enemy 'attackable' flag is 0
        # while some action 6+i is available; detect via the own-type bits is map dependent, so use both
        attackable_flag = enemy[..., 0] > 0
        healer = can_attack.any(-1) & ~(attackable_flag & can_attack).any(-1)
        score = np.where(can_attack & attackable_flag, hp, np.inf)
        target = score.argmin(-1)
        has_target = np.isfinite(score.min(-1))
        # move toward the closest visible enemy
        vis = np.abs(enemy[..., 1]) > 0
        dist = np.where(vis, enemy[..., 1], np.inf)
        c = dist.argmin(-1)
        rel = np.take_along_axis(enemy[..., 2:4], c[..., None, None].repeat(2, -1), 2)[..., 0, :]
        any_vis = vis.any(-1)
        move = self._dir_toward(rel, masks)
        east_ok = masks[..., _EAST]
        fallback = np.where(east_ok, _EAST, _STOP)
        act = np.where(has_target, _N_MOVE + target, np.where(any_vis, move, fallback))
        if healer.any():
            A1 = N - 1
            allies = obs[..., 4 + M * Fe:4 + M * Fe + A1 * Fa].reshape(E, N, A1, Fa)
            ahp = np.full((E, N, M), np.inf)
            k = min(M, N)
            for_slot = _ally_slot_of(N, k)
            valid_slot = for_slot >= 0
            h = np.take_along_axis(allies[..., 4], np.maximum(for_slot, 0)[None].repeat(E, 0), 2)
            ahp[..., :k] = np.where(valid_slot[None] & can_attack[..., :k], h, np.inf)
            heal_t = ahp.argmin(-1)
            can_heal = np.isfinite(ahp.min(-1))
            avis = allies[..., 0] > 0
            ad = np.where(avis, allies[..., 1], np.inf)
            ac = ad.argmin(-1)
            arel = np.take_along_axis(allies[..., 2:4], ac[..., None, None].repeat(2, -1), 2)[..., 0, :]
            follow = np.where(avis.any(-1), self._dir_toward(arel, masks), _STOP)
            act = np.where(healer, np.where(can_heal, _N_MOVE + heal_t, follow), act)
        alive = masks[..., 1]
        act = np.where(alive, act, 0)
        # never return an unavailable action
        ok = np.take_along_axis(masks, act[..., None], 2)[..., 0]
        return np.where(ok, act, np.where(alive, _STOP, 0)).astype(np.int64), None

    @staticmethod
    def _dir_toward(rel: np.ndarray, masks: np.ndarray) -> np.ndarray:
        dirs = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], np.float32)  # N, S, E, W
        sim = rel @ dirs.T
        sim = np.where(masks[..., _NORTH:_WEST + 1], sim, -np.inf)
        best = sim.argmax(-1) + _NORTH
        return np.where(np.isfinite(sim.max(-1)), best, _STOP)
