"""The compiled SMAC-like core (``coopsim/scenarios/smac/_kernels.py``) keeps the numpy core's results bit for bit.

The pinned hashes are ``benchmarks/smac_fingerprint.py``'s output for the numpy implementation it replaced (commit
6ef6ec2's ``core.py``): every observation, mask, state, reward, termination, truncation, info term, position,
health, shield, cooldown and attack target of 150 seeded random-valid-action steps with partial resets, at batch 1
(seed 1) and batch 7 (seed 2). A change of any of them is a change of the frozen semantics (stats, timing, enemy).
"""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.scenarios.smac import SMACCore
from coopsim.scenarios.smac import _kernels as K
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)


#: map -> (batch 1 seed 1, batch 7 seed 2), printed by the numpy core (before the kernels)
NUMPY_FINGERPRINTS = {
    "3m": ("0a6c2e0209d7cae3", "6793c2342b6ea776"),
    "2s3z": ("d011c6c1d4b360f8", "85a564ac169c22f6"),
    "27m_vs_30m": ("1b131b552575b0a7", "d27d7f25c53bd94b"),
    "MMM2": ("3a916e55720b6653", "19ee2429d9fbf394"),
    "corridor": ("ebd7fc72ad67b48d", "a9c2c048d351743e"),
    "bane_vs_bane": ("a55e542d48bf9f35", "fe908b87534efa89"),
    "1c3s5z": ("7e0b000330539dc6", "f1eba20b0e581b50"),
    "2s_vs_1sc": ("81e4faae0e8649e1", "0d0858308f733382"),
    "protoss_5_vs_5": ("60b285b25d7b4cad", "62bfe8aa8e79a4fc"),
    "zerg_10_vs_10": ("cf5504d84f06c165", "64e24958eaed0190"),
    "so_many_baneling": ("1360dc6ec9ff4eb0", "920fb2b8bc8154a8"),
}


def _fingerprint_module():
    return load_benchmark("smac_fingerprint")


def test_the_pinned_maps_are_the_fingerprint_scripts_maps():
    assert tuple(NUMPY_FINGERPRINTS) == _fingerprint_module().MAPS


@pytest.mark.parametrize("map_name", list(NUMPY_FINGERPRINTS))
def test_compiled_core_is_bit_identical_to_the_numpy_core(map_name):
    fp = _fingerprint_module().fingerprint
    assert (fp(SMACCore, map_name, 1, 150, 1), fp(SMACCore, map_name, 7, 150, 2)) == NUMPY_FINGERPRINTS[map_name]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 15, 16, 17, 27, 30, 57, 64, 127, 128, 129, 200, 240])
def test_pairwise_sum_is_numpys_float32_sum(n):
    rng = np.random.default_rng(n)
    a = (rng.random(n + 5) * rng.choice([1e-3, 1.0, 1e3], n + 5)).astype(np.float32)
    assert K._pw_sum(a, 5, n) == a[5:].sum()  # float32 pairwise summation, same association
    rows = a[None, 5:].repeat(3, 0)
    assert (rows.sum(1) == K._pw_sum(a, 5, n)).all()  # an axis-1 reduction of a 2-D array sums the same way


def test_batch_envs_are_independent_and_match_single_envs():
    """Each env of a batch evolves as the same env alone (the kernels loop over envs; only numpy's batch-wide
    gates are shared, and they are no-ops for the other envs)."""
    batch = SMACCore(num_envs=4, map_name="MMM2")
    batch.reset(seed=3)
    singles = []
    for e in range(4):
        c = SMACCore(num_envs=1, map_name="MMM2", record_replay=False)
        c._rngs[0] = batch.env_rng(3, e)
        c.reset()
        singles.append(c)
    rng = np.random.default_rng(0)
    for _ in range(60):
        m = batch.action_masks()
        a = (rng.random(m.shape) * m).argmax(-1)
        rb = batch.step(a)
        for e, c in enumerate(singles):
            rs = c.step(a[e:e + 1])
            np.testing.assert_array_equal(rb.obs[e], rs.obs[0])
            np.testing.assert_array_equal(rb.reward[e], rs.reward[0])
            np.testing.assert_array_equal(batch._pos[e], c._pos[0])
        if batch.done.any():
            break


def test_an_out_of_range_action_raises_and_changes_nothing():
    core = SMACCore(num_envs=2, map_name="3m")
    core.reset(seed=0)
    before = (core._pos.copy(), core._uf.copy(), core._kc.copy(), core.action_masks())
    a = np.ones((2, 3), np.int64)
    a[1, 2] = core.n_actions
    with pytest.raises(ValueError, match="action 9 of env 1 agent 2 out of range"):
        core.step(a)
    np.testing.assert_array_equal(core._pos, before[0])
    np.testing.assert_array_equal(core._uf, before[1])
    np.testing.assert_array_equal(core._kc, before[2])
    np.testing.assert_array_equal(core.action_masks(), before[3])


def test_non_int64_and_strided_actions_step_like_int64():
    a_core, b_core = SMACCore(num_envs=3, map_name="2s3z"), SMACCore(num_envs=3, map_name="2s3z")
    a_core.reset(seed=4), b_core.reset(seed=4)
    rng = np.random.default_rng(1)
    for _ in range(10):
        m = a_core.action_masks()
        act = (rng.random(m.shape) * m).argmax(-1)
        wide = np.zeros((3, 2 * a_core.n_allies), np.int32)
        wide[:, ::2] = act
        ra, rb = a_core.step(act), b_core.step(wide[:, ::2])  # int32, non-contiguous
        np.testing.assert_array_equal(ra.obs, rb.obs)
        np.testing.assert_array_equal(ra.reward, rb.reward)


def test_a_pickled_core_resumes_exactly_and_keeps_its_views_bound():
    import pickle

    core = SMACCore(num_envs=3, map_name="MMM2")
    core.reset(seed=5)
    rng = np.random.default_rng(2)
    for _ in range(5):
        m = core.action_masks()
        core.step((rng.random(m.shape) * m).argmax(-1))
    twin = pickle.loads(pickle.dumps(core))
    assert np.shares_memory(twin._health, twin._uf) and np.shares_memory(twin._over, twin._eb)
    for _ in range(30):
        m = core.action_masks()
        np.testing.assert_array_equal(m, twin.action_masks())
        a = (rng.random(m.shape) * m).argmax(-1)
        ra, rb = core.step(a), twin.step(a)
        np.testing.assert_array_equal(ra.obs, rb.obs)
        np.testing.assert_array_equal(ra.reward, rb.reward)
        np.testing.assert_array_equal(core.state(), twin.state())
        if core.done.any():
            ids = np.flatnonzero(core.done)
            np.testing.assert_array_equal(core.reset(env_ids=ids), twin.reset(env_ids=ids))
