"""IMMP evaluation table (issue 4) from `coopsim run` / `coopsim sweep` run directories.

Reads every run directory under the given roots (``config.yaml`` for map, agents N, goals K, the agent id and
the policy checkpoint; ``metrics.jsonl`` for per-instance metrics keyed by seed = scen file). A learned
method's *training seed* is read from its checkpoint path (``.../seed-<s>/...``, the trainer's layout; the
shipped checkpoint counts as training seed 0); an instance is then a (training seed, scen file) pair, and
methods without a checkpoint (heuristics, the planner) are the same on every training seed. Per map and
(N, K) it prints:

* per method: instances run, solved, SoC/LB and makespan (mean and 95% CI, Student t over instances; an
  unsolved instance counts ``max_steps`` for every unfinished agent), SoC and excess SoC - LB on the
  instances that IMMP, decentralized PPO, PIBT and the prioritized planner (those run) all solved;
* the targets at 64 agents: IMMP's SoC reduction vs the decentralized PPO baseline on the instances both
  solve (per map, per training seed and pooled), IMMP's excess cost (SoC - LB) vs PIBT's, and the success
  rates; the mean reduction over maps per K.

It also writes ``immp_eval.png`` (SoC/LB, makespan and success vs agent count, one line per method, one
column per map) and ``immp_eval.json`` next to it, in ``--out``.

With several training seeds it also prints, per learned method, each training seed's SoC/LB (mean over its
scen files, solved count) and the mean and 95% CI (Student t) of those per-seed means over training seeds, and
for each target the reduction per training seed and the mean and 95% CI over training seeds of the per-seed
means over maps. With one training seed these print the mean alone, ``(1 seed; no interval)``.

    .venv/bin/python benchmarks/immp_compare.py runs/immp4-eval runs/immp5-eval --out docs/immp
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by a test rather than run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_venv import check_writable  # noqa: E402

from coopsim.errors import ConfigError, run_script  # noqa: E402
from coopsim.platform.recorder import atomic_savefig, atomic_write_json  # noqa: E402
from coopsim.platform.stats import t_half_width  # noqa: E402

METHODS = ["mapf/immp-v0", "mapf/immp-v0-nocspibt", "mapf/immp-nocong-v0", "mapf/immp-nointent-v0", "mapf/dppo-v0",
           "mapf/dppo-v0+cspibt", "mapf/pibt-v0", "mapf/greedy-waits-v0", "mapf/prioritized-v0"]
#: the low-level decision rule each learned variant uses by default (``agents.params.cs_pibt``)
CS_DEFAULT = {"mapf/dppo-v0": False}
#: methods whose commonly solved instances define the SoC(common) columns (ablations and greedy-waits are
#: shown on those instances only if they solve all of them)
CORE = ["mapf/immp-v0", "mapf/dppo-v0", "mapf/pibt-v0", "mapf/prioritized-v0"]


def ci95(x) -> tuple[float, float]:
    """Mean and 95% Student-t half-width over seeds (:func:`coopsim.platform.stats.t_half_width`)."""
    return t_half_width(x)


def plural(n: int, word: str) -> str:
    """``1 seed``, ``2 seeds``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def over_seeds(mean: float, half: float, n: int, fmt: str, unit: str = "", detail: str = "") -> str:
    """``mean ± half (95% CI, n seeds; detail)``; with one seed the mean alone, ``mean (1 seed; no interval;
    detail)`` (a Student-t interval needs two or more values: its half-width would be nan)."""
    more = f"; {detail}" if detail else ""
    if n < 2:
        return f"{mean:{fmt}}{unit} (1 seed; no interval{more})"
    return f"{mean:{fmt}}{unit} ± {half:{fmt}}{unit} (95% CI, {plural(n, 'seed')}{more})"


def train_seed(cfg: dict):
    """Training seed of a run's policy: ``seed-<s>`` in its checkpoint path, 0 for 'shipped', None without one."""
    ck = ((cfg.get("agents") or {}).get("params") or {}).get("checkpoint")
    if ck is None:
        return None
    m = re.search(r"seed-(\d+)", str(ck))
    return int(m.group(1)) if m else 0


