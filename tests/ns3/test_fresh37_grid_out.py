"""fresh37 F1, F12: benchmarks/ns3_oracle_grid.py's ``--out`` and inputs.

F1: ``--out`` equal to the results file it reads overwrote the experiment's results with the 1.4 kB table; any other
existing file was overwritten too. Now: the results file itself (also through ``..`` or a symlink), a folder (a
trailing ``/`` too, F12) and an existing file that is not a grid table of the script are refused, exit 2, one line
naming ``--out``, the path and what is valid; the file is left as it was. A grid table of the script is replaced.
F12: an evaluate results file is named as such, not "a compact copy". No ns-3 run: the table is stubbed.
"""
from __future__ import annotations

import json

import pytest

from bench_loader import load_benchmark
from coopsim.errors import run_script

RESULTS = {"writer": "coopsim.comm.ns3.experiment", "seeds_done": 1, "oracle": True, "demand_bps": 1e5,
           "config": {"scenario": {"num_agents": 3}},
           "runs": [{"channel_name": "ns3", "seed": 0, "sender": "ddacom", "series": {"delivered_bits": [[1.0]]}}]}
ROWS = [{"rates": 2, "estimator": "max", "safe_frac": 0.5, "ddacom": [0.9, 0.01]}]


@pytest.fixture
def grid(monkeypatch):
    g = load_benchmark("ns3_oracle_grid")
    monkeypatch.setattr(g, "table", lambda cfg, results, folder: [dict(r) for r in ROWS])
    return g


@pytest.fixture
def results(tmp_path):
    p = tmp_path / "res.json"
    p.write_text(json.dumps(RESULTS))
    return p


def _refused(grid, argv, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        run_script(grid.main, argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_out_equal_to_the_results_file_is_refused_and_the_file_kept(grid, results, tmp_path, capsys):
    before = results.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(results)
    (tmp_path / "sub").mkdir()
    for out in (str(results), str(tmp_path / "sub" / ".." / "res.json"), str(link)):
        err = _refused(grid, [str(results), "--oracle-cache", str(tmp_path / "c"), "--out", out], capsys)
        assert f"key '--out': {out} is the results file this command reads" in err
        assert "give --out a new file or a grid table this script wrote" in err
        assert results.read_bytes() == before


@pytest.mark.parametrize("content", ["some notes\n", json.dumps({"writer": "coopsim.agents.ddacom.evaluate",
                                                                   "seeds_done": 1, "runs": [], "args": {}}),
                                     json.dumps(RESULTS), json.dumps({"rows": [], "command": "other.py x"})])
def test_an_existing_file_that_is_not_a_grid_table_is_refused(grid, results, tmp_path, capsys, content):
    out = tmp_path / "other.json"
    out.write_text(content)
    err = _refused(grid, [str(results), "--oracle-cache", str(tmp_path / "c"), "--out", str(out)], capsys)
    assert f"key '--out': {out} exists and is not a grid table of benchmarks/ns3_oracle_grid.py" in err
    assert out.read_text() == content


def test_a_grid_table_of_the_script_is_replaced_and_a_new_file_written(grid, results, tmp_path, capsys):
    out = tmp_path / "grid.json"
    grid.main([str(results), "--oracle-cache", str(tmp_path / "c"), "--out", str(out)])  # a new file
    d = json.loads(out.read_text())
    assert d["rows"] == ROWS and d["command"].startswith("benchmarks/ns3_oracle_grid.py ")
    d["rows"] = []
    out.write_text(json.dumps(d))
    grid.main([str(results), "--oracle-cache", str(tmp_path / "c"), "--out", str(out)])  # replaced
    assert json.loads(out.read_text())["rows"] == ROWS
    assert f"wrote {out}" in capsys.readouterr().out


def test_a_folder_as_out_is_refused(grid, results, tmp_path, capsys):
    err = _refused(grid, [str(results), "--oracle-cache", str(tmp_path / "c"), "--out", str(tmp_path / "d") + "/"],
                   capsys)
    assert f"key '--out': {tmp_path / 'd'}/ ends with '/', so it names a folder" in err
    assert not (tmp_path / "d").exists()
    err = _refused(grid, [str(results), "--oracle-cache", str(tmp_path / "c"), "--out", str(tmp_path)], capsys)
    assert f"key '--out': {tmp_path} is a folder" in err


def test_an_evaluate_results_file_is_named_as_such_not_a_compact_copy(grid, tmp_path, capsys):
    ev = tmp_path / "ev.json"
    ev.write_text(json.dumps({"writer": "coopsim.agents.ddacom.evaluate", "seeds_done": 1, "args": {},
                              "runs": [{"channel_name": "ns3", "seed": 0, "sender": "ddacom"}]}))
    err = _refused(grid, [str(ev), "--oracle-cache", str(tmp_path / "c")], capsys)
    assert "is a results file of python -m coopsim.agents.ddacom.evaluate" in err and "compact copy" not in err
    assert "give a results JSON of python -m coopsim.comm.ns3.experiment (its --out)" in err
