"""``load_benchmark``: a ``benchmarks/<name>.py`` script as a module, for tests (``from bench_loader import
load_benchmark``; pytest puts ``tests/`` on ``sys.path`` through its conftest). The benchmark folder is on
``sys.path`` while the script loads, as when it is run as a script, so its imports of sibling benchmarks work."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str, module_name: str | None = None) -> ModuleType:
    """A fresh module object of ``benchmarks/<name>.py`` (executed once per call), named ``module_name``
    (default ``name``); not entered in ``sys.modules``.

    Raises:
        FileNotFoundError: no such script.
    """
    path = BENCH / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark script {path}")
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(module_name or name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))
