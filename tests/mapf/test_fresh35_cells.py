"""fresh35 F4: the MG-MAPF distance helpers refuse off-grid, fractional and mismatched cells with the ValueError of
``octile_distances`` / ``grid.distance_maps`` (naming the cell and the grid size) instead of wrapping an off-grid cell
to another row of the flattened grid or failing inside numpy/scipy."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.scenarios.mapf import grid, metrics
from coopsim.scenarios.mapf.loaders import octile_distances, octile_pair_distances, parse_map_lines
from coopsim.scenarios.mapf.sampling import sample_extra_goals

# the tester's good.map: 6x4, obstacles at x 2-3, y 1-2
GOOD = parse_map_lines(["type octile", "height 4", "width 6", "map", "......", "..@@..", "..@@..", "......"]).blocked
OUT = r"lies outside the 6x4 grid \(x in \[0, 6\), y in \[0, 4\)\)"


@pytest.mark.parametrize("cell", [[6, 0], [-1, 0], [0, 4], [0, -1]])
def test_octile_pair_distances_refuses_off_grid_cells(cell):
    # used to give 6.414 for (6, 0) (the distance from (0, 1)), 0 for (-1, 0) (the last cell, the goal) or IndexError
    with pytest.raises(ValueError, match=rf"start_xy\[0\] = \({cell[0]}, {cell[1]}\) {OUT}"):
        octile_pair_distances(GOOD, [cell], [[5, 3]])
    with pytest.raises(ValueError, match=rf"goal_xy\[0\] = \({cell[0]}, {cell[1]}\) {OUT}"):
        octile_pair_distances(GOOD, [[5, 3]], [cell])


def test_octile_pair_distances_checks_pairing_and_still_works():
    with pytest.raises(ValueError, match=r"start_xy and goal_xy must pair up.*2 start cell\(s\) and 1 goal cell\(s\)"):
        octile_pair_distances(GOOD, [[0, 0], [1, 0]], [[5, 3]])
    with pytest.raises(ValueError, match=r"max_length must hold one bound per pair, float \[1\]; got shape \(2,\)"):
        octile_pair_distances(GOOD, [[0, 0]], [[5, 3]], max_length=[1.0, 2.0])
    assert octile_pair_distances(GOOD, [[0, 0]], [[5, 3]]).tolist() == pytest.approx([5 + 2 ** 0.5 * 1 + 1])
    assert octile_pair_distances(GOOD, [[0.0, 0.0]], np.array([[5, 3]], np.int32)).tolist() == pytest.approx([7.414213])


def test_siblings_name_the_cell_and_grid_alike():
    with pytest.raises(ValueError, match=rf"sources_xy\[0\] = \(1, 7\) {OUT}"):
        octile_distances(GOOD, [[1, 7]])
    with pytest.raises(ValueError, match=rf"sources_xy\[1\] = \(6, 0\) {OUT}"):
        grid.distance_maps(GOOD, [[0, 0], [6, 0]])


def test_bfs_distances_refuse_off_grid_sources():
    # used to return the distances from (0, 1): x = W wrapped to the next row
    with pytest.raises(ValueError, match=rf"sources_xy\[0\] = \(6, 0\) {OUT}"):
        metrics.bfs_distances(GOOD, [[6, 0]])
    with pytest.raises(ValueError, match=rf"sources_xy\[0\] = \(6, 0\) {OUT}"):
        metrics.bfs_pair_distances(GOOD, [[6, 0]], [[0, 0]])
    with pytest.raises(ValueError, match=rf"targets_xy\[0, 1\] = \(0, 9\) {OUT}"):
        metrics.bfs_pair_distances(GOOD, [[0, 0]], [[[0, 1], [0, 9]]])
    with pytest.raises(ValueError, match=r"targets_xy must be \[M, T, 2\] with one row per source \(M = 1\); got shape "
                                         r"\(2, 1, 2\)"):
        metrics.bfs_pair_distances(GOOD, [[0, 0]], [[[0, 0]], [[1, 0]]])
    with pytest.raises(ValueError, match=r"sources_xy must be whole-number cells \(x, y\); sources_xy\[0\] = \(0.5, 0.0\)"):
        metrics.bfs_distances(GOOD, [[0.5, 0]])
    with pytest.raises(ValueError, match=r"blocked must be bool \[H, W\].*got shape \(3,\)"):
        metrics.bfs_distances(np.zeros(3, bool), [[0, 0]])
    assert metrics.bfs_pair_distances(GOOD, [[0, 0]], [[[5, 3], [0, 3]]]).tolist() == [[8.0, 3.0]]
    assert metrics.bfs_pair_distances(GOOD, [[0, 0]], [[5, 3]]).tolist() == [[8.0]]  # [M, 2]: one target each


def test_tour_lower_bound_refuses_off_grid_and_mismatched_cells():
    # used to fail inside scipy: "ValueError: indices out of range 0...N"
    with pytest.raises(ValueError, match=rf"goals_xy\[0, 0\] = \(6, 3\) {OUT}"):
        metrics.tour_lower_bound(GOOD, [[0, 0]], [[[6, 3], [0, 3]]], "free")
    with pytest.raises(ValueError, match=rf"starts_xy\[0\] = \(0, 4\) {OUT}"):
        metrics.tour_lower_bound(GOOD, [[0, 4]], [[[1, 3]]], "fixed")
    with pytest.raises(ValueError, match=r"goals_xy must be \[N, K, 2\] with one row per start \(N = 1\); got shape "
                                         r"\(2, 2, 2\)"):
        metrics.tour_lower_bound(GOOD, [[0, 0]], [[[1, 3], [0, 3]], [[1, 1], [0, 0]]], "free")
    assert metrics.tour_lower_bound(GOOD, [[0, 0]], [[[5, 3], [0, 3]]], "fixed").tolist() == [8 + 5]
    assert metrics.tour_lower_bound(GOOD, np.zeros((0, 2)), np.zeros((0, 2, 2)), "free").shape == (0,)


def test_sample_extra_goals_refuses_a_start_off_the_map():
    # used to return goals for a start off the map
    with pytest.raises(ValueError, match=rf"starts_xy\[0\] = \(7, 0\) {OUT}"):
        sample_extra_goals(GOOD, [[7, 0]], np.zeros((0, 2)), 1, np.random.default_rng(0))
