"""Fixes from a new-user pass: an interrupted `coopsim train` without periodic checkpoints keeps (and says) the state
of its last completed iteration and resumes exactly from it; the summary and comparison tables hide exactly the
all-zero comm/, shield/ and cost/ counters; confidence intervals of non-negative quantities stop at 0; benchmark
scripts stop on Ctrl-C with one line and exit code 130; benchmark run directories use the recorder's name format."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from coopsim.platform import training
from coopsim.platform.trainer import load_checkpoint, read_metrics
from coopsim.platform.training import train_main
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

# 20 iterations of 64 env steps; no periodic checkpoint (checkpoint_every unset: only at the end)
CFG = {
    "name": "interrupt-test",
    "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 3, "length": 7}},
    "agents": {"id": "ppo/mappo-v0", "params": {"hidden": [16], "recurrent": True}},
    "seeds": [0],
    "max_steps": 12,
    "train": {"total_env_steps": 20 * 8 * 8, "num_envs": 8, "rollout_steps": 8, "lr": 0.003, "epochs": 2,
              "minibatches": 2, "progress": False, "tensorboard": False},
}


def _write_cfg(tmp_path: Path) -> str:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    return str(p)


def _signal_during(monkeypatch, iteration: int, times: int = 1, sig: int = signal.SIGINT) -> None:
    """Make the trainer ``train_main`` builds send itself ``sig`` (``times`` times) at the start of its iteration
    number ``iteration`` (1-based), i.e. while that iteration runs."""
    real = training.build_trainer

    def build(*a, **k):
        trainer, train = real(*a, **k)
        inner, calls = trainer.train_iteration, [0]

        def train_iteration():
            calls[0] += 1
            if calls[0] == iteration:
                for _ in range(times):
                    os.kill(os.getpid(), sig)
                    time.sleep(0.01)
            return inner()

        trainer.train_iteration = train_iteration
        return trainer, train

    monkeypatch.setattr(training, "build_trainer", build)


def _same_run(a: Path, b: Path) -> None:
    ra, rb = read_metrics(a / "seed-0"), read_metrics(b / "seed-0")
    assert len(ra) == 20 and ra == rb  # every row, every column except wall-clock ones, bit for bit
    pa = torch.load(a / "seed-0" / "policy.pt", weights_only=False)["net"]
    pb = torch.load(b / "seed-0" / "policy.pt", weights_only=False)["net"]
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("full")
    return train_main(_write_cfg(tmp), [f"out_dir={tmp}"], None)


def test_interrupt_without_periodic_checkpoints_keeps_the_last_iteration_and_resumes_exactly(tmp_path, monkeypatch,
                                                                                              full_run):
    cfg = _write_cfg(tmp_path)
    _signal_during(monkeypatch, iteration=7)
    notes = []
    with pytest.raises(KeyboardInterrupt) as ei:
        train_main(cfg, [f"out_dir={tmp_path / 'cut'}"], None, info=notes.append)
    run = ei.value.run_dir
    ck = load_checkpoint(run / "seed-0" / "checkpoint.pt")
    # the signal came during iteration 7: that iteration finishes, is logged and checkpointed, nothing after it
    assert ck["trainer"]["iteration"] == 7 and ck["env_steps"] == 7 * 64
    assert len(read_metrics(run / "seed-0")) == 7
    assert not (run / "seed-0" / "policy.pt").exists() and not (run / "train_summary.json").exists()
    assert ei.value.kept == f"seed 0: checkpoint at 448 of 1,280 env steps ({run / 'seed-0' / 'checkpoint.pt'})"
    assert notes[-1] == "stopped: " + ei.value.kept
    assert training.steps_done(run / "seed-0") == 448  # --resume reports "seed 0 at 448", not "not started"
    monkeypatch.undo()
    assert train_main(cfg, [], str(run)) == run
    _same_run(full_run, run)


def test_second_interrupt_in_the_first_iteration_keeps_the_initial_state(tmp_path, monkeypatch, full_run):
    """A second Ctrl-C stops the running iteration at once; with no checkpoint yet, the state before the first
    iteration is written, so --resume continues (and exactly) rather than reporting 'not started'."""
    cfg = _write_cfg(tmp_path)
    _signal_during(monkeypatch, iteration=1, times=2)
    with pytest.raises(KeyboardInterrupt) as ei:
        train_main(cfg, [f"out_dir={tmp_path / 'cut'}"], None)
    run = ei.value.run_dir
    ck = load_checkpoint(run / "seed-0" / "checkpoint.pt")
    assert ck["trainer"]["iteration"] == 0 and ck["env_steps"] == 0
    assert ei.value.kept.startswith("seed 0: checkpoint at 0 of 1,280 env steps")
    monkeypatch.undo()
    assert train_main(cfg, [], str(run)) == run
    _same_run(full_run, run)


def test_signal_handlers_are_restored_after_fit(tmp_path, monkeypatch):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    _signal_during(monkeypatch, iteration=2)
    with pytest.raises(KeyboardInterrupt):
        train_main(_write_cfg(tmp_path), [f"out_dir={tmp_path / 'cut'}"], None)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def _train_linewalk_until_logged(tmp_path: Path, env: dict) -> subprocess.Popen:
    """`coopsim train` on LineWalk (no periodic checkpoints, a 10M budget) in a child process, returned once its
    metrics.csv holds two iterations (or after 120 s)."""
    cfg = REPO / "configs" / "ppo" / "linewalk-mappo.yaml"
    p = subprocess.Popen([sys.executable, "-m", "coopsim.cli", "train", str(cfg), "train.checkpoint_every=0",
                          "train.total_env_steps=10000000", "train.progress=false", "train.tensorboard=false",
                          f"out_dir={tmp_path}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120 and p.poll() is None:
        csvs = list(tmp_path.glob("*/seed-0/metrics.csv"))
        if csvs and len(csvs[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    return p


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_cli_train_signal_without_periodic_checkpoints_writes_the_checkpoint_it_names(tmp_path, sig, code, word):
    """The reported case: `coopsim train` with checkpoint_every unset, stopped mid-run, used to print 'the last
    checkpoint is kept' with no checkpoint.pt, and --resume said 'seed 0 not started'."""
    p = _train_linewalk_until_logged(tmp_path, ENV)
    try:
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code and "Traceback" not in out + err, (out, err)
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    ck = load_checkpoint(run / "seed-0" / "checkpoint.pt")
    rows = read_metrics(run / "seed-0")
    assert ck["env_steps"] == int(rows[-1]["env_steps"]) > 0  # the last logged iteration, nothing lost
    assert f"stopped: seed 0: checkpoint at {ck['env_steps']:,} of 10,000,000 env steps" in out
    assert f"{word}: kept seed 0: checkpoint at {ck['env_steps']:,} of 10,000,000 env steps" in err  # the CLI says it too
    assert f"--resume {run}" in err


