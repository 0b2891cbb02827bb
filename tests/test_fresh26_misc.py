"""Fresh-user pass 26: smac_time_to_win.py says when whole iterations overshoot the budget (as coopsim train does);
a nan or infinite value is refused as not finite only, not also against a bound it cannot be compared with."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[1]
QMIX = ROOT / "configs" / "smac" / "3m-qmix.yaml"
MAPPO = ROOT / "configs" / "smac" / "3m-mappo.yaml"


def _ttw_run(tmp_path, capsys, config: Path, *overrides: str) -> tuple[list[str], Path]:
    """One seed of ``smac_time_to_win.py`` in this process: (the printed ``note:`` lines, the seed directory)."""
    out = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    rc = load_benchmark("smac_time_to_win").main(
        [str(config), "--seeds", "0", "--eval-every", "100000", "--eval-episodes", "1", "train.num_envs=2",
         "train.progress=false", f"out_dir={out}", *overrides])
    assert rc == 0
    printed = capsys.readouterr()
    notes = [ln for ln in (printed.out + printed.err).splitlines() if ln.startswith("note:")]
    (run,) = out.iterdir()
    return notes, run / "seed-0"


def _steps(seed_dir: Path) -> tuple[int, int]:
    """The env steps of the seed's train_summary.json and of its checkpoint.pt."""
    summary = json.loads((seed_dir / "train_summary.json").read_text())
    ckpt = torch.load(seed_dir / "checkpoint.pt", map_location="cpu", weights_only=False)
    return summary["env_steps"], int(ckpt["env_steps"])


def test_ttw_qmix_budget_below_one_collection_is_noted_once(tmp_path, capsys):
    # QMIX collects one whole episode in each env per iteration (3m: about 20 steps x 2 envs), so a budget of 5
    # trains one iteration past it
    notes, seed_dir = _ttw_run(tmp_path, capsys, QMIX, "train.total_env_steps=5")
    summary_steps, ckpt_steps = _steps(seed_dir)
    assert summary_steps == ckpt_steps > 5
    assert len(notes) == 1, notes
    assert "train.total_env_steps=5 " in notes[0] and "below one iteration" in notes[0], notes[0]
    trained = int(re.search(r"trained ([\d,]+)", notes[0]).group(1).replace(",", ""))
    assert trained == summary_steps

    # a budget the run meets exactly (the same seed's one iteration) is not noted
    notes, seed_dir = _ttw_run(tmp_path, capsys, QMIX, f"train.total_env_steps={summary_steps}")
    assert _steps(seed_dir) == (summary_steps, summary_steps)
    assert notes == []


def test_ttw_ppo_rounded_budget_is_noted_and_an_exact_one_is_not(tmp_path, capsys):
    notes, seed_dir = _ttw_run(tmp_path, capsys, MAPPO, "train.total_env_steps=20", "train.rollout_steps=8")
    assert _steps(seed_dir) == (32, 32)  # whole iterations of 8 steps x 2 envs
    assert len(notes) == 1 and "rounded up to whole iterations" in notes[0] and notes[0].endswith("trained 32")
    notes, _ = _ttw_run(tmp_path, capsys, MAPPO, "train.total_env_steps=32", "train.rollout_steps=8")
    assert notes == []


def _cli(*args):
    """``coopsim ARGS`` in this process: (exit code, stdout + stderr)."""
    from typer.testing import CliRunner

    from coopsim.cli import app

    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.output + (res.stderr if res.stderr_bytes is not None else "")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", ".nan"])
def test_a_non_finite_value_gives_only_the_finite_reason(value):
    code, out = _cli("validate", MAPPO, f"train.lr={value}")
    assert code == 2
    assert "key 'train.lr'" in out and "must be a finite number (Adam learning rate)" in out, out
    assert "less than" not in out and "greater than" not in out, out


def test_a_finite_value_past_a_bound_keeps_the_bound():
    code, out = _cli("validate", MAPPO, "train.lr=2")
    assert code == 2
    assert "less than or equal to 1 (Adam learning rate)" in out and "finite" not in out, out


def test_report_names_a_policy_directory_and_the_rounds_of_a_benchmark(tmp_path):
    """A round of benchmarks/smac_clone.py (seed-0/policy.pt beside a config.yaml, no metrics) is named as a
    trained policy with the command that evaluates it; the folder of rounds points at its last round."""
    from typer.testing import CliRunner

    from coopsim.cli import app

    for r in (1, 2):
        (tmp_path / "clone" / f"round-{r}" / "seed-0").mkdir(parents=True)
        (tmp_path / "clone" / f"round-{r}" / "config.yaml").write_text((ROOT / "configs/smac/3m-mappo.yaml").read_text())
        (tmp_path / "clone" / f"round-{r}" / "seed-0" / "policy.pt").write_bytes(b"x")
    res = CliRunner().invoke(app, ["report", str(tmp_path / "clone" / "round-2")])
    out = " ".join(res.output.split())
    assert res.exit_code == 0 and "a trained policy with its config (no training metrics)" in out
    assert f"eval {tmp_path / 'clone' / 'round-2' / 'config.yaml'} 'seeds=[0]' --checkpoint {tmp_path / 'clone' / 'round-2' / 'seed-0'}" in out
    res = CliRunner().invoke(app, ["report", str(tmp_path / "clone")])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "its rounds (round-1 .. round-2) hold trained policies" in out
    assert f"--checkpoint {tmp_path / 'clone' / 'round-2' / 'seed-0'}" in out
