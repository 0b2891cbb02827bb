"""IMMP evaluation table (issue 4) from `coopsim run` / `coopsim sweep` run directories.

Reads every run directory under the given roots (``config.yaml`` for map, agents N, goals K and the agent
id; ``metrics.jsonl`` for per-instance metrics keyed by seed = scen file), and prints, per map and (N, K):

* per method: instances run, solved, success rate, SoC/LB and makespan (mean and 95% CI, Student t over
  instances), SoC on the instances *every* compared method solved (with their count);
* the targets at 64 agents: IMMP's SoC reduction vs the decentralized PPO baseline on commonly solved
  instances (per map and mean), and IMMP's excess cost (SoC - LB) vs PIBT's.

It also writes ``immp_eval.png`` (SoC/LB, makespan and success vs agent count, one line per method, one
column per map) and ``immp_eval.json`` next to it, in ``--out``.

    .venv/bin/python benchmarks/immp_compare.py runs/immp-eval --out docs/immp
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

METHODS = ["mapf/immp-v0", "mapf/immp-nocong-v0", "mapf/immp-nointent-v0", "mapf/dppo-v0", "mapf/pibt-v0",
           "mapf/greedy-waits-v0", "mapf/prioritized-v0"]


def ci95(x) -> tuple[float, float]:
    x = np.asarray(x, float)
    if len(x) == 0:
        return float("nan"), float("nan")
    if len(x) == 1:
        return float(x[0]), float("nan")
    h = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return float(x.mean()), float(h)


def load(roots: list[str]) -> dict:
    """``{(map, N, K): {agent_id: {seed: metrics}}}`` (later runs of the same cell overwrite earlier ones)."""
    data: dict = defaultdict(lambda: defaultdict(dict))
    dirs = sorted({p.parent for r in roots for p in Path(r).rglob("metrics.jsonl")}, key=lambda p: p.stat().st_mtime)
    for d in dirs:
        cfg = yaml.safe_load((d / "config.yaml").read_text())
        sp = cfg["scenario"]["params"]
        key = (sp["map"], int(sp["num_agents"]), int(sp["num_goals"]))
        for line in (d / "metrics.jsonl").read_text().splitlines():
            if line.strip():
                m = json.loads(line)
                data[key][cfg["agents"]["id"]][int(m["episode_seed"])] = m
    return data


def table(data: dict) -> dict:
    out = {}
    for key in sorted(data):
        mp, n, k = key
        runs = data[key]
        methods = [m for m in METHODS if m in runs] + sorted(set(runs) - set(METHODS))
        seeds = sorted(set.intersection(*[set(runs[m]) for m in methods]))
        common = [s for s in seeds if all(runs[m][s]["success"] == 1.0 for m in methods)]
        print(f"\n== {mp}  N={n}  K={k}  instances={len(seeds)}  solved by all={len(common)}")
        print(f"{'method':24s} {'solved':>7s} {'SoC/LB':>16s} {'makespan':>16s} {'SoC(common)':>12s} {'SoC-LB(common)':>14s}")
        cell = {}
        for m in methods:
            ms = [runs[m][s] for s in seeds]
            solved = int(sum(x["success"] for x in ms))
            r, rh = ci95([x["soc_over_lb"] for x in ms])
            mk, mkh = ci95([x["makespan"] for x in ms])
            soc_c = float(np.mean([runs[m][s]["soc"] for s in common])) if common else float("nan")
            exc_c = float(np.mean([runs[m][s]["soc"] - runs[m][s]["lb"] for s in common])) if common else float("nan")
            cell[m] = dict(n=len(ms), solved=solved, success=solved / max(len(ms), 1), soc_over_lb=r, soc_over_lb_ci=rh,
                           makespan=mk, makespan_ci=mkh, soc_common=soc_c, excess_common=exc_c, n_common=len(common))
            print(f"{m:24s} {solved:>3d}/{len(ms):<3d} {r:8.3f}±{rh:<7.3f} {mk:8.1f}±{mkh:<7.1f} {soc_c:12.1f} {exc_c:14.1f}")
        out[f"{mp}|{n}|{k}"] = cell
    return out


def targets(data: dict) -> dict:
    """SoC reduction vs dppo and excess reduction vs PIBT at 64 agents, on instances both solve."""
    res: dict = {}
    print("\n== targets at 64 agents (pairwise: instances both methods solve)")
    for (mp, n, k), runs in sorted(data.items()):
        if n != 64 or "mapf/immp-v0" not in runs:
            continue
        row = {}
        for base, what in (("mapf/dppo-v0", "soc"), ("mapf/pibt-v0", "excess")):
            if base not in runs:
                continue
            a, b = runs["mapf/immp-v0"], runs[base]
            both = [s for s in set(a) & set(b) if a[s]["success"] == 1.0 and b[s]["success"] == 1.0]
            if not both:
                row[f"{what}_vs_{base}"] = None
                continue
            if what == "soc":
                va, vb = np.mean([a[s]["soc"] for s in both]), np.mean([b[s]["soc"] for s in both])
            else:
                va = np.mean([a[s]["soc"] - a[s]["lb"] for s in both])
                vb = np.mean([b[s]["soc"] - b[s]["lb"] for s in both])
            row[f"{what}_vs_{base}"] = dict(reduction=float(1 - va / vb), immp=float(va), base=float(vb), n=len(both),
                                            success_immp=float(np.mean([a[s]["success"] for s in a])),
                                            success_base=float(np.mean([b[s]["success"] for s in b])))
        res[f"{mp}|K={k}"] = row
        for kk, v in row.items():
            if v is None:
                print(f"{mp:24s} K={k} {kk:28s} no instance solved by both")
            else:
                print(f"{mp:24s} K={k} {kk:28s} reduction {100 * v['reduction']:6.1f}%  (IMMP {v['immp']:.1f} vs {v['base']:.1f}, "
                      f"n={v['n']}, success {v['success_immp']:.2f} vs {v['success_base']:.2f})")
    return res


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    maps = sorted({k[0] for k in data})
    goals = sorted({k[2] for k in data})
    fig, axes = plt.subplots(3, len(maps), figsize=(5 * len(maps), 10), squeeze=False)
    for j, mp in enumerate(maps):
        for kk in goals:
            methods = sorted({m for (a, n, g), r in data.items() if a == mp and g == kk for m in r})
            for m in methods:
                ns = sorted(n for (a, n, g), r in data.items() if a == mp and g == kk and m in r)
                if not ns:
                    continue
                for i, (metric, lab) in enumerate((("soc_over_lb", "SoC/LB"), ("makespan", "makespan"), ("success", "success"))):
                    ys, hs = zip(*[ci95([x[metric] for x in data[(mp, n, kk)][m].values()]) for n in ns])
                    axes[i, j].errorbar(ns, ys, yerr=np.nan_to_num(hs), marker="o", capsize=3,
                                        label=f"{m.split('/')[1]} K={kk}", linestyle="-" if kk == goals[0] else "--")
                    axes[i, j].set_ylabel(lab)
        axes[0, j].set_title(mp)
        axes[-1, j].set_xlabel("agents")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", help="folders holding run directories")
    ap.add_argument("--out", default=None, help="folder for immp_eval.png / immp_eval.json")
    a = ap.parse_args()
    data = load(a.roots)
    tab = table(data)
    tgt = targets(data)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "immp_eval.json").write_text(json.dumps({"table": tab, "targets": tgt}, indent=1, sort_keys=True))
        plot(data, out / "immp_eval.png")
        print(f"\nwrote {out / 'immp_eval.json'} and {out / 'immp_eval.png'}")


if __name__ == "__main__":
    main()
