"""fresh37 F2, F5, F9, F14, F15: sender params refuse what the sender (DDACOM's probe) would refuse later.

F2/F14: inf and nan refused by every sender's params (``cap_m=inf`` muted DDACOM; ``startup_growth=inf`` failed
only when the probe was built, after the anchors). F5: DDACOM checks ``max_hold_steps >= hold_steps`` and
``max_up_factor >= up_factor`` itself, quoting its own defaults (200, 1.3), not the probe's (5, 1.05). F15: a quoted
number is refused by every sender's params with the probe's "remove the quotes" message. F9: an empty
``--sender-param`` value is refused; ``None`` says to write ``null``; the descriptions say "null (None in Python)".
The evaluate CLI refuses all of these before any run.
"""
from __future__ import annotations

import itertools
import re
import math
import typing

import pytest

from cli_helpers import ROOT, _err, run_cli, run_main
from coopsim.agents.comm_baselines.team import SENDER_NAMES, check_sender_params, sender_class
from coopsim.agents.ddacom import evaluate
from coopsim.agents.ddacom.evaluate import CHECK_DIMS, check_sender_build, parse_sender_params
from coopsim.agents.ddacom.sender import DDACOMSender, DDACOMSenderParams
from coopsim.comm.probe import SafeRateProbe, SafeRateProbeParams
from coopsim.errors import ConfigError

DDACOM_RUN = ROOT / "configs" / "mpe" / "spread-po-ddacom-markov.yaml"


def _numeric(cls) -> list[tuple[str, str]]:
    """``(field, "int" | "float")`` of every number field of a params class."""
    out = []
    for k, f in cls.model_fields.items():
        args = typing.get_args(f.annotation) or (f.annotation,)
        kind = "int" if int in args else "float" if float in args else None
        if kind:
            out.append((k, kind))
    return out


PARAMS = [sender_class(s).Params for s in SENDER_NAMES]


@pytest.mark.parametrize("cls", PARAMS, ids=lambda c: c.__name__)
def test_every_sender_params_class_refuses_non_finite_numbers(cls):
    for k, kind in _numeric(cls):
        if kind != "float":
            continue
        for bad in (math.inf, -math.inf, math.nan):
            with pytest.raises(ConfigError, match=rf"key '--sender-param x\.{k}': invalid value .*must be a finite"):
                check_sender_params_as(cls, {k: bad})


def check_sender_params_as(cls, params):
    name = next(s for s in SENDER_NAMES if sender_class(s).Params is cls)
    from coopsim.agents.comm_baselines.team import _sender_params

    return _sender_params(name, params, key_prefix="--sender-param x.")


def test_cap_m_inf_and_startup_growth_inf_are_refused_naming_the_option():
    with pytest.raises(ConfigError) as e:
        check_sender_params("ddacom", {"cap_m": math.inf}, key="--sender-param")
    assert str(e.value).startswith("key '--sender-param ddacom.cap_m': invalid value inf: must be a finite number")
    with pytest.raises(ConfigError) as e:
        check_sender_params("ddacom", {"startup_growth": math.inf, "max_growth": 1.25}, key="--sender-param")
    assert str(e.value).startswith("key '--sender-param ddacom.startup_growth': invalid value inf: must be a finite")


@pytest.mark.parametrize("cls", PARAMS, ids=lambda c: c.__name__)
def test_every_sender_params_class_refuses_a_quoted_number_as_the_probe_does(cls):
    for k, kind in _numeric(cls):
        text = "3" if kind == "int" else "1.75"
        with pytest.raises(ConfigError) as e:
            check_sender_params_as(cls, {k: text})
        required = "an integer" if kind == "int" else "a number"
        assert f"key '--sender-param x.{k}': invalid value '{text}': {required} is required, not a string (remove " \
               f"the quotes: {text})" in str(e.value)
    # the probe's own message, for comparison: the same words
    with pytest.raises(ConfigError, match=r"invalid value '2': a number is required, not a string \(remove the "
                                          r"quotes: 2\)"):
        SafeRateProbe((1,), initial_rate_bps=8000, min_rate_bps=1000, max_rate_bps=1e7, dt_s=0.1, delay_based=True,
                      max_growth=1.25, startup_growth="2")
    with pytest.raises(ConfigError, match=r"invalid value '2': a number is required, not a string \(remove the "
                                          r"quotes: 2\)"):
        check_sender_params("ddacom", {"max_growth": 1.25, "startup_growth": "2"})


