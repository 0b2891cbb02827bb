"""SMAC-like scenario speed and calibration beside JaxMARL 0.2's SMAX, measured in the same run.

Speed: env steps per second (batch x vector steps / wall s) with the heuristic enemy and uniformly random
valid actions, auto-resets included, on 3m, 2s3z and 27m_vs_30m at batch 1, 64 and 1024:

* coopsim: ``SMACCore`` stepped from Python (each ``step`` is one call of its numba kernel over the batch),
  finished envs reset with ``reset(env_ids=...)``; the kernels' first-call time is reported apart, cold (empty
  numba cache) and cached (``cache=True``'s on-disk cache), like SMAX's compile time;
* SMAX ``scan``: one jitted ``lax.scan`` over ``vmap``-ed ``HeuristicEnemySMAX.step`` (auto-reset), actions
  sampled in JAX; its compile time is reported apart (JAX's persistent compilation cache is on, so a rerun loads
  the compiled programs: each row says whether its compile was a cache hit);
* SMAX ``call``: one jitted (vmapped) step called at a time from Python, actions sampled in numpy from the
  masks, as a PettingZoo-style user would.

Each measurement is a fresh subprocess pinned with ``taskset`` to one core (``-c 0``), then to two
(``-c 0,1``). SMAX runs in its own venv ``bench-venvs/jaxmarl`` (created here with ``pip install
jaxmarl==0.2.0`` if missing, and rebuilt when JaxMARL 0.2.0 does not import there, e.g. after an interrupted
install; never a coopsim dependency). Map names, batch sizes and core lists are checked before the venv is touched.

Calibration: win rate of random valid play and of scripted focus fire on maps SMAX shares with coopsim,
in coopsim and in SMAX, each over ``--episodes`` episodes with SMAC's episode limits; a map passes when
both policies agree within +-10 points.

Usage::

    .venv/bin/python benchmarks/smac_speed.py                 # everything (tens of minutes on 2 busy cores)
    .venv/bin/python benchmarks/smac_speed.py --quick         # 3m only, batch 1 and 64, one core
    .venv/bin/python benchmarks/smac_speed.py --only calibration --episodes 200

Writes ``--out`` (default ``runs/benchmarks/smac_speed.json``, so a trial run never overwrites the committed
``benchmarks/results/smac_speed.json``: pass ``--out benchmarks/results/smac_speed.json`` to regenerate it) and
prints markdown tables with ratios coopsim / SMAX.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by a test rather than run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_venv import check_cpu_list, check_writable, ensure_peer_venv, installed_check  # noqa: E402

from coopsim.errors import ConfigError, float_at_least, int_at_least, run_script  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: where a run writes by default: runs/ is gitignored, so a trial run never overwrites the committed result
DEFAULT_OUT = ROOT / "runs" / "benchmarks" / "smac_speed.json"
VENV = ROOT / "bench-venvs" / "jaxmarl"
WORKER = Path(__file__).with_name("_smax_worker.py")
SPEED_MAPS = ("3m", "2s3z", "27m_vs_30m")
BATCHES = (1, 64, 1024)
#: maps defined both by coopsim and by SMAX 0.2 (MAP_NAME_TO_SCENARIO)
SHARED_MAPS = ("3m", "8m", "2s3z", "5m_vs_6m", "3s5z", "10m_vs_11m", "3s_vs_5z", "6h_vs_8z", "3s5z_vs_3s6z", "25m", "27m_vs_30m")
PEER_REQ = "jaxmarl==0.2.0"
#: what makes ``bench-venvs/jaxmarl`` ready: JaxMARL 0.2.0 installed whole, and what ``_smax_worker.py`` imports
PEER_CHECK = installed_check("jaxmarl", "0.2.0", ("jax", "from jaxmarl import make",
                                                  "from jaxmarl.environments.smax import map_name_to_scenario"))


def ensure_venv() -> Path:
    """``bench-venvs/jaxmarl/bin/python``; the venv is (re)built with ``pip install jaxmarl==0.2.0`` unless
    JaxMARL 0.2.0 imports there (a venv whose install was interrupted is rebuilt, see ``_peer_venv``)."""
    return ensure_peer_venv(VENV, PEER_CHECK, [[PEER_REQ]])


def check_maps(flag: str, names: list[str]) -> None:
    """Every name of ``names`` is a SMAC map of coopsim (:data:`coopsim.scenarios.smac.maps.MAPS`) that SMAX 0.2
    defines too (:data:`SHARED_MAPS`), or a :class:`ConfigError` (key ``flag``) naming the valid ones."""
    from coopsim.scenarios.smac.maps import MAPS

    for m in names:
        if m in SHARED_MAPS:
            continue
        why = (f"{m!r} is a coopsim map that SMAX 0.2 does not define" if m in MAPS else
               f"unknown SMAC map {m!r} (coopsim's maps: {', '.join(MAPS)})")
        raise ConfigError(f"{why}; valid here (maps of both coopsim and SMAX): {', '.join(SHARED_MAPS)}", key=flag,
                          value=m)


def run_json(cmd: list[str], cores: str, timeout: float = 1800) -> dict:
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS=str(len(cores.split(","))))
    env["XLA_FLAGS"] = env.get("XLA_FLAGS", "")
    out = subprocess.run(["taskset", "-c", cores, *cmd], capture_output=True, text=True, env=env, timeout=timeout)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(lines[-1])


# ----------------------------------------------------------------------------- coopsim workers
def random_stepper(core, seed: int = 0):
    """Reset ``core`` (an ``SMACCore``) with ``seed``; return a function doing one vector step with uniformly
    random valid actions, finished envs reset. Shared with ``smac_step_ab.py``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    core.reset(seed=seed)

    def one():
        m = core.action_masks()
        core.step((rng.random(m.shape) * m).argmax(-1))
        d = core.done
        if d.any():
            core.reset(env_ids=np.nonzero(d)[0])

    return one


