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
    tiny = [o for o in TINY if not o.startswith("train.total_env_steps=")]  # the command line gives a key once
    r = cli("train", CFG, *tiny, "train.total_env_steps=512", "agents.params.hidden=[32]", "--resume", str(run))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    err = " ".join(r.stderr.split())
    assert "key 'agents.params.hidden'" in err and "[64, 64]" in err and "[32]" in err
    assert "continues the run's stored config" in err and "new run" in err
    assert snapshot(run) == before
    with pytest.raises(ConfigError, match=r"key 'train.lr'.*0\.003.*0\.1"):
        train_main(CFG, [*TINY, "train.lr=0.1"], str(run))
    assert snapshot(run) == before
    # several changed keys: every one is named at once
    with pytest.raises(ConfigError, match=r"key 'train.lr'.*0\.003.*0\.1; 2 more key\(s\) differ: "
                                          r"train.epochs \(run: \d+, new: 7\), train.gamma \(run: \(not set\), new: 0.5\)"):
        train_main(CFG, [*TINY, "train.lr=0.1", "train.epochs=7", "train.gamma=0.5"], str(run))
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


def test_a_seed_without_its_checkpoint_is_refused_and_its_results_stay(done_run, tmp_path):
    """Found by a new user: with seed-0/checkpoint.pt gone, a larger budget retrained seed 0 from step 0 and
    overwrote its policy.pt, metrics.csv and summary. Now refused before anything is written."""
    run = copy_run(done_run, tmp_path)
    (run / "seed-0" / "checkpoint.pt").unlink()
    before = snapshot(run)
    with pytest.raises(ConfigError, match=r"seed 0 cannot be resumed: it holds train_summary.json, policy.pt, "
                                          r"metrics.csv at 256 env steps but no checkpoint.pt") as info:
        train_main(CFG, [*TINY, "train.total_env_steps=512"], str(run))
    assert str(run / "seed-0") in str(info.value)
    assert snapshot(run) == before
    # the run's own budget: the seed is complete, nothing to train, nothing refused
    notes = []
    assert train_main(CFG, TINY, str(run), info=notes.append) == run and "already complete" in notes[-1]


