"""fresh37 F2, F5, F9, F15 in ``python -m coopsim.comm.ns3.experiment``: the sender params of the file and of
``--sender-param`` are checked as DDACOM (and its probe) will take them before the anchors, the oracle or ns-3; a
refusal names the option when the refused key came from it, else the file and ``sender_params.<sender>.<key>``.
No ns-3: the anchors (the first work) are replaced by a function that fails the test."""
from __future__ import annotations

import pytest

from cli_helpers import experiment_until_work
from coopsim.comm.ns3 import experiment

@pytest.fixture
def go(tmp_path, monkeypatch):
    return experiment_until_work(tmp_path, monkeypatch)


@pytest.mark.parametrize("ddacom, options, text", [
    ({}, ["ddacom.startup_growth=inf"],
     "error: key '--sender-param ddacom.startup_growth': invalid value 'inf': must be a finite number"),
    ({}, ["ddacom.startup_growth=1e400"],
     "error: key '--sender-param ddacom.startup_growth': invalid value inf: must be a finite number"),
    ({}, ["ddacom.cap_m=inf"], "error: key '--sender-param ddacom.cap_m': invalid value 'inf': must be a finite"),
    ({}, ["ddacom.hold_steps=300"], "error: key '--sender-param ddacom.max_hold_steps': invalid value 200: must be >= "
                                    "hold_steps (300; max_hold_steps is 200 unless given): give max_hold_steps >= 300"),
    ({}, ["ddacom.up_factor=1.5"], "error: key '--sender-param ddacom.max_up_factor': invalid value 1.3: must be >= "
                                   "up_factor (1.5; max_up_factor is 1.3 unless given)"),
    ({"max_growth": 1.25, "startup_growth": 1.75}, ["ddacom.startup_growth="],
     "error: key '--sender-param ddacom.startup_growth': invalid value '': the value is empty (nothing after '='); "
     "give a value, or write null to switch the option off (ddacom.startup_growth=null)"),
    ({}, ["ddacom.startup_growth=None"], "error: key '--sender-param ddacom.startup_growth': invalid value 'None': "
                                         "write null for no value (None in Python)"),
    ({}, ['ddacom.max_growth="1.75"'], "error: key '--sender-param ddacom.max_growth': invalid value '1.75': a number "
                                       "is required, not a string (remove the quotes: 1.75)"),
    # the file's max_hold_steps (the file's 250) with the option's hold_steps: named in the file, the option said
    ({"max_hold_steps": 250}, ["ddacom.hold_steps=300"],
     "key 'sender_params.ddacom.max_hold_steps': invalid value 250: must be >= hold_steps (300; "),
    # the option's max_hold_steps below the file's hold_steps: the option is named
    ({"hold_steps": 300}, ["ddacom.max_hold_steps=250"],
     "error: key '--sender-param ddacom.max_hold_steps': invalid value 250: must be >= hold_steps (300;"),
])
def test_option_values_are_refused_before_any_run(go, ddacom, options, text):
    err, cfg = go(ddacom, *options)
    assert err is not None and text in err, err
    if text.startswith("key 'sender_params"):
        assert err.startswith(f"error: {cfg}: key 'sender_params.ddacom.") and "(with --sender-param " \
               "ddacom.hold_steps=300)" in err


@pytest.mark.parametrize("ddacom, key, text", [
    ("{max_growth: 1.25, startup_growth: .inf}", "startup_growth", "invalid value inf: must be a finite number"),
    ("{cap_m: .nan}", "cap_m", "invalid value nan: must be a finite number"),
    ("{max_growth: 1.25, startup_growth: '1.75'}", "startup_growth",
     "invalid value '1.75': a number is required, not a string (remove the quotes: 1.75)"),
    ("{hold_steps: 300}", "max_hold_steps", "invalid value 200: must be >= hold_steps (300; max_hold_steps is 200 "
                                            "unless given)"),
    ("{up_factor: 1.5}", "max_up_factor", "invalid value 1.3: must be >= up_factor (1.5; max_up_factor is 1.3"),
])
def test_file_values_are_refused_before_any_run_naming_the_file(go, ddacom, key, text):
    err, cfg = go(ddacom)
    assert err is not None and err.startswith(f"error: {cfg}: key 'sender_params.ddacom.{key}': {text}"), err


@pytest.mark.parametrize("ddacom, options", [
    ({"hold_steps": 300}, ["ddacom.max_hold_steps=300"]),  # valid together: neither is checked alone
    ({"max_hold_steps": 400}, ["ddacom.hold_steps=300"]),
    ({"max_growth": 1.25}, ["ddacom.startup_growth=2"]),  # the option needs the file's max_growth
    ({"max_growth": 1.25, "startup_growth": 1.75}, ["ddacom.startup_growth=null"]),
    ({}, ["ddacom.cap_m=1e3", "ddacom.up_factor=1.5", "ddacom.max_up_factor=1.5"]),
])
def test_valid_values_reach_the_run(go, ddacom, options):
    err, _ = go(ddacom, *options)
    assert err is None
