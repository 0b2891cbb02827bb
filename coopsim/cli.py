"""The ``coopsim`` command: parses, resolves through the registry, calls the platform.

Every error a user can cause (bad config, bad map, unknown id, missing optional dependency) prints one
message naming the file, key and value and exits with code 2; Ctrl-C keeps finished work and exits 130.
"""
from __future__ import annotations

import os

# one BLAS/OpenMP thread per process unless the user says otherwise, set before numpy or torch load: two threads on
# two busy cores run many times slower, and the thread count changes float sums, so a run resumed under another
# count would not continue bit for bit (docs/ppo.md, "Exact resume")
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # a user's OMP_NUM_THREADS rules all three
    os.environ.setdefault(_var, os.environ.get("OMP_NUM_THREADS", "1"))

import itertools
import contextlib
import shlex
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from coopsim.errors import ConfigError, CoopsimError, sigterm_as_interrupt

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},  # -h too, for every subcommand
                  help="coopsim: run, train and compare teams of agents in one scenario engine.")


def _package_version() -> str:
    """The installed coopsim version (the package metadata), or 'unknown' when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coopsim")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        console.print(f"coopsim {_package_version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main_options(version: Optional[bool] = typer.Option(None, "--version", callback=_print_version, is_eager=True,
                                                         help="print the coopsim version and exit")) -> None:
    import warnings

    warnings.showwarning = _show_warning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings of a command as one plain ``warning: ...`` line on stderr, without Python's file path and source
    line (they are for developers; the message says what happened and what to do)."""
    kind = "" if category in (UserWarning, RuntimeWarning) else f"{category.__name__}: "
    print(f"warning: {kind}{message}", file=sys.stderr if file is None else file, flush=True)


#: the help of a command's key=value overrides: every command that writes runs names the key that says where
OVERRIDES_HELP = ("key.path=value overrides, e.g. scenario.params.num_agents=128 'seeds=[0,1,2]' (quoted: the shell "
                  "would expand the brackets); out_dir=/data/runs sets where run directories are written "
                  "(default: runs/ under the current folder)")
#: the width of stdout when it is not a terminal (piped, redirected) and COLUMNS is not set: rich's default of 80
#: would wrap table rows (``coopsim list | cat``, ``coopsim sweep ... | tee log``)
PIPED_WIDTH = 200


def _stdout_console() -> Console:
    """The stdout console: as rich makes it on a terminal; piped, :data:`PIPED_WIDTH` columns wide unless COLUMNS
    says otherwise (not soft-wrapped by default: a table cell too wide would then be cut to an ellipsis)."""
    c = Console(emoji=False)  # user text (file lines, overrides) is echoed verbatim: no :name: emoji codes
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c.width = PIPED_WIDTH
    return c


console = _stdout_console()


def _wide_console() -> Console:
    """The console for the comparison table: at least :data:`PIPED_WIDTH` columns so its many columns are not
    squeezed into folded stubs, unless the user set COLUMNS (then exactly that width, as for every other table)."""
    if "COLUMNS" in os.environ:
        return Console(emoji=False)  # made now: rich reads COLUMNS when a console is made
    return Console(width=max(console.width, PIPED_WIDTH), emoji=False)
err_console = Console(stderr=True, emoji=False)


def _check_overrides(overrides: list[str] | None, config: object, *, sweep: bool = False) -> None:
    """The command-line checks every command makes before loading the config: a key given twice
    (:func:`~coopsim.platform.config.check_unique_overrides`), then ``seeds=0,1`` (:func:`_check_seeds_overrides`)."""
    from coopsim.platform.config import check_unique_overrides

    check_unique_overrides(list(overrides or []), config)
    _check_seeds_overrides(overrides, config, sweep=sweep)


def _check_seeds_overrides(overrides: list[str] | None, config: object, *, sweep: bool = False) -> None:
    """Refuse ``seeds=0,1`` (a bare comma-separated list, which YAML reads as the string '0,1') with the form that
    works: ``'seeds=[0,1]'``, quoted so the shell passes the brackets as they are (zsh would expand them)."""
    import re

    for text in overrides or []:
        key, _, raw = text.partition("=")
        if key.strip() != "seeds" or not re.fullmatch(r"\s*[+-]?\d+(\s*,\s*[+-]?\d+)+\s*", raw):
            continue
        values = ",".join(v.strip() for v in raw.split(","))
        fixed = f"seeds=[{values}]"
        grid = f", or --grid seeds={values} for one run per seed" if sweep else ""
        raise ConfigError(f"invalid value {raw.strip()!r}: seeds is a list; write {shlex.quote(fixed)} (with the "
                          f"brackets, quoted so the shell leaves them alone){grid}",
                          file=f"command-line override {text!r} (config {config})", key="seeds", value=raw)


def _invoked_as() -> str:
    """:func:`coopsim.platform.report.invoked_as`, imported when a hint is printed (not for ``--help``)."""
    from coopsim.platform.report import invoked_as

    return invoked_as()


def _fail(exc: Exception) -> None:
    # the message is text, not markup: a value like [true, 64] must print as given
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


_TERMINATED = False  # set by the SIGTERM handler: the run was stopped by SIGTERM, not Ctrl-C


def _mark_terminated() -> None:
    global _TERMINATED
    _TERMINATED = True


def _sigterm_as_interrupt():
    """Turn the first SIGTERM into a KeyboardInterrupt (:func:`coopsim.errors.sigterm_as_interrupt`), remembered for
    the exit code (:func:`_interrupt_code`)."""
    return sigterm_as_interrupt(on_term=_mark_terminated)


def _ignore_further_interrupts() -> None:
    """Ignore SIGINT and SIGTERM from here on: the command is stopping and prints what it kept and how to continue;
    a second Ctrl-C pressed while it does so (the hint imports a module or two) must not swallow that line."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread (a test runner's worker): nothing to guard
        pass


def _interrupt_code() -> int:
    """130 after Ctrl-C/SIGINT, 143 after SIGTERM (the shell's 128 + signal number)."""
    return 143 if _TERMINATED else 130


@app.command("list")
def list_cmd(kind: Optional[str] = typer.Argument(None, help="scenario, agent, channel or shield, or their plurals "
                                                               "(default: all)")) -> None:
    """List every registered component id (the registry is the single source of truth)."""
    from coopsim.platform import registry

    try:
        if kind and kind not in registry.KINDS and kind.endswith("s") and kind[:-1] in registry.KINDS:
            kind = kind[:-1]  # `coopsim list scenarios` as `coopsim list scenario`
        kinds = [kind] if kind else list(registry.KINDS)
        for k in kinds:
            registry.list_ids(k)  # raises on an unknown kind before anything is printed
        for k in kinds:
            console.print(f"[bold]{k}s[/]")
            rows = []
            for s in registry.specs(k):
                try:
                    doc = escape(_list_description(s))
                except CoopsimError as exc:
                    doc = f"[red](unavailable: {escape(str(exc))})[/]"
                rows.append((s.id, doc))
            if console.is_terminal:  # a table: a long description wraps in its own column, under itself
                from rich.padding import Padding
                from rich.table import Table

                table = Table.grid(padding=(0, 1))
                table.add_column(min_width=34, no_wrap=True)
                table.add_column(overflow="fold")
                for id_, doc in rows:
                    table.add_row(escape(id_), doc)
                console.print(Padding(table, (0, 0, 0, 2)), highlight=False)
            else:  # piped: one line per id, however long
                for id_, doc in rows:
                    console.print(f"  {escape(id_):<34} {doc}", highlight=False, soft_wrap=True)
    except CoopsimError as exc:
        _fail(exc)


#: `coopsim list` shows a component's first docstring sentences up to about this many characters (at least one
#: whole sentence, never cut inside one)
LIST_DOC_CHARS = 160
#: "(see the module docstring)", "(see module docstring for ...)", "; see the module docstring" in a docstring
_MODULE_DOC_REF = re.compile(r"\s*(?:\(see (?:the )?module docstring[^)]*\)|[;,] see (?:the )?module docstring[^.]*)")


def _list_description(spec) -> str:
    """The description `coopsim list` shows for a registry ``spec``: the first paragraph of the component's docstring
    (its lines joined), cut at a sentence end after the first sentence when it is longer than
    :data:`LIST_DOC_CHARS`; for a :class:`~coopsim.platform.registry.Variant`, followed by the params it fixes."""
    import inspect
    import re

    from coopsim.platform.registry import Variant

    obj = spec.load()
    cls = obj.cls if isinstance(obj, Variant) else obj
    para = " ".join(inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].split())
    para = _MODULE_DOC_REF.sub("", para)  # a pointer into the source means nothing here; the sentence stays
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", para)  # "et al. 2018", "e.g. ``x``" do not end one
    text = sentences[0]
    for more in sentences[1:]:
        if len(text) + 1 + len(more) > LIST_DOC_CHARS:
            break
        text += " " + more
    if isinstance(obj, Variant) and obj.defaults:
        text += "  [" + ", ".join(f"{k}={v!r}" for k, v in obj.defaults.items()) + "]"
    return text


