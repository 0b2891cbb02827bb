"""Channel + token-bucket overhead for 32 agents, as a fraction of the scenario step time.

Per step, every agent of ``mpe/simple_spread`` (N = 32) asks its token bucket (refilled at a fixed
rate, one step deep) how many of ``--copies`` 40-byte unicast copies it may send, and the allowed
copies go through ``bandwidth-v0`` (Markov-modulated capacity, 16-packet queues, 0.1 s latency
bound): ``send``, ``deliver`` and ``feedback``. The overhead is the time of that comm work divided by
the time of ``core.step`` alone, at batch 1, 16, 64 and 256. Target: < 5 %. The comm time is the token
bucket (refill, consume) plus the channel (send, deliver, feedback); building the step's ``MessageBatch``
from the allowed counts (the agents' own message production, random receivers here) is timed apart and
printed as ``batch ms`` (``overhead+batch`` counts it too).

Usage: .venv/bin/python benchmarks/comm_overhead.py [--steps 200] [--copies 4]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.token_bucket import TokenBucket
from coopsim.errors import int_in_range, run_script
from coopsim.platform.comm import MessageBatch
from coopsim.platform.registry import make_scenario

N = 32
#: most --copies: 64 copies per agent is 524,288 copies per step at batch 256 (a minute or more per batch size)
COPIES_MAX = 64
#: most --steps
STEPS_MAX = 100_000


def measure(E: int, steps: int, copies: int) -> tuple[float, float, float, float]:
    """(core step s, bucket + channel s, batch building s, copies offered) per step, means over ``steps``."""
    core = make_scenario("mpe/simple_spread-v0", num_envs=E, num_agents=N)
    core.reset(seed=0)
    ch = BandwidthChannel(trace={"kind": "markov", "levels": [0.15, 0.3, 0.5], "switch_prob": 0.02,
                                 "scale_bps": copies * 320 / 0.1}, queue_packets=16, latency_bound_s=0.1)
    ch.reset(0, num_envs=E, num_agents=N, dt_s=0.1)
    bucket = TokenBucket(copies * 320 / 0.1 * 0.4, copies * 16, shape=(E, N), full=False)  # 0.4 x one step
    rng = np.random.default_rng(0)
    acts = rng.integers(0, 5, (steps, E, N))
    offs = rng.integers(1, N, (steps, E, N, copies))
    t_core = t_comm = t_batch = 0.0
    sent = 0
    for t in range(steps):
        t0 = time.perf_counter()
        bucket.refill(0.1)
        k = bucket.consume_up_to(copies, 40)
        ta = time.perf_counter()
        env, src = np.nonzero(k > 0)
        reps = k[env, src]
        slot = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
        env, src = np.repeat(env, reps), np.repeat(src, reps)
        dst = (src + offs[t, env, src, slot]) % N
        m = len(env)
        batch = MessageBatch(env.astype(np.int32), src.astype(np.int32), dst.astype(np.int32),
                             np.zeros((m, 3), np.float32), np.full(m, t * 0.1))
        tb = time.perf_counter()
        ch.send(t, batch)
        ch.deliver(t + 1)
        ch.feedback(t + 1)
        t1 = time.perf_counter()
        core.step(acts[t])
        if core.done.any():
            core.reset(env_ids=np.flatnonzero(core.done))
        t2 = time.perf_counter()
        t_comm += (ta - t0) + (t1 - tb)
        t_batch += tb - ta
        t_core += t2 - t1
        sent += m
    return t_core / steps, t_comm / steps, t_batch / steps, sent / steps


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int_in_range(1, STEPS_MAX), default=200,
                    help=f"timed steps per batch size, 1..{STEPS_MAX} (default 200)")
    ap.add_argument("--copies", type=int_in_range(1, COPIES_MAX), default=4,
                    help=f"copies each agent would send per step, 1..{COPIES_MAX} (default 4; at batch 256 each copy "
                         f"per agent is {256 * N:,} copies per step)")
    a = ap.parse_args(argv)
    print(f"{'batch':>5} {'agents':>6} {'copies/step':>11} {'core step ms':>12} {'comm ms':>8} {'overhead':>9} "
          f"{'batch ms':>8} {'overhead+batch':>14}")
    for E in (1, 16, 64, 256):
        tc, tm, tb, m = measure(E, a.steps, a.copies)
        print(f"{E:>5} {N:>6} {m:>11.0f} {tc * 1e3:>12.3f} {tm * 1e3:>8.3f} {tm / tc:>8.1%} {tb * 1e3:>8.3f} "
              f"{(tm + tb) / tc:>13.1%}")


if __name__ == "__main__":
    run_script(main)
