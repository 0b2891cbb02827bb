"""Scripted micro on a SMAC-like map: does a hand-written tactic beat plain focus fire? (5m_vs_6m's headroom)

Every rule starts from coopsim's focus fire (:class:`~coopsim.agents.smac_heuristics.FocusFireAgent`: attack the
enemy in range with the lowest health + shield, else walk toward the closest visible enemy) and changes one thing,
using only what an agent observes (SMAC's observation layout, its own health and weapon cooldown):

- ``retreat``: a unit whose health fraction is below ``thr`` and that lost health within the last ``hold`` steps
  walks away from the closest enemy while one is within the enemy's attack range + ``margin`` (the built-in enemy
  keeps its target only while it is in range, so a damaged unit that steps out hands the fire to a healthier one);
- ``hold``: stand still for the first ``hold`` steps instead of advancing (let the enemy come, in its own order);
- ``stutter``: while the own weapon cooldown fraction is above ``thr`` and an enemy is within range + ``margin``,
  step away from the closest enemy (fire, then give ground while reloading).

Each rule plays ``--episodes`` episodes as one batch from ``reset(seed=--seed)``; the table gives the win rate with
a 95 % Wilson interval. Usage::

    .venv/bin/python benchmarks/smac_scripted_micro.py --map 5m_vs_6m --episodes 512

Measured 2026-12-04 (docs/smac_training.md): on 5m_vs_6m every rule wins 0-0.6 % (focus fire 0 %), against
45.5 % for the trained MAPPO policy, so none of these simple tactics is what the learned policy does, and they
give no evidence about how far above 45 % the map allows.
"""
from __future__ import annotations

import argparse
import math

import numpy as np
from rich.console import Console
from rich.table import Table

from coopsim.agents.smac_heuristics import FocusFireAgent
from coopsim.errors import ConfigError, run_script
from coopsim.scenarios.smac import SMACCore
from coopsim.scenarios.smac import units as U
from coopsim.scenarios.smac.maps import MAPS, map_types

_STOP, _N_MOVE = 1, 6
#: a marine's attack range and sight range (map units; SMAX's values, docs/smac.md): the rules' distances
_ENEMY_RANGE, _SIGHT = 5.0, 9.0

#: (rule, params) rows of the default table
RULES: tuple[tuple[str, dict], ...] = (
    ("focus", {}),
    *(("retreat", {"thr": t, "margin": m, "hold": h}) for t in (0.3, 0.5, 0.7, 1.01) for m in (0.5, 1.5)
      for h in (1, 3)),
    *(("hold", {"hold": h}) for h in (5, 10, 20)),
    *(("stutter", {"thr": t, "margin": m}) for t in (0.0, 0.3, 0.6) for m in (-0.5, 0.5, 2.0)),
)


def play(map_name: str, rule: str, params: dict, episodes: int, seed: int) -> np.ndarray:
    """Wins float ``[episodes]`` (1 won, 0 lost or timed out) of ``rule`` on ``map_name``, one batch of envs.

    Raises:
        ConfigError: an unknown rule.
    """
    if rule not in {"focus", "retreat", "hold", "stutter"}:
        raise ConfigError(f"unknown rule {rule!r}; valid: focus, retreat, hold, stutter", key="rule", value=rule)
    core = SMACCore(num_envs=episodes, map_name=map_name, obs_own_cooldown=True)
    ff = FocusFireAgent(core)
    obs = core.reset(seed=seed)
    M, Fe, Fa, A = core.n_enemies, core.enemy_feats, core.ally_feats, core.n_allies
    own = 4 + M * Fe + (A - 1) * Fa  # own health fraction; the own cooldown is the last feature
    prev = obs[..., own].copy()
    last_hit = np.full(obs.shape[:2], -10**6)
    done = np.zeros(episodes, bool)
    win = np.zeros(episodes)
    t = 0
    while not done.all():
        masks = core.action_masks()
        act, _ = ff.act(obs)
        enemy = obs[..., 4:4 + M * Fe].reshape(episodes, A, M, Fe)
        vis = np.abs(enemy[..., 1]) > 0
        dist = np.where(vis, enemy[..., 1], np.inf)  # distance / own sight range
        closest = dist.argmin(-1)
        rel = np.take_along_axis(enemy[..., 2:4], closest[..., None, None].repeat(2, -1), 2)[..., 0, :]
        health = obs[..., own]
        last_hit = np.where(health < prev - 1e-6, t, last_hit)
        prev = health.copy()
        if rule != "focus":
            reach = (_ENEMY_RANGE + params.get("margin", 0.0)) / _SIGHT
            threatened = dist.min(-1) < reach
            if rule == "retreat":
                act = np.where((health < params["thr"]) & (t - last_hit <= params["hold"]) & threatened,
                               FocusFireAgent._dir_toward(-rel, masks), act)
            elif rule == "hold":
                act = np.where((t < params["hold"]) & (act < _N_MOVE) & masks[..., 1], _STOP, act)
            else:
                act = np.where((obs[..., -1] > params["thr"]) & threatened, FocusFireAgent._dir_toward(-rel, masks), act)
        alive = masks[..., 1]
        ok = np.take_along_axis(masks, act[..., None], 2)[..., 0]
        act = np.where(ok, act, np.where(alive, _STOP, 0))
        obs = core.step(act).obs
        t += 1
        now = core.done.copy()
        new = now & ~done
        if new.any():
            win[new] = np.array([m["win"] for m in core.episode_metrics()])[new]
        done |= now
    return win



def wilson(k: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion ``k / n``."""
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--map", default="5m_vs_6m", help="a marine-only map: 3m, 8m, 5m_vs_6m, 8m_vs_9m, ...")
    ap.add_argument("--episodes", type=int, default=512, help="episodes per rule (one batch)")
    ap.add_argument("--seed", type=int, default=0, help="reset seed of the batch")
    a = ap.parse_args(argv)
    marine_maps = sorted(m for m, spec in MAPS.items() if map_types(spec) == (U.MARINE,))
    if a.map not in marine_maps:  # the rules' distances are a marine's range and sight
        raise ConfigError(f"--map must be a marine-only map; valid: {', '.join(marine_maps)}", key="--map",
                          value=a.map)
    if not 1 <= a.episodes <= 65536:  # one batch of envs: 65,536 take about 2 GB
        raise ConfigError("--episodes must be in 1 .. 65536 (one batch of envs)", key="--episodes", value=a.episodes)
    if not 0 <= a.seed <= 2**31 - 1:
        raise ConfigError("--seed must be in 0 .. 2**31 - 1", key="--seed", value=a.seed)
    t = Table(title=f"scripted micro on {a.map}: {a.episodes} episodes per rule, reset seed {a.seed}")
    for c in ("rule", "params", "win rate", "95% CI"):
        t.add_column(c)
    for rule, params in RULES:
        w = play(a.map, rule, params, a.episodes, a.seed)
        lo, hi = wilson(w.sum(), len(w))
        t.add_row(rule, ", ".join(f"{k}={v}" for k, v in params.items()) or "-", f"{w.mean():.1%}",
                  f"[{lo:.1%}, {hi:.1%}]")
    Console().print(t)


if __name__ == "__main__":
    run_script(main)
