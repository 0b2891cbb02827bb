"""What ``coopsim train`` and ``coopsim eval`` call: build a training from a run config and run it.

``train_main`` validates the run config and its ``train:`` section (the schema is the agent class's
``TrainConfig``), builds per seed the batched scenario core (``num_envs`` from ``train``), the agent and
the channel through the registry, asks the agent class for its trainer (``make_trainer``), and drives
it with :func:`coopsim.platform.trainer.fit`. Run directory layout::

    runs/<name>-train-<UTC time>Z-<id>/
        config.yaml            resolved config (what --resume reads)
        train_summary.json     budget, env steps done, wall time per seed and in total
        seed-<s>/metrics.csv, tb/, checkpoint.pt, policy.pt, train_summary.json

``--resume RUN_DIR`` continues every unfinished seed from its last checkpoint: the given config must equal
the run's ``config.yaml`` except for the budget ``train.total_env_steps`` (never below the steps done) and the
progress/TensorBoard switches; anything else is refused before anything is written. The budget is the run's
stored one unless the command line overrides ``train.total_env_steps`` (the YAML file's budget is not used).
With the stored budget the continuation is exact (the same metrics rows as an uninterrupted run); a changed budget
moves schedules that are linear over it (``anneal_lr``, ``ent_coef_end``), so the result then differs from an
uninterrupted run of the new budget (a warning says so).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from coopsim.errors import ConfigError, TrainingDiverged, in_file
from coopsim.platform import registry
from coopsim.platform.config import RunConfig, blame_override, dump_config, load_config
from coopsim.platform.recorder import WriteError, atomic_write_json, atomic_write_text, new_run_dir
from coopsim.platform.report import TIME_TO_WIN_NAME  # the file that marks a smac_time_to_win.py run
from coopsim.platform.trainer import (CHECKPOINT_NAME, METRICS_CSV, POLICY_NAME, SUMMARY_NAME, TrainSchedule,
                                     annealed_lr, entropy_coef, fit, load_checkpoint, training_seed_dirs)

CONFIG_NAME = "config.yaml"


def time_to_win_warning(run_dir: Path) -> str | None:
    """The one-line warning of a ``coopsim train --resume`` of a run written by ``benchmarks/smac_time_to_win.py``
    (its ``time_to_win.json``): training goes on, but without that script's periodic greedy win-rate checks; None
    for any other run."""
    import shlex

    if not (run_dir / TIME_TO_WIN_NAME).is_file():
        return None
    return (f"warning: {run_dir} is a run of benchmarks/smac_time_to_win.py; coopsim train --resume trains it, but "
            f"its periodic greedy win-rate checks are made only by `benchmarks/smac_time_to_win.py --resume "
            f"{shlex.quote(str(run_dir))}` (which also evaluates the policy.pt of a seed trained past its last check)")


def trainable_class(cfg: RunConfig, *, file: str | None = None) -> tuple[Any, type]:
    """The agent factory of ``cfg.agents.id`` and its class, which must provide ``make_trainer`` and ``TrainConfig``.

    Raises:
        ConfigError: the agent cannot be trained (names ``agents.id`` and the trainable ids).
    """
    factory = registry.spec("agent", cfg.agents.id).load()
    cls = factory.cls if isinstance(factory, registry.Variant) else factory
    if not (hasattr(cls, "make_trainer") and hasattr(cls, "TrainConfig")):
        ok = []
        for s in registry.specs("agent"):
            try:
                f = s.load()
            except Exception:  # noqa: BLE001 - a broken optional plugin is not trainable
                continue
            c = f.cls if isinstance(f, registry.Variant) else f
            if hasattr(c, "make_trainer"):
                ok.append(s.id)
        raise ConfigError(f"agent '{cfg.agents.id}' cannot be trained; trainable agent ids: {', '.join(ok) or '(none)'}",
                          file=file, key="agents.id", value=cfg.agents.id)
    return factory, cls


def train_config(cfg: RunConfig, cls: type, *, file: str | None = None) -> TrainSchedule:
    """Validate ``cfg.train`` against ``cls.TrainConfig``; errors name ``train.<key>``."""
    if cfg.train is None:
        raise ConfigError("missing the train: section, e.g. train: {total_env_steps: 200000, num_envs: 16}",
                          file=file, key="train")
    from coopsim.platform.config import reject_bools

    reject_bools(cfg.train, cls.TrainConfig, file=file, key_prefix="train.")
    try:
        return cls.TrainConfig(**cfg.train)
    except ValidationError as exc:
        raise registry.pydantic_to_config_error(exc, cls.TrainConfig, file=file, key_prefix="train.") from None


def build_trainer(cfg: RunConfig, seed: int, *, file: str | None = None, warm_start: bool = True):
    """The trainer of one seed: core (``num_envs`` from ``train``), agent, channel, via the registry.

    With ``train.init_policy`` set and ``warm_start`` (False for a seed a resume continues from its own checkpoint),
    the agent's weights are read from that policy (:func:`warm_start_agent`) before the trainer is made, so a
    trainer that copies them (QMIX's target networks) copies the warm-started ones.

    Raises:
        ConfigError: invalid ``train:`` section or component params, or an ``init_policy`` that cannot be loaded
            into this agent (key ``train.init_policy``).
    """
    import torch

    factory, cls = trainable_class(cfg, file=file)
    train = train_config(cfg, cls, file=file)
    core = registry.make_scenario(cfg.scenario.id, num_envs=int(getattr(train, "num_envs", 1)), **cfg.scenario_params())
    torch.manual_seed(int(seed))  # network initialisation
    agent = factory(core, **cfg.agents.params)
    if warm_start and getattr(train, "init_policy", None):
        warm_start_agent(agent, train.init_policy, file=file)
    channel = registry.make_component("channel", cfg.channel.id, **cfg.channel.params)
    return cls.make_trainer(agent, train, int(seed), channel=channel, file=file), train


def warm_start_agent(agent: Any, policy: str, *, file: str | None = None) -> None:
    """Load ``policy`` (``train.init_policy``: a ``policy.pt``, ``checkpoint.pt`` or ``seed-<s>`` directory) into
    ``agent`` with the plugin's own ``load``, which checks format, sizes and architecture.

    Raises:
        ConfigError: key ``train.init_policy``: missing or unreadable file, another agent's policy, another
            architecture or scenario size, or an agent without learned parameters.
    """
    from coopsim.errors import CoopsimError

    try:
        agent.load(policy)
    except CoopsimError as exc:
        where = f" ({exc.file})" if getattr(exc, "file", None) and str(exc.file) != str(policy) else ""
        msg = getattr(exc, "message", None) or str(exc)
        msg = msg.replace("e.g. --checkpoint ", "e.g. train.init_policy=")  # the loader's hint speaks of eval's flag
        if isinstance(exc, ConfigError) and exc.key:  # e.g. agents.params.hidden: the config key that differs
            msg += f" ({exc.key})"
        raise ConfigError(f"cannot warm-start from {policy}{where}: {msg}", file=file, key="train.init_policy",
                          value=policy) from None


#: keys a resume may change: the budget (checked against the steps done), and what only shows or logs progress or
#: where new runs go (``out_dir`` is not used on resume: the run directory is given)
RESUME_MAY_CHANGE = ("train.total_env_steps", "train.progress", "train.tensorboard", "out_dir")


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
        return out
    return {prefix[:-1]: d}


def steps_done(seed_dir: Path) -> int | None:
    """Env steps a seed directory holds: its summary's (finished), else its checkpoint's; None without either."""
    prev = seed_dir / SUMMARY_NAME
    if prev.is_file():
        try:
            return int(json.loads(prev.read_text())["env_steps"])
        except (ValueError, KeyError, TypeError):
            pass
    ck = seed_dir / CHECKPOINT_NAME
    if not ck.is_file():
        return None
    state = load_checkpoint(ck)
    for d in (state, state.get("trainer") or {}, (state.get("trainer") or {}).get("counters") or {}):
        if isinstance(d, dict) and isinstance(d.get("env_steps"), int):
            return int(d["env_steps"])
    return None


def budget_overridden(overrides: list[str]) -> bool:
    """Whether the command-line ``overrides`` set ``train.total_env_steps`` (or the whole ``train`` section)."""
    from coopsim.platform.config import parse_override

    for text in overrides:
        try:
            parts, value = parse_override(text)
        except ConfigError:
            continue  # load_config reports it
        if parts == ["train", "total_env_steps"] or (parts == ["train"] and isinstance(value, dict)
                                                     and "total_env_steps" in value):
            return True
    return False


def is_training_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` was written by ``coopsim train``: a ``train_summary.json`` or a ``seed-<s>/`` holding a
    checkpoint or training metrics (``coopsim run``/``eval`` directories hold neither)."""
    return (run_dir / SUMMARY_NAME).is_file() or bool(training_seed_dirs(run_dir))


def schedule_warning(old: Any, new: Any, done: int) -> str | None:
    """The warning of a resume that changes the budget from ``old.total_env_steps`` to ``new.total_env_steps`` at
    ``done`` env steps when a schedule is linear over it (``anneal_lr``, ``ent_coef_end``, PPO's ``sticky_eps``
    annealed to 0 at ``sticky_anneal_frac`` of the budget); None otherwise."""
    a, b = int(old.total_env_steps), int(new.total_env_steps)
    if a == b:
        return None
    names, parts = [], []
    if getattr(new, "anneal_lr", False) and getattr(new, "lr", None) is not None:
        parts.append(f"lr from {annealed_lr(old, done):.3g} to {annealed_lr(new, done):.3g}")
    if getattr(new, "ent_coef_end", None) is not None and getattr(new, "ent_coef", None) is not None:
        parts.append(f"entropy coefficient from {entropy_coef(old, done):.3g} to {entropy_coef(new, done):.3g}")
    if parts:
        names.append("lr/entropy")
    if getattr(new, "sticky_eps", 0) and getattr(new, "sticky_anneal_frac", None):
        def eps(c: Any) -> float:  # as coopsim.agents.ppo.config.sticky_eps (the platform does not import agents)
            return float(c.sticky_eps * max(1.0 - done / (c.sticky_anneal_frac * c.total_env_steps), 0.0))
        if eps(old) != eps(new):
            names.append("sticky-action eps")
            parts.append(f"sticky-action eps from {eps(old):.3g} to {eps(new):.3g}")
    if not parts:
        return None
    direction = "raising" if b > a else "lowering"
    moves = "back up" if b > a else "down"
    return (f"warning: {'/'.join(names)} schedules are linear over train.total_env_steps; {direction} it from {a:,} "
            f"to {b:,} moves them {moves} at {done:,} env steps ({' and '.join(parts)}): the result differs from an "
            f"uninterrupted run of {b:,} steps")


def resume_config(run_dir: Path, config_path: str, overrides: list[str]) -> tuple[RunConfig, RunConfig]:
    """The run's stored config and the effective one (file + overrides), checked to differ at most in
    :data:`RESUME_MAY_CHANGE`. Nothing is written.

    Raises:
        ConfigError: no stored config, or another difference (names the key and both values).
    """
    file = str(run_dir / CONFIG_NAME)
    if not (run_dir / CONFIG_NAME).is_file():
        why = ("does not exist" if not run_dir.exists() else "is not a directory" if not run_dir.is_dir()
               else f"has no {CONFIG_NAME}")
        raise ConfigError(f"--resume: {run_dir} {why}; --resume needs a run directory written by coopsim train "
                          f"(with {CONFIG_NAME})", file=str(run_dir))
    stored = load_config(file)
    given = load_config(str(config_path), overrides) if config_path else load_config(file, overrides)
    if isinstance(given.train, dict):  # a quoted '0.5' is refused as such, not as a difference from the run's 0.5
        from coopsim.platform.config import reject_quoted_scalars

        try:
            cls = trainable_class(given)[1]
        except ConfigError:  # another agent: the difference below names it
            cls = None
        if cls is not None:
            shown = str(config_path) if config_path else file
            try:
                reject_quoted_scalars(given.train, cls.TrainConfig, file=shown, key_prefix="train.")
            except ConfigError as exc:
                raise blame_override(exc, shown, overrides) from None
    if not budget_overridden(overrides) and isinstance(stored.train, dict) and isinstance(given.train, dict) \
            and "total_env_steps" in stored.train:
        # the budget is the run's stored one unless the command line sets train.total_env_steps: the YAML file's
        # budget (e.g. 3M) must not silently replace the one an earlier override gave the run (e.g. 40k)
        given = given.model_copy(update={"train": {**given.train, "total_env_steps": stored.train["total_env_steps"]}})
    a = _flat(stored.model_dump(mode="json", exclude_none=True))
    b = _flat(given.model_dump(mode="json", exclude_none=True))
    missing = object()
    diffs = [(key, a.get(key, missing), b.get(key, missing)) for key in list(a) + [k for k in b if k not in a]
             if a.get(key, missing) != b.get(key, missing) and key not in RESUME_MAY_CHANGE]
    if diffs:
        def show(v: Any, flat: dict[str, Any] | None = None, key: str = "") -> str:
            if v is not missing:
                return repr(v)
            # a key the flattening left out because its value is a mapping (train.intrinsic: {module, params}): the
            # mapping, not "(not set)"
            sub = {k[len(key) + 1:]: x for k, x in (flat or {}).items() if k.startswith(key + ".")}
            return repr(sub) if sub else "(not set)"

        key, old, new = diffs[0]
        more = ""
        if len(diffs) > 1:  # every difference at once: the user fixes them in one go, not one per attempt
            more = (f"; {len(diffs) - 1} more key(s) differ: " + ", ".join(
                f"{k} (run: {show(o, a, k)}, new: {show(n, b, k)})" for k, o, n in diffs[1:9])
                + (" ..." if len(diffs) > 9 else ""))
        raise ConfigError(f"--resume continues the run's stored config exactly, but the run has {key} "
                          f"{show(old, a, key)} and the new config has {key} {show(new, b, key)}{more}; give the config the run was started with (only "
                          f"the budget train.total_env_steps may change), or start a new run without --resume",
                          file=str(run_dir), key=key, value=None if new is missing else new)
    return stored, given


def resume_steps(run_dir: Path, seeds: list[int], old: Any, new: Any) -> tuple[dict[int, int | None], int]:
    """The env steps each seed of ``run_dir`` has done (None: not started) and the most of them, for a resume from
    schedule ``old`` to ``new``.

    Raises:
        ConfigError: a seed's checkpoint cannot be read, or ``new`` changes the budget to below the most env steps
            done (key ``train.total_env_steps``).
    """
    done = {seed: _resumable_steps(run_dir, seed) for seed in seeds}
    most = max((d for d in done.values() if d is not None), default=0)
    budget = new.total_env_steps
    if budget != old.total_env_steps and budget < most:
        raise ConfigError(f"the budget {budget} is below the {most} env steps the run has already done (its "
                          f"budget is {old.total_env_steps}); give train.total_env_steps >= {most}",
                          file=str(run_dir), key="train.total_env_steps", value=budget)
    return done, most


def rounded_budget_note(summary: dict[str, Any]) -> str | None:
    """The note when a training (not resumed) did more env steps than its budget: training runs whole iterations,
    so a budget that is not a multiple of one iteration's env steps is rounded up; None otherwise."""
    budget, done, its = (summary.get(k) for k in ("total_env_steps_budget", "env_steps", "iterations"))
    if not (isinstance(budget, int) and isinstance(done, int) and isinstance(its, int)) or its < 1 or done <= budget:
        return None
    per = done // its
    if its == 1:
        return (f"note: the budget train.total_env_steps={budget:,} env steps is below one iteration ({done:,}): "
                f"trained {done:,} (training runs whole iterations)")
    return (f"note: the budget train.total_env_steps={budget:,} env steps is rounded up to whole iterations "
            f"(about {per:,} env steps each): trained {done:,}")


@contextlib.contextmanager
def run_dir_lock(run_dir: Path, who: str = "coopsim train"):
    """Hold an exclusive ``flock`` on the directory ``run_dir`` itself (no lock file: nothing to clean up, and the
    kernel releases it when the process ends, however it ends), so that two training processes never train into
    the same run directory at once. ``who`` names the command that trains it, for the message.

    Raises:
        ConfigError: another process holds the lock (a second ``train --resume`` of a run still training).
    """
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{run_dir} is being trained by another {who} process right now; wait for it to "
                              f"finish, or stop it (Ctrl-C keeps its checkpoint) and then resume",
                              file=str(run_dir)) from None
        yield
    finally:
        os.close(fd)


