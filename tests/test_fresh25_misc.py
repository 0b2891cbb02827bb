"""fresh25 findings (bug 6 and polish): `ppo.curves` with several runs (lines and JSON keyed by run and seed, a note
for a run without the plotted metrics, a docstring that says what is drawn); `mapf_planners.py --agents` out of range
(one line naming the flag, before the table header); `immp_compare.py` with one training seed (no nan interval);
`ddacom.evaluate`'s warning when the normalized return's anchor gap is within noise."""
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)
from immp_runs import write_immp_run  # noqa: E402
from scipy import stats

from coopsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


# --- ppo.curves ----------------------------------------------------------------------------------------------------

def _seed(run: Path, s: int, header: str, rows: list[str]) -> None:
    d = run / f"seed-{s}"
    d.mkdir(parents=True)
    (d / "metrics.csv").write_text("\n".join([header, *rows]) + "\n")


@pytest.fixture
def runs(tmp_path):
    """Two LineWalk-like runs that both have seed-0 (different step counts), and a SMAC-like run (episode/win only)."""
    a, b, smac = tmp_path / "runA", tmp_path / "runB", tmp_path / "smac"
    head = "iteration,env_steps,episode/success"
    _seed(a, 0, head, [f"{i},{i * 100},{0.1 * i}" for i in range(1, 6)])
    _seed(a, 1, head, [f"{i},{i * 100},{0.05 * i}" for i in range(1, 6)])
    _seed(b, 0, head, [f"{i},{i * 200},{0.2}" for i in range(1, 4)])
    _seed(smac, 0, "iteration,env_steps,episode/win", ["1,100,0.5", "2,200,0.6"])
    return a, b, smac


def _curves(monkeypatch, *args):
    """``curves.main(args)``; returns the legend labels of the figure it saves."""
    from coopsim.agents.ppo import curves

    legends = []
    real = curves.atomic_savefig

    def spy(fig, out, **kw):
        legends.append([t.get_text() for t in fig.axes[0].get_legend().get_texts()])
        return real(fig, out, **kw)

    monkeypatch.setattr(curves, "atomic_savefig", spy)
    curves.main([str(a) for a in args])
    return legends[0]


def test_curves_several_runs_label_and_key_lines_by_run_and_seed(runs, tmp_path, monkeypatch, capsys):
    a, b, smac = runs
    labels = _curves(monkeypatch, tmp_path / "c.png", a, b, smac)
    cap = capsys.readouterr()
    res = json.loads(cap.out)
    # both seed-0 lines kept apart (runB's step count used to overwrite runA's under the key "seed-0")
    assert res["seeds"] == {"runA/seed-0": 500, "runA/seed-1": 500, "runB/seed-0": 600}
    assert labels == ["runA/seed-0", "runA/seed-1", "runB/seed-0"]
    assert res["final_smoothed"]["episode/success"] == pytest.approx([0.3, 0.15, 0.2])  # fewer rows than --smooth: their mean
    # the SMAC run has no episode/success: named, not silently dropped
    assert (f"note: {smac} (1 seed(s)) has none of the plotted metrics (episode/success) in its metrics.csv: "
            f"left out of the plot") in cap.err.splitlines()
    assert str(a) not in cap.err and str(b) not in cap.err
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_curves_one_run_keeps_the_seed_keys_and_prints_no_run_note(runs, tmp_path, monkeypatch, capsys):
    a, _, _ = runs
    labels = _curves(monkeypatch, tmp_path / "c.png", a)
    cap = capsys.readouterr()
    assert json.loads(cap.out)["seeds"] == {"seed-0": 500, "seed-1": 500}
    assert labels == ["seed-0", "seed-1"]
    assert "has none of the plotted metrics" not in cap.err


def test_curves_runs_with_the_same_name_are_labelled_by_path(tmp_path, monkeypatch, capsys):
    head = "iteration,env_steps,episode/success"
    for parent in ("x", "y"):
        _seed(tmp_path / parent / "run", 0, head, ["1,100,0.5"])
    # a seed directory given directly is labelled by its run too
    labels = _curves(monkeypatch, tmp_path / "c.png", tmp_path / "x" / "run", tmp_path / "y" / "run" / "seed-0")
    keys = list(json.loads(capsys.readouterr().out)["seeds"])
    assert keys == labels == [f"{tmp_path / 'x' / 'run'}/seed-0", f"{tmp_path / 'y' / 'run'}/seed-0"]


def test_curves_docstring_says_one_line_per_seed():
    from coopsim.agents.ppo import curves

    assert "mean and range over seeds)" not in curves.__doc__
    assert "one line per seed directory" in curves.__doc__ and "no mean or range over seeds is drawn" in curves.__doc__


