"""The run config's `replays` key: replay files kept per seed (the first N episodes of each seed, 0 = none)."""
import json

import numpy as np
import pytest

from cli_helpers import ROOT, _err, run_cli
from coopsim.platform.config import load_config
from coopsim.platform.report import config_differences, replay_absence, same_config

CFG = ROOT / "configs" / "mapf" / "random-32-32-10.yaml"
TINY = ("scenario.params.num_agents=4", "max_steps=40", "episodes=3", "seeds=[0,1]", "--no-progress")


def _run(tmp_path, *extra):
    r = run_cli("run", CFG, f"out_dir={tmp_path}", *TINY, *extra)
    assert r.returncode == 0, r.stderr
    (d,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return d, r


def _rows(d):
    return [json.loads(ln) for ln in (d / "metrics.jsonl").read_text().splitlines()]


def test_first_n_episodes_of_each_seed(tmp_path):
    d, _ = _run(tmp_path / "a", "replays=1")
    assert sorted(p.name for p in (d / "replays").iterdir()) == ["seed0_ep0.npz", "seed1_ep0.npz"]
    full, _ = _run(tmp_path / "b")
    assert sorted(p.name for p in (full / "replays").iterdir()) == [
        f"seed{s}_ep{e}.npz" for s in (0, 1) for e in range(3)]
    # the kept replay is the same file as without the key, and the episodes are the same
    with np.load(d / "replays" / "seed1_ep0.npz") as a, np.load(full / "replays" / "seed1_ep0.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    assert _rows(d) == _rows(full) and len(_rows(d)) == 6
    # a config differing only in replays is the same experiment (report pools it, sweep --skip-done reuses it)
    ca, cb = (load_config(x / "config.yaml", check_components=False).model_dump(exclude_none=True) for x in (d, full))
    assert ca["replays"] == 1 and "replays" not in cb
    assert same_config(ca, cb) and config_differences(ca, cb) == []


def test_zero_keeps_none_and_report_says_why(tmp_path):
    d, r = _run(tmp_path, "replays=0")
    assert not (d / "replays").exists()
    assert "next: " not in r.stdout  # no GIF to render
    assert replay_absence(d, "mapf/MGMAPF-v0") == "the run's config says replays: 0 (no replay files kept)"
    rep = run_cli("report", d)
    assert rep.returncode == 0 and "replays: 0" in rep.stdout + rep.stderr


@pytest.mark.parametrize("value, says", [("-1", "greater than or equal to 0"), ("true", "not a boolean"),
                                         ("'2'", "remove the quotes"), ("1.5", "fractional part")])
def test_bad_values(value, says):
    err = _err(run_cli("validate", CFG, f"replays={value}"))
    assert "key 'replays'" in err and says in err
