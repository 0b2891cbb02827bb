"""Reports: plots and tables of one run, comparisons across runs, replay animations.

``coopsim report RUN_DIR`` re-renders a run's plots, prints its summary table and, when the scenario
can render its replays (a ``render_replay(replay) -> list[uint8 [H, W, 3]]`` function on the scenario
class), writes ``replay_seed<S>_ep<E>.gif``. On several runs it groups them by the config fields that
differ, prints one comparison table and plots each metric against the numeric field that varies
(e.g. ``scenario.params.num_agents``), one line per method, with 95% confidence bands (runs that differ in no numeric
field, e.g. two agents: one point with its interval per run, for the metrics the table shows). Runs of one config (seeds
and episodes included: repeats of one experiment, e.g. a sweep cell re-run beside its interrupted copy) are counted
once, with a note naming each run left out.
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from coopsim.errors import CoopsimError
from coopsim.platform.recorder import WriteError, atomic_savefig, atomic_write_bytes
from coopsim.platform.stats import ID_KEYS, summarize

#: metrics drawn first when present (the field's headline numbers)
HEADLINE = ("success", "win", "soc", "soc_over_lb", "makespan", "episode_return", "violations", "regret", "conservativeness",
            "collisions", "goal_fraction", "throughput", "comm/offered_copies", "shield/interventions")
#: metric names of runs written before every channel named its counters ``comm/<what>_copies`` (the ideal channel's
#: ``comm/copies_offered``, ``comm/copies_delivered``): a report reads them under today's name, so a comparison of old
#: and new runs has one column per quantity (the files are left as they are)
RENAMED = {"comm/copies_offered": "comm/offered_copies", "comm/copies_delivered": "comm/delivered_copies"}


def renamed(metrics: dict) -> dict:
    """``metrics`` with the old names of :data:`RENAMED` read as the new ones (unless the new one is there too)."""
    if not RENAMED.keys() & metrics.keys():
        return metrics
    return {(RENAMED[k] if k in RENAMED and RENAMED[k] not in metrics else k): v for k, v in metrics.items()}


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: errno values of a folder that cannot be written at all (read-only file system, no permission)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


@contextlib.contextmanager
def report_writes(folder: str | Path, what: str, path: str | Path):
    """Turn a failed write of ``path`` (``what`` it is: ``its plot``, ``the replay GIF``) inside the block into one
    line naming ``folder``: ``<folder>: the folder is not writable (Read-only file system): coopsim report cannot
    write <what> <name>; ...`` (or, on a full disk, the cause and what to do).

    Raises:
        WriteError: a CoopsimError (the CLI prints it, exit 2) and an OSError.
    """
    try:
        yield
    except WriteError as exc:
        name = Path(path).name
        if exc.errno in _NOT_WRITABLE:
            msg = (f"{folder}: the folder is not writable ({exc.strerror}): `coopsim report` cannot write {what} {name} "
                   f"there; copy the folder to a writable place (cp -r) and run `coopsim report` on the copy")
        elif exc.errno == errno.EISDIR or Path(path).is_dir():
            msg = (f"{folder}: `coopsim report` cannot write {what} {name}: {path} is a folder; move it away (or "
                   f"remove it) and run `coopsim report` again")
        else:
            msg = f"{folder}: `coopsim report` cannot write {what} {name}: {exc.message}"
        raise WriteError(msg, path=path, errno=exc.errno, strerror=exc.strerror) from None


def folder_not_writable(exc: WriteError) -> bool:
    """Whether ``exc`` (of :func:`report_writes`) says the run's folder takes no file at all (a read-only file system, no
    permission): `coopsim report` then shows the table and skips its files with a warning. Any other failed write (a
    folder in the way of the file, a full disk) is an error."""
    return exc.errno in _NOT_WRITABLE


def record_plot_error(run_dir: str | Path, exc: BaseException) -> None:
    """Leave ``plot_error.txt`` (``Type: message`` of the exception that stopped the run's plot) in ``run_dir``,
    written whole or not at all: on a full disk no empty file is left behind. Never raises (plotting never loses
    results, nor does a note about it). Also prints one ``warning:`` line to stderr, so the missing plot is not
    a surprise found later."""
    import sys

    from coopsim.platform.recorder import atomic_write_text

    first = str(exc).splitlines()[0] if str(exc) else ""
    print(f"warning: {run_dir}: the plot metrics.png was not drawn ({type(exc).__name__}: {first}); every result is "
          f"written; `coopsim report {run_dir}` draws it again", file=sys.stderr)
    with contextlib.suppress(OSError):  # WriteError is an OSError
        atomic_write_text(Path(run_dir) / "plot_error.txt", f"{type(exc).__name__}: {exc}\n")


def replay_absence(run_dir: str | Path, scenario_id: str) -> str:
    """Why :func:`render_replays` wrote no GIF for the run in ``run_dir`` (of scenario ``scenario_id``): its scenario
    cannot render replays, or the run has no replays folder, or the folder holds no replay files."""
    from coopsim.platform import registry

    try:
        factory = registry.spec("scenario", scenario_id).load()
        renders = getattr(getattr(factory, "cls", factory), "render_replay", None) is not None
    except CoopsimError:
        renders = False
    if not renders:
        return f"{scenario_id} records no replays to animate"
    folder = Path(run_dir) / "replays"
    if not folder.is_dir():
        with contextlib.suppress(Exception):  # the run's config asked for none (replays: 0)
            cfg = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())
            if isinstance(cfg, dict) and cfg.get("replays") == 0:
                return "the run's config says replays: 0 (no replay files kept)"
        return (f"the run has no replays folder ({folder}; `coopsim run` writes one replay file per episode there "
                f"for {scenario_id}): it was moved or deleted, or no episode finished")
    return f"{folder} holds no replay files (*.npz, one per episode, written by `coopsim run`)"


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """Read a run directory written by ``coopsim run`` / ``eval``.

    Returns:
        ``{"dir", "config", "rows", "summary", "has_summary", "note", "bad_rows", "summary_rebuilt", "checkpoint",
        "seeds_note"}``: the parsed config, the episode rows of metrics.jsonl, the summary (summary.json's, or rebuilt
        from the rows when it is missing or damaged), one note line on what is incomplete (or None), the evaluated
        policy (:func:`evaluated_checkpoint`), and the note that the run's seeds share one learner (agents that learn
        during ``coopsim run``: :func:`~coopsim.platform.runner.shared_learner_note`; None for other runs).

    Raises:
        CoopsimError: the directory is missing, not a run directory (a training run is named as one), its
            config.yaml is damaged, or it holds no finished episode.
    """
    d = Path(run_dir)
    if not d.exists():
        raise CoopsimError(f"{d}: does not exist; give a run directory that `coopsim run` wrote under runs/")
    if not d.is_dir():
        raise CoopsimError(f"{d}: is a file, not a run directory; give a folder that `coopsim run` wrote under runs/")
    if not (d / "config.yaml").is_file():
        rounds = sorted((r for r in d.glob("round-*") if training_seeds(r)), key=lambda r: (len(r.name), r.name))
        if rounds:  # benchmarks/smac_clone.py or smac_expert_iteration.py output: each round is a policy directory
            raise CoopsimError(f"{d}: not a run directory (no config.yaml): its rounds ({rounds[0].name} .. "
                               f"{rounds[-1].name}) hold trained policies; {training_run_message(rounds[-1])}")
        seed_note = seed_folder_message(d)
        if seed_note:
            raise CoopsimError(seed_note)
        raise CoopsimError(f"{d}: not a run directory (no config.yaml); give a folder that `coopsim run` wrote under runs/")
    try:
        cfg = yaml.safe_load((d / "config.yaml").read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise CoopsimError(f"{d / 'config.yaml'}: not valid YAML{where} ({getattr(exc, 'problem', None) or exc}); "
                           f"the run directory is damaged") from None
    if not (isinstance(cfg, dict) and isinstance(cfg.get("scenario"), dict) and "id" in cfg["scenario"]):
        raise CoopsimError(f"{d / 'config.yaml'}: not a run config (needs a mapping with scenario: {{id: ...}}); "
                           f"the run directory is damaged")
    mpath = d / "metrics.jsonl"
    has_metrics = mpath.is_file()
    rows, bad, cut = _read_metrics(mpath) if has_metrics else ([], [], None)
    if not rows and training_seeds(d):
        raise CoopsimError(training_run_message(d))
    summ_path = d / "summary.json"
    has_summary = summ_path.exists()
    summary, damaged = _read_summary(summ_path) if has_summary else (None, None)
    # a readable summary.json is the run's own account (written last, from every finished episode): with episodes in
    # it, a missing or damaged metrics.jsonl does not leave the run with nothing to report
    counted = _summary_episodes(summary) if summary is not None and not damaged else None
    if not rows and not counted:
        if not has_metrics:
            raise CoopsimError(f"{mpath}: missing; the run directory has no metrics.jsonl (the file `coopsim run` "
                               f"writes one line to per finished episode), so there is nothing to report")
        raise CoopsimError(f"{d}: {_no_episode_reason(d, bad, cut)}")
    if damaged:
        damaged = (f"{summ_path}: {damaged}; shown: the summary of metrics.jsonl's {len(rows)} episode(s) "
                   f"(the file is left as it is)")
    rows = [renamed(r) for r in rows]
    if summary is None or damaged:
        summary = {"metrics": summarize(rows)}
    else:
        summary = {**summary, "metrics": renamed(summary["metrics"])}
    notes = [_run_note(cfg, rows, summary, has_summary), damaged]
    if counted is not None and len(rows) != counted:
        notes.append(_episode_count_note(mpath, has_metrics, len(rows), counted, cut))
    if bad:
        notes.append(_bad_rows_note(mpath, bad))
    note = "; ".join(n for n in notes if n) or None
    seeds_note = summary.get("seeds_note") if isinstance(summary.get("seeds_note"), str) else None
    if seeds_note is None:  # a run written before summary.json said so: from its config
        from coopsim.platform.runner import shared_learner_note

        agents = cfg.get("agents") if isinstance(cfg.get("agents"), dict) else {}
        seeds_note = shared_learner_note(agents.get("id"), agents.get("params"), cfg.get("seeds"))
    return {"dir": d, "config": cfg, "rows": rows, "summary": summary, "has_summary": has_summary, "note": note,
            "bad_rows": bad, "summary_rebuilt": bool(damaged), "checkpoint": evaluated_checkpoint(d, cfg),
            "seeds_note": seeds_note}


#: the ``checkpoint`` of :func:`evaluated_checkpoint` for a run that says nothing of its policy (written before
#: coopsim recorded it, or stopped before its summary.json)
NOT_RECORDED = "not recorded"
#: the ``checkpoint`` of a run that evaluated no checkpoint (``coopsim run`` of an untrained or scripted agent)
NO_CHECKPOINT = "none"


def evaluated_checkpoint(run_dir: str | Path, cfg: dict | None = None) -> str:
    """The policy file a run evaluated, as recorded in its directory: the absolute path of the file read
    (summary.json's ``checkpoint_file``, else its ``checkpoint``: the ``--checkpoint`` given, else the run's
    ``checkpoint.txt``, else the ``# evaluated with --checkpoint`` line of its config.yaml); for a run recorded as
    having no ``--checkpoint`` (``"checkpoint": null``), the config's ``agents.params.checkpoint`` when it sets one
    (``cfg``, the run's parsed config; the agent loads it itself), else :data:`NO_CHECKPOINT`; and
    :data:`NOT_RECORDED` for a run that records neither (an older run directory). Never raises: an unreadable file
    counts as no record."""
    import shlex

    d = Path(run_dir)
    try:
        summary = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        summary = None
    if isinstance(summary, dict):
        for key in ("checkpoint_file", "checkpoint"):
            if isinstance(summary.get(key), str) and summary[key]:
                return summary[key]
    with contextlib.suppress(OSError, ValueError):
        text = (d / "checkpoint.txt").read_text().strip()
        if text:
            return text
    with contextlib.suppress(OSError, ValueError):
        with open(d / "config.yaml", encoding="utf-8") as f:
            first = f.readline()
        mark = "# evaluated with --checkpoint "
        if first.startswith(mark):
            words = shlex.split(first[len(mark):])
            if words:
                return words[0]
    if isinstance(summary, dict) and "checkpoint" in summary:  # recorded: no --checkpoint was given
        agents = (cfg or {}).get("agents")
        param = agents.get("params") if isinstance(agents, dict) else None
        own = param.get("checkpoint") if isinstance(param, dict) else None
        return own if isinstance(own, str) and own else NO_CHECKPOINT
    return NOT_RECORDED


def checkpoint_labels(values: list[str]) -> dict[str, str]:
    """Short forms of evaluated checkpoints (:func:`evaluated_checkpoint`) for table cells and plot legends, one
    per distinct value and distinct from one another: the last path parts, ``<training run>/seed-0`` for a seed's
    ``policy.pt`` (``.../seed-0/checkpoint.pt`` for a mid-training checkpoint), with more parts where two would look
    alike. :data:`NO_CHECKPOINT` and :data:`NOT_RECORDED` stay as they are."""
    paths = sorted({v for v in values if v not in (NO_CHECKPOINT, NOT_RECORDED)})
    out = {v: v for v in values if v in (NO_CHECKPOINT, NOT_RECORDED)}
    if not paths:
        return out

    def tail(v: str, n: int, drop_policy: bool) -> str:
        parts = [x for x in Path(v).parts if x not in ("/", "")]
        name = parts[-1] if len(parts) > 1 and parts[-1] in ("policy.pt", "checkpoint.pt") else None
        base = parts[:-1] if name else parts
        if len(base) <= n:
            return v
        shown = "/".join(base[-n:])
        return shown if name is None or (name == "policy.pt" and drop_policy) else f"{shown}/{name}"

    longest = max(len(Path(v).parts) for v in paths)
    for n in range(2, longest + 1):
        for drop_policy in (True, False):
            forms = {v: tail(v, n, drop_policy) for v in paths}
            if len(set(forms.values())) == len(paths) and not set(forms.values()) & set(out):
                return {**out, **forms}
    return {**out, **{v: v for v in paths}}


def _read_summary(path: Path) -> tuple[dict | None, str | None]:
    """A run's ``summary.json`` and why it cannot be shown (None when it can): not JSON, unreadable, no ``metrics``
    mapping, an entry that is not a mapping of numbers (:func:`_bad_summary_entry`), an ``interrupted`` flag that
    is not a JSON boolean, or an ``episodes_finished`` that is not a count."""
    try:
        summary = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"not valid JSON ({exc})"
    except OSError as exc:  # a directory, unreadable
        return None, f"cannot be read ({exc.strerror or exc})"
    if not (isinstance(summary, dict) and isinstance(summary.get("metrics"), dict)):
        return None, "not a run summary (no 'metrics' mapping)"
    # the run's own flags are read as they are written (a hand-edited "no" is truthy, "6" no count)
    if "interrupted" in summary and not isinstance(summary["interrupted"], bool):
        return summary, f"interrupted is {_short(summary['interrupted'])}, not true or false"
    n = summary.get("episodes_finished")
    if n is not None and not (_is_int(n) and n >= 0):
        return summary, f"episodes_finished is {_short(n)}, not a count (an integer >= 0)"
    return summary, _bad_summary_entry(summary["metrics"])


def _summary_episodes(summary: dict) -> int | None:
    """How many episodes a readable summary.json counts: its ``episodes_finished`` (``coopsim run`` writes it), else
    the largest ``n_episodes`` of its metrics; None when it says neither."""
    n = summary.get("episodes_finished")
    if _is_int(n) and n >= 0:
        return n
    counts = [e.get("n_episodes") for e in summary["metrics"].values() if isinstance(e, dict)]
    counts = [int(c) for c in counts if isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c)]
    return max(counts) if counts else None


def _episode_count_note(mpath: Path, has_metrics: bool, n_rows: int, counted: int, cut: int | None) -> str:
    """The note of a run whose metrics.jsonl holds another number of episodes (``n_rows``) than its readable
    summary.json counts (``counted``): which file the table shows (summary.json), and what the plot can show."""
    if not has_metrics:
        return (f"{mpath}: missing; shown: summary.json's {counted} episode(s); per-episode plots (metrics.png) and "
                f"comparisons with other runs need metrics.jsonl, so they are unavailable")
    cut_off = (f"line {cut} is a damaged line (cut off: not complete JSON) and is left out; " if cut is not None
               else "")
    if not n_rows:
        return (f"{mpath}: {cut_off}it holds none of the {counted} episode(s) summary.json counts; the summary "
                f"table shows summary.json's {counted} episode(s); per-episode plots (metrics.png) and comparisons "
                f"with other runs need metrics.jsonl's episodes, so they are unavailable")
    fewer = "fewer" if n_rows < counted else "more"
    return (f"{mpath}: {cut_off}it holds {n_rows} episode(s), {fewer} than the {counted} summary.json counts; the "
            f"summary table shows summary.json's {counted} episode(s), the plot (and a comparison with other runs) "
            f"metrics.jsonl's {n_rows}")


def _bad_summary_entry(metrics: dict) -> str | None:
    """Why a summary's ``metrics`` mapping cannot be shown (an entry that is not a mapping of numbers, as
    :func:`coopsim.platform.stats` writes them: mean, ci95_low/high, counts, per_seed), or None."""
    def number(v: Any) -> bool:
        return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))

    for k, entry in metrics.items():
        if not isinstance(entry, dict):
            return f"metric {k!r} is {_short(entry)}, not a mapping"
        for f, v in entry.items():
            ok = all(number(x) for x in v.values()) if isinstance(v, dict) else number(v)
            if not ok:
                return f"metrics.{k}.{f} is {_short(v)}, not a number"
    return None


def read_metrics(path: str | Path) -> tuple[list[dict], list[tuple[int, str]]]:
    """The episode rows of a ``metrics.jsonl`` and the lines left out as ``(line number, why)``: a line that is
    not a JSON object, whose ``seed`` (and ``episode``, if given) is not an integer, or with a value that is not a
    number (a metric is a number, a bool or null). A truncated last line (a run
    killed mid-write: it starts with ``{``) is left out without a word, as :func:`coopsim.platform.recorder.read_jsonl`
    does."""
    rows, bad, _ = _read_metrics(path)
    return rows, bad


def _read_metrics(path: str | Path) -> tuple[list[dict], list[tuple[int, str]], int | None]:
    """:func:`read_metrics`, and the number of the cut-off last line it left out quietly (None: there was none), so
    a run whose summary.json counts that episode can say where it went."""
    rows: list[dict] = []
    bad: list[tuple[int, str]] = []
    cut = None
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i != last or not line.lstrip().startswith("{"):  # a cut-off last row still starts as an object
                bad.append((i + 1, "not valid JSON"))
            else:
                cut = i + 1
            continue
        if not isinstance(row, dict):
            bad.append((i + 1, f"not a JSON object ({type(row).__name__})"))
            continue
        why = next((f"{k!r} is {row.get(k, 'missing')!r}, not an integer" for k in ("seed", "episode")
                    if (k in row or k == "seed") and not _is_int(row.get(k))), None)
        why = why or next((f"{k!r} is {_short(v)}, not a number" for k, v in row.items()
                           if not (v is None or isinstance(v, (int, float)))), None)
        if why:
            bad.append((i + 1, why))
            continue
        rows.append(row)
    return rows, bad, cut


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bad_rows_note(path: Path, bad: list[tuple[int, str]]) -> str:
    shown = "; ".join(f"line {n}: {why}" for n, why in bad[:3]) + (f"; ... ({len(bad) - 3} more)" if len(bad) > 3 else "")
    return (f"{path}: {len(bad)} damaged line(s) left out ({shown}); each line must be one episode's JSON object "
            f"with an integer 'seed'")


def _no_episode_reason(d: Path, bad: list[tuple[int, str]], cut: int | None = None) -> str:
    """Why a run with an empty (or all-damaged) metrics.jsonl has nothing to report (``cut``: the number of its
    cut-off last line, :func:`_read_metrics`)."""
    if bad:
        return f"no usable episode: {_bad_rows_note(d / 'metrics.jsonl', bad)}"
    if cut is not None:  # its only episode line is cut off: a damaged file, not a run that finished no episode
        return (f"no usable episode: {d / 'metrics.jsonl'}: line {cut} is not valid JSON (cut off: the file is "
                f"damaged, or the run was killed while writing that episode)")
    try:
        summary = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        summary = None
    if not isinstance(summary, dict):
        return "no finished episode in metrics.jsonl (the run was stopped before its first episode ended)"
    if summary.get("interrupted"):
        return "no finished episode in metrics.jsonl (the run was interrupted before its first episode ended)"
    err = summary.get("error")
    because = f" ({err})" if err else " (its process stopped on an error; its output said which)"
    return f"the run finished no episode: it failed before its first episode ended{because}"


def training_seeds(run_dir: str | Path) -> list[Path]:
    """The ``seed-<s>/`` directories of a run written by ``coopsim train``, or of a policy directory (a
    ``seed-<s>/policy.pt`` beside a ``config.yaml``, e.g. a round of ``benchmarks/smac_clone.py``); empty for any
    other directory."""
    from coopsim.platform.trainer import training_seed_dirs

    from coopsim.platform.trainer import CHECKPOINT_NAME, METRICS_CSV, POLICY_NAME

    d = Path(run_dir)
    return [] if (d / "metrics.jsonl").is_file() else training_seed_dirs(d, (CHECKPOINT_NAME, METRICS_CSV, POLICY_NAME))


def invoked_as() -> str:
    """The coopsim executable as the user called it (``.venv/bin/coopsim`` after ``make demo``, which puts
    nothing on PATH), shell-quoted, for the commands printed as hints; ``coopsim`` under ``python -m``."""
    import shlex
    import sys

    return shlex.quote(sys.argv[0]) if Path(sys.argv[0]).name == "coopsim" else "coopsim"


#: the results file that marks a run directory of ``benchmarks/smac_time_to_win.py``
TIME_TO_WIN_NAME = "time_to_win.json"


def training_run_message(run_dir: str | Path) -> str:
    """What ``run_dir`` (a training run) is and how to evaluate it; a run of ``benchmarks/smac_time_to_win.py`` (its
    ``time_to_win.json``) is named as that, with the file of its greedy evaluations and how to plot them."""
    import shlex

    d = Path(run_dir)
    seed = training_seeds(d)[0] if training_seeds(d) else d / "seed-<s>"
    ttw = d / TIME_TO_WIN_NAME
    from coopsim.platform.training import is_training_run

    if ttw.is_file():
        what = (f"a training run (written by benchmarks/smac_time_to_win.py; its greedy win-rate evaluations are in "
                f"{ttw}, plotted by benchmarks/smac_time_to_win.py --plot {shlex.quote(str(d))} OUT.png)")
    elif is_training_run(d):
        what = "a training run (written by coopsim train)"
        progress = training_progress(d)
        if progress is not None:
            status, running = progress
            what += (f" that is being trained right now ({status})" if running else
                     f" whose training has not finished ({status})")
            resume = "" if running else (f"; continue its training with: {invoked_as()} train --resume "
                                         f"{shlex.quote(str(d))}")
            return (f"{d}: {what}, not a run of evaluation episodes; evaluate its checkpoints with: "
                    f"{eval_command(d, seed)}{resume}")
    else:  # seed-<s>/policy.pt and config.yaml only: a benchmark's round (smac_clone.py, smac_expert_iteration.py)
        what = "a trained policy with its config (no training metrics)"
    return f"{d}: {what}, not a run of evaluation episodes; evaluate it with: {eval_command(d, seed)}"


def eval_command(run_dir: str | Path, seed_dir: str | Path) -> str:
    """The ``coopsim eval`` command line that evaluates one seed's policy of a training run on that seed, as
    ``coopsim train``'s own ``next:`` line gives it: ``coopsim eval RUN/config.yaml 'seeds=[s]' --checkpoint
    RUN/seed-s`` (without ``seeds=[s]`` it would evaluate that policy on every seed of the config)."""
    import shlex

    s = Path(seed_dir).name.removeprefix("seed-")
    return (f"{invoked_as()} eval {shlex.quote(str(Path(run_dir) / 'config.yaml'))} {shlex.quote(f'seeds=[{s}]')} "
            f"--checkpoint {shlex.quote(str(seed_dir))}")


def seed_folder_message(d: str | Path) -> str | None:
    """What ``d`` is when it is one seed's folder (``seed-<s>``) of a training run (or of a policy directory), with
    the command that evaluates its policy; None for any other folder."""
    d = Path(d)
    if not (d.name.startswith("seed-") and any(s.resolve() == d.resolve() for s in training_seeds(d.parent))):
        return None
    return (f"{d}: one seed's folder of the training run {d.parent}, not a run directory; evaluate its policy with: "
            f"{eval_command(d.parent, d)}, or give the training run to see its curves")


def training_progress(run_dir: str | Path) -> tuple[str, bool] | None:
    """How far the training of ``run_dir`` (written by ``coopsim train``) got, when it has not finished (no
    run-level ``train_summary.json``): ``(status, running)``, the status per seed of the run's ``config.yaml``, e.g.
    ``seed 0 at 14,848 of 200,000 env steps; seed 1 not started`` (the env steps of each seed's summary or
    checkpoint and the budget ``train.total_env_steps``, as ``coopsim eval``'s note on a seed without policy.pt,
    :func:`coopsim.platform.runner.checkpoint_note`), and whether a ``coopsim train`` process trains it now (it holds
    the run directory's lock, :func:`coopsim.platform.training.run_dir_lock`). None for a finished run. Never
    raises."""
    from coopsim.platform.runner import _checkpoint_steps, _training_budget
    from coopsim.platform.trainer import CHECKPOINT_NAME, METRICS_CSV, SUMMARY_NAME

    d = Path(run_dir)
    if (d / SUMMARY_NAME).is_file():
        return None
    try:
        seeds = yaml.safe_load((d / "config.yaml").read_text()).get("seeds")
    except (OSError, ValueError, yaml.YAMLError, AttributeError):
        seeds = None
    if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        seeds = [s.name.removeprefix("seed-") for s in training_seeds(d)]  # no readable seeds: the seed folders
    budget = _training_budget(d)
    parts = []
    for s in seeds:
        sub = d / f"seed-{s}"
        steps = _checkpoint_steps(sub) if sub.is_dir() else None
        if steps is not None:
            of = f" of {budget:,}" if budget is not None else ""
            done = budget is not None and steps >= budget and (sub / SUMMARY_NAME).is_file()
            parts.append(f"seed {s} finished ({steps:,}{of} env steps)" if done
                         else f"seed {s} at {steps:,}{of} env steps")
        elif (sub / CHECKPOINT_NAME).is_file():
            parts.append(f"seed {s}: its {CHECKPOINT_NAME} cannot be read")
        elif (sub / METRICS_CSV).is_file():
            parts.append(f"seed {s} has no checkpoint yet (a resume starts it over)")
        else:
            parts.append(f"seed {s} not started")
    return "; ".join(parts), _being_trained(d)


def _being_trained(run_dir: Path) -> bool:
    """Whether a ``coopsim train`` process holds the lock of ``run_dir`` (:func:`coopsim.platform.training.
    run_dir_lock`), i.e. trains it now; a shared lock taken and released at once tells, without a lock file."""
    import fcntl
    import os

    try:
        fd = os.open(run_dir, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing the descriptor releases the shared lock
    return False


#: the columns of a training seed's metrics.csv that train_curves.png draws, with their y labels
TRAINING_COLUMNS = {"episode/return": "episode return (sum of rewards)", "episode/win": "win rate",
                    "episode/success": "success rate"}
#: what one point of train_curves.png is (its figure says so)
TRAINING_POINT_NOTE = ("each point: the mean over the training episodes (sampled actions) that finished in that "
                       "iteration; not smoothed")


def training_columns(run_dir: str | Path) -> list[str]:
    """The metrics.csv columns of :data:`TRAINING_COLUMNS` that some seed of the training run ``run_dir`` logged:
    the panels of ``train_curves.png``, in order."""
    return list(_training_data(run_dir)[1])


def _training_data(run_dir: str | Path) -> tuple[dict[str, list[dict]], list[str]]:
    from coopsim.platform.trainer import METRICS_CSV, read_metrics

    data = {s.name: read_metrics(s) for s in training_seeds(run_dir) if (s / METRICS_CSV).is_file()}
    cols = [c for c in TRAINING_COLUMNS if any(r.get(c) not in (None, "") for rows in data.values() for r in rows)]
    return data, cols


def training_figure(run_dir: str | Path):
    """The figure of ``train_curves.png``: one panel per :func:`training_columns` column vs env steps, one line per
    seed with a marker on every point (a seed with one logged iteration still shows); a title naming the run and
    its agent, a y label per panel and :data:`TRAINING_POINT_NOTE`. Returns ``(fig, columns)``; ``(None, [])``
    without such columns."""
    data, cols = _training_data(run_dir)
    if not cols:
        return None, []
    try:
        cfg = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())
    except (OSError, ValueError, yaml.YAMLError):
        cfg = None
    cfg = cfg if isinstance(cfg, dict) else {}
    agents = cfg.get("agents") if isinstance(cfg.get("agents"), dict) else {}
    name = cfg.get("name") or Path(run_dir).name
    plt = _mpl()
    fig, axes = plt.subplots(1, len(cols), figsize=(4.4 * len(cols), 3.4), squeeze=False)
    for ax, c in zip(axes.flat, cols):
        for name_, rows in data.items():
            xy = [(float(r["env_steps"]), float(r[c])) for r in rows if r.get(c) not in (None, "")]
            ax.plot([x for x, _ in xy], [y for _, y in xy], lw=1, marker="o", ms=3, label=name_)
        ax.set_title(c, fontsize=9)
        ax.set_xlabel("env steps", fontsize=8)
        ax.set_ylabel(TRAINING_COLUMNS[c], fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    agent = f" ({agents['id']})" if agents.get("id") else ""
    fig.suptitle(f"training curves of {name}{agent}\n{TRAINING_POINT_NOTE}", fontsize=8)
    fig.tight_layout()
    return fig, cols


def plot_training(run_dir: str | Path) -> Path | None:
    """Episode return and win/success vs env steps, one line per seed, from ``seed-*/metrics.csv``
    (:func:`training_figure`); writes ``train_curves.png`` (None without such columns)."""
    fig, _ = training_figure(run_dir)
    if fig is None:
        return None
    return _save_figure(_mpl(), fig, Path(run_dir), "the training curves", "train_curves.png")


def _save_figure(plt, fig, folder: Path, what: str, name: str) -> Path:
    """Write ``fig`` to ``folder / name`` whole or not at all (:func:`report_writes` names ``what`` in its error),
    then close it; the path."""
    out = folder / name
    try:
        with report_writes(folder, what, out):
            atomic_savefig(fig, out, dpi=110)
    finally:
        plt.close(fig)
    return out


def _run_note(cfg: dict, rows: list[dict], summary: dict, has_summary: bool) -> str | None:
    """What a report must say about a run that did not finish: no summary.json (still running, or killed before
    writing it), or an interrupted one; None for a finished run."""
    planned = _planned_episodes(cfg)
    of = f" of {planned}" if planned else ""
    if not has_summary:
        return (f"the run has not finished: it has no summary.json yet (it is still running, or its process stopped "
                f"before writing one: it was killed, or a write failed, e.g. on a full disk); shown: the {len(rows)}{of} episode(s) finished so far, from "
                f"metrics.jsonl")
    if summary.get("interrupted"):
        return f"the run was interrupted: {summary.get('episodes_finished', len(rows))}{of} episode(s) finished"
    return None


#: metric families whose all-zero members (no messages, no interventions, no costs) tables and comparison plots
#: leave out; the files (summary.json, metrics.jsonl, compare.csv) keep them
HIDDEN_WHEN_ZERO = ("comm/", "shield/", "cost/")


def hidden_when_zero(metric: str, stats: list[dict]) -> bool:
    """Whether tables leave ``metric`` out: a :data:`HIDDEN_WHEN_ZERO` counter whose per-seed means are all zero (or
    missing) in every one of ``stats`` (its summary entries)."""
    return metric.startswith(HIDDEN_WHEN_ZERO) and not any(v for st in stats
                                                           for v in (st or {}).get("per_seed", {}).values())


#: metric families of the layers around the task (the channel's and the shield's counters): figures and the
#: comparison table show the scenario's own metrics before them (:func:`display_order`)
LAYER_PREFIXES = ("comm/", "shield/")


def _ordered_metrics(names) -> list[str]:
    names = list(names)
    head = [m for m in HEADLINE if m in names]
    return head + sorted(m for m in names if m not in head)


def display_order(names) -> list[str]:
    """``names`` in the order figures and the comparison table show them: the headline task metrics
    (:data:`HEADLINE`), then the scenario's other metrics (alphabetical), then the channel/shield counters
    (:data:`LAYER_PREFIXES`: headline ones first), so a panel or column limit never cuts the task's own metrics
    for the counters."""
    ordered = _ordered_metrics(names)
    return [m for m in ordered if not m.startswith(LAYER_PREFIXES)] + [m for m in ordered if m.startswith(LAYER_PREFIXES)]


#: what the headline metric ids measure, with their units: the legend line under the terminal tables (the ids stay
#: as they are: files and other tools use them)
METRIC_TERMS = {
    "success": "success rate (share of episodes)", "win": "win rate (share of episodes won)",
    "soc": "sum of costs (agent-steps)", "soc_over_lb": "sum of costs / lb", "lb": "lower bound on soc: sum of "
    "shortest-path lengths (agent-steps)", "makespan": "makespan (steps)", "throughput": "goals reached per step",
    "goal_fraction": "share of goals reached", "collisions": "collisions per episode",
    "steps": "episode length (steps)", "violations": "safety violations per episode",
}


def metric_terms_line(metrics) -> str | None:
    """One legend line naming the headline metrics among ``metrics`` in the field's terms, with units:
    ``soc = sum of costs (agent-steps), makespan (steps), ...``; None when none is there."""
    parts = [METRIC_TERMS[m] if METRIC_TERMS[m].startswith(m + " (") else f"{m} = {METRIC_TERMS[m]}"
             for m in metrics if m in METRIC_TERMS]
    return ", ".join(parts) if parts else None


#: the caption line of the terminal tables on what their interval is
CI_CAPTION = ("95% CI: Student-t over the per-seed means (n = seeds), clipped to the metric's range; "
              "— = one seed (no interval)")


def plot_selection(allm: dict[str, dict], max_metrics: int = 12) -> tuple[list[str], list[str]]:
    """The panels of ``metrics.png`` and the all-zero metrics its footnote names (:func:`plot_panels` without the
    episode rows)."""
    sel = plot_panels(allm, None, max_metrics)
    return sel["panels"], sel["zero"]


def _series(rows: list[dict] | None, m: str) -> tuple | None:
    """The per-episode values of metric ``m`` in ``rows`` (None where an episode has none), to spot duplicates."""
    return None if not rows else tuple((r.get("seed"), r.get(m)) for r in rows)


def plot_panels(allm: dict[str, dict], rows: list[dict] | None = None, max_metrics: int = 12) -> dict[str, Any]:
    """What ``metrics.png`` shows of the summary metrics ``allm`` (episode ``rows``: metrics.jsonl's).

    Returns:
        ``{"panels", "zero", "duplicates", "dropped"}``: the panels, at most ``max_metrics``, in
        :func:`display_order` (the task's metrics before the channel/shield counters); the metrics zero in every
        episode (no panel; named in the footnote, except the all-zero comm/, shield/ and cost/ counters the tables
        hide too, :func:`hidden_when_zero`); ``{metric: the metric it equals}`` for a channel/shield counter equal to
        an earlier one in every episode (e.g. ``comm/lost_bytes/late`` and ``comm/lost_bytes``: one panel, the other named in the
        footnote); and the metrics left out by the panel limit (named in the footnote)."""
    names = [m for m in display_order(allm) if m not in ID_KEYS]
    zero_all = [m for m in names if not any(v for v in allm[m].get("per_seed", {}).values())]
    rest = [m for m in names if m not in zero_all]
    duplicates: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    for m in rest:
        # only the channel/shield counters have aliases by construction (a per-cause counter equals its total when
        # one cause is the only one); a task metric that equals another in this run by chance keeps its panel
        key = _series(rows, m) if m.startswith(LAYER_PREFIXES) else None
        if key is None:
            continue
        if key in seen:
            duplicates[m] = seen[key]
        else:
            seen[key] = m
    rest = [m for m in rest if m not in duplicates]
    return {"panels": rest[:max_metrics], "zero": [m for m in zero_all if not hidden_when_zero(m, [allm[m]])],
            "duplicates": duplicates, "dropped": rest[max_metrics:]}


#: horizontal spread of one seed's episode dots in metrics.png (x = seed index -+ this), so the episodes of a binary
#: metric (win 0/1) do not collapse into two dots
JITTER = 0.18


def _plot_footnote(sel: dict[str, Any], max_metrics: int) -> str | None:
    """The footnote of ``metrics.png``: what it does not plot and why (:func:`plot_panels`)."""
    parts = []
    if sel["zero"]:
        parts.append("zero in every episode (not plotted): " + ", ".join(sel["zero"]))
    if sel["duplicates"]:
        parts.append("equal to another metric in every episode (not plotted): "
                     + ", ".join(f"{m} (= {k})" for m, k in sel["duplicates"].items()))
    if sel["dropped"]:
        parts.append(f"not plotted ({max_metrics}-panel limit; all are in summary.json): " + ", ".join(sel["dropped"]))
    return "; ".join(parts) or None


def metrics_figure(run: dict[str, Any], max_metrics: int = 12):
    """The figure of ``metrics.png`` of a loaded run (:func:`load_run`) and what it shows.

    One panel per metric (:func:`plot_panels`): each episode a dot (jittered around its seed's x), each seed's
    mean a short bar, the mean over seeds a line and its Student-t 95% interval a band, clipped to the metric's
    range (:func:`~coopsim.platform.stats.metric_bounds`). A run whose seeds are not independent (its agent learns
    during the run: ``seeds_note``) gets no band and a subtitle saying so; a one-seed metric has no band either.

    Returns:
        ``(fig, info)``, ``info`` = :func:`plot_panels`'s mapping plus ``"bands"`` (``{metric: (low, high)}`` drawn),
        ``"seed_means"`` (``{metric: {seed: mean}}`` drawn as bars), ``"title"`` and ``"footnote"``; ``(None, info)``
        when there is nothing to plot.
    """
    from coopsim.platform.stats import metric_bounds

    rows = run["rows"]
    allm = run["summary"]["metrics"]
    sel = plot_panels(allm, rows, max_metrics)
    metrics = sel["panels"]
    info = {**sel, "bands": {}, "seed_means": {}, "title": None, "footnote": _plot_footnote(sel, max_metrics)}
    if not rows or not metrics:
        return None, info
    plt = _mpl()
    cols = min(4, len(metrics))
    nrows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.6 * nrows + 0.3), squeeze=False)
    seeds = sorted({r["seed"] for r in rows})
    dependent = run.get("seeds_note")
    rng = np.random.default_rng(0)
    for ax, m in zip(axes.flat, metrics):
        means = {}
        for i, s in enumerate(seeds):
            ys = [r.get(m) for r in rows if r["seed"] == s and r.get(m) is not None]
            xs = i + (rng.uniform(-JITTER, JITTER, len(ys)) if len(ys) > 1 else np.zeros(len(ys)))
            ax.scatter(xs, ys, s=12, alpha=0.6, color=f"C{i % 10}", linewidths=0)
            if ys:
                means[s] = float(np.mean(ys))
                ax.hlines(means[s], i - 0.32, i + 0.32, color=f"C{i % 10}", lw=2.2, label="_seed mean")
        info["seed_means"][m] = means
        st = allm.get(m, {})
        if st.get("mean") is not None:
            ax.axhline(st["mean"], color="k", lw=1)
            if st.get("ci95_low") is not None and not dependent:
                lo, hi = st["ci95_low"], st["ci95_high"]
                bounds = metric_bounds(m, [r.get(m) for r in rows if isinstance(r.get(m), (int, float))])
                if bounds is not None:  # an older summary.json's interval may leave the metric's range
                    lo, hi = min(max(lo, bounds[0]), bounds[1]), max(min(hi, bounds[1]), bounds[0])
                ax.axhspan(lo, hi, color="k", alpha=0.1)
                info["bands"][m] = (lo, hi)
        ax.set_title(m, fontsize=9)
        ax.set_xticks(range(len(seeds)), [str(s) for s in seeds], fontsize=7)
        ax.set_xlim(-0.6, len(seeds) - 0.4)
        ax.set_xlabel("seed", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.ticklabel_format(axis="y", useOffset=False)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    if dependent:
        what = "line: mean over seeds; no CI band"
    elif any(info["bands"].values()):
        what = "line: mean over seeds; band: Student-t 95% CI over per-seed means"
    else:
        what = "line: mean over seeds; no CI band (one seed)"
    title = (f"{run['config'].get('name')}: each dot one episode, grouped by seed; bar: the seed's mean; {what}")
    if dependent:
        title += "\n" + _wrap(dependent if dependent.startswith("seeds are not independent")
                               else f"seeds are not independent: {dependent}", 160)
    info["title"] = title
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    note = info["footnote"]
    if note:
        note = _wrap(note, 180)
        fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=7)
        height = fig.get_figheight()  # the x labels' room plus one line per footnote line, in inches
        fig.subplots_adjust(bottom=min(0.45, (0.42 + 0.13 * (note.count("\n") + 1)) / height))
    return fig, info


def _wrap(text: str, width: int) -> str:
    import textwrap

    return textwrap.fill(text, width)


def plot_run(run_dir: str | Path, max_metrics: int = 12) -> Path | None:
    """Per-episode values of the run's metrics, one colour per seed, per-seed means, mean ± 95% CI
    (:func:`metrics_figure`); writes ``metrics.png``."""
    run = load_run(run_dir)
    fig, _ = metrics_figure(run, max_metrics)
    if fig is None:
        return None
    return _save_figure(_mpl(), fig, Path(run_dir), "its plot", "metrics.png")


def summary_table(run: dict[str, Any]):
    from rich.table import Table

    every = ("summary.json has every metric" if run.get("has_summary", True) and not run.get("summary_rebuilt")
             else "metrics.jsonl has every value")
    shown = [m for m in _ordered_metrics(run["summary"]["metrics"])
             if not hidden_when_zero(m, [run["summary"]["metrics"][m]])]
    caption = f"{CI_CAPTION}\nall-zero comm/, shield/ and cost/ counters are hidden here; {every}"
    terms = metric_terms_line(shown)
    if terms:
        caption += f"\n{terms}"
    if run.get("seeds_note"):  # a learner that learns during the run: its seeds are not independent samples
        caption += f"\nnote: {run['seeds_note']}"
    t = Table(title=f"{run['config'].get('name')}  ({run['dir']})", caption=caption, caption_justify="left")
    for c in ("metric", "mean", "95% CI", "seeds", "episodes"):
        t.add_column(c, justify="right" if c != "metric" else "left")
    for m in shown:
        st = run["summary"]["metrics"][m]
        mean, lo, hi = _fmt_ci(st.get("mean"), st.get("ci95_low"), st.get("ci95_high"))
        ci = "—" if st.get("ci95_low") is None else f"[{lo}, {hi}]"
        t.add_row(m, mean, ci, str(st.get("n_seeds")), str(st.get("n_episodes")))
    return t


def _fmt(x) -> str:
    """A table cell: whole numbers in full up to 10**9, then in e-notation (1e+20, not 21 digits); others 4 digits."""
    if x is None:
        return "—"
    if not math.isfinite(x) or abs(x) >= 1e9:
        return f"{x:.4g}"
    if abs(x) >= 1000 or x == int(x):
        return f"{x:.0f}" if x == int(x) else f"{x:.1f}"
    return f"{x:.4g}"


def _fmt_ci(mean, low, high) -> tuple[str, str, str]:
    """A mean and its interval's ends as table text with one precision for all three: whole numbers when all three
    are whole, else the decimals that give the largest of them 4 significant digits (``781.7 [649.3, 914.0]``,
    ``1696 [1434, 1958]``, ``0.556 [0.000, 1.000]``); e-notation for non-finite or huge values (:func:`_fmt`);
    ``—`` for a missing one. Without an interval: the mean as :func:`_fmt` writes it."""
    if low is None or high is None or mean is None:
        return _fmt(mean), _fmt(low), _fmt(high)
    vals = [float(mean), float(low), float(high)]
    if not all(math.isfinite(v) for v in vals) or max(abs(v) for v in vals) >= 1e9:
        return tuple(f"{v:.4g}" for v in vals)  # type: ignore[return-value]
    if all(v == int(v) for v in vals):
        decimals = 0
    else:
        biggest = max(abs(v) for v in vals)
        decimals = max(0, 3 - math.floor(math.log10(biggest))) if biggest > 0 else 0
    return tuple(f"{v + 0.0:.{decimals}f}".replace("-0." + "0" * decimals, "0." + "0" * decimals)
                 if decimals else f"{round(v) + 0:d}" for v in vals)  # type: ignore[return-value]


#: most frames a replay GIF holds: a longer episode is drawn at evenly spaced steps (captions keep the true step),
#: so a 70,000-step MG-MAPF episode costs what 300 steps do (every frame drawn took 5 GB per 3,000 steps)
MAX_GIF_FRAMES = 300


def replay_steps(num_steps: int, max_frames: int | None = None) -> np.ndarray:
    """int64 step indices to draw of a replay with ``num_steps`` states: every one, or at most ``max_frames``
    evenly spaced, always the first and the last (the outcome). For scenarios' ``render_replay(replay,
    max_frames=...)``."""
    if max_frames is None or num_steps <= max_frames:
        return np.arange(num_steps, dtype=np.int64)
    return np.unique(np.linspace(0, num_steps - 1, max(int(max_frames), 2)).round().astype(np.int64))


def render_replays(run_dir: str | Path, max_replays: int = 1, fps: int = 6) -> list[Path]:
    """Write animated GIFs of the run's first ``max_replays`` replays, if its scenario can render them; a scenario
    whose ``render_replay`` takes ``max_frames`` gets :data:`MAX_GIF_FRAMES`."""
    import imageio.v3 as iio

    from coopsim.platform import registry

    run = load_run(run_dir)
    sid = run["config"]["scenario"]["id"]
    factory = registry.spec("scenario", sid).load()
    cls = getattr(factory, "cls", factory)
    render = getattr(cls, "render_replay", None)
    if render is None:
        return []
    import inspect

    kw = {"max_frames": MAX_GIF_FRAMES} if "max_frames" in inspect.signature(render).parameters else {}
    outs = []
    for path in sorted((Path(run_dir) / "replays").glob("*.npz"))[:max_replays]:
        try:
            with np.load(path, allow_pickle=False) as z:
                replay = {k: z[k] for k in z.files}
        except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
            # numpy's own text for a non-.npz file suggests allow_pickle=True, which a user should not follow
            why = "" if "pickle" in str(exc) else f": {exc}"
            raise CoopsimError(f"{path}: not a replay file (a .npz written by `coopsim run`; this one is damaged or "
                               f"of another kind: remove it, or run the episodes again){why}") from None
        frames = render(replay, **kw)
        out = Path(run_dir) / f"replay_{path.stem}.gif"
        import io

        buf = io.BytesIO()
        iio.imwrite(buf, np.stack(frames), extension=".gif", duration=int(1000 / fps), loop=0)
        with report_writes(run_dir, "the replay GIF", out):
            atomic_write_bytes(out, buf.getvalue())
        outs.append(out)
    return outs


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _shared_seeds(runs: list[dict], flat: list[dict], line_keys: list[str], x_key: str | None) -> dict[int, list[str]]:
    """Seeds that two or more runs pooled into the same row both ran: ``{seed: [run dir names]}``."""
    by_cell: dict[tuple, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r, f in zip(runs, flat):
        cell = (tuple(str(f.get(k)) for k in line_keys), json.dumps(f.get(x_key)) if x_key else "")
        for seed in sorted({int(row["seed"]) for row in r["rows"] if "seed" in row}):
            by_cell[cell][seed].append(Path(r["dir"]).name)
    out: dict[int, list[str]] = {}
    for seeds in by_cell.values():
        for seed, names in seeds.items():
            if len(names) > 1:
                merged = out.setdefault(seed, [])
                merged += [n for n in names if n not in merged]
    return dict(sorted(out.items()))


#: config keys that say where a run is written and which of its files are kept, not what it runs: runs differing only
#: in them are the same config (``replays``: how many episodes' replay files are kept)
WHERE_KEYS = ("out_dir", "replays")


def same_config(a: dict, b: dict) -> bool:
    """Whether two runs' parsed ``config.yaml`` mappings are the same config: equal as parsed, apart from
    :data:`WHERE_KEYS` (``out_dir`` as typed: ``runs/x``, ``runs/x/`` and ``/abs/runs/x`` are one folder or
    different ones, and neither changes the episodes); key order, layout and comment lines do not count; seeds,
    episodes and name do. The test ``sweep --skip-done`` applies to decide that a run directory holds "a run of
    exactly that config", and ``report`` to count repeats once. Raises nothing."""
    def what(c: dict) -> dict:
        return {k: v for k, v in c.items() if k not in WHERE_KEYS} if isinstance(c, dict) else c
    return what(a) == what(b)


def config_differences(a: dict, b: dict, limit: int = 3) -> list[str]:
    """The keys in which two parsed configs differ (as :func:`same_config` sees them, :data:`WHERE_KEYS` left out),
    dotted and sorted, each as ``key: <a> -> <b>`` (``(not set)`` where one has no such key); at most ``limit``
    entries plus ``... and K more``. Empty when :func:`same_config` holds. Raises nothing."""
    missing = object()

    def flat(c: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(c, dict) and (c or not prefix):
            out: dict[str, Any] = {}
            for k, v in c.items():
                if prefix or k not in WHERE_KEYS:
                    out.update(flat(v, f"{prefix}{k}."))
            return out
        return {prefix[:-1]: c}

    fa, fb = flat(a if isinstance(a, dict) else {}), flat(b if isinstance(b, dict) else {})
    keys = sorted(k for k in set(fa) | set(fb) if fa.get(k, missing) != fb.get(k, missing))
    show = lambda v: "(not set)" if v is missing else repr(v)  # noqa: E731
    lines = [f"{k}: {show(fa.get(k, missing))} -> {show(fb.get(k, missing))}" for k in keys[:limit]]
    return lines + ([f"... and {len(keys) - limit} more"] if len(keys) > limit else [])


#: what :func:`~coopsim.platform.recorder.new_run_dir` puts after the run name: ``-<UTC time>Z-<6 hex>``
_RUN_DIR_STAMP = re.compile(r"-(\d{8}T\d{6}Z)-[0-9a-f]{6}$")


def _finished_whole(run: dict[str, Any]) -> bool:
    """Whether a loaded run (:func:`load_run`) says it finished uninterrupted and without an error (its own readable
    summary.json: ``"interrupted": false``, no ``error``)."""
    s = run["summary"]
    return bool(run.get("has_summary")) and not run.get("summary_rebuilt") and s.get("interrupted") is False \
        and s.get("error") is None


def _newness(run: dict[str, Any]) -> tuple[str, float]:
    """How new a run is: the UTC time in its directory name (``<name>-<time>Z-<id>``), then its config.yaml's mtime."""
    m = _RUN_DIR_STAMP.search(Path(run["dir"]).name)
    try:
        mtime = (Path(run["dir"]) / "config.yaml").stat().st_mtime
    except OSError:
        mtime = 0.0
    return (m.group(1) if m else "", mtime)


def _episode_keys(rows: list[dict]) -> set[tuple[int, int]]:
    """The episodes of a run's rows as ``(seed, episode)`` (the row's place among its seed's rows when it names no
    ``episode``)."""
    seen: dict[int, int] = defaultdict(int)
    keys = set()
    for row in rows:
        seed = row.get("seed")
        ep = row.get("episode") if _is_int(row.get("episode")) else seen[seed]
        seen[seed] += 1
        keys.add((seed, ep))
    return keys


def repeated_runs(runs: list[dict[str, Any]]) -> dict[int, int]:
    """The runs (loaded by :func:`load_run`) that repeat another one: ``{index of a left-out run: index of the run
    kept}``. Runs of the same config (:func:`same_config`: seeds and episodes included) that evaluated the same
    policy (their ``checkpoint``) are repeats of one experiment (runs are deterministic: the same config and seed
    give the same episodes), not independent samples, e.g. a sweep cell re-run by ``sweep --skip-done`` beside its
    interrupted copy. Of each such set one is kept: a run that finished uninterrupted first, then the one with the
    most finished episodes (metrics.jsonl's), then the newest (the time in its directory name, else its config.yaml's
    mtime); the same directory given twice is one run. Raises nothing."""
    sets: list[list[int]] = []
    for i, r in enumerate(runs):
        for s in sets:
            first = runs[s[0]]
            if r["checkpoint"] == first["checkpoint"] and same_config(r["config"], first["config"]):
                s.append(i)
                break
        else:
            sets.append([i])
    out: dict[int, int] = {}
    for s in sets:
        if len(s) < 2:
            continue
        keep = max(s, key=lambda i: (_finished_whole(runs[i]), len(runs[i]["rows"]), _newness(runs[i]), -i))
        out.update({i: keep for i in s if i != keep})
    return out


def _repeat_note(left: dict[str, Any], kept: dict[str, Any], others: int) -> str:
    """The note of a run left out of a comparison as a repeat of ``kept`` (:func:`repeated_runs`), which also
    repeats ``others`` more left-out runs: which episodes the two share and why ``kept`` is the one counted."""
    a = str(kept["dir"])
    with contextlib.suppress(OSError):
        if Path(left["dir"]).resolve() == Path(kept["dir"]).resolve():
            return f"it is {a} given again; each run is counted once"
    n = len(left["rows"])
    same = len(_episode_keys(left["rows"]) & _episode_keys(kept["rows"]))
    if n == 1:
        shared = "its one episode is the same episode" if same else "its one episode is not one of the kept run's"
    elif same == n:
        shared = f"all {n} of its episodes are the same episodes"
    else:
        shared = f"{same} of its {n} episodes are the same episodes"
    m = len(kept["rows"])
    if _finished_whole(kept) and not _finished_whole(left):
        why = f"it finished uninterrupted ({m} episode{'s' if m != 1 else ''})"
    elif m > n:
        why = f"it has more finished episodes ({m})"
    else:
        why = f"it is the newest ({m} episode{'s' if m != 1 else ''})"
    also = f"; {others} other run{'s' if others != 1 else ''} left out repeat{'' if others != 1 else 's'} it too" \
        if others else ""
    return (f"it repeats {a} (same config and seeds: {shared}{also}); runs of one "
            f"config are counted once: {Path(a).name} is kept, as {why}")


def _planned_episodes(cfg: dict) -> int | None:
    """``len(seeds) * episodes`` of a run's config, None when it cannot be read."""
    try:
        return len(cfg["seeds"]) * int(cfg.get("episodes", 1))
    except (KeyError, TypeError, ValueError):
        return None


def run_complete(run: dict[str, Any]) -> bool:
    """Whether a loaded run (:func:`load_run`) holds every episode it planned: it has its summary.json, which says
    it was neither interrupted nor failed, and metrics.jsonl has ``len(seeds) * episodes`` rows. Raises nothing."""
    if not _finished_whole(run):
        return False
    planned = _planned_episodes(run["config"])
    return planned is None or len(run["rows"]) >= planned


#: the comparison's field that keeps apart runs of an agent that learns during ``coopsim run`` whose seed lists
#: differ but share a seed (:func:`_learner_seed_conflicts`): the run's seed list, in its order
RUN_SEEDS_KEY = "run_seeds"
#: the :data:`RUN_SEEDS_KEY` value of one-seed runs (each starts a fresh learner, so they pool together)
ONE_SEED_PER_RUN = "1 per run"


def _seeds_text(seeds: list) -> str:
    """A run's seed list as short text: ranges when sorted (``0-2``), else in its order (``2,0,1``)."""
    try:
        ints = [int(x) for x in seeds]
    except (TypeError, ValueError):
        return ",".join(map(str, seeds))
    return seed_list(ints) if ints == sorted(set(ints)) else ",".join(map(str, ints))


def _learner_seed_conflicts(runs: list[dict], flat: list[dict]) -> tuple[dict[int, str], dict[str, str]]:
    """Runs that would be pooled into one row (same ``flat`` fields) although their agent learns during ``coopsim
    run`` (:func:`~coopsim.platform.runner.agent_learns_online`) and they ran a seed in common from different seed
    lists: that seed's episodes are not the same experiment (in one run the learner comes to it fresh, in the other
    after the seeds before it). Returns ``({run index: its seed list as text}, {note key: note})``; the caller gives
    those runs :data:`RUN_SEEDS_KEY`, so they get rows of their own. Raises nothing."""
    from itertools import combinations

    from coopsim.platform.runner import agent_learns_online

    cells: dict[str, list[int]] = defaultdict(list)
    for i, (r, f) in enumerate(zip(runs, flat)):
        agents = r["config"].get("agents") if isinstance(r["config"].get("agents"), dict) else {}
        if isinstance(r["config"].get("seeds"), list) and agent_learns_online(agents.get("id"), agents.get("params")):
            cells[json.dumps(f, sort_keys=True, default=str)].append(i)
    split: dict[int, str] = {}
    notes: dict[str, str] = {}
    for members in cells.values():
        hit: set[int] = set()
        common: set[str] = set()
        for a, b in combinations(members, 2):
            sa, sb = runs[a]["config"]["seeds"], runs[b]["config"]["seeds"]
            both = set(map(str, sa)) & set(map(str, sb))
            if both and list(sa) != list(sb):
                hit |= {a, b}
                common |= both
        if not hit:
            continue
        for i in hit:  # one-seed runs start a fresh learner each: independent, so they still pool together
            seeds = runs[i]["config"]["seeds"]
            split[i] = ONE_SEED_PER_RUN if len(seeds) == 1 else _seeds_text(seeds)
        ids = sorted(hit)
        agent = (runs[ids[0]]["config"].get("agents") or {}).get("id")
        shared = ", ".join(sorted(common, key=lambda x: (len(x), x)))
        lists = "; ".join(f"{Path(runs[i]['dir']).name}: seeds {_seeds_text(runs[i]['config']['seeds'])}"
                          for i in ids)
        notes[f"{RUN_SEEDS_KEY} {len(notes) + 1}" if notes else RUN_SEEDS_KEY] = (
            f"not pooled: these runs ran seed(s) {shared} with otherwise the same settings, but agent '{agent}' learns "
            f"during the run, so a seed's episodes depend on the seeds its learner played before it in its run, and "
            f"their seed lists differ ({lists}); each run of several seeds keeps a row of its own, runs of one seed "
            f"(a fresh learner each) pool together as '{ONE_SEED_PER_RUN}' (column {RUN_SEEDS_KEY})")
    return split, notes


def compare_runs(run_dirs: list[str | Path], out_dir: str | Path | None = None,
                 group_by: tuple[str, ...] | list[str] = (), *, write: bool = True) -> dict[str, Any]:
    """Group runs by the config fields that differ; tables and metric-vs-x plots with 95% CI bands.

    The x axis is the numeric field that differs (e.g. ``scenario.params.num_agents``); lines are the
    combinations of the other differing fields (e.g. ``agents.id``). Seeds of runs that share every
    other field are pooled (``pooled_seeds`` in the result says when that happened), unless ``seeds`` is in
    ``group_by``: the config keys a sweep varied (its ``--grid`` axes), each of which, when its values differ,
    labels rows of its own even where it would be pooled otherwise (a sweep over ``seeds`` gives one row per
    seeds value). Writes ``compare_<metric>.png`` into ``out_dir`` (default: the first run's parent). Counters of
    :data:`HIDDEN_WHEN_ZERO` that are zero in every run are left out of ``metrics`` (the table and the plots; listed
    in ``hidden``), as the single-run table does; ``compare.csv`` keeps every metric. ``write=False``: no file is
    written (the table only; ``plots`` is empty), for a folder that cannot be written.

    The policy a run evaluated (:func:`evaluated_checkpoint`: the ``--checkpoint`` of ``coopsim eval``, ``none`` for
    ``coopsim run`` without one, ``not recorded`` for older run directories) is a field like the config's, named
    :data:`CHECKPOINT_KEY`: runs of different checkpoints get rows of their own and are never pooled as "the same
    settings". Its table cells and legend entries are short forms (``<training run>/seed-0``,
    :func:`checkpoint_labels`; ``labels`` in the result maps each value to its short form), compare.csv holds the
    absolute paths.

    Runs of the same config (seeds and episodes included) and the same evaluated policy are repeats of one
    experiment, not independent samples (the same config and seed give the same episodes): one of them is counted,
    the others are left out of everything above (table, compare.csv, plots) with a note each, ``left out <run>``
    (:func:`repeated_runs` says which is kept: one that finished uninterrupted, else the most episodes, else the
    newest). Runs that differ only in their seeds are pooled as before.

    Returns:
        ``{"x_key", "line_keys", "shown_line_keys", "table", "metrics", "plots", "hidden", "pooled_seeds", "notes",
        "labels", "left_out"}``: the table has one entry per row (``line``: its values of ``line_keys``, ``x``,
        ``summary``, ``seeds``, ``episodes`` (in all), ``episodes_per_seed``, ``complete`` (False when it pools a
        run that was interrupted, failed or has not finished: :func:`run_complete`), ``runs`` (absolute run
        directories) and ``partial_runs``); ``notes`` maps a run directory (or a topic) to one line; ``left_out`` maps
        each run directory left out as a repeat to the one it repeats (as given).

    Runs of an agent that learns during ``coopsim run`` (``graph_safe-v0``, ``safe_baselines/*``) that ran a seed in
    common from different seed lists are not pooled (that seed's episodes depend on the seeds played before it in
    each run): they get rows of their own, told apart by :data:`RUN_SEEDS_KEY`, with a note saying why.

    Raises:
        CoopsimError: a run directory cannot be read (:func:`load_run`).
        WriteError: ``compare.csv`` or a plot cannot be written into ``out_dir`` (:func:`report_writes`).
    """
    loaded = [load_run(d) for d in run_dirs]
    repeats = repeated_runs(loaded)  # repeats of one experiment are counted once: the others are left out
    runs = [r for i, r in enumerate(loaded) if i not in repeats]
    pooled = {"name", "seeds", *WHERE_KEYS} - set(group_by)
    # the evaluated policy is a field like the config's: runs of different checkpoints are never pooled
    flat = [{**_flatten({k: v for k, v in r["config"].items() if k not in pooled}), CHECKPOINT_KEY: r["checkpoint"]}
            for r in runs]
    # an agent that learns during the run: the same seed from different seed lists is not the same experiment
    split, learner_notes = _learner_seed_conflicts(runs, flat) if "seeds" in pooled else ({}, {})
    for i, text in split.items():
        flat[i][RUN_SEEDS_KEY] = text
    keys = sorted({k for f in flat for k in f})
    differing = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]
    numeric = [k for k in differing if all(isinstance(f.get(k), (int, float)) and not isinstance(f.get(k), bool) for f in flat)]
    x_key = next((k for k in numeric if k.endswith("num_agents")), numeric[0] if numeric else None)
    line_keys = [k for k in differing if k != x_key]
    groups: dict[tuple, dict[Any, list[dict]]] = defaultdict(lambda: defaultdict(list))
    members: dict[tuple, int] = defaultdict(int)
    row_runs: dict[tuple, list[dict]] = defaultdict(list)  # the runs each row pools
    for r, f in zip(runs, flat):
        line = tuple(str(f.get(k)) for k in line_keys)
        groups[line][f.get(x_key) if x_key else 0].extend(r["rows"])
        members[(line, f.get(x_key) if x_key else 0)] += 1
        row_runs[(line, f.get(x_key) if x_key else 0)].append(r)
    pooled_seeds = "seeds" in pooled and any(n > 1 for n in members.values())
    shared = _shared_seeds(runs, flat, line_keys, x_key) if pooled_seeds else {}
    every = display_order({m for r in runs for m in r["summary"]["metrics"]})  # compare.csv keeps every one
    metrics = [m for m in every if not hidden_when_zero(m, [r["summary"]["metrics"].get(m) for r in runs])]
    table: list[dict[str, Any]] = []
    for line, by_x in sorted(groups.items()):
        for x, rows in sorted(by_x.items(), key=lambda kv: (kv[0] is None, kv[0])):
            s = summarize(rows)
            seeds = sorted({r["seed"] for r in rows if isinstance(r.get("seed"), int)})
            its = row_runs[(line, x)]
            per_seed = {seed: sum(1 for r in rows if r.get("seed") == seed) for seed in seeds}
            partial = [str(r["dir"]) for r in its if not run_complete(r)]
            table.append({"line": dict(zip(line_keys, line)), "x": x, "summary": s, "seeds": seeds,
                          "episodes": len(rows), "episodes_per_seed": per_seed, "complete": not partial,
                          "runs": [str(Path(r["dir"]).resolve()) for r in its], "partial_runs": partial,
                          "dependent_seeds": any(r.get("seeds_note") for r in its)})
    # what the table and the plot legends show of a value (compare.csv has the value itself)
    labels = {CHECKPOINT_KEY: checkpoint_labels([r["checkpoint"] for r in runs])} if CHECKPOINT_KEY in line_keys else {}
    scen_ids = sorted({r["config"]["scenario"]["id"] for r in runs})
    notes = {str(r["dir"]): r["note"] for r in runs if r["note"]}
    for i, k in repeats.items():  # a left-out run's own note (interrupted, ...) is not about the comparison
        others = sum(1 for j, kk in repeats.items() if kk == k and j != i)
        notes[f"left out {loaded[i]['dir']}"] = _repeat_note(loaded[i], loaded[k], others)
    for seed, names in shared.items():  # pooled runs that ran the same seed: one seed of the interval, not two
        notes[f"seed {seed}"] = (f"runs {', '.join(names)} all ran seed {seed} with the same settings: their episodes "
                                 f"are pooled into one seed of the interval (n_seeds counts it once); give them "
                                 f"different seeds for independent samples")
    notes.update(learner_notes)
    dependent = [Path(r["dir"]).name for r in runs if r.get("seeds_note")]
    if dependent:  # seeds of one learner: the Student-t interval over seeds treats them as independent
        agents = sorted({str((r["config"].get("agents") or {}).get("id")) for r in runs if r.get("seeds_note")})
        notes["seeds not independent"] = (
            f"{', '.join(dependent)}: agent{'s' if len(agents) > 1 else ''} {', '.join(map(repr, agents))} "
            f"learn{'' if len(agents) > 1 else 's'} during the run and carr{'y' if len(agents) > 1 else 'ies'} what "
            f"{'they learn' if len(agents) > 1 else 'it learns'} from one seed to the next, so the seeds of "
            f"{'each of these runs' if len(dependent) > 1 else 'this run'} are not independent samples (the 95% CI "
            f"assumes they are); one seed per run gives independent seeds")
    unknown = [Path(r["dir"]).name for r in runs if r["checkpoint"] == NOT_RECORDED]
    if CHECKPOINT_KEY in line_keys and unknown:
        notes["checkpoint"] = (f"{', '.join(unknown)} record{'s' if len(unknown) == 1 else ''} no evaluated "
                               f"checkpoint (written before coopsim recorded it in summary.json, or stopped before "
                               f"writing summary.json), so {'it is' if len(unknown) == 1 else 'they are'} not pooled "
                               f"with runs that do")
    if len(scen_ids) > 1:  # a note line of the report, not a python warning with file, line and source
        notes["comparison"] = (f"runs of different scenarios ({', '.join(scen_ids)}): their metrics need not be "
                               f"comparable")
    out_dir = Path(out_dir) if out_dir else Path(run_dirs[0]).parent
    if write:
        _write_compare_csv(out_dir / "compare.csv", line_keys, x_key, table, every)
    plots = []
    shown = shown_line_keys(line_keys, flat)
    if (x_key is not None or len(table) > 1) and write:
        import warnings

        plt = _mpl()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if x_key is not None:
                no_band = {tuple(row["line"][k] for k in line_keys) for row in table if row["dependent_seeds"]}
                plots = _compare_plots(plt, groups, metrics, x_key, out_dir,
                                       label=lambda line: ", ".join(_cell(labels, k, v) for k, v in zip(line_keys, line)),
                                       legend_title=", ".join(table_headers(line_keys, [x_key]).values()) or None,
                                       no_band=no_band)
            else:  # runs that differ in no numeric key (e.g. two agents): one point with its CI per run
                heads = table_headers(shown)
                names = [", ".join(_cell(labels, k, row["line"][k]) for k in (shown or line_keys)) or "run"
                         for row in table]
                if len(set(names)) < len(names):  # rows told apart only by keys the table leaves to compare.csv
                    names = [f"{n} (row {i + 1})" for i, n in enumerate(names)]
                plots = _compare_points(plt, table, metrics[:TABLE_METRICS], out_dir, names,
                                        ", ".join(heads[k] for k in shown) or None,
                                        no_bar={i for i, row in enumerate(table) if row["dependent_seeds"]})
        if caught:
            first = str(caught[0].message).splitlines()[0] if str(caught[0].message) else caught[0].category.__name__
            notes["plots"] = (f"{len(caught)} plotting warning(s) while drawing the comparison plots, e.g. {first}"
                              if len(caught) > 1 else f"plotting warning: {first}")
    return {"x_key": x_key, "line_keys": line_keys, "shown_line_keys": shown, "table": table, "metrics": metrics,
            "plots": plots, "hidden": [m for m in every if m not in metrics],
            "pooled_seeds": pooled_seeds, "notes": notes, "labels": labels,
            "left_out": {str(loaded[i]["dir"]): str(loaded[k]["dir"]) for i, k in repeats.items()}}


def comparison_files_text(res: dict[str, Any]) -> str:
    """What :func:`compare_runs` (``res``, written with ``write=True``) wrote into its folder, for the line naming the
    folder: ``compare.csv and 3 PNGs (compare_<metric>.png, one per metric)``, or ``compare.csv only; no plots: ...``
    saying why none were drawn."""
    plots, metrics = res.get("plots") or [], res.get("metrics") or []
    if plots:
        which = "one per metric" if len(plots) >= len(metrics) else f"the first {len(plots)} of {len(metrics)} metrics"
        return f"compare.csv and {len(plots)} PNG{'' if len(plots) == 1 else 's'} (compare_<metric>.png, {which})"
    if res.get("x_key") is None and len(res.get("table") or []) < 2:
        why = ("the runs are one row of the table (they differ only in their seeds); compare.csv and the table have "
               "every value")
    elif res.get("x_key") is None:
        why = ("the runs differ in no numeric config key to plot the metrics against (e.g. scenario.params.num_agents); "
               "compare.csv and the table have every value")
    else:
        why = "no metric to plot"
    return f"compare.csv only; no plots: {why}"


#: at most this many differing config keys are columns of the comparison table (the rest: compare.csv)
MAX_TABLE_KEYS = 6
#: a differing config key whose value is longer than this (as text) in some run is left to compare.csv
MAX_TABLE_VALUE = 24


#: the comparison's field of the policy each run evaluated (:func:`evaluated_checkpoint`), beside the config keys
CHECKPOINT_KEY = "checkpoint"


def shown_line_keys(line_keys: list[str], flat: list[dict[str, Any]]) -> list[str]:
    """Returns the differing keys the comparison table shows, at most :data:`MAX_TABLE_KEYS` (``compare.csv`` has
    all): :data:`CHECKPOINT_KEY` always (its cells are short forms), and the config keys whose every value is short
    (at most :data:`MAX_TABLE_VALUE` characters), or one long one when no key is short (rows must differ in the
    table). Ids come first, then the checkpoint, then the other keys by depth;
    ``train.*`` keys (the training settings an evaluation's config carries along, which ``coopsim run`` and ``eval``
    never read) come after every other key."""
    order = lambda k: (k == "train" or k.startswith("train."), not k.endswith(".id"), k.count("."),  # noqa: E731
                       line_keys.index(k))
    short = sorted((k for k in line_keys
                    if k == CHECKPOINT_KEY or all(len(str(f.get(k))) <= MAX_TABLE_VALUE for f in flat)), key=order)
    if not short and line_keys:  # every differing value is long (e.g. map paths): show one, folded, so rows differ
        short = [min(line_keys, key=order)]
    return short[:MAX_TABLE_KEYS]


def table_headers(keys: list[str], others: list[str] = ()) -> dict[str, str]:
    """The comparison table's header of each dotted config key of ``keys``: its shortest ending of whole parts that
    no other key or column (``keys``, ``others``) ends with, e.g. ``agents.params.delta`` -> ``delta``, and
    ``agents.params.seed`` beside ``scenario.params.seed`` -> ``agents.params.seed``; an id keeps its section
    (``agents.id``). ``compare.csv`` keeps the full keys."""
    columns = list(keys) + list(others)
    out = {}
    for k in keys:
        parts = k.split(".")
        n = min(2 if parts[-1] == "id" else 1, len(parts))
        while n < len(parts):
            end = ".".join(parts[-n:])
            if not any(o != k and (o == end or o.endswith("." + end)) for o in columns):
                break
            n += 1
        out[k] = ".".join(parts[-n:])
    return out


def _cell(labels: dict[str, dict[str, str]], key: str, value: Any) -> str:
    """A comparison table cell (or legend part) of ``key``'s ``value``: its short form from ``labels`` if it has one."""
    return labels.get(key, {}).get(value, value)


#: how many metrics the comparison table shows by default (and the per-run point charts draw; compare.csv has all)
TABLE_METRICS = 6
#: markers and line styles of the comparison plots' series, one pair per series: identical series stay visible
#: (open markers of different shapes and sizes, different dashes)
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
SERIES_STYLES = ("-", "--", ":", "-.")


def series_style(i: int) -> dict[str, Any]:
    """The matplotlib keywords of the ``i``-th series of a comparison plot: its colour, an open marker of its own
    shape (larger for earlier series, so one drawn over another leaves a ring) and a line style of its own."""
    return {"color": f"C{i % 10}", "marker": SERIES_MARKERS[i % len(SERIES_MARKERS)],
            "linestyle": SERIES_STYLES[i % len(SERIES_STYLES)], "markerfacecolor": "none",
            "markersize": max(4.0, 9.0 - 1.2 * i), "markeredgewidth": 1.3}


def _save_compare(plt, fig, out_dir: Path, m: str) -> Path:
    return _save_figure(plt, fig, out_dir, "the comparison plot", f"compare_{m.replace('/', '_')}.png")


def compare_points_figure(plt, table: list[dict], m: str, labels: list[str], key_title: str | None = None,
                          no_bar: set[int] | frozenset[int] = frozenset()):
    """The point-with-CI chart of metric ``m`` over the rows of a comparison ``table`` that differ in no numeric
    key: one x position per row (labelled ``labels[i]``: what differs, e.g. the agent id), its mean over seeds and
    Student-t 95% CI (none for one seed, and none for the rows whose indices are in ``no_bar``: an agent that learns
    during the run, whose seeds are not independent samples). Returns ``(fig, points)``, ``points`` =
    ``[(label, mean, low, high)]`` (low/high None where no bar is drawn); ``(None, [])`` when no row has the
    metric."""
    points = []
    for i, (row, lab) in enumerate(zip(table, labels)):
        st = row["summary"].get(m)
        if st and st.get("mean") is not None:
            bar = i not in no_bar
            points.append((lab, st["mean"], st.get("ci95_low") if bar else None, st.get("ci95_high") if bar else None))
    if not points:
        return None, []
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(points) + 2.0), 3.4))
    for i, (lab, mean, lo, hi) in enumerate(points):
        err = None if lo is None else [[mean - lo], [hi - mean]]
        ax.errorbar([i], [mean], yerr=err, capsize=5, **{k: v for k, v in series_style(i).items()
                                                          if k != "linestyle"}, linestyle="none")
    ax.set_xticks(range(len(points)), [p[0] for p in points], fontsize=8, rotation=15 if len(points) > 3 else 0)
    ax.set_xlim(-0.6, len(points) - 0.4)
    if key_title:
        ax.set_xlabel(key_title, fontsize=8)
    ax.set_ylabel(m)
    ax.set_title(f"{m}\nmean over seeds; bar: Student-t 95% CI over per-seed means (none: one seed"
                 + ("; or a run whose agent learns during it: its seeds are not independent" if no_bar else "")
                 + ")", fontsize=8)
    fig.tight_layout()
    return fig, points


def _compare_points(plt, table, metrics, out_dir, labels, key_title=None, no_bar=frozenset()) -> list[Path]:
    """One ``compare_<metric>.png`` per metric of ``metrics``: :func:`compare_points_figure`."""
    plots = []
    for m in metrics:
        fig, _ = compare_points_figure(plt, table, m, labels, key_title, no_bar)
        if fig is not None:
            plots.append(_save_compare(plt, fig, out_dir, m))
    return plots


def compare_line_figure(plt, groups, m: str, x_key: str, label=None, legend_title: str | None = None,
                        no_band: set[tuple] | frozenset[tuple] = frozenset()):
    """The figure of ``compare_<m>.png``: ``m`` vs ``x_key``, one line per group (:func:`series_style`: its own
    marker and line style), labelled ``label(line)``, the legend titled ``legend_title`` (the keys that tell the
    lines apart), with its Student-t 95% band over per-seed means; a line in ``no_band`` (its runs' agent learns
    during the run, so their seeds are not independent samples) is drawn without a band and marked so in the
    legend. Returns the figure."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    i = 0
    for line, by_x in sorted(groups.items()):
        xs, ms, lo, hi = [], [], [], []
        for x, rows in sorted(by_x.items()):
            per_seed = summarize(rows).get(m)
            if not per_seed:
                continue
            xs.append(x)
            ms.append(per_seed["mean"])
            lo.append(per_seed["ci95_low"] if per_seed["ci95_low"] is not None else per_seed["mean"])
            hi.append(per_seed["ci95_high"] if per_seed["ci95_high"] is not None else per_seed["mean"])
        if xs:
            label_text = (label(line) if label is not None else ", ".join(line)) or "run"
            style = series_style(i)
            if line in no_band:
                label_text += " (no band: seeds not independent)"
            ax.plot(xs, ms, label=label_text, **style)
            if line not in no_band:
                ax.fill_between(xs, lo, hi, alpha=0.15, color=style["color"])
            i += 1
    ax.set_xlabel(x_key.split(".")[-1])
    ax.set_ylabel(m)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, title=legend_title,
              title_fontsize=7)
    ax.set_title(f"{m} (mean over seeds, Student-t 95% CI over per-seed means)", fontsize=9)
    fig.tight_layout()
    return fig


def _compare_plots(plt, groups, metrics, x_key, out_dir, label=None, legend_title=None,
                   no_band=frozenset()) -> list[Path]:
    """One ``compare_<metric>.png`` per metric (the first 8): :func:`compare_line_figure`."""
    return [_save_compare(plt, compare_line_figure(plt, groups, m, x_key, label, legend_title, no_band), out_dir, m)
            for m in metrics[:8]]


#: compare.csv's columns after the metrics, one value per row: its seeds (``0;1;2``), its episodes in all, the
#: episodes of each seed (``0:30;1:30;2:10``), ``complete`` (``false``: it pools an interrupted, failed or unfinished
#: run) and the run directories it pools (``;``-separated, relative to compare.csv's folder, so a copied tree of
#: runs and comparison reads the same)
CSV_ROW_COLUMNS = ("seeds", "episodes", "episodes_per_seed", "complete", "runs")


def _relative(run_dir: str, folder: Path) -> str:
    """``run_dir`` relative to ``folder`` (absolute when they share no root, e.g. other Windows drives)."""
    try:
        return os.path.relpath(run_dir, Path(folder).resolve())
    except ValueError:
        return str(run_dir)


def _write_compare_csv(path: Path, line_keys, x_key, table, metrics) -> None:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    head = list(line_keys) + ([x_key] if x_key else [])
    w.writerow(head + [f"{m}{suffix}" for m in metrics for suffix in ("", ":ci95_low", ":ci95_high", ":n_seeds")]
               + list(CSV_ROW_COLUMNS))
    for row in table:
        cells = [row["line"][k] for k in line_keys] + ([row["x"]] if x_key else [])
        for m in metrics:
            st = row["summary"].get(m) or {}
            cells += [st.get("mean"), st.get("ci95_low"), st.get("ci95_high"), st.get("n_seeds")]
        per_seed = row.get("episodes_per_seed") or {}
        cells += [";".join(map(str, row.get("seeds", []))), row.get("episodes"),
                  ";".join(f"{k}:{v}" for k, v in per_seed.items()),
                  "" if row.get("complete") is None else str(bool(row["complete"])).lower(),
                  ";".join(_relative(r, path.parent) for r in row.get("runs", []))]
        w.writerow(["" if c is None else c for c in cells])
    with report_writes(path.parent, "the comparison table", path):
        atomic_write_bytes(path, buf.getvalue().encode())


def seed_list(seeds: list[int]) -> str:
    """Seeds as short text, runs of consecutive seeds as ranges: ``[0, 1, 2, 3, 7]`` -> ``"0-3,7"``."""
    parts: list[list[int]] = []  # [first, last] of each run of consecutive seeds
    for s in sorted(seeds):
        if parts and parts[-1][1] == s - 1:
            parts[-1][1] = s
        else:
            parts.append([s, s])
    return ",".join(str(a) if a == b else f"{a}-{b}" if b > a + 1 else f"{a},{b}" for a, b in parts)


def comparison_table(result: dict[str, Any], metrics: list[str] | None = None):
    """Returns the rich Table of a :func:`compare_runs` result: one row per table entry, its shown keys
    (``shown_line_keys``; checkpoints as their short forms), the x value, the seeds of pooled rows, and ``metrics``
    (default: the first 6) as ``mean [95% CI]``; the caption says what is pooled, hidden or left to compare.csv.
    Raises nothing of its own."""
    from rich.table import Table

    every = result["metrics"]
    metrics = metrics or every[:TABLE_METRICS]
    notes = [CI_CAPTION]
    if len(metrics) < len(every):
        notes.append(f"first {len(metrics)} of {len(every)} metrics (task metrics before comm/ and shield/ counters); "
                     f"compare.csv has all")
    if result.get("pooled_seeds"):
        notes.append("runs that differ only in their seeds are pooled into one row (their seeds together)")
    if result.get("hidden"):
        notes.append("all-zero comm/, shield/ and cost/ counters are hidden here; compare.csv has every metric")
    keys = result.get("shown_line_keys", result["line_keys"])
    if len(keys) < len(result["line_keys"]):
        notes.append(f"{len(result['line_keys']) - len(keys)} more config key(s) differ (long values or many "
                     f"keys); compare.csv has every one")
    partial = any(row.get("complete") is False for row in result["table"])
    if partial:
        notes.append("* = the row pools an interrupted or unfinished run (some seeds have fewer episodes than planned; "
                     "see the notes, and compare.csv's episodes_per_seed and complete columns)")
    heads = table_headers(keys, [*result["line_keys"], result["x_key"] or "", "seeds", *metrics])
    if any(heads[k] != k for k in keys):
        notes.append("config key columns are headed by the ends of their keys (compare.csv has the full keys)")
    if any(row["line"][k] == "None" for row in result["table"] for k in keys):
        notes.append("— = a key the run does not set")
    terms = metric_terms_line(metrics)
    caption = "; ".join(notes) + (f"\n{terms}" if terms else "")
    t = Table(title="comparison (mean over seeds [95% CI])", caption=caption, caption_justify="left")
    labels = result.get("labels") or {}
    for k in keys:
        if k in labels:  # a checkpoint's short form is what tells rows apart: never cut to "…", folded if need be
            t.add_column(heads[k], min_width=min(max(map(len, labels[k].values()), default=0), 60), overflow="fold")
        else:
            t.add_column(heads[k], overflow="fold")  # a header is wrapped, never cut to an ambiguous "…" stub
    if result["x_key"]:
        t.add_column(result["x_key"], justify="right")
    pooled = bool(result.get("pooled_seeds")) or partial
    if pooled:  # which seeds each pooled row holds (* marks a row with an unfinished run)
        t.add_column("seeds")
    for m in metrics:
        t.add_column(m, justify="right")
    for row in result["table"]:
        cells = ["—" if row["line"][k] == "None" else _cell(labels, k, row["line"][k]) for k in keys]  # None: not set
        if result["x_key"]:
            cells.append(str(row["x"]))
        if pooled:
            cells.append(seed_list(row.get("seeds", [])) + ("*" if row.get("complete") is False else ""))
        for m in metrics:
            st = row["summary"].get(m)
            if not st:
                cells.append("—")
            elif st["ci95_low"] is None:
                cells.append(_fmt(st["mean"]))
            else:
                mean, lo, hi = _fmt_ci(st["mean"], st["ci95_low"], st["ci95_high"])
                cells.append(f"{mean} [{lo}, {hi}]")
        t.add_row(*cells)
    return t