@app.command()
def validate(config: Path = typer.Argument(..., help="run config (YAML)"),
             overrides: Optional[List[str]] = typer.Argument(None, help="key.path=value overrides")) -> None:
    """Check a run config (schema, registry ids, every component's params) without running it."""
    from coopsim.errors import ConfigError
    from coopsim.platform.config import blame_override, check_buildable, dump_config, load_config

    try:
        _check_overrides(overrides, config)
        cfg = load_config(config, overrides or [])
        try:
            check_buildable(cfg, file=str(config))
        except ConfigError as exc:  # a value given on the command line is named as the override
            raise blame_override(exc, config, overrides or []) from None
        notes: list[str] = []
        warnings: list[str] = []
        train_checked = False
        if cfg.train is not None:   # the train: section too, as `coopsim train` would read it (its hooks built)
            from coopsim.errors import in_file
            from coopsim.platform import registry
            from coopsim.platform.training import build_trainer, hooks_note, train_config, trainable_class

            factory = registry.spec("agent", cfg.agents.id).load()
            train_checked = hasattr(getattr(factory, "cls", factory), "make_trainer")
            if not train_checked:  # `run` ignores train: for this agent: the warning `run` prints, said here too
                from coopsim.platform.runner import ignored_train_warning

                ignored = ignored_train_warning(cfg, overrides or [])
                if ignored:
                    warnings.append(f"{ignored}; `coopsim validate` does not check its values")
        if train_checked:
            try:
                schedule = train_config(cfg, trainable_class(cfg, file=str(config))[1], file=str(config))
                notes.append(hooks_note(schedule, file=str(config)))
                warnings.extend(schedule.inert_keys())  # keys that do nothing with the others' values
                # the first seed's trainer, as `coopsim train` builds it before writing anything: hooks set up
                build_trainer(cfg, cfg.seeds[0], file=str(config))
            except ConfigError as exc:  # a value given on the command line is named as the override
                exc = in_file(exc, str(config))
                raise blame_override(exc, config, overrides or []) from None
    except CoopsimError as exc:
        _fail(exc)
    from coopsim.platform.runner import open_loop_shield_warning, scenario_params_warning

    for warning in filter(None, [*warnings, open_loop_shield_warning(cfg), scenario_params_warning(cfg)]):
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, highlight=False, soft_wrap=True)
    for note in filter(None, notes):
        err_console.print(note, highlight=False, soft_wrap=True)
    console.print(f"[green]ok[/]: {config} is valid (every component built, the scenario reset with each seed"
                  f"{', the train: section checked' if train_checked else ''})")
    console.print(dump_config(cfg), highlight=False)


@app.command()
def run(config: Path = typer.Argument(..., help="run config (YAML)"),
        overrides: Optional[List[str]] = typer.Argument(None, help=OVERRIDES_HELP),
        checkpoint: Optional[Path] = typer.Option(None, help="load agent parameters from policy.pt / checkpoint.pt "
                                                  "written by `coopsim train`, or a training run's seed-<s> directory"),
        progress: bool = typer.Option(True, help="show a progress bar")) -> None:
    """Run every episode of every seed and write runs/<name>-<UTC time>-<id>/ (config, metrics, summary, plots, replays); out_dir=DIR writes DIR/<name>-... instead."""  # noqa: E501
    from coopsim.errors import ConfigError
    from coopsim.platform.config import blame_override, load_config
    from coopsim.platform.runner import (ignored_train_warning, open_loop_shield_warning, run_config,
                                         scenario_params_warning, untrained_learner_warning)

    try:
        _check_overrides(overrides, config)
        cfg = load_config(config, overrides or [])
        ck = str(checkpoint) if checkpoint else None
        warnings = [w for w in (untrained_learner_warning(cfg, ck), ignored_train_warning(cfg, overrides or [], ck),
                                open_loop_shield_warning(cfg), scenario_params_warning(cfg)) if w]

        def opened(run_dir: Path) -> None:  # everything built: the warnings now (an error before them is alone)
            for warning in warnings:
                err_console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, highlight=False, soft_wrap=True)
            _checkpoint_note(ck)
            _name_run_dir_in_logs(run_dir)

        with _sigterm_as_interrupt():  # an agent/scenario mismatch fails in run_config, before a run dir exists
            try:
                run_dir = run_config(cfg, checkpoint=str(checkpoint) if checkpoint else None, progress=progress,
                                     file=str(config), on_open=opened)
            except ConfigError as exc:  # a value given on the command line is named as the override
                raise blame_override(exc, config, overrides or []) from None
    except CoopsimError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:
        _ignore_further_interrupts()
        _interrupted_run(exc)
    except Exception as exc:  # an episode raised (a scenario's or agent's own code): one line, the run is kept
        _failed_run(exc)
    _finished_run(run_dir)


def _checkpoint_note(checkpoint: str | None) -> None:
    """At a run's start (``run``, ``eval``): one ``note:`` line when ``--checkpoint`` names a training seed directory
    without policy.pt, whose mid-training checkpoint.pt the run evaluates
    (:func:`~coopsim.platform.runner.checkpoint_note`)."""
    from coopsim.platform.runner import checkpoint_note

    note = checkpoint_note(checkpoint)
    if note:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)


def _name_run_dir_in_logs(run_dir: Path) -> None:
    """At a run's start, when the output is a log file or a pipe (not a terminal, where the table at the end names
    it): the run directory, so a run killed early can still be matched to its directory."""
    if not console.is_terminal:
        console.print(f"run directory: {run_dir}", soft_wrap=True, highlight=False)


def _finished_run(run_dir: Path) -> None:
    """The end of `run` and `eval`: the summary table, the run directory and the `report` command for its GIF."""
    from coopsim.platform.report import load_run, summary_table

    console.print(summary_table(load_run(run_dir)))
    console.print(f"run directory: {run_dir}", soft_wrap=True, highlight=False)
    if (Path(run_dir) / "replays").is_dir():
        console.print(f"next: {_invoked_as()} report {shlex.quote(str(run_dir))}   (re-renders the plots and writes a GIF of the first replay)",
                      soft_wrap=True, highlight=False)


