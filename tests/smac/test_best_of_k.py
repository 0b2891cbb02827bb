"""benchmarks/smac_best_of_k.py: fixed starts repeat exactly, sampled passes are seeded, best-of-K is their maximum."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from coopsim.errors import ConfigError
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[2]


_load = load_benchmark


def _tiny_run(tmp_path: Path, config: str) -> Path:
    rc = _load("smac_time_to_win").main([str(ROOT / f"configs/smac/{config}.yaml"), "--seeds", "0", "--eval-every",
                                         "256", "--eval-episodes", "2", "train.total_env_steps=256",
                                         "train.num_envs=2", f"out_dir={tmp_path}"])
    assert rc == 0
    (run,) = tmp_path.iterdir()
    return run / "seed-0"


def test_fixed_starts_and_seeded_sampled_passes(tmp_path, capsys):
    bok = _load("smac_best_of_k")
    seed_dir = _tiny_run(tmp_path, "3m-mappo")
    r1 = bok.wins_from_fixed_starts(seed_dir, starts=6, k=3, reset_seed=7)
    r2 = bok.wins_from_fixed_starts(seed_dir, starts=6, k=3, reset_seed=7)
    assert r1["greedy"].shape == (6,) and r1["sampled"].shape == (3, 6)
    assert set(np.unique(r1["sampled"])) <= {0.0, 1.0}
    # same reset seed, same starts and environment streams; the sampled passes draw from their own seeded generators
    np.testing.assert_array_equal(r1["greedy"], r2["greedy"])
    np.testing.assert_array_equal(r1["sampled"], r2["sampled"])
    out = tmp_path / "bok.json"
    bok.main([str(seed_dir), "--starts", "6", "-k", "3", "--reset-seed", "7", "--out", str(out)])
    line = capsys.readouterr().out
    best = r1["sampled"].max(0).mean()
    assert f"greedy {r1['greedy'].mean():.3f}" in line and f"best of 3 sampled {best:.3f}" in line
    assert best >= r1["sampled"].mean(1).max()  # the best of K is at least every single pass
    import json

    assert json.loads(out.read_text())["sampled"] == r1["sampled"].tolist()


def test_not_a_seed_dir_and_qmix_are_refused(tmp_path):
    bok = _load("smac_best_of_k")
    with pytest.raises(ConfigError, match="not a training run's seed directory"):
        bok.wins_from_fixed_starts(tmp_path, starts=2, k=1)
    with pytest.raises(ConfigError, match="does not exist; give a training run's seed directory"):
        bok.wins_from_fixed_starts(tmp_path / "missing", starts=2, k=1)
    qmix = _tiny_run(tmp_path / "q", "3m-qmix")
    with pytest.raises(ConfigError, match="sampled passes need a PPO learner"):
        bok.wins_from_fixed_starts(qmix, starts=2, k=1)
    # the run directory given for its seed directory: the one diagnostics share names the seed directory to give
    with pytest.raises(ConfigError, match=r"did you mean .*seed-0\?") as e:
        bok.wins_from_fixed_starts(qmix.parent, starts=2, k=1)
    assert e.value.key == "seed_dir"
    # and the learner each script plays is the policy file's: load_policy gives the saved weights back exactly
    cfg = bok.seed_dir_config(qmix)
    from coopsim.platform import registry

    core = registry.make_scenario(cfg.scenario.id, num_envs=1, **cfg.scenario_params())
    a = bok.load_policy(cfg, core, qmix / "policy.pt", {"epsilon": 0.0})
    import torch

    saved = torch.load(qmix / "policy.pt", weights_only=False)
    assert a.params.epsilon == 0.0
    assert saved["net"].keys() == a.net.state_dict().keys()
    for k, v in a.net.state_dict().items():
        assert torch.equal(v, saved["net"][k])


def test_spread_line_counts_starts_by_win_fraction_and_gives_the_coin_flip_best_of_k():
    spread_line = _load("smac_best_of_k").spread_line
    # 4 passes x 5 starts: fractions 0, 0.25, 0.5, 0.75, 1 -> 1/5 at 0, 1/5 in (0, .5), 2/5 in [.5, 1), 1/5 at 1
    s = np.array([[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=float)
    line = spread_line(s)
    assert "0 at 0.200 of starts, (0, 0.5) at 0.200, [0.5, 1) at 0.400, 1 at 0.200" in line
    assert "p = 0.500 would give best of 4 0.938" in line  # 1 - 0.5^4 = 0.9375


def test_a_non_smac_training_run_is_refused_in_one_line(tmp_path):
    """A seed directory of a PPO run on another scenario (LineWalk) died with ``KeyError: 'win'`` after building the
    core and playing the greedy pass; it is refused as smac_rollout_ceiling.py refuses it, before any game."""
    import os
    import subprocess

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "train", str(ROOT / "configs/ppo/linewalk-mappo.yaml"),
                        f"out_dir={tmp_path}", "train.total_env_steps=256", "train.num_envs=2"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    (run,) = tmp_path.iterdir()
    seed_dir = run / "seed-0"
    need = "best-of-K counts wins on SMAC maps; the run trained line/LineWalk-v0"
    with pytest.raises(ConfigError, match=need):
        _load("smac_best_of_k").wins_from_fixed_starts(seed_dir, starts=2, k=1)
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/smac_best_of_k.py"), str(seed_dir), "--starts", "2",
                        "-k", "1"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == "", r.stderr
    assert r.stderr.strip().splitlines() == [f"error: key 'scenario.id': {need} (give the seed directory of a PPO "
                                             f"training run on a smac/ scenario)"]


def test_reset_seed_is_the_rollout_ceilings_seed_type():
    """One seed type for both scripts (a negative --reset-seed gave a traceback ending in 'seed must be ...')."""
    import argparse

    bok = _load("smac_best_of_k")
    with pytest.raises(SystemExit) as ei:
        bok.main(["SEED", "--reset-seed", "-5"])
    assert ei.value.code == 2
    seed_arg = _load("smac_rollout_ceiling").seed_arg
    assert seed_arg("0") == 0 and seed_arg(str(2 ** 31 - 1)) == 2 ** 31 - 1
    with pytest.raises(argparse.ArgumentTypeError, match="a seed in 0..2147483647 is required"):
        seed_arg(str(2 ** 31))
