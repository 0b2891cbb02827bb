"""IMMP research scripts (``benchmarks/immp_*.py``): a bad flag is one clear line naming the flag and exit code 2,
checked before any episode, rollout or training (these used to give tracebacks, silently empty tables, or fail only
after minutes of work on the settings, maps or checkpoints before the bad one)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
INT0, INT1 = "an integer >= 0 is required", "an integer >= 1 is required"


@pytest.fixture
def runs(tmp_path):
    """A folder with one run directory of each kind (``coopsim run``: config.yaml + metrics.jsonl; ``coopsim train``:
    config.yaml + seed-0/metrics.csv); contents do not matter, every check here fires before they are read."""
    run = tmp_path / "runs" / "r1"
    (run / "seed-0").mkdir(parents=True)
    (run / "config.yaml").write_text("agents: {id: mapf/immp-v0}\n")
    (run / "metrics.jsonl").write_text("")
    (run / "seed-0" / "metrics.csv").write_text("")
    return tmp_path / "runs"


def bench(tmp_path, script, *args):
    """Run ``benchmarks/<script>`` in an empty folder ``tmp_path/cwd``; 60 s is far more than the checks need."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], capture_output=True, text=True,
                       env=ENV, cwd=cwd, timeout=60)
    assert list(cwd.iterdir()) == []  # nothing written
    return r


@pytest.mark.parametrize("script, args, needle", [
    # CS-PIBT order sweep: settings parsed and checked against the agent's params, all before the first episode
    ("immp_cs_pibt_sweep.py", ["sorted", "sampled:x"],
     "argument settings: invalid value 'sampled:x': unknown setting 'sampled:x': give sorted, sampled[:T] or "
     "adaptive:P:F[:T]"),
    ("immp_cs_pibt_sweep.py", ["sorted", "adaptive:16"], "argument settings: invalid value 'adaptive:16'"),
    ("immp_cs_pibt_sweep.py", ["sorted", "adaptive:0:sorted"],
     "error: key 'settings': setting 'adaptive:0:sorted': key 'cs_patience': invalid value 0"),
    ("immp_cs_pibt_sweep.py", ["sorted", "sampled:0"], "error: key 'settings': setting 'sampled:0': key 'cs_temperature'"),
    ("immp_cs_pibt_sweep.py", ["sorted", "--instances", "0"], f"argument --instances: invalid value '0': {INT1}"),
    ("immp_cs_pibt_sweep.py", ["sorted", "--first-seed", "-1"], f"argument --first-seed: invalid value '-1': {INT0}"),
    ("immp_cs_pibt_sweep.py", ["sorted", "--checkpoint", "nope.pt"],
     "error: key '--checkpoint': checkpoint 'nope.pt' not found: give 'shipped'"),
    ("immp_cs_pibt_sweep.py", ["sorted", "--agent", "mapf/nope"], "error: key '--agent': unknown agent id 'mapf/nope'"),
    ("immp_cs_pibt_sweep.py", ["sorted", "--agent", "mapf/pibt-v0"],
     "error: key '--agent': key 'checkpoint': unknown parameter"),
    # the second map (room-32-32-4) has fewer scen rows than the first: refused before the first map's episodes
    ("immp_cs_pibt_sweep.py", ["sorted", "--agents", "400"],
     "error: key '--agents': map room-32-32-4: num_agents=400 exceeds the 341 rows"),
    ("immp_highlevel_sweep.py", ["--agents", "400"], "error: key '--agents': map room-32-32-4: num_agents=400 exceeds"),
    ("immp_highlevel_sweep.py", ["--goals", "33"], "error: key '--goals': map random-32-32-10: invalid value 33"),
    # intent accuracy: every map, checkpoint and parameter before the first policy's episodes
    ("immp_intent_accuracy.py", ["--goals", "0"], f"argument --goals: invalid value '0': {INT1}"),
    ("immp_intent_accuracy.py", ["--seed0", "-1"], f"argument --seed0: invalid value '-1': {INT0}"),
    ("immp_intent_accuracy.py", ["--map", "random-32-32-10", "nope"], "error: key '--map': map nope: invalid value 'nope'"),
    ("immp_intent_accuracy.py", ["--agents", "400", "--map", "random-32-32-10", "room-32-32-4"],
     "error: key '--agents': map room-32-32-4: num_agents=400 exceeds"),
    ("immp_intent_accuracy.py", ["--checkpoint", "shipped", "nope.pt"], "error: key '--checkpoint': checkpoint 'nope.pt'"),
    ("immp_intent_accuracy.py", ["--intent-adapt-lr", "-1"], "error: key '--intent-adapt-lr': invalid value -1.0"),
    # intent fine-tuning: --out through _peer_venv.check_writable (root passes os.access on /proc), before training
    ("immp_intent_finetune.py", ["--out", "/proc/x.pt"], "error: key '--out': cannot write /proc/x.pt"),
    ("immp_intent_finetune.py", ["--out", "/tmp"], "error: key '--out': /tmp is a folder; give the file to write"),
    ("immp_intent_finetune.py", ["--out", "x.pt", "--lr", "0"], "argument --lr: invalid value '0': a number > 0"),
    ("immp_intent_finetune.py", ["--out", "x.pt", "--seed", "-1"], f"argument --seed: invalid value '-1': {INT0}"),
    ("immp_intent_finetune.py", ["--out", "x.pt", "--checkpoint", "nope.pt"],
     "error: key '--checkpoint': checkpoint 'nope.pt' not found"),
])
def test_bad_flag_is_one_line_and_exit_2(tmp_path, script, args, needle):
    r = bench(tmp_path, script, *args)
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    assert needle in r.stderr.strip().splitlines()[-1], r.stderr  # one line says it (argparse puts usage above)
    assert r.stdout == ""  # no header, no episode