def _failed_run(exc: Exception) -> None:
    """A run (``run``, ``eval``) whose episode raised after its directory existed: one error line naming the kept
    run directory (its summary.json records the error), exit 1; the traceback itself with ``COOPSIM_TRACEBACK=1``
    or when no run directory was made."""
    where = getattr(exc, "run_dir", None)
    if where is None or os.environ.get("COOPSIM_TRACEBACK"):
        raise exc
    err_console.print(f"[bold red]error:[/] the run failed: {type(exc).__name__}: {escape(str(exc))}\n  its finished "
                      f"episodes and the error are kept in {escape(shlex.quote(str(where)))} (summary.json); set "
                      f"COOPSIM_TRACEBACK=1 to see the traceback", markup=True, soft_wrap=True, highlight=False)
    raise typer.Exit(code=1)


@app.command()
def sweep(config: Path = typer.Argument(..., help="run config (YAML)"),
          grid: List[str] = typer.Option(..., "--grid", help="key=v1,v2,... (repeatable); the product is run"),
          overrides: Optional[List[str]] = typer.Argument(None, help="fixed (every run's) " + OVERRIDES_HELP),
          jobs: int = typer.Option(0, min=0, help="parallel processes (0: one per core); at most the number of "
                                                    "runs, with a warning above the core count"),
          skip_done: bool = typer.Option(False, "--skip-done", help="continue an interrupted or partly failed "
                                         "sweep: a grid cell whose out_dir holds a run of the same config that "
                                         "finished uninterrupted is not run again, and that run is compared "
                                         "instead")) -> None:
    """Run the product of --grid values, one `coopsim run` process per core, then compare them.

    Each run is a `coopsim run`: it evaluates the agent and never trains it, so a --grid over a train.* key is refused. On Linux the runs end with the sweep, even one killed by SIGKILL (they get SIGTERM: each keeps its finished episodes).

    Exit code 2: a config or grid error (nothing ran); 1: some runs failed (each failed run's cause and kept episodes are named; the finished runs are kept and compared when two or more finished); 130 / 143: interrupted (finished runs kept).
    """  # noqa: E501 - one line per paragraph: the help text is wrapped to the terminal, source line ends would show
    from coopsim.errors import ConfigError, in_file
    from coopsim.platform.config import NAME_MAX, blame_override, check_buildable, load_config, parse_override
    from coopsim.platform.recorder import check_writable
    from coopsim.platform.runner import ignored_train_warning, scenario_params_warning, untrained_learner_warning

    try:
        _check_overrides(overrides, config, sweep=True)  # as `coopsim run` (and a --grid key given twice, below)
        axes = []
        grid_keys = []
        for g in grid:
            if "=" not in g:
                raise CoopsimError(f"--grid {g!r} must look like key=v1,v2,..., e.g. --grid seeds=0,1,2")
            key_parts, _ = parse_override(g)
            key = ".".join(key_parts)
            values = _grid_values(g.split("=", 1)[1])
            if not all(v.strip() for v in values):
                example = "0,1,2" if key == "seeds" else "32,64,128"
                raise CoopsimError(f"--grid {g!r}: give comma-separated values, e.g. {key}={example}")
            if key in grid_keys:
                raise CoopsimError(f"--grid {key} is given twice; give its values once, comma-separated, e.g. "
                                   f"--grid {key}={','.join(v.strip() for v in _grid_values(_grid_of(grid, key)))},"
                                   f"{','.join(v.strip() for v in values)}")
            dup = sorted({v.strip() for v in values if [w.strip() for w in values].count(v.strip()) > 1})
            if dup:
                raise CoopsimError(f"--grid {g!r}: value {', '.join(dup)} is given twice (each grid value is one run; "
                                   f"for repeats give more seeds)")
            if key == "seeds":  # a bare seed is a one-seed run: seeds=0,1,2 gives seeds=[0], [1], [2]
                values = [f"[{v.strip()}]" if v.strip().isdigit() else v for v in values]
            axes.append([f"{key}={v.strip()}" for v in values])
            grid_keys.append(key)
        for o in overrides or []:  # a fixed override of a grid key (or of a key inside or around it) would be
            okey = ".".join(parse_override(o)[0]) if "=" in o else None  # silently replaced by the grid's values
            gkey = next((g for g in grid_keys if okey and (okey == g or okey.startswith(g + ".")
                                                           or g.startswith(okey + "."))), None)
            if gkey is not None:
                raise CoopsimError(f"{okey} is given both as a fixed override ({o!r}) and as --grid {gkey}=...; the grid "
                                   f"would replace it in every run: drop one of them")
        base = load_config(config, list(overrides or [])).name
        # each run is named <name>-<grid values>: a fixed name=... (or a --grid name axis) is in base or in the tag,
        # and is left out of the run's own overrides, which give name once (`coopsim run` refuses a key given twice)
        fixed = [o for o in overrides or [] if not _is_name_override(o)]
        combos = []
        for c in itertools.product(*axes):
            tag = "-".join(_slug(x.split("=", 1)[1]) for x in c)
            combos.append(fixed + [x for x in c if not _is_name_override(x)] + [f"name={base}-{tag}"])
        longest = max(len(c[-1].encode("utf-8")) for c in combos) - len("name=")
        if longest > NAME_MAX:  # a valid base name, too long with the grid values: say so, not the made-up override
            room = NAME_MAX - (longest - len(base.encode("utf-8")))
            fix = (f"give a name of at most {room} bytes (this one is {len(base.encode('utf-8'))})" if room >= 1 else
                   "give shorter or fewer --grid values")
            exc = ConfigError(f"sweep names each run <name>-<grid values>, here up to {longest} bytes, and a run name "
                              f"may be at most {NAME_MAX} bytes: {fix}", key="name", value=base)
            raise in_file(blame_override(exc, config, list(overrides or [])), str(config))
        warnings: list[str] = []
        out_dirs: set[str] = set()
        agent_ids: dict[str, None] = {}  # the agents the runs evaluate, in order
        cfgs = []  # each cell's config, as its `coopsim run` loads it
        for c in combos:  # validate and build everything before starting anything
            try:
                cfg_c = load_config(config, c)
            except ConfigError as exc:  # a value of a --grid axis is named as that, not as an override
                raise _as_grid_value(exc, c[len(fixed):-1]) from None
            cfgs.append(cfg_c)
            try:
                check_buildable(cfg_c, file=str(config))
            except ConfigError as exc:  # named as the override or --grid value that set it, else the file
                exc = in_file(blame_override(exc, config, c), str(config))
                raise _as_grid_value(exc, c[len(fixed):-1]) from None
            if cfg_c.out_dir not in out_dirs:  # once per folder, before any run starts (as `coopsim run` fails)
                out_dirs.add(cfg_c.out_dir)
                try:
                    check_writable("out_dir", cfg_c.out_dir, folder=True)
                except ConfigError as exc:  # named as the override or --grid value that set it, else the file
                    exc = in_file(blame_override(exc, config, c), str(config))
                    raise _as_grid_value(exc, c[len(fixed):-1]) from None
            agent_ids.setdefault(cfg_c.agents.id, None)
            for w in (untrained_learner_warning(cfg_c, None), ignored_train_warning(cfg_c, c),
                      scenario_params_warning(cfg_c)):
                if w and w not in warnings:
                    warnings.append(w)
        train_axis = next((k for k in grid_keys if k == "train" or k.startswith("train.")), None)
        if train_axis is not None:  # `run` never reads train:, so each value would repeat the same run
            raise CoopsimError(_train_grid_error(train_axis, list(agent_ids), config))
    except CoopsimError as exc:
        _fail(exc)
    for w in warnings:  # once per distinct warning, not once per run (as `coopsim run` prints it)
        err_console.print(f"[yellow]warning:[/] {escape(w)}", markup=True, highlight=False, soft_wrap=True)
    cpus = os.cpu_count() or 1
    jobs = jobs or cpus
    skipped: list[tuple[list[str], str]] = []  # (overrides, run directory) of each cell an earlier run finished
    notes: list[str | None] = []  # of each skipped cell: its run's replays differ (_replays_note)
    pending = []
    for c, cfg_c in zip(combos, cfgs):
        done = _done_run_dir(cfg_c) if skip_done else None
        if done is not None:
            skipped.append((c, str(done)))
            notes.append(_replays_note(cfg_c, done))
        else:
            pending.append(c)
    jobs = max(1, min(jobs, len(pending)))  # never more processes than runs to run
    if jobs > cpus:  # each run is a process of its own: more than the cores only compete for cores and memory
        err_console.print(f"[yellow]warning:[/] --jobs: {jobs} runs at a time on {cpus} CPU core"
                          f"{'' if cpus == 1 else 's'}; each run is a process of its own (a few hundred MB of memory "
                          f"each), so runs beyond the core count only compete for cores and memory (--jobs 0: one "
                          f"per core)", markup=True, highlight=False, soft_wrap=True)
    if not skipped:
        console.print(f"sweep: {len(combos)} runs, {jobs} at a time")
    else:
        console.print(f"sweep: {len(combos)} runs ({len(skipped)} done, skipped), " + (
                      f"{len(pending)} to run, {jobs} at a time" if pending else "nothing to run"))
    for (c, d), note in zip(skipped, notes):
        console.print(f"skipped (done): {escape(' '.join(shlex.quote(x) for x in c))} -> {escape(d)}"
                      + (f" ({escape(note)})" if note else ""), soft_wrap=True, highlight=False)
    for c, cfg_c in zip(combos, cfgs) if skip_done else ():  # a cell that runs again beside a run of its name: why
        why = None if any(c is s for s, _ in skipped) else _why_not_done(cfg_c)
        if why:
            console.print(f"runs again: {escape(' '.join(shlex.quote(x) for x in c))}: {escape(why)}",
                          soft_wrap=True, highlight=False)
    procs: list[tuple[list[str], subprocess.Popen]] = []
    run_dirs: list[str] = [d for _, d in skipped]  # compared with the runs of this sweep, as if they had just run
    failed: list[tuple[list[str], str | None]] = []  # (overrides, run directory or None) of each failed run
    env = dict(os.environ)  # the thread settings of this process (one thread unless the user set them) pass on
    child_setup = _child_setup(os.getpid())  # SIGINT as usual; dies with the sweep (even one killed by SIGKILL)
    try:
        with _sigterm_as_interrupt():
            while pending or procs:
                while pending and len(procs) < jobs:
                    c = pending.pop(0)
                    cmd = [sys.executable, "-m", "coopsim.cli", "run", str(config), *c, "--no-progress"]
                    # own session: a terminal's Ctrl-C reaches only the sweep, which forwards one SIGINT to each child
                    procs.append((c, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                                      env=env, start_new_session=True, preexec_fn=child_setup)))
                c, p = procs[0]
                # the child stays in procs until it has exited, so an interrupt reaches it; a timeout makes
                # communicate() keep what it read so far when an interrupt cuts it short (without one it reads in a
                # single call whose partial output is lost), so _stop_children still sees the 'run directory:' line
                out = None
                while out is None:
                    with contextlib.suppress(subprocess.TimeoutExpired):  # a run longer than _CHILD_WAIT_S
                        out, _ = p.communicate(timeout=_CHILD_WAIT_S)
                _sweep_result(c, p.returncode, out, run_dirs, failed)
                p.coopsim_reported = True  # in run_dirs or failed already: _stop_children leaves it out
                procs.pop(0)
    except KeyboardInterrupt:
        _ignore_further_interrupts()  # a second Ctrl-C must not cut the children's summaries short
        code = _interrupt_code()
        err_console.print(f"sweep {'terminated' if code == 143 else 'interrupted'}: stopping {len(procs)} running "
                          f"run(s) (each keeps its finished episodes and writes its summary)", highlight=False)
        kept = list(run_dirs)
        for c, out in _stop_children(procs):
            line = [ln for ln in out.splitlines() if "are kept in " in ln or ln.startswith("run directory: ")]
            where = line[-1].split("are kept in ", 1)[-1].split("run directory: ", 1)[-1] if line else None
            label = " ".join(shlex.quote(x) for x in c)
            if where:
                kept.append(where)
                state = "finished" if _finished_uninterrupted(Path(where)) else "interrupted"  # it may end first
                err_console.print(f"  kept ({state}) {label} -> {where}", soft_wrap=True, highlight=False)
            elif "(killed: " in out:
                err_console.print(f"  killed (it did not stop within 60 s; its finished episodes are in metrics.jsonl "
                                  f"of its run directory, `coopsim report` rebuilds the summary): {label}",
                                  soft_wrap=True, highlight=False)
            else:
                err_console.print(f"  stopped before any episode finished: {label}", soft_wrap=True, highlight=False)
        earlier = {d for _, d in skipped}
        for d in run_dirs:
            err_console.print(f"  {'done earlier (skipped)' if d in earlier else 'kept (finished)'} -> {d}",
                              soft_wrap=True, highlight=False)
        for c, d in failed:  # runs that had failed before the interrupt: named again, with what they kept
            label = " ".join(shlex.quote(x) for x in c)
            episodes = _finished_episodes(Path(d)) if d is not None else 0
            if episodes:
                kept.append(d)
            err_console.print(f"  failed earlier: {label} -> " + (f"{d} (its {episodes} finished episode"
                              f"{'s' if episodes != 1 else ''} kept)" if episodes else
                              (f"{d} (no finished episode)" if d is not None else "no run directory")),
                              soft_wrap=True, highlight=False)
        if pending:
            err_console.print(f"  not started: {len(pending)} run(s)", highlight=False)
        err_console.print(_continue_hint(skip_done), soft_wrap=True, highlight=False)
        err_console.print(_kept_runs_line(kept), soft_wrap=True, highlight=False)
        raise typer.Exit(code=code)
    if len(run_dirs) > 1:  # one row per grid cell, seeds too; files only when this sweep ran something
        _report_many([Path(d) for d in run_dirs], group_by=grid_keys, write=len(run_dirs) > len(skipped))
    if failed:
        _failed_runs_note(failed, run_dirs, len(combos), hint=_continue_hint(skip_done))
        raise typer.Exit(code=1)


