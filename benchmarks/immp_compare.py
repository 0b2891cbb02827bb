"""IMMP evaluation table (issue 4) from `coopsim run` / `coopsim sweep` run directories.

Reads every run directory under the given roots (``config.yaml`` for map, agents N, goals K, the agent id and
the policy checkpoint; ``metrics.jsonl`` for per-instance metrics keyed by seed = scen file). A learned
method's *training seed* is read from its checkpoint path (``.../seed-<s>/...``, the trainer's layout; the
shipped checkpoint counts as training seed 0); an instance is then a (training seed, scen file) pair, and
methods without a checkpoint (heuristics, the planner) are the same on every training seed. Per map and
(N, K) it prints:

* per method: instances run, solved, SoC/LB (mean and 95% CI, Student t over the *solved* instances:
  ``soc_over_lb`` is defined on solved episodes only; nan when none is solved) and makespan (over every instance,
  an unsolved one at ``max_steps``), SoC and excess SoC - LB on the instances that IMMP, decentralized PPO, PIBT
  and the prioritized planner (those run) all solved;
* the targets at 64 agents: IMMP's SoC reduction vs the decentralized PPO baseline on the instances both
  solve (per map, per training seed and pooled), IMMP's excess cost (SoC - LB) vs PIBT's, and the success
  rates; the mean reduction over maps per K.

It also writes ``immp_eval.png`` (SoC/LB, makespan and success vs agent count, a colour per method and a marker
per K, one column per map; learned methods' bars are 95% CIs over training seeds, as in the table) and
``immp_eval.json`` next to it, in ``--out``. ``--plot-only JSON`` redraws the figure from a written
immp_eval.json without reading any run.

With several training seeds it also prints, per learned method, each training seed's SoC/LB (mean over its
scen files, solved count) and the mean and 95% CI (Student t) of those per-seed means over training seeds, and
for each target the reduction per training seed and the mean and 95% CI over training seeds of the per-seed
means over maps. With one training seed these print the mean alone, ``(1 seed; no interval)``.

    .venv/bin/python benchmarks/immp_compare.py runs/immp4-eval runs/immp5-eval --out docs/immp
    .venv/bin/python benchmarks/immp_compare.py --plot-only docs/immp/immp_eval.json   # the figure alone
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


#: shown for a SoC/LB over no solved instance
DASH = "\u2014"


def fmt_ratio(x: float) -> str:
    """SoC/LB to 3 decimals, or an em dash when it is undefined (no solved instance: ``soc_over_lb`` is nan)."""
    return f"{x:.3f}" if np.isfinite(x) else DASH


def mean_ci(mean: float, half: float) -> str:
    """``mean±half`` in a 16-character column; the mean alone when the half-width is undefined (one solved value),
    an em dash when the mean is (none solved)."""
    if not np.isfinite(mean):
        return f"{DASH:>8s}{'':8s}"
    return f"{mean:8.3f}±{half:<7.3f}" if np.isfinite(half) else f"{mean:8.3f}{'':8s}"


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
                fin = sum(np.isfinite(v["soc_over_lb"]) for v in sd.values())   # seeds that solve an instance
                cell[m]["train_seeds_solving"] = int(fin)
                over = (f"{mean_ci(sm, sh)} ({fin} seeds)" if fin == len(sd) > 1 else
                        f"{fmt_ratio(sm):>8s} (1 seed; no interval)" if fin == len(sd) == 1 else
                        f"{mean_ci(sm, sh)} ({fin} of {len(sd)} seeds solve)")
                pts = "  ".join(f"s{t}:{fmt_ratio(v['soc_over_lb'])}({v['solved']}/{v['n']})" for t, v in sd.items())
            else:
                over, pts = f"{'-':>23s}", "(no policy: same on every training seed)"
            print(f"{m:24s} {solved:>3d}/{len(ms):<3d} {mean_ci(r, rh)} {mk:9.1f}±{mkh:<7.1f} {soc_c:12.1f} {exc_c:14.1f}  "
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


#: one colour per method of :data:`METHODS` (tab10 minus grey; any other method gets the next tab20 colour)
METHOD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
#: one marker per goal count K (filled for the first K, hollow for the others)
K_MARKERS = ["o", "s", "^", "D", "v"]
PLOT_NOTE = ("learned methods: mean over training seeds of each seed's mean over its scen files; bars: 95% Student-t "
             "CI over training seeds (as in the README table).\nMethods without a policy (PIBT, the planner): mean over "
             "scen files, no bar. SoC/LB over solved instances only: a cell where none is solved has no point, a\n"
             "learned method's point is over the training seeds that solve one (no bar when only one does). Intervals "
             "clipped to SoC/LB >= 1, makespan >= 0, success in [0, 1]")


def method_colour(m: str, others: list[str]) -> str:
    """The colour of method ``m``: its own in :data:`METHOD_COLOURS`, or a tab20 colour for a method not in
    :data:`METHODS` (``others``: those methods, sorted, so each gets a distinct one)."""
    if m in METHODS:
        return METHOD_COLOURS[METHODS.index(m) % len(METHOD_COLOURS)]
    import matplotlib

    return matplotlib.colormaps["tab20"]((2 * others.index(m) + 1) % 20)


def plot_points(cell: dict) -> dict:
    """``{metric: (mean, lower, upper)}`` of one table cell (a method at one map, N, K) for soc_over_lb,
    makespan and success: over training seeds (the per-seed means of ``per_train_seed``, Student-t 95% CI) for a
    learned method, else the mean over instances with no interval (lower = upper = mean); clipped to SoC/LB >= 1,
    makespan >= 0, success in [0, 1]."""
    from coopsim.platform.stats import t_half_width

    per = cell.get("per_train_seed") or {}
    out = {}
    for metric, lo, hi in (("soc_over_lb", 1.0, np.inf), ("makespan", 0.0, np.inf), ("success", 0.0, 1.0)):
        if len(per) >= 2:
            vals = [v["solved"] / max(v["n"], 1) if metric == "success" else v[metric] for v in per.values()]
            m, h = t_half_width(vals)
            h = 0.0 if not np.isfinite(h) else h
        else:
            m, h = float(cell[metric]), 0.0
        out[metric] = (m, float(np.clip(m - h, lo, hi)), float(np.clip(m + h, lo, hi)))
    return out


def plot(table: dict, path: Path) -> None:
    """Write the figure of ``table`` (:func:`table`'s result, or the ``"table"`` of immp_eval.json: cells keyed
    ``"<map>|<N>|<K>"``): one column per map; rows SoC/LB (log y, every method), SoC/LB zoomed to the methods that
    solve (<= 1.5), makespan and success, each against the agent count; a colour per method, a marker per K
    (filled for the first K, hollow for the others), bars as :func:`plot_points` says and the figure's subtitle
    states; the legend below the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import ScalarFormatter

    cells = {}
    for key, cell in table.items():
        mp, n, k = key.split("|")
        cells[(mp, int(n), int(k))] = cell
    maps = sorted({k[0] for k in cells})
    goals = sorted({k[2] for k in cells})
    methods = [m for m in METHODS if any(m in c for c in cells.values())]
    others = sorted({m for c in cells.values() for m in c} - set(METHODS))
    methods += others
    rows = (("soc_over_lb", "SoC / LB (log scale)"), ("soc_over_lb", "SoC / LB, zoom (1 to 1.5)"),
            ("makespan", "makespan (steps)"), ("success", "success rate"))
    fig, axes = plt.subplots(len(rows), len(maps), figsize=(4.6 * len(maps), 12), squeeze=False)
    for j, mp in enumerate(maps):
        for mi, m in enumerate(methods):
            for ki, kk in enumerate(goals):
                ns = sorted(n for (a, n, g), c in cells.items() if a == mp and g == kk and m in c)
                if not ns:
                    continue
                pts = [plot_points(cells[(mp, n, kk)][m]) for n in ns]
                # a small multiplicative x offset per method (and K) so bars at the same N do not cover each other
                off = 2 ** (0.035 * (mi - (len(methods) - 1) / 2) + 0.02 * ki)
                xs = [n * off for n in ns]
                colour = method_colour(m, others)
                for i, (metric, _) in enumerate(rows):
                    mean = np.array([p[metric][0] for p in pts])
                    err = np.array([[p[metric][0] - p[metric][1] for p in pts], [p[metric][2] - p[metric][0] for p in pts]])
                    axes[i, j].errorbar(xs, mean, yerr=err, color=colour, marker=K_MARKERS[ki % len(K_MARKERS)],
                                        mfc=colour if ki == 0 else "white", ms=5, capsize=2, lw=1.2 if ki == 0 else 0,
                                        elinewidth=1, linestyle="-" if ki == 0 else "none")
        axes[0, j].set_title(mp, fontsize=10)
        axes[0, j].set_yscale("log")
        axes[0, j].yaxis.set_major_formatter(ScalarFormatter())
        axes[0, j].yaxis.set_minor_formatter(ScalarFormatter())
        axes[1, j].set_ylim(0.98, 1.5)
        axes[3, j].set_ylim(-0.03, 1.03)
        axes[2, j].set_ylim(bottom=0)
        for i, (_, lab) in enumerate(rows):
            ax = axes[i, j]
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({k[1] for k in cells}))
            ax.set_xticklabels([str(n) for n in sorted({k[1] for k in cells})])
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel(lab)
        axes[-1, j].set_xlabel("agents (N)")
    handles = [Line2D([], [], color=method_colour(m, others), lw=1.5, label=m.split("/", 1)[-1]) for m in methods]
    for ki, kk in enumerate(goals):
        at = sorted({k[1] for k in cells if k[2] == kk})
        only = f" ({', '.join(map(str, at))} agents only)" if len(at) == 1 else ""
        handles.append(Line2D([], [], color="k", marker=K_MARKERS[ki % len(K_MARKERS)], mfc="k" if ki == 0 else "white",
                              linestyle="-" if ki == 0 else "none", label=f"K = {kk} goals{only}"))
    fig.suptitle("IMMP evaluation: SoC/LB, makespan and success against agent count (one column per map)",
                 fontsize=12)
    fig.text(0.5, 0.955, PLOT_NOTE, ha="center", va="top", fontsize=8, wrap=True)
    fig.legend(handles=handles, loc="lower center", ncol=6, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 0.93))
    atomic_savefig(fig, path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("roots", nargs="*", default=argparse.SUPPRESS,
                    help="folders holding run directories (none with --plot-only)")
    ap.add_argument("--out", default=None, help="folder for immp_eval.png / immp_eval.json (unset: print the tables only)")
    ap.add_argument("--plot-only", metavar="JSON", default=None,
                    help="redraw the figure from an immp_eval.json this script wrote (its \"table\"), without reading "
                         "any run: writes immp_eval.png in --out (unset: the JSON's folder); give no roots")
    a = ap.parse_args(argv)
    a.roots = getattr(a, "roots", [])
    if a.plot_only:
        if a.roots:
            ap.error("--plot-only reads the JSON alone; give no roots")
        src = Path(a.plot_only)
        if not src.is_file():
            ap.error(f"argument --plot-only: {src} is not a file; give an immp_eval.json this script wrote")
        try:
            tab = json.loads(src.read_text())["table"]
        except (ValueError, KeyError, TypeError):
            ap.error(f"argument --plot-only: {src} is not an immp_eval.json (a JSON object with a \"table\")")
        out = Path(a.out) if a.out else src.parent
        check_writable("--out", str(out), folder=True)
        out.mkdir(parents=True, exist_ok=True)
        plot(tab, out / "immp_eval.png")
        print(f"wrote {out / 'immp_eval.png'} from {src}")
        return
    if not a.roots:
        ap.error("give folders holding run directories (or --plot-only JSON)")
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
        plot(tab, out / "immp_eval.png")
        print(f"\nwrote {out / 'immp_eval.json'} and {out / 'immp_eval.png'}")


if __name__ == "__main__":
    run_script(main)
