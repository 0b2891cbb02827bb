"""MG-MAPF core throughput beside POGEMA 1.4, measured in the same run (issue 2, "Speed").

What is measured: agent-steps per second of ``mapf/MGMAPF-v0`` with uniformly random actions, the observations
(radius 5: ``window [3, 11, 11]``, ``goal_vec``, ``goal_status``) built every step, resets included, episodes of
256 steps, 3 goals per agent in free order, on the shipped MovingAI maps:

    =================== ======== ===================================================================
    map                 agents   envs
    =================== ======== ===================================================================
    random-32-32-10     64       1, and a batch of 64 (one ``MGMAPFCore(num_envs=64)``)
    random-64-64-10     256      1, and a batch of 64
    =================== ======== ===================================================================

Peer: POGEMA 1.4.0 (``pogema==1.4.0``) with ``collision_system='soft'`` and ``on_target='restart'`` (its
multi-goal mode: every agent walks its own goal sequence and never leaves the map), on the same map (the MovingAI
map converted to POGEMA's ``.``/``#`` string), the same agents and goals (coopsim's seed-0 instance: scen-file
starts and first goals plus the sampled goals), ``max_episode_steps=256`` and ``obs_radius=5``. POGEMA has no
batch: its batch row is 64 independent envs stepped one after the other. POGEMA pins old gymnasium and
pydantic, so it runs in its own venv ``bench-venvs/pogema`` (gitignored; created here with ``python3 -m venv`` +
``pip install pogema==1.4.0`` on first use, and rebuilt whenever POGEMA 1.4.0 does not import there, e.g. after an
interrupted install) through ``benchmarks/peers/pogema_worker.py``.

Protocol (identical on both sides): every measurement is a fresh subprocess pinned to one CPU (``taskset -c 0``
when available) with ``OMP/MKL/OPENBLAS_NUM_THREADS=1``. After construction and a warm-up it times full resets
of all envs (``reset_s``), then steps from the fresh state for ``--seconds`` CPU seconds or one episode
(``step_s``, the random actions drawn with numpy inside the timed loop); agent-steps/s = ``E * N * 256 /
(reset_s + 256 * step_s)``, i.e. one reset per 256-step episode. Times are CPU seconds of the worker process
(``time.process_time``): on a shared machine wall-clock time mostly measures the process's share of the core
(both are reported; the wall-clock columns are the secondary ones). Peak memory is each worker's ``ru_maxrss``.
The two sides are interleaved (coopsim, POGEMA, POGEMA, coopsim, ... per cell and repetition) so load from other
processes hits both alike, and the best of ``--reps`` repetitions is reported for each side.

Targets (issue 2): one env at least 3x POGEMA, the batch at least 30x POGEMA, both on one core.

Usage::

    .venv/bin/python benchmarks/mapf_throughput.py                # 3 repetitions (about 5-10 min on a busy box)
    .venv/bin/python benchmarks/mapf_throughput.py --reps 5       # steadier
    .venv/bin/python benchmarks/mapf_throughput.py --quick        # 1 repetition, short windows (smoke test)
    .venv/bin/python benchmarks/mapf_throughput.py --reps 5 --out benchmarks/results/mapf_throughput.md
                                                                  # regenerates the committed table (README's)

Prints the table and writes ``--out`` (markdown table + raw JSON; default ``runs/benchmarks/mapf_throughput.md``,
so a trial run never overwrites the committed ``benchmarks/results/mapf_throughput.md``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by a test rather than run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_venv import check_cpu_list, check_writable, ensure_peer_venv, installed_check  # noqa: E402

from coopsim.errors import float_at_least, int_at_least, run_script  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: where a run writes by default: runs/ is gitignored, so a trial run never overwrites the committed result
DEFAULT_OUT = ROOT / "runs" / "benchmarks" / "mapf_throughput.md"
VENV = ROOT / "bench-venvs" / "pogema"
POGEMA_REQ = "pogema==1.4.0"
#: what makes ``bench-venvs/pogema`` ready: POGEMA 1.4.0 installed whole, and it imports
POGEMA_CHECK = installed_check("pogema", "1.4.0", ("pogema", "from pogema import GridConfig, pogema_v0"))
WORKER = Path(__file__).resolve().parent / "peers" / "pogema_worker.py"
#: (map, agents) cells of the issue; each with 1 env and a batch of BATCH envs
CASES = (("random-32-32-10", 64), ("random-64-64-10", 256))
BATCH = 64
MAX_STEPS = 256
OBS_RADIUS = 5
NUM_GOALS = 3
TARGETS = {1: 3.0, BATCH: 30.0}


# ----------------------------------------------------------------------------- helpers
def ensure_venv() -> Path:
    """``bench-venvs/pogema/bin/python``; the venv is (re)built with ``python3 -m venv`` + ``pip install
    pogema==1.4.0`` unless POGEMA 1.4.0 imports there (see ``_peer_venv``)."""
    return ensure_peer_venv(VENV, POGEMA_CHECK, [[POGEMA_REQ]], base_python="python3")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_json(cmd: list[str], cpu: str | None, timeout: float = 3600) -> dict:
    """Run a worker pinned to ``cpu`` with one thread per math library; return its last JSON line."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMEXPR_NUM_THREADS="1", PYTHONHASHSEED="0")
    if cpu is not None:
        cmd = ["taskset", "-c", cpu, *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def export_instance(map_name: str, agents: int, path: Path) -> dict:
    """Write coopsim's seed-0 instance of ``map_name`` for POGEMA: rows of ``.``/``#``, (row, col) positions."""
    from coopsim.platform.recorder import atomic_write_json
    from coopsim.platform.registry import make_scenario

    core = make_scenario("mapf/MGMAPF-v0", num_envs=1, map=map_name, num_agents=agents, num_goals=NUM_GOALS,
                         max_steps=MAX_STEPS, obs_radius=OBS_RADIUS)
    core.reset(seed=0)
    inst = core.instance(0)
    rows = ["".join("#" if b else "." for b in row) for row in inst.blocked]
    data = {
        "map_name": map_name, "scen": Path(core.scen_file(0) or "").name,
        "map": rows,
        "agents_xy": [[int(y), int(x)] for x, y in inst.starts],
        "targets_xy": [[[int(y), int(x)] for x, y in seq] for seq in inst.goals],
    }
    atomic_write_json(path, data)
    return data


# ----------------------------------------------------------------------------- coopsim worker
def coopsim_worker(map_name: str, agents: int, envs: int, seconds: float, reset_seconds: float, seed: int = 0) -> dict:
    """The coopsim side of the protocol (see the module docstring); runs in a pinned subprocess."""
    import resource

    import numpy as np

    from coopsim.platform.registry import make_scenario

    core = make_scenario("mapf/MGMAPF-v0", num_envs=envs, map=map_name, num_agents=agents, num_goals=NUM_GOALS,
                         max_steps=MAX_STEPS, obs_radius=OBS_RADIUS)
    rng = np.random.default_rng(seed)
    all_ids = np.arange(envs)

    def step() -> bool:
        res = core.step(rng.integers(0, 5, size=(envs, agents)))
        return bool(core.done.any()), res

    # warm-up (not timed): seeded reset, a few steps
    core.reset(seed=seed)
    for _ in range(2):
        _, res = step()
    # resets of every env, as the runner does after an episode (reset(env_ids=...) of the done envs)
    count, t0, c0 = 0, time.perf_counter(), time.process_time()
    while count < 1 or (time.process_time() - c0 < reset_seconds and count < 50):
        core.reset(env_ids=all_ids)
        count += 1
    reset_s, reset_wall_s = (time.process_time() - c0) / count, (time.perf_counter() - t0) / count
    # steps from the fresh state: at most one episode, at least 3 steps
    steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while steps < 3 or (time.process_time() - c0 < seconds and steps < MAX_STEPS):
        done, res = step()
        steps += 1
        if done:
            break
    step_s, step_wall_s = (time.process_time() - c0) / steps, (time.perf_counter() - t0) / steps
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    T = MAX_STEPS
    return {"side": "coopsim", "envs": envs, "agents": agents, "reset_s": reset_s, "resets_timed": count,
            "step_s": step_s, "steps_timed": steps, "agent_steps_per_s": envs * agents * T / (reset_s + T * step_s),
            "reset_wall_s": reset_wall_s, "step_wall_s": step_wall_s,
            "agent_steps_per_wall_s": envs * agents * T / (reset_wall_s + T * step_wall_s),
            "maxrss_mb": rss, "obs_shape": list(res.obs["window"].shape)}


# ----------------------------------------------------------------------------- driver
def fmt(x: float) -> str:
    return f"{x:,.0f}"


def table(rows: list[dict], reps: int) -> str:
    head = ("| map | agents | envs | coopsim agent-steps/s | POGEMA agent-steps/s | ratio | target | met "
            "| wall-clock: coopsim / POGEMA / ratio | coopsim peak RSS MiB | POGEMA peak RSS MiB |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        envs = f"{r['envs']}" + (f" (POGEMA: {BATCH} sequential envs)" if r["envs"] > 1 else "")
        lines.append(f"| {r['map']} | {r['agents']} | {envs} | {fmt(r['coopsim'])} | {fmt(r['pogema'])} | "
                     f"{r['ratio']:.1f}x | {r['target']:.0f}x | {'yes' if r['met'] else 'NO'} | "
                     f"{fmt(r['coopsim_wall'])} / {fmt(r['pogema_wall'])} / {r['ratio_wall']:.1f}x | "
                     f"{r['coopsim_rss_mb']:.0f} | {r['pogema_rss_mb']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int_at_least(1), default=3,
                    help="interleaved repetitions per cell (>= 1); the best is reported")
    ap.add_argument("--seconds", type=float_at_least(0, exclusive=True), default=1.0,
                    help="step window per measurement (CPU s, > 0; at most one episode)")
    ap.add_argument("--reset-seconds", type=float_at_least(0, exclusive=True), default=0.3,
                    help="reset timing window per measurement (CPU s, > 0)")
    ap.add_argument("--cpu", default="0", help="CPU list for taskset ('' to not pin)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, 0.5 s windows (smoke test)")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="markdown report (table + raw JSON) to write (default runs/benchmarks/mapf_throughput.md; "
                         "the committed result is benchmarks/results/mapf_throughput.md: pass --out there to "
                         "regenerate it)")
    ap.add_argument("--worker", nargs=4, metavar=("MAP", "AGENTS", "ENVS", "SECONDS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        m, n, e, s = a.worker
        print(json.dumps(coopsim_worker(m, int(n), int(e), float(s), a.reset_seconds)))
        return
    if a.quick:
        a.reps, a.seconds, a.reset_seconds = 1, 0.3, 0.05
    cpu = a.cpu if a.cpu and shutil.which("taskset") else None
    if cpu is not None:
        check_cpu_list("--cpu", cpu)  # before the peer venv and the first measurement
    check_writable("--out", a.out)  # before the peer venv (minutes, ~1 GB) and the measurements
    wall0 = time.perf_counter()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load0 = os.getloadavg()
    py = ensure_venv()
    me = [sys.executable, str(Path(__file__).resolve())]
    tmp = Path(tempfile.mkdtemp(prefix="mapf_throughput_"))
    insts = {}
    for m, n in CASES:
        insts[m] = tmp / f"{m}.json"
        info = export_instance(m, n, insts[m])
        print(f"instance {m}: {n} agents x {NUM_GOALS} goals from {info['scen']} (seed 0)", flush=True)
    cells = [(m, n, e) for m, n in CASES for e in (1, BATCH)]
    raw: dict[str, dict[str, list[dict]]] = {f"{m}/{n}/{e}": {"coopsim": [], "pogema": []} for m, n, e in cells}
    for rep in range(a.reps):
        for i, (m, n, e) in enumerate(cells):
            ours = [*me, "--reset-seconds", str(a.reset_seconds), "--worker", m, str(n), str(e), str(a.seconds)]
            peer = [str(py), str(WORKER), "--instance", str(insts[m]), "--envs", str(e), "--seconds", str(a.seconds),
                    "--reset-seconds", str(a.reset_seconds), "--max-steps", str(MAX_STEPS), "--obs-radius", str(OBS_RADIUS)]
            order = [("coopsim", ours), ("pogema", peer)]
            if (rep + i) % 2:
                order.reverse()  # alternate who goes first, so a load spike does not always hit the same side
            for side, cmd in order:
                r = run_json(cmd, cpu)
                raw[f"{m}/{n}/{e}"][side].append(r)
                print(f"rep {rep + 1}/{a.reps} {m} N={n} E={e} {side:8s} {fmt(r['agent_steps_per_s']):>10s} agent-steps/s "
                      f"(CPU: reset {r['reset_s'] * 1e3:.1f} ms, step {r['step_s'] * 1e3:.2f} ms x {r['steps_timed']}; "
                      f"wall {fmt(r['agent_steps_per_wall_s'])}/s; rss {r['maxrss_mb']:.0f} MiB)", flush=True)
    rows = []
    for m, n, e in cells:
        k = f"{m}/{n}/{e}"
        best = {side: max(r["agent_steps_per_s"] for r in raw[k][side]) for side in ("coopsim", "pogema")}
        wall = {side: max(r["agent_steps_per_wall_s"] for r in raw[k][side]) for side in ("coopsim", "pogema")}
        ratio = best["coopsim"] / best["pogema"]
        rows.append({"map": m, "agents": n, "envs": e, "coopsim": best["coopsim"], "pogema": best["pogema"],
                     "ratio": ratio, "target": TARGETS[e], "met": ratio >= TARGETS[e],
                     "coopsim_wall": wall["coopsim"], "pogema_wall": wall["pogema"],
                     "ratio_wall": wall["coopsim"] / wall["pogema"],
                     "coopsim_rss_mb": max(r["maxrss_mb"] for r in raw[k]["coopsim"]),
                     "pogema_rss_mb": max(r["maxrss_mb"] for r in raw[k]["pogema"])})
    wall = time.perf_counter() - wall0
    machine = {"nproc": os.cpu_count(), "cpu_model": cpu_model(), "python": platform.python_version(),
               "loadavg_start": load0, "loadavg_end": os.getloadavg(), "pinned_cpu": cpu}
    import numpy

    result = {"started": started, "wall_s": round(wall, 1), "machine": machine, "reps": a.reps, "seconds": a.seconds,
              "numpy": numpy.__version__, "pogema": POGEMA_REQ, "max_steps": MAX_STEPS, "obs_radius": OBS_RADIUS,
              "num_goals": NUM_GOALS, "rows": rows, "raw": raw}
    tab = table(rows, a.reps)
    notes = (f"Best of {a.reps} interleaved repetitions per side (coopsim and POGEMA alternate, so load from other "
             f"processes hits both alike); each measurement a fresh process pinned to CPU {cpu or '(not pinned)'} with "
             f"1 math-library thread. Agent-steps/s = E*N*256 / (reset + 256 * step): one reset per 256-step episode, "
             f"random actions, observations (radius {OBS_RADIUS}) built every step, {NUM_GOALS} goals per agent. "
             f"Times are CPU seconds of each worker process (time.process_time); the wall-clock column uses "
             f"perf_counter and on this shared machine mostly reflects each process's share of the core. "
             f"POGEMA 1.4.0: "
             f"collision_system='soft', on_target='restart' with the same {NUM_GOALS}-goal sequences; it has no batch, "
             f"so its batch row is {BATCH} independent envs stepped one after the other. Peak RSS: ru_maxrss of each "
             f"worker process.")
    print("\n" + tab + "\n\n" + notes)
    print(f"\nmachine: {machine['nproc']} CPUs, {machine['cpu_model']}; load average {load0[0]:.1f} at start, "
          f"{machine['loadavg_end'][0]:.1f} at end; wall {wall:.0f} s")
    from coopsim.platform.recorder import atomic_write_text, dumps_json

    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        out,
        f"# MG-MAPF throughput vs POGEMA 1.4\n\n"
        f"Produced by `.venv/bin/python benchmarks/mapf_throughput.py{' --quick' if a.quick else f' --reps {a.reps}'}"
        f"{'' if out.resolve() == DEFAULT_OUT.resolve() else f' --out {a.out}'}` "
        f"on {started}; wall time {wall:.0f} s.\n\n"
        f"Machine: {machine['nproc']} CPUs ({machine['cpu_model']}), Python {machine['python']}, numpy "
        f"{numpy.__version__}; load average {load0[0]:.1f} at start and {machine['loadavg_end'][0]:.1f} at end "
        f"(shared with other jobs).\n\n{tab}\n\n{notes}\n\n"
        f"Targets (issue 2): one env >= 3x POGEMA, batch of 64 >= 30x POGEMA, both on one core.\n\n"
        f"## Raw results\n\n```json\n{dumps_json(result, indent=1)}\n```\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    run_script(main)
