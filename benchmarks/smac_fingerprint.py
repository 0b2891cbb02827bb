"""Bit-exact fingerprint of the SMAC-like core over seeded random valid play (to check a refactor changes nothing).

Hashes (SHA-256, first 16 hex digits) every observation (also after partial resets), action mask, state, reward,
termination, truncation, info term, position, health, shield, cooldown and attack target of 150 steps with
uniformly random valid actions, per map, at batch 1 (seed 1) and batch 7 (seed 2), finished envs reset with
``reset(env_ids=...)``. Run it on two versions of ``core.py`` and diff the output::

    git show <commit>:coopsim/scenarios/smac/core.py > /tmp/core_before.py
    .venv/bin/python benchmarks/smac_fingerprint.py /tmp/core_before.py > before.txt
    .venv/bin/python benchmarks/smac_fingerprint.py > after.txt      # the installed coopsim.scenarios.smac.core
    diff before.txt after.txt
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
from pathlib import Path

import numpy as np

MAPS = ("3m", "2s3z", "27m_vs_30m", "MMM2", "corridor", "bane_vs_bane", "1c3s5z", "2s_vs_1sc", "protoss_5_vs_5",
        "zerg_10_vs_10", "so_many_baneling")


def load_core(path: str | None):
    if path is None:
        from coopsim.scenarios.smac import SMACCore

        return SMACCore
    from coopsim.errors import ConfigError

    p = Path(path)
    if not p.is_file() or p.suffix != ".py":
        why = "file not found" if not p.exists() else ("not a file" if not p.is_file() else "not a .py file")
        raise ConfigError(f"{why}: give the path of a version of coopsim/scenarios/smac/core.py (e.g. from `git show "
                          f"<commit>:coopsim/scenarios/smac/core.py > /tmp/core_before.py`), or no path for the "
                          f"installed one", key="core", value=path, file=path)
    spec = importlib.util.spec_from_file_location("smac_core_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    if not hasattr(mod, "SMACCore"):
        raise ConfigError("defines no SMACCore class: give a version of coopsim/scenarios/smac/core.py", key="core",
                          value=path, file=path)
    return mod.SMACCore


def fingerprint(cls, map_name: str, num_envs: int, steps: int, seed: int) -> str:
    core = cls(num_envs=num_envs, map_name=map_name)
    h = hashlib.sha256()
    h.update(core.reset(seed=seed).tobytes())
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        m = core.action_masks()
        h.update(m.tobytes())
        r = core.step((rng.random(m.shape) * m).argmax(-1))
        for x in (r.obs, r.reward, r.terminated, r.truncated, core.state(), core._pos, core._health, core._shield,
                  core._cooldown, core._fired_at):
            h.update(np.ascontiguousarray(x).tobytes())
        for k in sorted(r.info):
            h.update(np.asarray(r.info[k]).tobytes())
        done = core.done
        if done.any():
            h.update(repr(core.episode_metrics()).encode())
            h.update(core.reset(env_ids=np.flatnonzero(done)).tobytes())
            h.update(core.action_masks().tobytes())
    return h.hexdigest()[:16]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("core", nargs="?", default=None,
                    help="a version of coopsim/scenarios/smac/core.py to fingerprint (default: the installed one)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    cls = load_core(parse_args(argv).core)
    for m in MAPS:
        print(m, fingerprint(cls, m, 1, 150, 1), fingerprint(cls, m, 7, 150, 2), flush=True)


if __name__ == "__main__":
    from coopsim.errors import run_script

    run_script(main)