def test_cli_train_a_second_ctrl_c_while_it_prints_the_hint_does_not_swallow_it(tmp_path):
    """The reported case: Ctrl-C, then Ctrl-C again just after the checkpoint was written: the second one used to
    interrupt the CLI while it printed (importing the module that spells the command), so no resume hint appeared."""
    p = _train_linewalk_until_logged(tmp_path, {**ENV, "PYTHONUNBUFFERED": "1"})
    try:
        p.send_signal(signal.SIGINT)
        lines = []
        for line in p.stdout:
            lines.append(line)
            if line.startswith("stopped:"):
                time.sleep(0.05)  # the CLI is now printing its hint
                p.send_signal(signal.SIGINT)
                break
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    out = "".join(lines) + out
    assert p.returncode == 130 and "Traceback" not in out + err, (out, err)
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert "interrupted: kept seed 0: checkpoint at" in err and f"--resume {run}" in err, err


# --- tables: exactly the all-zero comm/, shield/ and cost/ counters are hidden -------------------------------------

def _stat(per_seed: dict) -> dict:
    vals = list(per_seed.values())
    return {"mean": sum(vals) / len(vals), "ci95_low": None, "ci95_high": None, "n_seeds": len(vals),
            "n_episodes": len(vals), "per_seed": {str(k): v for k, v in per_seed.items()}}