def _kept_runs_line(kept: list) -> str:
    """The last line of an interrupted sweep: how many run directories it kept and the `report` command for them
    (``compare them with`` for several, ``look at it with`` for one, no command for none)."""
    line = f"run directories kept: {len(kept)}"
    if not kept:
        return line
    what = "compare them with" if len(kept) > 1 else "look at it with"
    return f"{line}; {what}: {_invoked_as()} report {' '.join(shlex.quote(str(k)) for k in kept)}"


def _train_grid_error(key: str, agent_ids: list[str], config: Path) -> str:
    """The error of a ``--grid`` over ``key`` (``train`` or ``train.*``): each sweep run is a `coopsim run`, which
    never reads the train: section (only `coopsim train` does), so every value of the grid would repeat one run."""
    from coopsim.platform import registry

    def trainable(agent_id: str) -> bool:
        factory = registry.spec("agent", agent_id).load()
        return hasattr(getattr(factory, "cls", factory), "make_trainer")

    names = ", ".join(f"'{a}'" for a in agent_ids)
    agent = f"agent{'s' if len(agent_ids) > 1 else ''} {names}"
    if not any(trainable(a) for a in agent_ids):
        why = (f"{agent} {'do' if len(agent_ids) > 1 else 'does'} not train (it cannot be trained), and `coopsim run` "
               f"(one per grid value) ignores the train: section")
        fix = " (a learner is trained with `coopsim train`; `coopsim list agent` shows the agents)"
    else:
        why = (f"the agent does not train in a sweep: each grid value is a `coopsim run`, which evaluates {agent} "
               f"as it is and ignores the train: section (only `coopsim train` reads it)")
        fix = (f", or train one run per value: {_invoked_as()} train {shlex.quote(str(config))} "
               f"{shlex.quote(key + '=<value>')}")
    return f"--grid {key}: {why}, so every value of {key} would repeat the same run; drop --grid {key}{fix}"


