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