def method(cfg: dict) -> str:
    """Row label: the agent id, with ``-nocspibt`` / ``+cspibt`` when ``agents.params.cs_pibt`` departs from the
    variant's default (IMMP variants: CS-PIBT on; ``mapf/dppo-v0``: off)."""
    aid = cfg["agents"]["id"]
    cs = ((cfg.get("agents") or {}).get("params") or {}).get("cs_pibt")
    if cs is None or not aid.startswith(("mapf/immp", "mapf/dppo")) or bool(cs) == CS_DEFAULT.get(aid, True):
        return aid
    return aid + ("+cspibt" if cs else "-nocspibt")


def load(roots: list[str]) -> dict:
    """``{(map, N, K): {agent_id: {(train_seed, scen_seed): metrics}}}`` (later runs of a cell overwrite earlier ones).

    Runs of other scenarios (a general ``runs/`` folder mixes them) are skipped, with one ``note:`` line on stderr
    naming how many and an example; a scenario param a MAPF run's config leaves out takes the
    ``mapf/MGMAPF-v0`` default.

    Raises:
        ConfigError: a run directory (a folder with ``metrics.jsonl``) without ``config.yaml``, or no MG-MAPF run
            under ``roots``.
    """
    from coopsim.scenarios.mapf.core import MGMAPFParams

    defaults = {k: f.default for k, f in MGMAPFParams.model_fields.items()}
    data: dict = defaultdict(lambda: defaultdict(dict))
    dirs = sorted({p.parent for r in roots for p in Path(r).rglob("metrics.jsonl")}, key=lambda p: p.stat().st_mtime)
    skipped = []
    for d in dirs:
        if not (d / "config.yaml").is_file():
            raise ConfigError(f"{d / 'metrics.jsonl'} has no config.yaml beside it (a `coopsim run` run directory has "
                              "both)", key="roots", value=str(d))
        try:
            cfg = yaml.safe_load((d / "config.yaml").read_text())
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise ConfigError(f"{d / 'config.yaml'} is not a readable YAML file ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''})", key="roots", value=str(d)) from None
        sc = cfg.get("scenario") if isinstance(cfg, dict) else None
        sid = sc.get("id") if isinstance(sc, dict) else None
        sp = (sc.get("params") if isinstance(sc, dict) else None) or {}
        if not isinstance(sp, dict) or not isinstance((cfg.get("agents") or {}).get("id"), str) or (
                not str(sid).startswith("mapf/") if sid is not None else "map" not in sp):
            skipped.append((d, sid))
            continue
        sp = {**defaults, **sp}
        key = (sp["map"], int(sp["num_agents"]), int(sp["num_goals"]))
        ts = train_seed(cfg)
        for line in (d / "metrics.jsonl").read_text().splitlines():
            if line.strip():
                m = json.loads(line)
                data[key][method(cfg)][(ts, int(m["episode_seed"]))] = m
    if skipped:
        d, sid = skipped[0]
        what = f"scenario {sid}" if sid is not None else "no MG-MAPF scenario"
        if not data:
            raise ConfigError(f"no MG-MAPF (mapf/*) run under {', '.join(map(str, roots))}: {plural(len(skipped), 'run')} "
                              f"of other scenarios (e.g. {d}: {what}); give folders holding `coopsim run` / "
                              "`coopsim sweep` runs of mapf/MGMAPF-v0", key="roots", value=", ".join(map(str, roots)))
        print(f"note: skipped {plural(len(skipped), 'run')} not of an MG-MAPF (mapf/*) scenario (e.g. {d}: {what})",
              file=sys.stderr)
    return data


def instances(runs: dict, m: str, tseeds: list) -> dict:
    """Method ``m``'s metrics per instance (train seed, scen); runs without a training seed cover every seed."""
    out = {}
    for (ts, sc), v in runs[m].items():
        for t in (tseeds if ts is None else [ts]):
            out[(t, sc)] = v
    return out


