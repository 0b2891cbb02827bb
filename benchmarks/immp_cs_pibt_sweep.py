"""CS-PIBT preference-order settings of IMMP's low level on held-out scen files (issue 4).

Runs ``mapf/immp-v0`` (shipped checkpoint unless ``--checkpoint``) with CS-PIBT and each given order setting on
random-32-32-10, room-32-32-4 and warehouse-10-20-10-2-1 at 64 agents and 3 goals, scen files 11-20 by default
(``--first-seed 10``; the evaluation uses scen files 1-5), and prints the mean SoC/LB (an unsolved instance
counts ``max_steps`` for each unfinished agent) and the solved count per map. Settings:

* ``sorted``: actions by decreasing policy probability (the published CS-PIBT order);
* ``sampled:T``: a sample without replacement from softmax(logits / T) for every agent, every step;
* ``adaptive:P:F:T``: sorted while an agent progresses, sampled at temperature T once it made no progress on
  its cost-to-go for P steps; finished agents ``F`` = sorted / sampled.

    .venv/bin/python benchmarks/immp_cs_pibt_sweep.py [--first-seed 10] [--instances 10] sorted sampled:1 adaptive:16:sorted:3
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from coopsim.platform import registry
from coopsim.platform.runner import play_episode
from coopsim.scenarios.mapf import MGMAPFCore

MAPS = ("random-32-32-10", "room-32-32-4", "warehouse-10-20-10-2-1")


def params_of(setting: str) -> dict:
    f = setting.split(":")
    kw: dict = {"cs_pibt": True, "cs_order": f[0]}
    if f[0] == "sampled":
        kw["cs_temperature"] = float(f[1]) if len(f) > 1 else 1.0
    elif f[0] == "adaptive":
        kw.update(cs_patience=int(f[1]), cs_finished=f[2], cs_temperature=float(f[3]) if len(f) > 3 else 1.0)
    elif f[0] != "sorted":
        raise SystemExit(f"unknown setting {setting!r}")
    return kw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("settings", nargs="+")
    ap.add_argument("--first-seed", type=int, default=10)
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--goals", type=int, default=3)
    ap.add_argument("--checkpoint", default="shipped")
    ap.add_argument("--agent", default="mapf/immp-v0")
    a = ap.parse_args()
    torch.set_num_threads(1)
    seeds = range(a.first_seed, a.first_seed + a.instances)
    print(f"{a.agent} ({a.checkpoint}) with CS-PIBT, {a.agents} agents, {a.goals} goals, scen files {seeds.start + 1}-{seeds.stop}")
    for setting in a.settings:
        cells = []
        for mp in MAPS:
            r = []
            for seed in seeds:
                core = MGMAPFCore(1, map=mp, num_agents=a.agents, num_goals=a.goals, obs_radius=3, goal_order="free",
                                  conflicts="block", max_steps=768 if mp.startswith("warehouse") else 384)
                agent = registry.make_component("agent", a.agent, core, checkpoint=a.checkpoint, **params_of(setting))
                m = play_episode(core, agent, seed)
                r.append((m["soc_over_lb"], m["success"]))
            r = np.array(r)
            cells.append(f"{mp} {r[:, 0].mean():.3f} ({int(r[:, 1].sum())}/{len(r)})")
        print(f"{setting:24s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    from coopsim.errors import run_script

    run_script(main)
