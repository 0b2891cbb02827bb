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
    .venv/bin/python benchmarks/smac_time_to_win.py --resume runs/smac-3m-mappo-ttw-<time>Z-<id>

Prints one line per evaluation and writes ``<run dir>/time_to_win.json`` after every evaluation (per seed: the
evaluations, the first one at or above the target, the final one once the seed is done).

``--resume RUN_DIR`` continues an interrupted run (the trainer's ``--resume``: each unfinished seed from its
``checkpoint.pt``, bit for bit as if never stopped; finished seeds are kept): the run's stored config, seeds and
evaluation settings are used (a ``train.total_env_steps=N`` override may raise the budget, as with
``coopsim train --resume``); evaluations recorded after the checkpoint are dropped and redone. A resumed seed's
training wall time counts the checkpoint's wall time less the evaluation time recorded before it. ``--plot RUN_DIR OUT.png`` draws the greedy win rate of every seed
against env steps and training wall time from a finished run's ``time_to_win.json`` (no training).
"""
from __future__ import annotations

import argparse
import contextlib
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
from coopsim.platform.trainer import CHECKPOINT_NAME, SUMMARY_NAME, fit, load_checkpoint
from coopsim.platform.training import (CONFIG_NAME, build_trainer, resume_config, run_dir_lock, steps_done,
                                       trainable_class, train_config)


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


RESULTS_NAME = "time_to_win.json"


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="?", default=None, help="run config (not with --resume: the run's is used)")
    ap.add_argument("overrides", nargs="*", help="key.path=value overrides (as coopsim train)")
    ap.add_argument("--resume", metavar="RUN_DIR", default=None,
                    help="continue an interrupted run of this script from its checkpoints")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="training seeds (default: the config's)")
    ap.add_argument("--eval-every", type=int, default=None, help="env steps between greedy evaluations (50000)")
    ap.add_argument("--eval-episodes", type=int, default=None, help="episodes per evaluation, one batched core (256)")
    ap.add_argument("--eval-seed", type=int, default=None, help="reset seed of the evaluation core (10000)")
    ap.add_argument("--target", type=float, default=None, help="greedy win rate to reach (0.95)")
    ap.add_argument("--stop", action="store_true", help="stop a seed at the first evaluation >= target")
    args = ap.parse_intermixed_args(argv)
    if args.config is not None and "=" in args.config and args.resume is not None:
        args.overrides.insert(0, args.config)  # `--resume RUN_DIR key=value`: the first override lands in `config`
        args.config = None
    if args.resume is None and args.config is None:
        ap.error("give a run config (or --resume RUN_DIR)")
    if args.resume is not None and args.config is not None:
        ap.error("--resume continues the run's stored config: give no config file, only train.total_env_steps=N")
    return args


def _resume_settings(run_dir: Path, args: argparse.Namespace) -> dict:
    """The stored ``time_to_win.json`` of ``run_dir`` (its seeds and evaluation settings), or, for a run interrupted
    before its first evaluation was written, the command line's settings and the seed directories present.

    Raises:
        ConfigError: ``run_dir`` is not a run of this script, or a settings flag differs from the run's.
    """
    if not (run_dir / CONFIG_NAME).is_file():
        raise ConfigError(f"--resume needs a run directory written by smac_time_to_win.py (with {CONFIG_NAME})",
                          file=str(run_dir))
    path = run_dir / RESULTS_NAME
    if path.is_file():
        try:
            out = json.loads(path.read_text())
            out["per_seed"].items()
        except (ValueError, KeyError, AttributeError, TypeError):
            raise ConfigError(f"{path} is not a time_to_win.json written by smac_time_to_win.py", file=str(path)) \
                from None
        for flag, key in (("seeds", "seeds"), ("eval_every", "eval_every"), ("eval_episodes", "eval_episodes"),
                          ("eval_seed", "eval_seed"), ("target", "target")):
            given = getattr(args, flag)
            if given is not None and key in out and given != out[key]:
                raise ConfigError(f"--resume keeps the run's evaluation settings, but --{flag.replace('_', '-')} "
                                  f"{given} differs from the run's {out[key]}; leave it out", file=str(path),
                                  key=key, value=given)
        if "seeds" not in out:  # written before the seeds were recorded: the ones it lists plus the seed dirs
            out["seeds"] = sorted({int(s) for s in out["per_seed"]} | _seed_dirs(run_dir))
        return {**_settings(args, str(run_dir / CONFIG_NAME), out["seeds"]), **out}
    seeds = args.seeds if args.seeds is not None else sorted(_seed_dirs(run_dir))
    if not seeds:
        raise ConfigError(f"{run_dir} has no seed-<s> directory to resume and no {RESULTS_NAME}; start a new run",
                          file=str(run_dir))
    return _settings(args, str(run_dir / CONFIG_NAME), seeds)


def _seed_dirs(run_dir: Path) -> set[int]:
    return {int(p.name[5:]) for p in run_dir.glob("seed-*") if p.name[5:].lstrip("-").isdigit()}


def _settings(args: argparse.Namespace, config: str, seeds: list[int]) -> dict:
    pick = lambda v, d: d if v is None else v  # noqa: E731
    return {"config": config, "overrides": list(args.overrides), "seeds": list(seeds),
            "target": pick(args.target, 0.95), "eval_episodes": pick(args.eval_episodes, 256),
            "eval_every": pick(args.eval_every, 50_000), "eval_seed": pick(args.eval_seed, 10_000),
            "stop": bool(args.stop), "per_seed": {}}


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--plot"]:
        plot(argv[1], argv[2])
        return 0
    args = _parse(argv)
    with contextlib.ExitStack() as held:
        if args.resume is not None:
            run_dir = Path(args.resume)
            if run_dir.is_dir():
                held.enter_context(run_dir_lock(run_dir))  # two resumes of one run are refused, not mixed
            out = _resume_settings(run_dir, args)
            stored, cfg = resume_config(run_dir, "", list(args.overrides))
            file = str(run_dir / CONFIG_NAME)
            if cfg.train.get("total_env_steps") != stored.train.get("total_env_steps"):
                out["overrides"] = [*out.get("overrides", []), *args.overrides]
        else:
            file = args.config
            cfg = load_config(file, list(args.overrides))
        _, cls = trainable_class(cfg, file=file)
        greedy_params(cls, cfg.agents.id)  # before training: a learner that cannot be evaluated greedily
        schedule = train_config(cfg, cls, file=file)
        if args.resume is None:
            seeds = args.seeds if args.seeds is not None else list(cfg.seeds)
            out = _settings(args, args.config, seeds)
            run_dir = new_run_dir(cfg.out_dir, f"{cfg.name}-ttw")  # <name>-ttw-<UTC time>Z-<id>, as coopsim's
            held.enter_context(run_dir_lock(run_dir))
            atomic_write_text(run_dir / CONFIG_NAME, dump_config(cfg))
        elif cfg.train.get("total_env_steps") != stored.train.get("total_env_steps"):
            atomic_write_text(run_dir / CONFIG_NAME, dump_config(cfg))  # the one change a resume records
        print(f"run directory: {run_dir}", flush=True)
        evaluator = GreedyEvaluator(cfg.scenario.id, cfg.scenario_params(), out["eval_episodes"], out["eval_seed"])
        for seed in out["seeds"]:
            _train_seed(cfg, file, schedule, seed, run_dir, out, evaluator, stop=bool(out.get("stop") or args.stop))
    return 0


def _summary(seed_dir: Path) -> dict | None:
    """The seed's ``train_summary.json`` (a finished training), None when absent or unreadable."""
    try:
        d = json.loads((seed_dir / SUMMARY_NAME).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _train_seed(cfg, file: str, schedule, seed: int, run_dir: Path, out: dict, evaluator: GreedyEvaluator, *,
                stop: bool) -> None:
    """Train (or resume) one seed with a greedy evaluation every ``out["eval_every"]`` env steps, writing
    ``time_to_win.json`` after each; a seed already trained to the budget is left as it is."""
    sub = run_dir / f"seed-{seed}"
    rec = out["per_seed"].get(str(seed), {"evals": [], "first_at_target": None, "final": None})
    done = steps_done(sub) if sub.is_dir() else None
    summary = _summary(sub)
    if done is not None and summary is not None and rec.get("final") is not None \
            and (done >= schedule.total_env_steps or summary.get("stopped_early")):
        why = "stopped at the target" if summary.get("stopped_early") else "already trained"
        print(f"seed {seed}: {why} ({done:,} env steps)", flush=True)
        return
    trainer, _ = build_trainer(cfg, seed, file=file)
    resume = (sub / CHECKPOINT_NAME).is_file()
    wall_before = 0.0
    if resume:  # the evaluations after the checkpoint are redone; the wall time before it is carried over
        ckpt = load_checkpoint(sub / CHECKPOINT_NAME)
        at = int(ckpt.get("env_steps", 0))
        rec["evals"] = [e for e in rec["evals"] if e["env_steps"] <= at]
        eval_before = rec["evals"][-1].get("eval_wall_s", 0.0) if rec["evals"] else 0.0
        wall_before = float(ckpt.get("wall_s", 0.0)) - eval_before
        rec["resumed_from"] = [*rec.get("resumed_from", []), {"env_steps": at, "wall_s": round(wall_before, 1),
                                                             "evaluation_time_known": bool(rec["evals"])}]
        print(f"seed {seed}: resuming at {at:,} env steps", flush=True)
    out["per_seed"][str(seed)] = rec
    every = out["eval_every"]
    last = rec["evals"][-1] if rec["evals"] else {}
    state = {"next": (trainer.env_steps if not resume else int(ckpt.get("env_steps", 0))) // every * every + every,
             "eval_s": last.get("eval_wall_s", 0.0), "t0": time.perf_counter()}

    def on_iteration(tr, metrics) -> bool:
        if tr.env_steps < state["next"] and tr.env_steps < schedule.total_env_steps:
            return False
        state["next"] = tr.env_steps // every * every + every
        t = time.perf_counter()
        win = evaluator.greedy_win_rate(tr.agent)
        state["eval_s"] += time.perf_counter() - t
        wall = wall_before + time.perf_counter() - state["t0"] - (state["eval_s"] - last.get("eval_wall_s", 0.0))
        rec["evals"].append({"env_steps": tr.env_steps, "train_wall_s": round(wall, 1), "greedy_win": win,
                             "eval_wall_s": round(state["eval_s"], 2)})
        rec["first_at_target"] = next((e for e in rec["evals"] if e["greedy_win"] >= out["target"]), None)
        atomic_write_json(run_dir / RESULTS_NAME, out, indent=2)  # an interrupt keeps every evaluation so far
        print(f"seed {seed} steps {tr.env_steps:>8d} train wall {wall:7.1f} s greedy win {win:.3f}", flush=True)
        return bool(stop and win >= out["target"])

    fit(trainer, schedule, sub, resume=resume, description=f"{cfg.name} seed {seed}", on_iteration=on_iteration)
    rec["final"] = rec["evals"][-1] if rec["evals"] else None
    atomic_write_json(run_dir / RESULTS_NAME, out, indent=2)


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(run_script(main))