def _failed_runs_note(failed: list, run_dirs: list[str], total: int, hint: str | None = None) -> None:
    """The sweep's last lines when runs failed: how many, whether the finished ones were compared (a comparison
    needs two), ``hint`` (how to continue, :func:`_continue_hint`) when given, and the `report` command that takes
    the failed runs' kept episodes in too."""
    partial = [d for _, d in failed if d is not None and _finished_episodes(Path(d))]
    n = len(failed)
    head = f"sweep: {n} of {total} runs failed"
    if len(run_dirs) > 1:
        head += (f"; the {len(run_dirs)} finished runs are compared above (the failed "
                 f"{'ones are' if n > 1 else 'one is'} not in the comparison)")
    elif len(run_dirs) == 1:
        head += f"; only 1 run finished, so there is no comparison (it needs 2 finished runs): {run_dirs[0]}"
    else:
        head += "; no run finished, so there is no comparison"
    console.print(escape(head), soft_wrap=True, highlight=False)
    if hint:
        console.print(escape(hint), soft_wrap=True, highlight=False)
    dirs = run_dirs + partial
    if partial and len(dirs) > 1:
        what = (f"with the finished episodes of the failed run{'s' if len(partial) > 1 else ''} too" if run_dirs
                else "the finished episodes of the failed runs")
        console.print(escape(f"  to compare {what}: {_invoked_as()} report {' '.join(shlex.quote(d) for d in dirs)}"),
                      soft_wrap=True, highlight=False)


def _continue_hint(skip_done: bool) -> str:
    """The line of an interrupted or partly failed sweep that says how to continue it: the same command with
    ``--skip-done``, which runs only the cells without a finished run."""
    how = "re-run the same command" + (" (it has --skip-done)" if skip_done else " with --skip-done")
    return f"  to continue: {how}: the runs that finished are skipped, the others run again"


#: what :func:`~coopsim.platform.recorder.new_run_dir` puts after the run name: ``-<UTC time>Z-<6 hex>``
_RUN_DIR_SUFFIX = re.compile(r"-(\d{8}T\d{6}Z)-[0-9a-f]{6}")


def _named_run_dirs(cfg) -> list[tuple[str, Path]]:
    """(UTC time stamp, directory) of every run directory named ``<cfg.name>-<UTC time>Z-<id>`` in ``cfg.out_dir``
    (empty when the folder does not exist yet)."""
    try:
        entries = list(Path(cfg.out_dir).iterdir())
    except OSError:  # no out_dir yet: nothing ran there
        return []
    found = []
    for d in entries:
        m = _RUN_DIR_SUFFIX.fullmatch(d.name[len(cfg.name):]) if d.name.startswith(cfg.name) else None
        if m is not None and d.is_dir():
            found.append((m.group(1), d))
    return found


def _done_run_dir(cfg) -> Path | None:
    """For ``sweep --skip-done``: the newest run directory in ``cfg.out_dir`` that an earlier `coopsim run` (or
    sweep) made of exactly this config, None when there is none. It must be named ``<cfg.name>-<UTC time>Z-<id>``,
    its config.yaml must parse to the config the run would write (``dump_config(cfg)``; comment lines do not
    count), and its summary.json must say it finished every planned episode uninterrupted, without an error and
    without a ``--checkpoint`` (a sweep's runs have none)."""
    import json

    import yaml

    from coopsim.platform.config import dump_config
    from coopsim.platform.report import same_config

    want = yaml.safe_load(dump_config(cfg))
    planned = len(cfg.seeds) * cfg.episodes
    found = []
    for stamp, d in _named_run_dirs(cfg):
        if not _finished_uninterrupted(d):
            continue
        try:
            if not same_config(yaml.safe_load((d / "config.yaml").read_text()), want):  # as report counts repeats
                continue
            summary = json.loads((d / "summary.json").read_text())
            mtime = (d / "summary.json").stat().st_mtime
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if (summary.get("error") is None and summary.get("checkpoint") is None
                and summary.get("episodes_finished") == planned and not (d / "checkpoint.txt").exists()):
            found.append((stamp, mtime, d))
    return max(found, key=lambda t: (t[0], t[1]))[2] if found else None


def _replays_note(cfg, run_dir: Path) -> str | None:
    """For a ``sweep --skip-done`` cell reused from ``run_dir``: a note when that run's ``replays`` differs from the
    cell's (``replays`` is not a setting of the run, :data:`~coopsim.platform.report.WHERE_KEYS`, so the run is reused:
    its results are the same, but its replay files are the ones it kept), e.g. ``replays differs: 2 there, 0 asked;
    results are the same: ...``; None when both are the same. Raises nothing."""
    import yaml

    from coopsim.platform.config import dump_config

    try:
        theirs = yaml.safe_load((run_dir / "config.yaml").read_text())
        ours = yaml.safe_load(dump_config(cfg))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    if not (isinstance(theirs, dict) and isinstance(ours, dict)) or theirs.get("replays") == ours.get("replays"):
        return None
    show = lambda v: "not set (every episode)" if v is None else repr(v)  # noqa: E731
    return (f"replays differs: {show(theirs.get('replays'))} there, {show(ours.get('replays'))} asked; results are the "
            f"same: replays only sets how many replay files are kept, and its replay files are that run's")


def _why_not_done(cfg) -> str | None:
    """For a ``sweep --skip-done`` cell that runs again: why the newest run directory of its name in ``cfg.out_dir``
    (``<cfg.name>-<UTC time>Z-<id>``) is not taken as done: that it did not finish (interrupted, failed, no
    summary), or the config keys in which it differs (``seeds: [0] -> [1]``). None when there is no such directory."""
    import json

    import yaml

    from coopsim.platform.config import dump_config
    from coopsim.platform.report import config_differences

    entries = _named_run_dirs(cfg)
    if not entries:
        return None
    d = max(entries, key=lambda e: e[0])[1]
    try:
        summary = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        return f"{d} has no readable summary.json (it stopped before its end)"
    if not isinstance(summary, dict) or summary.get("interrupted") is not False:
        return f"{d} was interrupted"
    if summary.get("error") is not None:
        return f"{d} failed"
    try:
        diff = config_differences(yaml.safe_load((d / "config.yaml").read_text()), yaml.safe_load(dump_config(cfg)))
    except (OSError, yaml.YAMLError):
        return f"{d} has no readable config.yaml"
    if diff:
        return f"{d} ran another config ({'; '.join(diff)})"
    return f"{d} did not finish every planned episode" if summary.get("checkpoint") is None else \
        f"{d} evaluated a checkpoint"


def _finished_uninterrupted(run_dir: Path) -> bool:
    """Whether the run's ``summary.json`` says it finished without an interrupt (a child of an interrupted sweep can
    finish before the interrupt reaches it)."""
    import json

    try:
        return json.loads((run_dir / "summary.json").read_text()).get("interrupted") is False
    except (OSError, ValueError, AttributeError):
        return False


def _as_grid_value(exc: "ConfigError", grid_items: list[str]) -> "ConfigError":
    """``exc`` re-addressed to the ``--grid`` value it came from when it blames one of ``grid_items`` (``k=v``) as a
    command-line override; else ``exc`` unchanged."""
    from coopsim.errors import ConfigError

    for item in grid_items:
        head = f"command-line override '{item}' "
        if isinstance(exc.file, str) and exc.file.startswith(head):
            rest = str(exc)[len(exc.file) + 2:]  # the text after "<file>: " (key and message as they were)
            new = ConfigError(rest, file=f"--grid value '{item}' " + exc.file[len(head):], value=exc.value,
                              also=exc.also)
            new.key = exc.key
            return new
    return exc


