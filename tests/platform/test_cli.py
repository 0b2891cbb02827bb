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


def test_report_of_a_non_run_dir_is_a_clear_error(tmp_path):
    r = cli("report", str(tmp_path))
    assert r.returncode == 2
    assert "not a run directory (no config.yaml)" in r.stderr and "Traceback" not in r.stderr


def test_sweep_runs_the_grid_and_compares(tmp_path):
    r = cli("sweep", str(CFG), "--grid", "scenario.params.num_agents=2,5", f"out_dir={tmp_path}", "seeds=[0,1]",
            "episodes=1", "--jobs", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    dirs = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(dirs) == 2
    agents = sorted(json.loads((d / "summary.json").read_text())["episodes_finished"] for d in dirs)
    assert agents == [2, 2]
    assert (tmp_path / "compare_episode_return.png").exists()
    assert "num_agents" in r.stdout


def test_sweep_rejects_bad_grid_before_running(tmp_path):
    r = cli("sweep", str(CFG), "--grid", "scenario.params.num_agents=2,0", f"out_dir={tmp_path}")
    assert r.returncode == 2
    assert "scenario.params.num_agents" in r.stderr and not any(tmp_path.iterdir())
