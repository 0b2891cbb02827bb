import numpy as np
import pytest

from coopsim.platform.registry import make_scenario
from coopsim.testing import check_scenario

IDS = ["mpe/simple_spread-v0", "mpe/simple_spread_n6-v0", "mpe/simple_reference-v0", "mpe/simple_speaker_listener-v0"]


@pytest.mark.parametrize("sid", IDS)
def test_check_scenario(sid):
    check_scenario(sid)


def test_check_scenario_partial_observation():
    check_scenario("mpe/simple_spread-v0", params={"obs_radius_m": 0.5})


def test_partial_observation_hides_far_entities():
    core = make_scenario("mpe/simple_spread-v0", num_envs=1, obs_radius_m=0.5)
    core.reset(seed=0)
    core.set_env_state(0, np.array([[0.0, 0.0], [0.3, 0.0], [2.0, 0.0]]), np.array([[0.4, 0.0], [0.0, -0.6], [1.0, 1.0]]))
    o = core.observe()[0, 0]
    N = 3
    assert o[4:10].tolist() == pytest.approx([0.4, 0.0, 0.0, 0.0, 0.0, 0.0])  # only landmark 0 within 0.5 m
    assert o[10:14].tolist() == pytest.approx([0.3, 0.0, 0.0, 0.0])  # agent 1 seen, agent 2 not
    flags = o[-(2 * N - 1):]
    assert flags.tolist() == [1, 0, 0, 1, 0]
    assert core.observation_space.shape == (4 + 2 * N + 4 * (N - 1) + 2 * N - 1,)


def test_ideal_channel_reproduces_direct_comm_and_zero_capacity_silences():
    rng = np.random.default_rng(0)
    direct = make_scenario("mpe/simple_reference-v0", num_envs=4)
    ideal = make_scenario("mpe/simple_reference-v0", num_envs=4, comm_channel={"id": "ideal-v0"})
    cut = make_scenario("mpe/simple_reference-v0", num_envs=4,
                        comm_channel={"id": "bandwidth-v0", "params": {"trace": {"kind": "constant", "rate": 0}}})
    for c in (direct, ideal, cut):
        c.reset(seed=5)
    for t in range(25):
        a = rng.integers(0, 50, (4, 2))
        r1, r2, r3 = direct.step(a), ideal.step(a), cut.step(a)
        np.testing.assert_array_equal(r1.obs, r2.obs)
        np.testing.assert_array_equal(r1.obs[..., :11], r3.obs[..., :11])  # physics unaffected
        assert (r3.obs[..., 11:] == 0).all()  # nothing heard
        assert r1.obs[..., 11:].sum() == 4 * 2  # one word per agent per env
    s = cut.channel.stats()
    assert s["comm/offered_copies"] == 25 * 4 * 2 and s["comm/delivered_copies"] == 0


def test_speaker_listener_channel_carries_the_word():
    core = make_scenario("mpe/simple_speaker_listener-v0", num_envs=2, comm_channel={"id": "ideal-v0"})
    core.reset(seed=1)
    res = core.step(np.array([[2, 0], [1, 0]]))
    assert res.obs[:, 1, 8:11].tolist() == [[0, 0, 1], [0, 1, 0]]
    assert core.action_masks()[:, 0].tolist() == [[True, True, True, False, False]] * 2


def test_speaker_listener_without_utterances_hides_only_the_word():
    on = make_scenario("mpe/simple_speaker_listener-v0", num_envs=2)
    off = make_scenario("mpe/simple_speaker_listener-v0", num_envs=2, utterances=False)
    o_on, o_off = on.reset(seed=3), off.reset(seed=3)
    np.testing.assert_array_equal(o_on, o_off)
    for a in ([[2, 1], [1, 4]], [[0, 2], [2, 3]]):
        r_on, r_off = on.step(np.array(a)), off.step(np.array(a))
        assert r_on.obs[:, 1, 8:11].sum() == 2 and (r_off.obs[:, 1, 8:11] == 0).all()  # the word, then nothing
        np.testing.assert_array_equal(r_on.obs[:, :, :8], r_off.obs[:, :, :8])  # goal colour, motion: the same
        np.testing.assert_array_equal(r_on.reward, r_off.reward)
    with pytest.raises(Exception, match="utterances"):
        make_scenario("mpe/simple_speaker_listener-v0", utterances="sometimes")


def test_positions_metres_and_dt():
    core = make_scenario("mpe/simple_spread-v0", num_envs=3)
    core.reset(seed=2)
    assert core.dt_s == 0.1 and core.positions().shape == (3, 3, 3)
    core.set_env_state(0, np.zeros((3, 2)) + [[0, 0], [1, 1], [-1, 1]], np.zeros((3, 2)))
    core.step(np.array([[2, 0, 0]] * 3))  # +x force 5 m/s^2 for 0.1 s -> v = 0.5 m/s, x moves next step
    assert core.vel[0, 0].tolist() == pytest.approx([0.5, 0.0])
    core.step(np.zeros((3, 3), np.int64))
    assert core.positions()[0, 0, 0] == pytest.approx(0.05)
