"""PPO's stacked observations (``agents.params.stack_frames``, MAPPO's stacked frames): the exact history the actor
reads in training and in acting, its restart at an episode's start, the ASN entity stream over frames, and that
it is part of a checkpoint's architecture and of the trainer's resume state."""
import copy

import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.errors import ConfigError
from coopsim.platform.registry import make_scenario


def test_push_frame_shifts_newest_first_and_restarts_per_env():
    core = make_scenario("smac/3m-v0", num_envs=2)
    ag = PPOAgent(core, stack_frames=3)
    D = ag.obs_dim
    o1, o2, o3 = (np.full((2, 3, D), v, np.float32) for v in (1.0, 2.0, 3.0))
    h = ag.push_frame(None, o1, None)
    assert h.shape == (2, 3, 3, D) and (h == 1.0).all()            # first step: every frame is the first one
    h = ag.push_frame(h, o2, np.array([False, False]))
    assert (h[:, :, 0] == 2.0).all() and (h[:, :, 1:] == 1.0).all()
    h = ag.push_frame(h, o3, np.array([False, True]))              # env 1 starts a new episode
    assert [float(h[0, 0, f, 0]) for f in range(3)] == [3.0, 2.0, 1.0]
    assert (h[1] == 3.0).all()


def _record_inputs(ag):
    seen = []
    orig = ag.actor_input

    def spy(obs, inbox):
        x = orig(obs, inbox)
        seen.append(x.clone())
        return x
    ag.actor_input = spy
    return seen


def test_training_rollout_feeds_the_previous_observation_except_at_episode_starts():
    E, T = 4, 40
    core = make_scenario("smac/3m-v0", num_envs=E)
    torch.manual_seed(0)
    ag = PPOAgent(core, stack_frames=2)
    D, N = ag.obs_dim, core.num_agents
    assert ag.net.encoder[0].in_features == 2 * D + N                # two frames, then the agent id
    tr = PPOTrainer(ag, PPOTrainConfig(total_env_steps=10**6, num_envs=E, rollout_steps=T, epochs=1, minibatches=2,
                                       team_reward=True), seed=3)
    obs, starts = [], []
    step = core.step

    def spy_step(actions):  # the observation and start flags the rollout holds before each step
        obs.append(tr.obs.copy())
        starts.append(tr.starts.copy())
        return step(actions)
    core.step = spy_step
    seen = _record_inputs(ag)
    tr.train_iteration()
    assert len(seen) == T
    restarted = 0
    for t in range(T):
        x = seen[t].numpy()
        np.testing.assert_array_equal(x[..., :D], obs[t])
        prev = obs[t] if (t == 0) else np.where(starts[t][:, None, None], obs[t], obs[t - 1])
        np.testing.assert_array_equal(x[..., D:2 * D], prev)
        np.testing.assert_array_equal(x[..., 2 * D:], np.broadcast_to(np.eye(N), (E, N, N)))
        restarted += int(starts[t].sum()) if t > 0 else 0
    assert restarted > 0  # some env started a new episode inside the rollout, so the restart was exercised


def test_acting_reads_the_history_and_reset_restarts_it():
    core = make_scenario("smac/3m-v0", num_envs=2)
    ag = PPOAgent(core, stack_frames=2)
    D = ag.obs_dim
    seen = _record_inputs(ag)
    o0 = core.reset(seed=5)
    ag.reset(5)
    a, _ = ag.act(o0)
    o1 = core.step(a).obs
    ag.act(o1)
    f0, f1 = (o.reshape(2, 3, -1) for o in (o0, o1))
    np.testing.assert_array_equal(seen[0][..., :D].numpy(), f0)
    np.testing.assert_array_equal(seen[0][..., D:2 * D].numpy(), f0)
    np.testing.assert_array_equal(seen[1][..., :D].numpy(), f1)
    np.testing.assert_array_equal(seen[1][..., D:2 * D].numpy(), f0)
    assert not np.array_equal(f0, f1)
    ag.reset(6)
    ag.act(o1)
    np.testing.assert_array_equal(seen[2][..., D:2 * D].numpy(), f1)  # after reset the old frame is gone


