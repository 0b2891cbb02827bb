"""Learning curves of ``coopsim train`` runs: the metrics.csv of every seed -> one PNG, one panel per metric and
one line per seed directory (each seed's own curve; no mean or range over seeds is drawn).

    python -m coopsim.agents.ppo.curves OUT.png RUN_DIR [RUN_DIR ...] [--metric episode/success ...]

Each RUN_DIR is a training run (``seed-*/metrics.csv`` inside) or a seed directory. With one RUN_DIR the lines are
labelled ``seed-<s>``; with several, ``<run>/seed-<s>`` (``<run>``: the run directory's name, or the path as given
when two runs share a name), and the printed JSON's ``seeds`` (the last env step of each seed's curve) is keyed
the same way. A run with none of the plotted metrics is named in a note on stderr. Each line is smoothed with a
moving average of ``--smooth`` points (the rows of metrics.csv that have the metric; a window longer than a curve
is clipped to the curve's length).

Without ``--metric`` the panels are the first set of :data:`DEFAULT_METRIC_SETS` the runs have (MG-MAPF /
LineWalk: episode/success, episode/soc_over_lb, episode/goal_fraction; SMAC: episode/win, episode/return; any
other trainer: episode/return), the members of it the runs have.
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

#: the panels drawn without --metric, one set per kind of run, tried in order: a set is chosen when the runs have one
#: of its metrics that no later set lists (so runs with episode/return alone get the last set, not SMAC's), and its
#: members the runs have are drawn. SMAC's set is the columns `coopsim report` draws in train_curves.png for a SMAC
#: run (episode/return and episode/win, coopsim.platform.report.plot_training), win first (SMAC's headline).
DEFAULT_METRIC_SETS: tuple[tuple[str, ...], ...] = (
    ("episode/success", "episode/soc_over_lb", "episode/goal_fraction"),  # MG-MAPF, LineWalk
    ("episode/win", "episode/return"),  # SMAC (MAPPO, IPPO, QMIX)
    ("episode/return",),  # every trainer's runs
)


def default_metrics(have: list[str] | set[str]) -> tuple[str, ...]:
    """The set of :data:`DEFAULT_METRIC_SETS` that fits runs whose metrics.csv columns with values are ``have``
    (the whole set, members the runs lack included); ``()`` when no set fits (the runs have none of them)."""
    for i, group in enumerate(DEFAULT_METRIC_SETS):
        later = {m for g in DEFAULT_METRIC_SETS[i + 1:] for m in g}
        if any(m in have and m not in later for m in group):
            return group
    return ()


def seed_dirs(paths: list[str]) -> list[Path]:
    return [d for _, _, d in labelled_seed_dirs(paths)]


def run_names(paths: list[str]) -> list[str]:
    """A short name per RUN_DIR: the run directory's name (the parent's for a seed directory given directly),
    or the run directory's path as given when two different run directories share that name."""
    runs = [p.parent if (p / "metrics.csv").is_file() else p for p in map(Path, paths)]
    short = [r.resolve().name or str(r) for r in runs]
    return [s if len({r.resolve() for r, t in zip(runs, short) if t == s}) == 1 else str(r)
            for r, s in zip(runs, short)]


def labelled_seed_dirs(paths: list[str]) -> list[tuple[str, str, Path]]:
    """``(RUN_DIR as given, line label, seed directory)`` of every seed with a metrics.csv, in argument order;
    the label is ``seed-<s>`` with one RUN_DIR and ``<run>/seed-<s>`` (:func:`run_names`) with several."""
    out: list[tuple[str, str, Path]] = []
    for p, run in zip(paths, run_names(paths)):
        q = Path(p)
        dirs = [q] if (q / "metrics.csv").is_file() else sorted(q.glob("seed-*"))
        out += [(p, d.name if len(paths) == 1 else f"{run}/{d.name}", d) for d in dirs if (d / "metrics.csv").is_file()]
    return out


