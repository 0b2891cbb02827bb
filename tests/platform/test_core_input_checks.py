"""Input checks of the batched cores (library use, no runner in between): MPE and LineWalk ``step`` reject a wrong
shape, non-integers and out-of-range actions, and ``reset(env_ids=...)`` of MPE, LineWalk and MG-MAPF rejects ids
outside ``[0, num_envs)``, with a ValueError naming what is valid (as SMACCore does). Valid input steps exactly as
before the checks existed."""
import re

import numpy as np
import pytest

from coopsim.platform import registry as reg

MPE_IDS = ["mpe/simple_spread-v0", "mpe/simple_spread_n6-v0", "mpe/simple_reference-v0",
           "mpe/simple_speaker_listener-v0"]
STEP_IDS = [*MPE_IDS, "line/LineWalk-v0"]
RESET_IDS = ["mpe/simple_spread-v0", "line/LineWalk-v0", "mapf/MGMAPF-v0"]

#: valid action range (shown in the message) of agent 0 and agent 1 of each core
RANGE = {"mpe/simple_spread-v0": ("0..4", "0..4"), "mpe/simple_spread_n6-v0": ("0..4", "0..4"),
         "mpe/simple_reference-v0": ("0..49", "0..49"), "mpe/simple_speaker_listener-v0": ("0..4", "0..4"),
         "line/LineWalk-v0": ("0..2", "0..2")}


def make(sid, num_envs=1, seed=0):
    core = reg.make_scenario(sid, num_envs=num_envs)
    core.reset(seed=seed)
    return core


def joint(core, value, env=0, agent=0, dtype=None):
    """Valid no-op actions everywhere but ``[env, agent]``."""
    a = np.zeros((core.num_envs, core.num_agents), dtype or np.asarray(value).dtype)
    a[env, agent] = value
    return a


def arrays(obs):
    """An observation batch (an array, or a dict of arrays for MG-MAPF) as a list of arrays."""
    return [np.array(v, copy=True) for v in obs.values()] if isinstance(obs, dict) else [np.array(obs, copy=True)]


def snapshot(core):
    """Observations, alive slots and global state, to show a rejected call changed nothing."""
    observe = getattr(core, "observe", None) or getattr(core, "_observe", None) or core._obs
    return [*arrays(observe()), core.alive.copy(), core.state().copy()]


# ------------------------------------------------------------------ step: out of range
@pytest.mark.parametrize("sid", STEP_IDS)
def test_out_of_range_action_rejected(sid):
    core = make(sid, num_envs=2)
    lo0, _ = RANGE[sid]
    n0 = int(lo0.split("..")[1]) + 1  # first invalid action of agent 0
    for value in [n0, n0 + 2, 99, -1, 2 ** 40, -(2 ** 40)]:
        before = snapshot(core)
        with pytest.raises(ValueError, match=rf"^action {value} of env 1 agent 0\b.*out of range; valid: "
                                             rf"{re.escape(lo0)}\b"):
            core.step(joint(core, value, env=1, agent=0, dtype=np.int64))
        for x, y in zip(before, snapshot(core)):
            np.testing.assert_array_equal(x, y)  # nothing changed


@pytest.mark.parametrize("sid", STEP_IDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.uint64])
def test_out_of_range_other_dtypes(sid, dtype):
    core = make(sid)
    _, lo1 = RANGE[sid]
    n1 = int(lo1.split("..")[1]) + 1
    with pytest.raises(ValueError, match=rf"^action {n1}(\.0)? of env 0 agent 1\b.*valid: {re.escape(lo1)}\b"):
        core.step(joint(core, n1, agent=1, dtype=dtype))
    if np.dtype(dtype).kind != "u":
        with pytest.raises(ValueError, match=rf"^action -1(\.0)? of env 0 agent 1\b.*valid: {re.escape(lo1)}\b"):
            core.step(joint(core, -1, agent=1, dtype=dtype))


def test_mpe_message_names_the_agent():
    core = make("mpe/simple_speaker_listener-v0")
    with pytest.raises(ValueError, match=r"^action 5 of env 0 agent 0 \(speaker_0\) out of range; valid: 0\.\.4$"):
        core.step(np.array([[5, 0]]))
    with pytest.raises(ValueError, match=r"^action -1 of env 0 agent 1 \(listener_0\) out of range; valid: 0\.\.4$"):
        core.step(np.array([[0, -1]]))
    # the speaker's 3 and 4 are masked but inside the shared Discrete(5) space: accepted (PettingZoo's API test
    # samples them from action_space), as SMAC accepts a masked action
    core.step(np.array([[4, 4]]))