def train_main(config_path: str, overrides: list[str], resume: str | None,
               info: Callable[[str], None] | None = None) -> Path:
    """Train the config's agent for every seed; returns the run directory.

    Args:
        config_path: YAML run config with a ``train:`` section. With ``resume``, it (with ``overrides``) must
            equal the run's stored ``config.yaml`` except for a larger ``train.total_env_steps`` (and
            ``train.progress``, ``train.tensorboard``, ``out_dir``); empty: the stored config plus ``overrides``.
        overrides: ``key.path=value`` strings.
        resume: a run directory written by an earlier ``train_main`` to continue, or None.
        info: called with a one-line note (e.g. that a resumed run is already complete).

    Raises:
        ConfigError: invalid config or ``train:`` section, an untrainable agent, a resume dir without config,
            a resume whose config differs from the run's, a budget below the steps already done, or an
            ``out_dir`` where the run directory cannot be created, or a resume of a run directory another process is
            training (:func:`run_dir_lock`). Nothing is written in any of these cases.
    """
    with contextlib.ExitStack() as held:
        return _train_main(config_path, overrides, resume, info, held)


def _train_main(config_path: str, overrides: list[str], resume: str | None, info: Callable[[str], None] | None,
                held: contextlib.ExitStack) -> Path:
    if resume:
        run_dir = Path(resume)
        file = str(run_dir / CONFIG_NAME)
        if run_dir.is_dir() and not is_training_run(run_dir):
            raise ConfigError(f"{run_dir} is not a training run (no seed-<s>/{CHECKPOINT_NAME}); give a directory "
                              f"written by coopsim train")
        if run_dir.is_dir():  # held until training ends: a second resume of the same run is refused, not mixed in
            held.enter_context(run_dir_lock(run_dir))
        stored, given = resume_config(run_dir, config_path, overrides)
        _, cls = trainable_class(stored, file=file)
        old_schedule = train_config(stored, cls, file=file)
        try:
            schedule = train_config(given, cls, file=file)
        except ConfigError as exc:  # a value given on the command line is named as the override, not the stored file
            raise blame_override(exc, config_path or file, overrides) from None
        budget = schedule.total_env_steps
        done, most = resume_steps(run_dir, stored.seeds, old_schedule, schedule)
        if info is not None:
            old_budget = old_schedule.total_env_steps
            at = "; ".join(f"seed {s} " + ("not started" if d is None else f"at {d:,} of {old_budget:,} env steps")
                           for s, d in done.items())
            info(f"resuming {run_dir}: {at} -> budget {budget:,}"
                 + ("" if budget_overridden(overrides) else " (the run's; give train.total_env_steps=N to change it)"))
            warn = schedule_warning(old_schedule, schedule, most)
            if warn:
                info(warn)
        complete = all(d is not None and d >= budget and (run_dir / f"seed-{s}" / SUMMARY_NAME).is_file()
                       for s, d in done.items())
        if not complete:
            _refuse_seeds_without_checkpoint(run_dir, done, budget)
            for seed, d in done.items():  # the checkpoints the resume will read: damaged ones refused now
                if d is not None and d < budget:
                    _resumable_steps(run_dir, seed, load=True)
            fresh = [s for s, d in done.items() if d is None]  # seeds that start now, from train.init_policy
            if fresh and getattr(schedule, "init_policy", None):  # still there and still fitting, before any training
                build_trainer(stored, fresh[0], file=file)
        if complete and (run_dir / SUMMARY_NAME).is_file():
            if info is not None:
                info(f"the run is already complete ({most:,}/{budget:,} env steps for every seed); nothing to do "
                     f"(to train further, give a larger train.total_env_steps)")
            return run_dir
        ttw = None if complete else time_to_win_warning(run_dir)  # nothing to train: nothing to warn of
        if ttw and info is not None:  # checked and about to train: on, but without that script's evaluations
            info(ttw)
        # the run's config, with this session's budget and display/logging switches
        cfg = stored.model_copy(update={"train": {**stored.train, **{k: given.train[k] for k in
                                                  ("total_env_steps", "progress", "tensorboard") if k in given.train}}})
        if budget != old_schedule.total_env_steps:  # the one change resume records
            atomic_write_text(run_dir / CONFIG_NAME, dump_config(stored.model_copy(
                update={"train": {**stored.train, "total_env_steps": budget}})))
    else:
        file = str(config_path)
        cfg = load_config(file, overrides)
        try:
            _, cls = trainable_class(cfg, file=file)
            schedule = train_config(cfg, cls, file=file)
        except ConfigError as exc:  # a value given on the command line is named as the override, not the file
            raise blame_override(exc, file, overrides) from None
    try:
        hooks = hooks_note(schedule, file=file)
    except ConfigError as exc:  # a value given on the command line is named as the override, not the file
        raise blame_override(exc, file, [] if resume else overrides) from None
    for note in (shield_note(cfg, schedule), hooks, *(f"warning: {w}" for w in schedule.inert_keys())):
        if note and info is not None and not resume:
            info(note)
    # build the first seed's trainer before anything is written: every error surfaces first
    try:
        first = None if resume else build_trainer(cfg, cfg.seeds[0], file=file)[0]
    except ConfigError as exc:  # a component's own check (e.g. agents.params.actor): name the file or the override
        raise blame_override(in_file(exc, file), file, [] if resume else overrides) from None
    if not resume:
        try:
            run_dir = new_run_dir(cfg.out_dir, f"{cfg.name}-train")
        except ConfigError as exc:  # an out_dir given on the command line is named as the override
            raise blame_override(in_file(exc, file), file, overrides) from None
        held.enter_context(run_dir_lock(run_dir))
        try:
            atomic_write_text(run_dir / CONFIG_NAME, dump_config(cfg))
        except KeyboardInterrupt:  # nothing kept: leave no empty run directory behind
            if not any(run_dir.iterdir()):
                run_dir.rmdir()
            raise
        if info is not None:  # at the start: a long training without a progress display shows where it writes
            info(f"run directory: {run_dir}")
    per_seed: dict[str, Any] = {}
    running = None  # the seed being trained when an interrupt comes
    try:
        for seed in cfg.seeds:
            running = seed
            sub = run_dir / f"seed-{seed}"
            prev = sub / SUMMARY_NAME
            if resume and prev.is_file():
                done_seed = json.loads(prev.read_text())
                if done_seed["env_steps"] >= schedule.total_env_steps:
                    per_seed[str(seed)] = done_seed
                    continue
            resumed_seed = bool(resume) and (sub / CHECKPOINT_NAME).is_file()
            trainer = (first if first is not None and seed == cfg.seeds[0]
                       else build_trainer(cfg, seed, file=file, warm_start=not resumed_seed)[0])
            per_seed[str(seed)] = fit(trainer, schedule, sub, resume=resumed_seed,
                                      description=f"{cfg.name} seed {seed}")
            warn = violations_warning(seed, per_seed[str(seed)], sub)
            if warn and info is not None:
                info(warn)
            note = None if resumed_seed else rounded_budget_note(per_seed[str(seed)])
            if note and info is not None and seed == cfg.seeds[0]:  # the same for every seed: said once
                info(note)
    except KeyboardInterrupt as exc:
        exc.kept = _interrupt_kept(run_dir, cfg.seeds, running, getattr(exc, "checkpoint", None),
                                   schedule.total_env_steps)
        if exc.kept is None and not resume and _remove_if_nothing_kept(run_dir):
            exc.kept = "nothing was written (interrupted before the first checkpoint; the run directory was removed)"
            raise  # no run_dir: the CLI says nothing was written
        exc.run_dir = run_dir  # the CLI names it in its resume hint
        if info is not None:
            info(f"stopped: {exc.kept or 'no checkpoint was written: --resume starts every seed over'}")
        raise
    except TrainingDiverged as exc:  # seeds train one after another: say which ones this stop leaves untrained
        rest = list(cfg.seeds)[list(cfg.seeds).index(running) + 1:] if running in cfg.seeds else []
        if not rest:
            raise
        which = f"seed {rest[0]}" if len(rest) == 1 else "seeds " + ", ".join(str(r) for r in rest)
        raise TrainingDiverged(f"{exc.message}; {which} of this run {'was' if len(rest) == 1 else 'were'} not "
                               f"started (the seeds train one after another)", key=exc.key,
                               iteration=exc.iteration) from None
    except WriteError as exc:  # a full disk, say: every file written before is whole (atomic writes)
        exc.kept = _write_failure_kept(run_dir, cfg.seeds, schedule.total_env_steps)
        exc.run_dir = run_dir  # the CLI names it in its resume hint
        raise
    summary = {
        "config": str(run_dir / CONFIG_NAME),
        "agent": cfg.agents.id,
        "scenario": cfg.scenario.id,
        "total_env_steps_budget": schedule.total_env_steps,
        "seeds": cfg.seeds,
        "wall_time_s": sum(s["wall_time_s"] for s in per_seed.values()),
        "per_seed": per_seed,
    }
    atomic_write_json(run_dir / SUMMARY_NAME, summary, indent=2, sort_keys=True)
    return run_dir


