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


SPLIT_MAP = "type octile\nheight 3\nwidth 5\nmap\n..@..\n..@..\n..@..\n"
SPLIT_SCEN = "version 1\n0\tsplit.map\t5\t3\t0\t0\t4\t2\t1.0\n0\tsplit.map\t5\t3\t4\t0\t0\t2\t1.0\n"


def _record(fn):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the core itself must warn once, not Python's once-per-location registry
        out = fn()
    return out, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_unreachable_scen_goal_warns_once_naming_file_line_agent_and_cells(tmp_path):
    m = _write(tmp_path, "split.map", SPLIT_MAP)
    s = _write(tmp_path, "split.scen", SPLIT_SCEN)
    core = MGMAPFCore(map=str(m), scen=str(s), num_agents=2, num_goals=1, max_steps=20)
    _, msgs = _record(lambda: [core.reset(seed=seed) for seed in (0, 1, 2)])
    assert len(msgs) == 1, msgs  # once per scen file, not per reset
    msg = msgs[0]
    assert msg.startswith(f"{s}, line 2: agent 0's goal (4, 2) is not reachable from its start (0, 0) on map 'split': "
                          "walls separate them (the row's optimal_length column says 1, which no path achieves); so is "
                          "the goal of agent 1 (line 3). No policy can finish these 2 agents: every episode on this scen "
                          "file runs to max_steps with success 0"), msg
    assert "its lb (the lower bound on soc) is undefined (inf), so lb and soc_over_lb are left out" in msg
    assert core.lower_bound(0) == float("inf")
    m0 = core.episode_metrics()[0]
    assert m0["lb"] == float("inf") and m0["soc_over_lb"] != m0["soc_over_lb"]


def test_unreachable_later_row_suggests_fewer_agents(tmp_path):
    m = _write(tmp_path, "split.map", SPLIT_MAP)
    ok_row = "0\tsplit.map\t5\t3\t0\t1\t1\t2\t1.0\n"
    s = _write(tmp_path, "late.scen", "version 1\n" + ok_row + SPLIT_SCEN.split("\n", 1)[1])
    _, msgs = _record(lambda: MGMAPFCore(map=str(m), scen=str(s), num_agents=3, num_goals=1).reset(seed=0))
    assert len(msgs) == 1 and msgs[0].startswith(f"{s}, line 3: agent 1's goal (4, 2)")
    assert "so is the goal of agent 2 (line 4)" in msgs[0]
    assert msgs[0].endswith("fix the rows of the scen file, or use only the agents before it "
                            "(scenario.params.num_agents <= 1)")
    _, msgs = _record(lambda: MGMAPFCore(map=str(m), scen=str(s), num_agents=1, num_goals=1).reset(seed=0))
    assert msgs == []  # the rows in use are fine


def test_unreachable_instance_goal_warns_at_from_instance():
    from coopsim.scenarios.mapf.instance import MAPFInstance

    blocked = np.zeros((3, 5), bool)
    blocked[:, 2] = True
    inst = MAPFInstance(blocked=blocked, starts=np.array([[0, 0], [4, 0]]), goals=np.array([[[1, 1], [4, 2]], [[3, 1], [0, 2]]]),
                        goal_order="free", map_name="split")
    core, msgs = _record(lambda: MGMAPFCore.from_instance(inst, max_steps=8))
    assert msgs == ["MGMAPFCore.from_instance (map 'split'): agent 0's goal 1 (4, 2) is not reachable from its start "
                    "(0, 0): walls separate them; so is a goal of agent 1. No policy can finish these 2 agents: every "
                    "episode on this instance runs to max_steps with success 0, and its lb (the lower bound on soc) is "
                    "undefined (inf), so lb and soc_over_lb are left out of the results"]
    _, msgs = _record(lambda: [core.reset(seed=0), core.reset(seed=1)])
    assert msgs == []  # not again per reset


def test_reachable_instances_do_not_warn():
    _, msgs = _record(lambda: MGMAPFCore(num_agents=8, num_goals=2).reset(seed=0))
    assert msgs == []
    _, msgs = _record(lambda: MGMAPFCore(map="random", num_agents=8, num_goals=2).reset(seed=0))
    assert msgs == []
