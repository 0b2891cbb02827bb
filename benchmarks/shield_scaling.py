"""Shield time per step against the number of agents, with bounded-degree coupling.

For N = 4 ... 1000 agents on a grid whose area grows with N (constant density, starts 3 cells apart),
with separation and resource caps (groups of 4) in force, the ``certificate-v0`` shield filters
uniformly random joint actions (most need repair) for ``--steps`` steps; the executed actions are the
shield's, so the agents move. Printed per N: median filter time per step, active pairwise hyperedges,
largest neighbourhood, agents changed per step, and the time of the same certificate built over
*all* pairs (no coupling graph: what a non-factored pairwise check costs) with its ratio. A log-log fit
gives the scaling exponent (about 1 = linear). Writes ``shield_scaling.png`` and ``shield_scaling.json`` into
the ``--out`` folder (default ``runs/shield_scaling``; the figure docs/safety.md shows is made with ``--out docs``).

Usage: ``python benchmarks/shield_scaling.py [--sizes 4 8 ... 1000] [--steps 10] [--out runs/shield_scaling]``
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from coopsim.errors import ConfigError, int_at_least, run_script
from coopsim.platform.recorder import atomic_savefig, atomic_write_json, check_writable
from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.constraints import Separation
from coopsim.safety.shields import CertificateShield
from coopsim.scenarios.coop_game import CoopGameCore


class _AllPairs(Separation):
    """Separation checked on every pair (interaction radius infinite): the non-factored reference."""

    def interaction_radius(self) -> float:
        return float("inf")


def run(n: int, steps: int, all_pairs_max: int) -> dict:
    side = int(np.ceil(np.sqrt(16 * n)))
    sc = CoopGameCore(num_envs=1, height=side, width=side, num_agents=n, constraints=["separation", "resource"],
                      group_size=4, cap=1.0, start_spacing=3.0, load_frac=0.2, max_steps=steps + 1, world_seed=1)
    sc.reset(seed=0)
    shield = CertificateShield(learn=False)
    shield.reset(0, sc)
    rng = np.random.default_rng(0)
    times, changed, pairs, nb, full = [], [], [], [], []
    for t in range(steps):
        state = sc.constraints()
        prop = rng.integers(0, 5, (1, n))
        t0 = time.perf_counter()
        safe, cert = shield.filter(state, prop)
        times.append(time.perf_counter() - t0)
        changed.append(int(cert.changed.sum()))
        c = SafetyCertificate(state)
        pairs.append(len(c.pairs))
        nb.append(c.graph.max_neighbourhood)
        if n <= all_pairs_max and t < 3:
            cons = tuple(_AllPairs(name=x.name, margin=x.margin, min_dist=x.min_dist, no_swap=x.no_swap)
                         if isinstance(x, Separation) else x for x in state.constraints)
            t0 = time.perf_counter()
            ca = SafetyCertificate(replace(state, constraints=cons))
            ca.repair(prop[0])
            full.append(time.perf_counter() - t0)
            assert np.array_equal(ca.repair(prop[0])[0], safe[0]), "factored and all-pairs certificates disagree"
        res = sc.step(safe)
        assert all(float(v.sum()) == 0.0 for k, v in res.info.items() if k.startswith("cost/"))
    return {"N": n, "grid": side, "ms_per_step": 1e3 * float(np.median(times)), "active_pairs": float(np.mean(pairs)),
            "max_neighbourhood": int(max(nb)), "changed_per_step": float(np.mean(changed)),
            "all_pairs_ms": 1e3 * float(np.median(full)) if full else None}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int_at_least(2), nargs="+", default=[4, 8, 16, 32, 64, 128, 256, 512, 1000],
                    help="numbers of agents N (each >= 2)")
    ap.add_argument("--steps", type=int_at_least(1), default=10, help="shielded steps per N (>= 1)")
    ap.add_argument("--all-pairs-max", type=int_at_least(0), default=256,
                    help="largest N for the all-pairs reference (0: none)")
    ap.add_argument("--out", type=Path, default=Path("runs") / "shield_scaling",
                    help="folder for shield_scaling.json and shield_scaling.png (default runs/shield_scaling; "
                         "--out docs overwrites the committed figure that README and docs/safety.md show)")
    a = ap.parse_args(argv)
    if a.out.exists() and not a.out.is_dir():
        raise ConfigError(f"{a.out} is a file; give a folder for shield_scaling.json and .png", key="--out",
                          value=str(a.out))
    check_writable("--out", a.out, folder=True)  # before the measurement, not after it
    rows = []
    print(f"{'N':>5} {'grid':>5} {'ms/step':>9} {'ms/agent':>9} {'pairs':>8} {'max nbhd':>8} {'changed':>8} "
          f"{'all-pairs ms':>12} {'all-pairs/factored':>18}")
    for n in a.sizes:
        r = run(n, a.steps, a.all_pairs_max)
        rows.append(r)
        ap_ms = r["all_pairs_ms"]
        ratio = f"{ap_ms / r['ms_per_step']:.1f}x" if ap_ms else "-"
        print(f"{n:>5} {r['grid']:>5} {r['ms_per_step']:>9.2f} {r['ms_per_step'] / n:>9.3f} {r['active_pairs']:>8.0f} "
              f"{r['max_neighbourhood']:>8} {r['changed_per_step']:>8.1f} {ap_ms if ap_ms else float('nan'):>12.1f} {ratio:>18}",
              flush=True)
    ns = np.array([r["N"] for r in rows], float)
    ms = np.array([r["ms_per_step"] for r in rows])
    big = ns >= 32
    slope = float(np.polyfit(np.log(ns[big]), np.log(ms[big]), 1)[0]) if big.sum() >= 2 else float("nan")
    print(f"log-log slope of shield time vs N (N >= 32): {slope:.2f}  (1.0 = linear)")
    a.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out / "shield_scaling.json", {"rows": rows, "slope_N_ge_32": slope}, indent=1)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    ax.loglog(ns, ms, "o-", label=f"certificate-v0 (slope {slope:.2f})")
    ap_rows = [(r["N"], r["all_pairs_ms"]) for r in rows if r["all_pairs_ms"]]
    if ap_rows:
        ax.loglog(*zip(*ap_rows), "s--", label="all-pairs certificate (no coupling graph)")
    ax.loglog(ns, ms[0] * ns / ns[0], ":", color="gray", label="linear reference")
    ax.set_xlabel("agents N")
    ax.set_ylabel("shield time per step (ms)")
    ax.set_title("Shield scaling, separation + resource caps")
    ax.legend(fontsize=7)
    fig.tight_layout()
    atomic_savefig(fig, a.out / "shield_scaling.png", dpi=120)
    print(f"wrote {a.out / 'shield_scaling.png'}")


if __name__ == "__main__":
    run_script(main)