def _tseeds(runs: dict) -> list:
    ts = sorted({t for r in runs.values() for (t, _) in r if t is not None})
    return ts or [None]


def table(data: dict) -> dict:
    out = {}
    for key in sorted(data):
        mp, n, k = key
        runs = data[key]
        ts = _tseeds(runs)
        methods = [m for m in METHODS if m in runs] + sorted(set(runs) - set(METHODS))
        inst = {m: instances(runs, m, ts) for m in methods}
        full = max(len(v) for v in inst.values())
        covered = [m for m in methods if len(inst[m]) == full and m in CORE] or [m for m in methods if len(inst[m]) == full]
        keys = sorted(set.intersection(*[set(inst[m]) for m in covered]), key=str)
        common = [i for i in keys if all(inst[m][i]["success"] == 1.0 for m in covered)]
        print(f"\n== {mp}  N={n}  K={k}  training seeds={ts}  instances={len(keys)}  solved by all={len(common)}")
        print(f"{'method':24s} {'solved':>7s} {'SoC/LB (95% CI)':>17s} {'makespan (95% CI)':>18s} {'SoC(common)':>12s} "
              f"{'SoC-LB(common)':>14s}  {'SoC/LB over train seeds':>23s}  per train seed: SoC/LB (solved)")
        cell = {}
        for m in methods:
            # statistics over distinct runs: a method without training seeds counts each scen file once
            ms = list(inst[m].values()) if any(t is not None for t, _ in runs[m]) else list(runs[m].values())
            solved = int(sum(x["success"] for x in ms))
            r, rh = ci95([x["soc_over_lb"] for x in ms])
            mk, mkh = ci95([x["makespan"] for x in ms])
            on = common if all(i in inst[m] and inst[m][i]["success"] == 1.0 for i in common) else []
            soc_c = float(np.mean([inst[m][i]["soc"] for i in on])) if on else float("nan")
            exc_c = float(np.mean([inst[m][i]["soc"] - inst[m][i]["lb"] for i in on])) if on else float("nan")
            cell[m] = dict(n=len(ms), solved=solved, success=solved / max(len(ms), 1), soc_over_lb=r, soc_over_lb_ci=rh,
                           makespan=mk, makespan_ci=mkh, soc_common=soc_c, excess_common=exc_c, n_common=len(on))
            # a learned method: per-training-seed means (over its scen files) and their mean and 95% CI over seeds
            mts = sorted({t for t, _ in runs[m] if t is not None})
            per = {t: [v for (tt, _), v in runs[m].items() if tt == t] for t in mts}
            sd = {str(t): dict(soc_over_lb=t_half_width([x["soc_over_lb"] for x in v])[0],  # solved only
                               makespan=float(np.mean([x["makespan"] for x in v])),
                               solved=int(sum(x["success"] for x in v)), n=len(v)) for t, v in per.items()}
            if sd:
                cell[m]["per_train_seed"] = sd
                sm, sh = ci95([v["soc_over_lb"] for v in sd.values()])
                cell[m]["soc_over_lb_over_train_seeds"], cell[m]["soc_over_lb_over_train_seeds_ci"] = sm, sh
                over = (f"{sm:8.3f}±{sh:<7.3f} ({len(sd)} seeds)" if len(sd) > 1 else
                        f"{sm:8.3f} (1 seed; no interval)")
                pts = "  ".join(f"s{t}:{v['soc_over_lb']:.3f}({v['solved']}/{v['n']})" for t, v in sd.items())
            else:
                over, pts = f"{'-':>23s}", "(no policy: same on every training seed)"
            print(f"{m:24s} {solved:>3d}/{len(ms):<3d} {r:8.3f}±{rh:<7.3f} {mk:9.1f}±{mkh:<7.1f} {soc_c:12.1f} {exc_c:14.1f}  "
                  f"{over:>23s}  {pts}")
        out[f"{mp}|{n}|{k}"] = cell
    return out