def test_a_quoted_boolean_is_refused_too():
    with pytest.raises(ConfigError, match=r"invalid value 'true': a boolean \(true or false\) is required, not a "
                                          r"string \(remove the quotes: true\)"):
        check_sender_params("ddacom", {"resend_lost": "true"})


def test_run_config_refuses_a_quoted_sender_param():
    err = _err(run_cli("validate", DDACOM_RUN, 'agents.params.sender_params.max_growth="2"'))
    assert "key 'agents.params.sender_params.max_growth': invalid value '2': a number is required, not a string " \
           "(remove the quotes: 2)" in err


@pytest.mark.parametrize("kw, key, text", [
    (dict(hold_steps=300), "max_hold_steps",
     "invalid value 200: must be >= hold_steps (300; max_hold_steps is 200 unless given): give max_hold_steps >= 300"),
    (dict(max_hold_steps=3), "max_hold_steps",
     "invalid value 3: must be >= hold_steps (20; max_hold_steps is 200 unless given): give max_hold_steps >= 20"),
    (dict(up_factor=1.5), "max_up_factor",
     "invalid value 1.3: must be >= up_factor (1.5; max_up_factor is 1.3 unless given): give max_up_factor >= 1.5"),
    (dict(initial_rate_frac=0.01), "min_rate_frac",
     "invalid value 0.02: must be <= initial_rate_frac (0.01; min_rate_frac is 0.02 unless given)"),
])
def test_ddacom_checks_the_probes_pairs_with_its_own_defaults(kw, key, text):
    with pytest.raises(ConfigError) as e:
        check_sender_params("ddacom", kw, key="--sender-param")
    assert str(e.value).startswith(f"key '--sender-param ddacom.{key}': {text}")
    assert "its default, 5" not in str(e.value) and "1.05" not in str(e.value)


VALUES = {"hold_steps": [0, 20, 300], "max_hold_steps": [0, 200, 300], "up_factor": [1.05, 1.3, 1.5],
          "max_up_factor": [1.05, 1.3, 1.5], "initial_rate_frac": [0.01, 0.2], "min_rate_frac": [0.01, 0.02, 0.5],
          "max_growth": [None, 1.25, 2.0], "startup_growth": [None, 1.75], "delay_based": [True, False],
          "app_limited_hold": [False, True]}


def test_what_ddacoms_params_accept_its_probe_accepts():
    # every combination: the params refuse it, or the sender builds its probe (no refusal left for the run's start)
    keys = list(VALUES)
    accepted = 0
    for combo in itertools.product(*VALUES.values()):
        kw = dict(zip(keys, combo))
        try:
            DDACOMSenderParams(**kw)
        except ValueError:
            continue
        DDACOMSender(**kw).reset(**CHECK_DIMS)
        accepted += 1
    assert accepted > 100


def test_check_sender_build_names_the_senders_key_for_a_probe_refusal(monkeypatch):
    # a refusal left to the probe (none is, today) is named under the sender's key, not the probe's bare one
    real = SafeRateProbe.__init__

    def strict(self, shape, **params):
        if params["hold_steps"] == 7:
            raise ConfigError("invalid value 7: refused by the probe", key="hold_steps", value=7)
        real(self, shape, **params)

    monkeypatch.setattr(SafeRateProbe, "__init__", strict)
    with pytest.raises(ConfigError) as e:
        check_sender_build("ddacom", {"hold_steps": 7}, key_prefix="--sender-param ddacom.")
    assert str(e.value) == "key '--sender-param ddacom.hold_steps': invalid value 7: refused by the probe"
    check_sender_build("ddacom", {"hold_steps": 8}, key_prefix="--sender-param ddacom.")


