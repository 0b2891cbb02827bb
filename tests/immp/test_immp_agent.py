"""IMMP plugin: training through the shared PPO trainer, checkpoints, and the shipped policy end to end."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from coopsim.agents.immp import IMMPAgent
from coopsim.platform.runner import play_episode
from coopsim.agents.immp.agent import SHIPPED_CHECKPOINT
from coopsim.agents.immp.intent import IntentLoss
from coopsim.agents.immp.rewards import CollaborativeReward
from coopsim.agents.ppo.config import PPOTrainConfig
from coopsim.errors import ConfigError
from coopsim.platform import registry
from coopsim.platform.hooks import RolloutBatch
from coopsim.scenarios.mapf import MGMAPFCore


def _small_core(num_envs=1, conflicts="block", radius=3, max_steps=64):
    blocked = np.zeros((10, 10), bool)
    blocked[4, 2:8] = True
    starts = np.array([[0, 0], [9, 0], [0, 9], [9, 9], [5, 0], [5, 9]])
    goals = np.array([[[9, 9], [0, 5]], [[0, 9], [9, 5]], [[9, 0], [5, 5]], [[0, 0], [2, 2]], [[5, 9], [7, 7]],
                      [[5, 0], [3, 6]]])
    inst = SimpleNamespace(blocked=blocked, starts=starts, goals=goals)
    return MGMAPFCore.from_instance(inst, num_envs=num_envs, conflicts=conflicts, obs_radius=radius,
                                    max_steps=max_steps, goal_order="free")


def test_collaborative_reward_arithmetic():
    k = 2
    obs = torch.zeros(1, 1, 3, 4 * k)
    nxt = torch.zeros(1, 1, 3, 4 * k)
    obs[..., 0:2 * k:2] = torch.tensor([1.0, 1.0])      # goal_status[:, 0]: both goals remaining
    nxt[..., 0:2 * k:2] = torch.tensor([1.0, 1.0])
    nxt[0, 0, 1, 0] = 0.0                                 # agent 1 visits a goal
    rew = torch.tensor([[[-1.0, -1.0, 0.0]]])
    alive = torch.ones(1, 1, 3, dtype=torch.bool)
    b = RolloutBatch(obs=obs, next_obs=nxt, actions=torch.zeros(1, 1, 3, dtype=torch.long), rewards=rew, alive=alive,
                     dones=torch.zeros(1, 1, 3, dtype=torch.bool))
    bonus = CollaborativeReward(0.5, 2.0, k).reward(b)
    team = -2.0 / 3.0
    expect = torch.tensor([[[0.5 * (team + 1), 0.5 * (team + 1) + 2.0, 0.5 * team]]])
    assert torch.allclose(bonus, expect)
    assert torch.allclose((rew + bonus)[..., [0, 2]], torch.tensor([[[0.5 * -1 + 0.5 * team, 0.5 * team]]]))


def test_trains_through_the_shared_ppo_trainer(tmp_path):
    torch.manual_seed(0)
    core = _small_core(num_envs=2)
    agent = registry.make_component("agent", "mapf/immp-v0", core, hidden=[32])
    trainer = agent.make_trainer(agent, PPOTrainConfig(total_env_steps=64, num_envs=2, rollout_steps=16,
                                                       epochs=1, minibatches=2), seed=0)
    assert any(isinstance(h, IntentLoss) for h in trainer.aux)
    assert isinstance(trainer.intrinsic, CollaborativeReward)
    before = [p.detach().clone() for p in agent.net.intent.parameters()]
    stats = trainer.train_iteration()
    assert np.isfinite(stats["aux/IntentLoss"]) and stats["aux/IntentLoss/labels"] > 0
    assert 0.0 <= stats["aux/IntentLoss/accuracy"] <= 1.0
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.net.intent.parameters()))  # the module learns
    # policy file round trip: a fresh agent loading it acts identically
    path = tmp_path / "policy.pt"
    agent.save(path)
    agent.scenario = _small_core()                       # act on a fresh one-env core
    loaded = registry.make_component("agent", "mapf/immp-v0", _small_core(), hidden=[32], checkpoint=str(path))

    def rollout(ag):
        obs = ag.scenario.reset(seed=3)
        ag.reset(3)
        acts = []
        for _ in range(5):
            a, _ = ag.act(obs)
            acts.append(a)
            obs = ag.scenario.step(a).obs
        return np.stack(acts)

    outs = [rollout(agent), rollout(loaded)]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_checkpoint_mismatch_is_a_config_error(tmp_path):
    agent = registry.make_component("agent", "mapf/immp-v0", _small_core(radius=3), hidden=[32])
    path = tmp_path / "p.pt"
    agent.save(path)
    with pytest.raises(ConfigError, match="window"):
        registry.make_component("agent", "mapf/immp-v0", _small_core(radius=2), hidden=[32], checkpoint=str(path))
    with pytest.raises(ConfigError, match="intent"):
        registry.make_component("agent", "mapf/dppo-v0", _small_core(radius=3), hidden=[32], checkpoint=str(path))


@pytest.mark.skipif(not SHIPPED_CHECKPOINT.is_file(), reason="no shipped checkpoint yet")
def test_shipped_checkpoint_end_to_end_under_allow(capsys):
    """IMMP with the shipped policy on a small map under `conflicts: allow`: it solves every seed, and with its
    CS-PIBT low level (the default) it never collides; the collisions of the ablation without it are reported."""
    core = _small_core(conflicts="allow", max_steps=96)
    report = {}
    for cs in (True, False):
        agent = registry.make_component("agent", "mapf/immp-v0", core, checkpoint="shipped", deterministic=False, cs_pibt=cs)
        assert isinstance(agent, IMMPAgent)
        successes, collisions = [], []
        for seed in range(3):
            m = play_episode(core, agent, seed)
            successes.append(m["success"])
            collisions.append(m["collisions"])
            assert m["soc"] >= m["lb"]
        report[cs] = (successes, collisions)
    with capsys.disabled():
        for cs, (su, co) in report.items():
            print(f"\nIMMP shipped policy, small map, conflicts=allow, cs_pibt={cs}: success {su}, collisions {co}")
    assert min(report[True][0]) == 1.0
    assert report[True][1] == [0.0, 0.0, 0.0]            # CS-PIBT's joint moves have no vertex or swap conflict


def test_last_move_intent_checkpoint_round_trip(tmp_path):
    """A policy whose intent module reads last moves reloads into a default config (the file's setting wins)."""
    from coopsim.platform import registry
    from coopsim.scenarios.mapf import MGMAPFCore

    core = MGMAPFCore(1, map="random", random_size=[17, 17], num_agents=4, num_goals=3, obs_radius=3)
    a = registry.make_component("agent", "mapf/immp-v0", core)
    a.replace_intent(a.params.intent_channels, True)
    path = tmp_path / "p.pt"
    a.save(path)
    b = registry.make_component("agent", "mapf/immp-v0", core, checkpoint=str(path))
    assert b.params.intent_last_move and b.net.intent.last_move
    for k, v in a.net.state_dict().items():
        assert torch.equal(v, b.net.state_dict()[k]), k
    # a wider module (fresh) is also the file's: a default-width config loads it with its width
    a.replace_intent(32, True)
    assert a.net.intent.body[0].out_channels == 32 and a.params.intent_channels == 32
    a.save(path)
    c = registry.make_component("agent", "mapf/immp-v0", core, checkpoint=str(path))
    assert c.params.intent_channels == 32 and c.net.intent.body[0].in_channels == 9
    x = torch.rand(6, c.net.in_dim)
    assert torch.equal(a.net.intent_logits(x), c.net.intent_logits(x))
    # asking explicitly for another width than the file's is a config error naming the key
    with pytest.raises(ConfigError, match="intent_channels"):
        registry.make_component("agent", "mapf/immp-v0", core, checkpoint=str(path), intent_channels=16)
    # a deeper module too: 3 conv layers of 32, receptive field 7 cells, read from the file
    a.replace_intent(32, True, 3)
    assert a.net.intent.depth == 3 and sum(isinstance(m, torch.nn.Conv2d) for m in a.net.intent.body) == 4
    a.save(path)
    d = registry.make_component("agent", "mapf/immp-v0", core, checkpoint=str(path))
    assert d.params.intent_depth == 3 and torch.equal(a.net.intent_logits(x), d.net.intent_logits(x))
    with pytest.raises(ConfigError, match="intent_depth"):
        registry.make_component("agent", "mapf/immp-v0", core, checkpoint=str(path), intent_depth=2)


def test_shipped_seed_directory_loads_the_variant_policy():
    from coopsim.agents.immp.agent import SHIPPED_CHECKPOINT

    d = SHIPPED_CHECKPOINT.parent / "seed-1"
    core = MGMAPFCore(1, map="random", random_size=[17, 17], num_agents=4, num_goals=3, obs_radius=3)
    a = registry.make_component("agent", "mapf/immp-v0", core, checkpoint=str(d))
    b = registry.make_component("agent", "mapf/immp-v0", core, checkpoint=str(d / "immp-v0.pt"))
    c = registry.make_component("agent", "mapf/dppo-v0", core, checkpoint=str(d))
    e = registry.make_component("agent", "mapf/dppo-v0", core, checkpoint=str(d / "dppo-v0.pt"))
    for x, y in ((a, b), (c, e)):
        for k, v in x.net.state_dict().items():
            assert torch.equal(v, y.net.state_dict()[k]), k


def test_eval_checkpoint_replaces_the_configs_shipped_policy():
    """`coopsim eval` of a config with `checkpoint: shipped` loads the shipped policy first, then the user's file:
    the shipped module's width is not a user setting, so a file of another width loads (fresh-user report)."""
    from coopsim.agents.immp.agent import SHIPPED_CHECKPOINT, SHIPPED_PPO
    from coopsim.platform import registry
    from coopsim.scenarios.mapf import MGMAPFCore

    core = MGMAPFCore(1, map="random", random_size=[17, 17], num_agents=4, num_goals=3, obs_radius=3)
    a = registry.make_component("agent", "mapf/immp-v0", core, checkpoint="shipped")
    shipped_width = a.net.intent.body[0].out_channels
    ppo_width = int(torch.load(SHIPPED_PPO, weights_only=False)["params"]["intent_channels"])
    assert shipped_width != ppo_width
    a.load(SHIPPED_PPO)
    assert a.net.intent.body[0].out_channels == ppo_width == a.params.intent_channels
    a.load(SHIPPED_CHECKPOINT)
    assert a.net.intent.body[0].out_channels == shipped_width


def test_missing_checkpoint_names_the_key_and_the_valid_values():
    from coopsim.platform import registry
    from coopsim.scenarios.mapf import MGMAPFCore

    core = MGMAPFCore(1, map="random", random_size=[17, 17], num_agents=4, num_goals=3, obs_radius=3)
    with pytest.raises(ConfigError, match=r"checkpoint 'nope' not found: give 'shipped'") as ei:
        registry.make_component("agent", "mapf/immp-v0", core, checkpoint="nope")
    assert ei.value.key == "agents.params.checkpoint"
