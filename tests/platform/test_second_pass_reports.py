"""Second new-user pass: failed plans' makespan, damaged runs in reports, cross-scenario comparisons, memory
pre-checks of the learners' buffers, checkpoints trained on another scenario."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from coopsim.platform.recorder import json_line
from coopsim.platform.stats import summarize


# --- N2: a failed plan's makespan is missing (nan / null), not -1 --------------------------------------------------

def _plan(finish_step, failed):
    from coopsim.agents.mapf_baselines.planner import PlanResult

    n = len(finish_step)
    return PlanResult(paths=np.zeros((2, n, 2), dtype=np.int32), failed=np.asarray(failed, dtype=bool),
                      finish_step=np.asarray(finish_step, dtype=np.int32), order=np.arange(n),
                      goal_sequence=np.zeros((n, 1), dtype=np.int64), attempts=1, expansions=3, plan_time_s=0.0)


def test_failed_plan_makespan_is_missing_not_minus_one():
    from coopsim.agents.mapf_baselines.prioritized import PrioritizedAgent

    agent = PrioritizedAgent.__new__(PrioritizedAgent)
    agent.plans = [_plan([-1, -1], [True, True])]
    m = agent.episode_metrics()
    assert math.isnan(m["plan/makespan"]) and math.isnan(m["plan/soc"]) and m["plan/failures"] == 2.0
    assert json.loads(json_line({"seed": 0, **m}))["plan/makespan"] is None  # metrics.jsonl: null
    agent.plans = [_plan([2, 3], [False, False]), _plan([4, -1], [False, True])]  # only the complete env counts
    m = agent.episode_metrics()
    assert m["plan/makespan"] == 3.0 and m["plan/failures"] == 0.5
    assert m["plan/soc"] == 5.0  # 2 + 3 of the complete env; the other env's 4 (its finished agent only) is left out


def test_summary_averages_makespan_over_episodes_with_a_value():
    # the reported case: per-seed {2, 2, 1, -1, 1} gave "1 [-0.52, 2.52]"; the failed seed is now missing
    rows = [{"seed": s, "episode": 0, "plan/makespan": v, "plan/failures": f}
            for s, v, f in [(0, 2.0, 0.0), (1, 2.0, 0.0), (2, 1.0, 0.0), (3, float("nan"), 1.0), (4, 1.0, 0.0)]]
    st = summarize(rows)["plan/makespan"]
    assert st["mean"] == pytest.approx(1.5) and st["n_seeds"] == 4 and st["n_episodes"] == 4
    assert "3" not in st["per_seed"] and st["ci95_low"] >= 0
    assert summarize(rows)["plan/failures"]["mean"] == pytest.approx(0.2)
    # as read back from metrics.jsonl: null
    back = [json.loads(json_line(r)) for r in rows]
    assert back[3]["plan/makespan"] is None
    assert summarize(back)["plan/makespan"]["mean"] == pytest.approx(1.5)


# --- N12: damaged or failed run directories in `coopsim report` ---------------------------------------------------

def _run_dir(tmp_path, rows=None, summary=None, name="r"):
    import yaml

    d = tmp_path / name
    d.mkdir()
    (d / "config.yaml").write_text(yaml.safe_dump({"name": name, "scenario": {"id": "coop_game/matrix-v0"},
                                                   "seeds": [0, 1], "episodes": 1}))
    if rows is not None:
        (d / "metrics.jsonl").write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        (d / "summary.json").write_text(json.dumps(summary))
    return d


def test_report_skips_a_row_whose_seed_is_not_an_integer(tmp_path):
    from coopsim.platform.report import load_run, summary_table

    d = _run_dir(tmp_path, [{"seed": 0, "episode": 0, "x": 1.0}, {"seed": "x", "episode": 0, "x": 5.0},
                            {"seed": 1, "episode": 0, "x": 3.0}])
    run = load_run(d)
    assert [r["seed"] for r in run["rows"]] == [0, 1] and run["summary"]["metrics"]["x"]["mean"] == 2.0
    assert "metrics.jsonl" in run["note"] and "line 2" in run["note"] and "'seed' is 'x'" in run["note"]
    summary_table(run)


def test_report_all_rows_damaged_names_file_and_line(tmp_path):
    from coopsim.errors import CoopsimError
    from coopsim.platform.report import load_run

    d = _run_dir(tmp_path, [{"seed": "x", "episode": 0, "x": 5.0}])
    with pytest.raises(CoopsimError, match=r"metrics\.jsonl.*line 1: 'seed' is 'x', not an integer"):
        load_run(d)


def test_report_missing_metrics_file_says_missing(tmp_path):
    from coopsim.errors import CoopsimError
    from coopsim.platform.report import load_run

    with pytest.raises(CoopsimError, match=r"metrics\.jsonl: missing") as ei:
        load_run(_run_dir(tmp_path))
    assert "no finished episode" not in str(ei.value)


def test_report_failed_run_with_no_episode_says_failed_not_stopped(tmp_path):
    from coopsim.errors import CoopsimError
    from coopsim.platform.report import load_run

    d = _run_dir(tmp_path, [], {"episodes_finished": 0, "interrupted": False, "metrics": {}})
    with pytest.raises(CoopsimError, match="finished no episode: it failed") as ei:
        load_run(d)
    assert "stopped" not in str(ei.value).split("(")[0]
    d2 = _run_dir(tmp_path, [], {"episodes_finished": 0, "interrupted": True, "metrics": {}}, name="r2")
    with pytest.raises(CoopsimError, match="interrupted"):
        load_run(d2)


# --- N11: comparing runs of different scenarios -------------------------------------------------------------------

def _cfg_run(tmp_path, name, cfg, rows):
    import yaml

    d = tmp_path / name
    d.mkdir()
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_compare_different_scenarios_notes_instead_of_warnings_and_short_table(tmp_path):
    import warnings

    from rich.console import Console

    from coopsim.platform.report import MAX_TABLE_KEYS, comparison_table, compare_runs

    pa = {f"param_{i}": "a-very-long-value-" * 3 + str(i) for i in range(20)}
    pb = {f"other_{i}": i for i in range(20)}
    a = _cfg_run(tmp_path, "a", {"name": "a", "seeds": [0], "scenario": {"id": "mapf/grid-v0", "params": pa},
                                 "agents": {"id": "x/a-v0"}}, [{"seed": 0, "episode": 0, "m": 1.0}])
    b = _cfg_run(tmp_path, "b", {"name": "b", "seeds": [0], "scenario": {"id": "coop_game/matrix-v0", "params": pb},
                                 "agents": {"id": "x/b-v0"}}, [{"seed": 0, "episode": 0, "m": 2.0}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no python warning (scenario mismatch, matplotlib) escapes
        res = compare_runs([a, b], out_dir=tmp_path)
    assert "different scenarios" in res["notes"]["comparison"]
    shown = res["shown_line_keys"]
    assert "scenario.id" in shown and "agents.id" in shown and len(shown) <= MAX_TABLE_KEYS
    assert not any(k.startswith("scenario.params.param_") for k in shown)
    console = Console(width=200, record=True)
    console.print(comparison_table(res))
    text = console.export_text()
    assert "compare.csv has every one" in " ".join(text.split()) and "param_3" not in text  # caption is wrapped
    head = (tmp_path / "compare.csv").read_text().splitlines()[0]
    assert "scenario.params.param_3" in head and "scenario.params.other_3" in head  # the full list


# --- N4: rollout / replay buffers larger than half the available memory are refused before numpy tries ------------

def test_ppo_rollout_memory_precheck_is_a_config_error():
    from coopsim.agents.ppo.trainer import check_rollout_memory
    from coopsim.errors import ConfigError

    with pytest.raises(ConfigError, match=r"key 'train\.num_envs': invalid value 65536 \(with train\.rollout_steps "
                                          r"100000\): the rollout buffers need .* GiB .*what fits: train\.num_envs <= "
                                          r"\d+ at rollout_steps 100000, or train\.rollout_steps <= \d+"):
        check_rollout_memory(65536, 100000, 3, 200, file="c.yaml")
    check_rollout_memory(16, 32, 3, 200)  # small: never refused


def test_ppo_train_huge_rollout_refused_before_allocating():
    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config
    from coopsim.platform.training import build_trainer

    f = "configs/ppo/linewalk-mappo.yaml"
    cfg = load_config(f, ["train.num_envs=65536", "train.rollout_steps=100000", "train.minibatches=1"])
    with pytest.raises(ConfigError, match=r"train\.num_envs.*rollout buffers need"):
        build_trainer(cfg, 0, file=f)


def test_qmix_buffer_memory_precheck():
    from coopsim.agents.qmix.trainer import check_buffer_memory
    from coopsim.errors import ConfigError

    with pytest.raises(ConfigError, match=r"key 'train\.buffer_episodes': invalid value 1000000: the replay buffer "
                                          r"needs .*what fits: train\.buffer_episodes <= \d+"):
        check_buffer_memory(1_000_000, 10_000, 8, 500, 1000, 10)
    check_buffer_memory(2000, 32, 3, 10, 20, 5)


# --- N9: a policy trained on one scenario, loaded on another with the same sizes --------------------------------

def _ppo_on(sid):
    from coopsim.agents.ppo.agent import PPOAgent
    from coopsim.platform.registry import make_scenario

    return PPOAgent(make_scenario(sid, num_envs=1, num_agents=2), critic="central", hidden=[8])


def test_policy_records_scenario_and_warns_on_another(tmp_path, capsys):
    import torch

    a = _ppo_on("coop_game/Grid4x4-v0")
    a.save(tmp_path / "policy.pt")
    meta = torch.load(tmp_path / "policy.pt", weights_only=False)["scenario"]
    assert meta["id"] == "coop_game/Grid4x4-v0" and meta["params"]["height"] == 4
    capsys.readouterr()
    _ppo_on("coop_game/Grid4x4-v0").load(tmp_path / "policy.pt")  # same id: silent
    assert "warning" not in capsys.readouterr().err
    b = _ppo_on("coop_game/Grid5x5-v0")
    assert b.obs_dim == a.obs_dim  # only obs_dim was compared before
    b.load(tmp_path / "policy.pt")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trained on scenario 'coop_game/Grid4x4-v0'" in err
    assert "'coop_game/Grid5x5-v0'" in err


def test_old_policy_without_scenario_field_loads_silently(tmp_path, capsys):
    import torch

    from coopsim.platform.trainer import atomic_save

    a = _ppo_on("coop_game/Grid4x4-v0")
    ck = a.checkpoint()
    del ck["scenario"]
    atomic_save(ck, tmp_path / "policy.pt")
    capsys.readouterr()
    _ppo_on("coop_game/Grid5x5-v0").load(tmp_path / "policy.pt")
    assert "warning" not in capsys.readouterr().err
    assert torch.load(tmp_path / "policy.pt", weights_only=False).get("scenario") is None


def test_a_run_that_fails_mid_way_keeps_its_episodes_and_says_why(tmp_path, second_episode_fails):
    from pathlib import Path

    from coopsim.platform import runner
    from coopsim.platform.config import load_config

    cfg = load_config(str(Path(__file__).resolve().parents[2] / "configs/examples/line-random.yaml"),
                      ["seeds=[0]", "episodes=3", f"out_dir={tmp_path}"])
    with pytest.raises(RuntimeError, match="boom"):
        runner.run_config(cfg, progress=False)
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes_finished"] == 1 and summary["interrupted"] is False
    assert summary["error"] == "RuntimeError: boom in episode 2"
