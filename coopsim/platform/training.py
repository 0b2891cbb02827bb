"""What ``coopsim train`` and ``coopsim eval`` call: build a training from a run config and run it.

``train_main`` validates the run config and its ``train:`` section (the schema is the agent class's
``TrainConfig``), builds per seed the batched scenario core (``num_envs`` from ``train``), the agent and
the channel through the registry, asks the agent class for its trainer (``make_trainer``), and drives
it with :func:`coopsim.platform.trainer.fit`. Run directory layout::

    runs/<name>-train-<UTC time>-<id>/
        config.yaml            resolved config (what --resume reads)
        train_summary.json     budget, env steps done, wall time per seed and in total
        seed-<s>/metrics.csv, tb/, checkpoint.pt, policy.pt, train_summary.json

``--resume RUN_DIR`` continues every unfinished seed from its last checkpoint, exactly.
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from coopsim.errors import ConfigError
from coopsim.platform import registry
from coopsim.platform.config import RunConfig, dump_config, load_config
from coopsim.platform.recorder import atomic_write_text
from coopsim.platform.trainer import CHECKPOINT_NAME, SUMMARY_NAME, TrainSchedule, fit

CONFIG_NAME = "config.yaml"


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


def build_trainer(cfg: RunConfig, seed: int, *, file: str | None = None):
    """The trainer of one seed: core (``num_envs`` from ``train``), agent, channel, via the registry."""
    import torch

    factory, cls = trainable_class(cfg, file=file)
    train = train_config(cfg, cls, file=file)
    core = registry.make_scenario(cfg.scenario.id, num_envs=int(getattr(train, "num_envs", 1)), **cfg.scenario_params())
    torch.manual_seed(int(seed))  # network initialisation
    agent = factory(core, **cfg.agents.params)
    channel = registry.make_component("channel", cfg.channel.id, **cfg.channel.params)
    return cls.make_trainer(agent, train, int(seed), channel=channel, file=file), train


def train_main(config_path: str, overrides: list[str], resume: str | None) -> Path:
    """Train the config's agent for every seed; returns the run directory.

    Args:
        config_path: YAML run config with a ``train:`` section (ignored with ``resume``: the run's saved
            ``config.yaml`` is used, with ``overrides`` applied on top, e.g. a larger ``train.total_env_steps``).
        overrides: ``key.path=value`` strings.
        resume: a run directory written by an earlier ``train_main`` to continue, or None.

    Raises:
        ConfigError: invalid config or ``train:`` section, an untrainable agent, or a resume dir without config.
    """
    if resume:
        run_dir = Path(resume)
        file = str(run_dir / CONFIG_NAME)
        if not (run_dir / CONFIG_NAME).is_file():
            raise ConfigError(f"--resume needs a run directory written by coopsim train (with {CONFIG_NAME})",
                              file=str(run_dir))
        cfg = load_config(file, overrides)
        given = load_config(str(config_path), overrides) if config_path else cfg
        for what, a, b in (("name", given.name, cfg.name), ("scenario.id", given.scenario.id, cfg.scenario.id),
                           ("agents.id", given.agents.id, cfg.agents.id)):
            if a != b:
                raise ConfigError(f"--resume continues the run's own config ({what} {b!r}), but {config_path} has "
                                  f"{what} {a!r}; give the config the run was started with", file=str(run_dir), key=what,
                                  value=a)
    else:
        file = str(config_path)
        cfg = load_config(file, overrides)
    _, cls = trainable_class(cfg, file=file)
    schedule = train_config(cfg, cls, file=file)
    # build the first seed's trainer before anything is written: every error surfaces first
    first = None if resume else build_trainer(cfg, cfg.seeds[0], file=file)[0]
    if not resume:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        run_dir = Path(cfg.out_dir) / f"{cfg.name}-train-{stamp}-{uuid.uuid4().hex[:6]}"
        run_dir.mkdir(parents=True, exist_ok=False)
    atomic_write_text(run_dir / CONFIG_NAME, dump_config(cfg))
    per_seed: dict[str, Any] = {}
    try:
        for seed in cfg.seeds:
            sub = run_dir / f"seed-{seed}"
            prev = sub / SUMMARY_NAME
            if resume and prev.is_file():
                done = json.loads(prev.read_text())
                if done["env_steps"] >= schedule.total_env_steps:
                    per_seed[str(seed)] = done
                    continue
            trainer = first if first is not None and seed == cfg.seeds[0] else build_trainer(cfg, seed, file=file)[0]
            per_seed[str(seed)] = fit(trainer, schedule, sub, resume=bool(resume) and (sub / CHECKPOINT_NAME).is_file(),
                                      description=f"{cfg.name} seed {seed}")
    except KeyboardInterrupt as exc:
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
    atomic_write_text(run_dir / SUMMARY_NAME, json.dumps(summary, indent=2, sort_keys=True))
    return run_dir


def eval_main(config_path: str, overrides: list[str], checkpoint: str, progress: bool = True) -> Path:
    """Evaluate a trained policy like ``coopsim run``: the runner builds everything and calls ``agent.load(checkpoint)``.

    ``checkpoint`` may be a ``policy.pt``, a ``checkpoint.pt`` or a training seed directory. Returns the run dir.
    """
    cfg = load_config(config_path, overrides)
    if not Path(checkpoint).exists():
        raise ConfigError("checkpoint not found (give policy.pt, checkpoint.pt or a run's seed-<s> directory)",
                          file=str(checkpoint))
    from coopsim.platform.runner import run_config

    return Path(run_config(cfg, checkpoint=checkpoint, progress=progress, file=str(config_path)))