def _sweep_result(c: list[str], returncode: int, out: str, run_dirs: list[str], failed: list) -> None:
    """One child's line: ``done ... -> DIR`` (``DIR`` appended to ``run_dirs``), or ``failed ...: <cause>`` with
    where its finished episodes are kept and then the child's output (``c`` appended to ``failed``, with its run
    directory, None when it made none, in ``failed`` as ``(c, dir)``)."""
    line = [ln for ln in out.splitlines() if ln.startswith("run directory: ")]
    label = " ".join(shlex.quote(x) for x in c)
    if returncode == 0 and line:
        run_dirs.append(line[-1].split(": ", 1)[1])
        console.print(f"[green]done[/] {escape(label)} -> {escape(run_dirs[-1])}", soft_wrap=True, highlight=False)
        return
    where = line[-1].split(": ", 1)[1] if line else None
    failed.append((c, where))
    console.print(f"[red]failed[/] {escape(label)}: {escape(_failure_cause(returncode, out))}", soft_wrap=True,
                  highlight=False)
    console.print(f"  {escape(_kept_text(where))}", soft_wrap=True, highlight=False)
    tail = "\n".join(ln for ln in out.strip().splitlines() if not ln.startswith("run directory: "))[-2000:].strip()
    if tail:  # the child's own words (an error, a traceback's end); its run directory is named above already
        console.print("  its output (the end):\n" + "\n".join(f"  | {ln}" for ln in tail.splitlines()), markup=False,
                      soft_wrap=True, highlight=False)


