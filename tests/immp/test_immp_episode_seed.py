"""Fresh-user pass 35 (F3): an IMMP episode depended on the episodes run before it. The high level's generator
(best-response group shuffles) was made once and never reseeded, so seed 1 alone and seed 1 after seed 0 gave
different plans and SoC. ``reset(seed)`` now reseeds it from the episode seed, as every other component is."""
import numpy as np

from coopsim.platform import registry
from coopsim.platform.runner import play_episode
from coopsim.scenarios.mapf import MGMAPFCore


def _core():
    return MGMAPFCore(1, map="random-32-32-10", num_agents=16, num_goals=3, obs_radius=3, goal_order="free",
                      max_steps=128)


def _plans(agent):
    env = agent.hl.planner.envs[0]
    return env.order.copy(), env.plan.copy()


def test_reset_reseeds_the_group_shuffles_from_the_episode_seed():
    core = _core()
    for agent_id in ("mapf/immp-v0", "mapf/immp-nointent-v0", "mapf/pibt-v0"):
        agent = registry.make_component("agent", agent_id, core)
        draws = []
        for seed in (3, 4, 3):
            agent.reset(seed)
            draws.append(agent.hl.planner.rng.permutation(64))
            agent.hl.planner.rng.permutation(64)                 # what an episode would use up
        np.testing.assert_array_equal(draws[0], draws[2])
        assert not np.array_equal(draws[0], draws[1])
    agent = registry.make_component("agent", "mapf/immp-v0", core, highlevel={"seed": 1})
    agent.reset(3)
    assert not np.array_equal(agent.hl.planner.rng.permutation(64), draws[0])   # the high level's own seed counts


def test_an_episode_does_not_depend_on_the_episodes_before_it():
    core = _core()
    agent = registry.make_component("agent", "mapf/immp-v0", core)   # untrained (the CLI test runs the shipped policy)
    first = play_episode(core, agent, 1)                 # seed 1 alone (a fresh agent)
    agent.reset(1)
    agent.act(core.reset(seed=1))                         # the plans made at the first step of seed 1
    order1, plan1 = _plans(agent)
    play_episode(core, agent, 0)                          # another episode in between
    again = play_episode(core, agent, 1)                  # seed 1 after seed 0
    assert again["soc"] == first["soc"] and again["makespan"] == first["makespan"]
    agent.reset(1)
    agent.act(core.reset(seed=1))                         # the plans made at the first step of seed 1
    order2, plan2 = _plans(agent)
    np.testing.assert_array_equal(order1, order2)
    np.testing.assert_array_equal(plan1, plan2)


def test_the_cli_gives_seed_1_the_same_episode_alone_and_after_seed_0(tmp_path):
    import json
    import subprocess
    import sys

    socs, replays = [], []
    for seeds in ("[1]", "[0,1]"):
        out = tmp_path / seeds.strip("[]").replace(",", "-")
        subprocess.run([sys.executable, "-m", "coopsim", "run", "configs/mapf/immp-eval-random-32-32-10-immp.yaml",
                        f"seeds={seeds}", "scenario.params.num_agents=32", "max_steps=128", f"out_dir={out}",
                        "--no-progress"], check=True, capture_output=True)
        (run,) = out.iterdir()
        socs.append({r["seed"]: r["soc"] for r in map(json.loads, (run / "metrics.jsonl").open())})
        with np.load(run / "replays" / "seed1_ep0.npz") as z:
            replays.append({k: z[k] for k in z.files})
    assert socs[0][1] == socs[1][1]
    assert replays[0].keys() == replays[1].keys()
    for k in replays[0]:                                  # every recorded step of seed 1, not just its SoC
        np.testing.assert_array_equal(replays[0][k], replays[1][k], err_msg=k)
