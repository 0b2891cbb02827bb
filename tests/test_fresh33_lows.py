"""fresh33 leftovers: old graph-safe policy files in another world, the tabular learners' world record, passthrough's
action check, sweep --skip-done's replays note, count_violations' shape check, SMACCore's map_name error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from coopsim.errors import ConfigError
from coopsim.platform import registry
from cli_helpers import run_cli  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"
ALL = ["separation", "resource", "connectivity"]


def _scenario(**params):
    return registry.make_scenario("coop_game/Grid4x4-v0", num_envs=1, **{"num_agents": 2, "constraints": ALL, **params})


def _graph_safe(scenario: dict | None = None, **params):
    return registry.make_component("agent", "graph_safe-v0", _scenario(**(scenario or {})), **params)


# --- 1: a graph-safe policy file without the world record, in another world ------------------------------------------

@pytest.fixture()
def old_learned_policy(tmp_path) -> Path:
    """A graph-safe policy file of world_seed 0 written before the world record: every (cell, action) tried 400 times
    (> n_remove = 330) with exactly world 0's true outcomes seen, so every other prior outcome is removed."""
    a = _graph_safe(p_min=0.05, num_runs=360)
    truth = a.scenario.world().true_prob > 0
    a.model.tries[:] = 400
    a.model.seen[:] = np.where(truth, 100, 0)
    d = a.policy_state()
    del d["scenario"], d["params"]  # as an older coopsim wrote it
    path = tmp_path / "old.pt"
    torch.save(d, path)
    return path


def test_old_graph_safe_policy_of_another_world_is_refused_at_load(old_learned_policy, capsys):
    b = _graph_safe({"world_seed": 3}, p_min=0.05, num_runs=360)
    with pytest.raises(ConfigError) as e:
        b.load(old_learned_policy)
    msg = str(e.value)
    assert e.value.file == str(old_learned_policy) and msg.startswith(f"{old_learned_policy}: ")
    assert "predates the world record" in msg and "does not fit this scenario's world" in msg
    assert "rule out" in msg and "outcome(s) that this world has" in msg
    assert b.model.tries.sum() == 0  # nothing was loaded
    assert "cannot be checked" not in capsys.readouterr().err  # the refusal, not the warning that it cannot be checked


def test_old_graph_safe_policy_of_its_own_world_still_loads_with_the_warning(old_learned_policy, capsys):
    a = _graph_safe(p_min=0.05, num_runs=360, planner="joint")
    a.load(old_learned_policy)
    assert a.model.tries.sum() == 400 * a.model.tries.size
    err = capsys.readouterr().err
    assert "does not record the scenario" in err and "cannot be checked" not in err
    assert "only its counts could be checked (they fit this scenario's true dynamics" in err
    a.scenario.reset(seed=0)
    a.reset(seed=0)
    assert a.episode_metrics()["conservativeness"] > 0  # the joint planner's soundness check holds


def test_cli_eval_of_an_old_graph_safe_policy_of_another_world_exits_2(old_learned_policy, tmp_path):
    # before: the joint planner's conservativeness check stopped with an AssertionError (exit 1)
    r = run_cli("eval", str(CFG), "seeds=[0]", "episodes=1", f"out_dir={tmp_path / 'ev'}", "--checkpoint",
                str(old_learned_policy), "scenario.params.world_seed=3", "agents.params.planner=joint")
    assert r.returncode == 2, r.stderr
    assert str(old_learned_policy) in r.stderr and "predates the world record" in r.stderr
    assert "Traceback" not in r.stderr and "AssertionError" not in r.stderr


# --- 2: the tabular baselines' Q-tables record their world; another world is refused ------------------------------------

IQL = ROOT / "configs" / "safety" / "baselines" / "coop-grid4x4-2ag-all-iql-noshield.yaml"
TABULAR = ["safe_baselines/iql-v0", "safe_baselines/lagrangian-v0"]


def _tabular(agent_id: str, **scenario):
    return registry.make_component("agent", agent_id, _scenario(**scenario))


@pytest.mark.parametrize("agent_id", TABULAR)
def test_tabular_policy_file_records_its_world_and_another_world_is_refused(agent_id, tmp_path):
    a = _tabular(agent_id)
    a.q[0, 0, 3, 1] = 5.0
    path = tmp_path / "policy.pt"
    a.save(path)
    d = torch.load(path, weights_only=False)
    assert d["scenario"]["id"] == "coop_game/Grid4x4-v0" and d["scenario"]["params"]["world_seed"] == 0
    with pytest.raises(ConfigError) as e:
        _tabular(agent_id, world_seed=3).load(path)
    assert e.value.key == "scenario.params.world_seed" and e.value.file == str(path)
    assert "scenario.params.world_seed=0 (this config: 3)" in str(e.value)
    assert "Q-values hold only in the world they were learned in" in str(e.value)
    # the same world with another team-independent setting (horizon kept: it shapes the table) loads for iql-v0;
    # lagrangian-v0's cost table depends on the constraints, so it refuses them (fresh33b N6)
    b = _tabular(agent_id, constraints=["separation"], load_frac=0.9)
    if agent_id == "safe_baselines/lagrangian-v0":
        with pytest.raises(ConfigError) as e:
            b.load(path)
        assert e.value.key == "scenario.params.constraints"
        return
    b.load(path)
    assert b.q[0, 0, 3, 1] == 5.0


