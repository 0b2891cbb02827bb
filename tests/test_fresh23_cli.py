"""Fresh-user pass 23 (2026-12-06): messages a new user met on a clean clone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"})


def test_resume_of_a_missing_directory_says_it_does_not_exist(tmp_path):
    r = run_cli("train", "configs/ppo/linewalk-mappo.yaml", "--resume", str(tmp_path / "nonexistent"))
    assert r.returncode == 2
    assert "does not exist" in r.stderr and "nonexistent" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "empty").mkdir()
    r = run_cli("train", "configs/ppo/linewalk-mappo.yaml", "--resume", str(tmp_path / "empty"))
    assert r.returncode == 2 and "is not a training run" in r.stderr and "Traceback" not in r.stderr


def test_a_nan_or_infinite_number_is_called_not_finite():
    for value in ("nan", "inf", "-inf"):
        r = run_cli("validate", "configs/ppo/linewalk-mappo.yaml", f"train.lr={value}")
        assert r.returncode == 2
        assert f"invalid value '{value}': must be a finite number" in r.stderr, r.stderr
    r = run_cli("validate", "configs/ppo/linewalk-mappo.yaml", "train.lr=2")  # a finite value keeps its message
    assert r.returncode == 2 and "finite" not in r.stderr and "less than or equal to 1" in r.stderr


def test_warnings_are_one_plain_line_without_python_internals(tmp_path):
    # every agent of the prioritized planner lacks a plan within 1 step: its RuntimeWarning is shown
    r = run_cli("run", "configs/mapf/random-32-32-10.yaml", "max_steps=1", "seeds=[0]", f"out_dir={tmp_path}",
                "--no-progress")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "no complete plan" in ln]
    assert lines and all(ln.startswith("warning: mapf/prioritized-v0: ") for ln in lines), r.stderr
    assert "RuntimeWarning" not in r.stderr and "runner.py" not in r.stderr and "agent.reset(" not in r.stderr


def test_train_of_several_seeds_says_the_next_line_is_one_of_them(tmp_path):
    r = run_cli("train", "configs/ppo/linewalk-mappo.yaml", "seeds=[0,1]", "train.total_env_steps=512",
                "train.num_envs=4", "train.rollout_steps=8", "train.minibatches=1", "train.epochs=1",
                "train.progress=false", f"out_dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    nxt = [ln for ln in r.stdout.splitlines() if "next: " in ln]
    assert len(nxt) == 1 and "'seeds=[0]'" in nxt[0] and "seed-0" in nxt[0]
    assert "likewise seed-<s> with 'seeds=[<s>]' for the other 1" in nxt[0]
    # PPO's approx. KL ((r - 1) - log r, Schulman's k3) is never negative, not even by rounding
    for sd in sorted(tmp_path.glob("*/seed-*")):
        summary = json.loads((sd / "train_summary.json").read_text())
        kl = [v for k, v in summary.items() if k.endswith("approx_kl")]
        assert all(v >= 0.0 for v in kl)
