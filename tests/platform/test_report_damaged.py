"""`coopsim report` on a damaged or missing run directory: one message naming the file, exit 2, no traceback."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    r = cli("run", str(CFG), f"out_dir={out}", "seeds=[0]", "episodes=1", "max_steps=5", "--no-progress")
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip().splitlines()[-1].split(": ", 1)[1])


def damaged(good_run, tmp_path):
    d = tmp_path / "RUN"
    shutil.copytree(good_run, d)
    return d


def check(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


def test_bad_summary_json(good_run, tmp_path):
    d = damaged(good_run, tmp_path)
    (d / "summary.json").write_text("x\n")
    check(cli("report", str(d)), f"{d / 'summary.json'}: not valid JSON")


def test_bad_config_yaml(good_run, tmp_path):
    d = damaged(good_run, tmp_path)
    (d / "config.yaml").write_text("name: [\n")
    check(cli("report", str(d)), f"{d / 'config.yaml'}: not valid YAML")


def test_bad_replay_npz(good_run, tmp_path):
    d = damaged(good_run, tmp_path)
    cfg = (d / "config.yaml").read_text().replace("line/LineWalk-v0", "mapf/MGMAPF-v0")  # a scenario that renders replays
    (d / "config.yaml").write_text(cfg)
    (d / "replays").mkdir(exist_ok=True)
    (d / "replays" / "seed0_ep0.npz").write_text("x\n")
    r = cli("report", str(d))
    check(r, f"{d / 'replays' / 'seed0_ep0.npz'}: not a replay file", "damaged")
    assert "allow_pickle" not in r.stderr  # numpy's advice for pickled data is not for a damaged replay


def test_missing_path(tmp_path):
    check(cli("report", str(tmp_path / "nope")), f"{tmp_path / 'nope'}: does not exist")


def test_validate_a_directory(tmp_path):
    check(cli("validate", str(tmp_path)), f"{tmp_path}: is a directory, not a file")