def test_a_damaged_checkpoint_is_refused_in_the_terms_of_a_resume(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    ck = run / "seed-0" / "checkpoint.pt"
    ck.write_bytes(ck.read_bytes()[: ck.stat().st_size // 2])
    before = snapshot(run)
    with pytest.raises(ConfigError) as info:
        train_main(CFG, [*TINY, "train.total_env_steps=512"], str(run))
    msg = str(info.value)
    assert msg.startswith(f"{ck}: seed 0 cannot be resumed: not a readable checkpoint")
    assert msg.endswith(f"start a new run (coopsim train CONFIG without --resume); {run / 'seed-0' / 'policy.pt'} "
                        "can still be evaluated (coopsim eval)")
    assert "use another checkpoint" not in msg and "high likelihood" not in msg
    assert snapshot(run) == before


def test_resume_takes_the_runs_config_when_config_is_left_out(done_run, tmp_path):
    """`coopsim train --resume RUN train.total_env_steps=N` (no CONFIG: the override sat in its place and was read
    as a missing file) and `coopsim train --resume RUN` both continue from the run's config.yaml."""
    run = copy_run(done_run, tmp_path)
    r = cli("train", "--resume", str(run), "train.total_env_steps=512")
    assert r.returncode == 0, r.stderr
    assert json.loads((run / "train_summary.json").read_text())["per_seed"]["0"]["env_steps"] == 512
    r = cli("train", "--resume", str(run))
    assert r.returncode == 0 and "already complete" in r.stdout
    r = cli("train")
    assert r.returncode == 2 and "give the training config" in r.stderr and "Traceback" not in r.stderr


def test_resuming_a_complete_run_says_so_and_changes_nothing(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    before = snapshot(run)
    notes = []
    assert train_main(CFG, TINY, str(run), info=notes.append) == run
    assert len(notes) == 2 and "already complete" in notes[1]
    assert notes[0] == f"resuming {run}: seed 0 at 256 of 256 env steps -> budget 256"
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


def test_resume_without_a_budget_override_keeps_the_runs_budget(done_run, tmp_path):
    # the YAML file says 3M (configs/ppo/linewalk-mappo.yaml: its own budget); the run was started with an
    # override of 256: a resume without train.total_env_steps= keeps 256 and does not rewrite config.yaml
    run = copy_run(done_run, tmp_path)
    before = snapshot(run)
    notes = []
    small = [o for o in TINY if not o.startswith("train.total_env_steps=")]
    assert train_main(CFG, small, str(run), info=notes.append) == run
    assert notes[0] == (f"resuming {run}: seed 0 at 256 of 256 env steps -> budget 256 (the run's; give "
                        f"train.total_env_steps=N to change it)")
    assert "already complete (256/256" in notes[1]
    assert snapshot(run) == before
    # an explicit override still changes it
    notes.clear()
    train_main(CFG, [*small, "train.total_env_steps=384"], str(run), info=notes.append)
    assert notes[0] == f"resuming {run}: seed 0 at 256 of 256 env steps -> budget 384"
    assert "total_env_steps: 384" in (run / "config.yaml").read_text()


def test_train_help_says_where_resume_takes_its_budget_from():
    r = cli("train", "--help")
    text = " ".join(r.stdout.split())
    assert "the budget is the run's stored train.total_env_steps, not the YAML file's, unless the command line " \
           "gives train.total_env_steps=N" in text.replace("│ ", "").replace(" │", "")


def test_a_budget_change_warns_when_a_schedule_depends_on_it(done_run, tmp_path):
    from coopsim.platform.training import schedule_warning
    from types import SimpleNamespace as NS

    old = NS(total_env_steps=40_000, anneal_lr=True, lr=0.001, ent_coef=0.02, ent_coef_end=0.0)
    new = NS(total_env_steps=80_000, anneal_lr=True, lr=0.001, ent_coef=0.02, ent_coef_end=0.0)
    assert schedule_warning(old, new, 40_000) == (
        "warning: lr/entropy schedules are linear over train.total_env_steps; raising it from 40,000 to 80,000 "
        "moves them back up at 40,000 env steps (lr from 0 to 0.0005 and entropy coefficient from 0 to 0.01): "
        "the result differs from an uninterrupted run of 80,000 steps")
    assert schedule_warning(old, old, 40_000) is None
    # PPO's sticky-action eps anneals to 0 at a fraction of the budget: a larger budget raises it again
    sticky = dict(anneal_lr=False, lr=0.001, ent_coef=0.02, ent_coef_end=None, sticky_eps=0.8, sticky_anneal_frac=0.5)
    assert schedule_warning(NS(total_env_steps=2048, **sticky), NS(total_env_steps=8192, **sticky), 2048) == (
        "warning: sticky-action eps schedules are linear over train.total_env_steps; raising it from 2,048 to 8,192 "
        "moves them back up at 2,048 env steps (sticky-action eps from 0 to 0.4): the result differs from an "
        "uninterrupted run of 8,192 steps")
    # past both anneal points eps stays 0: nothing moves, nothing to warn
    assert schedule_warning(NS(total_env_steps=2048, **sticky), NS(total_env_steps=4000, **sticky), 2048) is None
    assert schedule_warning(NS(total_env_steps=1, anneal_lr=False, lr=1.0, ent_coef=0.1, ent_coef_end=None),
                            NS(total_env_steps=2, anneal_lr=False, lr=1.0, ent_coef=0.1, ent_coef_end=None), 1) is None
    # end to end: an annealed lr, budget 256 -> 512
    run = train_main(CFG, [f"out_dir={tmp_path}", *TINY, "train.anneal_lr=true"], None)
    notes = []
    train_main(CFG, [*TINY, "train.anneal_lr=true", "train.total_env_steps=512"], str(run), info=notes.append)
    assert notes[0] == f"resuming {run}: seed 0 at 256 of 256 env steps -> budget 512"
    assert notes[1].startswith("warning: lr/entropy schedules are linear over train.total_env_steps; raising it "
                               "from 256 to 512 moves them back up at 256 env steps (lr from 0 to 0.0015")


def test_resume_refuses_a_directory_written_by_run_or_eval(tmp_path):
    run = tmp_path / "evalrun"
    run.mkdir()
    (run / "config.yaml").write_text(Path(CFG).read_text())
    (run / "metrics.jsonl").write_text("")
    before = snapshot(run)
    r = cli("train", CFG, *TINY, "--resume", str(run))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert " ".join(r.stderr.split()) == (f"error: {run} is not a training run (no seed-<s>/checkpoint.pt); give a "
                                          f"directory written by coopsim train")
    assert snapshot(run) == before


def test_eval_of_a_training_run_dir_names_its_seed_dirs(done_run):
    r = cli("eval", CFG, "--checkpoint", str(done_run), "episodes=1", "--no-progress")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert " ".join(r.stderr.split()) == (f"error: {done_run}: a training run directory: its checkpoints are in "
                                          f"seed-0/; pass one, e.g. --checkpoint {done_run}/seed-0")


def test_report_of_a_training_run_says_so_and_plots_its_curves(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    r = cli("report", str(run))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    out = " ".join(r.stdout.split())
    assert out.startswith(f"note: {run}: a training run (written by coopsim train), not a run of evaluation "
                          f"episodes; evaluate it with: coopsim eval {run}/config.yaml 'seeds=[0]' --checkpoint {run}/seed-0")
    assert "no finished episode" not in out
    assert f"plot: {run}/train_curves.png (training curves" in out
    assert (run / "train_curves.png").stat().st_size > 1000
    from coopsim.errors import CoopsimError
    from coopsim.platform.report import load_run

    with pytest.raises(CoopsimError, match="a training run .written by coopsim train.*coopsim eval"):
        load_run(run)


def test_the_run_directory_is_printed_when_training_starts(tmp_path):
    seen = []

    def info(msg):  # what exists when the line is printed: the config, no checkpoint or summary yet
        seen.append((msg, sorted(p.name for p in tmp_path.rglob("*") if p.is_file())))

    run = train_main(CFG, [f"out_dir={tmp_path}", *TINY], None, info=info)
    assert seen == [(f"run directory: {run}", ["config.yaml"])]


def test_shipped_smac_and_ppo_configs_show_progress():
    import yaml

    for f in sorted((REPO / "configs").glob("smac/*.yaml")) + sorted((REPO / "configs").glob("ppo/*.yaml")):
        train = (yaml.safe_load(f.read_text()) or {}).get("train") or {}
        assert train.get("progress", True) is True, f


def test_a_second_resume_of_a_run_being_trained_is_refused_untouched(done_run, tmp_path):
    from coopsim.platform.training import run_dir_lock

    run = copy_run(done_run, tmp_path)
    before = snapshot(run)
    with run_dir_lock(run):  # as a first `train --resume` holds it while it trains
        with pytest.raises(ConfigError, match="being trained by another coopsim train process right now"):
            train_main(CFG, [*TINY, "train.total_env_steps=512"], str(run))
        # a separate process (the CLI) is refused as well, in one line, exit code 2
        r = cli("train", "--resume", str(run), "train.total_env_steps=512")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "being trained by another coopsim train process" in " ".join(r.stderr.split())
    assert snapshot(run) == before
    # released: the resume trains on
    assert train_main(CFG, [*TINY, "train.total_env_steps=512"], str(run)) == run
    assert json.loads((run / "train_summary.json").read_text())["per_seed"]["0"]["env_steps"] == 512


def test_a_bad_budget_override_on_resume_is_blamed_on_the_override(done_run, tmp_path):
    run = copy_run(done_run, tmp_path)
    before = snapshot(run)
    r = cli("train", "--resume", str(run), "train.total_env_steps=abc")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert " ".join(r.stderr.split()).startswith(
        f"error: command-line override 'train.total_env_steps=abc' (config {run}/config.yaml): key "
        f"'train.total_env_steps': invalid value 'abc'")
    assert snapshot(run) == before
