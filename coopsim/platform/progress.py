"""Progress display of runs and training: a rich bar on a terminal, plain lines otherwise.

A rich bar redraws one line in place, which a file or a pipe cannot show: there it came out once, at the end,
cut to 80 columns. When the output is not a terminal, :func:`make_progress` gives a :class:`LineProgress`
instead: one complete line every ``every_s`` seconds and one when the work is done, e.g.::

    line-random  success=0  soc=56: 24/60 episodes (40%), 0:00:10 elapsed, ~0:00:15 left
"""
from __future__ import annotations

import sys
import time
from datetime import timedelta
from typing import Any, TextIO

#: seconds between two plain progress lines
EVERY_S = 10.0


#: longest duration :func:`_hms` writes out (99999 hours, about 11 years); a longer one (up to inf: the ETA of
#: a huge budget) is :data:`HMS_TOO_LONG`
HMS_MAX_S = 99999 * 3600
HMS_TOO_LONG = ">99999 h"


def _hms(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (``0:00:10``; ``3 days, 4:05:06`` past a day); negative is ``0:00:00``, more than
    :data:`HMS_MAX_S` (up to inf) is ``>99999 h`` and nan (or no number) is ``?``: never raises."""
    try:
        s = float(seconds)
    except OverflowError:  # an int too large for a float
        return HMS_TOO_LONG if seconds > 0 else _hms(0)
    except (TypeError, ValueError):
        return "?"
    if s != s:  # nan
        return "?"
    if s > HMS_MAX_S:
        return HMS_TOO_LONG
    return str(timedelta(seconds=int(max(s, 0))))


class LineProgress:
    """The part of ``rich.progress.Progress`` the runner and the trainer use (``add_task``, ``update``, ``start``,
    ``stop``, a context manager), printed as plain lines: one every ``every_s`` seconds while a task advances and
    one when it completes (or, if it did not, when the display stops).

    Args:
        unit: what the task counts, named in the lines (``episodes``, ``env steps``).
        every_s: seconds between two lines of a task.
        file: the stream (default: ``sys.stdout`` at the time of each line).
        info_field: a task field appended to the line (the trainer's ``info``).
    """

    def __init__(self, unit: str = "", every_s: float = EVERY_S, file: TextIO | None = None,
                 info_field: str | None = None):
        self.unit, self.every_s, self.file, self.info_field = unit, float(every_s), file, info_field
        self.tasks: list[dict[str, Any]] = []
        self.lines: int = 0

    def __enter__(self) -> "LineProgress":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        pass

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **fields: Any) -> int:
        now = time.monotonic()
        self.tasks.append({"description": description, "total": total, "completed": completed, "start": now,
                           "start_completed": completed, "last_line": now, "shown": None, "fields": dict(fields)})
        return len(self.tasks) - 1

    def update(self, task_id: int, *, advance: float | None = None, completed: float | None = None,
               total: float | None = None, description: str | None = None, **fields: Any) -> None:
        t = self.tasks[task_id]
        if total is not None:  # as rich's Progress.update: a new total
            t["total"] = total
        if completed is not None:
            t["completed"] = completed
        if advance is not None:
            t["completed"] += advance
        if description is not None:
            t["description"] = description
        t["fields"].update(fields)
        now = time.monotonic()
        done = t["total"] is not None and t["completed"] >= t["total"]
        if done or now - t["last_line"] >= self.every_s:
            self._line(t, now)

    def stop(self) -> None:
        now = time.monotonic()
        for t in self.tasks:
            if t["shown"] != (t["completed"], t["description"]):  # its last state was not printed yet
                self._line(t, now)

    def _line(self, t: dict[str, Any], now: float) -> None:
        if t["shown"] == (t["completed"], t["description"]):
            return
        done, total = t["completed"], t["total"]
        unit = f" {self.unit}" if self.unit else ""
        elapsed = now - t["start"]
        text = (f"{t['description']}: {_count(done)}/{_count(total)}{unit}" if total
                else f"{t['description']}: {_count(done)}{unit}")
        if total:
            text += f" ({100.0 * done / total:.0f}%)"
        text += f", {_hms(elapsed)} elapsed" + (" this session" if t["start_completed"] else "")
        rate_done = done - t["start_completed"]
        if total and done < total and rate_done > 0:
            text += f", ~{_hms(elapsed / rate_done * (total - done))} left"
        info = t["fields"].get(self.info_field) if self.info_field else None
        if info:
            text += f"  {info}"
        f = self.file or sys.stdout
        print(text, file=f, flush=True)
        self.lines += 1
        t["last_line"], t["shown"] = now, (done, t["description"])


def _count(x: float) -> str:
    """A whole count with thousands separators (``2,289,664``, not ``2.28966e+06``); other values as ``:g``."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def is_terminal() -> bool:
    """Whether stdout is a terminal as rich sees it (``FORCE_COLOR``/``TTY_COMPATIBLE`` and Jupyter included)."""
    from rich.console import Console

    return Console().is_terminal


def make_progress(*columns: Any, enabled: bool = True, unit: str = "", info_field: str | None = None,
                  terminal: bool | None = None):
    """A rich ``Progress`` with ``columns`` on a terminal; a :class:`LineProgress` counting ``unit`` when stdout is
    not one (``terminal`` overrides the check); a disabled rich ``Progress`` (no output) unless ``enabled``."""
    from rich.progress import Progress

    if not enabled:
        return Progress(*columns, disable=True)
    if not (is_terminal() if terminal is None else terminal):
        return LineProgress(unit=unit, info_field=info_field)
    return Progress(*columns, transient=False)