@pytest.fixture(scope="module")
def linewalk_run(tmp_path_factory):
    """A real (tiny) `coopsim train` LineWalk run: seed 0, 1,024 env steps."""
    out = tmp_path_factory.mktemp("lw")
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "train", str(ROOT / "configs/ppo/linewalk-mappo.yaml"),
                        "train.total_env_steps=1024", "seeds=[0]", f"out_dir={out}"], capture_output=True,
                       text=True, env=ENV, timeout=300, cwd=out)
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def test_curves_cli_on_real_runs_with_colliding_seeds_and_a_smac_run(linewalk_run, tmp_path):
    other = tmp_path / "rerun"  # a second LineWalk run with the same seed numbers
    shutil.copytree(linewalk_run, other)
    smac = tmp_path / "smac3m"
    _seed(smac, 0, "iteration,env_steps,episode/win,episode/return", ["1,640,0.0,1.5", "2,1280,0.1,2.5"])
    r = subprocess.run([sys.executable, "-m", "coopsim.agents.ppo.curves", str(tmp_path / "c.png"), str(linewalk_run),
                        str(other), str(smac)], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    name = linewalk_run.name
    assert res["seeds"] == {f"{name}/seed-0": 1024, "rerun/seed-0": 1024}  # used to be one key, "seed-0"
    assert len(res["final_smoothed"]["episode/success"]) == 2
    assert r.stderr.splitlines()[-1] == (f"note: {smac} (1 seed(s)) has none of the plotted metrics (episode/success) "
                                         f"in its metrics.csv: left out of the plot")


# --- mapf_planners.py ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, line", [
    (["--agents", "100000"], "key '--agents': invalid value 100000: agents N must be in 1..8192 (the MG-MAPF "
                             "scenario's num_agents)"),
    (["--goals", "1", "33"], "key '--goals': invalid value 33: goals per agent K must be in 1..32 (the MG-MAPF "
                             "scenario's num_goals)"),
    (["--horizon", "2000000"], "key '--horizon': invalid value 2000000: plan step limit must be in 1..1000000 (the "
                               "MG-MAPF scenario's max_steps)"),
])
def test_mapf_planners_out_of_range_flag_is_named_before_any_output(args, line, capsys):
    mod = load_benchmark("mapf_planners", "mapf_planners_fresh25")
    with pytest.raises(ConfigError) as e:
        mod.main([*args, "--maps", "random-32-32-10"])
    assert str(e.value) == line
    assert capsys.readouterr().out == ""  # no table header first


