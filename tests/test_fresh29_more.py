"""Fresh-user pass 29, second batch (2026-12-06): coop_game teams beyond ~100 agents no longer overflow the joint
table size (1), graph-safe ``joint_limit`` is bounded and the joint planner's memory checked up front (2),
``planner: joint`` on a large instance names the file, the ``planner`` key and ``planner: auto``/``factored`` (4),
and an MG-MAPF episode's replay memory (max_steps x num_agents) is checked at validate time (5)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coopsim.errors import ConfigError
from coopsim.platform import registry as reg

ROOT = Path(__file__).resolve().parents[1]
GRID32 = "configs/safety/coop-grid32x32-64ag.yaml"
GRID16 = "configs/safety/coop-grid16x16-16ag.yaml"
MAPF = "configs/mapf/random-32-32-10.yaml"


from cli_helpers import _err, run_cli  # noqa: E402  (tests/ is on sys.path under pytest)


@pytest.fixture
def two_gib(monkeypatch):
    from coopsim.platform import memory

    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 2 * 2**30)  # limit: 1 GiB


# --- 1. the joint table size V^N A^N beyond the float range ----------------------------------------------------------

def test_joint_table_size_is_inf_beyond_the_float_range_and_unchanged_below():
    from coopsim.scenarios.coop_game.solver import joint_table_size, table_size_text

    for V, A, N in ((16, 5, 2), (25, 5, 3), (256, 5, 16), (1024, 5, 64), (1024, 5, 102)):
        assert joint_table_size(V, A, N) == float(V) ** N * float(A) ** N  # the same number as before
    assert joint_table_size(1024, 5, 103) == math.inf  # float(1024) ** 103 raised OverflowError
    assert joint_table_size(100_000, 5, 1000) == math.inf
    assert table_size_text(256, 5, 16) == "5.19e+49"
    assert table_size_text(1024, 5, 128) == "6.12e+474"  # from the logarithm
    assert table_size_text(10, 1, 400) == "1e+400"


def test_exact_solver_refuses_a_table_beyond_the_float_range_with_its_size():
    from coopsim.scenarios.coop_game.solver import check_size

    with pytest.raises(ConfigError) as err:
        check_size(1024, 5, 128)
    assert str(err.value) == ("key 'num_agents': exact solver: 1024^128 joint states x 5^128 joint actions = 6.12e+474 "
                              "entries exceeds the limit 4e+06; use a smaller instance")


def test_coop_game_128_agents_builds_picks_the_factored_planner_and_has_no_v_star():
    sc = reg.make_scenario("coop_game/Grid32x32-v0", num_envs=1, num_agents=128, max_steps=3,
                           constraints=["separation", "resource"], start_spacing=2.0)
    agent = reg.make_component("agent", "graph_safe-v0", sc)
    assert agent.mode == "factored"
    sc.reset(seed=0)
    assert sc.optimal_return() is None  # V* is skipped, as for any V^N A^N > 4e6


def test_coop_game_128_agents_validates_and_runs_an_episode(tmp_path):
    over = ["scenario.params.num_agents=128", "seeds=[0]", "episodes=1", "max_steps=3"]
    r = run_cli("validate", GRID32, *over)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "is valid" in r.stdout
    r = run_cli("run", GRID32, *over, f"out_dir={tmp_path}", "--no-progress")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    (run_dir,) = tmp_path.iterdir()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1
    m = json.loads(lines[0])
    assert m["steps"] == 3 and m["violations"] == 0
    assert "optimal_return" not in m and "regret" not in m


# --- 2. joint_limit has an upper bound; the joint planner's memory is checked when it is built ----------------------

def test_joint_limit_above_1e8_is_refused_with_what_is_valid_and_why():
    r = run_cli("validate", GRID16, "agents.params.joint_limit=1e60")
    assert _err(r) == (
        f"error: command-line override 'agents.params.joint_limit=1e60' (config {GRID16}): key "
        "'agents.params.joint_limit': invalid value 1e+60: Input should be less than or equal to 100000000 (largest "
        "V^N * A^N table the joint planner builds (entries), in (0, 1e8]: the planner keeps several float64 tables "
        "of that size (about 4.5 GiB at 1e8); larger instances need planner: auto or factored)")


def test_joint_limit_1e8_is_valid_and_auto_stays_factored_on_a_large_instance():
    from coopsim.agents.graph_safe.agent import GraphSafeParams

    assert GraphSafeParams(joint_limit=1e8).joint_limit == 1e8
    sc = reg.make_scenario("coop_game/Grid16x16-v0", num_envs=1, num_agents=16)
    assert reg.make_component("agent", "graph_safe-v0", sc, joint_limit=1e8).mode == "factored"


def test_joint_planner_that_does_not_fit_the_memory_is_refused_when_built(two_gib):
    # 4 agents on 4x4: 16^4 x 5^4 = 4.1e7 entries <= joint_limit 1e8, so auto picks the joint planner: 1.8 GiB
    sc = reg.make_scenario("coop_game/Grid4x4-v0", num_envs=1, num_agents=4)
    with pytest.raises(ConfigError) as err:
        reg.make_component("agent", "graph_safe-v0", sc, joint_limit=1e8)
    assert err.value.key == "agents.params.joint_limit" and err.value.also == ("agents.params.planner",)
    assert str(err.value) == (
        "key 'agents.params.joint_limit': invalid value 100000000.0 (planner: auto): the joint planner's tables need "
        "1.8 GiB (16^4 joint states x 5^4 joint actions = 4.1e+07 entries x 48 bytes), more than 50% of the available "
        "memory (1.0 GiB of 2.0 GiB); lower agents.params.joint_limit below 4.1e+07 so that planner: auto picks the "
        "factored planner, or use planner: factored")
    with pytest.raises(ConfigError) as err:
        reg.make_component("agent", "graph_safe-v0", sc, joint_limit=1e8, planner="joint")
    assert err.value.key == "agents.params.planner"
    assert str(err.value).startswith("key 'agents.params.planner': invalid value 'joint' (planner: joint): the joint "
                                     "planner's tables need 1.8 GiB")
    # the default joint_limit (4e6) leaves this instance to the factored planner: nothing to refuse
    assert reg.make_component("agent", "graph_safe-v0", sc).mode == "factored"


# --- 4. planner: joint on a large instance ---------------------------------------------------------------------------

def test_planner_joint_above_joint_limit_but_within_its_bound_says_joint_limit_may_be_raised():
    # 3 agents on 4x4: 16^3 x 5^3 = 512,000 entries; joint_limit 1e5 refuses it, and up to 1e8 it may be raised
    sc = reg.make_scenario("coop_game/Grid4x4-v0", num_envs=1, num_agents=3)
    with pytest.raises(ConfigError) as err:
        reg.make_component("agent", "graph_safe-v0", sc, joint_limit=1e5, planner="joint")
    assert err.value.key == "agents.params.planner" and err.value.also == ("agents.params.joint_limit",)
    assert str(err.value).endswith(
        "16^3 joint states x 5^3 joint actions = 5.12e+05 entries, more than agents.params.joint_limit=1e+05; raise "
        "agents.params.joint_limit to at least 5.12e+05 (at most 1e+08; the memory is checked next), or use planner: "
        "auto (the joint planner where its table fits joint_limit, the factored planner otherwise) or planner: "
        "factored (any number of agents)")
    assert reg.make_component("agent", "graph_safe-v0", sc, joint_limit=512_000, planner="joint").mode == "joint"


def test_planner_joint_on_a_large_instance_names_the_override_the_planner_key_and_auto_or_factored():
    r = run_cli("validate", GRID16, "agents.params.planner=joint")
    assert _err(r) == (
        f"error: command-line override 'agents.params.planner=joint' (config {GRID16}): key 'agents.params.planner': "
        "invalid value 'joint': the joint planner needs a V^N * A^N table of 256^16 joint states x 5^16 joint actions "
        "= 5.19e+49 entries, more than agents.params.joint_limit=4e+06; use planner: auto (the joint planner where "
        "its table fits joint_limit, the factored planner otherwise) or planner: factored (any number of agents)")


def test_planner_joint_in_the_file_names_the_file(tmp_path):
    text = (ROOT / GRID16).read_text().replace("params: {delta: 0.01, p_min: 0.05, num_runs: 360}\nshield",
                                               "params: {delta: 0.01, p_min: 0.05, num_runs: 360, planner: joint}\n"
                                               "shield", 1)
    assert "planner: joint" in text
    cfg = tmp_path / "joint.yaml"
    cfg.write_text(text)
    msg = _err(run_cli("validate", str(cfg)))
    assert msg.startswith(f"error: {cfg}: key 'agents.params.planner': invalid value 'joint': the joint planner "
                          "needs a V^N * A^N table of 256^16 joint states")
    assert msg.endswith("use planner: auto (the joint planner where its table fits joint_limit, the factored planner "
                        "otherwise) or planner: factored (any number of agents)")
    # a joint_limit raised on the command line that still does not fit is blamed on that override
    msg = _err(run_cli("validate", str(cfg), "agents.params.joint_limit=1e8"))
    assert msg.startswith(f"error: command-line override 'agents.params.joint_limit=1e8' (config {cfg}): key "
                          "'agents.params.planner': invalid value 'joint'")
    assert "more than agents.params.joint_limit=1e+08" in msg


# --- 5. MG-MAPF: the replay of a long episode of many agents is checked up front ------------------------------------

def test_mapf_replay_memory_check_names_max_steps_num_agents_and_what_fits(two_gib):
    from coopsim.scenarios.mapf.metrics import check_replay_memory, replay_bytes_per_step_agent

    assert replay_bytes_per_step_agent(1) == 20 and replay_bytes_per_step_agent(8) == 64
    check_replay_memory(1_000_000, 10)  # 191 MiB: below the 256 MiB that is never refused
    with pytest.raises(ConfigError) as err:
        check_replay_memory(1_000_000, 100)
    assert err.value.key == "max_steps" and err.value.also == ("num_agents",)
    assert str(err.value) == (
        "key 'max_steps': invalid value 1000000 (with scenario.params.num_agents 100): the episode replay needs "
        "1.9 GiB (1000001 steps x 100 agents, 20 bytes per agent-step: the recorded positions and the replay file "
        "written at the episode's end), more than 50% of the available memory (1.0 GiB of 2.0 GiB); what fits: "
        "max_steps <= 536869 at num_agents 100, or num_agents <= 53 at max_steps 1000000 (max_steps is the top-level "
        "max_steps or scenario.params.max_steps)")


def test_mapf_scenario_refuses_its_replay_when_built(two_gib):
    params = dict(map="random", random_size=[64, 64], num_agents=100, num_goals=1, max_steps=1_000_000)
    with pytest.raises(ConfigError) as err:
        reg.make_scenario("mapf/MGMAPF-v0", num_envs=1, **params)
    assert "the episode replay needs 1.9 GiB" in str(err.value)
    sc = reg.make_scenario("mapf/MGMAPF-v0", num_envs=1, **{**params, "max_steps": 1000})  # fits
    sc.close()


def test_mapf_validate_refuses_a_replay_larger_than_the_memory_under_ulimit():
    import resource

    def limit():  # 3 GB of address space: the 1000-agent, 1e6-step replay (18.6 GiB) cannot fit
        resource.setrlimit(resource.RLIMIT_AS, (3 * 10**9, resource.getrlimit(resource.RLIMIT_AS)[1]))

    args = ["validate", MAPF, "scenario.params.map=random", "scenario.params.random_size=[256,256]",
            "scenario.params.num_agents=1000", "scenario.params.num_goals=1", "max_steps=1000000",
            "agents.id=mapf/greedy-v0", "agents.params={}", "seeds=[0]"]
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "COLUMNS": "400", "OMP_NUM_THREADS": "1"}, preexec_fn=limit)
    msg = _err(r)
    assert msg.startswith(f"error: command-line override 'max_steps=1000000' (config {MAPF}): key 'max_steps' (passed "
                          "on to scenario.params.max_steps): invalid value 1000000 (with scenario.params.num_agents "
                          "1000): the episode replay needs 18.6 GiB (1000001 steps x 1000 agents, 20 bytes per "
                          "agent-step")
    assert "what fits: max_steps <= " in msg and "num_agents <= " in msg


def test_mapf_replay_positions_are_unchanged_by_the_int32_computation():
    sc = reg.make_scenario("mapf/MGMAPF-v0", num_envs=1, map="random", random_size=[16, 16], num_agents=6,
                           num_goals=2, max_steps=20)
    sc.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(12):
        sc.step(rng.integers(0, 5, size=(1, 6)))
    rep = sc.replay(0)
    fl = sc._traj[:13, 0].astype(np.int64)
    expected = np.stack([fl % sc._Wc - sc._R, fl // sc._Wc - sc._R], axis=-1).astype(np.int32)
    assert rep["positions"].dtype == np.int32 and rep["positions"].shape == (13, 6, 2)
    np.testing.assert_array_equal(rep["positions"], expected)
    sc.close()


# --- 13. docs/smac.md: a full win returns 20 up to float32 rounding --------------------------------------------------

def test_smac_doc_says_20_up_to_float32_rounding_not_exactly():
    text = " ".join((ROOT / "docs" / "smac.md").read_text().split())
    assert "a full win returns exactly 20" not in text
    assert "a full win returns 20 up to float32 rounding of the per-step rewards" in text


# --- 14. a failed checkpoint write in `coopsim train` says what was kept and how to continue ------------------------

def test_train_write_failure_names_the_kept_checkpoint_and_the_resume_command(tmp_path, monkeypatch):
    import errno

    from typer.testing import CliRunner

    from coopsim.cli import app
    from coopsim.platform import trainer as tr
    from coopsim.platform.recorder import WriteError

    real, calls = tr.atomic_save, []

    def failing(obj, path):  # the first checkpoint (0 env steps) is written, the periodic one meets a full disk
        calls.append(path)
        if len(calls) == 2:
            raise WriteError.of(OSError(errno.ENOSPC, "No space left on device"), path)
        return real(obj, path)

    monkeypatch.setattr(tr, "atomic_save", failing)
    cfg = "configs/safety/coop-grid4x4-2ag-all.yaml"
    over = ["seeds=[0]", "train.total_env_steps=200", "train.checkpoint_every=50", f"out_dir={tmp_path}"]
    res = CliRunner().invoke(app, ["train", cfg, *over], env={"COLUMNS": "400"})
    assert res.exit_code == 2, res.output
    (run_dir,) = tmp_path.iterdir()
    ck = run_dir / "seed-0" / "checkpoint.pt"
    out = " ".join(res.output.split())
    assert (f"error: cannot write {ck}: No space left on device; free some space on that device, or write elsewhere; "
            f"kept seed 0: checkpoint at 0 of 200 env steps ({ck}); once it can be written, continue with: ") in out
    assert out.rstrip().endswith(f"train {cfg} 'seeds=[0]' train.total_env_steps=200 train.checkpoint_every=50 "
                                 f"out_dir={tmp_path} --resume {run_dir}")
    assert ck.is_file()  # the earlier checkpoint is whole


# --- 16. `coopsim run --help`: --checkpoint takes a seed directory too -----------------------------------------------

def test_run_help_says_checkpoint_takes_a_seed_directory():
    r = run_cli("run", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.replace("│", " ").split())
    assert ("load agent parameters from policy.pt / checkpoint.pt written by `coopsim train`, or a training run's "
            "seed-<s> directory") in text


# --- 17. an interrupt before the first episode finished says nothing was kept, and draws no plot ---------------------

def test_interrupt_in_the_first_episode_says_no_episode_is_kept_and_warns_of_no_plot(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from coopsim.cli import app
    from coopsim.platform import runner

    real = runner.run_episode

    def interrupted(parts, seed, **kwargs):  # Ctrl-C while the first episode runs (after its first step)
        real(parts, seed, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_episode", interrupted)
    monkeypatch.setattr("coopsim.cli._ignore_further_interrupts", lambda: None)  # keep pytest's own SIGINT handler
    res = CliRunner().invoke(app, ["run", "configs/safety/coop-grid4x4-2ag-all.yaml", "seeds=[0]", "episodes=1",
                                   f"out_dir={tmp_path}", "--no-progress"], env={"COLUMNS": "400"})
    assert res.exit_code == 130, res.output
    (run_dir,) = tmp_path.iterdir()
    out = " ".join(res.output.split())
    assert (f"interrupted before the first episode finished: no episode is kept ({run_dir} holds the config and a "
            "summary saying so; a run keeps whole episodes only)") in out
    assert "finished episodes and a valid summary are kept" not in out
    assert "was not drawn" not in out
    assert not (run_dir / "plot_error.txt").exists() and not (run_dir / "metrics.png").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["interrupted"] is True


# --- 15. Ctrl-C while `coopsim report` renders the GIF says what was not written -----------------------------------

def test_report_interrupted_while_rendering_the_gif_says_the_gif_was_not_written(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from coopsim.cli import app
    from coopsim.platform import report

    r = run_cli("run", "configs/safety/coop-grid4x4-2ag-all.yaml", "seeds=[0]", "episodes=1", "max_steps=3",
                f"out_dir={tmp_path}", "--no-progress")
    assert r.returncode == 0, r.stderr
    (run_dir,) = tmp_path.iterdir()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "render_replays", interrupted)
    monkeypatch.setattr("coopsim.cli._ignore_further_interrupts", lambda: None)  # keep pytest's own SIGINT handler
    res = CliRunner().invoke(app, ["report", str(run_dir)], env={"COLUMNS": "400"})
    assert res.exit_code == 130, res.output
    out = " ".join(res.output.split())
    assert "plot: " in out  # the table and the plot came first
    assert out.endswith("interrupted: replay GIF not written (no partial file is left; the table and plot above are "
                        "kept; --no-gif skips the GIF)")


def test_a_long_episode_shows_its_step_count_in_the_progress_lines(tmp_path, monkeypatch):
    import io

    from coopsim.platform import runner
    from coopsim.platform.config import load_config
    from coopsim.platform.progress import LineProgress

    out = io.StringIO()
    monkeypatch.setattr(runner, "STEP_PROGRESS_AFTER_S", 0.0)  # at once (5 s in a real run)
    monkeypatch.setattr(runner, "_progress", lambda enabled: LineProgress(unit="episodes", every_s=0.0, file=out))
    cfg = load_config(ROOT / "configs/safety/coop-grid4x4-2ag-all.yaml",
                      ["agents.id=random-v0", "agents.params={}", "seeds=[0]", "episodes=1", "max_steps=2100",
                       f"out_dir={tmp_path}"])
    runner.run_config(cfg, progress=True)
    lines = out.getvalue().splitlines()
    assert any(ln.startswith("coop-grid4x4-2ag-all  episode 1 of 1: step 1,024 of at most 2,100: 0/1 episodes (0%), ")
               for ln in lines), lines
    assert any("episode 1 of 1: step 2,048 of at most 2,100: 0/1 episodes" in ln for ln in lines), lines
    assert lines[-1].startswith("coop-grid4x4-2ag-all  last episode: ") and ": 1/1 episodes (100%)" in lines[-1]
