"""PPO trainer pieces with exact expected values: GAE, value normalisation, obs flattening, masks, replay of
the rollout in the update (ratio exactly 1 with lr 0, feed-forward and GRU), and a small learning test."""
import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer, gae
from coopsim.agents.ppo.networks import ValueNorm, flatten_obs
from coopsim.errors import ConfigError

from .corridor import CorridorCore, optimal_soc


def test_gae_matches_hand_computation():
    # one slot, T = 3, done after step 1 (index 1): no bootstrap across it
    r = torch.tensor([[1.0], [2.0], [3.0]])
    v = torch.tensor([[0.5], [1.0], [2.0]])
    last = torch.tensor([4.0])
    d = torch.tensor([[False], [True], [False]])
    g, lam = 0.9, 0.8
    d2 = 3 + g * 4 - 2            # step 2 bootstraps from last value
    d1 = 2 - 1.0                  # step 1 ends the episode
    d0 = 1 + g * 1.0 - 0.5
    a2 = d2
    a1 = d1
    a0 = d0 + g * lam * a1
    out = gae(r, v, last, d, g, lam)
    assert torch.allclose(out[:, 0], torch.tensor([a0, a1, a2]), atol=1e-6)


def test_gae_lambda_one_is_discounted_return_minus_value():
    torch.manual_seed(0)
    r, v = torch.randn(6, 2), torch.randn(6, 2)
    d = torch.zeros(6, 2, dtype=torch.bool)
    last = torch.randn(2)
    adv = gae(r, v, last, d, 0.95, 1.0)
    ret = last.clone()
    for t in reversed(range(6)):
        ret = r[t] + 0.95 * ret
        assert torch.allclose(adv[t] + v[t], ret, atol=1e-5)


def test_value_norm_equals_numpy_moments_over_all_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=n) for n in (5, 17, 100)]
    vn = ValueNorm(eps=0.0)
    for b in batches:
        vn.update(torch.as_tensor(b))
    allx = np.concatenate(batches)
    assert float(vn.mean) == pytest.approx(allx.mean(), rel=1e-12)
    assert float(vn.var) == pytest.approx(allx.var(), rel=1e-12)
    x = torch.tensor([1.0, 5.0])
    assert torch.allclose(vn.denormalize(vn.normalize(x)), x, atol=1e-5)


def test_dict_obs_flattened_in_space_order():
    core = CorridorCore(2, num_agents=2, length=4, starts=[0, 3], goals=[2, 1])
    obs = core.reset(seed=0)
    assert list(core.observation_space.spaces) == ["goal", "pos"]  # gymnasium sorts the keys
    flat = flatten_obs(obs, core.observation_space)
    assert flat.shape == (2, 2, 8) and flat.dtype == np.float32
    np.testing.assert_array_equal(flat[1, 0], [0, 0, 1, 0, 1, 0, 0, 0])  # goal 2 then pos 0
    np.testing.assert_array_equal(flat[1, 1], [0, 1, 0, 0, 0, 0, 0, 1])


def test_sampling_respects_masks_and_dead_slots_take_noop():
    core = CorridorCore(64, num_agents=2, length=5, starts=[0, 4], goals=[0, 3])  # agent 0 starts finished
    core.reset(seed=0)
    ag = PPOAgent(core, critic="local", deterministic=False)
    ag.reset(1)
    for _ in range(3):
        a, _ = ag.act(core._obs())
        assert (a[:, 0] == 0).all()          # not alive -> no-op
        assert not (a[:, 1] == 2).any()      # at the right end: 'right' is masked
        assert set(np.unique(a[:, 1])) <= {0, 1}
        assert len(np.unique(a[:, 1])) == 2  # both allowed actions do occur (it samples)


@pytest.mark.parametrize("recurrent", [False, True])
def test_update_replays_the_rollout_exactly(recurrent):
    """With lr = 0 the parameters stay put, so every minibatch must recompute the rollout's log-probs:
    ratio 1, approx KL 0, clip fraction 0 (for the GRU this checks the sequence replay with resets)."""
    core = CorridorCore(6, num_agents=3, length=6, max_steps=5)  # short episodes: resets inside the rollout
    torch.manual_seed(0)
    ag = PPOAgent(core, critic="central", recurrent=recurrent, hidden=[16])
    tr = PPOTrainer(ag, PPOTrainConfig(total_env_steps=10**6, num_envs=6, rollout_steps=12, lr=1e-12, epochs=2,
                                       minibatches=3, max_grad_norm=1e-12), seed=3)
    before = [p.detach().clone() for p in ag.net.actor_parameters()] if hasattr(ag.net, "actor_parameters") else \
        [p.detach().clone() for p in ag.net.parameters()]
    m = tr.train_iteration()
    assert m["episodes"] >= 6  # episodes ended inside the rollout
    assert abs(m["loss/approx_kl"]) < 1e-6 and m["loss/clipfrac"] == 0.0
    for p, q in zip(before, ag.net.parameters()):
        assert torch.allclose(p, q, atol=1e-9)


