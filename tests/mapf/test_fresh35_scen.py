"""fresh35 F5/F11: what a scen file's rows say about an instance is reported with the file, the line, the agent and
the cells (a duplicate start, a goal that walls separate from its start)."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.errors import ConfigError
from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mapf.loaders import load_scen

GOOD_MAP = "type octile\nheight 4\nwidth 6\nmap\n......\n..@@..\n..@@..\n......\n"
DUP_SCEN = "version 1\n0\tgood.map\t6\t4\t0\t0\t5\t3\t1.0\n0\tgood.map\t6\t4\t0\t0\t0\t3\t1.0\n"


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_duplicate_start_names_file_both_lines_and_cell(tmp_path):
    m = _write(tmp_path, "good.map", GOOD_MAP)
    s = _write(tmp_path, "dup.scen", DUP_SCEN)
    with pytest.raises(ConfigError) as info:
        MGMAPFCore(map=str(m), scen=str(s), num_agents=2, num_goals=1).reset(seed=0)
    msg = str(info.value)
    # used to be: "two of the first 2 rows of the scen file share a start cell"
    assert f"{s}, lines 2 and 3: agents 0 and 1 both start at (0, 0)" in msg
    assert "use fewer agents (num_agents <= 1) or fix the file" in msg and info.value.key == "scen"
    MGMAPFCore(map=str(m), scen=str(s), num_agents=1, num_goals=1).reset(seed=0)  # one agent: fine


def test_duplicate_start_lines_count_blank_lines(tmp_path):
    m = _write(tmp_path, "good.map", GOOD_MAP)
    rows = ["0\tgood.map\t6\t4\t0\t0\t5\t3\t1.0", "0\tgood.map\t6\t4\t1\t0\t0\t3\t1.0", "0\tgood.map\t6\t4\t0\t0\t5\t0\t1.0"]
    s = _write(tmp_path, "gap.scen", "version 1\n" + rows[0] + "\n\n" + rows[1] + "\n\n" + rows[2] + "\n")
    assert load_scen(s).line.tolist() == [2, 4, 6]
    with pytest.raises(ConfigError, match=r"gap\.scen, lines 2 and 6: agents 0 and 2 both start at \(0, 0\)"):
        MGMAPFCore(map=str(m), scen=str(s), num_agents=3, num_goals=1).reset(seed=0)
