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
"""
from __future__ import annotations

import json
import math
import os
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace`` (never a half-written file)."""
    path = Path(path)
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


def new_run_dir(out_dir: str | Path, name: str) -> Path:
    from coopsim.errors import ConfigError

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    d = Path(out_dir) / f"{name}-{stamp}-{secrets.token_hex(3)}"
    try:
        d.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise ConfigError(f"cannot create the run directory {d}: {exc.strerror or exc}; give a writable folder",
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
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        self._f.write(json_line(row) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


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
