"""Interleaved A/B of two SMACCore versions in one process (CPU time): ``before.py`` against the installed core.

Usage: ``taskset -c 0 .venv/bin/python benchmarks/smac_step_ab.py BEFORE_CORE_PY REPS MAP:BATCH:STEPS ...``, e.g.
``git show 6ef6ec2:coopsim/scenarios/smac/core.py > /tmp/before.py`` (the last numpy core; the compiled one
replaced it) then
``... /tmp/before.py 6 3m:1:100 3m:64:20 2s3z:1:100 2s3z:64:20 27m_vs_30m:1:40 27m_vs_30m:64:3 3m:1024:2 27m_vs_30m:1024:1``.
Each block steps one core STEPS times (random valid actions, finished envs reset); blocks alternate REPS times.
"""
import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from coopsim.errors import ConfigError, int_at_least, run_script


def load(path, name):
    """Module ``name`` executed from the Python file ``path``.

    Raises:
        ConfigError: key ``BEFORE_CORE_PY``; ``path`` is not a ``.py`` file, or running it failed (the error named).
    """
    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        # spec_from_file_location gives None for a name without the .py suffix (e.g. "--help" taken as the file)
        raise ConfigError(f"{path} is not a Python file; give the SMACCore module to compare against, e.g. "
                          "/tmp/before.py from `git show <commit>:coopsim/scenarios/smac/core.py > /tmp/before.py`",
                          key="BEFORE_CORE_PY", value=str(path))
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    try:
        spec.loader.exec_module(m)
    except Exception as exc:  # an old core that no longer imports against today's package
        del sys.modules[name]
        raise ConfigError(f"cannot load {path}: {type(exc).__name__}: {exc}", key="BEFORE_CORE_PY",
                          value=str(path)) from None
    if not hasattr(m, "SMACCore"):
        raise ConfigError(f"{path} defines no SMACCore; give a copy of coopsim/scenarios/smac/core.py",
                          key="BEFORE_CORE_PY", value=str(path))
    return m


def case(text: str) -> tuple[str, int, int]:
    """An ``argparse`` ``type=`` for ``MAP:BATCH:STEPS`` (a SMAC map of coopsim, batch >= 1, steps >= 1)."""
    from coopsim.scenarios.smac.maps import get_map

    parts = text.split(":")
    if len(parts) != 3 or not all(p.strip().lstrip("+").isdigit() and int(p) >= 1 for p in parts[1:]):
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: MAP:BATCH:STEPS with BATCH and STEPS integers "
                                         ">= 1 (e.g. 3m:64:20) is required")
    try:
        get_map(parts[0])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: {exc}") from None
    return parts[0], int(parts[1]), int(parts[2])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", metavar="BEFORE_CORE_PY", help="the SMACCore module (.py) to compare the installed core with")
    ap.add_argument("reps", metavar="REPS", type=int_at_least(1), help="alternations of the two blocks (>= 1)")
    ap.add_argument("cases", metavar="MAP:BATCH:STEPS", type=case, nargs="+", help="map, batch size, steps per block")
    a = ap.parse_args(argv)
    old = load(a.before, "oldcore")
    if str(Path(__file__).resolve().parent) not in sys.path:  # imported by a test rather than run as a script
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    import coopsim.scenarios.smac.core as new
    from smac_speed import random_stepper  # same directory

    def make(cls, m, b):
        one = random_stepper(cls(num_envs=b, map_name=m), seed=0)
        for _ in range(3): one()
        return one
    for m, b, n in a.cases:
        fo, fn = make(old.SMACCore, m, b), make(new.SMACCore, m, b)
        to, tn = [], []
        for rep in range(a.reps):
            for f, acc in ((fo, to), (fn, tn)):
                c0 = time.process_time()
                for _ in range(n): f()
                acc.append((time.process_time() - c0) / (b * n))
        to, tn = np.array(to), np.array(tn)
        print(f"{m:11s} b={b:5d}: steps/CPU-s old min-time {1/to.min():9,.0f} med {1/np.median(to):9,.0f} | new {1/tn.min():9,.0f} med {1/np.median(tn):9,.0f} | x{to.min()/tn.min():.2f} (med x{np.median(to)/np.median(tn):.2f})", flush=True)


if __name__ == "__main__":
    run_script(main)
