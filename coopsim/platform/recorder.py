"""Run directories: atomic writes, metrics.jsonl, summary.json, replays.

Layout of ``runs/<name>-<UTC time>-<short id>/``:

* ``config.yaml``: the resolved config (defaults filled in, overrides applied).
* ``metrics.jsonl``: one JSON line per finished episode (keys sorted; no wall times, so the same config
  and seed give a byte-identical file).
* ``timing.jsonl``: wall time of each episode (s) and the agent's and shield's ``episode_timings()`` (e.g.
  ``shield/filter_ms_per_call``), kept apart from the metrics.
* ``summary.json``: per metric, mean over seeds of per-seed means with a Student-t 95% interval; the run's
  ``wall_s``, under ``timing`` the mean over episodes of each ``timing.jsonl`` value and, under ``totals``, the
  shield's totals over the whole run (``metrics.jsonl`` rows carry per-episode counts only).
* ``replays/seed<S>_ep<E>.npz``: the scenario's replay arrays, when it offers ``replay()``.
* ``*.png``: plots (written with :func:`atomic_savefig`).

JSON files are written with :func:`dumps_json`: strict JSON, a non-finite number (nan, inf) is ``null``.

A writer that fails (a full disk, a read-only file system, no permission) raises :class:`WriteError`, one line
naming the file and the cause (an ``OSError`` and a :class:`~coopsim.errors.CoopsimError`: the CLI prints it
without a traceback).
"""
from __future__ import annotations

import errno as _errno
import json
import math
import os
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from coopsim.errors import ConfigError, CoopsimError

#: errno values of a file system that cannot take the write, and what the user can do about each
_WRITE_HINTS = {
    _errno.ENOSPC: "free some space on that device, or write elsewhere",
    _errno.EDQUOT: "free some space within your disk quota, or write elsewhere",
    _errno.EROFS: "the folder is on a read-only file system: write elsewhere (or copy the folder to a writable place)",
    _errno.EACCES: "the folder is not writable by you: write elsewhere, or fix its permissions",
    _errno.EPERM: "the folder is not writable by you: write elsewhere, or fix its permissions",
}


class WriteError(CoopsimError, OSError):
    """A file could not be written (full disk, read-only file system, no permission, ...).

    Both a :class:`~coopsim.errors.CoopsimError` (the CLI prints its one-line message, no traceback) and an
    ``OSError`` (``errno``, ``strerror`` and ``filename`` are those of the failed call), so code that catches
    ``OSError`` around a writer still does.
    """

    def __init__(self, message: str, *, path: str | Path | None = None, errno: int | None = None,
                 strerror: str | None = None):
        Exception.__init__(self, message)
        self.message, self.path = message, (str(path) if path is not None else None)
        self.errno, self.strerror, self.filename = errno, strerror, self.path

    def __str__(self) -> str:
        return self.message

    @classmethod
    def of(cls, exc: OSError, path: str | Path, what: str = "") -> "WriteError":
        """The :class:`WriteError` of writing ``path`` (``what`` it is, e.g. ``the plot``) that failed with
        ``exc``: ``cannot write <path>: <strerror>; <what to do>``; ``exc`` itself if it already is one."""
        if isinstance(exc, WriteError):
            return exc
        why = exc.strerror or str(exc) or type(exc).__name__
        hint = _WRITE_HINTS.get(exc.errno)
        return cls(f"cannot write {what + ' ' if what else ''}{path}: {why}" + (f"; {hint}" if hint else ""),
                   path=path, errno=exc.errno, strerror=exc.strerror)


def is_out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed because the device (or the quota) is full."""
    return isinstance(exc, OSError) and exc.errno in (_errno.ENOSPC, _errno.EDQUOT)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace`` (never a half-written file).

    Raises:
        WriteError: the folder or the file cannot be written (the temporary file is removed).
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except WriteError:
        raise
    except OSError as exc:
        raise WriteError.of(exc, path) from None


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, as :func:`atomic_write_bytes` (the one text writer of run
    and training directories)."""
    atomic_write_bytes(Path(path), text.encode())


def atomic_savez(path: Path, **arrays: np.ndarray) -> None:
    import io

    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def atomic_savefig(fig, path: str | Path, **kwargs: Any) -> None:
    """``fig.savefig(path, **kwargs)`` through :func:`atomic_write_bytes` (an interrupted run never leaves a
    truncated image): the figure is rendered into memory in the format of ``path``'s suffix (``png`` without one)
    unless ``format=`` is given."""
    import io

    path = Path(path)
    kwargs.setdefault("format", path.suffix.lstrip(".").lower() or "png")
    buf = io.BytesIO()
    fig.savefig(buf, **kwargs)
    atomic_write_bytes(path, buf.getvalue())


