"""Planning time and quality of the prioritized MG-MAPF planner (``mapf/prioritized-v0``) on the shipped maps.

Prints one row per (map, agents, goals, seed): CPU and wall seconds of ``plan_prioritized`` (instances built by
the MG-MAPF core exactly as a run does), agents without a complete plan, priority orders tried, A* expansions,
SoC, LB and SoC/LB, and whether the validator accepts the plan. Single-threaded; CPU time is the figure to
compare on a shared machine (wall time includes waiting for a core).

    .venv/bin/python benchmarks/mapf_planners.py                  # main job (64 x 3 on random-32-32-10, 5 seeds)
                                                                  # and 100 agents x K=1..3 on every shipped map
    .venv/bin/python benchmarks/mapf_planners.py --maps maze-32-32-2 --agents 100 --goals 3 --seeds 0 1 2

A combination that cannot be built (more agents than the scen file's rows, more goals than a region holds) prints a
``skipped:`` row; when every combination asked for is skipped the script exits with code 2 (nothing was measured).
An unknown or unreadable ``--maps`` entry is refused (exit 2) before the first plan.
"""
from __future__ import annotations

import argparse
import sys
import time

from coopsim.agents.mapf_baselines import plan_prioritized
from coopsim.errors import ConfigError, CoopsimError, MapFormatError, int_at_least, run_script
from coopsim.scenarios.mapf.core import MGMAPFCore, MGMAPFParams
from coopsim.scenarios.mapf.loaders import load_map, resolve_map, shipped_maps
from coopsim.scenarios.mapf.validate import validate_plan


def run(map_name: str, agents: int, goals: int, seed: int, horizon: int) -> dict:
    core = MGMAPFCore(num_envs=1, map=map_name, num_agents=agents, num_goals=goals, goal_order="free", max_steps=horizon)
    core.reset(seed=seed)
    inst = core.instance(0)
    c0, w0 = time.process_time(), time.perf_counter()
    r = plan_prioritized(inst.blocked, inst.starts, inst.goals, inst.goal_order, horizon=horizon, seed=0)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rep = validate_plan(inst, r.paths, max_steps=horizon)
    lb = core.lower_bound(0)
    return dict(map=map_name, N=agents, K=goals, seed=seed, cpu_s=cpu, wall_s=wall, failed=int(r.failed.sum()),
                attempts=r.attempts, expansions=r.expansions, soc=rep.soc, lb=lb, ratio=rep.soc / lb, valid=rep.ok,
                complete=rep.complete)


#: flag -> (MGMAPFParams field it sets, what it is): checked against the field's range before any output
FLAG_FIELDS = {"--agents": ("num_agents", "agents N"), "--goals": ("num_goals", "goals per agent K"),
               "--horizon": ("max_steps", "plan step limit")}


def field_range(field: str) -> tuple[int | None, int | None]:
    """The ``ge``/``le`` bounds of an :class:`MGMAPFParams` field (None where it has none)."""
    meta = MGMAPFParams.model_fields[field].metadata
    lo = next((m.ge for m in meta if getattr(m, "ge", None) is not None), None)
    hi = next((m.le for m in meta if getattr(m, "le", None) is not None), None)
    return lo, hi


def check_ranges(values: dict[str, list[int]]) -> None:
    """Each flag's values within the scenario's range of the field it sets (``--agents`` -> ``num_agents``, ...).

    Raises:
        ConfigError: key ``--agents`` (etc.); names the value and the valid range.
    """
    for flag, vals in values.items():
        field, what = FLAG_FIELDS[flag]
        lo, hi = field_range(field)
        for v in vals:
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ConfigError(f"invalid value {v}: {what} must be in {lo}..{hi} (the MG-MAPF scenario's "
                                  f"{field})", key=flag, value=v)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maps", nargs="+", default=None,
                    help="shipped map names or .map files (default: main job, then every shipped map)")
    rng = {f: "{}..{}".format(*field_range(FLAG_FIELDS[f][0])) for f in FLAG_FIELDS}
    ap.add_argument("--agents", type=int_at_least(1), default=100, help=f"agents N, {rng['--agents']} (default 100)")
    ap.add_argument("--goals", type=int_at_least(1), nargs="+", default=[1, 2, 3],
                    help=f"goals per agent K, each {rng['--goals']} (default 1 2 3)")
    ap.add_argument("--seeds", type=int_at_least(0), nargs="+", default=[0], help="reset seeds (>= 0; default 0)")
    ap.add_argument("--horizon", type=int_at_least(1), default=512,
                    help=f"plan step limit, {rng['--horizon']} (default 512)")
    a = ap.parse_args(argv)
    check_ranges({"--agents": [a.agents], "--goals": a.goals, "--horizon": [a.horizon]})  # before the header
    for m in a.maps or ():  # every name and file before the first plan, not when its row comes
        try:
            load_map(resolve_map(m))
        except ConfigError as exc:
            raise ConfigError(exc.message, key="--maps", value=m) from None
        except MapFormatError as exc:  # a file that is no MovingAI map: names the file and line
            raise ConfigError(f"{m!r} cannot be read: {exc}", key="--maps", value=m) from None
    jobs = []
    if a.maps is None:
        jobs += [("random-32-32-10", 64, 3, s) for s in range(5)]
        maps = shipped_maps()
    else:
        maps = a.maps
    jobs += [(m, a.agents, k, s) for m in maps for k in a.goals for s in a.seeds]
    head = f"{'map':<24}{'N':>4}{'K':>3}{'seed':>5}{'cpu s':>8}{'wall s':>8}{'fail':>5}{'att':>4}{'expans.':>9}{'SoC':>7}{'LB':>7}{'SoC/LB':>7}  valid"
    print(head)
    print("-" * len(head))
    skipped = 0
    for job in jobs:
        try:
            r = run(*job, horizon=a.horizon)
        except CoopsimError as exc:  # e.g. more goals than a region can hold, more agents than the scen rows
            print(f"{job[0]:<24}{job[1]:>4}{job[2]:>3}{job[3]:>5}  skipped: {exc}", flush=True)
            skipped += 1
            continue
        print(f"{r['map']:<24}{r['N']:>4}{r['K']:>3}{r['seed']:>5}{r['cpu_s']:>8.2f}{r['wall_s']:>8.2f}{r['failed']:>5}"
              f"{r['attempts']:>4}{r['expansions']:>9}{r['soc']:>7}{r['lb']:>7.0f}{r['ratio']:>7.3f}  "
              f"{'yes' if r['valid'] else 'NO'}{'' if r['complete'] else ' (incomplete)'}", flush=True)
    if jobs and skipped == len(jobs):  # nothing measured: a failure for a script or CI job, not exit 0
        what = ("the only (map, agents, goals, seed) combination asked for was" if len(jobs) == 1 else
                f"all {len(jobs)} (map, agents, goals, seed) combinations asked for were")
        raise CoopsimError(f"{what} skipped (reasons above), so nothing was planned; change --maps, --agents or "
                           f"--goals")
    if skipped:
        print(f"note: {skipped} of {len(jobs)} combinations {'was' if skipped == 1 else 'were'} skipped (reasons above)",
              file=sys.stderr)


if __name__ == "__main__":
    run_script(main)