def _table_text(table) -> str:
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(table)
    return console.export_text()


def test_summary_table_shows_all_zero_plan_failures_and_hides_only_the_captioned_counters(tmp_path):
    from coopsim.platform.report import summary_table

    zero = _stat({0: 0.0, 1: 0.0})
    metrics = {"soc": _stat({0: 10.0, 1: 12.0}), "plan/failures": zero, "plan/expansions": zero, "reward/goal": zero,
               "comm/offered_copies": zero, "shield/interventions": zero, "cost/collision": zero,
               "comm/lost_copies": _stat({0: 0.0, 1: 3.0})}
    run = {"config": {"name": "t"}, "dir": tmp_path, "summary": {"metrics": metrics}, "has_summary": True}
    rows = [c._cells for c in summary_table(run).columns][0]  # the metric column
    # plan/ and reward/ are no hidden family (shown although all zero); comm/lost_copies is not all zero
    assert rows == ["soc", "comm/lost_copies", "plan/expansions", "plan/failures", "reward/goal"]
    assert not {"comm/offered_copies", "shield/interventions", "cost/collision"} & set(rows)


def _fake_run(d: Path, num_agents: int, comm_offered: float, shield: float) -> Path:
    import json

    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"name": "r", "scenario": {"id": "line/LineWalk-v0",
                                                   "params": {"num_agents": num_agents}}, "seeds": [0, 1]}))
    rows = [{"seed": s, "episode": e, "soc": 5.0 + s + e + num_agents, "plan/failures": 0.0,
             "comm/offered_copies": comm_offered, "shield/interventions": shield}
            for s in (0, 1) for e in (0, 1)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_comparison_hides_all_zero_counters_in_table_and_plots_but_keeps_them_in_the_csv(tmp_path):
    from coopsim.platform.report import compare_runs, comparison_table

    runs = [_fake_run(tmp_path / "a", 2, 0.0, 0.0), _fake_run(tmp_path / "b", 3, 0.0, 4.0)]
    res = compare_runs(runs, out_dir=tmp_path)
    assert "comm/offered_copies" not in res["metrics"] and res["hidden"] == ["comm/offered_copies"]
    assert "shield/interventions" in res["metrics"]  # non-zero in one run: shown in every row
    assert "plan/failures" in res["metrics"]  # not a hidden family, shown although all zero
    assert not (tmp_path / "compare_comm_offered_copies.png").exists()
    assert (tmp_path / "compare_shield_interventions.png").is_file() and (tmp_path / "compare_soc.png").is_file()
    head = (tmp_path / "compare.csv").read_text().splitlines()[0].split(",")
    assert "comm/offered_copies" in head  # the file keeps every metric
    text = _table_text(comparison_table(res))
    assert "comm/offered_copies" not in text and "shield/interventions" in text
    assert "all-zero comm/, shield/ and cost/ counters are hidden here" in " ".join(text.split())


# --- confidence intervals of non-negative quantities stop at 0 ---------------------------------------------------

def test_intervals_of_counts_and_costs_are_clipped_at_zero_and_returns_are_not():
    import math

    from scipy import stats as sstats

    from coopsim.platform.stats import metric_bounds, summarize

    # two seeds, one with a large count, one with none: the plain t-interval reaches far below 0
    vals = {0: [0.0, 0.0], 1: [100.0, 120.0]}
    rows = [{"seed": s, "episode": e, "soc": v, "shield/interventions": v, "comm/lost_copies": v, "plan/failures": v,
             "cost/collision": v, "makespan": v, "collisions": v, "episode_steps": v, "episode_return": -v,
             "reward/goal": v}
            for s, vs in vals.items() for e, v in enumerate(vs)]
    out = summarize(rows)
    means = [0.0, 110.0]
    half = sstats.t.ppf(0.975, 1) * float(__import__("numpy").std(means, ddof=1)) / math.sqrt(2)
    assert 55.0 - half < -300  # what the interval used to be
    for k in ("soc", "shield/interventions", "comm/lost_copies", "plan/failures", "cost/collision", "makespan",
              "collisions", "episode_steps"):
        assert out[k]["mean"] == pytest.approx(55.0)
        assert out[k]["ci95_low"] == 0.0, k
        assert out[k]["ci95_high"] == pytest.approx(55.0 + half), k
    # a return can be negative, and reward/ terms are not a non-negative kind: unclipped
    assert out["episode_return"]["ci95_low"] == pytest.approx(-55.0 - half)
    assert out["episode_return"]["ci95_high"] == pytest.approx(-55.0 + half) and out["episode_return"]["ci95_high"] > 0
    assert out["reward/goal"]["ci95_low"] == pytest.approx(55.0 - half)
    # a non-negative kind whose samples do go negative (a differently defined metric of that name) is not clipped
    assert metric_bounds("soc", [3.0, -1.0]) is None
    assert metric_bounds("soc", [3.0, 0.0]) == (0.0, math.inf)
    assert metric_bounds("episode/win", [1.0]) == (0.0, 1.0)
    assert metric_bounds("episode_return", [1.0]) is None


# --- benchmark scripts: Ctrl-C gives one line and exit code 130 -------------------------------------------------

def _benchmark_entry_points() -> dict[str, str]:
    import ast

    out = {}
    for p in sorted((REPO / "benchmarks").glob("*.py")):
        tree = ast.parse(p.read_text())
        for node in tree.body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                out[p.name] = ast.unparse(node)
    return out


def test_every_benchmark_entry_point_stops_quietly_on_ctrl_c():
    entries = _benchmark_entry_points()
    assert len(entries) >= 20 and "smac_step_ab.py" in entries  # its module-level loop is now main()
    for name, block in entries.items():
        if name in ("_smax_worker.py", "_smax_core_worker.py"):  # in the jaxmarl venv, without coopsim: own handler
            assert "except KeyboardInterrupt" in block and "SystemExit(130)" in block
        else:
            assert "run_script(main" in block, (name, block)


def test_sigint_to_a_benchmark_prints_one_line_and_exits_130():
    p = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "ddacom_loss_bound.py"), "--headroom"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                         env={**ENV, "PYTHONUNBUFFERED": "1"})
    try:
        first = p.stdout.readline()  # the script is at work (the headroom table takes about a minute more)
        assert first.startswith("N = 3"), first
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines() == ["interrupted; kept: what it printed and the files it had written (each whole: "
                                        "none is left half-written)"]