def series(seed_dir: Path, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(env_steps, values) of the rows where ``metric`` is a finite number."""
    xs, ys = [], []
    with open(seed_dir / "metrics.csv", newline="") as f:
        for r in csv.DictReader(f):
            try:
                y = float(r.get(metric) or "nan")
            except ValueError:  # a cell that is not a number: no point
                continue
            if math.isfinite(y):
                xs.append(int(r["env_steps"]))
                ys.append(y)
    return np.asarray(xs), np.asarray(ys)


def smooth(y: np.ndarray, k: int) -> np.ndarray:
    """Trailing moving average of a 1-D ``y`` over ``k`` points; same shape as ``y``. Point ``i`` is the mean of
    ``y[max(0, i - k + 1) : i + 1]`` (the first ``k - 1`` points average the points so far). A ``k`` longer than
    ``y`` is clipped to ``len(y)`` (the mean of all points so far), so a larger ``k`` never smooths less; ``k <= 1``
    (or fewer than 2 points) returns ``y`` unchanged."""
    k = min(int(k), len(y))
    if k <= 1:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    head = c[1:k] / np.arange(1, k)
    return np.concatenate([head, (c[k:] - c[:-k]) / k])


def step_labels(ticks) -> list[str]:
    """Tick labels of an env-step axis, one per value of ``ticks`` (a sequence of numbers), all distinct when the
    values are: plain numbers with thousands separators when the largest tick is below 10,000 (``2,500``), else
    thousands ``k`` (``12.5k``) or, from 1,000,000, millions ``M`` (``1.5M``), with the fewest decimals (the same
    for every tick, at most 12) that write every tick exactly (so distinct ticks get distinct labels); zero is
    ``0``."""
    vals = [float(v) for v in ticks]
    top = max((abs(v) for v in vals), default=0.0)
    div, unit = (1e6, "M") if top >= 1e6 else (1e3, "k") if top >= 1e4 else (1.0, "")
    scaled = [v / div for v in vals]
    places = next((d for d in range(13) if all(abs(x - round(x, d)) <= 1e-9 * max(1.0, abs(x)) for x in scaled)), 12)
    return ["0" if round(x, places) == 0 else f"{round(x, places):,.{places}f}{unit}" for x in scaled]


def step_formatter():
    """A matplotlib tick formatter (``matplotlib.ticker.Formatter``) that labels an axis's ticks with
    :func:`step_labels` of all of them (so they are distinct at every scale)."""
    from matplotlib.ticker import Formatter

    class StepFormatter(Formatter):
        def __call__(self, x, pos=None):
            locs = list(self.locs)
            if x not in locs:
                locs.append(x)
            return step_labels(locs)[locs.index(x)]

        def format_ticks(self, values):
            self.set_locs(values)
            return step_labels(values)

    return StepFormatter()


#: how the figure names the smoothing (:func:`smooth`), with ``k`` the window
SMOOTH_LABEL = "trailing mean over {k} logged iterations"


def plot(out: str | Path, runs: list[str], metrics: tuple[str, ...] | None = None, smooth_k: int = 10,
         title: str | None = None) -> dict:
    """Write the PNG: one panel per metric (``None``: the defaults :func:`choose_metrics` picks from the runs), one
    line per seed directory (labelled as :func:`labelled_seed_dirs` says), smoothed by :func:`smooth` over
    ``smooth_k`` points (the figure says so: a subtitle and the y labels); a series of fewer than 2 points is
    drawn with markers (a line of one point would not show); notes on stderr each RUN_DIR that has none of
    ``metrics``. Returns ``{"seeds": {label: last env step}, "smooth": smooth_k, "final_smoothed": {metric: [the
    last smoothed value (trailing mean over ``smooth_k`` logged iterations) of each seed that has it]},
    "last_iteration": {metric: [each such seed's unsmoothed value at its last logged iteration]}}`` (the seeds
    in the same order in both).

    Raises:
        FileNotFoundError: no ``seed-*/metrics.csv`` under ``runs``.
        CoopsimError: ``metrics`` is None and the runs have none of the default metrics.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dirs = labelled_seed_dirs(runs)
    if not dirs:
        raise FileNotFoundError(f"no seed-*/metrics.csv under {runs}")
    if metrics is None:
        metrics = choose_metrics([d for _, _, d in dirs], runs, None)
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.6), squeeze=False)
    k = max(int(smooth_k), 1)
    final: dict = {"seeds": {}, "smooth": k, "final_smoothed": {}, "last_iteration": {}}
    plotted: set[str] = set()  # the RUN_DIRs with at least one line
    lines: dict[str, object] = {}  # label -> a line of it, for the legend (one colour per seed in every panel)
    for ax, m in zip(axes[0], metrics):
        finals, lasts = [], []
        for i, (run, label, d) in enumerate(dirs):
            x, y = series(d, m)
            if len(x) == 0:
                continue
            ys = smooth(y, k)
            (line,) = ax.plot(x, ys, lw=1.2, color=f"C{i % 10}", label=label, marker="o" if len(x) < 2 else None,
                              ms=5)
            lines.setdefault(label, line)
            plotted.add(run)
            finals.append(float(ys[-1]))
            lasts.append(float(y[-1]))
            final["seeds"][label] = int(x[-1])
        final["final_smoothed"][m] = finals
        final["last_iteration"][m] = lasts
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(step_formatter())
        ax.set_title(m.split("/")[-1])
        ax.set_ylabel(f"{m.split('/')[-1]} ({SMOOTH_LABEL.format(k=k)})" if k > 1 else m.split("/")[-1], fontsize=8)
        ax.grid(alpha=0.3)
    for run in dict.fromkeys(r for r, _, _ in dirs):
        if run not in plotted:
            n = sum(r == run for r, _, _ in dirs)
            print(f"note: {run} ({n} seed(s)) has none of the plotted metrics ({', '.join(metrics)}) in its "
                  f"metrics.csv: left out of the plot", file=sys.stderr)
    if lines:
        axes[0][0].legend(handles=list(lines.values()), fontsize=8)
    note = (f"each line: one seed, {SMOOTH_LABEL.format(k=k)} (fewer at the start)" if k > 1
            else "each line: one seed, unsmoothed (one point per logged iteration)")
    fig.suptitle(f"{title}\n{note}" if title else note, fontsize=10 if title else 9)
    fig.tight_layout()
    atomic_savefig(fig, out, dpi=110)  # creates the parent folder
    plt.close(fig)
    return final


def check_image_path(out: str | Path, flag: str = "OUT", *, suffix_required: bool = False) -> None:
    """``out``'s suffix names an image format matplotlib writes (``png`` when it has none, as ``plot`` and
    :func:`~coopsim.platform.recorder.atomic_savefig` do, unless ``suffix_required``). The one check of a figure
    path given on a command line (this script's OUT, ``smac_time_to_win.py --plot``, the ns-3 experiment's
    ``--plot``), made before any work.

    Args:
        flag: the option or argument that gave ``out``, as the message names it.
        suffix_required: refuse a path without a suffix too.

    Raises:
        CoopsimError: names the path, the format and the valid suffixes.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    valid = sorted(FigureCanvasBase.get_supported_filetypes())
    suffixes = ", ".join("." + v for v in valid)
    fmt = Path(out).suffix.lstrip(".").lower()
    if not fmt and suffix_required:
        raise CoopsimError(f"{out} has no suffix; give {flag} an image suffix: {suffixes}")
    if (fmt or "png") not in valid:
        raise CoopsimError(f"{out}: matplotlib cannot write the format {fmt!r}; give {flag} an image suffix: "
                           f"{suffixes}")


def metric_columns(dirs: list[Path]) -> list[str]:
    """The columns of the seeds' ``metrics.csv`` that hold at least one finite number (``iteration`` and
    ``env_steps`` left out), in the files' column order."""
    order: dict[str, None] = {}
    have: set[str] = set()
    for d in dirs:
        with open(d / "metrics.csv", newline="") as f:
            reader = csv.DictReader(f)
            order.update(dict.fromkeys(reader.fieldnames or ()))
            for r in reader:
                for k, v in r.items():
                    if k in have or k in ("iteration", "env_steps", None) or v in ("", None):
                        continue
                    try:
                        if math.isfinite(float(v)):
                            have.add(k)
                    except (TypeError, ValueError):
                        pass
    return [c for c in order if c in have]