def _resumable_steps(run_dir: Path, seed: int, *, load: bool = False) -> int | None:
    """:func:`steps_done` of ``seed``'s directory (``load``: also read its checkpoint through, as the resume will),
    with a damaged checkpoint refused in the terms of a resume.

    Raises:
        ConfigError: the seed's ``checkpoint.pt`` cannot be read (file named; what can still be done).
    """
    sub = run_dir / f"seed-{seed}"
    try:
        if load and (sub / CHECKPOINT_NAME).is_file():
            load_checkpoint(sub / CHECKPOINT_NAME)
        return steps_done(sub)
    except ConfigError as exc:
        reason = exc.message.split("; use another checkpoint")[0]
        raise ConfigError(f"seed {seed} cannot be resumed: {reason}; start a new run (coopsim train CONFIG without "
                          f"--resume)" + (f"; {sub / POLICY_NAME} can still be evaluated (coopsim eval)"
                                          if (sub / POLICY_NAME).is_file() else ""), file=exc.file) from None


def _refuse_seeds_without_checkpoint(run_dir: Path, done: dict[int, int | None], budget: int) -> None:
    """Before a resume writes anything: a seed that still has steps to train and holds results (its summary,
    policy or metrics) but no ``checkpoint.pt`` cannot continue; training it again from step 0 would overwrite
    those results.

    Raises:
        ConfigError: naming the seed directory, what it holds and what to do.
    """
    for seed, d in done.items():
        sub = run_dir / f"seed-{seed}"
        if (sub / CHECKPOINT_NAME).is_file() or (d is not None and d >= budget):
            continue
        held = [f for f in (SUMMARY_NAME, POLICY_NAME, METRICS_CSV) if (sub / f).is_file()]
        if held:
            at = f" at {d:,} env steps" if d is not None else ""
            raise ConfigError(f"seed {seed} cannot be resumed: it holds {', '.join(held)}{at} but no "
                              f"{CHECKPOINT_NAME}, and training it again from step 0 would overwrite them; restore "
                              f"{sub / CHECKPOINT_NAME}, or start a new run (coopsim train CONFIG without --resume)"
                              + (f"; {sub / POLICY_NAME} can still be evaluated (coopsim eval)"
                                 if POLICY_NAME in held else ""), file=str(sub))


