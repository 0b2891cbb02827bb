"""Combat arithmetic, interface layout and episode rules of the SMAC-like core (exact values)."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.agents.smac_heuristics import FocusFireAgent
from coopsim.errors import ConfigError
from coopsim.platform.registry import make_scenario
from coopsim.scenarios.smac import SMACCore
from coopsim.scenarios.smac import units as U

STOP = 1


def isolate(core: SMACCore, keep_ally: int, keep_enemy: int, ally_xy, enemy_xy) -> None:
    """Keep one ally and one enemy unit alive at given positions; every other unit is removed (dead)."""
    A = core.n_allies
    for u in range(core.n_units):
        if u not in (keep_ally, A + keep_enemy):
            core._health[0, u] = 0.0
            core._shield[0, u] = 0.0
            core._unit_alive[0, u] = False
    core._pos[0, keep_ally] = ally_xy
    core._pos[0, A + keep_enemy] = enemy_xy
    core._masks = None


def test_marine_kills_marine_in_exactly_five_shots():
    core = SMACCore(num_envs=1, map_name="3m")
    core.reset(seed=3)
    isolate(core, 0, 0, (10.0, 16.0), (14.0, 16.0))  # 4 apart: inside the marine's range 5
    core._cooldown[0, 3] = 1e9  # the enemy marine never fires
    hist = [float(core._health[0, 3])]
    for _ in range(20):
        a = np.array([[6, 0, 0]])  # attack enemy 0
        res = core.step(a)
        hist.append(float(core._health[0, 3]))
        if core.done[0]:
            break
    drops = -np.diff(hist)
    shots = drops[drops > 0]
    np.testing.assert_array_equal(shots, np.full(5, 9.0, np.float32))  # 45 = 5 x 9
    assert hist[-1] == 0.0 and not core._unit_alive[0, 3]
    assert core.episode_metrics()[0]["win"] == 1.0
    assert res.terminated[0, 0] and not res.truncated[0, 0]


def test_shields_absorb_damage_before_health():
    core = SMACCore(num_envs=1, map_name="3m")
    core.reset(seed=0)
    isolate(core, 0, 0, (10.0, 16.0), (14.0, 16.0))
    z = 3
    core._type[0, z] = U.ZEALOT  # a zealot target: 100 health + 50 shield
    core._health[0, z], core._shield[0, z] = 100.0, 50.0
    core._cooldown[0, z] = 1e9
    seen = []
    for _ in range(8):
        core.step(np.array([[6, 0, 0]]))
        seen.append((float(core._shield[0, z]), float(core._health[0, z])))
    hits = [(50.0 - s) + (100.0 - h) for s, h in seen]
    for (s, h), dealt in zip(seen, hits):
        # damage goes to the shield until it is gone, only the rest to health
        assert s == pytest.approx(max(50.0 - dealt, 0.0))
        assert h == pytest.approx(100.0 - max(dealt - 50.0, 0.0))
    assert hits[-1] >= 54.0 and seen[-1][1] < 100.0  # 6+ hits of 9: shield empty, health dented


def test_medivac_restores_health_at_its_rate():
    core = SMACCore(num_envs=1, map_name="MMM")
    core.reset(seed=0)
    A = core.n_allies
    assert core._type[0, 0] == U.MEDIVAC and core._type[0, 1] == U.MARAUDER
    # keep everyone, but move the enemies far away and out of sight for one step
    core._pos[0, A:] = np.array([31.0, 31.0]) + np.zeros((core.n_enemies, 2))
    core._pos[0, :A] = np.array([[5.0, 5.0 + 1.5 * i] for i in range(A)])
    core._health[0, 1] = 50.0  # a damaged marauder next to the medivac (1.5 apart)
    energy0 = float(core._energy[0, 0])
    core._masks = None
    masks = core.action_masks()
    assert masks[0, 0, 6 + 1] and not masks[0, 0, 6 + 0]  # heal ally 1; never itself
    a = np.full((1, A), STOP)
    a[0, 0] = 6 + 1
    core.step(a)
    healed = float(core._health[0, 1]) - 50.0
    assert healed == pytest.approx(U.MEDIVAC_HEAL_PER_S * U.STEP_S, rel=1e-5)  # 12.6 / s for 0.5 s = 6.3
    spent = energy0 - float(core._energy[0, 0])
    assert spent == pytest.approx(healed / U.MEDIVAC_HP_PER_ENERGY - U.MEDIVAC_ENERGY_REGEN_PER_S * U.STEP_S, rel=1e-4)


def test_baneling_area_damage_and_suicide():
    core = SMACCore(num_envs=1, map_name="bane_vs_bane")
    core.reset(seed=0)
    A = core.n_allies
    bane = 20  # slots 20..23 are banelings
    assert core._type[0, bane] == U.BANELING
    for u in range(core.n_units):
        core._pos[0, u] = (2.0 + (u % 12) * 0.01, 30.0 - 2.0 * (u // 12)) if u < A else (30.0, 2.0 + 1.2 * ((u - A) % 20))
    core._pos[0, bane] = (16.0, 16.0)
    # three enemy zerglings: the target, one 1.5 from it (in the 2.2 burst), one 3 away (outside)
    core._pos[0, A + 0] = (17.0, 16.0)
    core._pos[0, A + 1] = (17.0, 17.5)
    core._pos[0, A + 2] = (17.0, 19.0)
    core._cooldown[0, A:] = 1e9
    core._masks = None
    a = np.full((1, A), STOP)
    a[0, bane] = 6 + 0
    h0 = core._health[0, A:A + 3].copy()
    core.step(a)
    burst = U.DAMAGE[U.BANELING] + U.BONUS_VS_LIGHT[U.BANELING]  # 16 + 19 vs light zerglings = 35
    assert burst == 35.0
    assert not core._unit_alive[0, bane]  # the baneling died attacking
    assert core._health[0, A + 0] == max(h0[0] - burst, 0.0) and not core._unit_alive[0, A + 0]
    assert not core._unit_alive[0, A + 1]
    assert core._health[0, A + 2] == h0[2]


def test_full_win_returns_exactly_20_and_losses_less():
    core = SMACCore(num_envs=32, map_name="3m")
    obs = core.reset(seed=5)
    agent = FocusFireAgent(core)
    ret = np.zeros(32)
    finished = np.zeros(32, bool)
    for _ in range(core.limit):
        a, _ = agent.act(obs)
        res = core.step(a)
        ret += res.info["team_reward"] * ~finished
        finished |= core.done
        obs = res.obs
        if finished.all():
            break
    wins = np.array([m["win"] for m in core.episode_metrics()], bool)
    assert wins.any() and (~wins).any()
    np.testing.assert_allclose(ret[wins], 20.0, rtol=1e-5)
    assert (ret[~wins] < 20.0 - 1e-3).all()


def test_shield_regeneration_earns_nothing():
    core = SMACCore(num_envs=1, map_name="2s3z")
    core.reset(seed=0)
    A = core.n_allies
    core._pos[0, :A] = [(2.0, 2.0 + i) for i in range(A)]
    core._pos[0, A:] = [(30.0, 28.0 + 0.9 * i) for i in range(core.n_enemies)]
    core._enemy_goal[0] = core._pos[0, A:]
    core._shield[0, A] = 10.0  # a damaged enemy stalker shield, regenerating
    core._min_hp[0, 0] = core._health[0, A] + 10.0
    core._since_dmg[0, A] = 100.0
    core._masks = None
    res = core.step(np.full((1, A), STOP))
    assert core._shield[0, A] == pytest.approx(10.0 + U.SHIELD_REGEN_PER_S * U.STEP_S)
    assert res.info["team_reward"][0] == 0.0 and res.reward[0].sum() == 0.0


def test_timeout_is_a_truncation_and_not_a_win():
    core = SMACCore(num_envs=1, map_name="3m", max_steps=3)
    core.reset(seed=0)
    for i in range(3):
        res = core.step(np.full((1, 3), STOP))
    assert res.truncated[0].all() and not res.terminated[0].any()
    assert core.done[0]
    m = core.episode_metrics()[0]
    assert m["win"] == 0.0 and m["timeout"] == 1.0 and m["episode_steps"] == 3.0


@pytest.mark.parametrize("map_name,obs_dim,state_dim,n_actions", [
    ("3m", 30, 48, 9), ("8m", 80, 168, 14), ("2s3z", 80, 120, 11), ("MMM", 160, 290, 16), ("5m_vs_6m", 55, 98, 12),
    ("27m_vs_30m", 285, 1170, 36), ("2s_vs_1sc", 17, 27, 7), ("corridor", 156, 282, 30), ("3s5z", 128, 216, 14)])
def test_smac_layout_dimensions(map_name, obs_dim, state_dim, n_actions):
    # SMAC's published shapes (obs_shape, state_shape, n_actions) for these maps
    core = make_scenario(f"smac/{map_name}-v0", num_envs=2)
    obs = core.reset(seed=0)
    assert obs.shape == (2, core.n_allies, obs_dim)
    assert core.state().shape == (2, state_dim)
    assert core.action_space.n == n_actions


def test_action_masks_rules():
    core = SMACCore(num_envs=1, map_name="3m")
    core.reset(seed=0)
    core._health[0, 1] = 0.0
    core._unit_alive[0, 1] = False
    core._masks = None
    m = core.action_masks()[0]
    assert m[1].tolist() == [True] + [False] * 8  # dead: only no-op
    assert not m[0, 0] and m[0, 1]  # living: never no-op, stop always
    # attack availability is exactly "alive enemy within the marine's range 5"
    d = np.linalg.norm(core._pos[0, 3:] - core._pos[0, 0], axis=1)
    np.testing.assert_array_equal(m[0, 6:], d < 5.0)


def test_dead_agent_observation_is_zero_and_enemy_out_of_sight_is_zero():
    core = SMACCore(num_envs=1, map_name="3m")
    obs = core.reset(seed=0)
    # at the start the teams are 16 apart: beyond sight 9, so every enemy block is zero
    assert np.all(obs[0, :, 4:4 + 15] == 0.0)
    core._health[0, 2] = 0.0
    core._unit_alive[0, 2] = False
    res = core.step(np.array([[STOP, STOP, 0]]))
    assert np.all(res.obs[0, 2] == 0.0)
    assert res.terminated[0, 2] and not res.terminated[0, 0]


def test_bad_input_raises():
    core = SMACCore(num_envs=1, map_name="3m")
    core.reset(seed=0)
    with pytest.raises(ValueError, match="out of range; valid: 0..8"):
        core.step(np.array([[1, 1, 9]]))
    with pytest.raises(ValueError, match="shape"):
        core.step(np.array([1, 1, 1]))
    with pytest.raises(ValueError, match=r"= \(1, 3\); got None$"):
        core.step(None)
    with pytest.raises(ValueError, match=r"= \(1, 3\); got a scalar 2 \(shape \(\)\)$"):
        core.step(2)
    with pytest.raises(ValueError, match="unknown SMAC map '4m'"):
        SMACCore(num_envs=1, map_name="4m")
    with pytest.raises(ConfigError, match="'map_name' is fixed to '2s3z'"):
        make_scenario("smac/2s3z-v0", map_name="3m")
    with pytest.raises(ConfigError, match="key 'max_steps'"):
        make_scenario("smac/3m-v0", max_steps=0)


def test_procedural_types_follow_race_and_are_seeded():
    a = SMACCore(num_envs=8, map_name="protoss_5_vs_5")
    b = SMACCore(num_envs=8, map_name="protoss_5_vs_5")
    a.reset(seed=11)
    b.reset(seed=11)
    np.testing.assert_array_equal(a._type, b._type)
    np.testing.assert_array_equal(a._pos, b._pos)
    assert set(np.unique(a._type)) <= {U.STALKER, U.ZEALOT, U.COLOSSUS}
    assert len({tuple(r) for r in a._type}) > 1  # types differ across envs


def test_render_draws_units():
    core = SMACCore(num_envs=1, map_name="corridor")
    core.reset(seed=0)
    frame = core.render(0)
    assert frame.shape == (512, 512, 3) and frame.dtype == np.uint8
    blue = (frame[..., 2] > 200) & (frame[..., 0] < 120)
    red = (frame[..., 0] > 200) & (frame[..., 2] < 100) & (frame[..., 1] < 100)
    assert blue.sum() > 50 and red.sum() > 50


def test_partial_reset_observes_only_reset_envs_and_matches_a_full_observation():
    core = SMACCore(num_envs=5, map_name="2s3z")
    core.reset(seed=1)
    rng = np.random.default_rng(0)
    for t in range(40):
        m = core.action_masks()
        res = core.step((rng.random(m.shape) * m).argmax(-1))
        res.obs[...] = np.nan  # what a caller does to its copy must not leak into the core
        ids = np.flatnonzero(core.done) if core.done.any() else np.array([t % 5])
        obs = core.reset(env_ids=ids)
        masks = core.action_masks()
        full = core._observe()  # every env recomputed from the state
        np.testing.assert_array_equal(obs, full)
        np.testing.assert_array_equal(masks, core._masks)
        obs[...] = np.nan


def test_obs_own_cooldown_appends_the_normalised_weapon_cooldown():
    plain = SMACCore(num_envs=3, map_name="3m")
    core = SMACCore(num_envs=3, map_name="3m", obs_own_cooldown=True)
    assert core.obs_dim == plain.obs_dim + 1 == 31 and core.state().shape == plain.state().shape
    o, p = core.reset(seed=5), plain.reset(seed=5)
    np.testing.assert_array_equal(o[..., -1], 0.0)  # weapons start ready
    isolate(core, 0, 0, (10.0, 16.0), (14.0, 16.0))
    isolate(plain, 0, 0, (10.0, 16.0), (14.0, 16.0))
    a = np.array([[6, 0, 0], [STOP] * 3, [STOP] * 3])
    o, p = core.step(a).obs, plain.step(a).obs
    np.testing.assert_array_equal(o[..., :-1], p)  # the SMAC blocks are unchanged
    # the marine fired in the step's first tick: base 0.61 s + jitter in [-1/16, 2/16] s, then 7 ticks counted down
    cd = float(core._cooldown[0, 0])
    assert 0.61 - 1 / 16 - 7 / 16 - 1e-6 <= cd <= 0.61 + 2 / 16 - 7 / 16 + 1e-6
    assert o[0, 0, -1] == pytest.approx(cd / 0.61, abs=1e-6) and o[0, 0, -1] > 0.2
    np.testing.assert_array_equal(o[1:, :, -1], 0.0)  # never fired: cooldown below 0 is shown as 0
    assert (o[0, 1:] == 0).all()  # dead agents see zeros, the cooldown included
    # a partial reset observes the same way as a full observation
    obs = core.reset(env_ids=np.array([1]))
    np.testing.assert_array_equal(obs, core._observe())


def test_reward_only_positive_false_subtracts_half_the_damage_taken_and_ally_deaths():
    """SMAC's ``reward_only_positive=False``: the same fight (rewards never change the dynamics) pays the
    positive reward minus 0.5 x (damage taken + 10 per ally lost), scaled by 20 / the maximum return."""
    E = 16
    pos = SMACCore(num_envs=E, map_name="3m")
    neg = SMACCore(num_envs=E, map_name="3m", reward_only_positive=False)
    obs = pos.reset(seed=7)
    neg.reset(seed=7)
    agent = FocusFireAgent(pos)
    A = pos.n_allies
    saw_loss = False
    for _ in range(pos.limit):
        running = ~pos.done
        taken0 = pos._dmg_taken.astype(np.float64).copy()
        alive0 = pos._unit_alive[:, :A].sum(1)
        a, _ = agent.act(obs)
        rp, rn = pos.step(a), neg.step(a)
        taken = pos._dmg_taken.astype(np.float64) - taken0
        lost = (alive0 - pos._unit_alive[:, :A].sum(1)) * running
        want = rp.info["team_reward"] - 0.5 * (taken + 10.0 * lost) / pos._max_reward * 20.0
        np.testing.assert_allclose(rn.info["team_reward"], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(rn.obs, rp.obs)
        saw_loss |= bool((lost > 0).any())
        obs = rp.obs
        if pos.done.all():
            break
    assert saw_loss and (neg._dmg_taken == pos._dmg_taken).all()
    with pytest.raises(ConfigError):
        make_scenario("smac/3m-v0", reward_negative_scale=-1.0)


def test_reward_penalty_term_completes_the_sum():
    core = SMACCore(num_envs=8, map_name="3m", reward_only_positive=False)
    obs = core.reset(seed=3)
    agent = FocusFireAgent(core)
    pen = 0.0
    for _ in range(core.limit):
        a, _ = agent.act(obs)
        res = core.step(a)
        i = res.info
        np.testing.assert_allclose(i["reward/damage"] + i["reward/kill"] + i["reward/win"] + i["reward/penalty"],
                                   i["team_reward"], atol=1e-5)
        assert (i["reward/penalty"] <= 1e-6).all()
        pen += float(i["reward/penalty"].sum())
        obs = res.obs
        if core.done.all():
            break
    assert pen < 0.0
    plain = SMACCore(num_envs=1, map_name="3m")
    plain.reset(seed=0)
    assert "reward/penalty" not in plain.step(np.ones((1, 3), np.int64)).info


def test_focus_fire_ally_slot_table_matches_smac_ally_order():
    from coopsim.agents.smac_heuristics import _ally_slot_of

    for n, k in ((1, 1), (4, 3), (5, 5), (10, 7)):
        want = np.full((n, k), -1)
        for i in range(n):
            for slot, j in enumerate(j for j in range(n) if j != i):  # SMAC's ally block: the others in order
                if j < k:
                    want[i, j] = slot
        np.testing.assert_array_equal(_ally_slot_of(n, k), want)