def _pair(a: dict, b: dict, what: str, keys=None) -> dict | None:
    both = [i for i in (keys if keys is not None else set(a) & set(b)) if i in a and i in b
            and a[i]["success"] == 1.0 and b[i]["success"] == 1.0]
    if not both:
        return None
    if what == "soc":
        va, vb = np.mean([a[i]["soc"] for i in both]), np.mean([b[i]["soc"] for i in both])
    else:
        va = np.mean([a[i]["soc"] - a[i]["lb"] for i in both])
        vb = np.mean([b[i]["soc"] - b[i]["lb"] for i in both])
    return dict(reduction=float(1 - va / vb), immp=float(va), base=float(vb), n=len(both))


def _every(a: dict, b: dict, what: str, keys) -> dict:
    """Reduction over every instance in ``keys`` (an unsolved one at max_steps for each unfinished agent)."""
    va = np.mean([a[i]["soc"] - (a[i]["lb"] if what == "excess" else 0) for i in keys])
    vb = np.mean([b[i]["soc"] - (b[i]["lb"] if what == "excess" else 0) for i in keys])
    return dict(reduction=float(1 - va / vb), immp=float(va), base=float(vb), n=len(keys),
                success_immp=float(np.mean([a[i]["success"] for i in keys])),
                success_base=float(np.mean([b[i]["success"] for i in keys])))


