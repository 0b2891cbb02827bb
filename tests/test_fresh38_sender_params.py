"""fresh38 N3, N4/N9, N5, N8, N10b: DDACOM's (and every sender's) params as a run config, an ns-3 experiment file,
``--sender-param`` and the Python API take them.

N3: ``010`` / ``1_0`` (YAML 1.1 reads 8 and 10, Python 10) are refused with the decimal to write, also in a run
config's ``agents.params.sender_params`` (which takes any mapping: they were read as 10 there). N4/N9: a refusal
that an override of another key caused (``max_growth=null`` beside the file's ``startup_growth``) names that
override as typed (``null``, not ``None``). N5: "remove the quotes" only for a value that was quoted (an unquoted
``1e5_0`` or ``t`` is a string too). N8: a key only the delay-based probe reads, given with ``delay_based: false``,
is refused (left out, or at its default since fresh38 F7a, it is not read). N10b: ``DDACOMSender(startup_growth=2)`` raises a one-line ConfigError.
No ns-3 and no run: the experiment's first work is replaced by a function that fails the test.
"""
from __future__ import annotations

import re
import typing

import numpy as np
import pytest
import yaml

from cli_helpers import DDACOM_RUN, ROOT, _err, ddacom_run_config, experiment_until_work, run_cli
from coopsim.agents.comm_baselines.senders import BroadcastSender, NoCommSender, PeriodicSender
from coopsim.agents.comm_baselines.team import check_sender_params
from coopsim.agents.ddacom.evaluate import CHECK_DIMS, TypedParams, check_config_sender_params, parse_sender_params
from coopsim.agents.ddacom.sender import DELAY_BASED_KEYS, DDACOMSender, DDACOMSenderParams
from coopsim.comm.ns3 import experiment
from coopsim.comm.probe import SafeRateProbe, SafeRateProbeParams
from coopsim.errors import ConfigError, CrossKeyError
from coopsim.platform.comm import Feedback
from coopsim.platform.config import UniqueKeyLoader, quoted_advice, reject_quoted_scalars



_run_config = ddacom_run_config


