"""How the ns-3 safe-rate oracle's grid and estimator move a sender's utilization (docs/ns3.md, oracle section).

docs/ns3.md, "The oracle's grid and estimator", has the results and why.

The ns-3 oracle runs every rate of its grid once (:func:`coopsim.comm.oracle.safe_rate_sweep`); since 2026-12-07
its cache keeps those runs. This script reads them back for a results file of ``python -m
coopsim.comm.ns3.experiment`` (the experiment's settings, as that run read them, come from the file itself) and,
for its grid and every coarser one inside it (every 2nd, 4th and 8th rate, while at least 2 rates are left), reads
the safe rate with both estimators of :func:`coopsim.comm.oracle.window_safe_rate`:

- ``max``: the highest rate whose own loss over ``[t, t + 10)`` is at most 0.3 %;
- ``isotonic``: the same cut after the window loss is fitted non-decreasing in the rate.

It prints, per (grid, estimator), the mean safe rate as a fraction of demand and each sender's utilization (mean
and 95 % Student-t interval over seeds) from the file's ns-3 runs. A row whose value keeps moving as the grid is refined has not converged:
with one ns-3 run per rate, ``max`` picks rates that are lossless by luck, more of them on a finer grid.

    .venv/bin/python benchmarks/ns3_oracle_grid.py runs/ns3-ddacom-smooth.json

Needs the oracle cache the experiment filled (``--oracle-cache``, default ``runs/ns3-oracle-cache``) for every
seed of the results file; exits 2 naming the first missing seed otherwise (or the bad input: no such file, a
compact copy, another command's results, a run without the oracle). ``--out`` takes a new file or a grid table this
script wrote (replaced); it refuses the results file itself, a folder and any other existing file.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from coopsim.agents.ddacom.evaluate import WRITER as EVALUATE_WRITER, ci95, foreign_note, results_writer
from coopsim.comm.ns3 import experiment as X
from coopsim.comm.oracle import ESTIMATORS, window_safe_rate
from coopsim.errors import ConfigError, run_script
from coopsim.platform.recorder import atomic_write_json, check_writable


def grid_runs(cfg: dict, seed: int, folder: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rates [R], offered [R, T, E], lost [R, T, E])`` of ``seed``'s cached sweep for the experiment ``cfg``.

    Raises:
        ConfigError: key ``--oracle-cache``: no cache file for the seed, or one without the grid's runs.
    """
    kw = X._scenario_kw(cfg)
    _, demand = X._demand(kw)
    orc = cfg["oracle"]
    rates = np.linspace(orc["min_frac"], orc["max_frac"], orc["rates"]) * demand
    path = Path(folder) / f"oracle-seed{seed}-{X.oracle_cache_key(cfg, kw, seed, rates, kw['episodes'] * 25)}.json"
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ConfigError(f"seed {seed}: no cached oracle {path}; run the experiment on this seed first (it fills the "
                          "cache)", key="--oracle-cache", value=folder) from None
    if "offered_bytes" not in d:
        raise ConfigError(f"seed {seed}: {path} holds safe rates only, not the grid's runs (written before "
                          "2026-12-07); delete it and run the experiment again to refill it", key="--oracle-cache",
                          value=folder)
    off, lost = np.asarray(d["offered_bytes"], np.float64), np.asarray(d["lost_bytes"], np.float64)
    want = (len(rates), kw["episodes"] * 25, kw["num_envs"])
    if off.shape != want or lost.shape != want or not np.allclose(d.get("rates_bps", []), rates, rtol=1e-12, atol=0):
        raise ConfigError(f"seed {seed}: {path} is not this run's sweep (its runs are {off.shape}, its grid "
                          f"{len(d.get('rates_bps', []))} rates; the run's are {want}); delete it and run the "
                          "experiment again", key="--oracle-cache", value=folder)
    return rates, off, lost


def table(cfg: dict, results: dict, folder: str, strides=(8, 4, 2, 1)) -> list[dict]:
    """One row per (stride, estimator): the grid of every ``stride``-th rate, the mean safe rate / demand over
    steps, envs and seeds, and per sender the utilization ``(mean, 95% half-width)`` over seeds."""
    N = cfg["scenario"]["num_agents"]
    demand = results["demand_bps"]
    runs = [r for r in results["runs"] if r.get("channel_name") == "ns3"]
    seeds = sorted({r["seed"] for r in runs})
    sweeps = {s: grid_runs(cfg, s, folder) for s in seeds}
    rows, grids = [], set()
    for stride in strides:
        R = len(sweeps[seeds[0]][0])
        if len(range(0, R, stride)) in grids or len(range(0, R, stride)) < 2:  # the same grid again, or no grid
            continue
        grids.add(len(range(0, R, stride)))
        for est in ESTIMATORS:
            safe = {}
            for s, (rates, off, lost) in sweeps.items():
                idx = np.arange(0, len(rates), stride)
                safe[s] = window_safe_rate(off[idx].transpose(1, 0, 2), lost[idx].transpose(1, 0, 2), rates[idx],
                                           estimator=est)
            row = {"rates": len(range(0, len(sweeps[seeds[0]][0]), stride)), "estimator": est,
                   "safe_frac": float(np.mean([np.minimum(v, demand).mean() / demand for v in safe.values()]))}
            for snd in dict.fromkeys(r["sender"] for r in runs):
                # (delivered bits [T, E] of a run of this very file's settings, so of the sweep's shape)
                u = [float(np.sum(r["series"]["delivered_bits"])
                           / np.sum(N * np.minimum(safe[r["seed"]], demand) * 0.1)) for r in runs if r["sender"] == snd]
                row[snd] = ci95(u)
            rows.append(row)
    return rows


