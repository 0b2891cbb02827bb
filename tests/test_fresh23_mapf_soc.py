"""MG-MAPF ``soc_over_lb`` is defined on solved episodes only (nan when an episode is cut off at ``max_steps``).

An unfinished agent is charged ``max_steps`` in ``soc``; with a short cut-off that made SoC/LB fall below 1 (better
than optimal: 0.0199 with ``max_steps=1`` on random-32-32-10). MAPF papers report SoC and SoC/LB over solved
instances and the success rate beside them; the run summary now averages SoC/LB over the solved episodes.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from coopsim.platform.config import validate_config
from coopsim.platform.recorder import read_jsonl
from coopsim.platform.runner import run_config
from coopsim.platform.stats import summarize
from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mapf.instance import MAPFInstance

WAIT, UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3, 4


def corridor_core(max_steps: int, num_envs: int = 1, goal_order: str = "free") -> MGMAPFCore:
    """One agent on a free 1x6 corridor from (0, 0) to its single goal (5, 0): LB = 5."""
    inst = MAPFInstance(blocked=np.zeros((1, 6), bool), starts=np.array([[0, 0]], np.int32),
                        goals=np.array([[[5, 0]]], np.int32), goal_order=goal_order)
    core = MGMAPFCore.from_instance(inst, num_envs=num_envs, max_steps=max_steps)
    core.reset(seed=0)
    return core


def play(core: MGMAPFCore, *per_env_actions: list[int]) -> None:
    """Step every env with its own action list (one agent per env); a finished env's later actions are ignored."""
    for t in range(max(len(a) for a in per_env_actions)):
        core.step(np.array([[a[t] if t < len(a) else WAIT] for a in per_env_actions], dtype=np.int64))


def test_cut_off_episode_has_nan_ratio_not_below_one():
    core = corridor_core(max_steps=2)
    play(core, [RIGHT, RIGHT])                             # two of five steps, then truncated
    assert core.done.all()
    m = core.episode_metrics()[0]
    assert m["success"] == 0.0 and m["lb"] == 5.0
    assert m["soc"] == 2.0 and m["makespan"] == 2.0         # documented: the unfinished agent is charged max_steps
    assert math.isnan(m["soc_over_lb"])                     # was 2 / 5 = 0.4, better than optimal


def test_unfinished_episode_is_nan_even_with_large_max_steps():
    core = corridor_core(max_steps=8)
    play(core, [WAIT] * 8)                                  # SoC 8 > LB 5, still not a solution
    m = core.episode_metrics()[0]
    assert m["success"] == 0.0 and m["soc"] == 8.0 and math.isnan(m["soc_over_lb"])


def test_episode_in_progress_has_nan_ratio():
    core = corridor_core(max_steps=20)
    play(core, [RIGHT, RIGHT])
    assert not core.done.any()
    assert math.isnan(core.episode_metrics()[0]["soc_over_lb"])


@pytest.mark.parametrize("actions, soc", [([RIGHT] * 5, 5), ([RIGHT, WAIT, RIGHT, LEFT, RIGHT, RIGHT, RIGHT, RIGHT], 8)])
def test_solved_episode_has_its_exact_ratio_at_least_one(actions, soc):
    core = corridor_core(max_steps=20)
    play(core, actions)
    assert core.done.all()
    m = core.episode_metrics()[0]
    assert m["success"] == 1.0 and m["soc"] == soc and m["lb"] == 5.0
    assert m["soc_over_lb"] == soc / 5 and m["soc_over_lb"] >= 1.0


def test_batch_mixing_solved_and_cut_off_envs():
    core = corridor_core(max_steps=6, num_envs=2)
    play(core, [RIGHT] * 6, [WAIT] * 6)                      # env 0 finishes at step 5, env 1 never
    m0, m1 = core.episode_metrics()
    assert (m0["success"], m0["soc"], m0["soc_over_lb"]) == (1.0, 5.0, 1.0)
    assert (m1["success"], m1["soc"]) == (0.0, 6.0) and math.isnan(m1["soc_over_lb"])
    s = summarize([{"seed": e, "episode": 0, **m} for e, m in enumerate((m0, m1))])
    assert s["soc_over_lb"]["mean"] == 1.0 and s["soc_over_lb"]["n_episodes"] == 1
    assert s["soc"]["n_episodes"] == 2 and s["success"]["mean"] == 0.5


def test_shipped_map_cut_off_never_below_one():
    # the user's case: 64 agents on random-32-32-10 cut off after 1 step gave SoC/LB 0.0199
    core = MGMAPFCore(num_envs=2, map="random-32-32-10", num_agents=64, num_goals=3, max_steps=1)
    core.reset(seed=0)
    core.step(np.zeros((2, 64), dtype=np.int64))
    for m in core.episode_metrics():
        assert m["success"] == 0.0 and m["soc"] == 64.0 and m["lb"] > 64
        assert math.isnan(m["soc_over_lb"])


@pytest.mark.filterwarnings("ignore:mapf/prioritized-v0:RuntimeWarning")  # the planner warns of the cut-off seeds
def test_run_summary_averages_ratio_over_solved_seeds_only(tmp_path):
    # one agent, one goal (the planner's path is optimal, SoC = LB): LBs by seed 0..5 are 16, 5, 42, 21, 41, 27;
    # max_steps 30 cuts off seeds 2 and 4
    cfg = validate_config({
        "name": "mix", "out_dir": str(tmp_path), "seeds": [0, 1, 2, 3, 4, 5], "episodes": 1, "max_steps": 30,
        "scenario": {"id": "mapf/MGMAPF-v0", "params": {"map": "random-32-32-10", "num_agents": 1, "num_goals": 1}},
        "agents": {"id": "mapf/prioritized-v0"},
    })
    d = run_config(cfg, progress=False)
    rows = {r["seed"]: r for r in read_jsonl(d / "metrics.jsonl")}
    solved = sorted(s for s, r in rows.items() if r["success"] == 1.0)
    assert solved == [0, 1, 3, 5]
    for s, r in rows.items():
        if s in solved:
            assert r["soc_over_lb"] == r["soc"] / r["lb"] == 1.0
        else:
            assert r["soc"] == 30.0 and r["lb"] > 30 and r["soc_over_lb"] is None   # nan is written as null
    summary = json.loads((d / "summary.json").read_text())["metrics"]
    ratio = summary["soc_over_lb"]
    assert ratio["mean"] == 1.0 and ratio["ci95_low"] == 1.0 and ratio["ci95_high"] == 1.0
    assert ratio["n_episodes"] == 4 and ratio["n_seeds"] == 4 and sorted(ratio["per_seed"]) == ["0", "1", "3", "5"]
    assert summary["soc"]["n_episodes"] == 6 and summary["success"]["mean"] == pytest.approx(4 / 6)
