"""Learning curves of ``coopsim train`` runs: metrics.csv of every seed -> one PNG (mean and range over seeds).

    python -m coopsim.agents.ppo.curves OUT.png RUN_DIR [RUN_DIR ...] [--metric episode/success ...]

Each RUN_DIR is a training run (``seed-*/metrics.csv`` inside) or a seed directory. Curves are binned on
env steps (bin width = the coarsest logging interval) and smoothed with a moving average of ``--smooth`` bins.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

from coopsim.errors import CoopsimError, int_at_least, run_script
from coopsim.platform.recorder import atomic_savefig

DEFAULT_METRICS = ("episode/success", "episode/soc_over_lb", "episode/goal_fraction")


def seed_dirs(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out += sorted(p.glob("seed-*")) if not (p / "metrics.csv").is_file() else [p]
    return [d for d in out if (d / "metrics.csv").is_file()]


def series(seed_dir: Path, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(env_steps, values) of the rows where ``metric`` is a finite number."""
    xs, ys = [], []
    with open(seed_dir / "metrics.csv", newline="") as f:
        for r in csv.DictReader(f):
            v = r.get(metric, "")
            if v not in ("", None) and math.isfinite(float(v)):
                xs.append(int(r["env_steps"]))
                ys.append(float(v))
    return np.asarray(xs), np.asarray(ys)


def smooth(y: np.ndarray, k: int) -> np.ndarray:
    if k <= 1 or len(y) < k:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    head = c[1:k] / np.arange(1, k)
    return np.concatenate([head, (c[k:] - c[:-k]) / k])


def plot(out: str | Path, runs: list[str], metrics: tuple[str, ...] = DEFAULT_METRICS, smooth_k: int = 10,
         title: str | None = None) -> dict:
    """Write the PNG; returns the final smoothed mean of each metric per seed and the seeds' step counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    dirs = seed_dirs(runs)
    if not dirs:
        raise FileNotFoundError(f"no seed-*/metrics.csv under {runs}")
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.6), squeeze=False)
    final: dict = {"seeds": {}, "metrics": {}}
    for ax, m in zip(axes[0], metrics):
        finals = []
        for d in dirs:
            x, y = series(d, m)
            if len(x) == 0:
                continue
            ys = smooth(y, smooth_k)
            ax.plot(x, ys, lw=1.2, label=d.name)
            finals.append(float(ys[-1]))
            final["seeds"][d.name] = int(x[-1])
        final["metrics"][m] = finals
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1e3:.0f}k"))
        ax.set_title(m.split("/")[-1])
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    atomic_savefig(fig, out, dpi=110)  # creates the parent folder
    plt.close(fig)
    return final


def check_image_path(out: str | Path) -> None:
    """``out``'s suffix names an image format matplotlib writes (``png`` when it has none, as ``plot`` does).

    Raises:
        CoopsimError: names the format and the valid suffixes.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    fmt = Path(out).suffix.lstrip(".").lower() or "png"
    valid = sorted(FigureCanvasBase.get_supported_filetypes())
    if fmt not in valid:
        raise CoopsimError(f"{out}: matplotlib cannot write the format {fmt!r}; give OUT an image suffix: "
                           f"{', '.join('.' + v for v in valid)}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--metric", action="append", default=None)
    ap.add_argument("--smooth", type=int_at_least(1), default=10)
    ap.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    check_image_path(a.out)  # before the runs are read
    try:
        res = plot(a.out, a.runs, tuple(a.metric) if a.metric else DEFAULT_METRICS, a.smooth, a.title)
    except FileNotFoundError as exc:
        raise CoopsimError(f"{exc} (give `coopsim train` run directories, which hold seed-<s>/metrics.csv)") from None
    print(json.dumps(res, indent=2))
    if not any(res["metrics"].values()):
        print(f"note: none of the metrics {', '.join(res['metrics'])} is in these runs' metrics.csv, so {a.out} has "
              f"empty panels; choose columns with --metric", file=sys.stderr)


if __name__ == "__main__":
    run_script(main)
