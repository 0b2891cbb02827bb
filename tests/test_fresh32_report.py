"""Fixes of fresh-user pass 32 (report, platform, SMAC docs): a policy file with the right format tag but missing
or mistyped keys is refused with the file and key named (QMIX, PPO, IMMP loaders; F7); the batched core refuses
bool and float action arrays like the ParallelEnv view (F9); runs of agents that learn during `coopsim run` say their
seeds are not independent, and `report` does not pool a seed across their runs with different seed lists (F10);
comparison rows that pool an interrupted run are marked and compare.csv says so (F3); the generic smac/SMAC-v0 id
(F5); sweep --jobs capped (F13); tiny mean regrets shown as 0 (F13)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from coopsim.errors import ConfigError
from coopsim.platform import registry as reg


# --- F7: a policy file with the right format tag but missing keys -------------------------------------------------

@pytest.fixture(scope="module")
def grid():
    return reg.make_scenario("coop_game/Grid4x4-v0", num_envs=1)


@pytest.mark.parametrize("agent_id,fmt,first_key", [("qmix/qmix-v0", "coopsim.qmix/1", "params"),
                                                     ("ppo/mappo-v0", "coopsim.ppo/1", "params")])
def test_policy_file_missing_keys_is_a_config_error_naming_file_and_key(tmp_path, grid, agent_id, fmt, first_key):
    agent = reg.make_component("agent", agent_id, grid)
    f = tmp_path / "fake.pt"
    torch.save({"format": fmt}, f)
    with pytest.raises(ConfigError) as e:
        agent.load(f)
    assert e.value.file == str(f) and f"lacks key {first_key!r}" in str(e.value)


@pytest.mark.parametrize("agent_id,size_key", [("qmix/qmix-v0", "in_dim"), ("ppo/mappo-v0", "obs_dim")])
def test_policy_file_lacking_a_size_or_weights_key_names_it(tmp_path, grid, agent_id, size_key):
    agent = reg.make_component("agent", agent_id, grid)
    good = agent.checkpoint()
    f = tmp_path / "p.pt"
    for drop in (size_key, "net"):
        torch.save({k: v for k, v in good.items() if k != drop}, f)
        with pytest.raises(ConfigError, match=f"lacks key '{drop}'"):
            agent.load(f)
    torch.save({**good, size_key: True}, f)   # a bool is not a size
    with pytest.raises(ConfigError, match=f"key '{size_key}' holds a bool, expected int"):
        agent.load(f)
    torch.save(good, f)   # the complete file still loads
    agent.load(f)


def test_cli_eval_of_a_qmix_file_without_keys_exits_2_naming_the_key(tmp_path):
    from cli_helpers import _err, run_cli

    f = tmp_path / "fake.pt"
    torch.save({"format": "coopsim.qmix/1", "params": {}}, f)
    err = _err(run_cli("eval", "configs/smac/3m-qmix.yaml", "seeds=[0]", "episodes=1", "--checkpoint", str(f)))
    assert f"{f}: QMIX policy file lacks key 'in_dim'" in err


# --- F9: the batched core refuses bool and float action arrays, as the ParallelEnv view does -----------------------

@pytest.mark.parametrize("sid,kw", [("smac/3m-v0", {}), ("coop_game/Grid4x4-v0", {}),
                                    ("mapf/MGMAPF-v0", {"num_agents": 3, "num_goals": 1}),
                                    ("mpe/simple_spread-v0", {}), ("line/LineWalk-v0", {})])
def test_core_refuses_bool_and_float_arrays_like_the_view(sid, kw):
    core = reg.make_scenario(sid, num_envs=2, **kw)
    core.reset(seed=0)
    n = core.num_agents
    state = core.state().copy()
    with pytest.raises(ValueError, match=r"actions must be integers in .*got dtype bool \(a bool array"):
        core.step(np.ones((2, n), bool))   # a mask passed by mistake was read as action 1 for every agent
    with pytest.raises(ValueError, match=r"actions must be integers in .*got dtype float32 \(cast an integral"):
        core.step(np.ones((2, n), np.float32))
    with pytest.raises(ValueError, match=r"actions must be integers; got 1\.5"):
        core.step(np.full((2, n), 1.5))
    np.testing.assert_array_equal(core.state(), state)   # nothing stepped
    env = reg.make(sid, **kw)
    env.reset(seed=0)
    for bad in (True, 1.0):
        with pytest.raises(ValueError, match="must be one integer"):
            env.step({a: bad for a in env.agents})
    core.step(np.ones((2, n), np.int32))   # integer dtypes still step


def test_pettingzoo_adapter_checks_actions_through_the_shared_check():
    pytest.importorskip("mpe2")
    core = reg.make_scenario("pettingzoo/adapter-v0", num_envs=1, env="mpe2.simple_spread_v3:parallel_env")
    core.reset(seed=0)
    n = core.num_agents
    with pytest.raises(ValueError, match=r"^PettingZooCore: actions must be integers in .*got dtype <U1"):
        core.step(np.full((1, n), "3"))   # was cast to action 3
    with pytest.raises(ValueError, match=r"^action 99 of env 0 agent 0 .*out of range"):
        core.step(np.full((1, n), 99))    # was silently action 0
    core.step(np.ones((1, n), np.int64))


def test_view_docstrings_state_shapes_and_dtypes():
    from coopsim.platform.scenario import ScenarioEnv

    assert "float32 ``[S]``" in ScenarioEnv.state.__doc__
    assert "action_mask" in ScenarioEnv.reset.__doc__ and "bool [A]" in ScenarioEnv.reset.__doc__
    assert "not a bool, not a float" in ScenarioEnv.step.__doc__
    assert "Raises:" in reg.make.__doc__


# --- F10 / F3: runs of learners that learn during `coopsim run`; rows that pool an interrupted run ----------------

import csv  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

from coopsim.platform.config import load_config  # noqa: E402
from coopsim.platform.report import compare_runs, comparison_table, load_run, summary_table  # noqa: E402
from cli_helpers import run_config_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IQL = ROOT / "configs/safety/baselines/coop-grid4x4-2ag-all-iql-noshield.yaml"   # safe_baselines/iql-v0: learns online
LINE = ROOT / "configs/examples/line-random.yaml"                               # random agents: no learning


def _run(cfg_path, out, seeds, episodes=2, stop_after=None):
    cfg = load_config(cfg_path, [f"out_dir={out}", f"seeds={seeds}", f"episodes={episodes}"])
    return run_config_until(cfg, stop_after)


def _text(table) -> str:
    from rich.console import Console

    c = Console(width=250, record=True)
    c.print(table)
    return " ".join(c.export_text().split())


@pytest.fixture(scope="module")
def iql_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("iql")
    return {"multi": _run(IQL, out, "[0,1,2]"), "one1": _run(IQL, out, "[1]"), "one2": _run(IQL, out, "[2]")}


def test_learner_run_summary_says_its_seeds_are_not_independent(iql_runs):
    s = json.loads((iql_runs["multi"] / "summary.json").read_text())
    assert s["seeds_note"].startswith("seeds are not independent samples: agent 'safe_baselines/iql-v0' learns "
                                      "during the run")
    assert "seeds_note" not in json.loads((iql_runs["one1"] / "summary.json").read_text())  # one fresh learner
    assert "seeds are not independent samples" in _text(summary_table(load_run(iql_runs["multi"])))
    assert "not independent" not in _text(summary_table(load_run(iql_runs["one1"])))


def test_report_does_not_pool_a_learners_seed_across_different_seed_lists(iql_runs, tmp_path):
    res = compare_runs([iql_runs["multi"], iql_runs["one1"], iql_runs["one2"]], out_dir=tmp_path)
    by_key = {row["line"]["run_seeds"]: row for row in res["table"]}
    assert set(by_key) == {"0-2", "1 per run"}
    assert by_key["0-2"]["seeds"] == [0, 1, 2] and by_key["0-2"]["summary"]["episode_return"]["n_episodes"] == 6
    assert by_key["1 per run"]["seeds"] == [1, 2]   # the one-seed runs (fresh learners each) still pool together
    assert by_key["1 per run"]["summary"]["episode_return"]["n_episodes"] == 4
    assert not any(k.startswith("seed ") for k in res["notes"])   # no "ran seed 1 with the same settings" pooling
    note = res["notes"]["run_seeds"]
    assert "not pooled" in note and "'safe_baselines/iql-v0' learns during the run" in note
    assert f"{iql_runs['multi'].name}: seeds 0-2" in note
    assert "not independent samples" in res["notes"]["seeds not independent"]
    rows = list(csv.DictReader((tmp_path / "compare.csv").read_text().splitlines()))
    assert sorted(r["run_seeds"] for r in rows) == ["0-2", "1 per run"]


def test_report_still_pools_a_shared_seed_of_non_learners(tmp_path):
    a, b = _run(LINE, tmp_path, "[0,1]"), _run(LINE, tmp_path, "[1]")
    assert "seeds_note" not in json.loads((a / "summary.json").read_text())
    res = compare_runs([a, b], out_dir=tmp_path)
    (row,) = res["table"]
    assert row["seeds"] == [0, 1] and "run_seeds" not in res["line_keys"]
    assert "with the same settings" in res["notes"]["seed 1"] and "seeds not independent" not in res["notes"]


def test_row_pooling_an_interrupted_run_is_marked_and_compare_csv_says_so(tmp_path):
    whole = _run(LINE, tmp_path, "[0,1]", episodes=3)
    part = _run(LINE, tmp_path, "[2]", episodes=3, stop_after=1)   # 1 of 3 episodes
    res = compare_runs([whole, part], out_dir=tmp_path)
    (row,) = res["table"]
    assert row["complete"] is False and row["episodes"] == 7
    assert row["episodes_per_seed"] == {0: 3, 1: 3, 2: 1}
    assert row["partial_runs"] == [str(part)]
    text = _text(comparison_table(res))
    assert "0-2*" in text and "* = the row pools an interrupted or unfinished run" in text
    (line,) = csv.DictReader((tmp_path / "compare.csv").read_text().splitlines())
    assert line["seeds"] == "0;1;2" and line["episodes"] == "7" and line["episodes_per_seed"] == "0:3;1:3;2:1"
    assert line["complete"] == "false"
    assert line["runs"].split(";") == [whole.name, part.name]   # relative to compare.csv's folder (their parent)
    # both whole: no mark, complete true
    res = compare_runs([whole, _run(LINE, tmp_path, "[2]", episodes=3)], out_dir=tmp_path)
    assert res["table"][0]["complete"] is True and "*" not in _text(comparison_table(res))
    (line,) = csv.DictReader((tmp_path / "compare.csv").read_text().splitlines())
    assert line["complete"] == "true" and line["episodes"] == "9"


# --- F13: sweep --jobs capped at the runs and warned above the cores; a mean within rounding of 0 is 0 ------------

def _cli(args):
    from typer.testing import CliRunner

    from coopsim.cli import app

    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, " ".join((res.output + (res.stderr if res.stderr_bytes is not None else "")).split())


def test_sweep_jobs_is_capped_at_the_runs_and_warns_above_the_cores(tmp_path, monkeypatch):
    import coopsim.cli as cli

    monkeypatch.setattr(cli.os, "cpu_count", lambda: 1)
    code, out = _cli(["sweep", LINE, "--grid", "max_steps=4,5", "seeds=[0]", "episodes=1", f"out_dir={tmp_path}",
                      "--jobs", "1000"])
    assert code == 0, out
    assert "sweep: 2 runs, 2 at a time" in out   # not 1000
    assert "warning: --jobs: 2 runs at a time on 1 CPU core;" in out
    code, out = _cli(["sweep", LINE, "--grid", "max_steps=4,5", "seeds=[0]", "episodes=1", f"out_dir={tmp_path}",
                      "--jobs", "1"])
    assert code == 0 and "sweep: 2 runs, 1 at a time" in out and "--jobs:" not in out


def test_a_mean_within_rounding_of_zero_is_zero():
    from coopsim.platform.stats import summarize

    vals = [0.95, 0.35, -1.3]                       # np.mean gives -7.4e-17
    assert float(np.mean(vals)) != 0.0
    st = summarize([{"seed": 0, "regret": v} for v in vals])["regret"]
    assert st["mean"] == 0.0 and st["per_seed"] == {"0": 0.0}
    two = summarize([{"seed": s, "regret": v} for s in (0, 1) for v in vals])["regret"]
    assert two["mean"] == 0.0 and two["ci95_low"] == 0.0 and two["ci95_high"] == 0.0
    # a small but real mean is kept
    assert summarize([{"seed": 0, "regret": v} for v in (1e-6, 0.0)])["regret"]["mean"] == pytest.approx(5e-7)


# --- F5: any <race>_<n>_vs_<m> map through the generic smac/SMAC-v0 id ---------------------------------------------

def test_generic_smac_id_takes_any_map_name_and_the_refusal_names_it():
    core = reg.make_scenario("smac/SMAC-v0", num_envs=2, map_name="zerg_7_vs_9")
    assert core.reset(seed=0).shape == (2, 7, 128)   # the tester's SMACCore(num_envs=2, map_name='zerg_7_vs_9')
    from coopsim.platform.trainer import scenario_identity

    assert scenario_identity(core)["id"] == "smac/SMAC-v0"
    assert scenario_identity(reg.make_scenario("smac/3m-v0"))["id"] == "smac/3m-v0"   # a map id still wins
    with pytest.raises(ConfigError, match=r"Set any map_name with id smac/SMAC-v0 and map_name='zerg_7_vs_9'"):
        reg.make_scenario("smac/zerg_5_vs_5-v0", num_envs=1, map_name="zerg_7_vs_9")
    with pytest.raises(ConfigError, match=r"unit counts must be in 1\.\.32"):
        reg.make_scenario("smac/SMAC-v0", num_envs=1, map_name="zerg_70_vs_9")


def test_cli_refusal_points_at_the_generic_id_and_it_validates():
    from cli_helpers import _err, run_cli

    err = _err(run_cli("validate", "configs/smac/3m-focus-fire.yaml", "scenario.id=smac/zerg_5_vs_5-v0",
                       "scenario.params.map_name=zerg_7_vs_9"))
    assert "Set any map_name with scenario.id=smac/SMAC-v0 and scenario.params.map_name='zerg_7_vs_9'" in err
    r = run_cli("validate", "configs/smac/3m-focus-fire.yaml", "scenario.id=smac/SMAC-v0",
                "scenario.params.map_name=zerg_7_vs_9", "seeds=[0]")
    assert r.returncode == 0, r.stderr


def test_smac_docs_name_the_generic_id_and_the_shipped_settings():
    text = " ".join((ROOT / "docs/smac.md").read_text().split())
    assert "`smac/SMAC-v0`" in text
    import yaml

    mappo = yaml.safe_load((ROOT / "configs/smac/3m-mappo.yaml").read_text())["train"]
    qmix = yaml.safe_load((ROOT / "configs/smac/3m-qmix.yaml").read_text())["train"]
    assert (mappo["total_env_steps"], mappo["ent_coef"], mappo["ent_coef_end"]) == (3_000_000, 0.05, 0.0)
    assert qmix["total_env_steps"] == 2_000_000
    assert "entropy 0.05 → 0" in text and "| 3m | MAPPO (`configs/smac/3m-mappo.yaml` as shipped" in text
    assert "3m-qmix.yaml`, 140k steps)" not in text and "`configs/smac/3m-qmix.yaml` trains for 2M env steps" in text
    assert "The 3m config also uses 4 minibatches per epoch, entropy 0.1 → 0" not in text