def new_run_dir(out_dir: str | Path, name: str, *, what: str = "the run directory",
                hint: str = "give a writable folder") -> Path:
    """Create ``out_dir/<name>-<UTC time>Z-<6 hex>`` and return it.

    Raises:
        ConfigError: key ``out_dir``; it cannot be created (``cannot create <what> <dir>: <reason>; <hint>``).
    """
    from coopsim.errors import ConfigError

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    d = Path(out_dir) / f"{name}-{stamp}-{secrets.token_hex(3)}"
    try:
        d.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise ConfigError(f"cannot create {what} {d}: {exc.strerror or exc}; {hint}",
                          key="out_dir", value=str(out_dir)) from None
    return d


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _finite_json(v: Any) -> Any:
    """``v`` with every non-finite float (python or numpy, nested in dicts, lists, tuples and numpy arrays) made
    None and numpy scalars and arrays made python values, so that strict JSON can hold it."""
    if isinstance(v, dict):
        return {k: _finite_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite_json(x) for x in v]
    if isinstance(v, np.ndarray):
        return _finite_json(v.tolist())
    return _jsonable(v)


def dumps_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, **kwargs)`` as strict JSON: nan and +-inf (python and numpy floats, at any depth, also
    inside numpy arrays) are written as ``null``, never as the bare ``NaN`` / ``Infinity`` that strict parsers
    (jq, JavaScript) reject; numpy scalars and arrays are written as numbers and lists. The writer of every
    result JSON file (summary.json, benchmark results); readers take a ``null`` number as missing."""
    return json.dumps(_finite_json(obj), allow_nan=False, **kwargs)


def check_writable(flag: str, path: str | Path, *, folder: bool = False) -> None:
    """Make sure ``path`` (a file, or with ``folder`` a directory) can be written later, before an experiment runs,
    a benchmark's peer venv is built or anything is measured: a file is not a folder, and the nearest existing
    folder above takes a new file (tried with a temporary file, removed again; nothing else is created).

    Raises:
        ConfigError: key ``flag``; says why (an empty path too: ``Path("")`` would be the current folder).
    """
    if isinstance(path, str) and not path.strip():
        what = "the folder to write into" if folder else "the file to write"
        raise ConfigError(f"invalid value {path!r}: the path is empty; give {what}", key=flag, value=path)
    p = Path(path)
    if not folder and p.is_dir():
        raise ConfigError(f"{path} is a folder; give the file to write", key=flag, value=str(path))
    base = p if folder else p.parent
    while not base.exists() and base != base.parent:
        base = base.parent
    try:
        if not base.is_dir():
            raise NotADirectoryError(f"{base} is not a folder")
        fd, tmp = tempfile.mkstemp(dir=base, prefix=".coopsim-write-check-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise ConfigError(f"cannot write {path} ({exc.strerror or exc}); give a path in a writable folder", key=flag,
                          value=str(path)) from None


def atomic_write_json(path: str | Path, obj: Any, **kwargs: Any) -> None:
    """Write ``obj`` to ``path`` as strict JSON (:func:`dumps_json`, ``kwargs`` as ``json.dumps``: ``indent``,
    ``sort_keys``) through :func:`atomic_write_bytes`: a reader never sees a half-written file, and an
    interrupted writer leaves the previous version. The one writer of result JSON files (summary.json,
    results.json, benchmark outputs)."""
    atomic_write_text(path, dumps_json(obj, **kwargs))


def json_line(row: dict[str, Any]) -> str:
    return json.dumps({k: _jsonable(v) for k, v in row.items()}, sort_keys=True, allow_nan=False)


class JsonlWriter:
    """Appends one line per record and fsyncs it, so an interrupted run keeps every finished record."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self._f = open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise WriteError.of(exc, self.path) from None

    def write(self, row: dict[str, Any]) -> None:
        """Append ``row`` as one line.

        Raises:
            WriteError: the line could not be written (a full disk): the lines before it are kept, a part of this
                one may be (:func:`read_jsonl` skips a truncated last line).
        """
        try:
            self._f.write(json_line(row) + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as exc:
            raise WriteError.of(exc, self.path) from None

    def close(self) -> None:
        """Close the file; a failed last flush (a full disk) is not raised: every line was flushed by
        :meth:`write`, which raised then."""
        try:
            self._f.close()
        except OSError:
            pass


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a JSONL file, ignoring a truncated last line (a run killed mid-write)."""
    rows = []
    p = Path(path)
    if not p.exists():
        return rows
    for line in p.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
