"""The coopsim command end to end: list, run, report (one run and a comparison), sweep."""
import json
import subprocess
import sys
from pathlib import Path

from coopsim.platform import registry

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_list_shows_every_registry_id():
    r = cli("list")
    assert r.returncode == 0, r.stderr
    for kind in registry.KINDS:
        for id_ in registry.list_ids(kind):
            assert id_ in r.stdout


def test_run_then_report(tmp_path):
    r = cli("run", str(CFG), f"out_dir={tmp_path}", "seeds=[0,1]", "episodes=1", "--no-progress")
    assert r.returncode == 0, r.stderr
    run_dir = Path(r.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    assert run_dir.parent == tmp_path
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episodes_finished"] == 2
    (run_dir / "metrics.png").unlink()
    r = cli("report", str(run_dir))
    assert r.returncode == 0, r.stderr
    assert (run_dir / "metrics.png").exists()
    assert "episode_return" in r.stdout


def test_checkpoint_for_a_planner_and_bad_out_dir_are_clear_errors(tmp_path):
    r = cli("run", str(CFG), f"out_dir={tmp_path}", "--checkpoint", str(tmp_path / "nope.pt"))
    assert r.returncode == 2 and "checkpoint not found" in r.stderr
    (tmp_path / "f.pt").write_bytes(b"x")
    r = cli("run", str(CFG), f"out_dir={tmp_path}", "--checkpoint", str(tmp_path / "f.pt"))
    assert r.returncode == 2 and "takes no checkpoint" in r.stderr
    (tmp_path / "file").write_text("")
    r = cli("run", str(CFG), f"out_dir={tmp_path / 'file'}")
    assert r.returncode == 2 and "key 'out_dir'" in r.stderr and "Traceback" not in r.stderr


def test_report_of_a_non_run_dir_is_a_clear_error(tmp_path):
    r = cli("report", str(tmp_path))
    assert r.returncode == 2
    assert "not a run directory (no config.yaml)" in r.stderr and "Traceback" not in r.stderr


def test_sweep_runs_the_grid_and_compares(tmp_path):
    r = cli("sweep", str(CFG), "--grid", "scenario.params.num_agents=2,5", f"out_dir={tmp_path}", "seeds=[0,1]",
            "episodes=1", "--jobs", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    dirs = sorted(p for p in tmp_path.iterdir() if (p / "summary.json").exists())
    assert [d.name.split("-2026")[0].rsplit("-", 1)[-1] for d in dirs] == ["2", "5"]  # run names carry the grid value
    assert [json.loads((d / "summary.json").read_text())["episodes_finished"] for d in dirs] == [2, 2]
    (cmp,) = [p for p in tmp_path.iterdir() if p.name.startswith("compare-")]
    assert (cmp / "compare_episode_return.png").exists()
    csv_rows = (cmp / "compare.csv").read_text().splitlines()
    assert csv_rows[0].startswith("scenario.params.num_agents,") and len(csv_rows) == 3
    assert "num_agents" in r.stdout


def test_sweep_rejects_bad_grid_before_running(tmp_path):
    r = cli("sweep", str(CFG), "--grid", "scenario.params.num_agents=2,0", f"out_dir={tmp_path}")
    assert r.returncode == 2
    assert "scenario.params.num_agents" in r.stderr and not any(tmp_path.iterdir())


def test_sweep_rejects_negative_jobs(tmp_path):
    r = cli("sweep", str(CFG), "--grid", "episodes=1", "--jobs", "-1", f"out_dir={tmp_path}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "--jobs" in r.stderr
    assert not list(tmp_path.iterdir())


def test_train_resume_with_another_config_is_refused_and_eval_takes_a_seed_dir(tmp_path):
    train_cfg = CFG.parents[1] / "ppo" / "linewalk-mappo.yaml"
    r = cli("train", str(train_cfg), f"out_dir={tmp_path}", "train.total_env_steps=1024", "train.num_envs=4",
            "train.checkpoint_every=512", "train.progress=false")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    run_dir = Path(next(ln for ln in lines if ln.startswith("run directory: ")).split(": ", 1)[1])
    # it ends with the eval command of the first seed's policy, on the run's own config
    assert lines[-1].endswith(f"eval {run_dir / 'config.yaml'} 'seeds=[0]' --checkpoint {run_dir / 'seed-0'}")
    r = cli("train", str(CFG), "--resume", str(run_dir))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "name 'ppo-linewalk-mappo'" in r.stderr and "name 'line-random'" in r.stderr
    r = cli("eval", str(train_cfg), "--checkpoint", str(run_dir / "seed-0"), f"out_dir={tmp_path}", "episodes=2",
            "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "episode_return" in r.stdout  # the summary table, as `run` prints it
    summary = json.loads((Path(r.stdout.strip().splitlines()[-1].split(": ", 1)[1]) / "summary.json").read_text())
    assert summary["episodes_finished"] == 2


def test_agent_of_another_scenario_family_is_a_config_error_before_any_run_dir(tmp_path):
    # SMAC's focus fire on the line world: its first act() fails; validate and run both say so, exit 2, no run dir
    for cmd in ("validate", "run"):
        r = cli(cmd, str(CFG), f"out_dir={tmp_path}", "agents.id=smac/focus-fire-v0")
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert "key 'agents.id'" in r.stderr and "cannot act on scenario 'line/LineWalk-v0'" in r.stderr
        assert "Traceback" not in r.stderr
    # MG-MAPF's random mover needs Discrete(5); the line world has Discrete(3)
    r = cli("run", str(CFG), f"out_dir={tmp_path}", "agents.id=mapf/random-v0")
    assert r.returncode == 2 and "Discrete(3)" in r.stderr and "random-v0" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_runner_rejects_joint_actions_outside_the_action_space():
    import numpy as np

    from coopsim.platform.runner import joint_action_problem

    assert joint_action_problem(np.array([[0, 2]]), 3, 1, 2, 0) is None  # valid
    for bad, what in ((np.array([[0, 3]]), "values [0, 3]"), (np.array([[-1, 0]]), "values [-1, 0]"),
                      (np.array([[0.0, 1.0]]), "float64"), (np.array([0, 1]), "shape (2,)")):
        problem = joint_action_problem(bad, 3, 1, 2, 7)
        assert what in problem and "at step 7" in problem and "integers 0..2 (Discrete(3))" in problem


def test_validate_checks_the_train_section():
    """`coopsim validate` reads train: as `coopsim train` would (fresh-user report: a misspelled train key passed)."""
    cfg = Path(__file__).resolve().parents[2] / "configs" / "ppo" / "linewalk-mappo.yaml"
    r = cli("validate", str(cfg))
    assert r.returncode == 0 and "the train: section checked" in r.stdout
    for bad, msg in (("train.lrr=0.1", "unknown parameter 'lrr'"), ("train.num_envs=0", "train.num_envs")):
        r = cli("validate", str(cfg), bad)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, (bad, r.stderr)


def test_error_values_print_as_given_and_a_misspelled_top_key_is_named(tmp_path):
    """An error's text is not rich markup ([true,64] used to vanish), and `agent:` for `agents:` names the typo."""
    cfg = Path(__file__).resolve().parents[2] / "configs" / "ppo" / "linewalk-mappo.yaml"
    r = cli("validate", str(cfg), "agents.params.hidden=[true,64]")
    assert r.returncode == 2 and "'agents.params.hidden=[true,64]'" in r.stderr
    bad = tmp_path / "typo.yaml"
    bad.write_text("name: x\nscenario: {id: mapf/MGMAPF-v0}\nagent: {id: mapf/pibt-v0}\n")
    r = cli("validate", str(bad))
    assert r.returncode == 2 and "unknown key 'agent' given instead (did you mean 'agents'?)" in r.stderr


def test_the_cli_pins_blas_threads_to_one_unless_set():
    """One BLAS/OpenMP thread by default (a run's floats depend on the thread count; docs/ppo.md, Exact resume)."""
    import os
    import subprocess
    import sys

    code = ("import os; import coopsim.cli, numpy; "
            "print(os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS'])")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "1", "1"]
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_NUM_THREADS": "3"}, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["3", "3", "3"]  # a user's own OMP setting is kept and rules MKL and OpenBLAS too
    out = subprocess.run([sys.executable, "-c", code], env={**env, "MKL_NUM_THREADS": "2"}, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["1", "2", "1"]
