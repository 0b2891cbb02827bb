"""Train MAPPO with DDACOM's decoupled message generator on partial-observation simple_spread; evaluate.

Variants (each trained once per seed with the shared PPO trainer, :mod:`coopsim.agents.ppo`, MAPPO critic on
the concatenated observations, hidden [64, 64]; the comm module is :class:`~coopsim.agents.ddacom.generator.DDACOMGenerator`):

* ``no_comm`` -- no messages (R_no_comm anchor);
* ``broadcast_ideal`` -- raw-observation messages, full broadcast, ideal channel (R_broadcast_ideal anchor);
* ``learned_ddacom`` -- learned 8-float messages, DDACOM's sender, Markov-modulated bandwidth channel;
* ``raw_ddacom`` -- raw-observation messages (23 floats), DDACOM's sender, the same Markov channel.

The Markov channel is ``configs/mpe/channels.yaml``'s ``markov`` entry scaled as in
:mod:`coopsim.agents.ddacom.evaluate` (per-sender capacity 0.15-0.5 x 25600 bit/s = 3840-12800 bit/s, 16-packet
queues, latency bound one step): the same network for every message format. A sender's full-broadcast
demand is ``(N - 1) * copy_bytes * 8 / dt_s``: learned 60 B copies, 9600 bit/s (the channel gives 0.4-1.33x
of it); raw 120 B copies, 19200 bit/s (0.2-0.67x). (Scaled to each format's own demand, 0.15-0.5x would be
0.3-1 copy per step, and a copy that needs more than one step to transmit is always lost at the one-step
latency bound.)

Evaluation (per seed): the trained policy acts greedily in ``--eval-envs`` envs for ``--eval-episodes``
consecutive 25-step episodes over one channel that is not reset between episodes (as in
:func:`coopsim.agents.ddacom.evaluate.run`), on its training channel; normalised return
``(R - R_no_comm) / (R_broadcast_ideal - R_no_comm)`` with the anchors of the same seed.

Usage::

    .venv/bin/python -m coopsim.agents.ddacom.train --seeds 5 --steps 60000 --out runs/ddacom_gen
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError

from coopsim.agents.ddacom.evaluate import ci95, load_channels
from coopsim.agents.ppo.agent import MAPPO
from coopsim.agents.ppo.config import PPOTrainConfig
from coopsim.agents.ppo.trainer import PPOTrainer
from coopsim.comm.ideal import IdealChannel
from coopsim.errors import int_at_least, run_script
from coopsim.platform.recorder import atomic_write_json, check_writable, dumps_json
from coopsim.platform.registry import make_component, make_scenario, pydantic_to_config_error
from coopsim.platform.trainer import CHECKPOINT_NAME, POLICY_NAME, SUMMARY_NAME, fit

GEN = "coopsim.agents.ddacom.generator:DDACOMGenerator"
VARIANTS: dict[str, tuple[dict[str, Any] | None, str]] = {
    "no_comm": (None, "none"),
    "broadcast_ideal": ({"payload": "raw", "sender": "broadcast"}, "ideal"),
    "learned_ddacom": ({"payload": "learned", "sender": "ddacom"}, "markov"),
    "raw_ddacom": ({"payload": "raw", "sender": "ddacom"}, "markov"),
}


def make_agent(variant: str, num_envs: int, radius: float, num_agents: int = 3, policy_reads: str = "attention"):
    """The MAPPO agent of ``variant`` on a fresh partial-observation simple_spread core of ``num_envs`` envs
    (``policy_reads``: the generator's param of that name)."""
    comm, _ = VARIANTS[variant]
    core = make_scenario("mpe/simple_spread-v0", num_envs=num_envs, num_agents=num_agents, obs_radius_m=radius)
    spec = None if comm is None else {"module": GEN, "params": {**comm, "policy_reads": policy_reads}}
    return MAPPO(core, comm=spec, hidden=[64, 64])


def make_channel(variant: str, agent):
    """The variant's channel: None, ideal, or the Markov bandwidth channel scaled to the agent's message demand."""
    kind = VARIANTS[variant][1]
    if kind == "none":
        return None
    if kind == "ideal":
        return IdealChannel()
    cid, params = load_channels(agent.num_agents)[kind]  # the network of the docs/comm.md evaluation
    return make_component("channel", cid, **params)


def train_one(variant: str, seed: int, cfg: PPOTrainConfig, out: Path, radius: float,
              policy_reads: str = "attention") -> dict[str, Any]:
    """Train (or resume, or skip if finished) one (variant, seed); returns the train summary."""
    run_dir = out / variant / f"seed-{seed}"
    if (run_dir / SUMMARY_NAME).is_file():
        s = json.loads((run_dir / SUMMARY_NAME).read_text())
        if s["env_steps"] >= cfg.total_env_steps:
            return s
    torch.manual_seed(seed)
    agent = make_agent(variant, cfg.num_envs, radius, policy_reads=policy_reads)
    channel = make_channel(variant, agent)
    trainer = PPOTrainer(agent, cfg, seed, channel=channel if channel is not None else None)
    return fit(trainer, cfg, run_dir, resume=(run_dir / CHECKPOINT_NAME).is_file(), description=f"{variant} seed {seed}")


def evaluate_policy(variant: str, policy: Path, seed: int, radius: float, num_envs: int, episodes: int,
                    policy_reads: str = "attention") -> dict[str, float]:
    """Greedy evaluation of a trained policy on its training channel (see module docstring)."""
    agent = make_agent(variant, num_envs, radius, policy_reads=policy_reads)
    agent.load(policy)
    core = agent.scenario
    ch = make_channel(variant, agent)
    N = core.num_agents
    if ch is not None:
        ch.reset(seed, num_envs=num_envs, num_agents=N, dt_s=core.dt_s, scenario=core)
    returns = np.zeros((episodes, num_envs))
    t, inbox, slots = 0, None, 0
    for ep in range(episodes):
        obs = core.reset(seed=seed * 100_003 + ep)
        start = t
        while not core.done.all():
            if inbox is not None and len(inbox):
                inbox = inbox.select(np.rint(inbox.t_sent_s / core.dt_s).astype(np.int64) >= start)
            slots += int(np.asarray(core.alive).sum()) * (N - 1)
            actions, out = agent.act(obs, inbox)
            res = core.step(actions)
            if ch is not None:
                ch.send(t, out)
                inbox = ch.deliver(t + 1)
                agent.on_feedback(ch.feedback(t + 1))
            returns[ep] += res.reward.sum(axis=1)
            obs = res.obs
            t += 1
    r: dict[str, float] = {"return": float(returns.mean())}
    if ch is not None:
        s = ch.stats()
        r["copies_offered"] = s.get("comm/offered_copies", 0.0)
        r["copies_lost"] = s.get("comm/lost_copies", 0.0)
        r["bytes_offered"] = s.get("comm/offered_bytes", 0.0)
        r["loss"] = r["copies_lost"] / r["copies_offered"] if r["copies_offered"] else 0.0
        r["messages_vs_broadcast"] = r["copies_offered"] / max(slots, 1)
    return r


def summarize(evals: dict[str, dict[int, dict[str, float]]]) -> dict[str, Any]:
    """Mean and 95% CI half-width over seeds of each variant's metrics and normalised return."""
    seeds = sorted(set(evals["no_comm"]) & set(evals["broadcast_ideal"]))
    r0 = {s: evals["no_comm"][s]["return"] for s in seeds}
    r1 = {s: evals["broadcast_ideal"][s]["return"] for s in seeds}
    out: dict[str, Any] = {"seeds": seeds, "ideal_gap": ci95([r1[s] - r0[s] for s in seeds]), "rows": {}}
    for v, per in evals.items():
        ss = [s for s in seeds if s in per]
        if not ss:
            continue
        row = {"return": ci95([per[s]["return"] for s in ss]),
               "normalized_return": ci95([(per[s]["return"] - r0[s]) / (r1[s] - r0[s]) for s in ss])}
        for k in ("loss", "messages_vs_broadcast", "bytes_offered"):
            if k in per[ss[0]]:
                row[k] = ci95([per[s][k] for s in ss])
        out["rows"][v] = row
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int_at_least(1), default=5, help="number of seeds 0..S-1, >= 1")
    ap.add_argument("--steps", type=int_at_least(1), default=60000, help="env steps per (variant, seed), >= 1")
    ap.add_argument("--num-envs", type=int_at_least(1), default=16)
    ap.add_argument("--radius", type=float, default=0.5, help="partial-observation radius (m)")
    ap.add_argument("--eval-envs", type=int_at_least(1), default=32)
    ap.add_argument("--eval-episodes", type=int_at_least(1), default=10)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--policy-reads", choices=["attention", "slots"], default="attention",
                    help="what the policy reads of the inbox: the receiver's attention summary, or every sender "
                         "slot's payload (the generator's policy_reads)")
    ap.add_argument("--out", default="runs/ddacom_gen",
                    help="results folder: <variant>/seed-<s>/ training runs and results.json")
    a = ap.parse_args(argv)
    variants = [v.strip() for v in a.variants.split(",")]
    bad = [v for v in variants if v not in VARIANTS]
    if bad or not variants:
        ap.error(f"argument --variants: unknown variant(s) {', '.join(map(repr, bad))}; valid: {', '.join(VARIANTS)}")
    check_writable("--out", a.out, folder=True)  # before any training, not at the first seed's mkdir
    torch.set_num_threads(1)
    out = Path(a.out)
    try:
        cfg = PPOTrainConfig(total_env_steps=a.steps, num_envs=a.num_envs, rollout_steps=25, lr=7e-4, epochs=4,
                             minibatches=2, checkpoint_every=10 * 25 * a.num_envs, tensorboard=False, progress=False)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, PPOTrainConfig, file=None, key_prefix="train.") from None
    evals: dict[str, dict[int, dict[str, float]]] = {v: {} for v in variants}
    wall: dict[str, list[float]] = {v: [] for v in variants}
    t0 = time.time()
    for seed in range(a.seeds):  # seeds outermost: an interrupted sweep still has complete seeds
        for v in variants:
            s = train_one(v, seed, cfg, out, a.radius, a.policy_reads)
            wall[v].append(s["wall_time_s"])
            evals[v][seed] = evaluate_policy(v, out / v / f"seed-{seed}" / POLICY_NAME, 10_000 + seed, a.radius,
                                             a.eval_envs, a.eval_episodes, a.policy_reads)
            print(f"seed {seed} {v}: {evals[v][seed]} (train {s['wall_time_s']:.0f} s; total {time.time() - t0:.0f} s)", flush=True)
        result = {"args": vars(a), "train_config": cfg.model_dump(), "seeds_done": seed + 1,
                  "train_wall_s": wall, "evals": {v: {str(k): e for k, e in d.items()} for v, d in evals.items()}}
        if "no_comm" in evals and "broadcast_ideal" in evals:
            result["summary"] = summarize(evals)
        atomic_write_json(out / "results.json", result, indent=1)
    print(dumps_json(result.get("summary", {}), indent=1))


if __name__ == "__main__":
    run_script(main)