@pytest.mark.parametrize("agent_id", TABULAR)
def test_old_tabular_policy_file_without_world_loads_with_a_warning(agent_id, tmp_path, capsys):
    a = _tabular(agent_id)
    a.q[0, 0, 3, 1] = 5.0
    d = a.policy_state()
    del d["scenario"]
    path = tmp_path / "old.pt"
    torch.save(d, path)
    b = _tabular(agent_id, world_seed=3)
    b.load(path)
    assert b.q[0, 0, 3, 1] == 5.0
    err = capsys.readouterr().err
    assert f"warning: {path}: this {agent_id} policy file does not record the scenario" in err
    assert "cannot be checked" in err


def test_cli_eval_and_init_policy_refuse_a_q_table_of_another_world_with_exit_2(tmp_path):
    from coopsim.platform.training import train_main

    run = train_main(str(IQL), [f"out_dir={tmp_path}", "seeds=[0]", "train.total_env_steps=80",
                                "train.shield=passthrough-v0", "train.progress=false"], None)
    seed = run / "seed-0"
    r = run_cli("eval", str(run / "config.yaml"), "seeds=[0]", "episodes=1", f"out_dir={tmp_path / 'ev'}",
                "--checkpoint", str(seed), "scenario.params.world_seed=3")
    assert r.returncode == 2, r.stderr
    assert "key 'scenario.params.world_seed'" in r.stderr and "world_seed=0 (this config: 3)" in r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli("train", str(IQL), "seeds=[0]", "train.total_env_steps=80", "train.shield=passthrough-v0",
                f"out_dir={tmp_path / 'tr'}", f"train.init_policy={seed}", "scenario.params.world_seed=3")
    assert r.returncode == 2, r.stderr
    assert "world_seed=0 (this config: 3)" in r.stderr and "Traceback" not in r.stderr


# --- 3: passthrough-v0 checks the joint action as the cores and the other shields do ------------------------------------

@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("actions", [
    np.ones((2, 2), bool), np.array([[1.0, 2.0], [0.0, 0.0]]), np.ones((2, 2), np.float32), np.array([[np.nan, 2], [0, 0]]),
    np.array([[-5, 0], [0, 0]]), np.array([[9, 2], [0, 0]]), np.zeros((2, 3), np.int64),
])
def test_passthrough_refuses_invalid_actions_as_the_scenario_step_does(actions, with_state):
    sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=2, num_agents=2, constraints=ALL)
    sc.reset(seed=0)
    sh = registry.make_component("shield", "passthrough-v0")
    sh.reset(0, sc)
    with pytest.raises(ValueError) as step_err:
        sc.step(actions)
    with pytest.raises(ValueError) as filter_err:  # before: bools and floats were cast (True -> action 1, 1.0 -> 1)
        sh.filter(sc.constraints() if with_state else None, actions)
    assert str(filter_err.value) == str(step_err.value)


def test_passthrough_takes_integer_dtypes_and_returns_a_new_int64_array():
    sh = registry.make_component("shield", "passthrough-v0")
    sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=2, num_agents=2, constraints=ALL)
    sh.reset(0, sc)
    for given in (np.array([[1, 2], [3, 4]], np.int32), np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]):
        out, cert = sh.filter(None, given)
        assert out.dtype == np.int64 and out.tolist() == [[1, 2], [3, 4]] and out is not given
        assert not cert.certified.any() and not cert.changed.any()
    given = np.zeros((2, 2), np.int64)
    out, _ = sh.filter(None, given)
    out[0, 0] = 4
    assert given[0, 0] == 0  # never the input itself


def test_passthrough_without_reset_or_state_still_refuses_bools_and_floats():
    sh = registry.make_component("shield", "passthrough-v0")
    with pytest.raises(ValueError, match="got dtype bool"):
        sh.filter(None, np.ones((1, 2), bool))
    with pytest.raises(ValueError, match="got dtype float64"):
        sh.filter(None, np.ones((1, 2)))
    with pytest.raises(ValueError, match="out of range"):
        sh.filter(None, np.array([[-1, 0]]))
    out, _ = sh.filter(None, np.array([[7, 0]], np.int16))
    assert out.dtype == np.int64 and out.tolist() == [[7, 0]]