def coopsim_speed(map_name: str, batch: int, seconds: float, seed: int = 0) -> dict:
    from coopsim.scenarios.smac import SMACCore

    one = random_stepper(SMACCore(num_envs=batch, map_name=map_name), seed)
    one()
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        one()
        n += 1
        if time.perf_counter() - t0 > seconds and n >= 5:
            break
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    return {"steps_per_s": batch * n / dt, "steps_per_cpu_s": batch * n / dc, "steps": n}


def coopsim_first_call(map_name: str) -> dict:
    """Seconds from importing the SMAC core to the end of its first reset, step, masks, state and done (the numba
    kernels' compile, or their load from numba's on-disk cache); run in a fresh process."""
    t0 = time.perf_counter()
    import numpy as np

    from coopsim.scenarios.smac import SMACCore

    t_import = time.perf_counter() - t0
    core = SMACCore(num_envs=2, map_name=map_name)
    core.reset(seed=0)
    m = core.action_masks()
    core.step(m.argmax(-1))
    core.reset(env_ids=np.array([1]))
    core.state()
    core.done
    return {"first_call_s": time.perf_counter() - t0, "import_s": t_import}


def coopsim_compile(map_name: str, cores: str) -> dict:
    """The kernels' first-call time in a fresh process with an empty numba cache (cold: compiles) and again with
    that cache filled (cached: loads)."""
    import tempfile

    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory() as d:
        os.environ["NUMBA_CACHE_DIR"] = d
        try:
            cold = run_json([*me, "--worker", "first_call", map_name], cores)
            cached = run_json([*me, "--worker", "first_call", map_name], cores)
        finally:
            del os.environ["NUMBA_CACHE_DIR"]
    return {"map": map_name, "cores": cores, "cold_s": cold["first_call_s"], "cached_s": cached["first_call_s"],
            "import_s": cached["import_s"]}


def coopsim_winrate(map_name: str, policy: str, episodes: int, seed: int = 0) -> dict:
    import numpy as np

    from coopsim.agents.smac_heuristics import FocusFireAgent, RandomValidAgent
    from coopsim.scenarios.smac import SMACCore

    core = SMACCore(num_envs=episodes, map_name=map_name)
    obs = core.reset(seed=seed)
    agent = FocusFireAgent(core) if policy == "focus" else RandomValidAgent(core, seed=seed)
    while not core.done.all():
        a, _ = agent.act(obs)
        obs = core.step(a).obs
    wins = [m["win"] for m in core.episode_metrics()]
    return {"win_rate": float(np.mean(wins)), "episodes": episodes}


