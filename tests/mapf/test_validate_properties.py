"""Property test (hypothesis): the vectorized validator against a plain loop over steps and agent pairs."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coopsim.scenarios.mapf.instance import MAPFInstance
from coopsim.scenarios.mapf.validate import validate_plan


def loop_counts(blocked, starts, paths):
    h, w = blocked.shape
    t1, n, _ = paths.shape
    c = dict(start=0, off_map=0, obstacle=0, teleport=0, vertex=0, swap=0)
    firsts = {}
    for i in range(n):
        if tuple(paths[0, i]) != tuple(starts[i]):
            c["start"] += 1
    for t in range(t1):
        for i in range(n):
            x, y = paths[t, i]
            if not (0 <= x < w and 0 <= y < h):
                c["off_map"] += 1
                firsts.setdefault("off_map", t)
            elif blocked[y, x]:
                c["obstacle"] += 1
                firsts.setdefault("obstacle", t)
            if t > 0 and abs(x - paths[t - 1, i, 0]) + abs(y - paths[t - 1, i, 1]) > 1:
                c["teleport"] += 1
                firsts.setdefault("teleport", t)
            for j in range(i + 1, n):
                if tuple(paths[t, i]) == tuple(paths[t, j]):
                    c["vertex"] += 1
                    firsts.setdefault("vertex", t)
                if (t > 0 and tuple(paths[t, i]) == tuple(paths[t - 1, j]) and tuple(paths[t, j]) == tuple(paths[t - 1, i])
                        and tuple(paths[t, i]) != tuple(paths[t, j])):
                    c["swap"] += 1
                    firsts.setdefault("swap", t)
    return c, firsts


@st.composite
def plans(draw):
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    blocked = np.array(draw(st.lists(st.booleans(), min_size=h * w, max_size=h * w)), dtype=bool).reshape(h, w)
    n = draw(st.integers(1, 5))
    t1 = draw(st.integers(1, 8))
    # random walks with occasional jumps, off-map excursions included
    start = np.array(draw(st.lists(st.tuples(st.integers(-1, w), st.integers(-1, h)), min_size=n, max_size=n)))
    steps = np.array(draw(st.lists(st.sampled_from([(0, 0), (0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (0, 2)]),
                                   min_size=(t1 - 1) * n, max_size=(t1 - 1) * n))).reshape(t1 - 1, n, 2)
    paths = np.concatenate([start[None], start[None] + np.cumsum(steps, axis=0)]) if t1 > 1 else start[None]
    starts = start if draw(st.booleans()) else np.roll(start, 1, axis=0)
    goals = np.array(draw(st.lists(st.tuples(st.integers(0, w - 1), st.integers(0, h - 1)), min_size=n, max_size=n)))
    return blocked, starts, goals, paths.astype(np.int64)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_validator_matches_loop_reference(case):
    blocked, starts, goals, paths = case
    inst = MAPFInstance(blocked=blocked, starts=starts, goals=goals[:, None, :], goal_order="free")
    rep = validate_plan(inst, paths)
    expect, firsts = loop_counts(blocked, starts, paths)
    assert {k: rep.counts[k] for k in expect} == expect
    assert rep.ok == (sum(expect.values()) == 0)
    for kind, t in firsts.items():
        assert rep.by_kind(kind).step == t
    for i in range(len(starts)):
        hits = [t for t in range(len(paths)) if tuple(paths[t, i]) == tuple(goals[i])]
        assert rep.goal_reached_at[i, 0] == (hits[0] if hits else -1)