def _failure_cause(returncode: int, out: str) -> str:
    """Why a sweep's `coopsim run` child failed: the signal that killed it, or its exit code and its last error line
    (``error: ...``, or a traceback's last line)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        who = " (kill -9, or the out-of-memory killer)" if -returncode == signal.SIGKILL else ""
        return f"killed by signal {-returncode} ({name}){who}"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if returncode in (130, 143):
        what = f"interrupted (exit code {returncode}: {'SIGINT' if returncode == 130 else 'SIGTERM'} sent to the run)"
    elif returncode == 0:
        what = "exit code 0, but it did not name its run directory"
    else:
        what = f"exit code {returncode}"
    if errors:
        return f"{what}: {errors[-1]}"
    if any(ln.startswith("Traceback") for ln in lines):
        return f"{what}: {lines[-1]}"
    return what


def _kept_text(run_dir: str | None) -> str:
    """What a failed sweep run left: its finished episodes (metrics.jsonl lines) and where, or that it made none."""
    if run_dir is None:
        return "no run directory was made (it failed before its first episode): nothing kept"
    n = _finished_episodes(Path(run_dir))
    if not n:
        return f"no episode finished; its run directory: {run_dir}"
    return (f"its {n} finished episode{'s are' if n != 1 else ' is'} kept in {run_dir} (metrics.jsonl; "
            f"{_invoked_as()} report {shlex.quote(run_dir)} shows them)")


def _finished_episodes(run_dir: Path) -> int:
    """The episodes in a run directory's ``metrics.jsonl`` as ``coopsim report`` reads them
    (:func:`coopsim.platform.report.read_metrics`: a killed run's cut-off last line is left out); 0 without one."""
    from coopsim.platform.report import read_metrics

    try:
        return len(read_metrics(run_dir / "metrics.jsonl")[0])
    except OSError:
        return 0


def _interrupted_run(exc: BaseException) -> None:
    """The message and exit code of a `run`/`eval` stopped by Ctrl-C (130) or SIGTERM (143)."""
    code = _interrupt_code()
    word = "terminated" if code == 143 else "interrupted"
    where = getattr(exc, "run_dir", None)
    if where and not _finished_episodes(Path(where)):  # the first episode was running: it is lost
        msg = (f"{word} before the first episode finished: no episode is kept ({where} holds the config and a "
               "summary saying so; a run keeps whole episodes only)")
    elif where:
        msg = f"{word}: finished episodes and a valid summary are kept in {where}"
    else:
        msg = f"{word} before any episode finished"
    err_console.print(msg, soft_wrap=True, highlight=False)
    raise typer.Exit(code=code)


#: how long the sweep waits for one child (s): 24 days, about the most poll() takes (a C int of milliseconds); no
#: real limit, but a timeout keeps partial output on an interrupt
_CHILD_WAIT_S = 2.0e6


def _stop_children(procs: list, grace_s: float = 10.0, timeout_s: float = 60.0) -> list[tuple[list[str], str]]:
    """Stop every live `coopsim run` child so that each keeps its finished episodes and writes its summary:
    SIGINT first; SIGTERM (which `run` handles the same way) to those still running after ``grace_s``; SIGKILL
    to those still running after ``timeout_s``. Returns (overrides, output) per child."""
    def signal_live(sig):
        for _, p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(sig)

    signal_live(signal.SIGINT)
    t0 = time.monotonic()
    while any(p.poll() is None for _, p in procs) and time.monotonic() - t0 < grace_s:
        time.sleep(0.1)
    signal_live(signal.SIGTERM)
    deadline = t0 + timeout_s
    outs = []
    for c, p in procs:
        if getattr(p, "coopsim_reported", False):  # it had finished and its result is reported already
            continue
        try:  # with its pipe closed (read to the end already) communicate() returns what it read then
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            p.kill()
            out, _ = p.communicate()
            out = (out or "") + "\n(killed: it did not stop within the timeout)"
        outs.append((c, out or ""))
    return outs


#: prctl(2) option: the signal a process gets when its parent dies (linux/prctl.h)
_PR_SET_PDEATHSIG = 1


def _parent_death_signal():
    """libc's ``prctl`` (Linux), looked up in the parent so the forked child only calls it; None elsewhere or when
    it cannot be found (the child then does not die with the sweep, as before)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def _child_setup(parent_pid: int):
    """The ``preexec_fn`` of a sweep's `coopsim run` child (run in the child after fork, before exec):

    * SIGINT raises KeyboardInterrupt even if the sweep was started with SIGINT ignored (as a background job of a
      script is);
    * the child gets SIGTERM when the sweep dies, however it dies (SIGKILL, the out-of-memory killer, ``timeout -s
      KILL``): ``PR_SET_PDEATHSIG``, which exec keeps (the ns-3 bridge, coopsim/comm/ns3/native/bridge.cc, sets the
      same in C). `coopsim run` treats SIGTERM like Ctrl-C: it keeps its finished episodes, writes a valid summary and
      exits, instead of running on unseen as an orphan. A sweep that died before the setting took effect (the child's
      parent is already another process) ends the child at once."""
    prctl = _parent_death_signal()

    def setup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent_pid:  # the sweep died between fork and prctl: no signal will come
                os._exit(143)

    return setup


def _is_name_override(text: str) -> bool:
    """Whether ``text`` is a ``name=...`` override (or --grid item)."""
    from coopsim.platform.config import override_keys

    return any(k == "name" for k, _, _ in override_keys([text]))


def _grid_of(grid: list[str], key: str) -> str:
    """The values text of the first ``--grid`` of ``key``."""
    return next(g.split("=", 1)[1] for g in grid if "=" in g and g.split("=", 1)[0].strip() == key)


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_") or "x"


def _grid_values(text: str) -> list[str]:
    """The comma-separated values of a ``--grid key=v1,v2,...``; commas inside brackets or braces belong to their
    value (``seeds=[0,1],[2,3]`` is two values)."""
    values, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(depth - 1, 0)
        if ch == "," and depth == 0:
            values.append(cur)
            cur = ""
        else:
            cur += ch
    values.append(cur)
    return values


def _report_many(run_dirs: list[Path], group_by: list[str] | tuple[str, ...] = (), write: bool = True) -> None:
    """Print the comparison table of ``run_dirs`` and write its files (compare.csv, plots) into a new compare-*
    folder beside the first run; ``write=False``: the table only, with the `coopsim report` command that writes
    them (a ``sweep --skip-done`` that ran nothing: its earlier sweep wrote that folder already)."""
    from coopsim.platform.recorder import WriteError, new_run_dir
    from coopsim.platform.report import compare_runs, comparison_files_text, comparison_table

    if not write:
        res = compare_runs(run_dirs, group_by=group_by, write=False)
        _wide_console().print(comparison_table(res))
        for d, note in res["notes"].items():
            console.print(f"note: {d}: {note}", soft_wrap=True, highlight=False)
        console.print(escape(f"nothing ran, so no new comparison folder was written; to write one: {_invoked_as()} "
                             f"report {' '.join(shlex.quote(str(d)) for d in run_dirs)}"), soft_wrap=True,
                      highlight=False)
        return
    unwritable: str | None = None  # why the comparison's files could not be written
    parent = Path(run_dirs[0]).resolve().parent  # `report . OTHER` inside a run: beside it, never into it
    try:
        out = new_run_dir(parent, "compare", what="the comparison folder", hint="copy the run folders to a writable "
                          "place (cp -r) and run `coopsim report` on the copies")
    except ConfigError as exc:  # a read-only or full folder: the table still shows, no files
        unwritable, out = exc.message, None
    try:
        res = compare_runs(run_dirs, out_dir=out, group_by=group_by, write=out is not None)
    except BaseException as exc:  # an unreadable run, a failed write, Ctrl-C: no empty comparison folder left
        if out is not None and not any(out.iterdir()):
            out.rmdir()
        if not isinstance(exc, WriteError):
            raise
        unwritable = exc.message
        res = compare_runs(run_dirs, group_by=group_by, write=False)
    _wide_console().print(comparison_table(res))
    for d, note in res["notes"].items():
        console.print(f"note: {d}: {note}", soft_wrap=True, highlight=False)
    if unwritable is not None:
        kept = f" (kept in {out}: {', '.join(sorted(p.name for p in out.iterdir()))})" \
            if out is not None and out.is_dir() else ""
        err_console.print(f"[yellow]warning:[/] the comparison's files (compare.csv, plots) were not all written{kept}: "
                          f"{escape(unwritable)}", markup=True, highlight=False, soft_wrap=True)
        return
    console.print(f"comparison: {out} ({comparison_files_text(res)})", soft_wrap=True, highlight=False)
    for p in res["plots"]:
        console.print(f"plot: {p}", soft_wrap=True, highlight=False)


@app.command()
def report(run_dirs: List[Path] = typer.Argument(..., help="one run directory, or several to compare"),
           gif: bool = typer.Option(True, help="write a GIF of the first replay (single run)")) -> None:
    """Re-render a run's plots and table (and a replay GIF), or compare several runs."""
    from coopsim.platform.report import (load_run, plot_run, plot_training, render_replays, seed_folder_message,
                                         summary_table, training_run_message, training_seeds)

    stage = "report stopped (it writes each file whole or not at all: none is left half-written)"  # said then
    try:
        seen: dict[Path, Path] = {}
        for d in run_dirs:  # one folder given twice would be pooled with itself (every seed 'ran twice')
            key = d.resolve()
            if key in seen:
                raise CoopsimError(f"{d}: given twice (as {seen[key]} too); give each run directory once")
            seen[key] = d
        if len(run_dirs) > 1:  # `report out_dir/*` after a sweep also matches the sweep's compare-* folder
            folders = [d for d in run_dirs if d.is_dir() and not (d / "config.yaml").exists()
                       and (d / "compare.csv").is_file()]
            for d in folders:
                console.print(f"note: skipped {d}: a comparison folder (compare.csv) that coopsim sweep or report "
                              "wrote, not a run", soft_wrap=True, highlight=False)
            trained = [d for d in run_dirs if d.is_dir() and d not in folders
                       and (training_seeds(d) or seed_folder_message(d))]
            for d in trained:  # as a comparison folder is: a training run holds no evaluation episodes to compare
                console.print(f"note: skipped {seed_folder_message(d) or training_run_message(d)}", soft_wrap=True,
                              highlight=False)
            run_dirs = [d for d in run_dirs if d not in folders and d not in trained]
            if not run_dirs:
                raise CoopsimError("no folder given is a run directory (each is a comparison folder, a training "
                                   "run or one of its seed folders); give the run directories that `coopsim run`, `coopsim eval` or `coopsim "
                                   "sweep` wrote")
        if len(run_dirs) == 1 and run_dirs[0].is_dir() and training_seeds(run_dirs[0]):
            console.print(f"note: {training_run_message(run_dirs[0])}", soft_wrap=True, highlight=False)
            curves = plot_training(run_dirs[0])
            if curves:
                from coopsim.platform.report import training_columns

                drawn = ", ".join(training_columns(run_dirs[0]))
                console.print(f"plot: {curves} (training curves: {drawn} vs env steps)", soft_wrap=True,
                              highlight=False)
            return
        if len(run_dirs) == 1:
            from coopsim.platform.recorder import WriteError
            from coopsim.platform.report import folder_not_writable, replay_absence

            run = load_run(run_dirs[0])
            unwritable = failed = None
            try:
                plot = plot_run(run_dirs[0])
            except WriteError as exc:  # the table still shows; then a warning (read-only folder) or the error
                plot = None
                if folder_not_writable(exc):  # the folder takes no file: the files are skipped, with one warning
                    gif, unwritable = False, exc
                else:  # this file cannot be written (a folder in its way, a full disk): an error, as for the GIF
                    failed = exc
            console.print(summary_table(run))
            if run["note"]:
                console.print(f"note: {run['note']}", soft_wrap=True, highlight=False)
            if plot:
                console.print(f"plot: {plot}", soft_wrap=True, highlight=False)
            if failed is not None:
                raise failed
            if unwritable is not None:
                err_console.print(f"[yellow]warning:[/] no plot or replay GIF written: {escape(str(unwritable))}",
                                  markup=True, highlight=False, soft_wrap=True)
            if gif:
                stage = ("replay GIF not written (no partial file is left; the table and plot above are kept; "
                         "--no-gif skips the GIF)")
                try:
                    gifs = render_replays(run_dirs[0])
                except WriteError as exc:
                    if not folder_not_writable(exc):
                        raise
                    err_console.print(f"[yellow]warning:[/] no replay GIF written: {escape(str(exc))}",
                                      markup=True, highlight=False, soft_wrap=True)
                    return
                for g in gifs:
                    console.print(f"replay: {g}", soft_wrap=True, highlight=False)
                if not gifs:
                    console.print(f"no replay GIF: {replay_absence(run_dirs[0], run['config']['scenario']['id'])}",
                                  soft_wrap=True, highlight=False)
        else:
            _report_many(list(run_dirs))
    except CoopsimError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        _ignore_further_interrupts()
        err_console.print(f"interrupted: {stage}", soft_wrap=True, highlight=False)
        raise typer.Exit(code=_interrupt_code())


@app.command()
def train(config: Optional[Path] = typer.Argument(None, help="training config (YAML with a train: section); with "
                                                              "--resume it may be left out: the run's config.yaml"),
          overrides: Optional[List[str]] = typer.Argument(None, help=OVERRIDES_HELP),
          resume: Optional[Path] = typer.Option(None, help="continue the stopped run in this directory (written by "
                                                         "coopsim train) from its last checkpoint; the budget is the "
                                                         "run's stored train.total_env_steps, not the YAML file's, "
                                                         "unless the command line gives train.total_env_steps=N")) -> None:
    """Train a learner (checkpoints, CSV and TensorBoard logs).

    --resume continues a stopped run exactly with the run's stored budget; a larger budget (train.total_env_steps=N) trains further, but moves an annealed lr / entropy schedule back up (a warning says so): the result then differs from an uninterrupted run of N steps.
    """  # noqa: E501 - one line per paragraph: the help text is wrapped to the terminal, source line ends would show
    overrides = list(overrides or [])
    if resume is not None and (config is None or ("=" in str(config) and not config.exists())):
        if config is not None:  # `train --resume RUN key=value`: the first override took CONFIG's place
            overrides.insert(0, str(config))
        config = resume / "config.yaml"
    elif config is None:
        _fail(ConfigError("give the training config (coopsim train CONFIG [key=value ...]), or --resume RUN_DIR "
                          "to continue a run"))
    try:
        from coopsim.platform.training import train_main

        _check_overrides(overrides, config)
        with _sigterm_as_interrupt():
            run_dir = train_main(str(config), list(overrides or []), str(resume) if resume else None,
                                 info=lambda msg: console.print(msg, soft_wrap=True, highlight=False))
    except CoopsimError as exc:
        from coopsim.platform.recorder import WriteError

        where = getattr(exc, "run_dir", None)
        if isinstance(exc, WriteError) and where is not None:  # a full disk mid-training: what was kept, how to go on
            kept = getattr(exc, "kept", None)
            again = " ".join(shlex.quote(str(x)) for x in [config, *(overrides or [])])
            what = f"kept {kept}" if kept else "no checkpoint was written (--resume starts every seed over)"
            _fail(WriteError(f"{exc}; {what}; once it can be written, continue with: {_invoked_as()} train {again} "
                             f"--resume {shlex.quote(str(where))}", path=exc.path, errno=exc.errno,
                             strerror=exc.strerror))
        _fail(exc)
    except KeyboardInterrupt as exc:
        _ignore_further_interrupts()
        code = _interrupt_code()
        word = "terminated" if code == 143 else "interrupted"
        where = getattr(exc, "run_dir", None) or resume
        kept = getattr(exc, "kept", None)  # train_main's one line of what it kept (None: no checkpoint)
        if where is None:  # stopped before the run directory existed, or train_main removed an empty one
            err_console.print(f"{word}: {kept or 'before the run directory was created: nothing was written'}",
                              soft_wrap=True, highlight=False)
            raise typer.Exit(code=code)
        again = " ".join(shlex.quote(str(x)) for x in [config, *overrides])
        what = f"kept {kept}" if kept else "no checkpoint was written (--resume starts every seed over)"
        err_console.print(f"{word}: {what}; continue with: {_invoked_as()} train {again} --resume {shlex.quote(str(where))}", soft_wrap=True,
                          highlight=False)
        raise typer.Exit(code=code)
    except (MemoryError, RuntimeError) as exc:  # torch reports a failed allocation as a RuntimeError
        if not isinstance(exc, MemoryError) and "allocate" not in str(exc) and "out of memory" not in str(exc):
            raise
        err_console.print(f"error: out of memory while training ({type(exc).__name__}: {escape(str(exc).splitlines()[0][:200])}); "
                          "the rollout holds train.num_envs x train.rollout_steps agent-steps: lower them (or the "
                          "replay buffer, train.buffer_episodes, for QMIX); checkpoints already written are kept",
                          soft_wrap=True, highlight=False)
        raise typer.Exit(code=2)
    # the run directory was printed when training began; end with what to do with the result
    seeds = sorted((p for p in Path(run_dir).glob("seed-*") if (p / "policy.pt").is_file()), key=lambda p: p.name)
    if seeds:
        first = seeds[0].name.split("-", 1)[1]
        cfg = Path(run_dir) / "config.yaml"  # the run's own config, overrides included
        console.print(f"trained: {len(seeds)} polic{'y' if len(seeds) == 1 else 'ies'} in {run_dir}/seed-*/policy.pt; "
                      f"next: {_invoked_as()} eval {shlex.quote(str(cfg if cfg.is_file() else config))} "
                      f"{shlex.quote(f'seeds=[{first}]')} --checkpoint {shlex.quote(str(seeds[0]))}"
                      + (f"   (one seed; likewise seed-<s> with 'seeds=[<s>]' for the other {len(seeds) - 1})"
                         if len(seeds) > 1 else ""),
                      soft_wrap=True, highlight=False)
    else:
        console.print(f"run directory: {run_dir}", soft_wrap=True, highlight=False)


@app.command("eval")
def eval_cmd(config: Path = typer.Argument(..., help="run config (YAML)"),
             checkpoint: Path = typer.Option(..., help="policy.pt / checkpoint.pt written by `coopsim train`, or a "
                                                       "training run's seed-<s> directory"),
             overrides: Optional[List[str]] = typer.Argument(None, help=OVERRIDES_HELP),
             progress: bool = typer.Option(True, help="show a progress bar")) -> None:
    """Evaluate a trained checkpoint; writes the same run directory as `coopsim run`."""
    try:
        from coopsim.platform.config import load_config
        from coopsim.platform.runner import ignored_train_warning, scenario_params_warning
        from coopsim.platform.training import eval_main

        _check_overrides(overrides, config)
        cfg = load_config(config, list(overrides or []))
        warnings = [w for w in (ignored_train_warning(cfg, list(overrides or []), str(checkpoint),
                                                      command="coopsim eval"), scenario_params_warning(cfg)) if w]

        def opened(run_dir: Path) -> None:  # as `coopsim run`: the warnings once everything is built
            for warning in warnings:
                err_console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, highlight=False, soft_wrap=True)
            _checkpoint_note(str(checkpoint))
            _name_run_dir_in_logs(run_dir)

        with _sigterm_as_interrupt():
            run_dir = eval_main(str(config), list(overrides or []), str(checkpoint), progress=progress,
                                on_open=opened)
    except CoopsimError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:
        _ignore_further_interrupts()
        _interrupted_run(exc)
    except Exception as exc:  # an episode raised (a scenario's or agent's own code): one line, the run is kept
        _failed_run(exc)
    _finished_run(run_dir)


