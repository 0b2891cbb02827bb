"""A tiny LineWalk MAPPO training run for the PPO-hook tests (tests/test_fresh33_hooks.py, test_fresh33b_hooks.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
import yaml
from torch import nn

from coopsim.platform.hooks import IntrinsicReward


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



class RNDBase(nn.Module, IntrinsicReward):
    """The tests' RND-style intrinsic reward: a fixed random target and a predictor trained by the hook's own optimizer
    in ``update``; each subclass sets that optimizer up where it wants it held (an attribute, a list item, a
    sub-object) and defines ``opt()`` returning it. ``nn.Module.state_dict`` lacks the optimizer's state, which the
    trainer saves itself."""

    opt: Callable[[], torch.optim.Optimizer]  # defined by each subclass

    def __init__(self, beta: float = 0.1, lr: float = 1e-2):
        nn.Module.__init__(self)
        self.beta, self.lr = beta, lr

    def setup(self, ctx):
        g = torch.Generator().manual_seed(ctx.seed)
        self.target, self.pred = nn.Linear(ctx.obs_dim, 8), nn.Linear(ctx.obs_dim, 8)
        with torch.no_grad():
            for p in list(self.target.parameters()) + list(self.pred.parameters()):
                p.copy_(torch.randn(p.shape, generator=g))
        self.target.requires_grad_(False)

    def reward(self, batch):
        with torch.no_grad():
            x = batch.next_obs.float()
            return self.beta * ((self.pred(x) - self.target(x)) ** 2).mean(-1)

    def update(self, batch):
        x = batch.next_obs.float()[batch.alive]
        loss = ((self.pred(x) - self.target(x)) ** 2).mean()
        opt = self.opt()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return {"rnd_loss": float(loss.detach()), "lr": opt.param_groups[0]["lr"]}
