"""``state_enemy_details``: per enemy [cooldown / base cooldown, target one-hot] appended to ``state()``."""

import numpy as np

from coopsim.scenarios.smac import units as U
from coopsim.scenarios.smac.core import SMACCore


def _attack_closest(core: SMACCore) -> np.ndarray:
    m = core.action_masks()
    return np.where(m[..., 6:].any(-1), 6 + m[..., 6:].argmax(-1), 4)  # attack the first attackable enemy, else east


def test_layout_prefix_and_values():
    off = SMACCore(3, map_name="5m_vs_6m")
    on = SMACCore(3, map_name="5m_vs_6m", state_enemy_details=True)
    A, M = 5, 6
    assert on.state_dim == off.state_dim + M * (1 + A) == 98 + 36
    assert on.state_space.shape == (on.state_dim,)
    off.reset(seed=7)
    on.reset(seed=7)
    seen_target = seen_cooldown = False
    for _ in range(25):
        a = _attack_closest(on)
        off.step(a)
        on.step(a)
        s_off, s_on = off.state(), on.state()
        assert np.array_equal(s_on[:, :off.state_dim], s_off)  # SMAC's layout unchanged in front
        d = s_on[:, off.state_dim:].reshape(3, M, 1 + A)
        live = on._unit_alive[:, A:] & ~on._eb[0][:, None]
        # dead enemies and finished envs are all zeros
        assert not d[~live].any()
        # cooldown: the unit's remaining cooldown over the marine's base cooldown, clipped to [0, 1]
        want_cd = np.clip(on._cooldown[:, A:] / U.COOLDOWN_NORM_S[U.UNIT_TYPES.index("marine")], 0, 1) * live
        np.testing.assert_allclose(d[..., 0], want_cd, rtol=1e-6, atol=0)
        # target: exactly the ally the built-in enemy keeps shooting (enemy_last), none when it has none
        hot = d[..., 1:]
        assert set(np.unique(hot)) <= {0.0, 1.0}
        has = live & (on._enemy_last >= 0)
        assert np.array_equal(hot.sum(-1), has.astype(np.float32))
        assert np.array_equal(hot.argmax(-1)[has], on._enemy_last[has])
        seen_target |= bool(has.any())
        seen_cooldown |= bool((d[..., 0] > 0).any())
    assert seen_target and seen_cooldown  # the fight happened: the block carried information


def test_obs_enemy_targets_layout_and_values():
    """``obs_enemy_targets``: SMAC's observation unchanged in front, then per enemy [shoots at me, cooldown]."""
    off = SMACCore(3, map_name="5m_vs_6m", obs_own_cooldown=True)
    on = SMACCore(3, map_name="5m_vs_6m", obs_own_cooldown=True, obs_enemy_targets=True)
    A, M, base = 5, 6, off.obs_dim
    assert on.obs_dim == base + 2 * M and on.observation_space.shape == (base + 2 * M,)
    assert np.array_equal(on.reset(seed=5)[..., :base], off.reset(seed=5))
    flags = 0
    for _ in range(25):
        a = _attack_closest(on)
        r_off, r_on = off.step(a), on.step(a)
        assert np.array_equal(r_on.obs[..., :base], r_off.obs)
        assert np.array_equal(on._observe(np.array([1])), r_on.obs[[1]])  # the same from observe
        x = r_on.obs[..., base:].reshape(3, A, M, 2)
        seen = r_on.obs[..., 4:4 + M * on.enemy_feats].reshape(3, A, M, on.enemy_feats)[..., 4] > 0
        assert not x[~seen].any()  # enemies out of sight (and dead agents) give zeros
        live = on._unit_alive[:, A:] & ~on._eb[0][:, None]
        want = (on._enemy_last[:, None, :] == np.arange(A)[None, :, None]) & seen
        assert np.array_equal(x[..., 0], want.astype(np.float32))
        cd = np.clip(on._cooldown[:, A:] / U.COOLDOWN_NORM_S[U.UNIT_TYPES.index("marine")], 0, 1) * live
        np.testing.assert_allclose(x[..., 1], np.where(seen, cd[:, None, :], 0), rtol=1e-6, atol=0)
        flags += int(x[..., 0].sum())
    assert flags > 0  # some agent saw an enemy shooting at it


def test_obs_state_appends_the_global_state_to_living_agents():
    """``obs_state``: the observation (with ``obs_enemy_targets``) unchanged in front, then ``state()`` for every
    living agent and zeros for dead ones; the critic's state is unchanged."""
    off = SMACCore(3, map_name="5m_vs_6m", obs_own_cooldown=True, obs_enemy_targets=True, state_enemy_details=True)
    on = SMACCore(3, map_name="5m_vs_6m", obs_own_cooldown=True, obs_enemy_targets=True, state_enemy_details=True,
                  obs_state=True)
    A, base, S = 5, off.obs_dim, off.state_dim
    assert on.obs_dim == base + S and on.observation_space.shape == (base + S,) and on.state_dim == S
    o = on.reset(seed=7)
    assert np.array_equal(o[..., :base], off.reset(seed=7))
    assert np.array_equal(o[..., base:], np.repeat(on.state()[:, None], A, axis=1))
    dead_seen = 0
    for _ in range(40):
        a = _attack_closest(on)
        r_off, r_on = off.step(a), on.step(a)
        assert np.array_equal(r_on.obs[..., :base], r_off.obs)
        st = on.state()
        assert np.array_equal(st, off.state())
        alive = on._unit_alive[:, :A]
        assert np.array_equal(r_on.obs[..., base:], np.where(alive[..., None], st[:, None], 0.0))
        assert np.array_equal(on._observe(np.array([2])), r_on.obs[[2]])  # the same from observe
        dead_seen += int((~alive).sum())
        if (r_on.terminated.all(axis=1) | r_on.truncated.all(axis=1)).all():
            break
    assert dead_seen > 0  # some agent died, so the zeros were checked


def test_obs_state_passes_the_scenario_checks():
    from coopsim.testing import check_scenario
    check_scenario("smac/5m_vs_6m-v0", params=dict(obs_state=True, obs_enemy_targets=True, state_enemy_details=True),
                   num_steps=30, api_cycles=10)
