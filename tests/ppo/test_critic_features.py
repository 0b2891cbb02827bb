"""MAPPO's optional critic features, exact values: the agent-specific global state (``agents.params.critic_obs``:
state() followed by the agent's own observation) and the Huber value loss (``train.value_loss: huber``)."""
import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.agents.ppo.trainer import value_loss
from coopsim.errors import ConfigError
from coopsim.platform.registry import make_scenario


def test_huber_value_loss_matches_hand_values():
    v = torch.tensor([0.5, -3.0, 20.0, -12.0])
    t = torch.zeros(4)
    # |e| <= 10: 0.5 e^2; beyond: 10 (|e| - 5)
    assert value_loss(v, t, "huber", 10.0).tolist() == pytest.approx([0.125, 4.5, 150.0, 70.0])
    assert value_loss(v, t, "mse").tolist() == pytest.approx([0.125, 4.5, 200.0, 72.0])
    # delta 1: the gradient is clipped to +-1 outside [-1, 1]
    x = torch.tensor([-3.0, 0.5, 2.0], requires_grad=True)
    value_loss(x, torch.zeros(3), "huber", 1.0).sum().backward()
    assert x.grad.tolist() == pytest.approx([-1.0, 0.5, 1.0])


def test_agent_specific_critic_input_is_state_then_own_observation():
    core = make_scenario("smac/3m-v0", num_envs=2)
    obs = core.reset(seed=3)
    plain = PPOAgent(core, critic="central")
    ag = PPOAgent(core, critic="central", critic_obs=True)
    S, D, N = core.state().shape[1], obs.shape[2], core.num_agents
    c = ag.critic_input(obs.reshape(2, N, -1), core.state())
    assert c.shape == (2, N, S + D + N)
    assert plain.critic_input(obs.reshape(2, N, -1), core.state()).shape == (2, N, S + N)
    for e in range(2):
        for i in range(N):
            assert torch.equal(c[e, i, :S], torch.as_tensor(core.state()[e]))
            assert torch.equal(c[e, i, S:S + D], torch.as_tensor(obs[e, i]))
            assert c[e, i, S + D:].tolist() == [1.0 if j == i else 0.0 for j in range(N)]
    assert ag.net.critic[0][0].in_features == S + D + N


def test_critic_obs_is_part_of_the_architecture_and_old_files_load(tmp_path):
    core = make_scenario("smac/3m-v0", num_envs=1)
    plain = PPOAgent(core, critic="central")
    ck = plain.checkpoint()
    del ck["params"]["critic_obs"]  # a policy file written before the option existed
    torch.save(ck, tmp_path / "old.pt")
    PPOAgent(core, critic="central").load(tmp_path / "old.pt")  # loads: the missing key means False
    with pytest.raises(ConfigError, match="critic_obs"):
        PPOAgent(core, critic="central", critic_obs=True).load(tmp_path / "old.pt")
    with pytest.raises(ValueError, match="central"):
        PPOAgent(core, critic="local", critic_obs=True)


def test_training_with_both_options_runs_and_uses_the_wider_critic():
    core = make_scenario("smac/3m-v0", num_envs=4)
    ag = PPOAgent(core, critic="central", critic_obs=True)
    cfg = PPOTrainConfig(total_env_steps=64, num_envs=4, rollout_steps=8, epochs=1, minibatches=1, team_reward=True,
                         death_masking=True, value_loss="huber", huber_delta=10.0, tensorboard=False, progress=False)
    tr = PPOTrainer(ag, cfg, seed=0)
    w0 = ag.net.critic[0][0].weight.detach().clone()
    st = tr.train_iteration()
    assert np.isfinite(st["loss/value"])
    assert not torch.equal(ag.net.critic[0][0].weight, w0)


@pytest.mark.parametrize("actor", ["mlp", "asn"])
def test_critic_hidden_sets_only_the_critic_widths_and_is_part_of_the_architecture(tmp_path, actor):
    core = make_scenario("smac/3m-v0", num_envs=1)
    S, N = core.state().shape[1], core.num_agents
    wide = PPOAgent(core, critic="central", actor=actor, hidden=[32], critic_hidden=[48, 24])
    lin = [m for m in wide.net.critic.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in lin] == [(S + N, 48), (48, 24), (24, 1)]
    assert wide.net.encoder[0].out_features == 32  # the actor keeps hidden
    same = PPOAgent(core, critic="central", actor=actor, hidden=[32])
    assert [m.out_features for m in same.net.critic.modules() if isinstance(m, torch.nn.Linear)] == [32, 1]
    torch.save(same.checkpoint(), tmp_path / "narrow.pt")
    with pytest.raises(ConfigError, match="critic_hidden"):
        PPOAgent(core, critic="central", actor=actor, hidden=[32], critic_hidden=[48, 24]).load(tmp_path / "narrow.pt")
    old = same.checkpoint()
    del old["params"]["critic_hidden"]  # written before the option existed: None, the same as hidden
    torch.save(old, tmp_path / "old.pt")
    PPOAgent(core, critic="central", actor=actor, hidden=[32]).load(tmp_path / "old.pt")
    with pytest.raises(ValueError, match="widths"):
        PPOAgent(core, critic="central", critic_hidden=[0])
