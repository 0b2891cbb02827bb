"""Our MPE core against mpe2, step for step from the same initial state (same actions; obs and rewards within 1e-6)."""
import numpy as np
import pytest

mpe2 = pytest.importorskip("mpe2")
from mpe2 import simple_reference_v3, simple_speaker_listener_v4, simple_spread_v3  # noqa: E402

from coopsim.platform.registry import make_scenario  # noqa: E402


def world_of(penv):
    return penv.unwrapped.world if hasattr(penv.unwrapped, "world") else penv.aec_env.unwrapped.world


def copy_state(penv, core, task):
    w = world_of(penv)
    extra = {}
    if task == "reference":
        extra["goal"] = np.array([w.landmarks.index(a.goal_b) for a in w.agents])
    elif task == "speaker_listener":
        extra["goal"] = w.landmarks.index(w.agents[0].goal_b)
    core.set_env_state(0, np.array([a.state.p_pos for a in w.agents]), np.array([lm.state.p_pos for lm in w.landmarks]),
                       np.array([a.state.p_vel for a in w.agents]), **extra)


CASES = [
    ("spread", lambda: simple_spread_v3.parallel_env(N=3, local_ratio=0.5, max_cycles=25), "mpe/simple_spread-v0", {}),
    ("spread", lambda: simple_spread_v3.parallel_env(N=6, local_ratio=0.5, max_cycles=25), "mpe/simple_spread_n6-v0", {}),
    ("reference", lambda: simple_reference_v3.parallel_env(local_ratio=0.5, max_cycles=25), "mpe/simple_reference-v0", {}),
    ("speaker_listener", lambda: simple_speaker_listener_v4.parallel_env(max_cycles=25), "mpe/simple_speaker_listener-v0", {}),
]


@pytest.mark.parametrize("task,make_ref,sid,params", CASES, ids=["spread3", "spread6", "reference", "speaker_listener"])
@pytest.mark.parametrize("seed", [0, 7])
def test_step_for_step_against_mpe2(task, make_ref, sid, params, seed):
    ref = make_ref()
    obs_ref, _ = ref.reset(seed=seed)
    core = make_scenario(sid, num_envs=1, **params)
    core.reset(seed=seed)
    copy_state(ref, core, task)
    names = list(core.agent_ids)
    assert names == ref.possible_agents
    ours = core.observe()
    for i, a in enumerate(names):
        d = len(obs_ref[a])
        np.testing.assert_allclose(ours[0, i, :d], obs_ref[a], atol=1e-6)
    rng = np.random.default_rng(seed)
    masks = core.action_masks()[0]
    for t in range(25):
        act = np.array([rng.choice(np.flatnonzero(masks[i])) for i in range(len(names))])
        obs_ref, rew_ref, term, trunc, _ = ref.step({a: int(act[i]) for i, a in enumerate(names)})
        res = core.step(act[None])
        for i, a in enumerate(names):
            d = len(obs_ref[a])
            np.testing.assert_allclose(res.obs[0, i, :d], obs_ref[a], atol=1e-6, err_msg=f"obs {a} step {t}")
            assert res.reward[0, i] == pytest.approx(rew_ref[a], abs=1e-6), f"reward {a} step {t}"
            assert bool(res.truncated[0, i]) == trunc[a]
    assert core.done[0]


def test_contact_forces_match_mpe2_with_overlapping_agents():
    ref = simple_spread_v3.parallel_env(N=4, local_ratio=0.5, max_cycles=25)
    ref.reset(seed=3)
    w = world_of(ref)
    for i, a in enumerate(w.agents):  # pile the agents up: contact forces and collision penalties every step
        a.state.p_pos = np.array([0.05 * i, -0.03 * i])
    core = make_scenario("mpe/simple_spread-v0", num_envs=1, num_agents=4)
    core.reset(seed=3)
    copy_state(ref, core, "spread")
    penalties = 0.0
    for t in range(10):
        act = np.array([[t % 5, (t + 1) % 5, (t + 2) % 5, 0]])
        obs_ref, rew_ref, *_ = ref.step({f"agent_{i}": int(act[0, i]) for i in range(4)})
        res = core.step(act)
        for i in range(4):
            np.testing.assert_allclose(res.obs[0, i], obs_ref[f"agent_{i}"], atol=1e-6)
            assert res.reward[0, i] == pytest.approx(rew_ref[f"agent_{i}"], abs=1e-6)
        penalties += float(res.info["reward/collision"].sum())
    assert penalties < -5  # the collision term was exercised