# F9

def test_descriptions_say_null_for_no_value():
    for cls in [*PARAMS, SafeRateProbeParams]:
        for k, f in cls.model_fields.items():
            d = f.description or ""
            assert "None =" not in d, (cls.__name__, k, d)
    # the optional params whose description says what no value means: in YAML and on the command line, null
    for cls, k in ((DDACOMSenderParams, "min_deviation_m"), (DDACOMSenderParams, "max_growth"),
                   (DDACOMSenderParams, "startup_growth"), (DDACOMSenderParams, "xtraffic_gain"),
                   (SafeRateProbeParams, "max_growth"), (SafeRateProbeParams, "startup_growth"),
                   (SafeRateProbeParams, "xtraffic_gain")):
        assert "null (None in Python) = " in cls.model_fields[k].description, (cls.__name__, k)


@pytest.mark.parametrize("item, text", [
    ("ddacom.startup_growth=", "key '--sender-param ddacom.startup_growth': invalid value '': the value is empty "
                               "(nothing after '='); give a value, or write null to switch the option off "
                               "(ddacom.startup_growth=null)"),
    ("ddacom.resend_lost= ", "key '--sender-param ddacom.resend_lost': invalid value ' ': the value is empty"),
    ("ddacom.target_utilization=", "key '--sender-param ddacom.target_utilization': invalid value '': the value is "
                                   "empty (nothing after '='); give a value"),
    ("ddacom.startup_growth=None", "key '--sender-param ddacom.startup_growth': invalid value 'None': write null for "
                                   "no value (None in Python), ddacom.startup_growth=null"),
])
def test_an_empty_or_none_option_value_is_refused(item, text):
    with pytest.raises(ConfigError) as e:
        parse_sender_params([item], ["ddacom"])
    assert str(e.value).startswith(text)


def test_option_values_read_as_run_overrides():
    got = parse_sender_params(["ddacom.startup_growth=null", "ddacom.cap_m=1e3", "ddacom.hold_steps=1e2",
                               "novelty.threshold_m=.5"], ["ddacom", "novelty"])
    assert got == {"ddacom": {"startup_growth": None, "cap_m": 1000, "hold_steps": 100}, "novelty": {"threshold_m": 0.5}}
    for item, text in (('ddacom.cap_m="2"', "remove the quotes: 2"), ("ddacom.cap_m=inf", "must be a finite number"),
                       ("ddacom.hold_steps=0x10", "YAML 1.1 hexadecimal")):
        with pytest.raises(ConfigError, match=re.escape(text)):
            parse_sender_params([item], ["ddacom"])


def _boom(*a, **k):
    raise AssertionError("a run started")


@pytest.mark.parametrize("item, text", [
    ("ddacom.startup_growth=inf", "error: key '--sender-param ddacom.startup_growth': invalid value 'inf': must be a "
                                  "finite number"),
    ("ddacom.cap_m=inf", "error: key '--sender-param ddacom.cap_m': invalid value 'inf': must be a finite number"),
    ("ddacom.hold_steps=300", "error: key '--sender-param ddacom.max_hold_steps': invalid value 200: must be >= "
                              "hold_steps (300; max_hold_steps is 200 unless given)"),
    ("ddacom.startup_growth=", "error: key '--sender-param ddacom.startup_growth': invalid value '': the value is "
                               "empty"),
    ('ddacom.max_growth="1.75"', "error: key '--sender-param ddacom.max_growth': invalid value '1.75': a number is "
                                 "required, not a string (remove the quotes: 1.75)"),
])
def test_evaluate_refuses_before_any_run(item, text, tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "run", _boom)
    out = tmp_path / "e.json"
    code, _, err = run_main(evaluate.main, ["--seeds", "1", "--num-envs", "2", "--episodes", "1", "--senders",
                                            "ddacom", "--out", str(out), "--sender-param", item])
    assert code == 2 and err.startswith(text) and len(err.splitlines()) == 1, err
    assert not out.exists()