def test_ippo_gru_learns_the_optimal_corridor_plan():
    """Agents see only their own cell and goal; the optimum needs agent 0 to wait one step and then go.
    A memoryless argmax policy cannot do that (it repeats the same action in the same observation and
    deadlocks in a vertex conflict); the GRU policy must find the optimal SoC."""
    starts, goals = [0, 2], [3, 1]
    opt = optimal_soc(5, starts, goals)
    assert opt == 5  # agent 1 steps aside first (1), agent 0 then walks 4 steps
    core = CorridorCore(16, num_agents=2, length=5, starts=starts, goals=goals, max_steps=12)
    ev = CorridorCore(1, num_agents=2, length=5, starts=starts, goals=goals, max_steps=12)
    torch.manual_seed(0)
    ag = PPOAgent(core, critic="local", recurrent=True, hidden=[32])
    tr = PPOTrainer(ag, PPOTrainConfig(total_env_steps=60_000, num_envs=16, rollout_steps=16, lr=3e-3,
                                       minibatches=2, team_reward=True), seed=0)
    greedy = PPOAgent(ev, critic="local", recurrent=True, hidden=[32])
    soc = None
    while tr.env_steps < 60_000:
        tr.train_iteration()
        greedy.net.load_state_dict(ag.net.state_dict())
        obs = ev.reset(seed=0)
        greedy.reset(0)
        while not ev.done.all():
            obs = ev.step(greedy.act(obs)[0]).obs
        soc = ev.episode_metrics()[0]["soc"]
        if soc == opt:
            break
    assert soc == opt, f"greedy SoC {soc} after {tr.env_steps} env steps; optimum {opt}"


def test_mappo_needs_a_state():
    from coopsim.platform.registry import make_scenario

    core = make_scenario("line/LineWalk-v0", num_envs=1)
    core.state_space = None
    with pytest.raises(ConfigError, match="agents.params.critic"):
        PPOAgent(core, critic="central")


def test_explained_variance_by_hand():
    from coopsim.agents.ppo.trainer import explained_variance

    y = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    every = torch.ones(2, 2, dtype=torch.bool)
    assert explained_variance(y, y, every) == 1.0                      # perfect critic
    assert explained_variance(torch.full_like(y, 2.5), y, every) == 0.0  # the targets' mean
    # residuals 1, -1, 1, -1 (variance 1) against targets of variance 1.25: 1 - 1 / 1.25 = 0.2
    assert explained_variance(y + torch.tensor([[1.0, -1.0], [1.0, -1.0]]), y, every) == pytest.approx(0.2)
    # the mask: only the first row counts (targets 1, 2; predictions 1, 0 -> residuals 0, 2: variance 1 / 0.25)
    first = torch.tensor([[True, True], [False, False]])
    assert explained_variance(torch.tensor([[1.0, 0.0], [9.0, 9.0]]), y, first) == pytest.approx(1 - 1.0 / 0.25)
    assert np.isnan(explained_variance(y, y, torch.zeros(2, 2, dtype=torch.bool)))
    assert np.isnan(explained_variance(y, torch.ones(2, 2), every))  # targets of zero variance


def test_training_logs_explained_variance():
    core = CorridorCore(16, num_agents=2, length=5, max_steps=8)
    torch.manual_seed(0)
    tr = PPOTrainer(PPOAgent(core, critic="central", hidden=[32]),
                    PPOTrainConfig(total_env_steps=10**6, num_envs=16, rollout_steps=16, epochs=4, minibatches=2,
                                   lr=3e-3), seed=3)
    ev = [tr.train_iteration()["loss/explained_variance"] for _ in range(30)]
    assert all(np.isfinite(ev)) and max(ev) <= 1.0
    # an untrained critic explains nothing (|ev| < 0.05 in the first iterations); trained, a good part
    assert max(abs(v) for v in ev[:3]) < 0.05 and np.mean(ev[-10:]) > 0.2