class _ClosedPipeSafeStdout:
    """``sys.stdout`` of the ``coopsim`` command: a reader of the output that stops reading (``coopsim run ... | head
    -1``) never fails or aborts the command. The first write or flush that meets the closed pipe (BrokenPipeError)
    points file descriptor 1 at os.devnull (as :func:`coopsim.errors.run_script` does, so no second error comes when
    Python flushes stdout at exit) and every later line (progress, tables) is dropped; the command runs on and
    :func:`main` exits with 141 (the shell's 128 + SIGPIPE) instead of 0."""

    def __init__(self, stream):
        self._stream = stream
        self.pipe_closed = False

    def write(self, text: str) -> int:
        if not self.pipe_closed:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._closed()
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.pipe_closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._closed()

    def _closed(self) -> None:
        self.pipe_closed = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)

    def __getattr__(self, name: str):  # isatty, fileno, encoding, buffer, ...: those of the real stdout
        return getattr(self._stream, name)


#: exit code of a command whose stdout reader stopped reading (128 + SIGPIPE), as :func:`coopsim.errors.run_script`
EXIT_PIPE_CLOSED = 141


def main() -> None:
    out = sys.stdout = _ClosedPipeSafeStdout(sys.stdout) if sys.stdout is not None else None
    try:
        app()
    except CoopsimError as exc:  # errors raised while typer parses
        err_console.print(f"error: {exc}", highlight=False)
        sys.exit(2)
    except SystemExit as exc:  # typer ends every command with one
        if out is not None and out.pipe_closed and exc.code in (0, None):
            sys.exit(EXIT_PIPE_CLOSED)  # it did all its work; only its output was not read
        raise
    if out is not None and out.pipe_closed:
        sys.exit(EXIT_PIPE_CLOSED)


if __name__ == "__main__":
    main()