IMAGE_SUFFIXES = (".png", ".pdf", ".svg")


def check_argument_order(out: str, runs: list[str]) -> None:
    """Refuses ``RUN_DIR OUT.png`` (the arguments swapped): the first argument is the output image.

    Raises:
        CoopsimError: names the argument that looks like the image and the order expected.
    """
    if Path(out).suffix.lower() in IMAGE_SUFFIXES and not Path(out).is_dir():
        return
    images = [r for r in runs if Path(r).suffix.lower() in IMAGE_SUFFIXES and not Path(r).is_dir()]
    if images or Path(out).is_dir():
        what = (f"{images[0]!r} looks like the output image but is not the first argument" if images
                else f"the first argument {out!r} is a directory")
        raise CoopsimError(f"{what}: the first argument is the output image (.png, .pdf or .svg), the run directories "
                           f"come after it: python -m coopsim.agents.ppo.curves OUT.png RUN_DIR [RUN_DIR ...]")


def choose_metrics(dirs: list[Path], runs: list[str], asked: list[str] | None) -> tuple[str, ...]:
    """The metrics to plot: every ``--metric`` given (each must have values in the runs), or, with ``asked`` None
    or empty, the members the runs have of the default set that fits them (:func:`default_metrics`; a note on
    stderr names the set's members they lack). ``dirs``: seed directories; ``runs``: the RUN_DIRs, for messages.

    Raises:
        CoopsimError: a metric given is not a column with values in any seed's metrics.csv (or, without
            --metric, none of the defaults of :data:`DEFAULT_METRIC_SETS` is); the message lists the metrics the
            runs have.
    """
    have = metric_columns(dirs)
    where = f"the metrics.csv of {', '.join(runs)} ({len(dirs)} seed(s))"
    listing = f"metrics in these runs: {', '.join(have) or '(none: the files hold no values yet)'}"
    if asked:
        missing = [m for m in asked if m not in have]
        if missing:
            raise CoopsimError(f"--metric {', '.join(repr(m) for m in missing)}: not in {where}; {listing}")
        return tuple(dict.fromkeys(asked))
    group = default_metrics(have)
    present = tuple(m for m in group if m in have)
    if not present:
        every = dict.fromkeys(m for g in DEFAULT_METRIC_SETS for m in g)
        raise CoopsimError(f"none of the default metrics ({', '.join(every)}) is in {where}; choose "
                           f"columns with --metric; {listing}")
    left = [m for m in group if m not in present]
    if left:
        print(f"note: default metric(s) {', '.join(left)} not in these runs: left out", file=sys.stderr)
    return present


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m coopsim.agents.ppo.curves", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", metavar="OUT", help="the image to write (.png, .pdf or .svg)")
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR",
                    help="a coopsim train run directory (seed-*/metrics.csv inside) or one seed directory")
    ap.add_argument("--metric", action="append", default=None,
                    help="a metrics.csv column to plot (repeatable; default: of the first of these sets the runs "
                         "have, the members they have: "
                         + "; ".join(", ".join(g) for g in DEFAULT_METRIC_SETS)
                         + " (a set counts when the runs have one of its metrics that no later set lists)")
    ap.add_argument("--smooth", type=int_at_least(1), default=10,
                    help="moving-average window in points (metrics.csv rows), >= 1 (default 10); a window longer "
                         "than a curve is clipped to the curve's length (each point the mean of all points so far), "
                         "so a larger window never smooths less")
    ap.add_argument("--title", default=None, help="a title above the panels (default: none)")
    a = ap.parse_args(argv)
    check_argument_order(a.out, a.runs)
    check_image_path(a.out)  # before the runs are read
    dirs = seed_dirs(a.runs)
    if not dirs:
        raise CoopsimError(f"no seed-*/metrics.csv under {a.runs} (give `coopsim train` run directories, which hold "
                           "seed-<s>/metrics.csv)")
    metrics = choose_metrics(dirs, a.runs, a.metric)
    res = plot(a.out, a.runs, metrics, a.smooth, a.title)
    print(json.dumps(res, indent=2))

if __name__ == "__main__":
    run_script(main)