def test_run_script_calls_main_with_or_without_argv_and_says_what_is_kept(capsys):
    from coopsim.errors import run_script

    assert run_script(lambda: 3) == 3 and run_script(lambda argv: argv, ["a"]) == ["a"]

    def stopped(argv=None):
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as ei:
        run_script(stopped, kept=lambda: "results/x.json (3 rows)")
    assert ei.value.code == 130
    assert capsys.readouterr().err == "interrupted; kept: results/x.json (3 rows)\n"


# --- benchmark run directories are named like coopsim's -----------------------------------------------------------

def test_time_to_win_run_dir_uses_the_recorder_format(tmp_path, monkeypatch):
    import re

    mod = load_benchmark("smac_time_to_win", "smac_time_to_win_fresh")

    def no_training(*a, **k):
        raise KeyboardInterrupt  # stop once the run directory exists

    monkeypatch.setattr(mod, "fit", no_training)
    with pytest.raises(KeyboardInterrupt):
        mod.main([str(REPO / "configs" / "smac" / "3m-mappo.yaml"), "--seeds", "0", "--eval-episodes", "2",
                  "train.num_envs=2", f"out_dir={tmp_path}", "name=ttw-name"])
    (run,) = tmp_path.iterdir()
    # e.g. ttw-name-ttw-20261202T135812Z-52af4e (was ttw-name-ttw-20261202-140526-<6 hex>)
    assert re.fullmatch(r"ttw-name-ttw-\d{8}T\d{6}Z-[0-9a-f]{6}", run.name), run.name
    assert (run / "config.yaml").is_file()


