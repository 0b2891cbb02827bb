"""fresh35 F7: ``benchmarks/mapf_planners.py`` fails (exit 2) when nothing it was asked for could be measured, and
refuses an unreadable ``--maps`` file before the first plan; it used to print ``skipped:`` rows and exit 0."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench_loader import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "mapf_planners.py"
GOOD_MAP = "type octile\nheight 4\nwidth 6\nmap\n......\n..@@..\n..@@..\n......\n"


def _run(*args, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_unreadable_map_is_refused_before_the_table(tmp_path):
    bad = tmp_path / "char.map"
    bad.write_text("type octile\nheight 2\nwidth 3\nmap\n...\n.#.\n")
    r = _run("--maps", str(bad), cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.strip() == (f"error: key '--maps': {str(bad)!r} cannot be read: {bad}, line 6: unknown map "
                                f"character '#' at x=1; valid: passable '.GS', blocked '@OTW'")


def test_every_combination_skipped_exits_2(tmp_path):
    r = _run("--maps", "random-32-32-10", "--agents", "500", "--goals", "1", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "skipped: key 'num_agents': num_agents=500 exceeds the 461 rows" in r.stdout
    assert r.stderr.strip() == ("error: the only (map, agents, goals, seed) combination asked for was skipped (reasons "
                                "above), so nothing was planned; change --maps, --agents or --goals")


def test_some_combinations_skipped_exit_0_with_a_note(tmp_path, capsys):
    m = tmp_path / "good.map"
    m.write_text(GOOD_MAP)
    mod = load_benchmark("mapf_planners", "mapf_planners_fresh35")
    mod.main(["--maps", str(m), "--agents", "3", "--goals", "1", "9"])  # K=9 cannot fit 3 agents in 20 cells
    out, err = capsys.readouterr()
    assert "skipped: key 'num_goals'" in out and out.count(" yes") == 1
    assert err.strip() == "note: 1 of 2 combinations was skipped (reasons above)"
