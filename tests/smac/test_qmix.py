"""QMIX: monotonic mixer, TD(lambda) targets by hand, acting with masks, policy files, a short training run."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from coopsim.agents.qmix import QMIXAgent, QMIXTrainConfig
from coopsim.agents.qmix.networks import QMixer
from coopsim.agents.qmix.trainer import QMIXTrainer, lambda_returns
from coopsim.errors import ConfigError
from coopsim.scenarios.smac import SMACCore

torch.set_num_threads(1)


def test_mixer_is_monotonic_in_every_agent_q():
    torch.manual_seed(0)
    mixer = QMixer(n_agents=4, state_dim=7)
    q = torch.randn(64, 4, requires_grad=True)
    s = torch.randn(64, 7)
    mixer(q, s).sum().backward()
    assert (q.grad >= 0).all() and (q.grad > 0).any()


def test_lambda_returns_by_hand():
    gamma, lam = 0.5, 0.5
    # one episode of 3 steps that terminates, padded to T = 4
    r = torch.tensor([[1.0, 2.0, 4.0, 0.0]])
    term = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    filled = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    v = torch.tensor([[9.0, 10.0, 20.0, 40.0, 80.0]])  # V(s_1..s_4) in columns 1..4
    g = lambda_returns(r, term, filled, v, gamma, lam)
    g2 = 4.0  # terminal: no bootstrap
    g1 = 2.0 + gamma * ((1 - lam) * 20.0 + lam * g2)  # 2 + 0.5 * (10 + 2) = 8
    g0 = 1.0 + gamma * ((1 - lam) * 10.0 + lam * g1)  # 1 + 0.5 * (5 + 4) = 5.5
    assert (g0, g1) == (5.5, 8.0)
    np.testing.assert_allclose(g[0, :3].numpy(), [g0, g1, g2])
    # lambda = 0 is one-step TD; a truncated last step bootstraps from the final state's value
    g = lambda_returns(r, torch.zeros_like(term), filled, v, gamma, 0.0)
    np.testing.assert_allclose(g[0, :3].numpy(), [1 + 0.5 * 10, 2 + 0.5 * 20, 4 + 0.5 * 40])


def test_act_respects_masks_and_epsilon():
    core = SMACCore(num_envs=4, map_name="3m")
    obs = core.reset(seed=0)
    agent = QMIXAgent(core, epsilon=1.0, seed=3)
    for _ in range(10):
        m = core.action_masks()
        a, _ = agent.act(obs)
        assert np.take_along_axis(m, a[..., None], 2).all()
        obs = core.step(a).obs


def test_policy_file_roundtrip_and_mismatch(tmp_path):
    core = SMACCore(num_envs=2, map_name="3m")
    obs = core.reset(seed=0)
    torch.manual_seed(1)
    a1 = QMIXAgent(core)
    a1.save(tmp_path / "policy.pt")
    torch.manual_seed(2)
    a2 = QMIXAgent(core)
    a2.load(tmp_path)
    np.testing.assert_array_equal(a1.act(obs)[0], a2.act(obs)[0])
    other = QMIXAgent(SMACCore(num_envs=1, map_name="8m"))
    with pytest.raises(ConfigError, match="in_dim"):
        other.load(tmp_path / "policy.pt")


def test_training_iterations_update_and_resume_exactly():
    def make():
        torch.manual_seed(0)
        core = SMACCore(num_envs=4, map_name="3m", max_steps=10)
        agent = QMIXAgent(core)
        cfg = QMIXTrainConfig(total_env_steps=10_000, num_envs=4, batch_episodes=4, buffer_episodes=64,
                              updates_per_iteration=2, target_update_episodes=8)
        return QMIXTrainer(agent, cfg, seed=7)

    t = make()
    m = [t.train_iteration() for _ in range(3)]
    assert t.iteration == 3 and t.buffer.size == 12 and 4 * 3 <= t.env_steps <= 4 * 3 * 10
    assert np.isfinite(m[-1]["loss/td"]) and m[-1]["train/epsilon"] < 1.0
    # one episode per env per iteration: the progress line's "over N episodes" counts episodes, not iterations
    assert [x["episodes"] for x in m] == [4.0, 4.0, 4.0] and m[-1]["train/episodes"] == 12.0
    from coopsim.platform.trainer import progress_info
    means: dict = {}
    for x in m:
        line = progress_info(x, means)
    assert "over 12 episodes" in line
    state = copy.deepcopy(t.state_dict())  # state_dict() shares tensors with the live modules
    after = [t.train_iteration() for _ in range(2)]
    t2 = make()
    t2.load_state_dict(state)
    again = [t2.train_iteration() for _ in range(2)]
    for x, y in zip(after, again):
        assert x == pytest.approx(y)