def test_asn_entity_stream_reads_each_enemy_from_every_frame():
    """With two frames, enemy j's embedding is the entity layer on [its block now, its block one step ago]."""
    core = make_scenario("smac/3m-v0", num_envs=1, obs_own_cooldown=True)
    torch.manual_seed(1)
    ag = PPOAgent(core, actor="asn", activation="relu", hidden=[16, 8], stack_frames=2)
    net = ag.net
    first, n, offset, feats = core.action_entities()
    D = ag.obs_dim
    assert net.entity[0].in_features == 2 * feats
    for p in net.parameters():
        p.data.normal_(0.0, 0.5)
    x = torch.randn(3, 2 * D + 3)
    got = net.logits(net.features(x, None)[0], torch.ones(3, core.action_space.n, dtype=torch.bool))
    for r in range(3):
        z = x[r]
        for lin in (net.encoder[0], net.encoder[2]):
            z = torch.relu(lin(z))
        for j in range(n):
            now = x[r, offset + j * feats: offset + (j + 1) * feats]
            before = x[r, D + offset + j * feats: D + offset + (j + 1) * feats]
            e = torch.relu(net.entity[0](torch.cat([now, before])))
            assert torch.allclose(got[r, first + j], torch.dot(net.q(z), e), atol=1e-5)


def test_stack_frames_is_part_of_the_checkpoint_and_of_the_resume_state(tmp_path):
    core = make_scenario("smac/3m-v0", num_envs=2)
    ag = PPOAgent(core, stack_frames=2)
    cfg = PPOTrainConfig(total_env_steps=10**6, num_envs=2, rollout_steps=8, epochs=1, minibatches=2, team_reward=True)
    tr = PPOTrainer(ag, cfg, seed=0)
    tr.train_iteration()
    ag.save(tmp_path / "p.pt")
    with pytest.raises(ConfigError, match="stack_frames=2") as info:
        PPOAgent(core).load(tmp_path / "p.pt")
    assert info.value.key == "agents.params.stack_frames"
    again = PPOAgent(core, stack_frames=2)
    again.load(tmp_path / "p.pt")
    state = copy.deepcopy(tr.state_dict())  # as from the checkpoint file: Adam's state is not shared
    tr2 = PPOTrainer(PPOAgent(make_scenario("smac/3m-v0", num_envs=2), stack_frames=2), cfg, seed=0)
    tr2.load_state_dict(state)
    np.testing.assert_array_equal(tr2.hist, tr.hist)
    a, b = tr.train_iteration(), tr2.train_iteration()  # the resumed trainer continues exactly
    assert a["loss/policy"] == b["loss/policy"]


def test_a_policy_for_another_map_names_the_map_and_params_it_was_trained_on(tmp_path):
    """Loading a 3m policy on 8m, or with another ``obs_own_cooldown``, says which scenario and param the file was
    trained with (not just an internal size) and is keyed to the config key to change."""
    ag = PPOAgent(make_scenario("smac/3m-v0", num_envs=1, obs_own_cooldown=True))
    ag.save(tmp_path / "p.pt")
    with pytest.raises(ConfigError) as info:
        PPOAgent(make_scenario("smac/8m-v0", num_envs=1, obs_own_cooldown=True)).load(tmp_path / "p.pt")
    msg = str(info.value)
    assert "trained on smac/3m-v0" in msg and "this run's scenario is smac/8m-v0" in msg and "config.yaml" in msg
    assert info.value.key == "scenario.id"
    with pytest.raises(ConfigError) as info:
        PPOAgent(make_scenario("smac/3m-v0", num_envs=1, obs_own_cooldown=False)).load(tmp_path / "p.pt")
    assert "scenario.params.obs_own_cooldown=True (this run: False)" in str(info.value)
    assert info.value.key == "scenario.params.obs_own_cooldown"