def targets(data: dict) -> dict:
    """SoC reduction vs dppo and excess reduction vs PIBT at 64 agents, on instances both solve."""
    res: dict = {}
    print("\n== targets at 64 agents (pairwise: instances = (training seed, scen) both methods solve)")
    for (mp, n, k), runs in sorted(data.items()):
        if n != 64 or "mapf/immp-v0" not in runs:
            continue
        ts = _tseeds(runs)
        a = instances(runs, "mapf/immp-v0", ts)
        row = {}
        for base, what in (("mapf/dppo-v0", "soc"), ("mapf/dppo-v0+cspibt", "soc"), ("mapf/pibt-v0", "excess")):
            if base not in runs:
                continue
            b = instances(runs, base, ts)
            keys = set(a) & set(b)
            r = _pair(a, b, what)
            # every instance, an unsolved one at max_steps for each unfinished agent (secondary, no common set needed)
            every = _every(a, b, what, keys)
            every["per_train_seed"] = {str(t): _every(a, b, what, [i for i in keys if i[0] == t]) for t in ts
                                       if any(i[0] == t for i in keys)}
            if r is not None:
                r["success_immp"], r["success_base"] = every["success_immp"], every["success_base"]
                r["per_train_seed"] = {str(t): _pair(a, b, what, [i for i in keys if i[0] == t]) for t in ts
                                       if str(t) in every["per_train_seed"]}
                for t, p in r["per_train_seed"].items():
                    if p is not None:
                        p["success_immp"] = every["per_train_seed"][t]["success_immp"]
                        p["success_base"] = every["per_train_seed"][t]["success_base"]
                red = [p["reduction"] for p in r["per_train_seed"].values() if p is not None]
                r["over_train_seeds"] = dict(zip(("mean", "ci"), ci95(red)), n_seeds=len(red))
                r["all_instances"] = every
            row[f"{what}_vs_{base}"] = r
            row[f"{what}_vs_{base}_all_instances"] = every
        res[f"{mp}|K={k}"] = row
        for kk, v in row.items():
            if kk.endswith("_all_instances"):
                red = [p["reduction"] for p in v["per_train_seed"].values()]
                v["over_train_seeds"] = dict(zip(("mean", "ci"), ci95(red)), n_seeds=len(red))
                per = "  ".join(f"s{t}:{100 * p['reduction']:.0f}%" for t, p in v["per_train_seed"].items())
                print(f"{mp:24s} K={k} {kk:24s} reduction {100 * v['reduction']:6.1f}%  (IMMP {v['immp']:.1f} vs "
                      f"{v['base']:.1f}, n={v['n']} incl. unsolved at max_steps, success {v['success_immp']:.2f} vs "
                      f"{v['success_base']:.2f}; per training seed {per})")
            elif v is None:
                print(f"{mp:24s} K={k} {kk:24s} no instance solved by both")
            else:
                per = "  ".join(f"s{t}:" + ("n/a" if p is None else f"{100 * p['reduction']:.0f}%")
                                for t, p in v["per_train_seed"].items())
                print(f"{mp:24s} K={k} {kk:24s} reduction {100 * v['reduction']:6.1f}%  (IMMP {v['immp']:.1f} vs "
                      f"{v['base']:.1f}, n={v['n']}, success {v['success_immp']:.2f} vs {v['success_base']:.2f}; "
                      f"per training seed {per})")
    summary: dict = {}
    for k in sorted({int(x.split("=")[1]) for x in res}):
        for what in ("soc_vs_mapf/dppo-v0", "soc_vs_mapf/dppo-v0+cspibt", "excess_vs_mapf/pibt-v0",
                     "soc_vs_mapf/dppo-v0_all_instances", "excess_vs_mapf/pibt-v0_all_instances"):
            vals = [(x, v.get(what)) for x, v in res.items() if x.endswith(f"K={k}") and what in v]
            red = [v["reduction"] for _, v in vals if v]
            miss = [x.split("|")[0] for x, v in vals if not v]
            print(f"mean over maps K={k} {what}: {100 * np.mean(red):.1f}% over {plural(len(red), 'map')}"
                  + (f", lowest map {100 * min(red):.1f}%" if red else "")
                  + (f" (no common solved instance on {', '.join(miss)})" if miss else "") if red else
                  f"mean over maps K={k} {what}: no map with a common solved instance")
            # per training seed: the mean over the maps where that seed has a common solved instance; then mean and
            # 95% CI (Student t) of those per-seed means over training seeds
            seeds = sorted({t for _, v in vals if v for t in v["per_train_seed"]}, key=int)
            by = {}
            for t in seeds:
                rs = [v["per_train_seed"][t]["reduction"] for _, v in vals
                      if v and v["per_train_seed"].get(t) is not None]
                if rs:
                    by[t] = dict(mean=float(np.mean(rs)), n_maps=len(rs), lowest=float(min(rs)))
            if by:
                mm, hh = ci95([v["mean"] for v in by.values()])
                summary.setdefault(f"mean_over_maps|K={k}", {})[what] = dict(per_train_seed=by, mean=mm, ci=hh)
                per = "  ".join(f"s{t}: {100 * v['mean']:.1f}% over {plural(v['n_maps'], 'map')}, lowest "
                                f"{100 * v['lowest']:.1f}%" for t, v in by.items())
                print(f"    over training seeds: {over_seeds(100 * mm, 100 * hh, len(by), '.1f', '%', per)}")
    res.update(summary)
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
    atomic_savefig(fig, path, dpi=90)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", help="folders holding run directories")
    ap.add_argument("--out", default=None, help="folder for immp_eval.png / immp_eval.json")
    a = ap.parse_args(argv)
    for r in a.roots:  # a mistyped folder used to print an empty table
        if not Path(r).is_dir():
            ap.error(f"argument roots: {r} is not a folder; give folders holding `coopsim run` / `coopsim sweep` "
                     "run directories")
    if not any(next(Path(r).rglob("metrics.jsonl"), None) for r in a.roots):
        ap.error(f"argument roots: no metrics.jsonl under {', '.join(a.roots)}; give folders holding `coopsim run` / "
                 "`coopsim sweep` run directories (<run>/config.yaml, <run>/metrics.jsonl)")
    if a.out:
        check_writable("--out", a.out, folder=True)  # before the tables, not after them
    data = load(a.roots)
    tab = table(data)
    tgt = targets(data)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "immp_eval.json", {"table": tab, "targets": tgt}, indent=1, sort_keys=True)
        plot(data, out / "immp_eval.png")
        print(f"\nwrote {out / 'immp_eval.json'} and {out / 'immp_eval.png'}")


if __name__ == "__main__":
    run_script(main)