@pytest.mark.parametrize("script, args, needle", [
    ("immp_compare.py", ["{runs}", "missing"], "argument roots: missing is not a folder"),
    ("immp_compare.py", ["{runs}/r1/seed-0"], "argument roots: no metrics.jsonl under"),
    ("immp_compare.py", ["{runs}", "--out", "/proc/x"], "error: key '--out': cannot write /proc/x"),
    ("immp_compare.py", ["{runs}", "--out", "{runs}/r1/config.yaml"], "error: key '--out': cannot write"),
    ("immp_learning_curve.py", ["{runs}", "--bin", "0"], f"argument --bin: invalid value '0': {INT1}"),
    ("immp_learning_curve.py", ["{runs}", "missing"], "argument roots: missing is not a folder"),
    ("immp_learning_curve.py", ["{runs}/r1/seed-0/metrics.csv"], "argument roots: "),
])
def test_bad_roots_or_out_is_one_line_and_exit_2(tmp_path, runs, script, args, needle):
    """A mistyped run folder used to print an empty table with exit code 0; an unwritable --out was found only after
    the tables (a traceback); --bin 0 divided by zero."""
    args = [x.format(runs=runs) for x in args]
    r = bench(tmp_path, script, *args)
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    assert needle.format(runs=runs) in r.stderr.strip().splitlines()[-1], r.stderr
    assert r.stdout == ""


def test_run_directory_without_config_is_one_line(tmp_path, runs):
    (runs / "r1" / "config.yaml").unlink()
    for script, what in (("immp_compare.py", "metrics.jsonl has no config.yaml beside it"),
                         ("immp_learning_curve.py", "metrics.csv has no config.yaml two folders up")):
        r = subprocess.run([sys.executable, str(BENCH / script), str(runs)], capture_output=True, text=True, env=ENV,
                           timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert r.stderr.strip().splitlines()[-1].startswith("error: key 'roots': ") and what in r.stderr


def test_cs_pibt_settings_parse():
    """The settings that the sweep accepts map to the agent params as before."""
    mod = load_benchmark("immp_cs_pibt_sweep", "immp_cs_pibt_sweep_flags")
    assert mod.params_of("sorted") == {"cs_pibt": True, "cs_order": "sorted"}
    assert mod.params_of("sampled") == {"cs_pibt": True, "cs_order": "sampled", "cs_temperature": 1.0}
    assert mod.params_of("sampled:3") == {"cs_pibt": True, "cs_order": "sampled", "cs_temperature": 3.0}
    assert mod.params_of("adaptive:16:sorted:3") == {"cs_pibt": True, "cs_order": "adaptive", "cs_patience": 16,
                                                     "cs_finished": "sorted", "cs_temperature": 3.0}
    for bad in ("sorted:1", "sampled:1:2", "adaptive:16", "adaptive:16:nope", "adaptive:x:sorted", "nope", ""):
        with pytest.raises(ValueError, match="unknown setting"):
            mod.params_of(bad)
