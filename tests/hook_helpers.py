"""A tiny LineWalk MAPPO training run for the PPO-hook tests (tests/test_fresh33_hooks.py, test_fresh33b_hooks.py)."""
from __future__ import annotations

from pathlib import Path

import yaml


def config(tmp_path: Path, steps: int = 128, scenario: dict | None = None, agents: dict | None = None,
           seeds=(0,), name: str = "hooks", **train) -> Path:
    """A tiny LineWalk MAPPO run config (64 env steps per iteration) written to ``tmp_path / "cfg.yaml"``; ``scenario``
    and ``agents`` params and ``train`` keys are added to the defaults."""
    cfg = {"name": name, "out_dir": str(tmp_path / "runs"),
           "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 3, "length": 6, **(scenario or {})}},
           "agents": {"id": "ppo/mappo-v0", "params": {"hidden": [16], **(agents or {})}}, "seeds": list(seeds),
           "episodes": 2, "max_steps": 16,
           "train": {"total_env_steps": steps, "num_envs": 4, "rollout_steps": 16, "epochs": 1, "minibatches": 2,
                     "progress": False, "tensorboard": False, **train}}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def train(tmp_path: Path, *overrides: str, steps: int = 128, **kw) -> Path:
    """``coopsim train`` of :func:`config` in-process; returns the run folder."""
    from coopsim.platform.training import train_main

    return train_main(str(config(tmp_path, steps, **kw)), list(overrides), None)


def hook_spec(module: str, name: str, **params) -> dict:
    """``{module: "<module>:<name>", params: {...}}``: a hook config naming class ``name`` of ``module``."""
    return {"module": f"{module}:{name}", **({"params": params} if params else {})}
