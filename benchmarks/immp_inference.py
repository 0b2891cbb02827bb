"""IMMP decision-step timing (issue 4 target: < 20 ms per step for 128 agents on one core).

Times, on one thread, for ``N`` agents on a MovingAI map (instance from scen file 1):

* ``policy``: one IMMP decision step for the whole team *after* the high level is in sync -- building the
  inputs (window, aligned previous window, waypoint features), the intent module, the policy MLP and the
  action choice, by default the CS-PIBT resolution (``agent.act`` with the high level already synced, so its
  own sync finds nothing to do); the same without CS-PIBT is a separate row;
* ``high level, reset``: the full plan at reset (distance tables, balanced orders with best-response
  rounds, density map, congestion-weighted fields);
* ``high level, per step``: the incremental replanning of agents that visited a goal (mean over steps);
* wall time (median, p90) and CPU time of this process (mean; on a shared machine wall time also counts
  the time spent waiting for the core);
* the same decision step of the decentralized PPO baseline (no intent module) and of PIBT, measured in the
  same run, with ratios.

    .venv/bin/python benchmarks/immp_inference.py [--agents 128] [--map random-32-32-10] [--steps 60]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from coopsim.errors import ConfigError, int_at_least, run_script
from coopsim.platform import registry
from coopsim.scenarios.mapf import MGMAPFCore
from coopsim.scenarios.mapf.loaders import load_map, resolve_map

#: the agents the issue-4 target (< 20 ms per decision step) is stated for
TARGET_AGENTS = 128


def time_agent(agent_id: str, mp: str, n: int, k: int, steps: int, params: dict) -> dict[str, float]:
    core = MGMAPFCore(1, map=mp, num_agents=n, num_goals=k, obs_radius=3, max_steps=steps + 1)
    obs = core.reset(seed=0)
    agent = registry.make_component("agent", agent_id, core, **params)
    agent.reset(0)
    t0 = time.perf_counter()
    agent.hl.sync()
    reset_s = time.perf_counter() - t0
    pol, hl, cpu = [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        agent.hl.sync()
        t1 = time.perf_counter()
        c1 = time.process_time()
        a, _ = agent.act(obs)
        c2 = time.process_time()
        t2 = time.perf_counter()
        hl.append(t1 - t0)
        pol.append(t2 - t1)
        cpu.append(c2 - c1)
        res = core.step(a)
        obs = res.obs
        if core.done.all():
            break
    return {"reset_ms": 1e3 * reset_s, "policy_ms": 1e3 * float(np.median(pol)), "policy_cpu_ms": 1e3 * float(np.mean(cpu)), "policy_p90_ms": 1e3 * float(np.percentile(pol, 90)),
            "hl_step_ms": 1e3 * float(np.mean(hl)), "steps": len(pol)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--agents", type=int_at_least(1), default=128, help="agents (>= 1)")
    ap.add_argument("--goals", type=int_at_least(1), default=5, help="goals per agent (>= 1)")
    ap.add_argument("--map", default="random-32-32-10", help="a shipped map name or a MovingAI .map file")
    ap.add_argument("--steps", type=int_at_least(1), default=60, help="timed decision steps (>= 1)")
    a = ap.parse_args(argv)
    try:
        path = resolve_map(a.map)
    except ConfigError as exc:
        raise ConfigError(exc.message, key="--map", value=a.map) from None
    load_map(path)  # a malformed file is one error line (MapFormatError) before the table starts
    # the instance itself (enough free cells for the agents and goals) is checked before the table too
    MGMAPFCore(1, map=a.map, num_agents=a.agents, num_goals=a.goals, obs_radius=3, max_steps=a.steps + 1)
    torch.set_num_threads(1)
    rows = [
        # the shipped policies: the architecture (e.g. the intent module's width) is the checkpoint's
        ("IMMP (mapf/immp-v0, CS-PIBT)", "mapf/immp-v0", {"checkpoint": "shipped"}),
        ("IMMP without CS-PIBT", "mapf/immp-v0", {"checkpoint": "shipped", "cs_pibt": False}),
        ("decentralized PPO (mapf/dppo-v0)", "mapf/dppo-v0", {"checkpoint": "shipped"}),
        ("PIBT (mapf/pibt-v0)", "mapf/pibt-v0", {}),
    ]
    print(f"map {a.map}, {a.agents} agents, {a.goals} goals, 1 thread, median over up to {a.steps} steps")
    print(f"{'method':34s} {'decision step ms':>17s} {'p90 ms':>8s} {'CPU ms/step':>12s} {'HL reset ms':>12s} {'HL per step ms':>15s}")
    out = {}
    for name, aid, params in rows:
        r = time_agent(aid, a.map, a.agents, a.goals, a.steps, params)
        out.setdefault(aid, r)
        print(f"{name:34s} {r['policy_ms']:17.2f} {r['policy_p90_ms']:8.2f} {r['policy_cpu_ms']:12.2f} {r['reset_ms']:12.1f} "
              f"{r['hl_step_ms']:15.2f}")
    imm = out["mapf/immp-v0"]["policy_ms"]
    cpu = out["mapf/immp-v0"]["policy_cpu_ms"]
    print(f"\nIMMP decision step / PPO baseline: {imm / out['mapf/dppo-v0']['policy_ms']:.2f}x; / PIBT: "
          f"{imm / out['mapf/pibt-v0']['policy_ms']:.2f}x; {target_line(a.agents, imm, cpu)}")


def target_line(agents: int, wall_ms: float, cpu_ms: float) -> str:
    """The verdict on the < 20 ms target: assessed only at :data:`TARGET_AGENTS` agents, which it is stated for."""
    if agents != TARGET_AGENTS:
        return (f"target is for {TARGET_AGENTS} agents; not assessed at {agents} ({wall_ms:.2f} ms wall median, "
                f"{cpu_ms:.2f} ms CPU mean)")
    return (f"target < 20 ms: wall {'met' if wall_ms < 20 else 'NOT met'} ({wall_ms:.2f} ms median), CPU "
            f"{'met' if cpu_ms < 20 else 'NOT met'} ({cpu_ms:.2f} ms mean; wall time counts waiting for the core on a "
            "shared machine, CPU time does not)")


if __name__ == "__main__":
    run_script(main)
