"""IMMP / decentralized PPO learning curves (issue 4) from `coopsim train` run directories.

Reads every ``seed-*/metrics.csv`` under the given roots and prints, per method (the training config's
agent id) and bin of env steps, the mean over training seeds of ``reward/extrinsic`` (the MG-MAPF reward per
alive agent-step: -1 while the agent has goals left, so ``-reward`` is the share of agents still travelling,
on the generated 17-32 training maps), the policy entropy and, for IMMP, the intent module's training
accuracy; plus the wall time of each run.

    .venv/bin/python benchmarks/immp_learning_curve.py runs/immp3 [--bin 2560]
"""
from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from coopsim.errors import ConfigError, int_at_least, run_script


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", help="folders holding `coopsim train` run directories")
    ap.add_argument("--bin", type=int_at_least(1), default=2560, help="env steps per bin (>= 1)")
    a = ap.parse_args(argv)
    for r in a.roots:  # a mistyped folder used to print an empty table
        if not Path(r).is_dir():
            ap.error(f"argument roots: {r} is not a folder; give folders holding `coopsim train` run directories")
    found = {r: sorted(Path(r).rglob("metrics.csv")) for r in a.roots}
    if not any(found.values()):
        ap.error(f"argument roots: no metrics.csv under {', '.join(a.roots)}; give folders holding `coopsim train` "
                 "run directories (<run>/config.yaml, <run>/seed-<s>/metrics.csv)")
    curves: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    walls: dict = defaultdict(list)
    last: dict = defaultdict(dict)  # [agent id][bin] -> the largest env_steps logged in the bin (its label's end)
    for r in a.roots:
        for f in found[r]:
            if not (f.parent.parent / "config.yaml").is_file():
                raise ConfigError(f"{f} has no config.yaml two folders up (a `coopsim train` run directory has "
                                  "<run>/config.yaml and <run>/seed-<s>/metrics.csv)", key="roots", value=r)
            cfg = yaml.safe_load((f.parent.parent / "config.yaml").read_text())
            m = cfg["agents"]["id"]
            rows = list(csv.DictReader(f.open()))
            if not rows:
                continue
            walls[m].append((f.parent.name, float(rows[-1]["time/wall_s"]), int(rows[-1]["env_steps"])))
            per: dict = defaultdict(lambda: defaultdict(list))
            for row in rows:
                steps = int(row["env_steps"])
                b = (steps - 1) // a.bin
                last[m][b] = max(last[m].get(b, 0), steps)
                for k in ("reward/extrinsic", "loss/entropy", "aux/IntentLoss/accuracy"):
                    if row.get(k):
                        per[b][k].append(float(row[k]))
            for b, d in per.items():
                for k, v in d.items():
                    curves[m][b][k].append(float(np.mean(v)))
    for m in sorted(curves):
        print(f"\n== {m}: runs {', '.join(f'{s} {w:.0f} s ({n} env steps)' for s, w, n in walls[m])}")
        print(f"{'env steps':>14s} {'reward/extrinsic':>17s} {'entropy':>8s} {'intent acc':>10s}  seeds")
        for b in sorted(curves[m]):
            d = curves[m][b]
            acc = d.get("aux/IntentLoss/accuracy")
            # the bin's steps as far as the data reaches (a run of 2,048 steps is 1-2048, not 1-2560)
            label = f"{b * a.bin + 1}-{last[m][b]}"
            print(f"{label:>14s} {np.mean(d['reward/extrinsic']):17.3f} "
                  f"{np.mean(d['loss/entropy']):8.3f} {np.mean(acc) if acc else float('nan'):10.3f}  "
                  f"{len(d['reward/extrinsic'])}")


if __name__ == "__main__":
    run_script(main)
