"""Session 32: the lows left by fresh-user pass 31b, and what fresh-user pass 32 found."""
from cli_helpers import ROOT, _err, run_cli

SAFETY = ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"


def test_huge_integer_is_called_too_large_and_num_runs_is_bounded():
    err = _err(run_cli("validate", SAFETY, "shield.params.num_runs=1e30"))
    assert "key 'shield.params.num_runs': invalid value 1e+30: is too large for an integer parameter" in err
    assert "input string" not in err
    err = _err(run_cli("validate", SAFETY, "shield.params.num_runs=1e10"))
    assert "less than or equal to 1000000000" in err and "1 .. 10**9" in err
    assert run_cli("validate", SAFETY, "shield.params.num_runs=1000000000").returncode == 0


def test_second_config_file_is_named_as_such():
    other = ROOT / "configs" / "safety" / "coop-grid4x4-3ag-all.yaml"
    err = _err(run_cli("validate", SAFETY, other))
    assert "looks like a second config file, but a command takes one config" in err and "must look like" not in err
    assert "must look like key.path=value" in _err(run_cli("validate", SAFETY, "seeds"))


# fresh-user pass 32b

DDACOM_RUN = ROOT / "configs" / "mpe" / "spread-po-ddacom-markov.yaml"


def test_run_config_sender_params_errors_name_the_key_without_a_traceback():
    err = _err(run_cli("validate", DDACOM_RUN, "agents.params.sender_params.capacity_window=0"))
    assert "key 'agents.params.sender_params.capacity_window': invalid value 0" in err
    err = _err(run_cli("validate", DDACOM_RUN, "agents.params.sender_params.bogus=0"))
    assert "key 'agents.params.sender_params.bogus': unknown parameter 'bogus'" in err and "capacity_window" in err
    err = _err(run_cli("validate", ROOT / "configs" / "mpe" / "spread-po-broadcast-markov.yaml",
                       "agents.id=comm/periodic-v0", "agents.params.sender_params.period_steps=0"))
    assert "key 'agents.params.sender_params.period_steps': invalid value 0" in err


def test_capacity_window_is_finite_and_bounded():
    import pytest
    from pydantic import ValidationError

    from coopsim.agents.ddacom.sender import DDACOMSenderParams
    from coopsim.comm.probe import SafeRateProbeParams

    for model in (DDACOMSenderParams, SafeRateProbeParams):
        extra = {} if model is DDACOMSenderParams else dict(initial_rate_bps=1.0, min_rate_bps=1.0, max_rate_bps=2.0)
        assert model(capacity_window=1000, **extra).capacity_window == 1000
        for bad in (float("inf"), 1001, 0.5):
            with pytest.raises(ValidationError):
                model(capacity_window=bad, **extra)
    err = _err(run_cli("validate", DDACOM_RUN, "agents.params.sender_params.capacity_window=inf"))
    assert "must be a finite number" in err


def test_unknown_smac_map_id_points_to_the_generic_id():
    err = _err(run_cli("validate", ROOT / "configs" / "smac" / "3m-focus-fire.yaml", "scenario.id=smac/zerg_7_vs_9-v0"))
    assert "scenario.id=smac/SMAC-v0 with scenario.params.map_name=zerg_7_vs_9" in err
    assert "Did you mean" not in err


def test_qmix_and_ppo_warn_alike_when_a_fitting_policy_was_trained_on_another_scenario(tmp_path, capsys):
    import torch

    from coopsim.platform import registry as reg

    grid = reg.make_scenario("coop_game/Grid4x4-v0", num_envs=1)
    for agent_id in ("qmix/qmix-v0", "ppo/mappo-v0"):
        agent = reg.make_component("agent", agent_id, grid)
        ck = agent.checkpoint()
        f = tmp_path / f"{agent_id.split('/')[0]}.pt"
        torch.save(ck, f)
        agent.load(f)
        assert "warning" not in capsys.readouterr().err  # its own scenario: no word
        torch.save({**ck, "scenario": {**ck["scenario"], "id": "coop_game/Grid-v0"}}, f)
        agent.load(f)
        err = capsys.readouterr().err
        assert err.count("warning:") == 1 and "trained on scenario 'coop_game/Grid-v0'" in err
        assert "this run's scenario is 'coop_game/Grid4x4-v0'" in err
        torch.save({k: v for k, v in ck.items() if k != "scenario"}, f)  # an older file without the record
        agent.load(f)
        assert "warning" not in capsys.readouterr().err


def test_sender_params_refuse_booleans_for_numbers_and_numbers_for_booleans():
    from coopsim.agents.comm_baselines.team import check_sender_params
    from coopsim.errors import ConfigError
    import pytest

    with pytest.raises(ConfigError, match="a number is required, not a boolean") as e:
        check_sender_params("ddacom", {"capacity_window": True}, key="--sender-param")
    assert e.value.key == "--sender-param ddacom.capacity_window"
    with pytest.raises(ConfigError, match=r"a boolean \(true or false\) is required, not a number \(write true\)"):
        check_sender_params("ddacom", {"curvature": 1}, key="sender_params", file="x.yaml")
    check_sender_params("ddacom", {"capacity_window": 3, "curvature": True, "hist_weight": 0})  # valid: no error
    err = _err(run_cli("validate", DDACOM_RUN, "agents.params.sender_params.capacity_window=true"))
    assert "key 'agents.params.sender_params.capacity_window': invalid value true: a number is required" in err
