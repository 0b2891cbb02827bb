"""Time to a greedy win rate: train a SMAC config seed by seed and evaluate the greedy policy as it trains.

Each seed is trained exactly as ``coopsim train CONFIG`` trains it (same config loader, ``build_trainer`` and
``fit``; the run directory, metrics, checkpoints and ``policy.pt`` are written the same way). Every
``--eval-every`` env steps the current policy is copied into a separate batched core of ``--eval-episodes``
envs (built once; its own reset seed, never the training envs) and played once greedily (PPO: argmax actions,
QMIX: epsilon 0; other learners are refused before training); the greedy win rate,
the env steps and the training wall time (evaluation time excluded) are recorded. With ``--stop``, a seed
stops at the first evaluation at or above ``--target``; otherwise it runs its full budget.

Usage::

    .venv/bin/python benchmarks/smac_time_to_win.py configs/smac/3m-mappo.yaml --seeds 0 1 2 3 4
    .venv/bin/python benchmarks/smac_time_to_win.py configs/smac/3m-mappo.yaml --seeds 0 train.total_env_steps=2000000

Prints one line per evaluation and writes ``<run dir>/time_to_win.json`` (per seed: the evaluations, the first
one at or above the target, the final one). ``--plot RUN_DIR OUT.png`` draws the greedy win rate of every seed
against env steps and training wall time from a finished run's ``time_to_win.json`` (no training).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from coopsim.errors import ConfigError, run_script
from coopsim.platform import registry
from coopsim.platform.config import dump_config, load_config
from coopsim.platform.recorder import atomic_savefig, atomic_write_json, atomic_write_text, new_run_dir
from coopsim.platform.runner import play_episodes, seeded_torch
from coopsim.platform.trainer import fit
from coopsim.platform.training import build_trainer, trainable_class, train_config


#: the acting params that make a learner greedy: PPO (MAPPO/IPPO) argmax actions, QMIX epsilon 0
GREEDY_PARAMS = {"deterministic": True, "epsilon": 0.0}


def greedy_params(agent_cls: type, agent_id: str = "") -> dict:
    """The params overrides that make ``agent_cls`` act greedily (``deterministic: true`` for PPO, ``epsilon: 0``
    for QMIX).

    Raises:
        ConfigError: key ``agents.id``; the learner has neither param.
    """
    fields = agent_cls.Params.model_fields
    over = {k: v for k, v in GREEDY_PARAMS.items() if k in fields}
    if not over:
        raise ConfigError(f"smac_time_to_win cannot evaluate agent '{agent_id or agent_cls.__name__}' greedily: its params "
                          "have neither 'deterministic' (PPO: ppo/mappo-v0, ppo/ippo-v0) nor 'epsilon' (QMIX: qmix/qmix-v0)",
                          key="agents.id", value=agent_id or agent_cls.__name__)
    return over


def copy_weights(src, dst) -> None:
    """Load ``src``'s acting weights into ``dst`` (same class and architecture): ``net``, and the QMIX ``mixer`` and
    a PPO comm module's state when there are."""
    dst.net.load_state_dict(src.net.state_dict())
    if getattr(src, "mixer", None) is not None:
        dst.mixer.load_state_dict(src.mixer.state_dict())
    comm = getattr(src, "comm", None)
    if comm is not None and hasattr(comm, "state_dict"):
        dst.comm.load_state_dict(comm.state_dict())


class GreedyEvaluator:
    """``episodes`` envs of one batched core, built once, each evaluation played once from reset seed ``seed`` by a
    greedy copy of the policy (:func:`greedy_params`: PPO argmax, QMIX epsilon 0;
    :func:`~coopsim.platform.runner.play_episodes`)."""

    def __init__(self, scenario_id: str, scenario_params: dict, episodes: int, seed: int):
        self.core = registry.make_scenario(scenario_id, num_envs=episodes, **scenario_params)
        self.seed = seed
        self._agent = None  # the greedy copy, rebuilt only when the policy's class or params change
        self._params: dict | None = None

    def greedy_win_rate(self, agent) -> float:
        """Mean win over the core's envs of ``agent``'s network weights played greedily.

        Raises:
            ConfigError: ``agent`` is not a learner this script can make greedy (see :func:`greedy_params`), or has
                no ``net`` module.
        """
        params = {**agent.params.model_dump(), **greedy_params(type(agent))}
        if not isinstance(getattr(agent, "net", None), torch.nn.Module):
            raise ConfigError(f"smac_time_to_win cannot evaluate {type(agent).__name__} greedily: it has no `net` "
                              "network whose weights can be copied", key="agents.id", value=type(agent).__name__)
        if self._agent is None or type(self._agent) is not type(agent) or params != self._params:
            with seeded_torch(self.seed):  # the copy's initial weights are overwritten; training's generator is kept
                self._agent, self._params = type(agent)(self.core, **params), params
        copy_weights(agent, self._agent)
        return float(np.mean([m["win"] for m in play_episodes(self.core, self._agent, self.seed)]))


