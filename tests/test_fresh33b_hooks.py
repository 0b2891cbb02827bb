"""fresh33b N1, N2, N5, N10, N11: the PPO trainer's hooks (and N4 for PPO's own seed param).

N1 a bonus that carries autograd (no ``torch.no_grad()``) or lives on another device is detached and copied to the
CPU (one on the meta device, which holds no values, is refused naming the key). N2 what a comm module's ``receive``
and ``messages`` return is checked (key ``agents.params.comm``), a nan there stops training, and the PPO loss's
"likely cause" note names the comm module. N5 ``--resume`` is exact for a hook with an LR scheduler, an optimizer in
a list or on a sub-object; one held deeper is named in a warning at the first checkpoint. N10 ``reward/extrinsic``
has no bootstrapped values. N11 the divergence of seed 0 says that seed 1 was not started; a string statistic is
refused and a nan statistic warned about.

Hook classes used by the configs below are defined here and named ``<this module>:<Class>``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from hook_helpers import config, hook_spec, RNDBase, train

from coopsim.agents.ppo.hook_examples import MeanBroadcast
from coopsim.errors import ConfigError, TrainingDiverged
from coopsim.platform.hooks import IntrinsicReward
from coopsim.platform.trainer import read_metrics

HERE = __name__
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- hooks --------------------------------------------------------------------------------------------------------
class GradBonus(nn.Module, IntrinsicReward):
    """The RND mistake: the bonus comes out of a Linear without torch.no_grad() (it carries a graph)."""

    def __init__(self):
        nn.Module.__init__(self)

    def setup(self, ctx):
        self.lin = nn.Linear(ctx.obs_dim, 1)

    def reward(self, batch):
        return 0.01 * self.lin(batch.next_obs.float()).squeeze(-1)

    def update(self, batch):
        return {}


class MetaBonus(IntrinsicReward):  # stands in for a GPU tensor whose values cannot be read
    def setup(self, ctx):
        pass

    def reward(self, batch):
        return torch.zeros(tuple(batch.alive.shape), device="meta")

    def update(self, batch):
        return {}


class BigBonus(MetaBonus):
    def reward(self, batch):
        return torch.full(tuple(batch.alive.shape), 1e6)


class NaNLater(MetaBonus):
    """Finite in the first iteration, nan from the second (after a checkpoint)."""

    def setup(self, ctx):
        self.it = 0

    def reward(self, batch):
        return torch.full(tuple(batch.alive.shape), float("nan") if self.it >= 1 else 0.01)

    def update(self, batch):
        self.it += 1
        return {}


class StringStat(BigBonus):
    def update(self, batch):
        return {"s": "1.5"}


class NaNStat(BigBonus):
    def reward(self, batch):
        return torch.zeros(tuple(batch.alive.shape))

    def update(self, batch):
        return {"x": float("nan"), "ok": 1.0}


class ShapeRecv(MeanBroadcast):
    def receive(self, inbox, num_envs, num_agents):
        return super().receive(inbox, num_envs, num_agents)[..., :-1]


class NaNRecv(MeanBroadcast):
    def receive(self, inbox, num_envs, num_agents):
        out = np.array(super().receive(inbox, num_envs, num_agents))
        out[0, 0, 0] = np.nan
        return out


class TensorRecv(MeanBroadcast):  # a float64 tensor with a graph is fine: read as float32 values
    def receive(self, inbox, num_envs, num_agents):
        return torch.as_tensor(super().receive(inbox, num_envs, num_agents), dtype=torch.float64).requires_grad_()


class ListMessages(MeanBroadcast):
    def messages(self, features, alive, t, dt_s):
        return [1, 2]


_RND = RNDBase  # a predictor trained by its own Adam in update(); subclasses set up the optimizer and schedule


class SchedRND(_RND):  # Adam + StepLR stepped in update: the lr drops every 3 iterations (not at the checkpoint)
    def setup(self, ctx):
        super().setup(ctx)
        self.adam = torch.optim.Adam(self.pred.parameters(), lr=self.lr)
        self.sched = torch.optim.lr_scheduler.StepLR(self.adam, step_size=3, gamma=0.5)

    def opt(self):
        return self.adam

    def update(self, batch):
        out = super().update(batch)
        self.sched.step()
        return out


class ListRND(_RND):  # the optimizer in a list, a LambdaLR in a dict
    def setup(self, ctx):
        super().setup(ctx)
        self.opts = [torch.optim.Adam(self.pred.parameters(), lr=self.lr)]
        self.scheds = {"decay": torch.optim.lr_scheduler.LambdaLR(self.opts[0], lambda e: 1.0 / (1 + e))}

    def opt(self):
        return self.opts[0]

    def update(self, batch):
        out = super().update(batch)
        self.scheds["decay"].step()
        return out


class _Holder(nn.Module):
    def __init__(self, params, lr):
        super().__init__()
        self.adam = torch.optim.Adam(params, lr=lr)


class _Plain:
    pass


class NestedRND(_RND):  # the optimizer on an nn.Module sub-object, a scheduler on a plain object attribute
    def setup(self, ctx):
        super().setup(ctx)
        self.inner = _Holder(self.pred.parameters(), self.lr)
        self.box = _Plain()
        self.box.sched = torch.optim.lr_scheduler.StepLR(self.inner.adam, step_size=1, gamma=0.7)

    def opt(self):
        return self.inner.adam

    def update(self, batch):
        out = super().update(batch)
        self.box.sched.step()
        return out


class DeepRND(_RND):  # two levels down: not saved, named in a warning
    def setup(self, ctx):
        super().setup(ctx)
        self.box = _Plain()
        self.box.opts = [torch.optim.Adam(self.pred.parameters(), lr=self.lr)]

    def opt(self):
        return self.box.opts[0]


# --- helpers ------------------------------------------------------------------------------------------------------
def hook(name: str, **params) -> dict:
    return hook_spec(HERE, name, **params)


# --- N1 ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("minibatches", [1, 2])
def test_a_bonus_with_a_graph_is_detached(tmp_path, minibatches, monkeypatch):
    """Two minibatches used to fail with "backward through the graph a second time"; one let PPO's backward reach
    the hook's Linear. Now the bonus is data: the hook's parameters get no gradient from PPO."""
    from coopsim.agents.ppo import trainer as ppo_trainer

    made = []
    real = ppo_trainer.PPOTrainer.__init__

    def keep(self, *a, **k):
        real(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(ppo_trainer.PPOTrainer, "__init__", keep)
    run = train(tmp_path, intrinsic=hook("GradBonus"), steps=128, minibatches=minibatches)
    assert len(read_metrics(run / "seed-0")) == 2
    assert all(p.grad is None for p in made[0].intrinsic.parameters())


def test_check_bonus_detaches_and_refuses_a_tensor_without_values():
    from coopsim.platform.hooks import check_bonus

    x = torch.ones(2, 3, 4, dtype=torch.float64, requires_grad=True) * 0.5
    out = check_bonus(x, GradBonus(), key="train.intrinsic", shape=(2, 3, 4))
    assert not out.requires_grad and out.dtype == torch.float32 and out.device.type == "cpu"
    with pytest.raises(ConfigError, match=rf"key 'train\.intrinsic': {HERE}:MetaBonus\.reward returned a tensor on "
                                          r"device meta whose values cannot be copied to the CPU"):
        check_bonus(torch.zeros(2, 3, 4, device="meta"), MetaBonus(), key="train.intrinsic", shape=(2, 3, 4))


def test_a_meta_bonus_in_training_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"key 'train\.intrinsic': .*MetaBonus\.reward returned a tensor on device "
                                          r"meta"):
        train(tmp_path, intrinsic=hook("MetaBonus"), steps=64)


# --- N2 ------------------------------------------------------------------------------------------------------------
def comm(name: str) -> str:
    return f"agents.params.comm={{module: '{HERE}:{name}'}}"


def test_receive_of_the_wrong_shape_is_refused_naming_the_comm_key(tmp_path):
    with pytest.raises(ConfigError, match=rf"key 'agents\.params\.comm': {HERE}:ShapeRecv\.receive returned shape "
                                          r"\(4, 3, 8\), expected a float32 array of shape \(E, N, input_dim\) = "
                                          r"\(4, 3, 9\)"):
        train(tmp_path, comm("ShapeRecv"), steps=64)


def test_messages_of_the_wrong_type_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=rf"key 'agents\.params\.comm': {HERE}:ListMessages\.messages returned a "
                                          r"list, expected a MessageBatch"):
        train(tmp_path, comm("ListMessages"), steps=64)


def test_a_tensor_from_receive_is_read_as_values(tmp_path):
    run = train(tmp_path, comm("TensorRecv"), steps=64)
    assert len(read_metrics(run / "seed-0")) == 1


def test_a_nan_from_receive_stops_training_naming_the_comm_key(tmp_path):
    with pytest.raises(TrainingDiverged) as ei:
        train(tmp_path, comm("NaNRecv"), steps=64)
    assert ei.value.key == "agents.params.comm" and ei.value.iteration == 1
    assert (f"agents.params.comm ({HERE}:NaNRecv.receive) returned a non-finite policy input at 1 of 108 entries "
            f"(1 nan, 0 inf) at rollout step 1 of 16 in iteration 1 (env steps 0 to 64)") in str(ei.value)


def test_a_nan_from_receive_in_evaluation_is_a_config_error(tmp_path):
    from coopsim.platform.comm import MessageBatch
    from coopsim.platform.config import load_config
    from coopsim.platform.training import build_trainer

    cfg = load_config(str(config(tmp_path, agents={"comm": hook("NaNRecv")})))
    agent = build_trainer(cfg, 0)[0].agent
    with pytest.raises(ConfigError, match=rf"key 'agents\.params\.comm': {HERE}:NaNRecv\.receive returned a "
                                          r"non-finite policy input at 1 of \d+ entries \(1 nan, 0 inf\)"):
        agent.receive(MessageBatch.empty(16), 4)


def test_the_ppo_loss_note_names_the_comm_module(tmp_path, monkeypatch):
    import coopsim.agents.ppo.trainer as ppo_trainer

    real = ppo_trainer.value_loss
    monkeypatch.setattr(ppo_trainer, "value_loss", lambda *a, **k: real(*a, **k) * float("nan"))
    with pytest.raises(TrainingDiverged, match=r"the PPO loss is not finite \(.*; the run's hooks, a likely cause: "
                                               r"agents\.params\.comm \(coopsim\.agents\.ppo\.hook_examples:"
                                               r"MeanBroadcast\)\)"):
        train(tmp_path, "agents.params.comm={module: coopsim.agents.ppo.hook_examples:MeanBroadcast}", steps=64)


# --- N5 ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["SchedRND", "ListRND", "NestedRND"])
def test_a_hook_with_a_scheduler_or_a_held_optimizer_resumes_exactly(tmp_path, name, capsys):
    from coopsim.platform.training import train_main

    full = train(tmp_path / "full", intrinsic=hook(name), steps=256, checkpoint_every=128)
    part = train(tmp_path / "part", intrinsic=hook(name), steps=128, checkpoint_every=128)
    train_main(str(part / "config.yaml"), ["train.total_env_steps=256"], str(part))
    a, b = read_metrics(full / "seed-0"), read_metrics(part / "seed-0")
    assert len(a) == 4 and len({r["intrinsic/lr"] for r in a}) > 1  # the lr changes within the run
    assert a == b
    assert "warning" not in capsys.readouterr().err


def test_hook_optimizers_finds_them_by_path():
    from coopsim.agents.ppo.trainer import hook_optimizer_states, hook_optimizers

    h = NestedRND()
    h.setup(type("Ctx", (), {"seed": 0, "obs_dim": 5})())
    assert sorted(hook_optimizers(h)) == ["box.sched", "inner.adam"]
    h = ListRND()
    h.setup(type("Ctx", (), {"seed": 0, "obs_dim": 5})())
    assert sorted(hook_optimizer_states(h)) == ["opts.0", "scheds.decay"]


def test_an_optimizer_held_too_deep_is_named_once_at_the_first_checkpoint(tmp_path, capsys):
    train(tmp_path, intrinsic=hook("DeepRND"), steps=192, checkpoint_every=64)
    err = capsys.readouterr().err
    line = (f"warning: train.intrinsic ({HERE}:DeepRND): the Adam at box.opts.0 is held too deep to be saved")
    assert err.count(line) == 1, err
    assert "a --resume of this checkpoint restarts it" in err


# --- N10 -----------------------------------------------------------------------------------------------------------
def test_reward_extrinsic_has_no_bootstrapped_values(tmp_path):
    """LineWalk gives -1 per alive step; episodes cut at 4 steps bootstrap V(final obs), which learns the bonus."""
    run = train(tmp_path, intrinsic=hook("BigBonus"), steps=256, scenario={"max_steps": 4})
    rows = read_metrics(run / "seed-0")
    assert [float(r["reward/extrinsic"]) for r in rows] == [-1.0] * 4
    assert float(rows[-1]["reward/intrinsic"]) == 1e6


# --- N11 -----------------------------------------------------------------------------------------------------------
def test_a_divergence_names_the_seeds_not_started(tmp_path):
    with pytest.raises(TrainingDiverged) as ei:
        train(tmp_path, intrinsic=hook("NaNLater"), steps=128, seeds=(0, 1, 2))
    msg = str(ei.value)
    assert "returned a non-finite bonus" in msg and "seed-0" in msg
    assert msg.endswith("; seeds 1, 2 of this run were not started (the seeds train one after another)")


def test_a_string_statistic_is_refused_and_a_nan_one_is_warned_about_once(tmp_path, capsys):
    with pytest.raises(ConfigError, match=rf"key 'train\.intrinsic': {HERE}:StringStat\.update returned statistic "
                                          r"'s' = '1\.5', a string, expected a number"):
        train(tmp_path / "s", intrinsic=hook("StringStat"), steps=64)
    run = train(tmp_path / "n", intrinsic=hook("NaNStat"), steps=128)
    assert [r["intrinsic/x"] for r in read_metrics(run / "seed-0")] == ["nan", "nan"]
    err = capsys.readouterr().err
    assert err.count("warning: train.intrinsic") == 1
    assert (f"warning: train.intrinsic ({HERE}:NaNStat.update) returned the statistic 'x' = nan in iteration 1; it is "
            f"logged as intrinsic/x = nan") in err


# --- N4 (PPO's own seed param) -------------------------------------------------------------------------------------
def test_a_ppo_seed_beyond_2_32_is_a_config_error(tmp_path):
    from coopsim.platform.config import load_config

    with pytest.raises(ConfigError, match=r"key 'agents\.params\.seed': invalid value 18446744073709551616: Input "
                                          r"should be less than or equal to 4294967295"):
        load_config(str(config(tmp_path, agents={"seed": 2**64})))
