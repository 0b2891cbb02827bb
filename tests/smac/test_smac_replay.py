"""Replays of the SMAC-like core: recorded arrays equal the core's state; `coopsim report` animates a run."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coopsim.agents.smac_heuristics import FocusFireAgent
from coopsim.platform.config import load_config
from coopsim.platform.report import render_replays
from coopsim.platform.runner import run_config
from coopsim.scenarios.smac import SMACCore
from coopsim.scenarios.smac.render import ALLY_RGB, ENEMY_RGB

ROOT = Path(__file__).resolve().parents[2]


def test_replay_equals_core_state_every_step():
    core = SMACCore(num_envs=1, map_name="2s3z")
    agent = FocusFireAgent(core)
    obs = core.reset(seed=4)
    agent.reset(4)
    seen = [(core._pos[0].copy(), core._health[0].copy(), core._shield[0].copy(), core._unit_alive[0].copy(),
             core._fired_at[0].copy())]
    while not core.done[0]:
        actions, _ = agent.act(obs, None)
        obs = core.step(actions).obs
        seen.append((core._pos[0].copy(), core._health[0].copy(), core._shield[0].copy(), core._unit_alive[0].copy(),
                     core._fired_at[0].copy()))
    rp = core.replay(0)
    T = int(core.episode_metrics()[0]["episode_steps"])
    assert rp["pos"].shape == (T + 1, 10, 2) and len(seen) == T + 1
    for key, i in (("pos", 0), ("health", 1), ("shield", 2), ("alive", 3), ("target", 4)):
        np.testing.assert_array_equal(rp[key], np.stack([s[i] for s in seen]), err_msg=key)
    assert (rp["target"] >= 0).any()  # attacks happened and were recorded
    m = core.episode_metrics()[0]
    assert str(rp["outcome"]) == ("win" if m["win"] else "draw" if m["draw"] else "timeout" if m["timeout"] else "loss")
    np.testing.assert_array_equal(rp["types"], core._type[0])


def test_replay_needs_recording():
    core = SMACCore(num_envs=2, map_name="3m")  # batches do not record unless asked
    core.reset(seed=0)
    with pytest.raises(RuntimeError, match="record_replay=True"):
        core.replay(0)
    core = SMACCore(num_envs=2, map_name="3m", record_replay=True)
    core.reset(seed=0)
    core.step(np.ones((2, 3), np.int64))
    assert core.replay(1)["pos"].shape == (2, 6, 2)
    with pytest.raises(IndexError):
        core.replay(2)


def _count(frame: np.ndarray, rgb) -> int:
    return int((np.abs(frame.astype(np.int64) - np.array(rgb)).max(-1) <= 12).sum())


def test_report_gif_of_focus_fire_run(tmp_path):
    import imageio.v3 as iio

    cfg = load_config(ROOT / "configs/smac/3m-focus-fire.yaml", ["seeds=[2]", "episodes=1", f"out_dir={tmp_path}"])
    run_dir = run_config(cfg, progress=False)
    rp = dict(np.load(run_dir / "replays" / "seed2_ep0.npz"))
    (gif,) = render_replays(run_dir)
    assert gif == run_dir / "replay_seed2_ep0.gif"
    frames = iio.imread(gif)
    alive = rp["alive"]
    assert frames.shape == (len(alive), 536, 512, 3)
    # the replay spans the whole recorded episode: one frame per step plus the initial state
    import json

    (episode,) = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(alive) == int(episode["episode_steps"]) + 1
    # every frame shows one team-coloured disc per living unit: the colour's pixel count / one disc's = units alive
    blue = np.array([_count(f, ALLY_RGB) for f in frames])
    red = np.array([_count(f, ENEMY_RGB) for f in frames])
    disc = blue[0] / 3
    assert disc > 30
    np.testing.assert_array_equal(np.rint(blue / disc), alive[:, :3].sum(1))
    np.testing.assert_array_equal(np.rint(red / disc), alive[:, 3:].sum(1))
    assert alive[-1].sum() < 6  # someone died, so the count (and the frame) changed
