"""Measure the issue's targets for graph-safe RL and write them under ``docs/safety_results/``.

Usage::

    python -m coopsim.agents.graph_safe.experiments violations [--train-episodes 20 --eval-episodes 5]
    python -m coopsim.agents.graph_safe.experiments regret [--episodes 1500 --seeds 0 1 2]
    python -m coopsim.agents.graph_safe.experiments tables      # rebuild the markdown from the JSON files
    python -m coopsim.agents.graph_safe.experiments mapf        # greedy MG-MAPF agents with and without the shield

``violations``: for every shipped config in ``configs/safety/`` and each of its 20 seeds, train graph-safe
RL (with its training shield ``certificate-v0``) then evaluate it greedily, and run independent
Q-learning without a shield for the same number of episodes; per seed it prints the violation counts,
steps and wall time. ``regret``: on small instances, cumulative regret against the exact optimal safe
policy (DP with the true dynamics; per episode, V* minus the expected return of the plan the episode
followed, evaluated exactly; the realized-return version is stored too), its log-log slope over the second half of training, and the
conservativeness curve. Each config's results are written atomically as one JSON file, and finished
configs are skipped on a rerun (the run can be interrupted and continued).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import time
from pathlib import Path

import numpy as np

from coopsim.errors import ConfigError, int_at_least, run_script
from coopsim.platform.recorder import atomic_savefig, atomic_write_json, atomic_write_text, check_writable

OUT = Path("docs/safety_results")


def _atomic_json(obj, path: Path) -> None:
    """Write ``obj`` as JSON (indent 1) to ``path`` with the run directories' atomic writer (temporary file in
    the same directory, fsync, ``os.replace``; parent directories are created)."""
    atomic_write_json(path, obj, indent=1)


LEARNER = "graph_safe-v0 (counts replans, goal-directed expansion, training shield sharing the learner's counts)"


def _git_head() -> str:
    try:
        import subprocess

        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except Exception:  # noqa: BLE001 - provenance only
        return "unknown"


def violations(config_files: list[str], train_episodes: int | None, eval_episodes: int | None, out: Path,
               seeds: list[int] | None = None, replace: bool = False) -> None:
    """Violation study; the JSON of a config is rewritten after every seed (``complete`` false until its last
    seed), so an interrupted run resumes at the next seed. A file from another learner version or another
    episode budget is replaced."""
    from coopsim.agents.graph_safe.train import train_seed
    from coopsim.platform.config import load_config

    commit = _git_head()  # the code this process loaded (HEAD at start; other commits may land during the run)
    for f in config_files:
        cfg = load_config(f)
        path = out / f"violations-{cfg.name}.json"
        n_train = train_episodes if train_episodes is not None else cfg.episodes
        n_eval = eval_episodes if eval_episodes is not None else max(1, n_train // 4)
        todo = list(seeds if seeds is not None else cfg.seeds)
        rows = []
        if path.exists():
            old = json.loads(path.read_text())
            same = (old.get("learner") == LEARNER and old.get("train_episodes") == n_train
                    and old.get("eval_episodes") == n_eval)
            if same:
                rows = old["rows"]
                done = {r["seed"] for r in rows}
                todo = [s for s in todo if s not in done]
                if not todo:
                    print(f"{cfg.name}: done already ({path})")
                    continue
            elif not replace:
                raise ConfigError(f"{path} holds {old.get('train_episodes')} + {old.get('eval_episodes')} episodes per "
                                  f"seed of learner {old.get('learner')!r}, not {n_train} + {n_eval} of this one; "
                                  "pass --replace to overwrite it, or --out DIR to write elsewhere",
                                  key="--train-episodes", value=n_train)
        print(f"\n{cfg.name}: {n_train} training + {n_eval} evaluation episodes per seed; seeds to run {todo}")
        print(f"{'seed':>4} {'gs train viol':>13} {'gs eval viol':>12} {'gs steps':>8} {'gs wall s':>9} "
              f"{'gs return':>9} {'iql viol (no shield)':>20} {'iql steps':>9}")
        for seed in todo:
            t0 = time.perf_counter()
            recs = train_seed(cfg.scenario.id, cfg.scenario_params(), cfg.agents.id, cfg.agents.params, cfg.shield.id,
                              cfg.shield.params, seed, n_train, n_eval)
            wall = time.perf_counter() - t0
            t1 = time.perf_counter()
            iql = train_seed(cfg.scenario.id, cfg.scenario_params(), "safe_baselines/iql-v0", {"seed": seed},
                             "passthrough-v0", {}, seed, n_train + n_eval)
            row = {
                "seed": seed,
                "gs_train_violations": sum(r["violations"] for r in recs if r["phase"] == 0),
                "gs_eval_violations": sum(r["violations"] for r in recs if r["phase"] == 1),
                "gs_uncertified_steps": sum(r["shield/uncertified"] for r in recs),
                "gs_shield_interventions": sum(r["shield/interventions"] for r in recs),
                "gs_steps": sum(r["steps"] for r in recs),
                "gs_wall_s": wall,
                "gs_eval_return": float(np.mean([r["episode/return"] for r in recs if r["phase"] == 1])),
                "iql_violations": sum(r["violations"] for r in iql),
                "iql_steps": sum(r["steps"] for r in iql),
                "iql_wall_s": time.perf_counter() - t1,
                "iql_eval_return": float(np.mean([r["episode/return"] for r in iql[-n_eval:]])),
            }
            rows.append(row)
            print(f"{seed:>4} {row['gs_train_violations']:>13.0f} {row['gs_eval_violations']:>12.0f} {row['gs_steps']:>8.0f} "
                  f"{wall:>9.1f} {row['gs_eval_return']:>9.2f} {row['iql_violations']:>20.0f} {row['iql_steps']:>9.0f}", flush=True)
            rows.sort(key=lambda r: r["seed"])
            _atomic_json({"config": f, "name": cfg.name, "train_episodes": n_train, "eval_episodes": n_eval,
                          "learner": LEARNER, "commit": commit, "complete": len(rows) >= len(cfg.seeds),
                          "agents": cfg.agents.model_dump(), "shield": cfg.shield.model_dump(), "rows": rows}, path)


REGRET_CASES = {
    "grid4x4-2ag-all": ("coop_game/Grid4x4-v0", {"num_agents": 2, "constraints": ["separation", "resource", "connectivity"]}),
    "grid5x5-2ag-separation": ("coop_game/Grid5x5-v0", {"num_agents": 2, "constraints": ["separation"]}),
    "grid4x4-3ag-separation": ("coop_game/Grid4x4-v0", {"num_agents": 3, "constraints": ["separation"]}),
    "grid4x4-2ag-separation": ("coop_game/Grid4x4-v0", {"num_agents": 2, "constraints": ["separation"]}),
}


def _slope(cum: np.ndarray) -> float:
    """log-log slope of cumulative regret over the second half of training (least squares; regret <= 1e-9
    is taken as 1e-9, so a curve that has stopped growing has slope ~0)."""
    k = np.arange(1, len(cum) + 1)
    h = len(cum) // 2
    return float(np.polyfit(np.log(k[h:]), np.log(np.maximum(cum[h:], 1e-9)), 1)[0])


def regret(cases: list[str], episodes: int, seeds: list[int], p_min: float, out: Path, expand_bonus: float | None = None,
           tag: str = "", agent_extra: dict | None = None, iql: bool = False, replace: bool = False) -> None:
    from coopsim.agents.graph_safe.train import train_seed
    from coopsim.platform.registry import make_scenario
    from coopsim.scenarios.coop_game.solver import solve_scenario

    for name in cases:
        sid, sp = REGRET_CASES[name]
        sc = make_scenario(sid, **sp)
        sol, _ = solve_scenario(sc)
        v_star = sol.value(sc.starts(), sc.world().num_cells)
        print(f"\n{name}{tag}: V* = {v_star:.3f}, {episodes} training + 10 evaluation episodes per seed")
        print(f"{'seed':>4} {'cum. regret':>11} {'slope':>6} {'eval return':>11} {'gs violations':>13} {'iql viol (no shield)':>20} "
              f"{'conservativeness':>17} {'wall s':>7}")
        for seed in seeds:
            path = out / f"regret-{name}{tag}-seed{seed}.json"
            params = {"num_runs": 360, "p_min": p_min}
            agent_params = dict(params) if expand_bonus is None else {**params, "expand_bonus": expand_bonus}
            agent_params.update(agent_extra or {})
            if path.exists():
                try:
                    old = json.loads(path.read_text())
                except ValueError:
                    old = {}
                if old.get("episodes") == episodes and old.get("agent_params") == agent_params:
                    print(f"{seed:>4} done already ({path})")
                    continue
                if not replace:
                    raise ConfigError(f"{path} holds a run of {old.get('episodes')} episodes with agent params "
                                      f"{old.get('agent_params')}, not {episodes} with {agent_params}; pass --replace "
                                      "to overwrite it, --tag to name this setting apart, or --out DIR",
                                      key="--episodes", value=episodes)
            t0 = time.perf_counter()
            box: list = []
            recs = train_seed(sid, sp, "graph_safe-v0", agent_params, "certificate-v0", params, seed, episodes, 10,
                              v_star=v_star, true_support_every=max(1, episodes // 20), agent_out=box)
            wall = time.perf_counter() - t0
            diag_end, certifiable = _diagnosis(box[0])
            train = [r for r in recs if r["phase"] == 0]
            real = np.cumsum([r["regret"] for r in train])
            reg = np.cumsum([r["expected_regret"] for r in train])
            slope = _slope(reg)
            res = {"case": name + tag, "scenario": sid, "params": sp, "agent_params": agent_params, "seed": seed, "episodes": episodes,
                   "v_star": v_star, "cumulative_regret": reg.tolist(), "cumulative_realized_regret": real.tolist(),
                   "slope_second_half": slope, "wall_s": wall,
                   "violations": sum(r["violations"] for r in recs),
                   "shield_interventions": sum(r["shield/interventions"] for r in recs),
                   "steps": sum(r["steps"] for r in recs),
                   "eval_return": float(np.mean([r["episode/return"] for r in recs if r["phase"] == 1])),
                   "conservativeness": [(r["episode"], r["conservativeness"], r["conservativeness_visited"])
                                        for r in recs if "conservativeness" in r],
                   "truly_safe": diag_end["truly_safe"], "certifiable": certifiable, "diagnosis_end": diag_end}
            if iql:
                base = train_seed(sid, sp, "safe_baselines/iql-v0", {"seed": seed}, "passthrough-v0", {}, seed, episodes + 10)
                res["iql_violations"] = sum(r["violations"] for r in base)
            c = res["conservativeness"]
            print(f"{seed:>4} {reg[-1]:>11.1f} {slope:>6.3f} {res['eval_return']:>11.3f} {res['violations']:>13.0f} "
                  f"{res.get('iql_violations', float('nan')):>20.0f} {c[0][1]:>7.3f} -> {c[-1][1]:.3f} {wall:>7.0f}"
                  f"  (of certifiable: {diag_end['of_certifiable']:.3f}; uncertified {diag_end['classes']})", flush=True)
            _atomic_json(res, path)


def _diagnosis(agent) -> tuple[dict, int]:
    """End-of-run conservativeness diagnosis of a joint-planner agent (:mod:`coopsim.agents.graph_safe.diagnose`),
    and the number of truly safe joint actions certifiable at all: the closure from the prior plausible sets
    (what any learner could certify from these start cells; it contains every certified set)."""
    from coopsim.agents.graph_safe.diagnose import diagnose, diagnose_agent

    d = diagnose_agent(agent)
    sc = agent.scenario
    prior = agent.world.prior >= 0
    prior[:, 0, 1:] = False
    d0 = diagnose(agent.ensure_table(), agent.world, prior, sc.world().true_prob > 0, np.asarray(sc.starts()), agent.H)
    assert d.certified <= d0.certifiable, "a certified joint action lies outside the closure from the prior"
    out = d.summary()
    out["of_certifiable_prior"] = d.certified / max(d0.certifiable, 1)
    return out, d0.certifiable


def tables(out: Path) -> str:
    """Markdown tables from the JSON results (also written to ``out/README.md``)."""
    lines = ["# Graph-safe RL: measured targets", "",
             "Generated by `python -m coopsim.agents.graph_safe.experiments tables` from the JSON files here.", "",
             "## Violations (20 seeds per shipped config)", "",
             "| config | learner | episodes (train+eval) | seeds | graph-safe violations (train / eval), max over seeds | "
             "uncertified steps | env steps (total) | wall s (total) | mean eval return | IQL no-shield violations (total, per-seed min-max) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for f in sorted(glob.glob(str(out / "violations-*.json"))):
        d = json.loads(Path(f).read_text())
        rows = d["rows"]
        iv = [r["iql_violations"] for r in rows]
        who = f"current ({d['commit']})" if d.get("learner") == LEARNER else "previous"
        if d.get("learner") == LEARNER and not d.get("complete", True):
            who += ", partial"
        lines.append(f"| {d['name']} | {who} | {d['train_episodes']}+{d['eval_episodes']} | {len(rows)} | "
                     f"{max(r['gs_train_violations'] for r in rows):.0f} / {max(r['gs_eval_violations'] for r in rows):.0f} | "
                     f"{sum(r['gs_uncertified_steps'] for r in rows):.0f} | {sum(r['gs_steps'] for r in rows):.0f} | "
                     f"{sum(r['gs_wall_s'] for r in rows):.0f} | {np.mean(_floats(r['gs_eval_return'] for r in rows)):.2f} | "
                     f"{sum(iv):.0f} ({min(iv):.0f}-{max(iv):.0f}) |")
    lines += ["", "Per-seed violation counts (seeds in order; graph-safe train+eval | IQL without shield):", ""]
    for f in sorted(glob.glob(str(out / "violations-*.json"))):
        d = json.loads(Path(f).read_text())
        gs = " ".join(f"{r['gs_train_violations'] + r['gs_eval_violations']:.0f}" for r in d["rows"])
        iq = " ".join(f"{r['iql_violations']:.0f}" for r in d["rows"])
        lines.append(f"- `{d['name']}` seeds {d['rows'][0]['seed']}..{d['rows'][-1]['seed']}: graph-safe `{gs}` | IQL `{iq}`")
    lines += ["", "Full per-seed rows (steps, wall time, returns): `violations-<config>.json`.", "",
              "## Regret against the exact optimal safe policy, and conservativeness", "",
              "Expected regret per episode = V* (exact optimal safe policy: DP with the true dynamics over the truly safe "
              "joint actions) minus the exact expected return of the plan the episode followed. Slope: least-squares "
              "log-log slope of cumulative regret over the second half of training. Conservativeness: certified / truly "
              "safe (joint state, joint action) pairs over all joint states; *of certifiable*: certified / truly safe pairs "
              "that can be certified at all from the start cells (the safe-expansion closure from the prior, "
              "`coopsim/agents/graph_safe/diagnose.py`; recorded only by runs made after it existed). Uncertified at the end: "
              "truly safe pairs not certified, by class (now / later / unreachable / never, see docs/safety.md).", "",
              "| case | seeds | episodes (train) | V* | eval return (mean) | cumulative regret mean (min-max) | "
              "slope mean (max) | violations (all seeds) | shield interventions | conservativeness first -> last (mean; min-max last) | "
              "of certifiable, last (mean; min-max) | uncertified at the end (mean: now / later / unreachable / never) | "
              "visited states (last, mean) | wall s per seed (mean) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups = _regret_groups(out)
    for case, ds in groups.items():
        cum = np.array([d["cumulative_regret"][-1] for d in ds])
        sl = _floats(d["slope_second_half"] for d in ds)
        c0 = np.mean([d["conservativeness"][0][1] for d in ds])
        cl = np.array([d["conservativeness"][-1][1] for d in ds])
        cv = np.mean([d["conservativeness"][-1][2] for d in ds])
        lines.append(f"| {case} | {len(ds)} | {ds[0]['episodes']} | {ds[0]['v_star']:.3f} | {np.mean(_floats(d['eval_return'] for d in ds)):.3f} | "
                     f"{cum.mean():.1f} ({cum.min():.1f}-{cum.max():.1f}) | {sl.mean():.3f} ({sl.max():.3f}) | "
                     f"{sum(d['violations'] for d in ds):.0f} | {sum(d.get('shield_interventions', 0) for d in ds):.0f} | "
                     f"{c0:.3f} -> {cl.mean():.3f} ({cl.min():.3f}-{cl.max():.3f}) | {_of_cert(ds)} | {_classes(ds)} | {cv:.3f} | "
                     f"{np.mean([d['wall_s'] for d in ds]):.0f} |")
    lines += ["", "Per seed (seed: cumulative regret / slope / graph-safe violations / unshielded IQL violations when run):", ""]
    for case, ds in groups.items():
        cells = [f"{d['seed']}: {d['cumulative_regret'][-1]:.0f} / {_float(d['slope_second_half']):.2f} / {d['violations']:.0f}"
                 + (f" / {d['iql_violations']:.0f}" if "iql_violations" in d else "") for d in ds]
        lines.append(f"- `{case}`: " + "; ".join(cells))
    text = "\n".join(lines) + "\n"
    atomic_write_text(out / "README.md", text)  # a failed write: one line (WriteError), no half-written file
    _plot_regret(out)
    return text


def _float(v) -> float:
    """``v`` as a float, a ``null`` of the JSON files (a nan when written, see
    :func:`coopsim.platform.recorder.dumps_json`) as nan."""
    return math.nan if v is None else float(v)


def _floats(values) -> np.ndarray:
    """``values`` as a float array, each as :func:`_float`."""
    return np.array([_float(v) for v in values], dtype=float)


def _of_cert(ds: list[dict]) -> str:
    if not all("certifiable" in d for d in ds):
        return "-"
    x = np.array([d["conservativeness"][-1][1] * d["truly_safe"] / d["certifiable"] for d in ds])
    return f"{x.mean():.3f} ({x.min():.3f}-{x.max():.3f}) of {np.mean([d['certifiable'] / d['truly_safe'] for d in ds]):.3f}"


def _classes(ds: list[dict]) -> str:
    if not all("diagnosis_end" in d for d in ds):
        return "-"
    keys = ("triable_now", "triable_later", "unreachable", "never")
    return " / ".join(f"{np.mean([d['diagnosis_end']['classes'][k] for d in ds]):.0f}" for k in keys)


def _regret_groups(out: Path) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for f in sorted(glob.glob(str(out / "regret-*.json"))):
        d = json.loads(Path(f).read_text())
        groups.setdefault(d["case"], []).append(d)
    for ds in groups.values():
        ds.sort(key=lambda d: d["seed"])
    return groups


def _plot_regret(out: Path) -> None:
    """``out/regret_conservativeness.png`` from the ``regret-*.json`` in ``out``: left, cumulative expected regret
    per case (mean over seeds, band min-max); right, conservativeness (all joint states solid, visited dashed,
    of certifiable dotted where it differs from the solid line). One colour per case; the case legend (seeds,
    slope) sits below the left panel and the line-style key below the right one, both outside the data."""
    groups = _regret_groups(out)
    if not groups:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, 2, figsize=(12, 6.2))
    case_handles = []
    same_as_all = []  # cases whose "of certifiable" curve equals the "all joint states" one (not drawn)
    drew_dotted = False
    no_cert = []  # cases whose runs did not record the certifiable count
    for ci, (case, ds) in enumerate(groups.items()):
        col = f"C{ci % 10}"
        n = min(len(d["cumulative_regret"]) for d in ds)
        reg = np.array([d["cumulative_regret"][:n] for d in ds])
        k = np.arange(1, n + 1)
        sl = np.mean(_floats(d["slope_second_half"] for d in ds))
        seeds = f"{len(ds)} seed{'' if len(ds) == 1 else 's'}"
        axes[0].loglog(k, np.maximum(reg.mean(0), 1e-3), color=col)
        axes[0].fill_between(k, np.maximum(reg.min(0), 1e-3), np.maximum(reg.max(0), 1e-3), color=col, alpha=0.15)
        case_handles.append(Line2D([], [], color=col, lw=2, label=f"{case} ({seeds}, slope {sl:.2f})"))
        m = min(len(d["conservativeness"]) for d in ds)
        c = np.array([d["conservativeness"][:m] for d in ds])  # [seeds, m, 3]
        axes[1].plot(c[0, :, 0], c[:, :, 1].mean(0), color=col)
        axes[1].fill_between(c[0, :, 0], c[:, :, 1].min(0), c[:, :, 1].max(0), color=col, alpha=0.15)
        axes[1].plot(c[0, :, 0], c[:, :, 2].mean(0), "--", color=col)
        if not all("certifiable" in d for d in ds):
            no_cert.append(case)
        else:
            f = np.array([d["truly_safe"] / d["certifiable"] for d in ds])[:, None]
            of_cert = (c[:, :, 1] * f).mean(0)
            if np.allclose(of_cert, c[:, :, 1].mean(0), rtol=1e-9, atol=1e-12):
                same_as_all.append(case)
            else:
                axes[1].plot(c[0, :, 0], of_cert, ":", color=col, lw=2)
                drew_dotted = True
    axes[0].set_title("cumulative expected regret\n(line: mean over seeds; band: min-max over seeds)", fontsize=10)
    axes[0].set_xlabel("episode")
    axes[0].set_ylabel("cumulative expected regret")
    axes[0].legend(handles=case_handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1,
                   title="case (slope: log-log, second half)", title_fontsize=8, frameon=False)
    axes[1].axhline(1.0, color="k", lw=0.5)
    axes[1].set_title("conservativeness: certified / truly safe joint actions\n(mean over seeds; band: min-max)",
                      fontsize=10)
    axes[1].set_xlabel("episode")
    axes[1].set_ylabel("certified / truly safe")
    styles = [Line2D([], [], color="k", ls="-", label="over all joint states"),
              Line2D([], [], color="k", ls="--", label="over visited joint states")]
    if drew_dotted:
        styles.append(Line2D([], [], color="k", ls=":", lw=2, label="of certifiable pairs (drawn where it differs "
                                                                       "from solid)"))
    axes[1].legend(handles=styles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1,
                   title="line style (colour: case, as on the left)", title_fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.07, right=0.98, top=0.9, bottom=0.36, wspace=0.25)
    notes = []
    if same_as_all:
        notes.append("certified / certifiable pairs equals the solid line (every truly safe pair is certifiable; "
                     "not drawn again) for: " + ", ".join(same_as_all))
    if no_cert:
        notes.append("certifiable pairs not recorded (runs made before the count existed) for: " + ", ".join(no_cert))
    if notes:
        import textwrap

        fig.text(0.54, 0.03, "\n".join(textwrap.fill(t, 80) for t in notes), fontsize=8, va="bottom")
    atomic_savefig(fig, out / "regret_conservativeness.png", dpi=110)
    plt.close(fig)


def mapf_greedy(seeds: list[int], num_agents: int = 64) -> None:
    """Greedy MG-MAPF agents in ``conflicts: allow`` mode, without a shield and with ``certificate-v0``."""
    from coopsim.platform.registry import make_component, make_scenario
    from coopsim.safety.shields import CertificateShield

    print(f"{'seed':>4} {'greedy collisions (no shield)':>30} {'greedy + certificate-v0':>24} {'agents changed':>15} "
          f"{'steps':>6} {'shield ms/step':>14} {'goal frac raw/shielded':>22}")
    for seed in seeds:
        out = []
        for shield in (make_component("shield", "passthrough-v0"), CertificateShield(num_runs=360)):
            sc = make_scenario("mapf/MGMAPF-v0", num_envs=1, map="random-32-32-10", num_agents=num_agents, num_goals=3,
                               conflicts="allow", max_steps=256)
            ag = make_component("agent", "mapf/greedy-v0", sc)
            sc.reset(seed=seed)
            ag.reset(seed)
            shield.reset(seed, sc)
            col = ch = steps = 0
            ft = 0.0
            while not sc.done.all():
                a, _ = ag.act(sc.observations(), None)
                t0 = time.perf_counter()
                st = sc.constraints() if shield.needs_state else None
                safe, cert = shield.filter(st, a)
                ft += time.perf_counter() - t0
                ch += int(cert.changed.sum())
                res = sc.step(safe)
                col += float(res.info["cost/collision"].sum())
                steps += 1
            out.append((col, ch, steps, 1e3 * ft / steps, sc.episode_metrics()[0]["goal_fraction"]))
        print(f"{seed:>4} {out[0][0]:>30.0f} {out[1][0]:>24.0f} {out[1][1]:>15} {out[1][2]:>6} {out[1][3]:>14.1f} "
              f"{out[0][4]:>10.2f}/{out[1][4]:.2f}", flush=True)


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{value} is not in (0, 1]")
    return value


def _json_dict(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"resolve_bonus\": 1.0}}', got {text!r}")
    return value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("violations")
    v.add_argument("--configs", nargs="*", default=sorted(glob.glob("configs/safety/*.yaml")))
    v.add_argument("--train-episodes", type=int_at_least(1), default=None)
    v.add_argument("--eval-episodes", type=int_at_least(1), default=None)
    v.add_argument("--seeds", type=int_at_least(0), nargs="*", default=None)
    r = sub.add_parser("regret")
    r.add_argument("--cases", nargs="*", default=list(REGRET_CASES), choices=list(REGRET_CASES))
    r.add_argument("--episodes", type=int_at_least(1), default=1500)
    r.add_argument("--seeds", type=int_at_least(0), nargs="*", default=[0, 1, 2])
    r.add_argument("--p-min", type=_probability, default=0.1)
    r.add_argument("--expand-bonus", type=float, default=None, help="override the agent's expand_bonus")
    r.add_argument("--tag", default="", help="suffix of the case name in the result files")
    r.add_argument("--agent-params", type=_json_dict, default=None, help="JSON dict of extra graph_safe-v0 params")
    r.add_argument("--iql", action="store_true", help="also train unshielded independent Q-learning per seed (violations)")
    sub.add_parser("tables")
    m = sub.add_parser("mapf")
    m.add_argument("--seeds", type=int_at_least(0), nargs="*", default=[0, 1, 2, 3, 4])
    for p in (v, r):
        p.add_argument("--out", type=Path, default=OUT, help=f"results folder (default {OUT}: the shipped results)")
        p.add_argument("--replace", action="store_true",
                       help="overwrite a result file of another episode budget or setting (default: refuse)")
    a = ap.parse_args(argv)
    if a.cmd in ("violations", "regret"):  # the results folder, before minutes of training
        check_writable("--out", a.out, folder=True)
    if a.cmd == "violations":
        missing = [c for c in a.configs if not Path(c).is_file()]
        if missing:
            raise ConfigError(f"config file not found: {missing[0]}", key="--configs", value=missing[0])
        violations(a.configs, a.train_episodes, a.eval_episodes, a.out, a.seeds, replace=a.replace)
    elif a.cmd == "regret":
        regret(a.cases, a.episodes, a.seeds, a.p_min, a.out, a.expand_bonus, a.tag, a.agent_params, a.iql,
               replace=a.replace)
    elif a.cmd == "mapf":
        mapf_greedy(a.seeds)
    else:
        print(tables(OUT))


if __name__ == "__main__":
    run_script(main)
