"""Death masking (``train.death_masking``, MAPPO's rule for team rewards): a dead slot keeps the team reward
and its living teammates' mean value until the episode ends, so the dying agent's advantage counts the
rewards its team earns after its death. Exact values by hand and on the real SMAC core."""
import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer, gae
from coopsim.agents.ppo.trainer import death_mask_values
from coopsim.platform.registry import make_scenario


def test_dead_slots_take_the_living_slots_mean_value():
    v = torch.tensor([[1.0, 2.0, 6.0], [3.0, 5.0, 7.0], [1.0, 1.0, 1.0]])
    alive = torch.tensor([[True, False, True], [False, False, True], [False, False, False]])
    out = death_mask_values(v, alive)
    assert out.tolist() == [[1.0, 3.5, 6.0], [7.0, 7.0, 7.0], [0.0, 0.0, 0.0]]


def test_gae_runs_through_a_death_to_the_episode_end():
    # two agents, T = 3, agent 1 dies during step 0, the episode ends with step 2; team reward 1, 2, 4
    g, lam = 0.9, 0.8
    alive = torch.tensor([[True, True], [True, False], [True, False]])
    v = torch.tensor([[5.0, 4.0], [3.0, 99.0], [2.0, 99.0]])  # dead slots' own values are never used
    r = torch.tensor([[1.0], [2.0], [4.0]]).expand(3, 2)
    done = torch.tensor([[False], [False], [True]]).expand(3, 2)
    adv = gae(r, death_mask_values(v, alive), torch.zeros(2), done, g, lam)
    d2, d1 = 4 - 2.0, 2 + g * 2.0 - 3.0
    assert adv[2].tolist() == pytest.approx([d2, d2])
    assert adv[1].tolist() == pytest.approx([d1 + g * lam * d2] * 2)
    # agent 1's last action (step 0) bootstraps from the team's value 3 and sees the later team rewards
    a1_0 = (1 + g * 3.0 - 4.0) + g * lam * (d1 + g * lam * d2)
    assert float(adv[0, 1]) == pytest.approx(a1_0)


def test_entropy_coefficient_schedule_is_linear_in_env_steps():
    from coopsim.agents.ppo.trainer import entropy_coef

    cfg = PPOTrainConfig(total_env_steps=1000, ent_coef=0.05, ent_coef_end=0.01)
    assert [entropy_coef(cfg, s) for s in (0, 250, 1000, 5000)] == pytest.approx([0.05, 0.04, 0.01, 0.01])
    assert entropy_coef(PPOTrainConfig(total_env_steps=1000, ent_coef=0.03), 700) == 0.03


def test_death_masking_needs_team_reward():
    with pytest.raises(ValueError, match="needs team_reward"):
        PPOTrainConfig(total_env_steps=1, death_masking=True)


def _smac3m_trainer(num_envs: int, rollout_steps: int, death_masking: bool, seed: int):
    """A small MAPPO trainer on SMAC 3m with the SMAC configs' reward settings; returns ``(core, trainer)``."""
    core = make_scenario("smac/3m-v0", num_envs=num_envs)
    torch.manual_seed(0)
    ag = PPOAgent(core, critic="central", hidden=[16])
    cfg = PPOTrainConfig(total_env_steps=10**6, num_envs=num_envs, rollout_steps=rollout_steps, epochs=1, minibatches=1,
                         bootstrap_truncated=False, team_reward=True, death_masking=death_masking)
    return core, PPOTrainer(ag, cfg, seed=seed)


def _gae_inputs_of_one_rollout(monkeypatch, death_masking: bool) -> dict:
    """SMAC 3m, 4 envs x 30 steps: the arguments the trainer passes to ``gae`` (the real one runs)."""
    import coopsim.agents.ppo.trainer as trainer_mod

    seen = {}

    def spy(rewards, values, last_values, dones, gamma, lam):
        out = gae(rewards, values, last_values, dones, gamma, lam)
        seen.update(rewards=rewards.clone(), values=values.clone(), dones=dones.clone(), adv=out.clone())
        return out

    monkeypatch.setattr(trainer_mod, "gae", spy)
    core, tr = _smac3m_trainer(num_envs=4, rollout_steps=30, death_masking=death_masking, seed=5)
    alive = []
    real_step = core.step

    def step(actions):  # record which slots are alive at each step's start
        alive.append(np.asarray(core.alive).copy())
        return real_step(actions)

    core.step = step
    tr.train_iteration()
    seen["alive"] = torch.as_tensor(np.stack(alive))
    return seen


def test_smac_dead_slots_keep_team_reward_and_team_value(monkeypatch):
    on = _gae_inputs_of_one_rollout(monkeypatch, True)
    off = _gae_inputs_of_one_rollout(monkeypatch, False)
    alive = on["alive"]
    assert torch.equal(alive, off["alive"])  # same rollout (same seeds; the update comes after it)
    dead = ~alive
    assert dead.any(), "no agent died in the rollout; the test needs a death"
    # team reward: every slot of an env gets the same reward with death masking; dead slots 0 without
    r_on, r_off = on["rewards"], off["rewards"]
    assert torch.equal(r_on, r_on[..., :1].expand_as(r_on))
    assert torch.equal(r_off, r_on * alive)
    # dead slots take the living slots' mean value
    assert torch.allclose(on["values"], death_mask_values(off["values"], alive))
    # done flags: per env with death masking (equal across slots), per slot (death ends it) without
    d_on, d_off = on["dones"], off["dones"]
    assert torch.equal(d_on, d_on[..., :1].expand_as(d_on))
    assert (d_off & ~d_on).any()       # some death ended a slot's episode only without death masking
    assert torch.equal(d_off, d_on | d_off)


def test_training_episode_return_counts_smacs_shared_reward_once():
    """``episode/return`` in training is the runner's ``episode_return``: SMAC's team reward once per step (a full
    win returns 20), not once per agent (which read 3x larger on 3m)."""
    core, tr = _smac3m_trainer(num_envs=8, rollout_steps=120, death_masking=True, seed=3)
    running, finished = np.zeros(8), []
    real_step = core.step

    def step(actions):
        res = real_step(actions)
        running[:] += np.asarray(res.info["team_reward"], dtype=np.float64)
        for e in np.flatnonzero(np.asarray(core.done)):
            finished.append(running[e])
            running[e] = 0.0
        return res

    core.step = step
    stats = tr.train_iteration()
    assert stats["episodes"] == len(finished) > 8
    assert stats["episode/return"] == pytest.approx(np.mean(finished), rel=1e-5)
    assert max(finished) <= 20.0 + 1e-4