def hooks_note(schedule: Any, *, file: str | None = None) -> str | None:
    """Build the ``train:`` section's hooks (``intrinsic``, ``aux_losses``) as the trainer will, so that a bad module
    or params is refused before training (``coopsim validate`` too); returns one line when a shaping hook's own
    ``gamma`` differs from ``train.gamma`` (potential-based shaping is policy-invariant only with the trainer's
    discount: Ng, Harada & Russell 1999), else None.

    Raises:
        ConfigError: a hook that cannot be imported or rejects its params (names ``train.intrinsic...``).
    """
    from coopsim.platform.hooks import AuxiliaryLoss, IntrinsicReward, load_hook, not_a_hook

    def built(spec: Any, key: str, kind: type) -> Any:
        hook = load_hook(spec, key=key, file=file, kind=kind)  # the class's methods are checked before it is called
        if hook is not None and not isinstance(hook, kind):  # e.g. an attribute set in __init__ (AuxiliaryLoss.coef)
            raise not_a_hook(type(hook), kind, key=key, file=file,
                             ref=spec.get("module") if isinstance(spec, dict) else spec)
        return hook

    intrinsic = built(getattr(schedule, "intrinsic", None), "train.intrinsic", IntrinsicReward)
    for i, spec in enumerate(getattr(schedule, "aux_losses", None) or ()):
        built(spec, f"train.aux_losses.{i}", AuxiliaryLoss)
    hook_gamma, gamma = getattr(intrinsic, "gamma", None), getattr(schedule, "gamma", None)
    if isinstance(hook_gamma, (int, float)) and isinstance(gamma, (int, float)) and hook_gamma != gamma:
        return (f"note: train.intrinsic.params.gamma = {hook_gamma} differs from train.gamma = {gamma}: the shaping "
                f"is then not policy-invariant (give both the same discount)")
    return None


