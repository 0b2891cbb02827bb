"""SMACCore.copy_envs: a copied env continues exactly as its source (same random stream), or on its own stream."""
import numpy as np
import pytest

from coopsim.platform.registry import make_scenario


def _valid_random(core, rng):
    m = core.action_masks()
    u = rng.random(m.shape) * m
    return u.argmax(-1)


def _play(core, acts):
    out = []
    for a in acts:
        r = core.step(a)
        out.append((r.obs.copy(), r.reward.copy(), r.terminated.copy(), core._pos.copy(), core._uf.copy()))
    return out


@pytest.mark.parametrize("map_id", ["smac/5m_vs_6m-v0", "smac/2s3z-v0"])
def test_a_copied_env_continues_bit_for_bit_as_its_source(map_id):
    src = make_scenario(map_id, num_envs=3)
    src.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(4):  # mid-battle state: units moved, cooldowns running, the enemy has targets
        src.step(_valid_random(src, rng))
    dst = make_scenario(map_id, num_envs=4)
    dst.reset(seed=99)
    dst.copy_envs(src, np.array([2, 2, 0, 1]), np.array([0, 1, 2, 3]))
    assert np.array_equal(dst._observe()[[0, 1]], src._observe()[[2, 2]])
    assert np.array_equal(dst.action_masks()[3], src.action_masks()[1])
    # the same actions from here on give the same trajectory as the source env (same random stream)
    acts = [_valid_random(src, rng) for _ in range(6)]
    ref = _play(src, acts)
    got = _play(dst, [a[[2, 2, 0, 1]] for a in acts])
    for (o, r, t, p, u), (o2, r2, t2, p2, u2) in zip(ref, got):
        assert np.array_equal(o2, o[[2, 2, 0, 1]]) and np.array_equal(r2, r[[2, 2, 0, 1]])
        assert np.array_equal(t2, t[[2, 2, 0, 1]]) and np.array_equal(p2, p[[2, 2, 0, 1]])
        assert np.array_equal(u2, u[:, [2, 2, 0, 1]])


def test_new_stream_keys_give_copies_their_own_randomness():
    src = make_scenario("smac/5m_vs_6m-v0", num_envs=1)
    src.reset(seed=3)
    rng = np.random.default_rng(1)
    for _ in range(3):
        src.step(_valid_random(src, rng))
    dst = make_scenario("smac/5m_vs_6m-v0", num_envs=64)
    dst.reset(seed=0)
    dst.copy_envs(src, np.zeros(64, np.int64), np.arange(64), stream_keys=np.arange(1, 65, dtype=np.uint64))
    assert (dst._kc[1] == 0).all() and (dst._kc[0] == np.arange(1, 65)).all()
    stop = np.ones((64, 5), np.int64)  # everyone stops: only the enemy's picks and the cooldown jitter differ
    for _ in range(8):
        m = dst.action_masks()
        dst.step(np.where(m[..., 1], stop, 0))
    units = dst._uf.transpose(1, 0, 2)  # [64, 5 fields, units]: health, shield, cooldown, ...
    assert len({u.tobytes() for u in units}) > 1  # the 64 copies diverged (cooldown jitter, target picks)
    same = make_scenario("smac/5m_vs_6m-v0", num_envs=2)
    same.reset(seed=0)
    same.copy_envs(src, np.zeros(2, np.int64), np.arange(2), stream_keys=np.array([5, 5], np.uint64))
    for _ in range(8):
        m = same.action_masks()
        same.step(np.where(m[..., 1], np.ones((2, 5), np.int64), 0))
    assert np.array_equal(same._uf[:, 0], same._uf[:, 1])  # one key, one future


def test_copy_envs_refuses_another_map_and_bad_indices():
    a = make_scenario("smac/3m-v0", num_envs=2)
    b = make_scenario("smac/8m-v0", num_envs=2)
    a.reset(seed=0)
    b.reset(seed=0)
    with pytest.raises(ValueError, match="same map and params"):
        a.copy_envs(b, np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="one length within range"):
        a.copy_envs(a, np.array([0, 1]), np.array([0]))
    with pytest.raises(ValueError, match="one length within range"):
        a.copy_envs(a, np.array([2]), np.array([0]))


def test_won_stays_set_after_the_winning_step_until_reset():
    """``won`` is the episode's outcome; ``info["battle_won"]`` only the step it was won (planners read ``won``:
    reading the step flag after a batch of rollouts counted only the rollouts that ended on the very last step)."""
    core = make_scenario("smac/3m-v0", num_envs=1)
    core.reset(seed=0)
    core._health[0, 3:] = 0.1  # the three enemies almost dead, in range of the first shots
    core._unit_alive[0, 3:] = True
    core._masks = None
    won_step = None
    for t in range(60):
        m = core.action_masks()
        attack = np.where(m[0, :, 6:].any(-1), 6 + m[0, :, 6:].argmax(-1), 1)
        res = core.step(np.where(m[0, np.arange(3), attack], attack, 0)[None])
        if res.info["battle_won"][0]:
            won_step = t
            break
    assert won_step is not None and core.won[0] and core.done[0]
    after = core.step(np.zeros((1, 3), np.int64))  # a step after the end: the step flag clears, the outcome stays
    assert not after.info["battle_won"][0] and core.won[0]
    core.reset(seed=1)
    assert not core.won[0]
