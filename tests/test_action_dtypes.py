"""Action dtypes of the SMAC-like and MG-MAPF cores, both checked by the shared
:func:`coopsim.platform.scenario.discrete_joint_actions`: a string, object or complex action array is one ValueError
naming the core, the dtype and the valid actions (SMAC gave numpy's raw TypeError; MG-MAPF cast ``'3'`` to 3 and
stepped), an out-of-range uint64 value is reported as given (SMAC showed 2**63 as a negative number after its int64
cast), and integer and list input steps exactly as int64 does; bool and float arrays (even integral) are refused,
as the ScenarioEnv view refuses them (fresh32 F9)."""
import re

import numpy as np
import pytest

from coopsim.platform.scenario import discrete_joint_actions
from coopsim.scenarios.mapf import MGMAPFCore
from coopsim.scenarios.smac.core import SMACCore

#: (label, factory, what the message names as valid)
CORES = {
    "smac": ("SMACCore (map '3m')", lambda: SMACCore(num_envs=2, map_name="3m"), "0..8"),
    "mgmapf": ("MGMAPFCore (map 'random-32-32-10')",
               lambda: MGMAPFCore(2, map="random-32-32-10", num_agents=3, num_goals=1, obs_radius=2),
               "0..4 (wait, up, down, left, right)"),
}
#: a valid, in-range action for every slot of both cores (SMAC: stop; MG-MAPF: wait)
OK = {"smac": 1, "mgmapf": 0}


def make(name):
    core = CORES[name][1]()
    core.reset(seed=0)
    return core


def snapshot(core):
    obs = core.observations() if hasattr(core, "observations") else core._obs
    arrays = [np.array(v, copy=True) for v in obs.values()] if isinstance(obs, dict) else [np.array(obs, copy=True)]
    return [*arrays, core.alive.copy(), core.state().copy()]


def bad_arrays(shape, ok):
    """Arrays of every refused dtype, with values that a cast would have turned into valid actions."""
    return [np.full(shape, str(ok)), np.full(shape, str(ok).encode()), np.full(shape, ok, dtype=object),
            np.full(shape, ok, dtype=complex), np.full(shape, np.datetime64(ok, "s")), np.full(shape, bool(ok)),
            np.full(shape, float(ok))]


@pytest.mark.parametrize("name", list(CORES))
def test_non_numeric_dtype_is_one_value_error_naming_core_dtype_and_valid(name):
    label, _, valid = CORES[name]
    core = make(name)
    before = snapshot(core)
    for bad in bad_arrays((2, 3), OK[name]):
        with pytest.raises(ValueError, match=rf"^{re.escape(label)}: actions must be integers in {re.escape(valid)}; "
                                             rf"got dtype {re.escape(str(bad.dtype))}( \(.*\))?; give an integer array"):
            core.step(bad)
        for x, y in zip(before, snapshot(core)):
            np.testing.assert_array_equal(x, y)  # nothing stepped
    with pytest.raises(ValueError, match=r"got dtype <U1"):  # a nested list of strings too
        core.step([[str(OK[name])] * 3] * 2)


@pytest.mark.parametrize("name", list(CORES))
def test_non_integral_float_names_the_core(name):
    label, _, valid = CORES[name]
    core = make(name)
    a = np.full((2, 3), float(OK[name]))
    a[1, 2] = 1.5
    with pytest.raises(ValueError, match=rf"^{re.escape(label)}: actions must be integers; got 1\.5 \(dtype float64\) "
                                         rf"for env 1 agent 2; valid: {re.escape(valid)}$"):
        core.step(a)


@pytest.mark.parametrize("name", list(CORES))
@pytest.mark.parametrize("value, dtype", [(2 ** 63, np.uint64), (2 ** 64 - 1, np.uint64), (2 ** 32, np.uint64),
                                          (255, np.uint8), (-1, np.int8), (-(2 ** 31), np.int32)])
def test_out_of_range_value_is_reported_as_given(name, value, dtype):
    _, _, valid = CORES[name]
    core = make(name)
    before = snapshot(core)
    a = np.full((2, 3), OK[name], dtype)
    a[1, 2] = value
    shown = repr(a[1, 2].item())
    with pytest.raises(ValueError, match=rf"^action {re.escape(shown)} of env 1 agent 2 out of range; "
                                         rf"valid: {re.escape(valid)}$"):
        core.step(a)
    for x, y in zip(before, snapshot(core)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", list(CORES))
def test_integral_inputs_of_any_dtype_step_like_int64(name):
    rng = np.random.default_rng(7)
    hi = 9 if name == "smac" else 5
    acts = [rng.integers(1 if name == "smac" else 0, hi, (2, 3)) for _ in range(4)]
    ref = make(name)
    want = [ref.step(a) for a in acts]
    for conv in (lambda a: a.astype(np.int32), lambda a: a.astype(np.uint8), lambda a: a.astype(np.uint64),
                 lambda a: a.astype(np.int16), lambda a: a.tolist(), lambda a: np.repeat(a, 2, axis=1)[:, ::2]):
        core = make(name)
        for a, w in zip(acts, want):
            got = core.step(conv(a))
            for g, x in zip(snapshot_of(got), snapshot_of(w)):
                np.testing.assert_array_equal(g, x)


def snapshot_of(res):
    obs = [np.asarray(v) for v in res.obs.values()] if isinstance(res.obs, dict) else [res.obs]
    return [*obs, res.reward, res.terminated, res.truncated]


def test_shared_check_refuses_non_integer_kinds_and_keeps_uint64_values():
    for bad in bad_arrays((1, 2), 1):
        with pytest.raises(ValueError, match=rf"^line: actions must be integers in 0\.\.2; got dtype "
                                             rf"{re.escape(str(bad.dtype))}.*; give an integer array, e\.g\. "
                                             r"int64$"):
            discrete_joint_actions(bad, (1, 2), 3, scenario="line")
    with pytest.raises(ValueError, match=r"^actions must be integers in 0\.\.2; got dtype <U1"):  # no name given
        discrete_joint_actions(np.full((1, 2), "1"), (1, 2), 3)
    with pytest.raises(ValueError, match=r"^action 9223372036854775808 of env 0 agent 1 out of range; valid: 0\.\.2$"):
        discrete_joint_actions(np.array([[0, 2 ** 63]], np.uint64), (1, 2), 3)
    with pytest.raises(ValueError, match=r"got dtype bool \(a bool array: an action mask"):  # not actions 1 and 0
        discrete_joint_actions(np.array([[True, False]]), (1, 2), 3)
    got = discrete_joint_actions(np.array([[2, 0]], np.uint8), (1, 2), 3)
    assert got.dtype == np.int64 and got.tolist() == [[2, 0]]
