"""fresh32 findings in the safety layer and the graph-safe learner (F1, F2, F4, F7, F8, F11, F12, F14, F15)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from coopsim.errors import ConfigError
from coopsim.platform import registry
from coopsim.platform.training import train_main
from coopsim.safety import KeepConnected, ResourceCap, Separation, count_violations
from coopsim.safety.model import removal_threshold
from cli_helpers import run_cli  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"
IQL = ROOT / "configs" / "safety" / "baselines" / "coop-grid4x4-2ag-all-iql-noshield.yaml"
ALL = ["separation", "resource", "connectivity"]


def _agent(scenario: dict | None = None, **params):
    sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=1, **{"num_agents": 2, "constraints": ALL,
                                                                        **(scenario or {})})
    return registry.make_component("agent", "graph_safe-v0", sc, **params)


@pytest.fixture()
def policy(tmp_path) -> Path:
    """A graph-safe policy file with some counts (tries of (cell 3, up) = 400 > n_remove: outcomes removed)."""
    a = _agent(p_min=0.05, num_runs=360)
    a.model.tries[3, 1] = 400
    a.model.seen[3, 1, 0] = 400
    a.episodes = 7
    path = tmp_path / "policy.pt"
    a.save(path)
    return path


# --- F1 / F2: the policy file records its world; another world is refused at load ----------------------------------

def test_policy_file_records_scenario_and_threshold_params(policy):
    d = torch.load(policy, weights_only=False)
    assert d["scenario"]["id"] == "coop_game/Grid4x4-v0"
    assert d["scenario"]["params"]["world_seed"] == 0 and d["scenario"]["params"]["slip"] == 0.2
    assert d["params"] == {"delta": 0.01, "p_min": 0.05, "num_runs": 360}


@pytest.mark.parametrize("change,key,theirs,ours", [
    ({"world_seed": 3}, "world_seed", 0, 3),
    ({"slip": 0.5}, "slip", 0.2, 0.5),
    ({"slippery_frac": 1.0}, "slippery_frac", 0.5, 1.0),
])
def test_load_refuses_a_policy_of_another_world(policy, change, key, theirs, ours):
    with pytest.raises(ConfigError) as e:
        _agent(change, p_min=0.05, num_runs=360).load(policy)
    assert e.value.key == f"scenario.params.{key}"
    assert f"scenario.params.{key}={theirs!r} (this config: {ours!r})" in str(e.value)
    assert str(policy) in str(e.value)


def test_load_names_a_scenario_param_this_coopsim_does_not_know(policy, tmp_path):
    # a file from a newer coopsim (one more scenario param) was reported as "learned in another world" with
    # "(this config: None)"
    d = torch.load(policy, weights_only=False)
    d["scenario"]["params"]["wind_m_s"] = 2.5
    newer = tmp_path / "newer.pt"
    torch.save(d, newer)
    with pytest.raises(ConfigError) as e:
        _agent(p_min=0.05, num_runs=360).load(newer)
    assert e.value.key == "scenario.params.wind_m_s" and e.value.value == 2.5
    assert "does not know (wind_m_s=2.5)" in str(e.value) and "newer coopsim" in str(e.value)
    assert "another world" not in str(e.value) and str(newer) in str(e.value)


def test_load_accepts_the_same_world_with_other_team_constraints_and_horizon(policy):
    # the counts depend on the world's dynamics only: the team, the constraints and the horizon may differ
    a = _agent({"num_agents": 3, "constraints": ["separation"], "max_steps": 20, "load_frac": 0.9},
               p_min=0.05, num_runs=360)
    a.load(policy)
    assert a.model.tries[3, 1] == 400 and a.episodes == 7


def test_old_policy_file_without_world_loads_with_a_warning(policy, tmp_path, capsys):
    d = torch.load(policy, weights_only=False)
    del d["scenario"], d["params"]
    old = tmp_path / "old.pt"
    torch.save(d, old)
    a = _agent(p_min=0.05, num_runs=360)
    a.load(old)
    assert a.model.tries[3, 1] == 400
    err = capsys.readouterr().err
    assert f"warning: {old}:" in err and "does not record the scenario" in err and "could be checked" in err


def test_cli_eval_and_init_policy_refuse_another_world_with_exit_2(tmp_path):
    run = train_main(str(CFG), [f"out_dir={tmp_path}", "seeds=[0]", "train.total_env_steps=160", "train.progress=false"],
                     None)
    seed = run / "seed-0"
    # F1 (factored planner: before, 0.16 violations per episode, exit 0) and F2 (joint planner: an AssertionError, exit 1)
    for planner in ("factored", "joint"):
        r = run_cli("eval", str(run / "config.yaml"), "seeds=[0]", "episodes=2", f"out_dir={tmp_path / 'ev'}",
                    "--checkpoint", str(seed), "scenario.params.world_seed=3", f"agents.params.planner={planner}")
        assert r.returncode == 2, r.stderr
        assert "key 'scenario.params.world_seed'" in r.stderr and "world_seed=0 (this config: 3)" in r.stderr
        assert "Traceback" not in r.stderr and "AssertionError" not in r.stderr
    r = run_cli("train", str(CFG), "seeds=[0]", "train.total_env_steps=80", f"out_dir={tmp_path / 'tr'}",
                f"train.init_policy={seed}", "scenario.params.world_seed=3")
    assert r.returncode == 2, r.stderr
    assert "world_seed=0 (this config: 3)" in r.stderr
    assert not (tmp_path / "tr").exists() or not any((tmp_path / "tr").iterdir())


# --- F7: the right format tag with missing keys -------------------------------------------------------------------------

@pytest.mark.parametrize("content,missing", [
    ({"format": "coopsim.graph_safe/1"}, "'model'"),
    ({"format": "coopsim.graph_safe/1", "model": {"tries": np.zeros((16, 5), np.int64)}, "episodes": 1}, "'seen'"),
    ({"format": "coopsim.graph_safe/1", "model": {"tries": np.zeros((16, 5), np.int64),
                                                  "seen": np.zeros((16, 5, 5), np.int64), "n_remove": 3}}, "'episodes'"),
])
def test_policy_file_missing_a_key_is_a_config_error_naming_file_and_key(tmp_path, content, missing):
    path = tmp_path / "fake.pt"
    torch.save(content, path)
    with pytest.raises(ConfigError) as e:
        _agent().load(path)
    assert str(path) in str(e.value) and f"lacks key {missing}" in str(e.value)


def test_cli_eval_of_a_policy_file_missing_a_key_exits_2(tmp_path):
    path = tmp_path / "fake.pt"
    torch.save({"format": "coopsim.graph_safe/1"}, path)
    r = run_cli("eval", str(CFG), "seeds=[0]", "episodes=1", f"out_dir={tmp_path}", "--checkpoint", str(path))
    assert r.returncode == 2 and "lacks key 'model'" in r.stderr and "Traceback" not in r.stderr, r.stderr


# --- F8: the config's delta / p_min / num_runs give the learner's threshold, and a note says so -------------------------

def test_loaded_threshold_follows_the_config_and_a_note_names_both(policy, capsys):
    a = _agent(p_min=0.01, num_runs=360)
    a.load(policy)
    theirs = removal_threshold(16 * 5 * 5, 0.01, 0.05, 360)
    ours = removal_threshold(16 * 5 * 5, 0.01, 0.01, 360)
    assert (theirs, ours) == (330, 1649)
    assert a.model.n_remove == ours
    # (cell 3, up) has 400 tries: enough to remove its unseen outcomes at 330, not at 1649
    assert a.plausible_support()[3, 1].sum() == (a.world.prior[3, 1] >= 0).sum()
    err = capsys.readouterr().err
    assert "n_remove=330 tries (delta=0.01, p_min=0.05, num_runs=360)" in err and "give n_remove=1649" in err
    b = _agent(p_min=0.05, num_runs=360)
    b.load(policy)
    assert b.model.n_remove == 330 and b.plausible_support()[3, 1].sum() == 1
    assert "n_remove" not in capsys.readouterr().err  # the same params: no note


def test_shield_with_the_agents_params_no_longer_warns_after_load(policy):
    import warnings

    from coopsim.safety.shields import CertificateShield

    a = _agent(p_min=0.01, num_runs=360)
    a.load(policy)
    shield = CertificateShield(delta=0.01, p_min=0.01, num_runs=360)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # before: "stricter than the learner's 330" although both said p_min=0.01
        shield.share_model(a.model)
    assert shield.n_remove == a.model.n_remove == 1649


# --- F4 / F12: run totals in train_summary.json, a warning line, real episode counts -----------------------------------

def test_train_summary_has_run_totals_and_console_warns_of_violations(tmp_path):
    r = run_cli("train", str(IQL), "seeds=[0]", "train.total_env_steps=320", "train.num_envs=4",
                "train.shield=passthrough-v0", f"out_dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    run = next(tmp_path.iterdir())
    rows = (run / "seed-0" / "metrics.csv").read_text().splitlines()
    import csv

    rows = list(csv.DictReader(rows))
    total = sum(float(x["violations"]) for x in rows)
    assert total > 0  # the unshielded learner violates (so the last row alone would hide some)
    fm = json.loads((run / "train_summary.json").read_text())["per_seed"]["0"]["final_metrics"]
    assert fm["run_total/violations"] == total
    assert fm["run_total/violations"] == sum(v for k, v in fm.items() if k.startswith("run_total/cost/"))
    assert fm["run_total/shield/interventions"] == sum(float(x["shield/interventions"]) for x in rows) == 0
    seed_fm = json.loads((run / "seed-0" / "train_summary.json").read_text())["final_metrics"]
    assert seed_fm["run_total/violations"] == total
    assert f"warning: seed 0: {total:g} constraint violation(s) during training" in r.stderr + r.stdout
    # F12: 320 env steps of 8-step episodes in 4 envs are 40 episodes (10 iterations)
    assert len(rows) == 10 and "over 40 episodes" in r.stdout + r.stderr


def test_shielded_training_has_zero_totals_and_no_warning(tmp_path):
    run = train_main(str(CFG), [f"out_dir={tmp_path}", "seeds=[0]", "train.total_env_steps=160", "train.progress=false"],
                     None)
    fm = json.loads((run / "train_summary.json").read_text())["per_seed"]["0"]["final_metrics"]
    assert fm["run_total/violations"] == 0 and fm["run_total/shield/uncertified"] == 0
    assert fm["episodes"] == 1.0


def test_run_totals_survive_a_resume(tmp_path):
    base = [f"out_dir={tmp_path}", "seeds=[0]", "train.shield=passthrough-v0", "train.progress=false"]
    run = train_main(str(IQL), [*base, "train.total_env_steps=80"], None)
    first = json.loads((run / "train_summary.json").read_text())["per_seed"]["0"]["final_metrics"]
    train_main("", ["train.total_env_steps=160", "train.progress=false"], str(run))
    import csv

    rows = list(csv.DictReader((run / "seed-0" / "metrics.csv").open()))
    fm = json.loads((run / "train_summary.json").read_text())["per_seed"]["0"]["final_metrics"]
    assert len(rows) == 20
    assert fm["run_total/violations"] == sum(float(x["violations"]) for x in rows) >= first["run_total/violations"]


# --- F11: train.shield / train.shield_params errors name the file and the full key -------------------------------------

def test_train_shield_errors_name_file_and_full_key(tmp_path):
    r = run_cli("validate", str(CFG), "train.shield=bogus")
    assert r.returncode == 2
    assert (f"error: command-line override 'train.shield=bogus' (config {CFG}): key 'train.shield': unknown shield id "
            f"'bogus'") in r.stderr
    cfg = tmp_path / "trsh.yaml"
    cfg.write_text("name: x\nscenario: {id: coop_game/Grid4x4-v0, params: {num_agents: 2}}\n"
                   "agents: {id: graph_safe-v0}\ntrain: {total_env_steps: 16, shield_params: {delta: 5}}\n")
    r = run_cli("validate", str(cfg))
    assert r.returncode == 2 and f"error: {cfg}: key 'train.shield_params.delta': invalid value 5" in r.stderr, r.stderr
    r = run_cli("validate", str(CFG), "train.shield_params.bogus=1")
    assert r.returncode == 2 and "key 'train.shield_params.bogus'" in r.stderr, r.stderr


# --- F14: the certificate shield checks the proposed actions before certifying ------------------------------------------

@pytest.mark.parametrize("shield_id", ["certificate-v0", "oracle-v0"])
@pytest.mark.parametrize("actions", [
    np.array([[-5, 0], [-5, 0]]), np.array([[9, 2], [0, 0]]), np.array([[np.nan, 2], [0, 0]]),
    np.ones((2, 2), bool), np.ones((2, 2), np.float32),
])
def test_shield_refuses_invalid_actions_as_the_scenario_step_does(shield_id, actions):
    sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=2, num_agents=2, constraints=ALL)
    sc.reset(seed=0)
    sh = registry.make_component("shield", shield_id)
    sh.reset(0, sc)
    with pytest.raises(ValueError) as step_err:
        sc.step(actions)
    with pytest.raises(ValueError) as filter_err:
        sh.filter(sc.constraints(), actions)
    assert str(filter_err.value) == str(step_err.value)


def test_shield_still_takes_other_integer_dtypes():
    sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=2, num_agents=2, constraints=ALL)
    sc.reset(seed=0)
    sh = registry.make_component("shield", "certificate-v0")
    sh.reset(0, sc)
    out, cert = sh.filter(sc.constraints(), np.zeros((2, 2), np.int32))
    assert out.dtype == np.int64 and (out == 0).all() and cert.certified.all()


# --- F15: constraint objects refuse nonsense; NaN positions are refused -------------------------------------------------

@pytest.mark.parametrize("make,arg", [
    (lambda: Separation(min_dist=float("nan")), "min_dist"),
    (lambda: Separation(min_dist=-1), "min_dist"),
    (lambda: Separation(min_dist=0), "min_dist"),
    (lambda: Separation(margin=-0.5), "margin"),
    (lambda: Separation(margin=float("inf")), "margin"),
    (lambda: Separation(agents=(0, 0)), "agents"),
    (lambda: Separation(agents=(-1, 2)), "agents"),
    (lambda: KeepConnected(range_m=0), "range_m"),
    (lambda: KeepConnected(range_m=float("nan")), "range_m"),
    (lambda: ResourceCap(groups=[[0, 1]], caps=[1, 2]), "groups"),
    (lambda: ResourceCap(groups=(0, 1), caps=(1.0,)), "caps"),
    (lambda: ResourceCap(groups=(0, 0), caps=(1.0, 2.0)), "caps"),
    (lambda: ResourceCap(groups=(0, 0), caps=(float("nan"),)), "caps[0]"),
    (lambda: ResourceCap(groups=(0, 0), caps=(-1.0,)), "caps[0]"),
    (lambda: ResourceCap(groups=(0, -2), caps=(1.0,)), "groups"),
])
def test_constraint_constructors_refuse_nonsense(make, arg):
    with pytest.raises(ValueError) as e:
        make()
    assert f": {arg} must be" in str(e.value) or (arg == "caps" and "caps has" in str(e.value))


def test_valid_constraints_still_build_and_count():
    sep = Separation(min_dist=1)
    cap = ResourceCap(groups=[0, 0, 1], caps=[1, 2])
    assert cap.groups == (0, 0, 1) and cap.caps == (1.0, 2.0) and hash(cap)  # stored as tuples
    pos = np.zeros((1, 2, 2))
    nxt = np.array([[[0.0, 0.0], [0.0, 0.5]]])
    assert count_violations([sep], pos, nxt, np.zeros((1, 2)))["separation"].tolist() == [1.0]
    assert KeepConnected(range_m=2.0).range_m == 2.0


def test_count_violations_refuses_nan_positions():
    with pytest.raises(ValueError, match=r"next_positions must be finite; got nan at env 0 agent 0"):
        count_violations([Separation(min_dist=1)], np.zeros((1, 2, 2)), np.full((1, 2, 2), np.nan), np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"positions must be finite"):
        count_violations([Separation(min_dist=1)], np.full((1, 2, 2), np.inf), np.zeros((1, 2, 2)), np.zeros((1, 2)))
    assert math.isfinite(float(count_violations([Separation()], np.zeros((1, 2, 2)), np.zeros((1, 2, 2)),
                                                np.zeros((1, 2)))["separation"][0]))
