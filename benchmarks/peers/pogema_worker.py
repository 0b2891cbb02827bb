"""POGEMA 1.4 side of ``benchmarks/mapf_throughput.py`` (runs inside ``bench-venvs/pogema``, not in coopsim's venv).

Reads one MG-MAPF instance exported by the driver (JSON: ``map`` rows of ``.``/``#``, ``agents_xy`` ``[N, 2]`` and
``targets_xy`` ``[N, K, 2]``, both as (row, column) as POGEMA expects), builds ``--envs`` independent POGEMA
environments with ``collision_system='soft'`` and ``on_target='restart'`` (POGEMA's multi-goal mode: each agent
walks its own ``K``-goal sequence, agents never leave the map, as in MG-MAPF), ``obs_radius`` and
``max_episode_steps`` as given, and measures with the same protocol as the coopsim worker:

* ``reset_s``: CPU seconds (``time.process_time``) of one reset of all envs (POGEMA has no batch: the envs are
  reset one after the other);
* ``step_s``: CPU seconds of one step of all envs (random actions drawn with numpy, then ``env.step`` on each env
  in turn; every env builds its ``[N, 3, 2R+1, 2R+1]`` observations each step), over a window of ``--seconds`` CPU
  seconds or one episode, whichever ends first;
* ``agent_steps_per_s`` = ``E * N * T / (reset_s + T * step_s)`` for episodes of ``T = max_steps`` steps, and the
  same from wall-clock times (``*_wall_s``, ``agent_steps_per_wall_s``), which on a shared machine mostly measure
  this process's share of the CPU;
* ``maxrss_mb``: peak resident memory of this process (``resource.getrusage``, MiB).

Prints one JSON line on stdout. Usage (normally started by the driver)::

    bench-venvs/pogema/bin/python benchmarks/peers/pogema_worker.py --instance inst.json --envs 1 --seconds 2
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instance", required=True, help="instance JSON written by mapf_throughput.py")
    ap.add_argument("--envs", type=int, default=1, help="independent environments stepped one after the other")
    ap.add_argument("--seconds", type=float, default=2.0, help="step window (CPU s); at most one episode of steps")
    ap.add_argument("--reset-seconds", type=float, default=0.5, help="keep timing resets until this long (CPU s)")
    ap.add_argument("--max-steps", type=int, default=256, help="episode length T (steps)")
    ap.add_argument("--obs-radius", type=int, default=5, help="observation radius R (cells)")
    ap.add_argument("--on-target", default="restart", choices=["restart", "nothing", "finish"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    warnings.filterwarnings("ignore")  # POGEMA warns when an agent cycles back through its goal sequence

    import numpy as np
    import pogema
    from pogema import GridConfig, pogema_v0

    with open(a.instance) as f:
        inst = json.load(f)
    n = len(inst["agents_xy"])
    gc = GridConfig(map="\n".join(inst["map"]), agents_xy=inst["agents_xy"], targets_xy=inst["targets_xy"],
                    num_agents=n, obs_radius=a.obs_radius, max_episode_steps=a.max_steps,
                    collision_system="soft", on_target=a.on_target, seed=a.seed)
    envs = [pogema_v0(gc) for _ in range(a.envs)]
    rng = np.random.default_rng(a.seed)
    nact = envs[0].action_space.n

    def reset_all():
        for env in envs:
            env.reset()

    def step_all():
        done, obs = False, None
        for env in envs:
            obs, rew, term, trunc, info = env.step(rng.integers(0, nact, n))
            done = done or all(term) or all(trunc)
        return done, obs

    # warm-up (not timed): one reset and a few steps
    reset_all()
    for _ in range(2):
        _, obs = step_all()
    # resets
    count, t0, c0 = 0, time.perf_counter(), time.process_time()
    while count < 1 or (time.process_time() - c0 < a.reset_seconds and count < 50):
        reset_all()
        count += 1
    reset_s, reset_wall_s = (time.process_time() - c0) / count, (time.perf_counter() - t0) / count
    # steps: from the state just reset, at most one episode, at least 3 steps
    steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while steps < 3 or (time.process_time() - c0 < a.seconds and steps < a.max_steps):
        done, obs = step_all()
        steps += 1
        if done:
            break
    step_s, step_wall_s = (time.process_time() - c0) / steps, (time.perf_counter() - t0) / steps
    T = a.max_steps
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB
    print(json.dumps({
        "side": "pogema", "version": pogema.__version__, "python": sys.version.split()[0], "envs": a.envs,
        "agents": n, "reset_s": reset_s, "resets_timed": count, "step_s": step_s, "steps_timed": steps,
        "agent_steps_per_s": a.envs * n * T / (reset_s + T * step_s),
        "reset_wall_s": reset_wall_s, "step_wall_s": step_wall_s,
        "agent_steps_per_wall_s": a.envs * n * T / (reset_wall_s + T * step_wall_s), "maxrss_mb": rss,
        "obs_shape": list(np.asarray(obs[0]).shape), "on_target": a.on_target,
    }))


if __name__ == "__main__":
    main()
