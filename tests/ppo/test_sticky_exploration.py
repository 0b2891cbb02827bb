"""Sticky-action exploration (``train.sticky_eps``): the behaviour policy (1 - eps) * pi + eps * [a == previous
action] is sampled with the right frequencies, its log-probability is exact, the PPO update recomputes the same
log-probability (ratio 1 before any step), eps anneals linearly, a resume carries each slot's previous action, and
eps 0 is the plain policy."""
import math

import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.agents.ppo.agent import sample_categorical, sticky_logp, sticky_sample
from coopsim.agents.ppo.config import sticky_eps
from coopsim.platform.registry import make_scenario


def test_the_mixtures_log_probability_is_exact():
    pi = torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.5, 0.3, 0.2]])
    act, prev = torch.tensor([1, 2, 0]), torch.tensor([1, 0, -1])
    eps = torch.tensor([0.8, 0.8, 0.0])  # the third sample had no previous action: plain pi
    got = sticky_logp(pi.log(), act, prev, eps)
    want = [math.log(0.2 * 0.3 + 0.8), math.log(0.2 * 0.2), math.log(0.5)]
    assert got.tolist() == pytest.approx(want, rel=1e-6)


def test_samples_repeat_the_previous_action_as_often_as_the_mixture_says():
    b = 200_000
    logits = torch.tensor([0.0, math.log(3.0), math.log(6.0)]).expand(b, 3)  # pi = 0.1, 0.3, 0.6
    mask = torch.ones(b, 3, dtype=torch.bool)
    prev = torch.zeros(b, dtype=torch.long)
    a, seps = sticky_sample(logits, mask, prev, 0.5, torch.Generator().manual_seed(0))
    assert (seps == 0.5).all()
    assert float((a == 0).float().mean()) == pytest.approx(0.5 + 0.5 * 0.1, abs=0.005)
    assert float((a == 2).float().mean()) == pytest.approx(0.5 * 0.6, abs=0.005)
    # a previous action no longer available (or none) leaves plain pi: eps 0 and the plain sample
    mask[:, 0] = False
    masked = logits.masked_fill(~mask, -1e9)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    a, seps = sticky_sample(masked, mask, prev, 0.5, g1)
    assert (seps == 0).all() and torch.equal(a, sample_categorical(masked, g2))
    a, seps = sticky_sample(masked, torch.ones(b, 3, dtype=torch.bool), torch.full((b,), -1), 0.5,
                            torch.Generator().manual_seed(3))
    assert (seps == 0).all()


def test_eps_anneals_linearly_to_zero():
    cfg = PPOTrainConfig(total_env_steps=1000, sticky_eps=0.8, sticky_anneal_frac=0.5)
    assert [sticky_eps(cfg, s) for s in (0, 250, 500, 900)] == pytest.approx([0.8, 0.4, 0.0, 0.0])
    assert sticky_eps(PPOTrainConfig(total_env_steps=1000), 0) == 0.0
    with pytest.raises(ValueError):
        PPOTrainConfig(total_env_steps=1000, sticky_eps=1.0)


def _trainer(seed: int = 0, **train):
    core = make_scenario("smac/3m-v0", num_envs=4)
    torch.manual_seed(0)
    ag = PPOAgent(core, critic="central", hidden=[16])
    cfg = PPOTrainConfig(total_env_steps=10**6, num_envs=4, rollout_steps=16, epochs=1, minibatches=1,
                         team_reward=True, death_masking=True, bootstrap_truncated=False, **train)
    return PPOTrainer(ag, cfg, seed=seed)


def test_the_update_recomputes_the_behaviours_log_probability():
    # with a negligible step size the ratio stays 1: the stored log-prob is the mixture's, as the update computes it
    tr = _trainer(lr=1e-12, sticky_eps=0.8)
    st = tr.train_iteration()
    assert st["sticky/eps"] == pytest.approx(0.8)
    # eps + (1 - eps) * pi(previous action) where a previous action is available (not at episode starts)
    assert 0.6 < st["sticky/repeat_frac"] <= 1.0
    assert st["loss/approx_kl"] < 1e-9 and st["loss/clipfrac"] == 0.0


def test_eps_zero_is_the_plain_policy():
    a, b = _trainer(), _trainer(sticky_eps=0.0)
    for _ in range(2):
        a.train_iteration(), b.train_iteration()
    for p, q in zip(a.net.parameters(), b.net.parameters()):
        assert torch.equal(p, q)


def test_a_resume_carries_each_slots_previous_action():
    ref = _trainer(sticky_eps=0.8)
    for _ in range(2):
        ref.train_iteration()
    first = _trainer(sticky_eps=0.8)
    first.train_iteration()
    state = first.state_dict()
    assert not (state["carry"]["prev_a"] < 0).all()  # mid-episode slots remember their action
    resumed = _trainer(sticky_eps=0.8)
    resumed.load_state_dict(state)
    resumed.train_iteration()
    for p, q in zip(ref.net.parameters(), resumed.net.parameters()):
        assert torch.equal(p, q)
    np.testing.assert_array_equal(ref.prev_a.numpy(), resumed.prev_a.numpy())


def test_keys_that_do_nothing_are_named():
    """An anneal fraction given while sticky exploration is off, or a Huber delta with the MSE value loss, is said
    (``coopsim train`` and ``validate`` print the lines as warnings); given with their option on, or left at the
    default, nothing is said."""
    off = PPOTrainConfig(total_env_steps=1000, sticky_anneal_frac=0.3, huber_delta=5.0)
    assert off.inert_keys() == [
        "train.sticky_anneal_frac (0.3) has no effect: sticky-action exploration is off (train.sticky_eps is 0); set "
        "train.sticky_eps in (0, 1), e.g. 0.8, to use it",
        "train.huber_delta (5.0) has no effect: train.value_loss is 'mse'; set train.value_loss: huber to use it"]
    assert PPOTrainConfig(total_env_steps=1000, sticky_eps=0.8, sticky_anneal_frac=0.3, value_loss="huber",
                          huber_delta=5.0).inert_keys() == []
    assert PPOTrainConfig(total_env_steps=1000).inert_keys() == []  # defaults are not "given"


def test_validate_warns_of_a_key_that_does_nothing():
    from pathlib import Path

    from typer.testing import CliRunner

    from coopsim.cli import app

    configs = Path(__file__).resolve().parents[2] / "configs" / "smac"
    r = CliRunner().invoke(app, ["validate", str(configs / "3m-mappo.yaml"), "train.sticky_anneal_frac=0.3"])
    assert r.exit_code == 0, r.output
    assert "warning: train.sticky_anneal_frac (0.3) has no effect" in r.output
    r = CliRunner().invoke(app, ["validate", str(configs / "5m_vs_6m-mappo-sticky.yaml")])
    assert r.exit_code == 0 and "has no effect" not in r.output, r.output