def test_reference_discrete50_bounds():
    core = make("mpe/simple_reference-v0")
    core.step(np.array([[49, 5]]))  # move 4, word 9 / move 0, word 1: valid (Discrete 50)
    with pytest.raises(ValueError, match=r"^action 50 of env 0 agent 0 \(agent_0\) out of range; valid: 0\.\.49$"):
        core.step(np.array([[50, 0]]))


# ------------------------------------------------------------------ step: non-integers
@pytest.mark.parametrize("sid", STEP_IDS)
@pytest.mark.parametrize("value", [1.7, 0.5, -0.25, np.nan])
def test_non_integer_action_rejected(sid, value):
    core = make(sid)
    lo0, _ = RANGE[sid]
    with pytest.raises(ValueError, match=rf"^actions must be integers; got {value!r} \(dtype float64\) for env 0 "
                                         rf"agent 0\b.*valid: {re.escape(lo0)}\b"):
        core.step(joint(core, value, dtype=np.float64))


@pytest.mark.parametrize("sid", STEP_IDS)
@pytest.mark.parametrize("value", [np.inf, -np.inf, 1.0, 0.0])
def test_float_action_arrays_rejected_even_integral(sid, value):
    """A float array is refused by its dtype, as the ScenarioEnv view refuses 1.0 (fresh32 F9; 1.0 was action 1)."""
    core = make(sid)
    lo0, _ = RANGE[sid]
    with pytest.raises(ValueError, match=rf"^actions must be integers in {re.escape(lo0)}\b.*; got dtype float64 "
                                         r"\(cast an integral float array with a\.astype\(np\.int64\)\)"):
        core.step(joint(core, value, dtype=np.float64))


@pytest.mark.parametrize("sid", STEP_IDS)
def test_bool_action_arrays_rejected(sid):
    """A bool mask passed for actions was read as actions 0/1 (fresh32 F9); the view refuses True too."""
    core = make(sid)
    before = snapshot(core)
    with pytest.raises(ValueError, match=r"^actions must be integers in .*; got dtype bool \(a bool array: an "
                                         r"action mask or a comparison, not actions\?"):
        core.step(np.ones((1, core.num_agents), bool))
    for x, y in zip(before, snapshot(core)):
        np.testing.assert_array_equal(x, y)  # nothing stepped


@pytest.mark.parametrize("sid", STEP_IDS)
def test_non_numeric_dtype_rejected(sid):
    core = make(sid)
    lo0, _ = RANGE[sid]
    for bad in [np.full((1, core.num_agents), "a"), np.full((1, core.num_agents), None, dtype=object),
                np.zeros((1, core.num_agents), complex)]:
        with pytest.raises(ValueError, match=rf"^actions must be integers.*{re.escape(lo0)}.*got dtype "):
            core.step(bad)


# ------------------------------------------------------------------ step: shape
@pytest.mark.parametrize("sid", STEP_IDS)
def test_wrong_shape_rejected(sid):
    core = make(sid, num_envs=2)
    N = core.num_agents
    for shape in [(N,), (2, N + 1), (2, N - 1), (1, N), (2, 1), (2, N, 1), (), (N, 2) if N != 2 else (3, 2)]:
        with pytest.raises(ValueError, match=rf"^actions must have shape \(num_envs, num_agents\) = \(2, {N}\); "
                                             rf"got {re.escape(str(shape))}$"):
            core.step(np.zeros(shape, np.int64))
    with pytest.raises(ValueError, match=r"must have shape \(num_envs, num_agents\).*; got a scalar 0 \(shape \(\)\)$"):
        core.step(0)
    with pytest.raises(ValueError, match=r"must have shape \(num_envs, num_agents\).*; got None$"):
        core.step(None)


