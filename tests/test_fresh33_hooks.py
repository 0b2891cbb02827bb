"""fresh33 F1-F11: the PPO trainer's hooks and the benchmark scripts.

F1 a nan or inf (intrinsic bonus, auxiliary loss, PPO loss, gradient) stops training, naming the hook's key and the
iteration, with no policy.pt written and the last finite checkpoint kept; eval refuses a policy with nan weights;
the shipped hooks refuse non-finite params. F2 what a hook returns is checked. F3 a hook's own optimizer is saved
for an exact --resume. F4/F5/F10 benchmark scripts. F6 no ray extra. F7 agents.params.comm gets the protocol check.
F8 typed hook params refuse true for a number. F9 ``python -m coopsim``. F11 docs/ppo.md's test count.

Hook classes used by the configs below are defined here and named ``<this module>:<Class>``.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from bench_loader import load_benchmark
from hook_helpers import config, hook_spec, RNDBase, train
from coopsim.errors import ConfigError, TrainingDiverged
from coopsim.platform.hooks import AuxiliaryLoss, IntrinsicReward, load_hook
from coopsim.platform.trainer import CHECKPOINT_NAME, POLICY_NAME, read_metrics

ROOT = Path(__file__).resolve().parents[1]
HERE = __name__  # the module name pytest imported this file as: hook specs name their classes through it


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- hooks --------------------------------------------------------------------------------------------------------
class _Bonus(IntrinsicReward):
    def setup(self, ctx):
        self.n = ctx.num_agents

    def update(self, batch):
        return {}


class NaNBonus(_Bonus):
    def reward(self, batch):
        return torch.full(tuple(batch.alive.shape), float("nan"))


class BroadcastBonus(_Bonus):  # [T, E, 1]: used to be broadcast to every agent
    def reward(self, batch):
        T, E, _ = batch.alive.shape
        return torch.full((T, E, 1), 0.5)


class AgentBonus(_Bonus):  # [N]: used to be broadcast over T and E
    def reward(self, batch):
        return torch.zeros(self.n)


class IntBonus(_Bonus):
    def reward(self, batch):
        return torch.zeros(tuple(batch.alive.shape), dtype=torch.int64)


class NumpyBonus(_Bonus):  # a float numpy array of the right shape is fine
    def reward(self, batch):
        return np.full(tuple(batch.alive.shape), 0.25)


class NoneUpdate(_Bonus):  # update returning None: read as {}
    def reward(self, batch):
        return torch.zeros(tuple(batch.alive.shape))

    def update(self, batch):
        return None


class ListUpdate(NoneUpdate):
    def update(self, batch):
        return [1.0]


class _Loss(nn.Module, AuxiliaryLoss):
    def __init__(self, coef: float = 0.1):
        nn.Module.__init__(self)
        self.coef = coef

    def setup(self, ctx):
        self.h = nn.Linear(ctx.feature_dim, 1)


class NaNLoss(_Loss):
    def loss(self, mb, f):
        return self.h(f).sum() * float("nan"), {}


class VecLoss(_Loss):
    def loss(self, mb, f):
        return self.h(f).squeeze(-1), {}


class BareLoss(_Loss):
    def loss(self, mb, f):
        return self.h(f).mean()


class InfGradLoss(_Loss):  # value 0, gradient inf: d sqrt(x)/dx at 0
    def loss(self, mb, f):
        s = self.h(f).sum()
        return torch.sqrt(s - s.detach()), {}


class RNDLike(RNDBase):
    """FIM/RND-style: a predictor trained by its own Adam (a direct attribute) in update()."""

    def setup(self, ctx):
        super().setup(ctx)
        self.adam = torch.optim.Adam(self.pred.parameters(), lr=self.lr)

    def opt(self):
        return self.adam


# --- helpers ------------------------------------------------------------------------------------------------------
def hook(name: str, **params) -> dict:
    return hook_spec(HERE, name, **params)


def only_run(tmp_path: Path) -> Path:
    (run,) = (tmp_path / "runs").iterdir()
    return run


# --- F1 ------------------------------------------------------------------------------------------------------------
def test_nan_bonus_stops_training_names_the_hook_and_keeps_the_last_finite_checkpoint(tmp_path):
    with pytest.raises(TrainingDiverged) as ei:
        train(tmp_path, intrinsic=hook("NaNBonus"))
    msg = str(ei.value)
    assert ei.value.key == "train.intrinsic" and ei.value.iteration == 1
    assert f"train.intrinsic ({HERE}:NaNBonus.reward) returned a non-finite bonus" in msg
    assert "in iteration 1" in msg and "no policy.pt was written" in msg
    seed = only_run(tmp_path) / "seed-0"
    assert not (seed / POLICY_NAME).exists()
    ck = torch.load(seed / CHECKPOINT_NAME, weights_only=False)
    assert all(bool(torch.isfinite(t).all()) for t in ck["trainer"]["policy"]["net"].values())


def test_nan_aux_loss_and_nan_ppo_loss_and_inf_gradient_stop_before_the_optimizer_step(tmp_path, monkeypatch):
    with pytest.raises(TrainingDiverged, match=rf"train\.aux_losses\.0 \({HERE}:NaNLoss\.loss\) returned a "
                                               r"non-finite loss \(nan\) in iteration 1"):
        train(tmp_path / "a", aux_losses=[hook("NaNLoss")])
    with pytest.raises(TrainingDiverged, match=r"the gradient of the PPO loss is not finite .*InfGradLoss"):
        train(tmp_path / "g", aux_losses=[hook("InfGradLoss")])

    import coopsim.agents.ppo.trainer as ppo_trainer

    real = ppo_trainer.value_loss
    calls = []

    def nan_later(*a, **k):  # the second iteration's loss is nan: its first iteration is checkpointed
        calls.append(1)
        out = real(*a, **k)
        return out * float("nan") if len(calls) > 2 else out

    monkeypatch.setattr(ppo_trainer, "value_loss", nan_later)
    with pytest.raises(TrainingDiverged) as ei:
        train(tmp_path / "p", checkpoint_every=64)
    assert ei.value.key is None and ei.value.iteration == 2
    assert "the PPO loss is not finite (policy" in str(ei.value) and "at 64 env steps" in str(ei.value)
    assert not (only_run(tmp_path / "p") / "seed-0" / POLICY_NAME).exists()


def test_the_cli_exits_2_with_one_error_line(tmp_path):
    cfg = config(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(ROOT)])}
    spec = f"train.intrinsic={{module: '{Path(__file__).stem}:NaNBonus'}}"
    r = subprocess.run([sys.executable, "-m", "coopsim", "train", str(cfg), spec], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert re.search(r"error: train\.intrinsic \(\S+:NaNBonus\.reward\) returned a non-finite bonus", r.stderr)


def test_eval_refuses_a_policy_with_nan_weights(tmp_path):
    from coopsim.platform.config import load_config
    from coopsim.platform.trainer import atomic_save
    from coopsim.platform.training import build_trainer

    run = train(tmp_path, steps=64)
    policy = run / "seed-0" / POLICY_NAME
    ck = torch.load(policy, weights_only=False)
    first = next(iter(ck["net"]))
    ck["net"][first] = torch.full_like(ck["net"][first], float("nan"))
    bad = tmp_path / "nan-policy.pt"
    atomic_save(ck, bad)
    agent = build_trainer(load_config(str(run / "config.yaml")), 0)[0].agent
    agent.load(policy)  # the good one loads
    with pytest.raises(ConfigError, match=rf"the policy's weights hold nan or inf \(net\.{re.escape(first)}\)") as ei:
        agent.load(bad)
    assert ei.value.file == str(bad)


@pytest.mark.parametrize("params, match", [
    ({"beta": 1e39}, r"beta must be a finite number in \[0, 1e\+06\]; got 1e\+39"),
    ({"beta": float("nan")}, r"key 'train.intrinsic.params.beta': invalid value nan: must be a finite number"),
    ({"beta": float("inf")}, r"key 'train.intrinsic.params.beta': invalid value inf"),
    ({"bits": True}, r"key 'train.intrinsic.params.bits': invalid value true: a number is required, not a boolean"),
    ({"bits": "16"}, r"key 'train.intrinsic.params.bits': invalid value '16': an integer is required, not a string"),
    ({"bits": "abc"}, r"bits must be an integer in \[1, 24\]; got 'abc'"),
])
def test_simhash_params_are_checked(params, match):
    spec = {"module": "coopsim.agents.ppo.hook_examples:SimHashCountBonus", "params": params}
    with pytest.raises(ConfigError, match=match):
        load_hook(spec, key="train.intrinsic", kind=IntrinsicReward)


def test_shipped_hooks_refuse_non_finite_and_bool_params():
    from coopsim.agents.immp.intent import IntentLoss
    from coopsim.agents.immp.rewards import CollaborativeReward
    from coopsim.agents.ppo.hook_examples import MeanBroadcast, NextObsPrediction, SimHashCountBonus
    from coopsim.agents.ppo.mapf_shaping import MGMAPFGoalShaping

    for make in (lambda: NextObsPrediction(coef=float("nan")), lambda: MeanBroadcast(width=True),
                 lambda: MGMAPFGoalShaping(num_goals=True), lambda: CollaborativeReward(0.5, float("inf"), 2),
                 lambda: IntentLoss(float("nan"), 2, 3, 4), lambda: SimHashCountBonus(beta=False)):
        with pytest.raises(ValueError, match="must be"):
            make()
    assert SimHashCountBonus(beta=1, bits=16.0).bits == 16


# --- F2 ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, got", [("BroadcastBonus", r"shape \(16, 4, 1\)"), ("AgentBonus", r"shape \(3,\)"),
                                       ("IntBonus", r"dtype torch\.int64")])
def test_a_bonus_of_the_wrong_shape_or_dtype_is_refused_naming_the_hook(tmp_path, name, got):
    with pytest.raises(ConfigError, match=rf"key 'train\.intrinsic': {HERE}:{name}\.reward returned {got}.*"
                                          r"\(T, E, N\) = \(16, 4, 3\)"):
        train(tmp_path, intrinsic=hook(name), steps=64)


def test_update_none_is_no_statistics_and_other_types_are_refused(tmp_path):
    run = train(tmp_path / "n", intrinsic=hook("NoneUpdate"), steps=64)
    assert (run / "seed-0" / POLICY_NAME).is_file()
    run = train(tmp_path / "np", intrinsic=hook("NumpyBonus"), steps=64)
    assert float(read_metrics(run / "seed-0")[0]["reward/intrinsic"]) == 0.25
    with pytest.raises(ConfigError, match=rf"key 'train\.intrinsic': {HERE}:ListUpdate\.update returned a list as its "
                                          r"statistics, expected a dict"):
        train(tmp_path / "l", intrinsic=hook("ListUpdate"), steps=64)


@pytest.mark.parametrize("name, match", [
    ("VecLoss", r"VecLoss\.loss returned a loss that is a tensor of shape \(\d+,\) .*expected a 0-dim float tensor"),
    ("BareLoss", r"BareLoss\.loss returned a tensor of shape \(\), expected a pair \(loss, stats\)"),
])
def test_an_aux_loss_that_is_not_a_scalar_pair_is_refused(tmp_path, name, match):
    with pytest.raises(ConfigError, match=r"key 'train\.aux_losses\.0': .*" + match):
        train(tmp_path, aux_losses=[hook(name)], steps=64)


# --- F3 ------------------------------------------------------------------------------------------------------------
def test_a_hook_with_its_own_adam_resumes_exactly(tmp_path):
    from coopsim.platform.training import train_main

    full = train(tmp_path / "full", intrinsic=hook("RNDLike"), steps=256, checkpoint_every=128)
    part = train(tmp_path / "part", intrinsic=hook("RNDLike"), steps=128, checkpoint_every=128)
    train_main(str(part / "config.yaml"), ["train.total_env_steps=256"], str(part))
    a, b = read_metrics(full / "seed-0"), read_metrics(part / "seed-0")
    assert len(a) == 4 and "intrinsic/rnd_loss" in a[0]
    assert a == b


# --- F7, F8 ---------------------------------------------------------------------------------------------------------
def test_comm_of_the_wrong_kind_is_one_config_error(tmp_path):
    spec = "agents.params.comm={module: coopsim.agents.ppo.hook_examples:SimHashCountBonus}"
    with pytest.raises(ConfigError, match=r"key 'agents\.params\.comm\.module': coopsim\.agents\.ppo\.hook_examples:"
                                          r"SimHashCountBonus is not a CommModule hook \(it needs the methods setup"):
        train(tmp_path / "k", spec)
    with pytest.raises(ConfigError, match=r"key 'agents\.params\.comm\.params\.width': invalid value true: a number"):
        train(tmp_path / "w", "agents.params.comm={module: coopsim.agents.ppo.hook_examples:MeanBroadcast, "
                              "params: {width: true}}")
    assert not (tmp_path / "k" / "runs").exists()  # refused before the run directory is made


def test_a_pydantic_params_hook_refuses_true_for_a_number():
    with pytest.raises(ConfigError, match=r"key 'agents\.params\.comm\.params\.epochs': invalid value true"):
        load_hook({"module": "coopsim.agents.ddacom.generator:DDACOMGenerator", "params": {"epochs": True}},
                  key="agents.params.comm")


# --- F9 ------------------------------------------------------------------------------------------------------------
def test_python_dash_m_coopsim():
    r = subprocess.run([sys.executable, "-m", "coopsim", "--help"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Usage: python -m coopsim" in r.stdout and "train" in r.stdout


# --- F6, F11 -------------------------------------------------------------------------------------------------------
def test_no_ray_extra_and_no_stale_test_count():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("optional-dependencies", {})
    assert "ray" not in extras and "ns3" in extras
    assert "(30 tests)" not in (ROOT / "docs" / "ppo.md").read_text()


# --- F4, F5, F10: benchmark scripts ---------------------------------------------------------------------------------
def test_shield_scaling_writes_to_runs_by_default_and_says_so(capsys):
    with pytest.raises(SystemExit):
        load_benchmark("shield_scaling").main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--out OUT folder for shield_scaling.json and shield_scaling.png (default runs/shield_scaling;" in help_text
    assert "python benchmarks/shield_scaling.py --out docs" in (ROOT / "docs" / "safety.md").read_text()


def test_benchmarks_readme_has_a_line_per_script():
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("[a-z]*.py") if p.name != "smax_core.py")
    missing = [s for s in scripts if f"- `{s}` — " not in readme]
    assert len(scripts) >= 27 and not missing


def test_immp_inference_assesses_the_target_only_at_128_agents_and_checks_the_map_first(tmp_path, capsys):
    from coopsim.errors import MapFormatError

    mod = load_benchmark("immp_inference")
    assert mod.target_line(8, 17.0, 16.0).startswith("target is for 128 agents; not assessed at 8")
    assert mod.target_line(128, 17.0, 16.0).startswith("target < 20 ms: wall met (17.00 ms median)")
    bad = tmp_path / "bad.map"
    bad.write_text("not a map\n")
    with pytest.raises(MapFormatError):
        mod.main(["--map", str(bad), "--agents", "4", "--steps", "1"])
    assert capsys.readouterr().out == ""  # no table header before the error


def test_smax_core_run_as_a_script_says_it_is_a_module():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "smax_core.py"), "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "is a module" in r.stdout and "mappo_on_smax.py" in r.stdout


def test_immp_learning_curve_labels_a_bin_by_the_data(tmp_path, capsys):
    seed = tmp_path / "runs" / "r" / "seed-0"
    seed.mkdir(parents=True)
    (seed.parent / "config.yaml").write_text(yaml.safe_dump({"agents": {"id": "mapf/immp-v0"}}))
    rows = ["iteration,env_steps,time/wall_s,reward/extrinsic,loss/entropy"]
    rows += [f"{i},{i * 1024},{i},-1.0,1.0" for i in (1, 2)]
    (seed / "metrics.csv").write_text("\n".join(rows) + "\n")
    load_benchmark("immp_learning_curve").main([str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert " 1-2048 " in out and "2560" not in out


def test_resume_names_a_dropped_hook_mapping_not_not_set(tmp_path):
    from coopsim.platform.training import train_main

    run = train(tmp_path, intrinsic=hook("NoneUpdate"), steps=64)
    with pytest.raises(ConfigError) as ei:
        train_main(str(run / "config.yaml"), ["train.total_env_steps=128", "train.intrinsic=null"], str(run))
    msg = str(ei.value)
    assert f"train.intrinsic (run: {{'module': '{HERE}:NoneUpdate'}}, new: None)" in msg
    assert "(run: (not set), new: None)" not in msg
