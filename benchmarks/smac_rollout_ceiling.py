"""How far above a trained policy can play on a SMAC map go? One-step rollout improvement of the policy.

A centralised planner that knows the simulator (not the future): at every step of every game it takes K candidate
joint actions, the policy's greedy one and K-1 sampled from it, and plays each R times to the episode's end in copies
of the current state (:meth:`coopsim.scenarios.smac.core.SMACCore.copy_envs`), every copy on a random stream of its
own, so rollouts never see the real game's future target picks or cooldown jitter; the rollouts continue with the
greedy policy. The candidate with the most rollout wins (ties: the highest mean return) is played. This is
Bertsekas' rollout algorithm (one-step lookahead with the base policy as the heuristic; Bertsekas, *Rollout,
Policy Iteration, and Distributed Reinforcement Learning*, 2020, ch. 2), with the candidate set sampled from the
policy as in Tesauro & Galperin (NIPS 1996). With exact rollout values it never does worse than the base policy.
``--per-agent M`` plays per-agent rollout instead: each agent's M most probable other actions are tried with the
others greedy (common random numbers across candidates), and each agent plays its own best if it beats the greedy
action's rollout win rate by ``--margin`` (targets a decentralised actor can be trained on:
``smac_expert_iteration.py``).

What it shows: how much higher the win rate of the map goes when the same policy's own behaviour is chosen with
lookahead, from the same starts as the greedy policy. Unlike ``smac_best_of_k.py`` (many passes through the same
random future, best kept), nothing here sees the real game's randomness, so its win rate is one an actual
controller reaches. It is centralised and searches, so it is a reference for what the game allows, not a result of
decentralised MAPPO.

Usage::

    .venv/bin/python benchmarks/smac_rollout_ceiling.py runs/<training run>/seed-10 --games 128 -k 8 -r 8

Prints the greedy and the planner's win rate on the same starts with Wilson 95% intervals; ``--out F.json`` writes
per-game wins (atomic; a .json file in an existing writable folder, an existing file is overwritten).

The policy must be memoryless (feed-forward, one observation frame): a rollout copy starts from the real game's
state, but a GRU state (``agents.params.recurrent``) or a frame history (``agents.params.stack_frames`` > 1) of the
real game's agent is not copied into the rollout agents, and the candidates' actor inputs are built from one frame;
such policies (and ones with a comm module, whose messages the planner does not deliver) are refused before any game
(:func:`memoryless_policy`).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smac_best_of_k import check_json_out, load_policy, sampling_run, seed_arg, smac_sampling_run  # noqa: E402, F401
from smac_time_to_win import greedy_params  # noqa: E402

from coopsim.agents.ppo.networks import flatten_obs  # noqa: E402
from coopsim.errors import ConfigError, int_at_least, run_script  # noqa: E402
from coopsim.platform import registry  # noqa: E402
from coopsim.platform.recorder import atomic_write_json  # noqa: E402

#: most rollout envs (``games x candidates x r``) of the one batched rollout core
MAX_ROLLOUT_ENVS = 1 << 20


def wilson(wins: float, n: int) -> tuple[float, float]:
    """Wilson score 95% interval of a win rate (``wins`` of ``n``)."""
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.959964, wins / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, c - h), min(1.0, c + h))


def memoryless_policy(cfg, agent_cls, who: str = "the rollout planner") -> None:
    """Refuse a policy with memory or messages, before any game: the planners (:func:`rollout_games`,
    :func:`per_agent_candidates`, ``smac_expert_iteration.py``) copy only the game state into their rollouts and
    build actor inputs from the current observation alone, so a GRU state, a frame history or a comm module's inbox
    would be missing there (deep errors, or silently wrong rollout values).

    Args:
        cfg: the training run's config; agent_cls: its agent factory (class or registry variant, whose defaults
            count).
        who: the caller, for the message.

    Raises:
        ConfigError: key ``agents.params.recurrent`` (true), ``agents.params.stack_frames`` (> 1) or
            ``agents.params.comm`` (set).
    """
    params = {**getattr(agent_cls, "defaults", {}), **(cfg.agents.params or {})}
    fields = agent_cls.Params.model_fields

    def value(key: str):
        return params[key] if key in params else (fields[key].default if key in fields else None)

    def need(train: str) -> str:
        return (f"{who} needs a memoryless (feed-forward, one-frame) policy: its rollouts copy the game's state, not "
                f"the real agent's memory (train one with {train})")

    if value("recurrent"):
        raise ConfigError(f"the policy is recurrent (a GRU state); {need('agents.params.recurrent=false')}",
                          key="agents.params.recurrent", value=value("recurrent"))
    frames = value("stack_frames")
    if frames is not None and int(frames) > 1:
        raise ConfigError(f"the policy reads its last {int(frames)} observations (a frame history); "
                          f"{need('agents.params.stack_frames=1')}", key="agents.params.stack_frames",
                          value=int(frames))
    if value("comm") is not None:
        raise ConfigError(f"the policy has a comm module, whose messages the planner does not deliver; {who} needs "
                          f"a policy without agents.params.comm", key="agents.params.comm", value=value("comm"))


def rollout_values(roll, real, cand: np.ndarray, r: int, keys: np.random.Generator, greedy_roll,
                   crn: bool = False) -> np.ndarray:
    """Rollout value (float64 ``[G, k]``) of each candidate joint action ``cand`` (int64 ``[G, k, A]``) in each of
    ``real``'s ``G`` games: the mean over ``r`` rollouts to the episode's end in ``roll`` (``G * k * r`` envs),
    played on by ``greedy_roll``, of the win (0/1) plus 1e-3 x return / 20 (wins first; the return breaks ties).
    Every rollout draws the enemy's picks and cooldown jitter from a fresh stream of ``keys``; with ``crn`` (common
    random numbers) rollout ``j`` of every candidate of a game shares one stream, so candidates are compared on the
    same futures and their differences have less noise."""
    G, k, A = cand.shape
    src = np.repeat(np.arange(G), k * r)  # roll env g*k*r + c*r + j copies game g, plays candidate c
    if crn:
        stream = np.repeat(keys.integers(1, 2 ** 63, (G, 1, r), dtype=np.uint64), k, axis=1).reshape(-1)
    else:
        stream = keys.integers(1, 2 ** 63, G * k * r, dtype=np.uint64)
    roll.copy_envs(real, src, np.arange(G * k * r), stream_keys=stream)
    res = roll.step(np.repeat(cand.reshape(G * k, A), r, axis=0))
    ret = res.info["team_reward"].astype(np.float64)
    o = res.obs
    while not roll.done.all():
        res = roll.step(greedy_roll.act(o)[0])
        ret += res.info["team_reward"]
        o = res.obs
    won = roll.won.reshape(G, k, r).mean(-1)  # each rollout's own outcome, whenever it ended
    return won + 1e-3 * ret.reshape(G, k, r).mean(-1) / 20.0


def per_agent_candidates(agent, obs, m: int) -> np.ndarray:
    """Candidates (int64 ``[G, 1 + A*m, A]``) for per-agent rollout: the greedy joint action first, then, for each
    agent ``i`` and each of its ``m`` most probable other available actions, the greedy joint action with agent
    ``i``'s action replaced by it (an unavailable or dead agent's slot repeats the greedy action)."""
    flat = flatten_obs(obs, agent.obs_space)
    G, A = flat.shape[:2]
    if not 0 < m < agent.num_actions:
        raise ConfigError(f"per-agent alternatives m={m}: give 1..{agent.num_actions - 1} (the actions beside the "
                          f"greedy one)", key="--per-agent", value=m)
    logits, _, _ = agent.masked_logits(agent.actor_input(flat, None))
    order = torch.argsort(logits, dim=-1, descending=True).reshape(G, A, -1).numpy()
    ok = (torch.gather(logits, 1, torch.as_tensor(order.reshape(G * A, -1)))
          > -1e8).reshape(G, A, -1).numpy()
    alive = np.asarray(agent.scenario.alive)
    greedy = np.where(alive, order[:, :, 0], agent.scenario.noop_action)  # what agent.act(obs) plays greedily
    cand = np.repeat(greedy[:, None], 1 + A * m, axis=1)
    use = ok[:, :, 1:1 + m] & alive[:, :, None]  # [G, A, m]
    g, i, j = np.nonzero(use)
    cand[g, 1 + i * m + j, i] = order[g, i, 1 + j]
    return cand


def rollout_games(seed_dir: str | Path, games: int, k: int, r: int, reset_seed: int = 12345, plan_seed: int = 0,
                  progress: bool = True, policy: str | Path | None = None, record=None, per_agent: int = 0,
                  margin: float = 0.125) -> dict:
    """Greedy and rollout-planner wins (float 0/1 ``[games]`` each) of the PPO policy in ``seed_dir``, both from
    the starts of ``reset_seed``; the greedy games also keep the real random stream of those starts.

    Args:
        policy: a ``policy.pt`` of the same architecture to play instead of ``seed_dir/policy.pt`` (expert
            iteration's later rounds); the run config still comes from ``seed_dir``.
        record: called before every real step of the planner's games as ``record(agent, obs, played, live)``:
            the greedy agent, the observations, the joint action played (int64 ``[games, n_allies]``) and which
            units are alive (bool ``[games, n_allies]``); ``agent.scenario.action_masks()`` are this step's masks.
        per_agent: 0 for the joint planner (``k`` candidates: greedy plus ``k - 1`` sampled joint actions). With
            ``m > 0``, per-agent rollout instead (``k`` is ignored): each agent's greedy action is compared with
            its ``m`` most probable alternatives while the others play greedily (:func:`per_agent_candidates`,
            common random numbers), and every agent plays its own best; one-step policy improvement for each agent
            separately, so each agent's played action is a target its decentralised actor can be trained on.
        margin: per-agent rollout only: an alternative replaces the greedy action only if its rollout value (win
            rate, plus return / 20 x 1e-3) beats the greedy action's by at least this much, so that return
            differences within the rollout noise do not swap actions (docs/smac_training.md measured 0.125).

    Raises:
        ConfigError: ``seed_dir`` is not a PPO training run's seed directory on a SMAC map; its policy has memory
            or a comm module (:func:`memoryless_policy`); more than ``MAX_ROLLOUT_ENVS`` rollout envs (``games x k x r``, with ``per_agent`` k = 1 + agents x per_agent).
    """
    seed_dir = Path(seed_dir)
    cfg, agent_cls = smac_sampling_run(seed_dir, "candidates are sampled from a PPO policy",
                                       "the rollout planner plays SMAC maps")
    memoryless_policy(cfg, agent_cls)  # before any core is built or game played
    params = cfg.scenario_params()
    real = registry.make_scenario(cfg.scenario.id, num_envs=games, **params)
    A = real.n_allies
    if per_agent:
        k = 1 + A * per_agent
    if games * k * r > MAX_ROLLOUT_ENVS:  # before the rollout core allocates them
        what = f"--games x (1 + {A} agents x --per-agent) x -r" if per_agent else "--games x -k x -r"
        raise ConfigError(f"{what} = {games * k * r:,} rollout envs; keep it at most {MAX_ROLLOUT_ENVS:,}",
                          key="--games/--per-agent/-r" if per_agent else "--games/-k/-r",
                          value=f"{games}/{per_agent}/{r}" if per_agent else f"{games}/{k}/{r}")
    roll = registry.make_scenario(cfg.scenario.id, num_envs=games * k * r, **params)

    def agent(core, extra: dict):
        return load_policy(cfg, core, policy if policy is not None else seed_dir / "policy.pt", extra)

    greedy_p = greedy_params(agent_cls, cfg.agents.id)
    greedy_real, sampler, greedy_roll = agent(real, greedy_p), agent(real, {"deterministic": False}), \
        agent(roll, greedy_p)

    # the greedy policy alone from the same starts (and the real games' own streams)
    obs = real.reset(seed=reset_seed)
    greedy_real.reset(reset_seed)
    while not real.done.all():
        obs = real.step(greedy_real.act(obs)[0]).obs
    greedy_wins = np.array([m["win"] for m in real.episode_metrics()], float)

    obs = real.reset(seed=reset_seed)
    sampler.reset(plan_seed)
    keys = np.random.default_rng(plan_seed + 1)
    G = games
    t0, step = time.time(), 0
    dev = np.zeros((len(ACTION_KINDS), len(ACTION_KINDS)), np.int64)  # [greedy kind, played kind] where they differ
    live_steps = 0
    while not real.done.all():
        if per_agent:
            cand = per_agent_candidates(greedy_real, obs, per_agent)
        else:
            cand = np.empty((G, k, A), np.int64)
            cand[:, 0] = greedy_real.act(obs)[0]
            for c in range(1, k):
                cand[:, c] = sampler.act(obs)[0]
        value = rollout_values(roll, real, cand, r, keys, greedy_roll, crn=bool(per_agent))
        if per_agent:  # agent i's own best among the greedy joint action and its m alternatives
            own = np.concatenate([value[:, :1, None].repeat(A, 2),
                                  value[:, 1:].reshape(G, A, per_agent).transpose(0, 2, 1)], axis=1)  # [G, 1+m, A]
            pick = own.argmax(1)  # [G, A]: 0 keeps the greedy action
            pick[own.max(1) < own[:, 0] + margin] = 0  # an alternative must beat the greedy action by the margin
            slot = np.where(pick == 0, 0, 1 + np.arange(A)[None] * per_agent + pick - 1)
            played = cand[np.arange(G)[:, None], slot, np.arange(A)[None]]
        else:
            played = cand[np.arange(G), value.argmax(1)]
        live = (~real.done)[:, None] & (cand[:, 0] != 0)  # a living unit never has no-op available (SMAC's masks)
        differ = live & (played != cand[:, 0])
        np.add.at(dev, (action_kind(cand[:, 0][differ]), action_kind(played[differ])), 1)
        live_steps += int(live.sum())
        if record is not None:
            record(greedy_real, obs, played, live)
        obs = real.step(played).obs
        step += 1
        if progress:
            print(f"  step {step}: {int(real.done.sum())}/{G} games over, {time.time() - t0:.0f} s", file=sys.stderr,
                  flush=True)
    plan_wins = np.array([m["win"] for m in real.episode_metrics()], float)
    return {"greedy": greedy_wins, "planner": plan_wins, "wall_s": time.time() - t0, "steps": step,
            "deviations": dev, "agent_steps": live_steps}


#: SMAC's action kinds: 0 no-op, 1 stop, 2-5 move north/south/east/west, 6+ attack (or heal) unit j
ACTION_KINDS = ("no-op", "stop", "move", "attack")


def action_kind(actions: np.ndarray) -> np.ndarray:
    """Index into :data:`ACTION_KINDS` of SMAC actions (int ``[...]``)."""
    return np.minimum(np.searchsorted([1, 2, 6], actions, side="right"), 3)


def deviation_summary(dev: np.ndarray, agent_steps: int) -> str:
    """One line: the share of living agent-steps where the planner played another action than the greedy policy,
    split by (greedy kind -> played kind), largest first. ``dev`` int ``[4, 4]`` and ``agent_steps`` come from
    :func:`rollout_games`; a move in another direction or an attack on another unit is a deviation within its kind."""
    total = int(dev.sum())
    if agent_steps == 0:
        return "planner deviations: no living agent-steps"
    parts = sorted(((int(dev[a, b]), f"{ACTION_KINDS[a]}->{ACTION_KINDS[b]}") for a in range(4) for b in range(4)
                    if dev[a, b]), reverse=True)
    split = ", ".join(f"{name} {n / total:.0%}" for n, name in parts) if total else "none"
    return (f"planner deviates from the greedy action on {total / agent_steps:.1%} of {agent_steps} living "
            f"agent-steps ({split})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seed_dir", help="a PPO training run's seed-<s> directory (policy.pt; config.yaml above it)")
    ap.add_argument("--games", type=int_at_least(1), default=128, help="games played at once (default 128)")
    ap.add_argument("-k", type=int_at_least(1), default=8, help="candidate joint actions per step (default 8)")
    ap.add_argument("-r", type=int_at_least(1), default=8, help="rollouts per candidate (default 8)")
    ap.add_argument("--per-agent", type=int_at_least(0), default=0, metavar="M",
                    help="per-agent rollout instead of the joint planner: each agent's M most probable other actions "
                         "are tried while the others play greedily, and every agent plays its own best (-k ignored)")
    ap.add_argument("--margin", type=float, default=0.125,
                    help="per-agent rollout: the win-rate gain over the greedy action an alternative needs (0.125)")
    ap.add_argument("--reset-seed", type=seed_arg, default=12345, help="seed of the starts, 0..2**31-1 (12345)")
    ap.add_argument("--plan-seed", type=seed_arg, default=0, help="seed of candidate sampling and rollout streams")
    ap.add_argument("--out", help="write per-game wins as JSON to this .json file in an existing writable folder "
                                  "(an existing file is overwritten)")
    a = ap.parse_args(argv)
    if a.out is not None:  # checked before the games (minutes), never over a run's own files
        check_json_out(a.out)  # the rule of smac_best_of_k.py's --out too
    torch.set_num_threads(1)
    if not math.isfinite(a.margin) or a.margin < 0:
        raise ConfigError(f"--margin {a.margin}: give a finite win-rate gain >= 0", key="--margin", value=a.margin)
    out = rollout_games(a.seed_dir, a.games, a.k, a.r, a.reset_seed, a.plan_seed, per_agent=a.per_agent,
                        margin=a.margin)
    n = a.games
    g, p = out["greedy"], out["planner"]
    lo_g, hi_g = wilson(g.sum(), n)
    lo_p, hi_p = wilson(p.sum(), n)
    print(f"{a.seed_dir}: {n} games (reset seed {a.reset_seed}): greedy {g.mean():.3f} [{lo_g:.3f}, {hi_g:.3f}], "
          f"rollout planner ({f'per-agent m={a.per_agent}' if a.per_agent else f'k={a.k}'}, r={a.r}) "
          f"{p.mean():.3f} [{lo_p:.3f}, {hi_p:.3f}]; planner wins where greedy "
          f"loses: {int(((g == 0) & (p == 1)).sum())}, greedy wins the planner loses: {int(((g == 1) & (p == 0)).sum())}; "
          f"{out['wall_s']:.0f} s")
    print(deviation_summary(out["deviations"], out["agent_steps"]))
    if a.out:
        atomic_write_json(Path(a.out), {"args": vars(a), **out}, indent=1)


if __name__ == "__main__":
    run_script(main)