# ------------------------------------------------------------------ step: valid input unchanged
@pytest.mark.parametrize("sid", STEP_IDS)
def test_integral_inputs_of_any_dtype_accepted(sid):
    """int64, other integer dtypes, nested lists and strided views: all step alike (bools and floats are refused)."""
    rng = np.random.default_rng(3)
    hi = [int(RANGE[sid][min(i, 1)].split("..")[1]) + 1 for i in range(reg.make_scenario(sid).num_agents)]
    acts = [np.stack([rng.integers(0, hi) for _ in range(3)]) for _ in range(6)]  # [E=3, N] per step
    ref = make(sid, num_envs=3, seed=5)
    want = [ref.step(a) for a in acts]
    wide = [np.repeat(a, 2, axis=1) for a in acts]
    variants = {
        "int32": lambda t: acts[t].astype(np.int32), "uint8": lambda t: acts[t].astype(np.uint8),
        "int8": lambda t: acts[t].astype(np.int8), "uint64": lambda t: acts[t].astype(np.uint64),
        "list": lambda t: acts[t].tolist(), "strided": lambda t: wide[t][:, ::2],
        "fortran": lambda t: np.asfortranarray(acts[t]), "readonly": lambda t: _readonly(acts[t]),
    }
    for name, conv in variants.items():
        core = make(sid, num_envs=3, seed=5)
        for t, w in enumerate(want):
            _assert_same(core.step(conv(t)), w, f"{name} step {t}")


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _assert_same(got, want, what):
    np.testing.assert_array_equal(got.obs, want.obs, err_msg=what)
    np.testing.assert_array_equal(got.reward, want.reward, err_msg=what)
    np.testing.assert_array_equal(got.terminated, want.terminated, err_msg=what)
    np.testing.assert_array_equal(got.truncated, want.truncated, err_msg=what)
    assert got.info.keys() == want.info.keys(), what
    for k in want.info:
        np.testing.assert_array_equal(got.info[k], want.info[k], err_msg=f"{what} info[{k!r}]")


@pytest.mark.parametrize("sid", STEP_IDS)
def test_valid_steps_bit_for_bit_as_without_checks(sid, monkeypatch):
    """Seeded episodes with random valid actions (masked as a policy would, with partial resets of finished envs)
    give exactly the results of the pre-check conversion ``np.asarray(actions, np.int64)``."""
    def run(core):
        core.reset(seed=11)
        rng = np.random.default_rng(11)
        out = []
        for t in range(60):
            m = core.action_masks()
            u = rng.random(m.shape) * m
            res = core.step(u.argmax(-1))
            out.append(res)
            done = np.flatnonzero(core.done)
            if len(done):
                core.reset(env_ids=done)
        return out

    checked = run(reg.make_scenario(sid, num_envs=4))
    cls = type(reg.make_scenario(sid, num_envs=1))
    monkeypatch.setattr(cls, "_check_actions", lambda self, a: np.asarray(a, np.int64))
    unchecked = run(reg.make_scenario(sid, num_envs=4))
    for t, (g, w) in enumerate(zip(checked, unchecked)):
        _assert_same(g, w, f"step {t}")


def test_linewalk_seeded_trajectory_unchanged():
    """LineWalk's integer dynamics, pinned: seed 0, 3 agents on 8 cells, every agent steps right then left."""
    core = reg.make_scenario("line/LineWalk-v0", num_envs=2)
    core.reset(seed=0)
    pos = [core._pos.copy()]
    for t in range(6):
        core.step(np.full((2, 3), 2 if t < 3 else 1))
        pos.append(core._pos.copy())
    ref = reg.make_scenario("line/LineWalk-v0", num_envs=2)
    ref.reset(seed=0)
    exp = [ref._pos.copy()]
    alive = np.ones_like(ref._alive)
    for t in range(6):  # the dynamics by hand: an agent moves (clipped to the line) until it reaches its target
        alive &= exp[-1] != ref._target
        exp.append(np.where(alive, np.clip(exp[-1] + (1 if t < 3 else -1), 0, 7), exp[-1]))
    for t, (g, w) in enumerate(zip(pos, exp)):
        np.testing.assert_array_equal(g, w, err_msg=f"step {t}")


