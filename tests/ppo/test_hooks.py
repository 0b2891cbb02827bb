"""Each trainer hook with its working example: intrinsic reward (added before GAE), auxiliary loss (trains the
encoder through the features), communication module (features -> channel -> next step's policy input)."""
import numpy as np
import pytest
import torch

import coopsim.agents.ppo.trainer as ppo_trainer
from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.agents.ppo.hook_examples import MeanBroadcast, NextObsPrediction, SimHashCountBonus
from coopsim.comm.ideal import IdealChannel
from coopsim.platform.comm import DEFAULT_HEADER_BYTES
from coopsim.platform.config import validate_config
from coopsim.platform.hooks import AuxiliaryLoss, CommModule, IntrinsicReward
from coopsim.platform.recorder import read_jsonl
from coopsim.platform.runner import run_config

from .corridor import CorridorCore

CFG = PPOTrainConfig(total_env_steps=10**6, num_envs=8, rollout_steps=8, lr=1e-3, epochs=2, minibatches=2)


def make(seed=0, **agent_kw):
    core = CorridorCore(8, num_agents=3, length=7, max_steps=10)
    torch.manual_seed(seed)
    return PPOAgent(core, critic="central", hidden=[16], **agent_kw)


def test_examples_satisfy_the_protocols():
    assert isinstance(SimHashCountBonus(), IntrinsicReward)
    assert isinstance(NextObsPrediction(), AuxiliaryLoss)
    assert isinstance(MeanBroadcast(), CommModule)


def test_intrinsic_bonus_is_added_to_rewards_before_gae(monkeypatch):
    seen = []
    real_gae = ppo_trainer.gae

    def spy(rewards, *a):
        seen.append(rewards.clone())
        return real_gae(rewards, *a)

    monkeypatch.setattr(ppo_trainer, "gae", spy)
    bonus = SimHashCountBonus(beta=0.5, bits=12)
    batches = []
    real_reward = bonus.reward
    monkeypatch.setattr(bonus, "reward", lambda b: (batches.append(b), real_reward(b))[1])
    tr = PPOTrainer(make(), CFG, seed=0, intrinsic=bonus)
    m1 = tr.train_iteration()
    b1 = batches[0]
    alive = b1.alive.float()
    # first rollout: all counts are 0 -> bonus = beta on every alive agent-step
    assert torch.equal(seen[0], b1.rewards + 0.5 * alive)
    assert m1["reward/intrinsic"] == pytest.approx(0.5)
    counts = np.bincount(bonus.codes(b1.next_obs.numpy())[b1.alive.numpy()], minlength=2**12)
    np.testing.assert_array_equal(bonus.counts, counts)
    tr.train_iteration()
    b2 = batches[1]
    n = counts[bonus.codes(b2.next_obs.numpy())]
    expect = torch.as_tensor(0.5 / np.sqrt(np.maximum(n, 1)), dtype=torch.float32) * b2.alive.float()
    assert torch.allclose(seen[1], b2.rewards + expect, atol=0)


def test_auxiliary_loss_trains_the_shared_encoder():
    def encoder_after_one_update(coef):
        aux = [NextObsPrediction(coef=coef)] if coef is not None else []
        tr = PPOTrainer(make(), CFG, seed=0, aux_losses=aux)
        tr.train_iteration()
        return [p.detach().clone() for p in tr.net.encoder.parameters()]

    none, zero, one = encoder_after_one_update(None), encoder_after_one_update(0.0), encoder_after_one_update(1.0)
    assert all(torch.equal(a, b) for a, b in zip(none, zero))      # coef 0 == no hook: the hook is additive
    assert any(not torch.allclose(a, b) for a, b in zip(none, one))  # its gradient reaches the encoder
    aux = NextObsPrediction(coef=1.0)
    tr = PPOTrainer(make(), CFG.model_copy(update={"lr": 3e-3}), seed=0, aux_losses=[aux])
    losses = [tr.train_iteration()["aux/NextObsPrediction"] for _ in range(15)]
    assert losses[-1] < 0.5 * losses[0]
    assert any(p is aux.head.weight for g in tr.optimizer.param_groups for p in g["params"])