def _one(item: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse_sender_params([item], ["ddacom"])
    assert "\n" not in str(e.value)
    return str(e.value)


# ---------------------------------------------------------------------------------------------------------- N3

@pytest.mark.parametrize("value, text", [
    ("010", "010 has a leading zero, which YAML 1.1 reads as the octal number 8; write 10"),
    ("1_0", "1_0 has underscores, which YAML 1.1 drops (= 10); write 10"),
    ("08", "08 has a leading zero, which YAML 1.1 reads as the string '08'; write 8"),
])
def test_an_option_with_a_leading_zero_or_underscores_is_refused_with_the_decimal_to_write(value, text):
    assert _one(f"ddacom.hold_steps={value}") == f"key '--sender-param ddacom.hold_steps': {text}"
    assert parse_sender_params(["ddacom.hold_steps=10"], ["ddacom"]) == {"ddacom": {"hold_steps": 10}}


def test_a_run_configs_sender_params_refuse_a_leading_zero_they_read_as_10(tmp_path):
    # before: agents.params.sender_params takes any mapping, so 010 reached DDACOM as the text '010', read as 10
    err = _err(run_cli("validate", DDACOM_RUN, "agents.params.sender_params.hold_steps=010"))
    assert err == (f"error: command-line override 'agents.params.sender_params.hold_steps=010' (config {DDACOM_RUN}): "
                   "key 'agents.params.sender_params.hold_steps': 010 has a leading zero, which YAML 1.1 reads as the "
                   "octal number 8; write 10")
    cfg = _run_config(tmp_path, "{cap_m: 1_0.5}")
    out = tmp_path / "runs"
    err = _err(run_cli("run", cfg, f"out_dir={out}"))
    assert re.fullmatch(rf"error: {re.escape(cfg)}: key 'agents\.params\.sender_params\.cap_m': line 7, column \d+: "
                        r"1_0\.5 has underscores, which YAML 1\.1 drops \(= 10\.5\); write 10\.5", err), err
    assert not out.exists()  # refused before the run started


def test_the_sender_refuses_yaml11_numbers_from_any_yaml_as_well():
    # e.g. DDACOM's generator hook, whose sender_params (any mapping) reach DDACOMSender as read
    params = yaml.load("{hold_steps: 010}", Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    with pytest.raises(ConfigError) as e:
        DDACOMSender(**params)
    assert str(e.value).startswith("key 'hold_steps': invalid value '010': line 1, column 14: 010 has a leading zero, "
                                   "which YAML 1.1 reads as the octal number 8; write 10")
    assert DDACOMSender(hold_steps=10).params.hold_steps == 10


@pytest.fixture
def ns3(tmp_path, monkeypatch):
    """``ns3(ddacom, *options)``: the ns-3 experiment on a file whose ``sender_params.ddacom`` is the YAML text
    ``ddacom``; (the one-line error or None when the first work started, the file)."""
    return experiment_until_work(tmp_path, monkeypatch)


def test_the_ns3_experiment_file_refuses_them_too(ns3):
    err, cfg = ns3("{hold_steps: 1_0}")
    assert err == (f"error: {cfg}: key 'sender_params.ddacom.hold_steps': line 20, column 24: 1_0 has underscores, "
                   "which YAML 1.1 drops (= 10); write 10")
    err, _ = ns3("{}", "ddacom.up_after=010")
    assert err == ("error: key '--sender-param ddacom.up_after': 010 has a leading zero, which YAML 1.1 reads as the "
                   "octal number 8; write 10")
    assert ns3("{hold_steps: 10}", "ddacom.up_after=10")[0] is None  # the decimal: taken


# ---------------------------------------------------------------------------------------------------- N4 / N9

@pytest.mark.parametrize("override, key, text", [
    ("max_growth=null", "startup_growth", "invalid value 2: must come with max_growth"),
    # (both keys of the file that delay_based: false refuses, in one message: fresh38 F3)
    ("delay_based=false", "max_growth", "max_growth 1.25 and startup_growth 2 are read by the delay-based probe only"),
    ("hold_steps=300", "max_hold_steps", "invalid value 200: must be >= hold_steps (300; max_hold_steps is 200 unless "
                                         "given): give max_hold_steps >= 300 with it"),
])
def test_validate_names_the_override_that_made_a_key_of_the_file_invalid(override, key, text, tmp_path):
    # before: the message named the file only ('/tmp/.../run.yaml: key ...startup_growth'), not the override given
    cfg = _run_config(tmp_path, "{startup_growth: 2, max_growth: 1.25}")
    err = _err(run_cli("validate", cfg, f"agents.params.sender_params.{override}"))
    assert err.startswith(f"error: command-line override 'agents.params.sender_params.{override}' (config {cfg}): "
                          f"key 'agents.params.sender_params.{key}': {text}"), err


def test_a_cross_key_refusal_carries_its_other_keys_into_the_config_error():
    with pytest.raises(ConfigError) as e:
        check_sender_params("ddacom", {"startup_growth": 2}, key="agents.params.sender_params")
    assert e.value.key == "agents.params.sender_params.ddacom.startup_growth"
    assert e.value.also == ("agents.params.sender_params.ddacom.max_growth",)
    with pytest.raises(ConfigError) as e:
        check_sender_params("ddacom", {"cap_m": -1}, key="sender_params")
    assert e.value.also == ()  # a check of one key names no other
    with pytest.raises(ValueError) as e:
        DDACOMSenderParams(min_rate_frac=0.5)
    cause = e.value.errors()[0]["ctx"]["error"]
    assert isinstance(cause, CrossKeyError) and cause.also == ("initial_rate_frac",)


@pytest.mark.parametrize("ddacom, options, text", [
    # the options that the check involves, as typed (null and false, not Python's None and False)
    ("{startup_growth: 2, max_growth: 1.25}", ["ddacom.max_growth=null", "ddacom.cap_m=1e1"],
     "key 'sender_params.ddacom.startup_growth': invalid value 2: must come with max_growth (the cap it raises in the "
     "first reports; without max_growth the estimate is not capped at all); give max_growth in (1, 2), e.g. 1.25 "
     "(delay-based: in the startup phase (until the measured capacity first limits the estimate, or a loss) the "
     "estimate may grow to this times the offered rate instead of max_growth, as TCP slow start; null (None in "
     "Python) = no startup phase (SafeRateProbeParams)) (with --sender-param ddacom.max_growth=null)"),
    ("{capacity_window: 4}", ["ddacom.cap_m=1e1", "ddacom.delay_based=false"],
     "(with --sender-param ddacom.delay_based=false)"),
    # no option the check involves: every option given, as typed
    ("{min_rate_frac: 0.5}", ["ddacom.cap_m=1e1"], "(with --sender-param ddacom.cap_m=1e1)"),
])
def test_the_ns3_experiment_names_the_options_as_typed(ns3, ddacom, options, text):
    err, cfg = ns3(ddacom, *options)
    assert err.startswith(f"error: {cfg}: key 'sender_params.ddacom.") and err.endswith(text), err


def test_an_option_refused_for_a_key_of_the_file_names_that_key(ns3):
    err, cfg = ns3("{delay_based: false}", "ddacom.capacity_window=4")
    assert err == ("error: key '--sender-param ddacom.capacity_window': invalid value 4: capacity_window 4 is read by "
                   "the delay-based probe only (with delay_based false it would be ignored): it needs delay_based: "
                   "true (DDACOM's default); remove capacity_window (or give it its default, 1) or delay_based: "
                   "false (delay-based: EWMA horizon "
                   "(reports) of the measured capacity, averaged as time per bit; 1 = the last report, at most 1000 "
                   f"(SafeRateProbeParams)) ({cfg} sets sender_params.ddacom.delay_based: false)")


def test_parse_sender_params_keeps_the_text_typed():
    got = parse_sender_params(["ddacom.min_deviation_m=null", "ddacom.resend_lost=false", "ddacom.cap_m=1e1"],
                              ["ddacom"])
    assert got == {"ddacom": {"min_deviation_m": None, "resend_lost": False, "cap_m": 10}}
    assert isinstance(got["ddacom"], TypedParams)
    assert got["ddacom"].typed == {"min_deviation_m": "null", "resend_lost": "false", "cap_m": "1e1"}
    # a plain dict (from Python): the values written as YAML writes them
    with pytest.raises(ConfigError) as e:
        check_config_sender_params("ddacom", {"startup_growth": 2}, {"max_growth": None}, file="f.yaml")
    assert str(e.value).endswith("(with --sender-param ddacom.max_growth=null)")


# ---------------------------------------------------------------------------------------------------------- N5

@pytest.mark.parametrize("item, text", [
    ("ddacom.cap_m=1e5_0", "invalid value '1e5_0': a number is required, not a string (write 1e+50)"),
    ("ddacom.delay_based=t", "invalid value 't': a boolean (true or false) is required, not a string (write true)"),
    ("ddacom.delay_based=tRUE", "invalid value 'tRUE': a boolean (true or false) is required, not a string (write "
                                "true)"),
    ("ddacom.cap_m=\u0661\u0660", "invalid value '\u0661\u0660': a number is required, not a string (write 10.0)"),
    # quoted: the quotes are the thing to remove (and a leading zero with them)
    ('ddacom.cap_m="0.5"', "invalid value '0.5': a number is required, not a string (remove the quotes: 0.5)"),
    ("ddacom.delay_based='yes'", "invalid value 'yes': a boolean (true or false) is required, not a string (remove "
                                 "the quotes: true)"),
    ("ddacom.hold_steps='010'", "invalid value '010': an integer is required, not a string (remove the quotes: 10)"),
    ("ddacom.cap_m='010'", "invalid value '010': a number is required, not a string (remove the quotes: 10)"),
    ("ddacom.cap_m='1_000'", "invalid value '1_000': a number is required, not a string (remove the quotes: 1000.0)"),
    # not a number at all: pydantic's words, no quotes to remove
    ("ddacom.target_utilization=abc", "invalid value 'abc': Input should be a valid number, unable to parse string as "
                                      "a number"),
    ("ddacom.target_utilization=1e", "invalid value '1e': Input should be a valid number, unable to parse string as "
                                     "a number"),
])
def test_remove_the_quotes_only_for_a_quoted_value(item, text):
    key = item.split("=")[0]
    err = _one(item)
    assert err.startswith(f"key '--sender-param {key}': {text}"), err
    assert ("remove the quotes" in err) == ("'" in item.split("=", 1)[1] or '"' in item)


def test_the_same_advice_in_a_config_file_and_for_run_config_keys(tmp_path):
    cfg = _run_config(tmp_path, "{cap_m: 1e5_0, delay_based: t}")
    err = _err(run_cli("validate", cfg))
    assert err.startswith(f"error: {cfg}: key 'agents.params.sender_params.cap_m': invalid value '1e5_0': a number is "
                          "required, not a string (write 1e+50)"), err
    err = _err(run_cli("validate", DDACOM_RUN, "episodes=\u0661\u0660"))
    assert "must be an integer, not the string '\u0661\u0660' (episodes" in err and "remove the quotes" not in err
    err = _err(run_cli("validate", DDACOM_RUN, "episodes='10'"))
    assert "must be an integer, not the string '10' (remove the quotes)" in err


def test_quoted_advice():
    assert quoted_advice("0.5", "0.5") == "remove the quotes: 0.5"  # 0.5 plain is a number
    assert quoted_advice("yes", "true") == "remove the quotes: true"  # yes plain is YAML 1.1's true
    assert quoted_advice("1_000", "1000") == "remove the quotes: 1000"  # 1_000 plain is refused as such
    assert quoted_advice("t", "true") == "write true"  # t plain is the string 't' too
    assert quoted_advice("1e5_0", "1e+50") == "write 1e+50"
    with pytest.raises(ConfigError, match=re.escape("invalid value 't': a boolean (true or false) is required, not a "
                                                    "string (write true)")):
        reject_quoted_scalars({"delay_based": "t"}, SafeRateProbeParams)


# ---------------------------------------------------------------------------------------------------------- N8

def _described_delay_based(k: str) -> bool:
    d = DDACOMSenderParams.model_fields[k].description or ""
    return d.startswith(("delay-based", "cross-traffic margin"))


def test_the_delay_based_keys_are_those_described_so():
    assert set(DELAY_BASED_KEYS) == {k for k in DDACOMSenderParams.model_fields if _described_delay_based(k)}
    assert len(DELAY_BASED_KEYS) == 12


#: a value other than the default of each delay-based key (with what it needs beside it)
OTHER = {"target_utilization": 0.7, "base_delay_s": 0.01, "curvature": False, "ceiling_limited_only": False,
         "max_growth": 1.25, "startup_growth": 1.75, "app_limited_hold": True, "capacity_window": 4,
         "xtraffic_gain": 1.0, "xtraffic_window": 10, "xtraffic_ref_window": 50, "xtraffic_min_utilization": 0.5}
NEEDS = {"startup_growth": {"max_growth": 1.25}, "app_limited_hold": {"max_growth": 1.25}}


@pytest.mark.parametrize("key", DELAY_BASED_KEYS)
def test_a_delay_based_key_given_with_delay_based_false_is_refused(key):
    value, default = OTHER[key], DDACOMSenderParams.model_fields[key].default
    with pytest.raises(ConfigError) as e:
        DDACOMSender(delay_based=False, **{key: value})

    def shown(x):
        return {None: "null", True: "true", False: "false"}.get(x, x) if not isinstance(x, float) else f"{x:g}"

    first = repr(value) if not isinstance(value, bool) else shown(value)  # 'invalid value': as YAML writes it
    assert str(e.value).startswith(
        f"key '{key}': invalid value {first}: {key} {shown(value)} is read by the delay-based probe only (with "
        f"delay_based false it would be ignored): it needs delay_based: true (DDACOM's default); remove {key} (or "
        f"give it its default, {shown(default)}) or delay_based: false ("), str(e.value)
    assert "\n" not in str(e.value)
    # at its default (startup_growth: null, app_limited_hold: false) it asks for nothing: taken (fresh38 F7a)
    assert getattr(DDACOMSender(delay_based=False, **{key: default}).params, key) == default
    # with delay_based true (given or by default) it is taken as given
    for db in ({}, {"delay_based": True}):
        assert getattr(DDACOMSender(**db, **NEEDS.get(key, {}), **{key: OTHER[key]}).params, key) == OTHER[key]


def test_delay_based_false_alone_keeps_working_and_its_probe_reads_no_delay_based_key():
    base = DDACOMSender(delay_based=False)
    assert base.params.delay_based is False and base.params.max_growth is None
    # the loss-based probe gives the same estimates whatever the delay-based keys are: they were ignored
    rng = np.random.default_rng(0)
    reports = []
    for _ in range(60):
        d = rng.integers(0, 3000, (1, 2)).astype(float)
        lost = np.where(rng.random((1, 2)) < 0.2, rng.integers(0, 300, (1, 2)), 0).astype(float)
        reports.append(Feedback(delivered_bytes=d, lost_bytes=lost, delivered_copies=d // 40, lost_copies=lost // 40,
                                latency_max_s=rng.uniform(0.0, 0.1, (1, 2))))
    common = dict(initial_rate_bps=8000, min_rate_bps=1000, max_rate_bps=1e5, dt_s=0.1, delay_based=False)
    probe_other = {k: v for k, v in OTHER.items() if k not in ("startup_growth", "app_limited_hold")}
    runs = []
    for kw in ({}, probe_other):
        p = SafeRateProbe((1, 2), **common, **kw)
        runs.append(np.array([p.update(fb).copy() for fb in reports]))
    assert np.array_equal(runs[0], runs[1])


def test_validate_and_the_ns3_experiment_refuse_them(tmp_path, ns3):
    err = _err(run_cli("validate", DDACOM_RUN, "agents.params.sender_params={delay_based: false, capacity_window: 4}"))
    assert err.startswith("error: command-line override 'agents.params.sender_params={delay_based: false, "
                          f"capacity_window: 4}}' (config {DDACOM_RUN}): key 'agents.params.sender_params."
                          "capacity_window': invalid value 4: capacity_window 4 is read by the delay-based probe only")
    err, cfg = ns3("{delay_based: false, xtraffic_gain: 1.0}")
    assert err.startswith(f"error: {cfg}: key 'sender_params.ddacom.xtraffic_gain': invalid value 1.0: xtraffic_gain "
                          "1 is read by the delay-based probe only")
    assert ns3("{delay_based: false, hold_steps: 10}")[0] is None  # a loss-based key: taken


def test_the_shipped_ns3_configs_still_load():
    for path in sorted((ROOT / "configs" / "ns3").glob("*.yaml")):
        cfg = experiment.load(str(path))
        for snd in cfg["senders"]:
            check_config_sender_params(snd, cfg["sender_params"].get(snd) or {}, {}, file=str(path))
        assert cfg["sender_params"]["ddacom"]["max_growth"] == 1.25


# --------------------------------------------------------------------------------------------------------- N10b

def test_the_python_api_raises_one_line_config_errors():
    with pytest.raises(ConfigError) as e:
        DDACOMSender(startup_growth=2)
    assert str(e.value).startswith("key 'startup_growth': invalid value 2: must come with max_growth (the cap it raises "
                                   "in the first reports; without max_growth the estimate is not capped at all); give "
                                   "max_growth in (1, 2), e.g. 1.25 (delay-based:")
    assert "\n" not in str(e.value) and e.value.key == "startup_growth" and e.value.value == 2
    assert e.value.also == ("max_growth",)
    for cls, kw, text in ((DDACOMSender, {"cap_m": -1}, "key 'cap_m': invalid value -1: Input should be greater than 0"),
                          (DDACOMSender, {"hold_steps": True}, "key 'hold_steps': invalid value true: a number is "
                                                               "required, not a boolean"),
                          (PeriodicSender, {"period_steps": 0}, "key 'period_steps': invalid value 0:"),
                          (BroadcastSender, {"x": 1}, "key 'x': unknown parameter 'x' (value 1); BroadcastSender "
                                                      "takes no parameters (remove params)"),
                          (NoCommSender, {"cap_m": "2"}, "key 'cap_m': unknown parameter 'cap_m'")):
        with pytest.raises(ConfigError) as e:
            cls(**kw)
        assert str(e.value).startswith(text) and "\n" not in str(e.value), str(e.value)


def test_valid_params_are_taken_as_before():
    s = DDACOMSender(max_growth=1.25, startup_growth=1.75, app_limited_hold=True, hold_steps=10, cap_m=2)
    s.reset(**CHECK_DIMS)
    assert (s.params.max_growth, s.params.startup_growth, s.params.app_limited_hold, s.params.hold_steps,
            s.params.cap_m) == (1.25, 1.75, True, 10, 2.0)
    assert s.probe.params.startup_growth == 1.75 and s.probe.params.delay_based is True
    assert DDACOMSender(delay_based=False).params.model_dump() == {**DDACOMSenderParams().model_dump(),
                                                                   "delay_based": False}
    assert typing.get_args(DDACOMSenderParams.model_fields["max_growth"].annotation)  # Optional: null is a value
