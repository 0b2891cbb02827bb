"""fresh35b N5 and N6: the cell checks name the value a user gave (not its int64 wrap) and the Python instance path
names the agents and the cell of a shared start, as the scen-file path does."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.errors import ConfigError
from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mapf.loaders import octile_pair_distances, parse_map_lines

GOOD = parse_map_lines(["type octile", "height 4", "width 6", "map", "......", "..@@..", "..@@..", "......"]).blocked


def test_a_uint64_cell_beyond_int64_is_named_as_given():
    # used to say "start_xy[0] = (-9223372036854775807, 0) lies outside ..." (the value after the int64 cast)
    with pytest.raises(ValueError, match=r"start_xy\[0, 0\] = 9223372036854775809 lies outside any grid \(dtype uint64"):
        octile_pair_distances(GOOD, np.array([[2 ** 63 + 1, 0]], np.uint64), [[5, 3]])
    # an in-range uint64 cell still works (exact octile distance around the block)
    assert octile_pair_distances(GOOD, np.array([[0, 0]], np.uint64), [[5, 3]]).tolist() == pytest.approx(
        [6 + 2 ** 0.5])


def test_a_python_int_too_large_for_int64_is_named_not_its_dtype():
    # used to say "must be integer cells (x, y); got dtype object"
    with pytest.raises(ValueError, match=r"goal_xy\[0, 1\] = 1000000000000000000000000000000 lies outside any grid "
                                         r"\(too large for int64"):
        octile_pair_distances(GOOD, [[0, 0]], [[0, 10 ** 30]])


def test_from_instance_duplicate_start_names_agents_and_cell(tiny):
    blocked = tiny.grid("""
        ....
        ....
    """)
    with pytest.raises(ConfigError, match=r"agents 1 and 3 both start at \(2, 1\)"):
        MGMAPFCore.from_instance(tiny.instance(blocked, [[0, 0], [2, 1], [1, 0], [2, 1]],
                                               [[[3, 0]], [[3, 1]], [[0, 1]], [[1, 1]]]))