PROG = "benchmarks/ns3_oracle_grid.py"


def grid_table(path: str | Path) -> bool:
    """Whether ``path`` holds a grid table this script wrote (its ``--out``: ``command`` naming this script and
    ``rows``)."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return (isinstance(d, dict) and isinstance(d.get("rows"), list) and isinstance(d.get("command"), str)
            and d["command"].startswith(PROG + " "))


def check_out(out: str, results: str) -> None:
    """Refuse an ``--out`` that this script must not replace: the results file it reads (the same file after
    resolving links and ``..``), a folder (also a path ending in ``/``, meant as one), or any existing file that is
    not a grid table of this script (:func:`grid_table`); an empty file holds nothing to lose and is taken. Then
    :func:`~coopsim.platform.recorder.check_writable`.

    Raises:
        ConfigError: key ``--out``; names the path and what would be valid.
    """
    valid = "give --out a new file or a grid table this script wrote, e.g. runs/oracle-grid.json"
    if not out.strip():
        check_writable("--out", out)  # its message for an empty path
    if X._same_path(out, results):
        raise ConfigError(f"{out} is the results file this command reads: the grid table would be written over it; "
                          f"{valid}", key="--out", value=out)
    p = Path(out)
    if p.is_dir():
        raise ConfigError(f"{out} is a folder; {valid}", key="--out", value=out)
    if out.endswith(("/", os.sep)):  # Path() drops the slash: the table would become a file of that name
        raise ConfigError(f"{out} ends with '/', so it names a folder; {valid} (the file's name after the folder)",
                          key="--out", value=out)
    if (p.exists() or p.is_symlink()) and not (p.is_file() and p.stat().st_size == 0) and not grid_table(p):
        raise ConfigError(f"{out} exists and is not a grid table of {PROG}{foreign_note(p)}; {valid}, or remove it",
                          key="--out", value=out)
    check_writable("--out", out)


def read_results(path: str) -> dict:
    """The results file ``path`` of ``python -m coopsim.comm.ns3.experiment``, with its settings and runs' series.

    Raises:
        ConfigError: key ``results``: no such file, not such a results file (a results file of
            ``coopsim.agents.ddacom.evaluate`` named as such), a compact copy (no settings or series), or a run
            without the oracle.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no such file {path}; give a results JSON of python -m coopsim.comm.ns3.experiment "
                          "(its --out)", key="results", value=path)
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        d = None
    give = "give a results JSON of python -m coopsim.comm.ns3.experiment (its --out)"
    if results_writer(d) == EVALUATE_WRITER:
        raise ConfigError(f"{path} is a results file of python -m {EVALUATE_WRITER} (its own channels, no ns-3 oracle "
                          f"grid), not of python -m coopsim.comm.ns3.experiment; {give}", key="results", value=path)
    if not isinstance(d, dict) or not isinstance(d.get("runs"), list):
        raise ConfigError(f"{path} is not a results file of python -m coopsim.comm.ns3.experiment; {give}",
                          key="results", value=path)
    if X.compact_copy(d) or not any(isinstance(r, dict) and r.get("channel_name") == "ns3" and "series" in r
                                    for r in d["runs"]):
        raise ConfigError(f"{path} is a compact copy (summary and per-seed figures; no settings or per-step series, "
                          "as committed under benchmarks/results/); give the full results file its command wrote "
                          "(runs/...json)", key="results", value=path)
    if not isinstance(d.get("config"), dict) or not d.get("oracle"):
        raise ConfigError(f"{path} was run without the oracle (--no-oracle): there is no grid to read back",
                          key="results", value=path)
    return d


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("results", help="a results JSON of python -m coopsim.comm.ns3.experiment (its --out; the "
                                    "experiment's settings and its ns-3 runs' delivered bits are read from it)")
    ap.add_argument("--oracle-cache", default="runs/ns3-oracle-cache", help="the experiment's oracle cache folder")
    ap.add_argument("--out", default=None, help="also write the table as JSON here (written atomically): a new file "
                    "or a grid table this script wrote, never the results file or another existing file")
    a = ap.parse_args(argv)
    X.check_cache_folder(a.oracle_cache)
    if a.out is not None:
        check_out(a.out, a.results)
    results = read_results(a.results)
    cfg = results["config"]
    rows = table(cfg, results, a.oracle_cache)
    senders = [k for k in rows[0] if k not in ("rates", "estimator", "safe_frac")] if rows else []
    seed_list = sorted({r["seed"] for r in results["runs"] if r.get("channel_name") == "ns3"})
    print(f"{a.results}: utilization against each grid and estimator, {len(seed_list)} seed(s) (mean +- 95% CI "
          "half-width)")
    print(f"{'rates':>5} {'estimator':>9} {'safe/demand':>11} " + " ".join(f"{s:>15}" for s in senders))
    for row in rows:
        cells = " ".join(f"{row[s][0]:7.3f}+-{row[s][1]:5.3f}" if np.isfinite(row[s][1]) else f"{row[s][0]:15.3f}"
                         for s in senders)
        print(f"{row['rates']:>5} {row['estimator']:>9} {row['safe_frac']:>11.4f} {cells}")
    if a.out:
        atomic_write_json(Path(a.out), {"results": a.results, "seeds": len(seed_list), "seed_list": seed_list,
                                        "command": f"{PROG} " + " ".join(
                                            [a.results] + (["--oracle-cache", a.oracle_cache]
                                                           if a.oracle_cache != "runs/ns3-oracle-cache" else [])),
                                        "rows": rows}, indent=1)
        print(f"wrote {a.out}")
    return rows


if __name__ == "__main__":
    run_script(main)