def test_comm_module_messages_reach_the_next_policy_input_through_the_channel():
    comm = {"module": "coopsim.agents.ppo.hook_examples:MeanBroadcast", "params": {"width": 4}}
    ag = make(comm=comm)
    core = ag.scenario
    core.params.starts, core.params.goals = [0, 3, 6], [6, 0, 3]  # nobody finishes in one step
    ch = IdealChannel()
    tr = PPOTrainer(ag, CFG.model_copy(update={"rollout_steps": 1}), seed=0, channel=ch)
    E, N = 8, 3
    assert tr.inbox_in.shape == (E, N, 5) and not tr.inbox_in.any()
    with torch.no_grad():
        x = ag.actor_input(tr.obs, tr.inbox_in)
        feat = ag.net.features(x.reshape(E * N, -1), None)[0].reshape(E, N, -1)
        payload = torch.tanh(feat @ ag.comm.proj).numpy()
    tr.train_iteration()
    others = (payload.sum(1, keepdims=True) - payload) / (N - 1)  # mean over the two other senders
    np.testing.assert_allclose(tr.inbox_in[..., :4], others, atol=1e-6)
    np.testing.assert_array_equal(tr.inbox_in[..., 4], 1.0)
    s = ch.stats()
    assert s["comm/offered_copies"] == E * N * (N - 1)
    assert s["comm/delivered_bytes"] == E * N * (N - 1) * (4 * 4 + DEFAULT_HEADER_BYTES)


def test_comm_agent_runs_in_the_runner_loop(tmp_path):
    cfg = validate_config({
        "name": "ppo-comm", "out_dir": str(tmp_path), "max_steps": 6,
        "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 3, "length": 10}},
        "agents": {"id": "ppo/ippo-v0", "params": {"hidden": [8],
                   "comm": {"module": "coopsim.agents.ppo.hook_examples:MeanBroadcast", "params": {"width": 2}}}},
    })
    run = run_config(cfg, progress=False)
    row = read_jsonl(run / "metrics.jsonl")[0]
    # every alive agent broadcasts each step; copies = sum over steps of alive * (N - 1)
    assert row["comm/messages_sent"] > 0
    assert row["comm/offered_copies"] == 2 * row["comm/messages_sent"]
    assert row["comm/offered_bytes"] == row["comm/offered_copies"] * (2 * 4 + DEFAULT_HEADER_BYTES)


def test_mgmapf_goal_shaping_potential_on_real_observations():
    import types

    from coopsim.agents.ppo.mapf_shaping import MGMAPFGoalShaping
    from coopsim.agents.ppo.networks import flatten_obs
    from coopsim.platform.hooks import RolloutBatch
    from coopsim.scenarios.mapf import MGMAPFCore

    blocked = np.zeros((5, 5), bool)
    inst = types.SimpleNamespace(blocked=blocked, starts=np.array([(0, 2), (4, 4)]),
                                 goals=np.array([[(3, 2), (2, 0)], [(4, 3), (0, 0)]]))
    core = MGMAPFCore.from_instance(inst, num_envs=1, obs_radius=1, max_steps=20)
    o0 = flatten_obs(core.reset(seed=0), core.observation_space)
    o1 = flatten_obs(core.step(np.array([[4, 1]])).obs, core.observation_space)  # right; down (onto goal (4,3))
    sh = MGMAPFGoalShaping(num_goals=2, gamma=0.9, scale=0.5, per_goal=10)
    phi0 = sh.potential(torch.as_tensor(o0))[0]
    phi1 = sh.potential(torch.as_tensor(o1))[0]
    # agent 0: nearest goal 3 cells away (of 3 and 4), 2 left; then 2 cells, 2 left
    # agent 1: nearest 1 cell, 2 left; then it stands on (4,3): 1 left, the other goal 4+3 = 7 cells away
    assert phi0.tolist() == pytest.approx([-0.5 * (3 + 20), -0.5 * (1 + 20)])
    assert phi1.tolist() == pytest.approx([-0.5 * (2 + 20), -0.5 * (7 + 10)])
    batch = RolloutBatch(obs=torch.as_tensor(o0)[None], next_obs=torch.as_tensor(o1)[None], actions=None,
                         rewards=None, alive=None, dones=None)
    assert sh.reward(batch)[0, 0].tolist() == pytest.approx((0.9 * phi1 - phi0).tolist())
