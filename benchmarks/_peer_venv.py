"""Peer libraries of the benchmark scripts, each in its own venv ``bench-venvs/<name>`` (gitignored), and the cores
their measurements are pinned to. Imported by ``mapf_throughput.py``, ``smac_speed.py``, ``mpe_mappo_vs_benchmarl.py``
and ``ns3_overhead.py``, and for :func:`check_writable` by ``immp_compare.py`` and ``immp_intent_finetune.py`` (not a
benchmark itself).

A peer venv is ready only when the peer is installed whole at its pinned version and imports there
(:func:`installed_check`), not merely when ``bin/python`` exists: a ``pip install`` interrupted by Ctrl-C or a lost
connection leaves a venv with a python but without the peer (``No module named 'jax'`` on every later run).
:func:`ensure_peer_venv` rebuilds such a venv from scratch (``python -m venv --clear`` and the installs again).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from coopsim.errors import ConfigError, DependencyNotInstalled
from coopsim.platform.recorder import check_writable  # noqa: F401  (the benchmarks import it from here)


def installed_check(dist: str, version: str, imports: tuple[str, ...] = ()) -> str:
    """Python code (for :func:`peer_ready`) that fails unless distribution ``dist`` is installed at ``version`` and
    whole (it has its ``RECORD``, which pip writes last, and every file listed there exists) and ``imports`` (module
    names or ``from x import y`` statements) import."""
    lines = [
        "import importlib.metadata as m",
        "try:",
        f"    d = m.distribution({dist!r})",
        "except m.PackageNotFoundError:",
        f"    raise SystemExit({dist + ' is not installed'!r})",
        f"if d.version != {version!r}:",
        f"    raise SystemExit({dist!r} + ' ' + d.version + ' is installed, not ' + {version!r})",
        "missing = [str(f) for f in d.files or () if not f.locate().exists()]",
        "if d.files is None or missing:",
        f"    raise SystemExit({dist + ' is installed only in part (interrupted install?); missing: '!r}"
        " + (', '.join(missing[:3]) or 'its RECORD'))",
    ]
    lines += [s if s.startswith("from ") else f"import {s}" for s in imports]
    return "\n".join(lines)


def peer_ready(python: Path, check: str, timeout: float = 900) -> tuple[bool, str]:
    """``(True, "")`` when ``python`` exists and runs ``check`` (Python code) with exit code 0; otherwise ``(False,
    why)``, ``why`` the last line the check printed to stderr (e.g. ``ModuleNotFoundError: No module named 'jax'``)."""
    if not python.exists():
        return False, f"{python} does not exist"
    try:
        r = subprocess.run([str(python), "-c", check], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"the check did not finish in {timeout:.0f} s"
    except OSError as exc:
        return False, f"{python} does not run: {exc.strerror or exc}"
    if r.returncode == 0:
        return True, ""
    lines = r.stderr.strip().splitlines()
    return False, lines[-1] if lines else f"the check exited with code {r.returncode}"


def ensure_peer_venv(venv: Path, check: str, installs: list[list[str]], *, base_python: str = sys.executable) -> Path:
    """The python of ``venv`` once ``check`` passes there (see :func:`installed_check`); when it does not (no venv,
    or a venv whose install was interrupted), ``venv`` is (re)created empty with ``base_python -m venv --clear`` and
    each list of ``installs`` is pip-installed in turn, then checked again.

    Raises:
        DependencyNotInstalled: a step of the install failed (pip's own message is above), or the check still fails
            after a fresh install. The venv is left not ready, so the next run rebuilds it.
    """
    venv = Path(venv)
    py = venv / "bin" / "python"
    ok, why = peer_ready(py, check)
    if ok:
        return py
    what = "; ".join("pip install " + " ".join(pkgs) for pkgs in installs)
    if venv.exists():
        print(f"{venv} is not ready ({why}); rebuilding it ({what}) ...", flush=True)
    else:
        print(f"creating {venv} ({what}) ...", flush=True)
    for cmd in [[base_python, "-m", "venv", "--clear", str(venv)],
                *([str(py), "-m", "pip", "install", "-q", *pkgs] for pkgs in installs)]:
        try:
            subprocess.run(cmd, check=True)
        except (subprocess.CalledProcessError, OSError) as exc:
            how = f"exit code {exc.returncode}" if isinstance(exc, subprocess.CalledProcessError) else (exc.strerror or exc)
            raise DependencyNotInstalled(f"building the peer venv {venv}: `{' '.join(cmd)}` failed ({how}); the next "
                                         "run rebuilds it") from None
    ok, why = peer_ready(py, check)
    if not ok:
        raise DependencyNotInstalled(f"the peer venv {venv} was built ({what}) but its check still fails: {why}")
    return py


def check_cpu_list(flag: str, cpus: str) -> None:
    """Make sure ``taskset -c cpus`` can pin a process (a CPU list such as ``0`` or ``0,1``; tried with ``true``).

    Raises:
        ConfigError: key ``flag``; taskset is missing or refuses ``cpus`` (its message, and this machine's CPUs).
    """
    if shutil.which("taskset") is None:
        raise ConfigError("pinning to a CPU list needs `taskset` (util-linux), which is not on PATH", key=flag,
                          value=cpus)
    r = subprocess.run(["taskset", "-c", cpus, "true"], capture_output=True, text=True)
    if r.returncode != 0:
        import os

        said = (r.stderr.strip().splitlines() or ["refused"])[-1]
        raise ConfigError(f"invalid CPU list {cpus!r} ({said}); give CPUs of this machine, e.g. 0 or 0,1 "
                          f"(it has {os.cpu_count()}: 0..{(os.cpu_count() or 1) - 1})", key=flag, value=cpus)

