"""Fresh-user pass 34 (F11, 34b N7/N8): `coopsim report` of a training run's seed folder names it and gives the eval
command with that seed (as `coopsim train`'s next: line); a training run or a seed folder among several folders to
compare is skipped with a note, as a comparison folder is (it was an error that stopped the whole comparison);
`coopsim validate` of a results file says what wrote it."""
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.platform.training import train_main

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=ENV)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("f34")
    train = train_main("configs/ppo/linewalk-mappo.yaml",
                       ["seeds=[0]", "train.total_env_steps=128", "train.num_envs=2", "train.rollout_steps=32",
                        "train.epochs=1", "train.progress=false", "train.tensorboard=false", f"out_dir={out}"], None)
    r = cli("run", "configs/examples/line-random.yaml", f"out_dir={out}", "seeds=[0]", "episodes=2", "max_steps=5",
            "--no-progress")
    assert r.returncode == 0, r.stderr
    return Path(train), Path(r.stdout.strip().splitlines()[-1].split(": ", 1)[1])


def test_report_of_a_seed_folder_names_its_training_run_and_the_eval_command(runs):
    train, _ = runs
    r = cli("report", train / "seed-0")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    q = shlex.quote
    msg = " ".join(r.stderr.split())
    assert f"{train / 'seed-0'}: one seed's folder of the training run {train}, not a run directory" in msg
    # with the seed, as `coopsim train`'s own next: line (without it the policy is evaluated on every config seed)
    assert f"eval {q(str(train / 'config.yaml'))} 'seeds=[0]' --checkpoint {q(str(train / 'seed-0'))}" in msg


def test_a_training_run_among_runs_to_compare_is_skipped_with_a_note(runs):
    train, run = runs
    r = cli("report", train, run, "--no-gif")
    out = " ".join(r.stdout.split())
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"note: skipped {train}: a training run (written by coopsim train), not a run of evaluation episodes" in out
    assert "episode_return" in out or "return" in out  # the run's table was shown
    # a seed folder among them is skipped the same way (fresh34b N7: it stopped the whole comparison)
    r = cli("report", train / "seed-0", run, "--no-gif")
    out = " ".join(r.stdout.split())
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"note: skipped {train / 'seed-0'}: one seed's folder of the training run {train}" in out
    r = cli("report", train, train / "seed-0")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "no folder given is a run directory" in r.stderr


def test_validate_of_a_results_file_says_what_wrote_it(tmp_path):
    import json

    f = tmp_path / "res.json"
    f.write_text(json.dumps({"config": {}, "settings": {}, "oracle": True, "seeds_done": 1, "summary": {}, "runs": []}))
    r = cli("validate", f)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "a results file that `python -m coopsim.comm.ns3.experiment` writes (its --out)" in r.stderr
    assert "experiment file" not in r.stderr
    f.write_text(json.dumps({"args": {}, "seeds_done": 1, "summary": {}, "runs": []}))
    assert "`python -m coopsim.agents.ddacom.evaluate` writes" in cli("validate", f).stderr


def test_the_comparison_table_keeps_to_columns_when_set_and_is_wide_when_piped_without_it(runs):
    """Session 34's low: the comparison table was printed 200 columns wide even with COLUMNS=80."""
    _, run = runs
    r2 = cli("run", "configs/examples/line-random.yaml", f"out_dir={run.parent}", "seeds=[1]", "episodes=2",
             "max_steps=5", "--no-progress")
    assert r2.returncode == 0, r2.stderr
    other = Path(r2.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    narrow = subprocess.run([sys.executable, "-m", "coopsim.cli", "report", str(run), str(other), "--no-gif"],
                            capture_output=True, text=True, cwd=REPO, env={**ENV, "COLUMNS": "80"})
    assert narrow.returncode == 0, narrow.stderr
    table = [ln for ln in narrow.stdout.splitlines() if ln.startswith(("┃", "│", "┏", "└", "┡"))]
    assert table and max(map(len, table)) <= 80, max(map(len, table))
    env = {k: v for k, v in ENV.items() if k != "COLUMNS"}
    wide = subprocess.run([sys.executable, "-m", "coopsim.cli", "report", str(run), str(other), "--no-gif"],
                          capture_output=True, text=True, cwd=REPO, env=env)
    assert wide.returncode == 0, wide.stderr
    table = [ln for ln in wide.stdout.splitlines() if ln.startswith(("┃", "│", "┏", "└", "┡"))]
    assert table and max(map(len, table)) > 80  # unsqueezed when piped and COLUMNS is not set
