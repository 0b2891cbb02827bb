"""BenchMARL 1.5.2 side of ``benchmarks/mpe_mappo_vs_benchmarl.py`` (runs inside ``bench-venvs/benchmarl``).

Trains BenchMARL's MAPPO with its shipped default configs (``base_experiment.yaml``, ``mappo.yaml``, MLP
``[256, 256]`` tanh for actor and critic, shared parameters, lr 5e-5, 6000 frames per batch from 10 envs,
45 minibatch iterations of 400) on PettingZoo's ``simple_spread_v3`` (N = 3, local_ratio 0.5, discrete actions)
with ``max_cycles = 25`` for ``--frames`` frames (one frame = one env step), CPU only, no loggers except the
evaluation at the end: ``--episodes`` greedy episodes (BenchMARL's ``evaluation_deterministic_actions``).
Return = BenchMARL's ``eval/agents/reward/episode_reward``: per-agent episode return, mean over the 3 agents.

Prints one JSON line. Usage (normally started by the driver)::

    bench-venvs/benchmarl/bin/python benchmarks/peers/benchmarl_worker.py --frames 198000 --seed 0 --episodes 32
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import torch


GRABBED: dict = {}


def make_grab(callback_cls):
    """A BenchMARL callback (module level: BenchMARL pickles its callbacks) that keeps the per-agent return of
    every evaluation episode, computed as BenchMARL's logger does (cut at the first done, sum over steps, mean
    over the group's agents)."""
    global Grab

    class Grab(callback_cls):
        def on_evaluation_end(self, rollouts):
            lg = self.experiment.logger
            groups = list(self.experiment.group_map)  # PettingZoo MPE: one group, "agent"
            rets = []
            for r in rollouts:
                done = lg._get_global_done(r).squeeze(-1).nonzero(as_tuple=True)[0]
                if done.numel():
                    r = r[: done[0] + 1]
                rets.append(sum(float(lg._get_reward(g, r).sum(0).mean()) for g in groups) / len(groups))
            GRABBED["returns"] = rets

    Grab.__qualname__ = "Grab"
    return Grab


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, required=True, help="multiple of 6000 (BenchMARL's frames per batch)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--episodes", type=int, default=32)
    a = ap.parse_args()
    torch.set_num_threads(1)
    from benchmarl.algorithms import MappoConfig
    from benchmarl.environments import PettingZooTask
    from benchmarl.experiment import Callback, Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    cfg = ExperimentConfig.get_from_yaml()
    if a.frames % cfg.on_policy_collected_frames_per_batch:
        sys.exit(f"--frames must be a multiple of {cfg.on_policy_collected_frames_per_batch}")
    cfg.max_n_frames = a.frames
    cfg.evaluation_interval = a.frames  # one evaluation, after the last batch
    cfg.evaluation_episodes = a.episodes
    cfg.loggers, cfg.render, cfg.create_json, cfg.checkpoint_at_end = [], False, True, False  # evaluation needs a logger or the json
    cfg.save_folder = tempfile.mkdtemp(prefix="benchmarl-")
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update({"max_cycles": 25, "N": 3, "local_ratio": 0.5})
    exp = Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(), model_config=MlpConfig.get_from_yaml(),
                     critic_model_config=MlpConfig.get_from_yaml(), seed=a.seed, config=cfg, callbacks=[make_grab(Callback)()])
    t0 = time.time()
    exp.run()
    wall = time.time() - t0
    rets = GRABBED["returns"]
    print(json.dumps({"peer": "benchmarl-1.5.2 MAPPO", "seed": a.seed, "frames": exp.total_frames, "wall_s": wall,
                      "per_agent_return": sum(rets) / len(rets), "episode_returns": rets,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
