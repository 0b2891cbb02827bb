"""IMMP high-level weights with a fixed low level (issue 4): PIBT following IMMP's goal orders and paths.

The low level is ``mapf/pibt-v0`` (deterministic for a seed), so differences come from the high level only:
``nearest`` (the baselines' nearest-neighbour order, unweighted paths), ``nocong`` (optimal tours, unweighted
paths), and balanced orders / congestion-weighted paths with the given ``order_weight`` / ``path_weight``.
Prints SoC/LB per instance, the mean over the solved instances (``soc_over_lb`` is defined on solved episodes
only) and the solved count, per map, at 64 agents and 3 goals.
Scen files 11-15 (``--first-seed 10``) are held out from the evaluation (scen files 1-5).

    .venv/bin/python benchmarks/immp_highlevel_sweep.py [--first-seed 10] [--weights 0.1:0.02 0.3:0]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mapf_args import check_maps  # noqa: E402
from coopsim.agents.immp.highlevel import HighLevelParams, ScenarioPlanner
from coopsim.errors import int_at_least, run_script
from coopsim.platform import registry
from coopsim.platform.runner import play_episode
from coopsim.platform.stats import t_half_width
from coopsim.scenarios.mapf import MGMAPFCore

MAPS = ("random-32-32-10", "room-32-32-4", "warehouse-10-20-10-2-1")


def run(mp: str, hl: HighLevelParams | None, seeds: range, n: int, k: int) -> np.ndarray:
    out = []
    for seed in seeds:
        core = MGMAPFCore(1, map=mp, num_agents=n, num_goals=k, obs_radius=3, goal_order="free",
                          max_steps=768 if mp.startswith("warehouse") else 384)
        agent = registry.make_component("agent", "mapf/pibt-v0", core)
        if hl is not None:
            agent.hl = ScenarioPlanner(core, hl)
        m = play_episode(core, agent, seed)
        out.append((m["soc_over_lb"], m["success"]))
    return np.array(out)


def weight_pair(text: str) -> tuple[float, float]:
    """An ``argparse`` ``type=`` for ``order_weight:path_weight`` (two numbers >= 0, e.g. ``0.3:0.02``)."""
    parts = text.split(":")
    try:
        ow, pw = (float(x) for x in parts)
    except ValueError:  # not two parts, or not numbers
        ow = pw = float("nan")
    if not (ow >= 0 and pw >= 0 and np.isfinite(ow) and np.isfinite(pw)):
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: order_weight:path_weight, two numbers >= 0 "
                                         "(e.g. 0.3:0.02), is required")
    return ow, pw


class Weights(list):
    """The ``--weights`` default, shown by ``--help`` as typed (``1:0.5 0.3:0 ...``)."""

    def __str__(self) -> str:
        return " ".join(f"{ow:g}:{pw:g}" for ow, pw in self)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--first-seed", type=int_at_least(0), default=10,
                    help="episode seed of the first instance (seed s reads scen file s+1); the default, 10 with 5 "
                         "instances, is scen files 11-15, held out from the evaluation (scen files 1-5)")
    ap.add_argument("--instances", type=int_at_least(1), default=5, help="instances (seeds) per map (>= 1)")
    ap.add_argument("--agents", type=int_at_least(1), default=64, help="agents per instance (>= 1)")
    ap.add_argument("--goals", type=int_at_least(1), default=3, help="goals per agent (>= 1)")
    ap.add_argument("--weights", nargs="*", type=weight_pair, metavar="OW:PW",
                    default=Weights([(1.0, 0.5), (0.3, 0.0), (0.3, 0.02), (0.2, 0.02), (0.1, 0.02)]),
                    help="order_weight:path_weight pairs of IMMP's high level, each a row after 'nearest' and 'nocong'")
    a = ap.parse_args(argv)
    check_maps(MAPS, a.agents, a.goals)
    seeds = range(a.first_seed, a.first_seed + a.instances)
    rows = [("nearest", None), ("nocong", HighLevelParams(order_weight=0.0, path_weight=0.0))]
    for ow, pw in a.weights:
        rows.append((f"order {ow:g} path {pw:g}", HighLevelParams(order_weight=ow, path_weight=pw)))
    print(f"PIBT low level, {a.agents} agents, {a.goals} goals, scen files {seeds.start + 1}-{seeds.stop}")
    for mp in MAPS:
        for name, hl in rows:
            r = run(mp, hl, seeds, a.agents, a.goals)
            print(f"{mp:24s} {name:22s} SoC/LB {t_half_width(r[:, 0])[0]:.3f}  solved {int(r[:, 1].sum())}/{len(r)}  "
                  f"per instance {np.round(r[:, 0], 3).tolist()}")


if __name__ == "__main__":
    run_script(main)
