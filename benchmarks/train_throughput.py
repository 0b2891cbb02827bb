"""Training throughput of the shared PPO trainer (MAPPO) on MG-MAPF, single thread.

For 8 agents (random 16x16 maps) and 64 agents (the shipped random-32-32-10 map), 2 goals each, it prints
environment steps per second (one step = one env advancing one step, all agents) of:

* ``env only``      -- the scenario core stepped with random valid actions (no policy);
* ``rollout only``  -- the trainer's rollout (policy forward, sampling, critic, resets), no update;
* ``train``         -- rollout + update (GAE, 4 epochs x 4 minibatches of PPO), what training runs at;

and the share of time the update takes, so its cost is visible. Warm-up iterations are not timed.

    .venv/bin/python benchmarks/train_throughput.py [--iters 3] [--num-envs 32] [--rollout 64]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.errors import int_at_least, run_script
from coopsim.platform.registry import make_scenario

CASES = {
    8: dict(map="random", random_size=(16, 16), num_agents=8, num_goals=2, obs_radius=3, max_steps=128),
    64: dict(map="random-32-32-10", num_agents=64, num_goals=2, obs_radius=3, max_steps=256),
}


def env_only_rate(params: dict, num_envs: int, steps: int) -> float:
    core = make_scenario("mapf/MGMAPF-v0", num_envs=num_envs, **params)
    core.reset(seed=0)
    rng = np.random.default_rng(0)
    n = core.num_agents
    t0 = time.perf_counter()
    for _ in range(steps):
        core.step(rng.integers(0, 5, size=(num_envs, n)))
        if core.done.any():
            core.reset(env_ids=np.flatnonzero(core.done))
    return num_envs * steps / (time.perf_counter() - t0)


def train_config(num_envs: int, rollout: int) -> PPOTrainConfig:
    """The trainer settings measured (4 epochs x 4 minibatches); raises pydantic's error for bad sizes."""
    return PPOTrainConfig(total_env_steps=10**9, num_envs=num_envs, rollout_steps=rollout, epochs=4, minibatches=4)


def trainer_rates(params: dict, num_envs: int, rollout: int, iters: int) -> tuple[float, float]:
    core = make_scenario("mapf/MGMAPF-v0", num_envs=num_envs, **params)
    torch.manual_seed(0)
    agent = PPOAgent(core, critic="central", hidden=[64, 64], activation="relu")
    cfg = train_config(num_envs, rollout)
    tr = PPOTrainer(agent, cfg, seed=0)
    tr.train_iteration()  # warm-up
    roll = upd = 0.0
    for _ in range(iters):
        m = tr.train_iteration()
        roll += m["time/rollout_s"]
        upd += m["time/update_s"]
    steps = num_envs * rollout * iters
    return steps / roll, steps / (roll + upd)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int_at_least(1), default=3, help="timed iterations per case (>= 1)")
    ap.add_argument("--num-envs", type=int_at_least(1), default=32)
    ap.add_argument("--rollout", type=int_at_least(1), default=64, help="vector steps per rollout")
    args = ap.parse_args(argv)
    train_config(args.num_envs, args.rollout)  # the trainer's own limits, before the env-only timing
    torch.set_num_threads(1)
    print(f"MAPPO on mapf/MGMAPF-v0, 1 torch thread, E={args.num_envs}, T={args.rollout}, hidden [64, 64], "
          f"4 epochs x 4 minibatches; env steps/s (one env, all agents, one step)")
    print(f"{'agents':>6} {'env only':>10} {'rollout only':>13} {'train':>9} {'update share':>13} {'agent-steps/s (train)':>22}")
    for n, params in CASES.items():
        env = env_only_rate(params, args.num_envs, 200)
        roll, train = trainer_rates(params, args.num_envs, args.rollout, args.iters)
        share = 1.0 - train / roll
        print(f"{n:>6} {env:>10.0f} {roll:>13.0f} {train:>9.0f} {share:>12.0%} {train * n:>22.0f}")


if __name__ == "__main__":
    run_script(main)