def violations_warning(seed: int, summary: dict[str, Any], seed_dir: Path) -> str | None:
    """One ``warning:`` line when a seed's training violated constraints: its ``final_metrics`` carry the run's
    totals (``run_total/violations``, ``run_total/cost/<name>``, ``run_total/shield/uncertified`` and
    ``run_total/shield/interventions``; the tabular safe learners' trainer reports them), and the last iteration's
    ``violations`` alone would hide the earlier ones. None when the total is 0 or the trainer reports none."""
    fm = summary.get("final_metrics") or {}
    total = fm.get("run_total/violations")
    if not isinstance(total, (int, float)) or not total > 0:
        return None
    costs = ", ".join(f"{k[len('run_total/'):]} {v:g}" for k, v in sorted(fm.items())
                      if k.startswith("run_total/cost/") and isinstance(v, (int, float)) and v > 0)
    shield = ", ".join(f"{k[len('run_total/'):]} {fm[k]:g}" for k in ("run_total/shield/uncertified",
                                                                     "run_total/shield/interventions")
                       if isinstance(fm.get(k), (int, float)))
    return (f"warning: seed {seed}: {total:g} constraint violation(s) during training" + (f" ({costs})" if costs else "")
            + (f"; {shield} in total" if shield else "") + f"; per iteration in {seed_dir / METRICS_CSV}, totals in "
            f"{seed_dir / SUMMARY_NAME} (final_metrics run_total/*)")