# ----------------------------------------------------------------------------- driver
def fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["speed", "calibration"], default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--maps", nargs="+", default=None, help="speed maps (default 3m 2s3z 27m_vs_30m)")
    ap.add_argument("--batches", nargs="+", type=int_at_least(1), default=None, help="batch sizes (default 1 64 1024)")
    ap.add_argument("--cores", nargs="+", default=["0", "0,1"], help="taskset core lists")
    ap.add_argument("--seconds", type=float_at_least(0, exclusive=True), default=3.0,
                    help="timed seconds per coopsim / SMAX-call cell (> 0)")
    ap.add_argument("--calib-maps", nargs="+", default=None, help=f"calibration maps (default {' '.join(SHARED_MAPS)})")
    ap.add_argument("--episodes", type=int_at_least(1), default=200, help="calibration episodes per map and policy")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="JSON file to write (default runs/benchmarks/smac_speed.json; the committed result is "
                         "benchmarks/results/smac_speed.json: pass --out there to regenerate it)")
    ap.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        kind, *rest = a.worker
        if kind == "speed":
            print(json.dumps(coopsim_speed(rest[0], int(rest[1]), float(rest[2]))))
        elif kind == "first_call":
            print(json.dumps(coopsim_first_call(rest[0])))
        else:
            print(json.dumps(coopsim_winrate(rest[0], rest[1], int(rest[2]))))
        return

    from coopsim.platform import recorder
    from coopsim.scenarios.smac.maps import MAPS

    maps = a.maps or (["3m"] if a.quick else list(SPEED_MAPS))
    batches = a.batches or ([1, 64] if a.quick else list(BATCHES))
    cores = ["0"] if a.quick else a.cores
    calib = a.calib_maps or (["3m"] if a.quick else list(SHARED_MAPS))
    # every flag before the peer venv (built on first use: minutes, ~1 GB) and the first measurement
    check_maps("--maps", maps)
    check_maps("--calib-maps", calib)
    for c in cores:
        check_cpu_list("--cores", c)
    check_writable("--out", a.out)
    py = ensure_venv()
    me = [sys.executable, str(Path(__file__).resolve())]
    import numba
    import numpy

    results: dict = {"speed": [], "calibration": [], "compile": [],
                     "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                     "machine": {"nproc": os.cpu_count(), "loadavg_start": os.getloadavg()},
                     "versions": {"numba": numba.__version__, "numpy": numpy.__version__}}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    if a.only in (None, "speed"):
        for c in cores:
            row = coopsim_compile(maps[0], c)
            results["compile"].append(row)
            print(f"coopsim kernels first call (cores={c}): cold {row['cold_s']:.1f} s, cached {row['cached_s']:.2f} s "
                  f"(import {row['import_s']:.2f} s)", flush=True)
            for m in maps:
                for b in batches:
                    limit = MAPS[m].limit
                    # enough scanned steps for ~1 s of work, bounded for the big batch
                    steps = max(20, min(2000, 200_000 // (b * max(1, len(MAPS[m].allies) // 3))))
                    ours = run_json([*me, "--worker", "speed", m, str(b), str(a.seconds)], c)
                    smax = run_json([str(py), str(WORKER), "--task", "speed", "--map", m, "--limit", str(limit),
                                     "--batch", str(b), "--steps", str(steps), "--seconds", str(a.seconds)], c)
                    row = {"cores": c, "map": m, "batch": b, "coopsim": ours["steps_per_s"],
                           "smax_scan": smax["scan"]["steps_per_s"], "smax_scan_compile_s": smax["scan"]["compile_s"],
                           "smax_call": smax["call"]["steps_per_s"], "smax_call_compile_s": smax["call"]["compile_s"],
                           "coopsim_cpu": ours["steps_per_cpu_s"], "smax_scan_cpu": smax["scan"]["steps_per_cpu_s"],
                           "smax_call_cpu": smax["call"]["steps_per_cpu_s"],
                           "smax_scan_cache_hit": smax["scan"].get("cache_misses", 1) == 0,
                           "smax_call_cache_hit": smax["call"].get("cache_misses", 1) == 0,
                           "time_utc": time.strftime("%H:%M:%S", time.gmtime()), "loadavg": os.getloadavg()[0]}
                    results["versions"].setdefault("jax", smax.get("jax"))
                    results["speed"].append(row)
                    print(f"speed cores={c} {m} b={b}: wall: coopsim {fmt(row['coopsim'])}  smax scan {fmt(row['smax_scan'])} "
                          f"call {fmt(row['smax_call'])} | per CPU-s: coopsim {fmt(row['coopsim_cpu'])} smax scan "
                          f"{fmt(row['smax_scan_cpu'])} call {fmt(row['smax_call_cpu'])}", flush=True)
                    recorder.atomic_write_json(out, results, indent=2)

    if a.only in (None, "calibration"):
        for m in calib:
            limit = MAPS[m].limit
            row = {"map": m}
            for pol in ("random", "focus"):
                ours = run_json([*me, "--worker", "winrate", m, pol, str(a.episodes)], "0,1")
                smax = run_json([str(py), str(WORKER), "--task", "winrate", "--map", m, "--limit", str(limit),
                                 "--policy", pol, "--episodes", str(a.episodes)], "0,1")
                row[f"{pol}_coopsim"], row[f"{pol}_smax"] = ours["win_rate"], smax["win_rate"]
            row["pass"] = all(abs(row[f"{p}_coopsim"] - row[f"{p}_smax"]) <= 0.10 for p in ("random", "focus"))
            results["calibration"].append(row)
            print(f"calibration {m}: random {row['random_coopsim']:.2f} vs {row['random_smax']:.2f}, focus "
                  f"{row['focus_coopsim']:.2f} vs {row['focus_smax']:.2f} -> {'pass' if row['pass'] else 'FAIL'}", flush=True)
            recorder.atomic_write_json(out, results, indent=2)

    results["machine"]["loadavg_end"] = os.getloadavg()
    recorder.atomic_write_json(out, results, indent=2)
    # tables
    if results["speed"]:
        print("\n| cores | map | batch | coopsim steps/s | SMAX scan steps/s | SMAX call steps/s | coopsim/scan | coopsim/call | SMAX compile s (scan/call; cache hit) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in results["speed"]:
            hit = "/".join("hit" if r.get(f"smax_{k}_cache_hit") else "miss" for k in ("scan", "call"))
            print(f"| {r['cores']} | {r['map']} | {r['batch']} | {fmt(r['coopsim'])} | {fmt(r['smax_scan'])} | {fmt(r['smax_call'])} | "
                  f"{r['coopsim'] / r['smax_scan']:.2f} | {r['coopsim'] / r['smax_call']:.2f} | "
                  f"{r['smax_scan_compile_s']:.1f} / {r['smax_call_compile_s']:.1f} ({hit}) |")
        print("\nPer CPU-second (process CPU time; robust to other load on shared cores):\n")
        print("| cores | map | batch | coopsim | SMAX scan | SMAX call | coopsim/scan | coopsim/call |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results["speed"]:
            print(f"| {r['cores']} | {r['map']} | {r['batch']} | {fmt(r['coopsim_cpu'])} | {fmt(r['smax_scan_cpu'])} | "
                  f"{fmt(r['smax_call_cpu'])} | {r['coopsim_cpu'] / r['smax_scan_cpu']:.2f} | {r['coopsim_cpu'] / r['smax_call_cpu']:.2f} |")
    if results["calibration"]:
        print(f"\n| map | random coopsim | random SMAX | focus-fire coopsim | focus-fire SMAX | within ±10 pts |  ({a.episodes} episodes each)")
        print("|---|---|---|---|---|---|")
        for r in results["calibration"]:
            print(f"| {r['map']} | {r['random_coopsim']:.0%} | {r['random_smax']:.0%} | {r['focus_coopsim']:.0%} | "
                  f"{r['focus_smax']:.0%} | {'pass' if r['pass'] else 'FAIL'} |")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    run_script(main)
