"""Fresh-user pass 24 (2026-12-06): relative file params in nested models, memory-limit hints, sweep name length,
the report of a time-to-win run, MPE metric bounds, validate's train: warning, step() before reset(), and MG-MAPF's
weaker lower bound at num_goals > 10 (the docs/smac.md snippet runs in tests/platform/test_readme.py)."""
from __future__ import annotations

import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from coopsim.errors import ConfigError
from coopsim.platform.config import check_buildable, dump_config, load_config

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"})


# --- 1. a relative CSV trace path / IMMP checkpoint: found beside the config, stored absolute ----------------------

def test_a_relative_csv_trace_path_is_found_beside_the_config_and_stored_absolute(tmp_path, monkeypatch):
    d = tmp_path / "rel cfg"
    d.mkdir()
    (d / "trace.csv").write_text("time_s,rate\n0,1000000\n1,500000\n")
    (d / "bw.yaml").write_text(
        "name: bwcsv\nscenario: {id: mpe/simple_spread-v0, params: {num_agents: 3}}\nagents: {id: random-v0}\n"
        "channel: {id: bandwidth-v0, params: {trace: {kind: csv, path: trace.csv}, queue_packets: 16}}\n"
        "seeds: [0]\nepisodes: 1\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(d / "bw.yaml")
    check_buildable(cfg, file=str(d / "bw.yaml"))  # the channel built, its CSV read: failed from another folder
    absolute = str((d / "trace.csv").resolve())
    assert cfg.channel.params["trace"] == {"kind": "csv", "path": absolute}
    assert yaml.safe_load(dump_config(cfg))["channel"]["params"]["trace"]["path"] == absolute
    # another kind of trace has no path to resolve; a missing file is left for the trace's own error
    other = load_config(d / "bw.yaml", ["channel.params.trace={kind: constant, rate: 5}"])
    assert other.channel.params["trace"] == {"kind": "constant", "rate": 5}
    with pytest.raises(ConfigError, match=r"capacity trace file not found: nope\.csv \(a relative path in a run config "
                                          r"is looked for in the working directory .*, then beside the config\)"):
        check_buildable(load_config(d / "bw.yaml", ["channel.params.trace.path=nope.csv"]))


def test_a_relative_immp_checkpoint_is_found_beside_the_config_and_stored_absolute(tmp_path, monkeypatch):
    d = tmp_path / "cfgdir"
    (d / "seed-0").mkdir(parents=True)
    (d / "pol.pt").write_bytes(b"x")
    (d / "immp.yaml").write_text(
        "name: immprel\nscenario: {id: mapf/MGMAPF-v0, params: {num_agents: 4, num_goals: 2}}\n"
        "agents: {id: mapf/immp-v0, params: {checkpoint: pol.pt}}\nseeds: [0]\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(d / "immp.yaml", check_components=False)
    assert cfg.agents.params["checkpoint"] == str((d / "pol.pt").resolve())
    # a training run's seed directory is a checkpoint too; the shipped names stay names
    cfg = load_config(d / "immp.yaml", ["agents.params.checkpoint=seed-0"], check_components=False)
    assert cfg.agents.params["checkpoint"] == str((d / "seed-0").resolve())
    cfg = load_config(d / "immp.yaml", ["agents.params.checkpoint=shipped"], check_components=False)
    assert cfg.agents.params["checkpoint"] == "shipped"


# --- 2. memory-limit errors suggest only values that are allowed -------------------------------------------------

@pytest.fixture
def two_gib(monkeypatch):
    from coopsim.platform import memory

    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 2 * 2**30)  # limit: 1 GiB


def test_ppo_memory_error_leaves_out_an_alternative_below_1(two_gib):
    from coopsim.agents.ppo.trainer import check_rollout_memory

    with pytest.raises(ConfigError) as err:  # one env's rollout_steps alone fit, num_envs x 1 step does not
        check_rollout_memory(65536, 32, 3, 10_000)
    msg = str(err.value)
    assert "what fits: train.num_envs <= 1118 at rollout_steps 32" in msg and "rollout_steps <= 0" not in msg
    with pytest.raises(ConfigError) as err:  # neither alone: the product that fits
        check_rollout_memory(65536, 100_000, 3, 10_000)
    msg = str(err.value)
    assert msg.endswith("what fits: lower both, to num_envs x rollout_steps <= 35791") and "<= 0" not in msg
    with pytest.raises(ConfigError) as err:  # one agent-step of one env is more than the limit
        check_rollout_memory(2, 2, 1, 2**31)
    assert str(err.value).endswith("nothing fits at any num_envs or rollout_steps: one step of one env needs 2.0 GiB")


def test_qmix_memory_error_says_nothing_fits_instead_of_0(two_gib):
    from coopsim.agents.qmix.trainer import check_buffer_memory

    with pytest.raises(ConfigError) as err:
        check_buffer_memory(10, 100_000, 10, 1000, 1000, 10)
    msg = str(err.value)
    assert "buffer_episodes <= 0" not in msg
    assert "nothing fits at any train.buffer_episodes: one episode of 100000 steps needs" in msg
    with pytest.raises(ConfigError, match=r"what fits: train\.buffer_episodes <= \d+$"):
        check_buffer_memory(1_000_000, 100, 3, 100, 20, 5)


# --- 3. sweep: a name too long once the grid values are appended -------------------------------------------------

def test_sweep_says_how_long_the_base_name_may_be():
    name = "a" * 150  # valid for run / train
    r = run_cli("sweep", "configs/mapf/random-32-32-10.yaml", f"name={name}", "--grid",
                "agents.id=mapf/prioritized-v0,mapf/pibt-v0", "seeds=[0]")
    err = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert (f"command-line override 'name={name}' (config configs/mapf/random-32-32-10.yaml): key 'name': sweep names "
            "each run <name>-<grid values>, here up to 170 bytes, and a run name may be at most 150 bytes: give a name "
            "of at most 130 bytes (this one is 150)") in err
    assert "prioritized-v0' (config" not in err  # not the made-up override name=<name>-<grid values>


# --- 4. report: a run of benchmarks/smac_time_to_win.py ----------------------------------------------------------

def test_report_names_a_time_to_win_run_and_its_results(tmp_path):
    from coopsim.platform.report import training_run_message

    run = tmp_path / "smac-3m-mappo-ttw-x"
    (run / "seed-0").mkdir(parents=True)
    (run / "seed-0" / "metrics.csv").write_text("iteration,env_steps\n1,100\n")
    assert "(written by coopsim train)" in training_run_message(run)
    (run / "time_to_win.json").write_text("{}")
    msg = training_run_message(run)
    assert "written by benchmarks/smac_time_to_win.py; its greedy win-rate evaluations are in " \
           f"{run / 'time_to_win.json'}" in msg
    assert "coopsim train" not in msg and "eval" in msg


# --- 5. MPE counts and rewards keep their CIs in range -----------------------------------------------------------

def test_mpe_metric_intervals_stay_in_their_range():
    from coopsim.platform.stats import metric_bounds, summarize

    assert metric_bounds("mpe/occupied_landmarks", [0.0, 3.0]) == (0.0, math.inf)
    assert metric_bounds("mpe/final_cover_dist_m", [0.5, 1.0]) == (0.0, math.inf)
    for m in ("reward/collision", "reward/global", "reward/distance", "mpe/return"):
        assert metric_bounds(m, [-2.0, 0.0]) == (-math.inf, 0.0)
    assert metric_bounds("reward/collision", [-1.0, 0.5]) is None  # not the MPE term: unclipped
    rows = [{"seed": 0, "mpe/occupied_landmarks": 0.0, "reward/collision": -1.0},
            {"seed": 0, "mpe/occupied_landmarks": 0.0, "reward/collision": 0.0},
            {"seed": 1, "mpe/occupied_landmarks": 3.0, "reward/collision": 0.0},
            {"seed": 1, "mpe/occupied_landmarks": 4.0, "reward/collision": 0.0}]
    s = summarize(rows)  # before: [-15.9, 19.4] and [-3.4, 2.9]
    assert s["mpe/occupied_landmarks"]["ci95_low"] == 0.0 and s["mpe/occupied_landmarks"]["ci95_high"] > 3.5
    assert s["reward/collision"]["ci95_high"] == 0.0 and s["reward/collision"]["ci95_low"] < -0.5


# --- 7. validate warns, as run does, that a non-learner's train: section is ignored -----------------------------

def test_validate_warns_that_the_train_section_of_a_non_learner_is_ignored(tmp_path):
    cfg = tmp_path / "tr.yaml"
    cfg.write_text("name: t\nscenario: {id: mapf/MGMAPF-v0, params: {num_agents: 4, num_goals: 1}}\n"
                   "agents: {id: mapf/pibt-v0}\nseeds: [0]\nepisodes: 1\ntrain: {total_env_steps: 100, lr: -1}\n")
    r = run_cli("validate", str(cfg))
    err = " ".join(r.stderr.split())
    assert r.returncode == 0, r.stderr
    assert err.startswith("warning: agent 'mapf/pibt-v0' cannot be trained, so `coopsim run` ignores "
                          "train.total_env_steps, train.lr (the train: section is read by `coopsim train`"), err
    assert err.endswith("`coopsim validate` does not check its values"), err


# --- 8. a batched core's step() before reset() -------------------------------------------------------------------

@pytest.mark.parametrize("sid, params", [
    ("mpe/simple_spread-v0", {}),
    ("mapf/MGMAPF-v0", {"num_agents": 4, "num_goals": 1}),
    ("coop_game/Grid4x4-v0", {}),
    ("line/LineWalk-v0", {}),
    ("smac/3m-v0", {}),
])
def test_step_before_reset_raises_as_the_pettingzoo_view_does(sid, params):
    from coopsim.platform.registry import make_scenario

    core = make_scenario(sid, num_envs=2, **params)
    noop = np.zeros((2, core.num_agents), np.int64)
    with pytest.raises(RuntimeError, match=r"^step\(\) before reset\(\): call reset\(seed=\.\.\.\) first$"):
        core.step(noop)
    core.reset(seed=0)
    core.step(noop)  # fine after a reset
    copy = pickle.loads(pickle.dumps(core))  # a training checkpoint's core steps on after a resume
    copy.step(noop)
    del copy.__dict__["_never_reset"]  # ... also one pickled before the check existed
    copy.step(noop)


# --- 9. MG-MAPF: soc_over_lb against the weaker bound at num_goals > 10 -----------------------------------------

def test_a_run_with_more_than_10_free_order_goals_warns_of_the_weaker_bound():
    from coopsim.platform.runner import scenario_params_warning

    f = "configs/mapf/random-32-32-10.yaml"
    w = scenario_params_warning(load_config(f, ["scenario.params.num_goals=11"]))
    assert w.startswith("scenario.params.num_goals 11 > 10 with goal_order 'free': lb is a weaker lower bound")
    assert "soc_over_lb" in w
    assert scenario_params_warning(load_config(f, ["scenario.params.num_goals=10"])) is None
    assert scenario_params_warning(load_config(f, ["scenario.params.num_goals=11",
                                                   "scenario.params.goal_order=fixed"])) is None  # exact: fixed order
    assert scenario_params_warning(load_config("configs/ppo/linewalk-mappo.yaml")) is None  # no such check
    r = run_cli("validate", f, "scenario.params.num_goals=11", "scenario.params.num_agents=8")  # as run prints it
    assert r.returncode == 0 and " ".join(r.stderr.split()).startswith("warning: scenario.params.num_goals 11 > 10 "
                                                                       "with goal_order 'free'"), r.stderr


def test_a_metrics_row_without_a_seed_is_named_not_a_key_error(tmp_path):
    """report.read_metrics left a row without ``seed`` to a KeyError (found in the session-24 review)."""
    from coopsim.platform.report import read_metrics

    p = tmp_path / "metrics.jsonl"
    p.write_text('{"a": 1}\n{"seed": 1, "a": 2}\n')
    rows, bad = read_metrics(p)
    assert rows == [{"seed": 1, "a": 2}] and bad == [(1, "'seed' is 'missing', not an integer")]