def shield_note(cfg: RunConfig, schedule: Any) -> str | None:
    """One line when the run config's ``shield:`` section is not what filters the actions during training: it
    applies to ``coopsim run`` / ``eval``; a learner whose ``train:`` section has a ``shield`` key (the tabular safe
    learners) trains with that one, the others (PPO, QMIX, ...) train unshielded. None when nothing differs."""
    sid = cfg.shield.id
    if sid == "passthrough-v0":
        return None
    trains_with = getattr(schedule, "shield", None)
    if trains_with is None:
        return (f"note: the shield section ({sid}) applies to `coopsim run` / `eval`; {cfg.agents.id} trains "
                f"unshielded (its train: section has no shield)")
    if trains_with != sid:
        return (f"note: the shield section ({sid}) applies to `coopsim run` / `eval`; training filters the "
                f"learner's actions with train.shield = {trains_with}")
    return None


def _interrupt_kept(run_dir: Path, seeds: list[int], running: int | None, checkpoint: Any, budget: int) -> str | None:
    """What an interrupted :func:`train_main` keeps, one line (e.g. ``seed 0: checkpoint at 34,816 of 40,960 env
    steps (.../seed-0/checkpoint.pt)``); None if no seed holds a checkpoint or a finished summary."""
    parts = []
    for seed in seeds:
        sub = run_dir / f"seed-{seed}"
        if seed == running and isinstance(checkpoint, tuple):
            parts.append(f"seed {seed}: checkpoint at {checkpoint[1]:,} of {budget:,} env steps ({checkpoint[0]})")
        elif (sub / SUMMARY_NAME).is_file():
            parts.append(f"seed {seed}: finished")
        elif (sub / CHECKPOINT_NAME).is_file():
            parts.append(f"seed {seed}: its last checkpoint ({sub / CHECKPOINT_NAME})")
    return "; ".join(parts) or None


