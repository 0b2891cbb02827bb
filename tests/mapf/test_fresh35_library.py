"""fresh35 F7: MG-MAPF library functions refuse what they would otherwise silently misread (an unknown goal order,
fractional cells, a bool scen index, an out-of-range confidence)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from coopsim.agents.mapf_baselines import plan_prioritized
from coopsim.scenarios.mapf.validate import goal_visits

BLOCKED = np.zeros((4, 6), bool)
STARTS = np.array([[0, 0], [1, 0]])
GOALS = np.array([[[5, 3]], [[4, 3]]])


def test_goal_visits_refuses_an_unknown_order_like_tour_lower_bound():
    paths = np.zeros((3, 2, 2), int)
    # used to treat "any" as "fixed"
    with pytest.raises(ValueError, match=r"^goal_order must be 'fixed' or 'free'; got 'any'$"):
        goal_visits(paths, GOALS, "any")
    assert goal_visits(paths, GOALS, "free").shape == (2, 1)


def test_plan_prioritized_refuses_fractional_cells():
    # used to truncate 0.7 to 0 and plan from another cell than asked
    with pytest.raises(ValueError, match=r"^starts_xy must be whole-number cells \(x, y\); starts_xy\[0\] = \(0\.7, 0\.7\) "
                                         r"is not \(dtype float64; a fraction would be cut to another cell\)$"):
        plan_prioritized(BLOCKED, STARTS + 0.7, GOALS)
    with pytest.raises(ValueError, match=r"^goals_xy must be whole-number cells \(x, y\); goals_xy\[1, 0\] = \(4\.0, 2\.5\)"):
        plan_prioritized(BLOCKED, STARTS, GOALS + np.array([0, 0.0]) + np.array([[[0, 0]], [[0, -0.5]]]))
    whole = plan_prioritized(BLOCKED, STARTS.astype(float), GOALS.astype(float))  # whole-number floats are cells
    assert whole.failed.sum() == 0
    assert (whole.paths == plan_prioritized(BLOCKED, STARTS, GOALS).paths).all()


@pytest.mark.parametrize("confidence", [1.5, 1, 0, -0.1, float("nan"), True, "0.9"])
def test_t_interval_refuses_a_confidence_outside_0_1(confidence):
    from coopsim.platform import stats

    # used to return (2.0, nan, nan) for 1.5 and a zero-width interval for 0
    with pytest.raises(ValueError, match=r"^confidence must be a probability strictly between 0 and 1, e\.g\. 0\.95 for "
                                         rf"a 95% interval; got {re.escape(repr(confidence))}$"):
        stats.t_interval([1, 2, 3], confidence=confidence)
    with pytest.raises(ValueError, match=r"^confidence must be"):
        stats.t_half_width([1, 2, 3], confidence)


def test_t_interval_percentage_hint_and_valid_values():
    from coopsim.platform import stats

    with pytest.raises(ValueError, match=r"got 95 \(a percentage\? give 0\.95 for 95%\)$"):
        stats.t_interval([1, 2, 3], confidence=95)
    mean, lo, hi = stats.t_interval([1, 2, 3], confidence=0.95)
    assert mean == 2.0 and lo == pytest.approx(2 - 2.4841377) and hi == pytest.approx(2 + 2.4841377)
    assert stats.t_interval([1, 2, 3], confidence=np.float32(0.5))[1] < 2.0


def test_resolve_scen_refuses_bools_and_indices_below_1():
    from coopsim.errors import ConfigError
    from coopsim.scenarios.mapf.loaders import load_map, resolve_map, resolve_scen

    md = load_map(resolve_map("random-32-32-10"))
    # used to resolve True to scen 1
    with pytest.raises(ConfigError, match=r"^key 'scen': scen must be an index 1\.\.25 of a shipped scen file or a path "
                                          r"to a \.scen file; got True \(bool\)$"):
        resolve_scen(md, True)
    with pytest.raises(ConfigError, match=r"^key 'scen': scen index -1 is out of range: the shipped scen files of map "
                                          r"'random-32-32-10' are numbered from 1"):
        resolve_scen(md, -1)  # used to look for a file 'random-32-32-10-random--1.scen'
    with pytest.raises(ConfigError, match=r"got 3\.5 \(float\)$"):
        resolve_scen(md, 3.5)
    assert resolve_scen(md, np.int64(3)).name == "random-32-32-10-random-3.scen"


@pytest.mark.parametrize("value, text", [
    (3.5, "scen must be an integer index 1..25 of a shipped scen file or a path to a .scen file, not a float (3.5)"),
    ([1, 2], "scen must be an integer index 1..25 of a shipped scen file or a path to a .scen file, not a list ([1, 2])"),
    (-1, "scen index -1 is out of range: the shipped scen files of a map are numbered 1..25"),
])
def test_scen_param_errors_name_the_key_not_the_union_branch(value, text):
    from coopsim.errors import ConfigError
    from coopsim.scenarios.mapf.core import MGMAPFCore

    with pytest.raises(ConfigError) as info:
        MGMAPFCore(scen=value)
    # used to be "key 'scen.int'" (pydantic's union branch) for 3.5 and [1, 2]
    assert info.value.key == "scen" and "scen.int" not in str(info.value)
    assert text in str(info.value)
    assert MGMAPFCore(scen=2.0, num_agents=4, num_goals=1).params.scen == 2  # a whole number as YAML may give it
