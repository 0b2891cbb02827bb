"""MPE core speed beside mpe2: env steps per second at batch 1 and 256 (simple_spread N=3 and N=6).

mpe2 has no batched form, so a batch of B is B mpe2 envs stepped one after another (as a vector-env
wrapper without subprocesses would). Random discrete actions; episodes reset when they end.

Usage: .venv/bin/python benchmarks/mpe_speed.py [--seconds 3]
"""
from __future__ import annotations

import argparse
import importlib.util
import time

import numpy as np

from coopsim.errors import DependencyNotInstalled, float_at_least, run_script


def ours(sid: str, batch: int, seconds: float) -> float:
    from coopsim.platform.registry import make_scenario

    core = make_scenario(sid, num_envs=batch)
    core.reset(seed=0)
    rng = np.random.default_rng(0)
    acts = rng.integers(0, 5, (64, batch, core.num_agents))
    n, t0 = 0, time.perf_counter()
    while n == 0 or time.perf_counter() - t0 < seconds:  # at least one step, whatever --seconds
        core.step(acts[n % 64])
        n += 1
        if core.done.any():
            core.reset(env_ids=np.flatnonzero(core.done))
    return n * batch / (time.perf_counter() - t0)


def peer(N: int, batch: int, seconds: float) -> float:
    from mpe2 import simple_spread_v3

    envs = [simple_spread_v3.parallel_env(N=N, max_cycles=25) for _ in range(batch)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    agents = envs[0].possible_agents
    rng = np.random.default_rng(0)
    acts = rng.integers(0, 5, (64, batch, N))
    n, t0 = 0, time.perf_counter()
    while n == 0 or time.perf_counter() - t0 < seconds:
        a = acts[n % 64]
        for b, e in enumerate(envs):
            if not e.agents:
                e.reset()
            e.step({ag: int(a[b, i]) for i, ag in enumerate(agents)})
        n += 1
    return n * batch / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float_at_least(0, exclusive=True), default=3.0,
                    help="timed seconds per cell (> 0)")
    args = ap.parse_args(argv)
    if importlib.util.find_spec("mpe2") is None:  # the peer, before coopsim's cells are timed
        raise DependencyNotInstalled("mpe_speed.py times mpe2 beside coopsim, and mpe2 is not installed; install "
                                     "coopsim's `mpe` extra: .venv/bin/pip install 'mpe2>=1.1'")
    rows = []
    for sid, N in (("mpe/simple_spread-v0", 3), ("mpe/simple_spread_n6-v0", 6)):
        for batch in (1, 256):
            o = ours(sid, batch, args.seconds)
            p = peer(N, batch, args.seconds)
            rows.append((f"simple_spread N={N}", batch, o, p, o / p))
    print(f"{'task':<20} {'batch':>5} {'coopsim env-steps/s':>20} {'mpe2 env-steps/s':>17} {'ratio':>7}")
    for r in rows:
        print(f"{r[0]:<20} {r[1]:>5} {r[2]:>20,.0f} {r[3]:>17,.0f} {r[4]:>7.1f}x")


if __name__ == "__main__":
    run_script(main)
