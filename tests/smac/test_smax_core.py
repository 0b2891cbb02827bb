"""benchmarks/smax_core.py: JaxMARL's SMAX as a coopsim core (the learner held fixed, the simulator changed).

The wire format runs everywhere; the core itself runs only where the peer venv ``bench-venvs/jaxmarl`` is built
(``.venv/bin/python benchmarks/smac_speed.py`` or ``benchmarks/mappo_on_smax.py`` builds it; never in CI, whose
project venv must not hold JaxMARL)."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import _npz_frames  # noqa: E402


def test_frames_round_trip_arrays_of_every_dtype_in_order():
    arrays = [{"op": np.str_("step"), "actions": np.arange(12, dtype=np.int64).reshape(3, 4)},
              {"obs": np.random.default_rng(0).random((2, 5, 7), dtype=np.float32), "done": np.array([True, False])},
              {}]
    buf = io.BytesIO()
    for a in arrays:
        _npz_frames.write_frame(buf, a)
    buf.seek(0)
    for a in arrays:
        got = _npz_frames.read_frame(buf)
        assert set(got) == set(a)
        for k in a:
            assert got[k].dtype == np.asarray(a[k]).dtype and np.array_equal(got[k], a[k])
    assert _npz_frames.read_frame(buf) is None  # end of stream


def _peer_ready() -> tuple[bool, str]:
    import smac_speed
    from _peer_venv import peer_ready

    return peer_ready(smac_speed.VENV / "bin" / "python", smac_speed.PEER_CHECK, timeout=120)


@pytest.fixture(scope="module")
def smax():
    ok, why = _peer_ready()
    if not ok:
        pytest.skip(f"JaxMARL's venv is not built ({why}); `.venv/bin/python benchmarks/smac_speed.py --help` tells how")
    import smax_core

    smax_core.register()
    from coopsim.platform import registry

    core = registry.make_scenario("smac/smax-5m_vs_6m-v0", num_envs=16)
    yield core
    core.close()
    smax_core.unregister()  # the ids exist for these tests only (tests/test_output_robustness.py lists the registry)
    assert "smac/smax-5m_vs_6m-v0" not in registry.list_ids("scenario")


def test_smax_core_spaces_are_smax_5m_vs_6m(smax):
    assert smax.agent_ids == tuple(f"ally_{i}" for i in range(5))
    assert smax.observation_space.shape == (13 * 4 + 13 * 6 + 10,)  # SMAX's unit_list: allies, enemies, own
    assert smax.action_space.n == 5 + 6                              # 4 moves, stop, 6 enemies
    assert smax.state_space.shape == (10 * 11 + 2 * 11,)             # world_state: 10 features, team, type per unit


def test_smax_core_is_seeded_and_plays_whole_episodes(smax):
    first = smax.reset(seed=3).copy()
    assert np.array_equal(smax.reset(seed=3), first) and not np.array_equal(smax.reset(seed=4), first)
    smax.reset(seed=3)
    rng = np.random.default_rng(0)
    returns, wins, ended = np.zeros(16), [], np.zeros(16, bool)
    for _ in range(71):  # SMAC's limit for 5m_vs_6m is 70 steps
        masks, alive = smax.action_masks(), smax.alive
        assert (masks[~alive] == (np.arange(11) == 4)).all()  # a dead unit may only stop
        r = smax.step((rng.random(masks.shape) * masks).argmax(-1))
        returns += r.info["team_reward"]
        if smax.done.all():
            break
    assert smax.done.all()
    for m in smax.episode_metrics():
        wins.append(m["win"])
        assert m["episode_steps"] <= 70 and (m["timeout"] or m["allies_left"] == 0 or m["enemies_left"] == 0)
    assert np.all((returns >= 0) & (returns <= 2.0 + 1e-5))  # damage fraction (at most 1) + win bonus 1
    assert sum(wins) == 0  # random valid play never beats 6 marines with 5 (0 % in both simulators)
