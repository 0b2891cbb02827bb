"""coopsim MAPPO vs BenchMARL MAPPO on simple_spread (N = 3, 25-step episodes), same step budget, same run.

Both learners train for ``--frames`` environment steps (one per env per step; BenchMARL's "frames") per seed,
one after the other in this process's run (never at the same time: the machine is shared), then act greedily
for ``--episodes`` evaluation episodes. Reported per seed and as mean +- 95% CI half-width over seeds: the
per-agent episode return (sum over the 25 steps of an agent's reward, mean over the 3 agents; BenchMARL's
``eval/agents/reward/episode_reward_mean``) and the training wall time.

* coopsim: ``ppo/mappo-v0`` (shared actor MLP [64, 64] tanh with agent-id one-hot, centralised critic on the
  concatenated observations, value normalisation) on ``mpe/simple_spread-v0`` (full observation), 16 envs x 25
  steps per rollout, lr 7e-4, 4 epochs x 2 minibatches, clip 0.2, entropy 0.01, GAE lambda 0.95, gamma 0.99
  (the settings of ``coopsim.agents.ddacom.train``).
* BenchMARL 1.5.2: its shipped MAPPO defaults (see ``benchmarks/peers/benchmarl_worker.py``) on PettingZoo's
  ``simple_spread_v3`` (pettingzoo 1.24.3, the last release that ships MPE, which torchrl's wrapper imports)
  with ``max_cycles = 25``, in ``bench-venvs/benchmarl`` (created on first use, and rebuilt when BenchMARL does not
  import there, e.g. after an interrupted install; made ready before the first seed trains).

Usage::

    .venv/bin/python benchmarks/mpe_mappo_vs_benchmarl.py --frames 198000 --seeds 3
      -> runs/benchmarks/mpe_mappo_vs_benchmarl.{json,md}

The committed result is ``benchmarks/results/mpe_mappo_vs_benchmarl.{json,md}``: pass
``--out benchmarks/results/mpe_mappo_vs_benchmarl`` to regenerate it (the default keeps a trial run from
overwriting it).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by a test rather than run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_venv import check_writable, ensure_peer_venv, installed_check  # noqa: E402

from coopsim.errors import ConfigError, int_at_least, run_script  # noqa: E402
from coopsim.platform.stats import t_half_width  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: where a run writes by default: runs/ is gitignored, so a trial run never overwrites the committed result
DEFAULT_OUT = ROOT / "runs" / "benchmarks" / "mpe_mappo_vs_benchmarl"
VENV = ROOT / "bench-venvs" / "benchmarl"
PEER_PIP = [["torch==2.13.0"], ["benchmarl==1.5.2"], ["pettingzoo[mpe]==1.24.3"]]
#: what makes ``bench-venvs/benchmarl`` ready: BenchMARL 1.5.2 installed whole (pettingzoo, installed last, too), and
#: what ``peers/benchmarl_worker.py`` imports
PEER_CHECK = "\n".join([
    installed_check("benchmarl", "1.5.2", ("torch", "from benchmarl.algorithms import MappoConfig",
                                           "from benchmarl.environments import PettingZooTask")),
    installed_check("pettingzoo", "1.24.3", ("from pettingzoo.mpe import simple_spread_v3",))])
#: BenchMARL's on-policy frames per batch (its ExperimentConfig default): --frames must be a multiple
FRAMES_PER_BATCH = 6000


def ensure_venv() -> Path:
    """``bench-venvs/benchmarl/bin/python``; the venv is (re)built (torch first, then BenchMARL, then PettingZoo)
    unless BenchMARL and PettingZoo import there (a venv whose install was interrupted is rebuilt, see
    ``_peer_venv``)."""
    return ensure_peer_venv(VENV, PEER_CHECK, PEER_PIP)


def coopsim_mappo(frames: int, seed: int, episodes: int, run_dir: Path) -> dict:
    from coopsim.agents.ppo.agent import MAPPO
    from coopsim.agents.ppo.config import PPOTrainConfig
    from coopsim.agents.ppo.trainer import PPOTrainer
    from coopsim.platform.registry import make_scenario
    from coopsim.platform.trainer import CHECKPOINT_NAME, POLICY_NAME, fit

    cfg = PPOTrainConfig(total_env_steps=frames, num_envs=16, rollout_steps=25, lr=7e-4, epochs=4, minibatches=2,
                         checkpoint_every=20_000, tensorboard=False, progress=False)
    torch.manual_seed(seed)
    core = make_scenario("mpe/simple_spread-v0", num_envs=cfg.num_envs, num_agents=3)
    tr = PPOTrainer(MAPPO(core, hidden=[64, 64]), cfg, seed)
    s = fit(tr, cfg, run_dir, resume=(run_dir / CHECKPOINT_NAME).is_file(), description=f"coopsim mappo seed {seed}")
    ev = make_scenario("mpe/simple_spread-v0", num_envs=episodes, num_agents=3)
    agent = MAPPO(ev, hidden=[64, 64])
    agent.load(run_dir / POLICY_NAME)
    obs = ev.reset(seed=10_000 + seed)
    ret = np.zeros(episodes)
    while not ev.done.all():
        res = ev.step(agent.act(obs)[0])
        ret += res.reward.mean(axis=1)  # mean over agents of each agent's reward: per-agent return
        obs = res.obs
    return {"learner": "coopsim ppo/mappo-v0", "seed": seed, "frames": s["env_steps"], "wall_s": s["wall_time_s"],
            "per_agent_return": float(ret.mean()), "episode_returns": ret.tolist()}


def benchmarl_mappo(frames: int, seed: int, episodes: int, py: Path | None = None) -> dict:
    py = py or ensure_venv()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run([str(py), str(ROOT / "benchmarks" / "peers" / "benchmarl_worker.py"),
                          "--frames", str(frames), "--seed", str(seed), "--episodes", str(episodes)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"BenchMARL worker failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def write(results: list[dict], args, out: Path, t0: float) -> None:
    rows = {}
    for name in ("coopsim ppo/mappo-v0", "benchmarl-1.5.2 MAPPO"):
        rs = [r for r in results if r.get("learner", r.get("peer")) == name and "error" not in r]
        if rs:
            rows[name] = {"per_agent_return": t_half_width([r["per_agent_return"] for r in rs]),
                          "wall_s": t_half_width([r["wall_s"] for r in rs]), "seeds": [r["seed"] for r in rs]}
    from coopsim.platform.recorder import atomic_write_json, atomic_write_text

    atomic_write_json(out.with_suffix(".json"), {
        "args": vars(args), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "total_wall_s": time.time() - t0, "rows": rows, "runs": results}, indent=1)
    lines = [f"# MAPPO on simple_spread (N = 3, 25-step episodes): coopsim vs BenchMARL, {args.frames} frames per seed",
             "", f"`.venv/bin/python benchmarks/mpe_mappo_vs_benchmarl.py --frames {args.frames} --seeds {args.seeds} "
             f"--episodes {args.episodes}{'' if out.resolve() == DEFAULT_OUT.resolve() else f' --out {out}'}` ({time.strftime('%Y-%m-%d', time.gmtime())}, shared 2-core machine under load from "
             f"other jobs, both learners at the niceness of this process (the peer no longer niced 10 more) and one at a time; total wall time {time.time() - t0:.0f} s).", "",
             "Per-agent episode return (sum of an agent's reward over 25 steps, mean over agents; greedy actions, "
             f"{args.episodes} episodes per seed), mean +- 95% CI half-width over seeds.", "",
             "| learner | per-agent return | training wall time (s) | seeds |", "|---|---|---|---|"]
    for name, r in rows.items():
        m, h = r["per_agent_return"]
        w, wh = r["wall_s"]
        lines.append(f"| {name} | {m:.2f} +- {h:.2f} | {w:.0f} +- {wh:.0f} | {r['seeds']} |")
    lines += ["", "Settings: see the docstrings of `benchmarks/mpe_mappo_vs_benchmarl.py` and "
              "`benchmarks/peers/benchmarl_worker.py` (each learner with its own defaults; BenchMARL's lr 5e-5 and "
              "[256, 256] MLPs are tuned for budgets of millions of frames)."]
    atomic_write_text(out.with_suffix(".md"), "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int_at_least(FRAMES_PER_BATCH), default=198_000,
                    help=f"env steps per learner and seed (a multiple of {FRAMES_PER_BATCH}, BenchMARL's batch)")
    ap.add_argument("--seeds", type=int_at_least(1), default=3, help="seeds 0..S-1 (>= 1)")
    ap.add_argument("--episodes", type=int_at_least(1), default=32, help="greedy evaluation episodes per seed")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="path of the report without suffix: writes OUT.json and OUT.md (default "
                         "runs/benchmarks/mpe_mappo_vs_benchmarl; the committed result is "
                         "benchmarks/results/mpe_mappo_vs_benchmarl: pass --out there to regenerate it)")
    ap.add_argument("--run-dir", default=str(ROOT / "runs" / "bench_mappo"))
    a = ap.parse_args(argv)
    if a.frames % FRAMES_PER_BATCH:  # the peer would refuse it only after coopsim's first seed had trained
        raise ConfigError(f"{a.frames} is not a multiple of {FRAMES_PER_BATCH} (BenchMARL's frames per batch); e.g. "
                          f"{max(1, round(a.frames / FRAMES_PER_BATCH)) * FRAMES_PER_BATCH}", key="--frames",
                          value=a.frames)
    check_writable("--out", a.out)  # both before the peer venv and the first seed's training
    check_writable("--run-dir", a.run_dir, folder=True)
    py = ensure_venv()  # before the first seed trains, not after it
    torch.set_num_threads(1)
    t0 = time.time()
    results: list[dict] = []
    for seed in range(a.seeds):
        r = coopsim_mappo(a.frames, seed, a.episodes, Path(a.run_dir) / f"seed-{seed}")
        results.append(r)
        print(f"coopsim seed {seed}: {r['per_agent_return']:.2f} ({r['wall_s']:.0f} s)", flush=True)
        write(results, a, Path(a.out), t0)
        try:
            r = benchmarl_mappo(a.frames, seed, a.episodes, py)
        except RuntimeError as exc:  # keep coopsim's rows; the error is the peer's result
            results.append({"peer": "benchmarl-1.5.2 MAPPO", "seed": seed, "error": str(exc)[-2000:]})
            write(results, a, Path(a.out), t0)
            raise
        results.append(r)
        print(f"benchmarl seed {seed}: {r['per_agent_return']:.2f} ({r['wall_s']:.0f} s)", flush=True)
        write(results, a, Path(a.out), t0)


if __name__ == "__main__":
    run_script(main)
