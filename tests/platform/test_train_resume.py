"""`coopsim train --resume` continues the run's stored config: any difference but a budget that does not go
below the steps done is refused before anything is written; a complete run says so; an unwritable out_dir and
an interrupt before the run directory exists give one clean line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from coopsim.errors import ConfigError
from coopsim.platform.training import train_main

REPO = Path(__file__).resolve().parents[2]
CFG = str(REPO / "configs" / "ppo" / "linewalk-mappo.yaml")
TINY = ["train.total_env_steps=256", "train.num_envs=4", "train.rollout_steps=32", "train.epochs=1",
        "train.checkpoint_every=128", "train.progress=false", "train.tensorboard=false"]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=REPO)


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def done_run(tmp_path_factory):
    """A finished 256-step run (the fixture's tests that change it copy it first)."""
    out = tmp_path_factory.mktemp("runs")
    return train_main(CFG, [f"out_dir={out}", *TINY], None)


def copy_run(run: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / run.name
    shutil.copytree(run, dst)
    return dst


def test_a_changed_network_or_lr_is_refused_and_the_run_is_untouched(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    before = snapshot(run)
    # the bricking sequence: a different hidden size on resume used to rewrite config.yaml (exit 0), and every
    # later resume then crashed with a torch size mismatch
    r = cli("train", CFG, *TINY, "train.total_env_steps=512", "agents.params.hidden=[32]", "--resume", str(run))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    err = " ".join(r.stderr.split())
    assert "key 'agents.params.hidden'" in err and "[64, 64]" in err and "[32]" in err
    assert "continues the run's stored config" in err and "new run" in err
    assert snapshot(run) == before
    with pytest.raises(ConfigError, match=r"key 'train.lr'.*0\.003.*0\.1"):
        train_main(CFG, [*TINY, "train.lr=0.1"], str(run))
    assert snapshot(run) == before
    # the unchanged config still resumes (here: already complete)
    assert train_main(CFG, TINY, str(run)) == run


def test_a_larger_budget_resumes_and_is_recorded(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    # out_dir and the progress/TensorBoard switches may differ too
    assert train_main(CFG, [*TINY, "train.total_env_steps=512", "train.progress=true"], str(run)) == run
    s = json.loads((run / "train_summary.json").read_text())
    assert s["total_env_steps_budget"] == 512 and s["per_seed"]["0"]["env_steps"] == 512
    assert s["per_seed"]["0"]["resumed"]
    text = (run / "config.yaml").read_text()
    assert "total_env_steps: 512" in text and "progress: false" in text  # only the budget is recorded


def test_a_budget_below_the_steps_done_is_refused(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    before = snapshot(run)
    with pytest.raises(ConfigError, match=r"key 'train.total_env_steps'.*100 is below the 256 env steps"):
        train_main(CFG, [*TINY, "train.total_env_steps=100"], str(run))
    assert snapshot(run) == before


def test_resuming_a_complete_run_says_so_and_changes_nothing(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    before = snapshot(run)
    notes = []
    assert train_main(CFG, TINY, str(run), info=notes.append) == run
    assert len(notes) == 1 and "already complete" in notes[0]
    assert snapshot(run) == before


def test_unwritable_out_dir_is_a_clean_error(tmp_path):
    r = cli("train", CFG, "out_dir=/proc/nope", *TINY)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "key 'out_dir': cannot create the run directory" in " ".join(r.stderr.split())


def test_interrupt_before_the_run_dir_exists_says_nothing_was_written(monkeypatch, capsys):
    import coopsim.cli as cli_mod
    import coopsim.platform.training as training

    def stopped(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "train_main", stopped)
    with pytest.raises(typer.Exit) as ei:
        cli_mod.train(Path(CFG), [], None)
    err = capsys.readouterr().err
    assert ei.value.exit_code == 130
    assert "nothing was written" in err and "RUN_DIR" not in err and "--resume" not in err