def test_mapf_planners_agents_cli_exit_2_one_line(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mapf_planners.py"), "--agents", "100000"],
                       capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == ["error: key '--agents': invalid value 100000: agents N must be in "
                                             "1..8192 (the MG-MAPF scenario's num_agents)"]
    assert "MGMAPFParams" not in r.stderr


# --- immp_compare.py -------------------------------------------------------------------------------------------------

def _immp_runs(root: Path, seeds=(0,)) -> Path:
    """`coopsim run`-like directories on one (map, N=64, K=1) cell: IMMP and decentralized PPO per training seed,
    PIBT once; 2 scen files each, all solved."""
    def mk(name, aid, ck, socs):
        write_immp_run(root, name, aid, ck, [(s, True) for s in socs])

    for t in seeds:
        mk(f"immp-{t}", "mapf/immp-v0", f"runs/t/seed-{t}/policy.pt", [110.0 + t, 120.0])
        mk(f"dppo-{t}", "mapf/dppo-v0", f"runs/d/seed-{t}/policy.pt", [150.0, 160.0])
    mk("pibt", "mapf/pibt-v0", None, [130.0, 140.0])
    return root


def test_immp_compare_one_training_seed_prints_no_nan_interval(tmp_path, capsys):
    mod = load_benchmark("immp_compare", "immp_compare_fresh25")
    mod.main([str(_immp_runs(tmp_path / "runs"))])
    out = capsys.readouterr().out
    assert "nan" not in out and "1 seeds" not in out and "1 maps" not in out
    lines = out.splitlines()
    # SoC reduction vs dppo: 1 - 115/155 = 25.8%; excess vs PIBT: 1 - 15/35 = 57.1%
    assert lines.count("    over training seeds: 25.8% (1 seed; no interval; s0: 25.8% over 1 map, lowest 25.8%)") == 2
    assert lines.count("    over training seeds: 57.1% (1 seed; no interval; s0: 57.1% over 1 map, lowest 57.1%)") == 2
    (immp,) = [ln for ln in lines if ln.startswith("mapf/immp-v0 ")]
    assert immp.endswith("    1.150 (1 seed; no interval)  s0:1.150(2/2)")


def test_immp_compare_two_training_seeds_keep_the_interval(tmp_path, capsys):
    mod = load_benchmark("immp_compare", "immp_compare_fresh25b")
    mod.main([str(_immp_runs(tmp_path / "runs", seeds=(0, 1)))])
    out = capsys.readouterr().out
    red = [1 - 115 / 155, 1 - 115.5 / 155]
    half = stats.t.ppf(0.975, 1) * np.std(red, ddof=1) / math.sqrt(2)
    assert (f"    over training seeds: {100 * np.mean(red):.1f}% ± {100 * half:.1f}% (95% CI, 2 seeds; s0: 25.8% over "
            f"1 map, lowest 25.8%  s1: 25.5% over 1 map, lowest 25.5%)") in out.splitlines()
    assert "no interval" not in out


# --- ddacom.evaluate -------------------------------------------------------------------------------------------------

def test_ddacom_evaluate_warns_when_the_anchor_gap_is_noise(tmp_path, capsys):
    """The fresh user's command (1 seed, 2 envs x 2 episodes): anchor gap 0.10 against a per-episode half-width of
    about 20; the table used to print normalized returns like 55.9 without a word."""
    from coopsim.agents.ddacom import evaluate

    evaluate.main(["--seeds", "1", "--num-envs", "2", "--episodes", "2", "--senders", "none,broadcast",
                   "--out", str(tmp_path / "e.json")])
    out = capsys.readouterr().out.splitlines()
    kw = dict(seed=0, oracle=False, num_envs=2, episodes=2)
    r0, r1 = evaluate.run("none", "ideal-v0", {}, **kw), evaluate.run("broadcast", "ideal-v0", {}, **kw)
    d = np.subtract(r1["return_per_env_episode"], r0["return_per_env_episode"])
    gap, half = r1["return"] - r0["return"], stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    assert half > 10 and abs(gap) < 1
    warning = (f"warning: the normalized return column (norm. return) is not meaningful at this size: the anchor gap "
               f"R_broadcast_ideal - R_no_comm = {gap:.2f} is not larger than 3 x its 95% CI half-width {half:.2f} "
               f"(= {3 * half:.2f}, over 4 env-episodes of 1 seed); give more --seeds, --num-envs or --episodes, at "
               f"the radius docs/comm.md reports (--radius 0.5: --seeds 5 --num-envs 8 --episodes 10 give a gap of "
               f"5.24 +- 1.61 there)")
    assert out.count(warning) == 1
    assert out.index(warning) == 1 + [ln.startswith("R_broadcast_ideal - R_no_comm = ") for ln in out].index(True)
    check = json.loads((tmp_path / "e.json").read_text())["summary"]["anchor_check"]
    assert check["meaningful"] is False and check["over"] == "env-episodes" and check["n"] == 4


def _rows(gaps, per_episode=None):
    rows = []
    for s, g in enumerate(gaps):
        rows += [{"channel_name": "ideal", "sender": "none", "seed": s, "return": -10.0, "loss": 0.0,
                  "messages_vs_broadcast": 0.0},
                 {"channel_name": "ideal", "sender": "broadcast", "seed": s, "return": -10.0 + g, "loss": 0.0,
                  "messages_vs_broadcast": 1.0}]
        if per_episode is not None:
            rows[-2]["return_per_env_episode"] = [-10.0] * len(per_episode)
            rows[-1]["return_per_env_episode"] = [-10.0 + x for x in per_episode]
    return rows


def test_ddacom_anchor_check_over_seeds_is_docs_radius_check(capsys):
    from coopsim.agents.ddacom import evaluate
    from coopsim.platform.recorder import dumps_json

    half = stats.t.ppf(0.975, 1) * np.std([1.0, 3.0], ddof=1) / math.sqrt(2)  # 12.71: gap 2 is noise
    s = evaluate.summarize(_rows([1.0, 3.0]))
    assert s["anchor_check"] == {"gap": 2.0, "half_width": pytest.approx(half), "over": "seeds", "n": 2,
                                 "meaningful": False}
    evaluate.print_table(json.loads(dumps_json(s)))  # as read back from the JSON file
    out = capsys.readouterr().out
    assert (f"is not larger than 3 x its 95% CI half-width {half:.2f} (= {3 * half:.2f}, over 2 seeds); give more "
            f"--seeds") in out
    # gap 5.2 +- 0.50 over 3 seeds: above 3 half-widths, no warning (docs/comm.md's passing check)
    s = evaluate.summarize(_rows([5.0, 5.2, 5.4]))
    assert s["anchor_check"]["meaningful"] is True
    evaluate.print_table(s)
    assert "warning" not in capsys.readouterr().out
    # one seed: its env-episodes decide (paired per-episode gaps); one value: no half-width, a warning
    assert evaluate.summarize(_rows([6.0], per_episode=[5.0, 6.0, 7.0, 6.0]))["anchor_check"]["meaningful"] is True
    one = evaluate.summarize(_rows([6.0]))
    assert one["anchor_check"]["meaningful"] is False
    evaluate.print_table(one)
    assert ("R_broadcast_ideal - R_no_comm = 6.00 has no 95% CI half-width (1 seed: a single value); give more "
            "--seeds") in capsys.readouterr().out