def test_ns3_experiment_file_that_is_not_utf8_is_a_config_error(tmp_path):
    from coopsim.comm.ns3.experiment import load
    from coopsim.errors import ConfigError

    bad = tmp_path / "exp.yaml"
    bad.write_bytes(b"\x89PNG\x00\x01")
    with pytest.raises(ConfigError, match="not a UTF-8 text"):
        load(str(bad))


def test_train_says_when_the_shield_section_does_not_filter_training():
    from coopsim.platform.config import load_config
    from coopsim.platform.training import shield_note, train_config, trainable_class

    def note(path, overrides=()):
        cfg = load_config(str(REPO / path), list(overrides))
        return shield_note(cfg, train_config(cfg, trainable_class(cfg)[1]))

    gs = "configs/safety/coop-grid4x4-2ag-resource.yaml"
    assert note(gs) is None  # graph-safe trains with train.shield = certificate-v0, the section's shield
    assert "train.shield = passthrough-v0" in note(gs, ["train.shield=passthrough-v0"])
    ppo = note(gs, ["agents.id=ppo/mappo-v0", "agents.params={}", "train={total_env_steps: 64}"])
    assert ppo.startswith("note: the shield section (certificate-v0) applies to `coopsim run` / `eval`; "
                          "ppo/mappo-v0 trains unshielded")
    assert note(gs, ["shield.id=passthrough-v0", "shield.params={}"]) is None


def test_metrics_png_names_its_zero_metrics_as_the_table_does():
    from coopsim.platform.report import plot_selection

    def st(*vals):
        return {"mean": sum(vals) / len(vals), "per_seed": {str(i): v for i, v in enumerate(vals)}}

    allm = {"success": st(1.0, 1.0), "collisions": st(0.0, 0.0), "plan/failures": st(0.0, 0.0),
            "comm/messages": st(0.0, 0.0), "soc": st(10.0, 12.0), "seed": st(0.0, 1.0)}
    panels, footnote = plot_selection(allm)
    assert panels == ["success", "soc"]  # headline order; zeros and ids get no panel
    assert footnote == ["collisions", "plan/failures"]  # named; the all-zero comm/ counter is hidden, as in the table


def test_a_reward_named_like_a_rate_is_not_clipped_to_the_unit_interval():
    """``reward/win`` (SMAC's win bonus, 0 or 10.96 per episode) ends in ``win`` but is no rate: its interval must
    contain its mean (it used to be clipped to [1, 1] around a mean of 6.9)."""
    import math

    import numpy as np
    from scipy import stats as sstats

    from coopsim.platform.stats import metric_bounds, summarize

    per_seed = {0: [10.96, 10.96, 0.0], 1: [10.96, 0.0, 0.0], 2: [10.96, 10.96, 10.96]}
    rows = [{"seed": s, "episode": e, "reward/win": v, "win": float(v > 0)}
            for s, vs in per_seed.items() for e, v in enumerate(vs)]
    out = summarize(rows)
    means = [float(np.mean(v)) for v in per_seed.values()]
    half = sstats.t.ppf(0.975, 2) * float(np.std(means, ddof=1)) / math.sqrt(3)
    r = out["reward/win"]
    assert r["mean"] == pytest.approx(np.mean(means))
    assert r["ci95_low"] == pytest.approx(np.mean(means) - half) and r["ci95_high"] == pytest.approx(np.mean(means) + half)
    assert out["win"]["ci95_high"] == 1.0 and out["win"]["ci95_low"] >= 0.0  # the true rate is still clipped
    assert metric_bounds("reward/win", [0.0, 10.96]) is None
    assert metric_bounds("episode/win", [0.0, 1.0]) == (0.0, 1.0)