def _write_failure_kept(run_dir: Path, seeds: list[int], budget: int) -> str | None:
    """What a :func:`train_main` stopped by a failed write (a full disk) keeps, one line (e.g. ``seed 0: checkpoint at
    10,000 of 100,000 env steps (.../seed-0/checkpoint.pt)``): the checkpoints and summaries written before, each
    whole; None if no seed holds either."""
    parts = []
    for seed in seeds:
        sub = run_dir / f"seed-{seed}"
        if (sub / SUMMARY_NAME).is_file():
            parts.append(f"seed {seed}: finished")
        elif (sub / CHECKPOINT_NAME).is_file():
            try:
                steps = steps_done(sub)
            except Exception:  # noqa: BLE001 - a checkpoint that cannot be read: named without its step count
                steps = None
            at = f"checkpoint at {steps:,} of {budget:,} env steps" if steps is not None else "its last checkpoint"
            parts.append(f"seed {seed}: {at} ({sub / CHECKPOINT_NAME})")
    return "; ".join(parts) or None


def _remove_if_nothing_kept(run_dir: Path) -> bool:
    """Remove a new run directory an interrupt left without any checkpoint (only its config and empty logs);
    True if removed."""
    import shutil

    if any(d.is_dir() and ((d / CHECKPOINT_NAME).is_file() or (d / SUMMARY_NAME).is_file())
           for d in run_dir.glob("seed-*")):
        return False
    try:
        shutil.rmtree(run_dir)
    except OSError:
        return False
    return True