# --- 4: sweep --skip-done says when it reuses a run that kept another number of replay files ---------------------------

def _sweep(cwd: Path, *args: str):
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "coopsim.cli", "sweep", str(ROOT / "configs" / "examples" / "line-random.yaml"),
                           "--grid", "max_steps=4", "seeds=[0]", "episodes=1", "out_dir=runs", "--skip-done", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400"})


def test_sweep_skip_done_notes_a_reused_run_whose_replays_differ(tmp_path):
    r = _sweep(tmp_path, "replays=2")
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = [d.name for d in (tmp_path / "runs").iterdir() if d.name.startswith("line-random-4-")]
    r = _sweep(tmp_path, "replays=0")
    assert r.returncode == 0, r.stdout + r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("skipped (done): ")]
    assert line.endswith(f"-> runs/{run} (replays differs: 2 there, 0 asked; results are the same: replays only sets "
                         f"how many replay files are kept, and its replay files are that run's)")
    r = _sweep(tmp_path)  # replays not set: every episode's
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("skipped (done): ")]
    assert "(replays differs: 2 there, not set (every episode) asked;" in line
    r = _sweep(tmp_path, "replays=2")  # the same replays: no note
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("skipped (done): ")]
    assert line.endswith(f"-> runs/{run}")


# --- 5: count_violations checks that its inputs' shapes (envs, agents) agree --------------------------------------------

@pytest.mark.parametrize("pos,npos,loads,names", [
    (np.zeros((1, 3, 2)), np.zeros((1, 2, 2)), np.zeros((1, 3)), ("next_positions has shape (1, 2, 2)", "(1, 3, 2)")),
    (np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), np.zeros((1, 3)), ("next_loads has shape (1, 3)", "(1, 2, 2)")),
    (np.zeros((2, 2, 2)), np.zeros((2, 2, 2)), np.zeros((1, 2)), ("next_loads has shape (1, 2)", "(2, 2, 2)")),
    (np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), np.zeros(2), ("next_loads has shape (2,)", "(1, 2, 2)")),
    (np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)), ("positions must be [E, N, d]", "(2, 2)")),
    # no coordinates: every distance would be 0, every pair "together" (was counted as violations silently)
    (np.zeros((1, 2, 0)), np.zeros((1, 2, 0)), np.zeros((1, 2)), ("with d >= 1", "(1, 2, 0)")),
])
def test_count_violations_refuses_inputs_whose_shapes_disagree(pos, npos, loads, names):
    from coopsim.safety import ResourceCap, Separation, count_violations

    # before: a ResourceCap over 3 agents' loads beside 2 agents' positions was counted silently (or an IndexError)
    with pytest.raises(ValueError) as e:
        count_violations([Separation(min_dist=1), ResourceCap(groups=[0, 0], caps=[1])], pos, npos, loads)
    assert all(n in str(e.value) for n in names), str(e.value)


def test_count_violations_reads_float64_inputs_as_they_are():
    from coopsim.safety import Separation, count_violations
    from coopsim.safety import constraints as mod

    pos = np.zeros((1, 2, 2))
    assert mod._float64(pos) is pos  # no conversion for the core's float64 arrays
    as_int = mod._float64(np.zeros((1, 2), np.int64))
    assert as_int.dtype == np.float64
    out = count_violations([Separation(min_dist=1)], pos, np.array([[[0.0, 0.0], [0.0, 0.5]]]), np.zeros((1, 2)))
    assert out["separation"].tolist() == [1.0]


# --- 6: SMACCore built directly refuses a bad param as the registry does -------------------------------------------------

def test_smac_core_with_an_unknown_map_is_a_config_error_naming_key_value_and_maps():
    from coopsim.scenarios.smac.core import SMACCore

    with pytest.raises(ConfigError) as e:  # before: a raw pydantic ValidationError
        SMACCore(num_envs=1, map_name="3mm")
    assert e.value.key == "map_name" and e.value.value == "3mm"
    msg = str(e.value)
    assert msg.startswith("key 'map_name': invalid value '3mm': unknown SMAC map '3mm'; valid: 3m, 8m,")
    assert "2s3z" in msg and "'<protoss|terran|zerg>_<n>_vs_<m>'" in msg
    assert "pydantic" not in msg and "validation error" not in msg
    with pytest.raises(ConfigError) as reg:
        registry.make_scenario("smac/SMAC-v0", num_envs=1, map_name="3mm")
    assert str(reg.value) == msg  # the registry path's error, word for word


def test_smac_core_refuses_a_bool_for_a_number_as_the_registry_does():
    from coopsim.scenarios.smac.core import SMACCore

    with pytest.raises(ConfigError) as e:
        SMACCore(num_envs=1, map_name="3m", max_steps=True)
    assert e.value.key == "max_steps"
    assert SMACCore(num_envs=1, map_name="3m", max_steps=5).limit == 5
