"""A cold numba compile of the SMAC kernels (about 15 s) announces itself with one stderr line; a warm cache is silent."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from coopsim.scenarios.smac import _kernels as K
from coopsim.scenarios.smac import core as smac_core

NOTICE = "coopsim: compiling the SMAC kernels (first use on this machine, about 15 s; cached afterwards)"

SCRIPT = """
import numpy as np
from coopsim.platform import registry as reg
env = reg.make("smac/3m-v0")
env.reset(seed=0)
env.step({a: 1 for a in env.agents})
print("stepped")
"""


def _run(cache_dir) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1"}
    env.pop("NUMBA_DISABLE_JIT", None)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)


def test_notice_text():
    assert smac_core.COMPILE_NOTICE == NOTICE


@pytest.mark.slow
def test_cold_cache_prints_one_line_warm_cache_none(tmp_path):
    cold = _run(tmp_path)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout == "stepped\n"
    assert cold.stderr == NOTICE + "\n"
    assert any(p.suffix == ".nbi" for p in tmp_path.rglob("*"))  # numba wrote its cache there
    warm = _run(tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout == "stepped\n"
    assert warm.stderr == ""


def test_kernel_cached_in_process():
    core = smac_core.SMACCore(num_envs=1, map_name="3m")
    core.reset(seed=0)
    core.step(np.zeros((1, 3), np.int64))
    assert smac_core._kernel_cached(K.reset_envs) and smac_core._kernel_cached(K.step)
    assert smac_core._notice_pending is False


def test_stale_or_foreign_index_counts_as_cold(monkeypatch):
    class FakeFile:
        def __init__(self, index):
            self.index = index

        def _load_index(self):
            return self.index

    class FakeCache:
        def __init__(self, index):
            self._cache_file = FakeFile(index)

        def _index_key(self, sig, codegen):
            return (sig, ("x86_64", "cpu-a", ""), ("code", "cells"))

    class FakeDispatcher:
        overloads: dict = {}
        targetctx = type("Ctx", (), {"codegen": staticmethod(lambda: None)})()

        def __init__(self, index):
            self._cache = FakeCache(index)

    fresh = {("sig", ("x86_64", "cpu-a", ""), ("code", "cells")): "f.nbc"}
    other_cpu = {("sig", ("x86_64", "cpu-b", ""), ("code", "cells")): "f.nbc"}
    other_code = {("sig", ("x86_64", "cpu-a", ""), ("old", "cells")): "f.nbc"}
    assert smac_core._kernel_cached(FakeDispatcher(fresh)) is True
    assert smac_core._kernel_cached(FakeDispatcher({})) is False  # missing or stale index (numba returns {})
    assert smac_core._kernel_cached(FakeDispatcher(other_cpu)) is False
    assert smac_core._kernel_cached(FakeDispatcher(other_code)) is False