def eval_main(config_path: str, overrides: list[str], checkpoint: str, progress: bool = True,
              on_open: Callable[[Path], None] | None = None) -> Path:
    """Evaluate a trained policy like ``coopsim run``: the runner builds everything and calls ``agent.load(checkpoint)``.

    ``checkpoint`` may be a ``policy.pt``, a ``checkpoint.pt`` or a training seed directory; ``on_open`` as in
    :func:`coopsim.platform.runner.run_config`. Returns the run dir.
    """
    cfg = load_config(config_path, overrides)
    if not Path(checkpoint).exists():
        raise ConfigError("checkpoint not found (give policy.pt, checkpoint.pt or a run's seed-<s> directory)",
                          file=str(checkpoint))
    ck = Path(checkpoint)
    if ck.is_dir() and not any((ck / n).is_file() for n in (POLICY_NAME, CHECKPOINT_NAME)) \
            and not is_training_run(ck):  # a training run's own directory gets its seed-<s> hint from agent.load
        raise ConfigError(f"the directory holds no {POLICY_NAME} or {CHECKPOINT_NAME}: give policy.pt, "
                          f"checkpoint.pt or a training run's seed-<s> directory", file=str(ck), key="--checkpoint")
    from coopsim.platform.agent import AgentPlugin
    from coopsim.platform.runner import _agent_class, run_config

    cls = _agent_class(cfg)
    if isinstance(cls, type) and issubclass(cls, AgentPlugin) and cls.load is AgentPlugin.load:
        raise blame_override(ConfigError(
            f"agent {cfg.agents.id!r} has no learned parameters and takes no checkpoint: evaluate it with `coopsim run "
            f"{config_path}` (no --checkpoint), or give a learning agent (e.g. ppo/mappo-v0, qmix/qmix-v0)",
            file=str(config_path), key="agents.id"), config_path, overrides)
    try:
        return Path(run_config(cfg, checkpoint=checkpoint, progress=progress, file=str(config_path), on_open=on_open))
    except ConfigError as exc:  # a value given on the command line is named as the override
        raise blame_override(exc, config_path, overrides) from None
