"""A sweep over `seeds` compares its cells as rows of their own, labelled by the seeds value; `coopsim report` on
runs that differ only in their seeds pools them and says so."""
import csv
import subprocess
import sys
from pathlib import Path

from coopsim.cli import _grid_values
from coopsim.platform.config import load_config
from coopsim.platform.report import compare_runs, comparison_table
from coopsim.platform.runner import run_config

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"


def _runs(tmp_path, seed_lists):
    return [run_config(load_config(CFG, [f"out_dir={tmp_path}", f"seeds={s}", "episodes=1", f"name=r{i}"]),
                       progress=False) for i, s in enumerate(seed_lists)]


def _table_text(res) -> str:
    from rich.console import Console

    con = Console(width=250, record=True, file=open("/dev/null", "w"))
    con.print(comparison_table(res))
    return con.export_text()


def test_grid_values_keep_bracketed_lists_whole():
    assert _grid_values("32,64,128") == ["32", "64", "128"]
    assert _grid_values("[0,1],[2,3]") == ["[0,1]", "[2,3]"]
    assert _grid_values("{a: 1, b: 2},x") == ["{a: 1, b: 2}", "x"]


def test_compare_keeps_seed_cells_apart_when_seeds_is_a_grid_axis(tmp_path):
    dirs = _runs(tmp_path, ["[0]", "[1]", "[2,3]"])
    pooled = compare_runs(dirs, out_dir=tmp_path / "p")
    assert len(pooled["table"]) == 1 and pooled["pooled_seeds"] is True
    assert pooled["table"][0]["summary"]["episode_return"]["n_seeds"] == 4
    assert "pooled into one row" in _table_text(pooled)
    assert pooled["table"][0]["seeds"] == [0, 1, 2, 3] and " 0-3 " in _table_text(pooled)  # the row says which seeds

    res = compare_runs(dirs, out_dir=tmp_path / "g", group_by=["seeds"])
    assert res["line_keys"] == ["seeds"] and res["pooled_seeds"] is False
    by_seeds = {row["line"]["seeds"]: row["summary"]["episode_return"] for row in res["table"]}
    assert sorted(by_seeds) == ["[0]", "[1]", "[2, 3]"]
    assert [by_seeds[k]["n_seeds"] for k in ("[0]", "[1]", "[2, 3]")] == [1, 1, 2]
    # each cell's value is its own run's summary, not the pool's
    from coopsim.platform.report import load_run

    for d, k in zip(dirs, ("[0]", "[1]", "[2, 3]")):
        assert by_seeds[k]["mean"] == load_run(d)["summary"]["metrics"]["episode_return"]["mean"]
    assert len({by_seeds[k]["mean"] for k in by_seeds}) == 3  # the seeds give different returns here
    assert "pooled into one row" not in _table_text(res)


def test_sweep_over_seeds_prints_one_row_per_seed(tmp_path):
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "sweep", str(CFG), "--grid", "seeds=0,1,[2,3]",
                        f"out_dir={tmp_path}", "episodes=1", "--jobs", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    (cmp,) = [p for p in tmp_path.iterdir() if p.name.startswith("compare-")]
    rows = list(csv.reader((cmp / "compare.csv").read_text().splitlines()))
    assert rows[0][0] == "seeds"
    assert sorted(row[0] for row in rows[1:]) == ["[0]", "[1]", "[2, 3]"]
    n_seeds = rows[0].index("episode_return:n_seeds")
    assert sorted(row[n_seeds] for row in rows[1:]) == ["1", "1", "2"]


def test_sweep_refuses_a_repeated_grid_key_or_value_and_a_grid_without_equals(tmp_path):
    def sweep(*grid):
        r = subprocess.run([sys.executable, "-m", "coopsim.cli", "sweep", str(CFG), *grid, f"out_dir={tmp_path}"],
                           capture_output=True, text=True)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert not any(tmp_path.iterdir())  # nothing ran
        return " ".join(r.stderr.split())

    assert sweep("--grid", "episodes=1", "--grid", "episodes=2") == (
        "error: --grid episodes is given twice; give its values once, comma-separated, e.g. --grid episodes=1,2")
    assert sweep("--grid", "episodes=1,1") == (
        "error: --grid 'episodes=1,1': value 1 is given twice (each grid value is one run; for repeats give more "
        "seeds)")
    assert sweep("--grid", "seeds") == "error: --grid 'seeds' must look like key=v1,v2,..., e.g. --grid seeds=0,1,2"
    # a fixed override of a grid key was silently replaced by the grid's values in every run
    assert sweep("--grid", "episodes=1,2", "episodes=3") == (
        "error: episodes is given both as a fixed override ('episodes=3') and as --grid episodes=...; the grid would "
        "replace it in every run: drop one of them")
    # one key inside the other: the grid's mapping replaced the fixed key, or the fixed mapping lost the grid key
    assert "given both as a fixed override ('scenario.params={length: 5}') and as --grid scenario.params.length" in \
        sweep("--grid", "scenario.params.length=5,6", "scenario.params={length: 5}")
    assert "as --grid scenario.params=..." in sweep("--grid", "scenario.params={length: 5},{length: 6}",
                                                    "scenario.params.num_agents=3")


def test_compare_says_when_pooled_runs_ran_the_same_seed(tmp_path):
    dirs = _runs(tmp_path, ["[0, 1]", "[1, 2]", "[3]"])
    res = compare_runs(dirs, out_dir=tmp_path / "p")
    ret = res["table"][0]["summary"]["episode_return"]
    # seed 1's episodes of both runs are one seed of the interval: 4 seeds, not 5; 5 episodes in all
    assert ret["n_seeds"] == 4 and ret["n_episodes"] == 5
    assert list(res["notes"]) == ["seed 1"]
    assert res["notes"]["seed 1"].startswith(f"runs {Path(dirs[0]).name}, {Path(dirs[1]).name} all ran seed 1")
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "report", *map(str, dirs)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: seed 1: runs" in r.stdout and "pooled into one seed of the interval" in " ".join(r.stdout.split())
    # distinct seeds: no such note
    assert not any(k.startswith("seed ") for k in compare_runs(dirs[1:], out_dir=tmp_path / "q")["notes"])


def test_grid_errors_name_the_grid_not_an_override(tmp_path):
    def sweep(*grid):
        return subprocess.run([sys.executable, "-m", "coopsim.cli", "sweep", str(CFG), *grid, f"out_dir={tmp_path}"],
                              capture_output=True, text=True)

    r = sweep("--grid", "seeds=")
    assert r.returncode == 2 and r.stderr.strip() == "error: --grid 'seeds=': give comma-separated values, e.g. seeds=0,1,2"
    r = sweep("--grid", "episodes=1,abc")
    err = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert err.startswith(f"error: --grid value 'episodes=abc' (config {CFG}): key 'episodes': invalid value 'abc'")
    assert err.count("key 'episodes'") == 1 and not list(tmp_path.iterdir())  # nothing ran


def test_seed_list_shortens_consecutive_seeds():
    from coopsim.platform.report import seed_list

    assert seed_list([3, 0, 1, 2, 7]) == "0-3,7"
    assert seed_list([0, 1, 5, 6, 7, 10]) == "0,1,5-7,10"
    assert seed_list([4]) == "4" and seed_list([]) == ""
