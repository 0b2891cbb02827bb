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
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from coopsim.errors import ConfigError, int_at_least, run_script

REWARD, ENTROPY, ACC = "reward/extrinsic", "loss/entropy", "aux/IntentLoss/accuracy"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
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
    first: dict = defaultdict(dict)  # [agent id][bin] -> the first env step its logged iterations cover (its start)
    skipped = []
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
            if not any(k in rows[0] for k in (REWARD, ENTROPY)) or "env_steps" not in rows[0]:
                skipped.append(f)  # e.g. a tabular safety learner's run: no PPO curve to show
                continue
            wall = rows[-1].get("time/wall_s")
            # the run and seed (``<run>/seed-0``), not the seed alone: several runs of one method are told apart
            walls[m].append((f"{f.parent.parent.name}/{f.parent.name}", float(wall) if wall else float("nan"),
                             int(rows[-1]["env_steps"])))
            per: dict = defaultdict(lambda: defaultdict(list))
            prev = 0
            for row in rows:
                steps = int(row["env_steps"])
                b = (steps - 1) // a.bin
                last[m][b] = max(last[m].get(b, 0), steps)
                first[m][b] = min(first[m].get(b, prev + 1), prev + 1)  # the iteration covers prev+1 .. steps
                prev = steps
                for k in (REWARD, ENTROPY, ACC):
                    if row.get(k):
                        per[b][k].append(float(row[k]))
            for b, d in per.items():
                for k, v in d.items():
                    curves[m][b][k].append(float(np.mean(v)))
    if skipped:
        print(f"note: skipped {len(skipped)} metrics.csv without {REWARD} or {ENTROPY} (not a PPO-trained run), "
              f"e.g. {skipped[0]}", file=sys.stderr)
    if not curves:
        raise ConfigError(f"no metrics.csv under {', '.join(a.roots)} has {REWARD} or {ENTROPY}; give folders "
                          "holding `coopsim train` runs of a PPO agent (mapf/immp-v0, mapf/dppo-v0, ppo/*)",
                          key="roots", value=", ".join(a.roots))
    for m in sorted(curves):
        runs = walls[m]
        print(f"\n== {m}: {len(runs)} run{'s' if len(runs) != 1 else ''}: "
              f"{', '.join(f'{s} {w:.0f} s ({n} env steps)' for s, w, n in runs)}")
        # the intent accuracy column only for a method that logs it (IMMP); without it a column of nan
        has_acc = any(curves[m][b].get(ACC) for b in curves[m])
        print(f"{'env steps':>14s} {REWARD:>17s} {'entropy':>8s}" + (f" {'intent acc':>10s}" if has_acc else "")
              + "  seeds")
        for b in sorted(curves[m]):
            d = curves[m][b]
            # the env steps the bin's logged iterations cover (a run of 2,048 steps is 1-2048, not 1-2560; with
            # 256-step iterations and --bin 1000 the bins are 1-768, 769-1792, 1793-2048)
            label = f"{first[m][b]}-{last[m][b]}"
            acc = f" {_mean(d.get(ACC)):>10s}" if has_acc else ""
            print(f"{label:>14s} {_mean(d.get(REWARD)):>17s} {_mean(d.get(ENTROPY)):>8s}{acc}  "
                  f"{max(len(d.get(REWARD, [])), len(d.get(ENTROPY, [])))}")


def _mean(v) -> str:
    """``v``'s mean to 3 decimals, ``-`` when nothing was logged."""
    return f"{float(np.mean(v)):.3f}" if v else "-"

if __name__ == "__main__":
    run_script(main)
