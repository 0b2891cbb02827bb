"""The `coopsim` CLI in a subprocess, for tests that check its messages (tests/ is on sys.path under pytest)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=ROOT):
    """``python -m coopsim.cli *args`` in ``cwd`` (the repository by default), wide terminal, one thread."""
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "400", "OMP_NUM_THREADS": "1"})


def _err(r) -> str:
    """The stderr of a refused command (exit 2, no traceback) on one line."""
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    return " ".join(r.stderr.split())


def run_main(main, argv):
    """``coopsim.errors.run_script(main, argv)`` in-process, as ``python -m`` runs a script: (exit code, stdout,
    stderr)."""
    import contextlib
    import io

    from coopsim.errors import run_script

    o, e = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            run_script(main, argv)
        except SystemExit as exc:
            code = exc.code
    return code, o.getvalue(), e.getvalue()


def run_config_until(cfg, stop_after=None):
    """``run_config(cfg)`` (a loaded config), interrupted as by Ctrl-C after ``stop_after`` episodes when given (as a
    sweep interrupted mid-cell leaves a run); returns the run directory."""
    import pytest

    from coopsim.platform.runner import RunInterrupted, run_config

    if stop_after is None:
        return Path(run_config(cfg, progress=False))
    done = []

    def stop(_row):
        done.append(1)
        if len(done) == stop_after:
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted) as info:
        run_config(cfg, progress=False, on_episode=stop)
    return Path(info.value.run_dir)