def test_random_size_of_one_number_asks_for_a_pair():
    from coopsim.errors import ConfigError
    from coopsim.platform.registry import make_scenario

    with pytest.raises(ConfigError, match=r"random_size must be a pair \[lo, hi\].*got \[16\]") as info:
        make_scenario("mapf/MGMAPF-v0", num_envs=1, map="random", random_size=[16])
    assert info.value.key == "random_size"


def test_open_loop_planner_under_an_intervening_shield_is_warned_about():
    from coopsim.platform.config import validate_config
    from coopsim.platform.runner import open_loop_shield_warning

    base = {"name": "w", "scenario": {"id": "mapf/MGMAPF-v0"}, "agents": {"id": "mapf/prioritized-v0"}}
    assert open_loop_shield_warning(validate_config(base)) is None
    w = open_loop_shield_warning(validate_config({**base, "shield": {"id": "certificate-v0"}}))
    assert w is not None and "open-loop" in w and "shield.id=passthrough-v0" in w
    # a closed-loop agent under the same shield: no warning
    assert open_loop_shield_warning(validate_config({**base, "agents": {"id": "mapf/pibt-v0"},
                                                     "shield": {"id": "certificate-v0"}})) is None


def test_numbers_in_e_notation_are_numbers_in_files_and_overrides(tmp_path):
    """PyYAML alone reads 1e5 as the string '1e5'; coopsim reads it as the number users mean."""
    from coopsim.platform.config import load_config, parse_override

    assert parse_override("train.total_env_steps=1e5") == (["train", "total_env_steps"], 100000)
    assert isinstance(parse_override("a=1e5")[1], int) and parse_override("a=-3E2")[1] == -300
    assert parse_override("a=2.5e-3")[1] == 0.0025 and parse_override("a=1.0e3")[1] == 1000.0
    assert parse_override("a=1e")[1] == "1e" and parse_override("a=e5")[1] == "e5"
    f = tmp_path / "c.yaml"
    f.write_text("name: e\nscenario: {id: line/LineWalk-v0}\nagents: {id: ppo/ippo-v0}\nmax_steps: 1e2\n"
                 "train: {total_env_steps: 2e4, lr: 3e-4}\n")
    cfg = load_config(f, ["episodes=2e0"])
    assert cfg.max_steps == 100 and cfg.episodes == 2
    assert cfg.train["total_env_steps"] == 20000 and cfg.train["lr"] == 0.0003


def test_a_damaged_checkpoint_is_called_damaged_with_its_size(tmp_path):
    from coopsim.errors import ConfigError
    from coopsim.platform.trainer import load_checkpoint

    f = tmp_path / "policy.pt"
    f.write_bytes(b"\x80\x02garbage")
    with pytest.raises(ConfigError, match=r"not a readable checkpoint: the file \(9 bytes\) is damaged, truncated") as info:
        load_checkpoint(f)
    assert info.value.file == str(f) and "use another checkpoint" in str(info.value)


def test_soc_over_lb_interval_stays_at_or_above_one():
    import math

    from coopsim.platform.stats import metric_bounds, summarize

    rows = [{"seed": s, "episode": 0, "soc_over_lb": v} for s, v in enumerate([1.0, 1.0, 1.2])]
    out = summarize(rows)["soc_over_lb"]
    assert out["ci95_low"] == 1.0 and out["ci95_high"] > 1.2  # the plain t-interval reaches below 1
    assert metric_bounds("episode/soc_over_lb", [1.0, 1.5]) == (1.0, math.inf)
    assert metric_bounds("soc_over_lb", [0.9, 1.5]) == (0.0, math.inf)  # a sample below 1: only the >= 0 clip
