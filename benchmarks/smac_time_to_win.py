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

Prints one line per evaluation and writes ``<run dir>/time_to_win.json`` (the evaluation settings when the run
starts, then after every evaluation: per seed the evaluations, the first one at or above the target, the final one
once the seed is done); the run's ``config.yaml`` lists the seeds it trains. The scenario must be a SMAC map
(``smac/*``: the win rate is SMAC's ``win`` episode metric).

``--resume RUN_DIR`` continues an interrupted run (the trainer's ``--resume``: each unfinished seed from its
``checkpoint.pt``, bit for bit as if never stopped; finished seeds are kept): the run's stored config, seeds and
evaluation settings are used (a ``train.total_env_steps=N`` override may raise the budget, as with
``coopsim train --resume``); evaluations recorded after the checkpoint are dropped and redone. A resumed seed's
training wall time counts the checkpoint's wall time less the evaluation time recorded before it. A seed that was
trained past its last evaluation without this script (``coopsim train --resume`` of the run, which makes no
evaluations) has its ``policy.pt`` evaluated, and that evaluation is its final one. An interrupted run prints the
``--resume`` command that continues it.

``--plot RUN_DIR OUT.png`` draws the greedy win rate of every seed against env steps and training wall time from a
run's ``time_to_win.json`` (no training); OUT's suffix must be an image format (.png, .pdf, .svg, ...).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from coopsim.errors import KEPT_DEFAULT, ConfigError, run_script, whole_number
from coopsim.platform import registry
from coopsim.platform.config import SEED_MAX, RunConfig, blame_override, dump_config, load_config, override_keys
from coopsim.platform.recorder import atomic_savefig, atomic_write_json, atomic_write_text, new_run_dir
from coopsim.platform.runner import play_episodes, seeded_torch
from coopsim.platform.trainer import CHECKPOINT_NAME, POLICY_NAME, SUMMARY_NAME, fit, load_checkpoint
from coopsim.platform.trainer import training_seed_dirs
from coopsim.platform.training import (CONFIG_NAME, build_trainer, resume_config, resume_steps, rounded_budget_note,
                                       run_dir_lock, schedule_warning, steps_done, trainable_class, train_config)


#: the acting params that make a learner greedy: PPO (MAPPO/IPPO) argmax actions, QMIX epsilon 0
GREEDY_PARAMS = {"deterministic": True, "epsilon": 0.0}


def _steps(text: str) -> int:
    """argparse type of ``--eval-every``: a whole number, ``2e6`` too (as ``train.total_env_steps=2e6``); its range
    is checked with the other settings."""
    v = whole_number(text)
    if v is None:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a whole number of env steps is required (e.g. "
                                         "500000 or 5e5)")
    return v


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
    """Greedy win rate per seed vs env steps (left) and vs training wall time (right), target line dashed.

    Raises:
        CoopsimError: ``out``'s suffix is not an image format (checked first); ConfigError: not a run of this
            script, or no evaluation yet.
    """
    from coopsim.agents.ppo.curves import check_image_path

    check_image_path(out)  # before anything is read or drawn: one error line, not matplotlib's traceback
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = _load_results(Path(run_dir) / RESULTS_NAME) if (Path(run_dir) / RESULTS_NAME).is_file() else None
    if d is None:
        raise ConfigError("--plot needs a run directory written by smac_time_to_win.py (with time_to_win.json)",
                          file=str(run_dir))
    if not d["per_seed"] or not any(p["evals"] for p in d["per_seed"].values()):
        raise ConfigError("--plot: the run has no evaluation yet", file=str(Path(run_dir) / RESULTS_NAME))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for seed, p in d["per_seed"].items():
        ev = p["evals"]
        axes[0].plot([e["env_steps"] / 1e6 for e in ev], [e["greedy_win"] for e in ev], marker=".", label=f"seed {seed}")
        axes[1].plot([e.get("train_wall_s", math.nan) / 60 for e in ev], [e["greedy_win"] for e in ev], marker=".")
    for ax, xl in zip(axes, ("env steps (M)", "training wall time (min)")):
        ax.axhline(d.get("target", SETTINGS["target"]), ls="--", c="grey", lw=1)
        ax.set_xlabel(xl)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"greedy win rate ({d.get('eval_episodes', '?')} episodes)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{Path(str(d.get('config', run_dir))).name} {' '.join(map(str, d.get('overrides', [])))}", fontsize=9)
    fig.tight_layout()
    atomic_savefig(fig, out, dpi=110)


RESULTS_NAME = "time_to_win.json"
#: most episodes of one greedy evaluation (one batched core, as ``train.num_envs``)
EVAL_EPISODES_MAX = 65_536
#: the evaluation settings a run records in ``time_to_win.json`` and a resume keeps: flag -> default
SETTINGS = {"eval_every": 50_000, "eval_episodes": 256, "eval_seed": 10_000, "target": 0.95, "stop": False}


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="?", default=None, help="run config (not with --resume: the run's is used)")
    ap.add_argument("overrides", nargs="*", help="key.path=value overrides (as coopsim train)")
    ap.add_argument("--resume", metavar="RUN_DIR", default=None,
                    help="continue an interrupted run of this script from its checkpoints")
    ap.add_argument("--plot", nargs=2, metavar=("RUN_DIR", "OUT_PNG"), default=None,
                    help="draw a run's greedy win rate against env steps and wall time (no training)")
    ap.add_argument("--seeds", nargs="+", default=None, metavar="S", help="training seeds (default: the config's)")
    ap.add_argument("--eval-every", type=_steps, default=None, help="env steps between greedy evaluations (50000)")
    ap.add_argument("--eval-episodes", type=int, default=None,
                    help=f"episodes per evaluation, one batched core, 1..{EVAL_EPISODES_MAX} (256)")
    ap.add_argument("--eval-seed", type=int, default=None, help="reset seed of the evaluation core (10000)")
    ap.add_argument("--target", type=float, default=None, help="greedy win rate to reach, 0..1 (0.95)")
    ap.add_argument("--stop", action="store_const", const=True, default=None,
                    help="stop a seed at the first evaluation >= target")
    args = ap.parse_intermixed_args(argv)
    if args.seeds is not None:  # nargs="+" also takes the overrides (and a config) that follow --seeds
        seeds = []
        for item in args.seeds:
            if "=" in item:
                args.overrides.append(item)
            elif item.lstrip("+-").isdigit():
                seeds.append(int(item))
            elif args.config is None and args.resume is None:
                args.config = item
            else:
                ap.error(f"argument --seeds: invalid int value: {item!r}")
        if not seeds:
            ap.error("argument --seeds: expected at least one integer seed")
        args.seeds = seeds
    if args.config is not None and "=" in args.config and args.resume is not None:
        args.overrides.insert(0, args.config)  # `--resume RUN_DIR key=value`: the first override lands in `config`
        args.config = None
    if args.plot is not None:
        if args.config is not None or args.resume is not None:
            ap.error("--plot draws a finished run: give only --plot RUN_DIR OUT_PNG")
        return args
    if args.resume is None and args.config is None:
        ap.error("give a run config (or --resume RUN_DIR, or --plot RUN_DIR OUT_PNG)")
    if args.resume is not None and args.config is not None:
        ap.error("--resume continues the run's stored config: give no config file, only train.total_env_steps=N")
    bad = _bad_flag(vars(args))
    if bad:
        ap.error(bad)
    return args


def _bad_flag(v: dict) -> str | None:
    """What is wrong with the settings in ``v`` (flags, or a ``time_to_win.json``'s keys), None when all are valid."""
    checks = (("seeds", lambda x: isinstance(x, list) and x and all(type(s) is int and 0 <= s <= SEED_MAX for s in x)
               and len(set(x)) == len(x), f"distinct integer seeds, each 0..{SEED_MAX}"),
              ("eval_every", lambda x: type(x) is int and 1 <= x <= 10**12, "an integer number of env steps >= 1"),
              ("eval_episodes", lambda x: type(x) is int and 1 <= x <= EVAL_EPISODES_MAX,
               f"an integer 1..{EVAL_EPISODES_MAX}"),
              ("eval_seed", lambda x: type(x) is int and 0 <= x <= SEED_MAX, f"an integer 0..{SEED_MAX}"),
              ("target", lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
               and 0 <= x <= 1, "a win rate in [0, 1]"),
              ("stop", lambda x: isinstance(x, bool), "true or false"))
    for key, ok, valid in checks:
        if v.get(key) is not None and not ok(v[key]):
            return f"argument --{key.replace('_', '-')}: invalid value {v[key]!r}: give {valid}"
    return None


def _load_results(path: Path) -> dict:
    """A run's ``time_to_win.json``, its structure checked.

    Raises:
        ConfigError: unreadable, or not a file this script writes (says what is wrong).
    """
    def refuse(why: str):
        return ConfigError(f"not a time_to_win.json written by smac_time_to_win.py ({why}); restore it from a backup, "
                           f"or start a new run", file=str(path))

    try:
        out = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise refuse(f"cannot be read as JSON: {exc}") from None
    if not isinstance(out, dict) or not isinstance(out.get("per_seed"), dict):
        raise refuse("no per_seed mapping")
    for seed, rec in out["per_seed"].items():
        if not seed.lstrip("-").isdigit() or not isinstance(rec, dict) or not isinstance(rec.get("evals"), list) \
                or not all(isinstance(e, dict) and type(e.get("env_steps")) is int
                           and isinstance(e.get("greedy_win"), (int, float)) for e in rec["evals"]):
            raise refuse(f"per_seed entry {seed!r} is not a seed with a list of evaluations")
    bad = _bad_flag(out)
    if bad:
        raise refuse(bad.replace("argument --", "key ").replace("-", "_", 1))
    return out


def _settings(args: argparse.Namespace, config: str, seeds: list[int]) -> dict:
    return {"config": config, "overrides": list(args.overrides), "seeds": list(seeds),
            **{k: d if getattr(args, k) is None else getattr(args, k) for k, d in SETTINGS.items()}, "per_seed": {}}


def _seed_dirs(run_dir: Path) -> set[int]:
    """The seeds of the run's ``seed-<s>/`` directories that hold a checkpoint or metrics."""
    return {int(p.name[5:]) for p in training_seed_dirs(run_dir) if p.name[5:].isdigit()}


def _resume_settings(run_dir: Path, args: argparse.Namespace) -> dict:
    """The evaluation settings and results of the run in ``run_dir`` (its ``time_to_win.json``), checked against the
    command line's flags. A run written before the settings were stored at its start (its ``time_to_win.json``
    came with the first evaluation) and stopped before it resumes only with ``--eval-every`` and
    ``--eval-episodes`` given: they cannot be guessed.

    Raises:
        ConfigError: ``run_dir`` does not exist, is a file, or is not a run of this script; its
            ``time_to_win.json`` is damaged; a flag differs from the run's; a settings-less run without the flags.
    """
    if not run_dir.exists():
        raise ConfigError("--resume: the run directory does not exist; give a directory written by "
                          "smac_time_to_win.py (runs/<name>-ttw-<time>Z-<id>)", file=str(run_dir))
    if not run_dir.is_dir():
        raise ConfigError("--resume: this is a file, not a run directory; give the directory written by "
                          "smac_time_to_win.py (runs/<name>-ttw-<time>Z-<id>)", file=str(run_dir))
    path = run_dir / RESULTS_NAME
    if not (run_dir / CONFIG_NAME).is_file() or (not path.is_file() and "-ttw-" not in run_dir.name):
        hint = (" (a coopsim train run: resume it with coopsim train --resume)"
                if (run_dir / CONFIG_NAME).is_file() else f" (it has no {CONFIG_NAME})")
        raise ConfigError(f"--resume needs a run directory written by smac_time_to_win.py{hint}", file=str(run_dir))
    if path.is_file():
        out = _load_results(path)
        for key in SETTINGS:
            given = getattr(args, key)
            if given is not None and given != out.get(key, SETTINGS[key]):
                flag = f"--{key.replace('_', '-')}"
                raise ConfigError(f"--resume keeps the run's evaluation settings, but {flag} {given} differs from the "
                                  f"run's {out.get(key, SETTINGS[key])}; leave {flag} out", file=str(path), key=key,
                                  value=given)
        if args.seeds is not None and "seeds" in out and args.seeds != out["seeds"]:
            raise ConfigError(f"--resume trains the run's seeds {out['seeds']}, but --seeds gives {args.seeds}; leave "
                              f"--seeds out", file=str(path), key="seeds", value=args.seeds)
        if "seeds" not in out:  # written before the seeds were recorded: the ones it lists plus the seed dirs
            out["seeds"] = sorted({int(s) for s in out["per_seed"]} | _seed_dirs(run_dir))
        return {**_settings(args, str(run_dir / CONFIG_NAME), out["seeds"]), **out}
    missing = [f"--{k.replace('_', '-')}" for k in ("eval_every", "eval_episodes") if getattr(args, k) is None]
    if missing:
        raise ConfigError(f"the run has no {RESULTS_NAME} (written by an earlier version at the first evaluation, "
                          f"and stopped before it): its evaluation settings are unknown; give {' and '.join(missing)} "
                          f"as the run was started", file=str(run_dir))
    seeds = args.seeds if args.seeds is not None else sorted(_seed_dirs(run_dir))
    if not seeds:
        raise ConfigError(f"{run_dir} has no seed-<s> directory to resume and no {RESULTS_NAME}; start a new run",
                          file=str(run_dir))
    return _settings(args, str(run_dir / CONFIG_NAME), seeds)


def _resume_config(run_dir: Path, out: dict, overrides: list[str]) -> tuple[RunConfig, Any, str | None]:
    """The config a resume trains (the stored one, the budget possibly raised by ``overrides``), its schedule, and
    the schedule warning when the budget changes (None otherwise); ``config.yaml`` rewritten with the new budget.

    Raises:
        ConfigError: an override other than the budget (named as the override), a budget below the env steps a
            seed has done.
    """
    file = str(run_dir / CONFIG_NAME)
    try:
        stored, cfg = resume_config(run_dir, "", overrides)
        _, cls = trainable_class(stored, file=file)
        old = train_config(stored, cls, file=file)
        schedule = train_config(cfg, cls, file=file)
    except ConfigError as exc:
        raise blame_override(exc, file, overrides) from None
    _, most = resume_steps(run_dir, out["seeds"], old, schedule)  # a budget below the steps done is refused
    if schedule.total_env_steps == old.total_env_steps:
        return cfg, schedule, None
    atomic_write_text(run_dir / CONFIG_NAME, dump_config(cfg))  # the one change a resume records
    out["overrides"] = merged_overrides(out.get("overrides", []), overrides)
    return cfg, schedule, schedule_warning(old, schedule, most)


def merged_overrides(before: list[str], after: list[str]) -> list[str]:
    """The overrides of ``before`` then ``after``, each key once: an override whose key is given again later is
    dropped (the last value wins, so ``train.total_env_steps`` raised by one ``--resume`` after another is listed
    once), the others kept in order. The list can be passed back to coopsim, which refuses a key given twice."""
    items = [*before, *after]
    keys = [next((k for k, _, _ in override_keys([o])), None) for o in items]  # None: no valid override, kept
    return [o for i, (o, k) in enumerate(zip(items, keys)) if k is None or k not in keys[i + 1:]]


#: the run directory of the run in progress (None before it exists), for the interrupt message
_RUNNING: dict[str, Path | None] = {"run_dir": None}


def interrupted_kept() -> str:
    """What an interrupted run keeps, and the command that continues it (``run_script(main, kept=...)``): the
    script as it was invoked (``smac_time_to_win.py`` or ``mappo_on_smax.py``) with ``--resume <run dir>``."""
    run_dir = _RUNNING["run_dir"]
    if run_dir is None:
        return KEPT_DEFAULT
    exe = os.path.relpath(sys.executable)
    exe = sys.executable if exe.startswith("..") else exe
    return (f"{KEPT_DEFAULT}; continue with: {shlex.quote(exe)} {shlex.quote(sys.argv[0])} --resume "
            f"{shlex.quote(str(run_dir))}")


def main(argv: list[str] | None = None) -> int:
    _RUNNING["run_dir"] = None
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.plot is not None:
        plot(*args.plot)
        return 0
    with contextlib.ExitStack() as held:
        if args.resume is not None:
            run_dir = Path(args.resume)
            if run_dir.is_dir():
                held.enter_context(run_dir_lock(run_dir, "smac_time_to_win"))  # two resumes of one run are refused, not mixed
            out = _resume_settings(run_dir, args)
            cfg, schedule, warning = _resume_config(run_dir, out, list(args.overrides))
            file = str(run_dir / CONFIG_NAME)
            if warning:
                print(warning, file=sys.stderr, flush=True)
        else:
            file = args.config
            cfg = load_config(file, list(args.overrides))
            if args.seeds is not None:  # the run's config.yaml names the seeds it trains
                cfg = cfg.model_copy(update={"seeds": list(args.seeds)})
            try:
                _, cls = trainable_class(cfg, file=file)
                greedy_params(cls, cfg.agents.id)  # before training: a learner that cannot be evaluated greedily
                schedule = train_config(cfg, cls, file=file)
            except ConfigError as exc:
                raise blame_override(exc, file, list(args.overrides)) from None
            out = _settings(args, args.config, list(cfg.seeds))
        if not cfg.scenario.id.startswith("smac/"):
            raise ConfigError(f"smac_time_to_win.py measures the SMAC win rate: scenario.id {cfg.scenario.id!r} is "
                              f"not a SMAC map (smac/3m-v0, ...; coopsim list)", file=file, key="scenario.id",
                              value=cfg.scenario.id)
        # the evaluation core before anything is written: a scenario that cannot be built is refused first
        evaluator = GreedyEvaluator(cfg.scenario.id, cfg.scenario_params(), out["eval_episodes"], out["eval_seed"])
        if args.resume is None and getattr(schedule, "init_policy", None):  # a warm start that cannot load: before
            try:                                                            # the run directory is made
                build_trainer(cfg, cfg.seeds[0], file=file)
            except ConfigError as exc:
                raise blame_override(exc, file, list(args.overrides)) from None
        if args.resume is None:
            run_dir = new_run_dir(cfg.out_dir, f"{cfg.name}-ttw")  # <name>-ttw-<UTC time>Z-<id>, as coopsim's
            held.enter_context(run_dir_lock(run_dir, "smac_time_to_win"))
            atomic_write_text(run_dir / CONFIG_NAME, dump_config(cfg))
            atomic_write_json(run_dir / RESULTS_NAME, out, indent=2)  # the settings, before the first evaluation
        print(f"run directory: {run_dir}", flush=True)
        _RUNNING["run_dir"] = run_dir  # from here on, an interrupt names the --resume command
        for seed in out["seeds"]:
            _train_seed(cfg, file, schedule, seed, run_dir, out, evaluator, stop=bool(out.get("stop")))
    return 0


def _summary(seed_dir: Path) -> dict | None:
    """The seed's ``train_summary.json`` (a finished training), None when absent or unreadable."""
    try:
        d = json.loads((seed_dir / SUMMARY_NAME).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _evaluate_policy(cfg, sub: Path, seed: int, done: int, summary: dict, rec: dict,
                     evaluator: GreedyEvaluator) -> dict:
    """Evaluate the seed's ``policy.pt`` (``done`` env steps) greedily and append it to ``rec["evals"]``; returns
    the evaluation. Its training wall time is the seed's ``train_summary.json`` wall time less the evaluation time
    recorded before (an approximation: the training after the last evaluation ran outside this script)."""
    with seeded_torch(evaluator.seed):
        agent = registry.make_component("agent", cfg.agents.id, evaluator.core, **cfg.agents.params)
    agent.load(str(sub / POLICY_NAME))
    prev = rec["evals"][-1] if rec["evals"] else {}
    t = time.perf_counter()
    win = evaluator.greedy_win_rate(agent)
    eval_s = prev.get("eval_wall_s", 0.0) + time.perf_counter() - t
    entry = {"env_steps": int(done)}
    wall = summary.get("wall_time_s")
    if isinstance(wall, (int, float)) and math.isfinite(wall):
        entry["train_wall_s"] = round(float(wall) - prev.get("eval_wall_s", 0.0), 1)
    entry.update(greedy_win=win, eval_wall_s=round(eval_s, 2), policy=POLICY_NAME)
    rec["evals"].append(entry)
    since = f"the last evaluation at {prev['env_steps']:,}" if prev else "no evaluation"
    print(f"seed {seed} steps {done:>8d} greedy win {win:.3f} (its {POLICY_NAME}: trained past {since} without "
          f"this script, e.g. by coopsim train --resume)", flush=True)
    return entry


def _train_seed(cfg, file: str, schedule, seed: int, run_dir: Path, out: dict, evaluator: GreedyEvaluator, *,
                stop: bool) -> None:
    """Train (or resume) one seed with a greedy evaluation every ``out["eval_every"]`` env steps, writing
    ``time_to_win.json`` after each; a seed already trained to the budget is left as it is."""
    sub = run_dir / f"seed-{seed}"
    rec = out["per_seed"].get(str(seed), {"evals": [], "first_at_target": None, "final": None})
    done = steps_done(sub) if sub.is_dir() else None
    summary = _summary(sub)
    if done is not None and summary is not None and (done >= schedule.total_env_steps or summary.get("stopped_early")):
        # finished (its summary says so): never trained again, whether or not its last evaluation was recorded
        why = "stopped at the target" if summary.get("stopped_early") else "already trained"
        print(f"seed {seed}: {why} ({done:,} env steps)", flush=True)
        last = rec["evals"][-1] if rec["evals"] else None
        if (last is None or last["env_steps"] < done) and (sub / POLICY_NAME).is_file():
            # trained past its last evaluation without this script (coopsim train --resume makes none): the policy
            # it ended with is evaluated now, and is the final one (not the older last evaluation)
            last = _evaluate_policy(cfg, sub, seed, done, summary, rec, evaluator)
            rec["first_at_target"] = next((e for e in rec["evals"] if e["greedy_win"] >= out["target"]), None)
        if rec.get("final") != last:
            rec["final"] = last
            out["per_seed"][str(seed)] = rec
            atomic_write_json(run_dir / RESULTS_NAME, out, indent=2)
        return
    resume = (sub / CHECKPOINT_NAME).is_file()
    trainer, _ = build_trainer(cfg, seed, file=file, warm_start=not resume)
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

    trained = fit(trainer, schedule, sub, resume=resume, description=f"{cfg.name} seed {seed}",
                  on_iteration=on_iteration)
    note = None if resume else rounded_budget_note(trained)  # as coopsim train: whole iterations overshoot the budget
    if note and seed == out["seeds"][0]:  # the same for every seed: said once
        print(note, flush=True)
    rec["final"] = rec["evals"][-1] if rec["evals"] else None
    atomic_write_json(run_dir / RESULTS_NAME, out, indent=2)


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(run_script(main, kept=interrupted_kept))