# ------------------------------------------------------------------ reset env_ids
@pytest.mark.parametrize("sid", RESET_IDS)
@pytest.mark.parametrize("ids", [[7], [4], [-1], [0, 4], [2, -3]])
def test_reset_env_ids_out_of_range_rejected(sid, ids):
    core = reg.make_scenario(sid, num_envs=4)
    core.reset(seed=0)
    before = snapshot(core)
    rngs = [r.bit_generator.state for r in core._rngs]
    shown = np.asarray(ids).reshape(-1).tolist()
    with pytest.raises(ValueError, match=rf"^env_ids must be in \[0, 4\); got {re.escape(str(shown))}$"):
        core.reset(seed=1, env_ids=ids)
    with pytest.raises(ValueError, match=r"^env_ids must be in \[0, 4\)"):
        core.reset(env_ids=ids)
    for x, y in zip(before, snapshot(core)):
        np.testing.assert_array_equal(x, y)
    assert [r.bit_generator.state for r in core._rngs] == rngs  # nothing re-seeded


@pytest.mark.parametrize("sid", RESET_IDS)
def test_reset_valid_env_ids_unchanged(sid):
    """In-range ids (a list, an array, a scalar, none at all) reset exactly those envs, as a full reset would."""
    full = reg.make_scenario(sid, num_envs=4)
    want = full.reset(seed=3)
    for ids in [[0, 3], np.array([1, 2]), 2, [], [3, 3]]:
        core = reg.make_scenario(sid, num_envs=4)
        core.reset(seed=9)
        got = core.reset(seed=3, env_ids=ids)
        sel = np.asarray(ids, np.int64).reshape(-1)
        for g, w in zip(arrays(got), arrays(want)):
            np.testing.assert_array_equal(g[sel], w[sel], err_msg=f"env_ids={ids!r}")


@pytest.mark.parametrize("scenario_id", ["line/LineWalk-v0", "mpe/simple_spread-v0", "smac/3m-v0"])
@pytest.mark.parametrize("seed", [1.9, "3", True, -1, np.float64(2.0)])
def test_reset_refuses_a_seed_that_is_not_a_non_negative_integer(scenario_id, seed):
    """reset(seed=1.9) was seed 1, "3" was 3, True was 1 and -1 a bare numpy error (fresh-user pass 18)."""
    from coopsim.platform.registry import make

    env = make(scenario_id)
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0 \(or None\); got"):
        env.reset(seed=seed)
    obs, _ = env.reset(seed=np.int64(3))  # numpy integers are integers
    obs2, _ = env.reset(seed=3)
    assert all(np.array_equal(obs[a], obs2[a]) for a in obs)


def test_coop_game_refuses_non_integer_actions():
    core = reg.make_scenario("coop_game/Grid4x4-v0", num_envs=2)
    core.reset(seed=0)
    n = core.num_agents
    with pytest.raises(ValueError, match=r"actions must be integers; got 1.7"):
        core.step(np.full((2, n), 1.7))
    with pytest.raises(ValueError, match=r"out of range; valid: 0\.\."):
        core.step(np.full((2, n), 99))
    with pytest.raises(ValueError, match=r"actions must have shape \(num_envs, num_agents\)"):
        core.step(np.zeros((n,), np.int64))
    with pytest.raises(ValueError, match=r"actions must be integers in 0\.\.4; got dtype float64"):
        core.step(np.ones((2, n)))  # integral floats are refused, as on every core and in the view
    core.step(np.ones((2, n), np.int64))


@pytest.mark.parametrize("scenario_id", ["mpe/simple_spread-v0", "line/LineWalk-v0", "mapf/MGMAPF-v0", "smac/3m-v0",
                                         "coop_game/Grid4x4-v0"])
def test_reset_env_ids_reads_a_bool_mask_as_a_mask_and_refuses_non_integers(scenario_id):
    """reset(env_ids=core.done) reset envs 0 and 1 (the mask cast to [0, 0, 1, 0]) instead of env 2."""
    kw = {"num_agents": 4, "num_goals": 1} if scenario_id.startswith("mapf") else {}
    a = reg.make_scenario(scenario_id, num_envs=4, **kw)
    b = reg.make_scenario(scenario_id, num_envs=4, **kw)
    a.reset(seed=1)
    b.reset(seed=1)
    oa = a.reset(seed=123, env_ids=np.array([False, False, True, False]))
    ob = b.reset(seed=123, env_ids=[2])
    if isinstance(oa, dict):
        assert oa.keys() == ob.keys() and all(np.array_equal(oa[k], ob[k]) for k in oa)
    else:
        assert np.array_equal(oa, ob)
    for bad in ([1.5], "0", [[0]], np.array([True, False])):
        with pytest.raises(ValueError, match="env_ids"):
            a.reset(env_ids=bad)