def plot(run_dir: str, out: str) -> None:
    """Greedy win rate per seed vs env steps (left) and vs training wall time (right), target line dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = json.loads((Path(run_dir) / "time_to_win.json").read_text())
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for seed, p in d["per_seed"].items():
        ev = p["evals"]
        axes[0].plot([e["env_steps"] / 1e6 for e in ev], [e["greedy_win"] for e in ev], marker=".", label=f"seed {seed}")
        axes[1].plot([e["train_wall_s"] / 60 for e in ev], [e["greedy_win"] for e in ev], marker=".")
    for ax, xl in zip(axes, ("env steps (M)", "training wall time (min)")):
        ax.axhline(d["target"], ls="--", c="grey", lw=1)
        ax.set_xlabel(xl)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"greedy win rate ({d['eval_episodes']} episodes)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{Path(d['config']).name} {' '.join(d['overrides'])}", fontsize=9)
    fig.tight_layout()
    atomic_savefig(fig, out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--plot"]:
        plot(argv[1], argv[2])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*", help="key.path=value overrides (as coopsim train)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="training seeds (default: the config's)")
    ap.add_argument("--eval-every", type=int, default=50_000, help="env steps between greedy evaluations")
    ap.add_argument("--eval-episodes", type=int, default=256, help="episodes per evaluation (one batched core)")
    ap.add_argument("--eval-seed", type=int, default=10_000, help="reset seed of the evaluation core")
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--stop", action="store_true", help="stop a seed at the first evaluation >= target")
    args = ap.parse_intermixed_args(argv)

    cfg = load_config(args.config, list(args.overrides))
    _, cls = trainable_class(cfg, file=args.config)
    greedy_params(cls, cfg.agents.id)  # before training: a learner that cannot be evaluated greedily
    schedule = train_config(cfg, cls, file=args.config)
    seeds = args.seeds if args.seeds is not None else list(cfg.seeds)
    run_dir = new_run_dir(cfg.out_dir, f"{cfg.name}-ttw")  # <name>-ttw-<UTC time>Z-<id>, as coopsim's run dirs
    atomic_write_text(run_dir / "config.yaml", dump_config(cfg))
    print(f"run directory: {run_dir}", flush=True)
    out: dict = {"config": args.config, "overrides": list(args.overrides), "target": args.target,
                 "eval_episodes": args.eval_episodes, "eval_every": args.eval_every, "per_seed": {}}
    evaluator = GreedyEvaluator(cfg.scenario.id, cfg.scenario_params(), args.eval_episodes, args.eval_seed)
    for seed in seeds:
        trainer, _ = build_trainer(cfg, seed, file=args.config)
        evals: list[dict] = []
        state = {"next": args.eval_every, "eval_s": 0.0, "t0": time.perf_counter()}

        def on_iteration(tr, metrics) -> bool:
            if tr.env_steps < state["next"] and tr.env_steps < schedule.total_env_steps:
                return False
            state["next"] += args.eval_every
            t = time.perf_counter()
            win = evaluator.greedy_win_rate(tr.agent)
            state["eval_s"] += time.perf_counter() - t
            wall = time.perf_counter() - state["t0"] - state["eval_s"]
            evals.append({"env_steps": tr.env_steps, "train_wall_s": round(wall, 1), "greedy_win": win})
            print(f"seed {seed} steps {tr.env_steps:>8d} train wall {wall:7.1f} s greedy win {win:.3f}", flush=True)
            return bool(args.stop and win >= args.target)

        fit(trainer, schedule, run_dir / f"seed-{seed}", description=f"{cfg.name} seed {seed}", on_iteration=on_iteration)
        first = next((e for e in evals if e["greedy_win"] >= args.target), None)
        out["per_seed"][str(seed)] = {"evals": evals, "first_at_target": first, "final": evals[-1] if evals else None}
        atomic_write_json(run_dir / "time_to_win.json", out, indent=2)
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(run_script(main))
