"""IMMP high-level weights with a fixed low level (issue 4): PIBT following IMMP's goal orders and paths.

The low level is ``mapf/pibt-v0`` (deterministic for a seed), so differences come from the high level only:
``nearest`` (the baselines' nearest-neighbour order, unweighted paths), ``nocong`` (optimal tours, unweighted
paths), and balanced orders / congestion-weighted paths with the given ``order_weight`` / ``path_weight``.
Prints SoC/LB per instance, the mean and the solved count, per map, at 64 agents and 3 goals.
Scen files 11-15 (``--first-seed 10``) are held out from the evaluation (scen files 1-5).

    .venv/bin/python benchmarks/immp_highlevel_sweep.py [--first-seed 10] [--weights 0.1:0.02 0.3:0]
"""
from __future__ import annotations

import argparse

import numpy as np

from coopsim.agents.immp.highlevel import HighLevelParams, ScenarioPlanner
from coopsim.platform import registry
from coopsim.platform.runner import play_episode
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--first-seed", type=int, default=10)
    ap.add_argument("--instances", type=int, default=5)
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--goals", type=int, default=3)
    ap.add_argument("--weights", nargs="*", default=["1:0.5", "0.3:0", "0.3:0.02", "0.2:0.02", "0.1:0.02"],
                    help="order_weight:path_weight pairs")
    a = ap.parse_args()
    seeds = range(a.first_seed, a.first_seed + a.instances)
    rows = [("nearest", None), ("nocong", HighLevelParams(order_weight=0.0, path_weight=0.0))]
    for w in a.weights:
        ow, pw = (float(x) for x in w.split(":"))
        rows.append((f"order {ow:g} path {pw:g}", HighLevelParams(order_weight=ow, path_weight=pw)))
    print(f"PIBT low level, {a.agents} agents, {a.goals} goals, scen files {seeds.start + 1}-{seeds.stop}")
    for mp in MAPS:
        for name, hl in rows:
            r = run(mp, hl, seeds, a.agents, a.goals)
            print(f"{mp:24s} {name:22s} SoC/LB {r[:, 0].mean():.3f}  solved {int(r[:, 1].sum())}/{len(r)}  "
                  f"per instance {np.round(r[:, 0], 3).tolist()}")


if __name__ == "__main__":
    from coopsim.errors import run_script

    run_script(main)
