"""Learning test (issue 3): on one fixed 5x5 MG-MAPF instance with two agents, the argmax MAPPO policy reaches
the brute-force optimal sum of costs within 200k env steps, for 3 of 3 seeds."""
import types

import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.scenarios.mapf import MGMAPFCore

from .mapf_bruteforce import optimal_soc_2agents

BLOCKED = np.zeros((5, 5), bool)
BLOCKED[1, 1] = BLOCKED[1, 3] = BLOCKED[3, 1] = BLOCKED[3, 3] = True
STARTS = [(0, 2), (4, 2)]                      # (x, y): facing each other on the middle row
GOALS = [[(4, 2), (2, 0)], [(0, 2), (2, 4)]]   # K = 2 goals each, free order: they must cross
BUDGET = 200_000
SCENARIO = dict(obs_radius=2, max_steps=40)


def greedy_soc(agent: PPOAgent, core: MGMAPFCore) -> float:
    obs = core.reset(seed=0)
    agent.reset(0)
    while not core.done.all():
        obs = core.step(agent.act(obs)[0]).obs
    return core.episode_metrics()[0]["soc"]


def test_bruteforce_rules_agree_with_the_core_on_random_joint_actions():
    """The independent two-agent rules used for the optimum match the scenario's step, move by move."""
    from .mapf_bruteforce import _step2

    inst = types.SimpleNamespace(blocked=BLOCKED, starts=np.array(STARTS), goals=np.array(GOALS))
    core = MGMAPFCore.from_instance(inst, num_envs=1, **SCENARIO)
    core.reset(seed=0)
    rng = np.random.default_rng(0)
    pos = tuple(STARTS)
    for _ in range(300):
        if core.done.all():
            core.reset(seed=0)
            pos = tuple(STARTS)
        a = rng.integers(0, 5, size=2)
        core.step(a[None])
        pos = _step2(BLOCKED, pos, tuple(int(x) for x in a))
        assert [tuple(p) for p in core.agent_xy()[0].tolist()] == list(pos)


def test_optimum_is_known():
    assert optimal_soc_2agents(BLOCKED, STARTS, GOALS) == 16


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mappo_reaches_the_optimal_soc(seed):
    opt = optimal_soc_2agents(BLOCKED, STARTS, GOALS)
    inst = types.SimpleNamespace(blocked=BLOCKED, starts=np.array(STARTS), goals=np.array(GOALS))
    train_core = MGMAPFCore.from_instance(inst, num_envs=32, **SCENARIO)
    eval_core = MGMAPFCore.from_instance(inst, num_envs=1, **SCENARIO)
    torch.manual_seed(seed)
    agent = PPOAgent(train_core, critic="central", hidden=[64, 64])
    greedy = PPOAgent(eval_core, critic="central", hidden=[64, 64])
    cfg = PPOTrainConfig(total_env_steps=BUDGET, num_envs=32, rollout_steps=32, lr=3e-3, epochs=4, minibatches=2,
                         team_reward=True)
    trainer = PPOTrainer(agent, cfg, seed)
    soc = None
    while trainer.env_steps < BUDGET:
        trainer.train_iteration()
        greedy.net.load_state_dict(agent.net.state_dict())
        soc = greedy_soc(greedy, eval_core)
        if soc == opt:
            break
    assert soc == opt, f"seed {seed}: greedy SoC {soc} after {trainer.env_steps} env steps; optimum {opt}"
    print(f"seed {seed}: optimal SoC {opt} reached after {trainer.env_steps} env steps")
