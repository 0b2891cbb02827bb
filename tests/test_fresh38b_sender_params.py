"""fresh38 F3-F7: DDACOM's sender params as a run config, the PPO comm hook (DDACOMGenerator), an ns-3 experiment file,
``--sender-param`` and the Python API take them.

F3: the delay-based keys refused beside ``delay_based: false`` are named all at once, and the ns-3 experiment says how
to run the loss-based probe on a delay-based file (a copy without them, or each given its default as an option).
F4: a refusal of the generator's ``sender_params`` names the override as typed and the full key. F5: ``hold_steps`` /
``max_hold_steps`` above 10**9 are refused in one line (2**63 was an OverflowError traceback). F6: values in messages
as YAML writes them (null, true). F7: a delay-based key at its default is taken beside ``delay_based: false``;
``app_limited_hold`` without ``max_growth`` says to give max_growth. No ns-3 and no run: the experiment's first work
is replaced by a function that fails the test.
"""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from cli_helpers import (DDACOM_AGENTS_LINE, DDACOM_RUN, ROOT, _err, ddacom_run_config,
                         experiment_until_work, run_cli)
from coopsim.agents.ddacom.evaluate import check_config_sender_params, parse_sender_params
from coopsim.agents.ddacom.generator import DDACOMGenerator
from coopsim.agents.ddacom.sender import (DELAY_BASED_KEYS, DDACOMSender, DDACOMSenderParams, DelayBasedOnlyError,
                                          delay_based_conflicts, delay_based_default)
from coopsim.comm.ns3 import experiment
from coopsim.comm.probe import MAX_HOLD_STEPS, SafeRateProbe
from coopsim.errors import ConfigError, value_text
from coopsim.platform.comm import Feedback
from coopsim.platform.hooks import CommModule, load_hook

AGENTS_LINE = DDACOM_AGENTS_LINE
SMOOTH = ROOT / "configs" / "ns3" / "ddacom-spread-smooth.yaml"
GEN = "coopsim.agents.ddacom.generator:DDACOMGenerator"
SP = "agents.params.sender_params"
GSP = "agents.params.comm.params.sender_params"

#: the delay-based keys of configs/ns3/ddacom-spread-smooth.yaml, as the messages list them, with their defaults
SMOOTH_KEYS = ("target_utilization 0.84, max_growth 1.25, startup_growth 1.75, app_limited_hold true, capacity_window 3, "
               "xtraffic_gain 1 and xtraffic_window 10")
SMOOTH_OPTIONS = ("--sender-param ddacom.target_utilization=1 --sender-param ddacom.max_growth=null --sender-param "
                  "ddacom.startup_growth=null --sender-param ddacom.app_limited_hold=false --sender-param "
                  "ddacom.capacity_window=1 --sender-param ddacom.xtraffic_gain=null --sender-param "
                  "ddacom.xtraffic_window=5")


_run_config = ddacom_run_config


def _gen_config(tmp_path, sender_params: str) -> str:
    """simple_spread with MAPPO and DDACOM's generator as its comm hook, ``sender_params`` (YAML) given to it."""
    text = DDACOM_RUN.read_text().replace(
        AGENTS_LINE, f"agents: {{id: ppo/mappo-v0, params: {{comm: {{module: '{GEN}', params: {{sender_params: "
                     f"{sender_params}}}}}}}}}")
    path = tmp_path / "gen.yaml"
    path.write_text(text)
    return str(path)


@pytest.fixture
def ns3(tmp_path, monkeypatch):
    """``ns3(file_or_ddacom, *options)``: the ns-3 experiment on a file (a path) or on a small file whose
    ``sender_params.ddacom`` is the YAML text given; the one-line error, or None when the first work started."""
    go = experiment_until_work(tmp_path, monkeypatch, "--senders", "ddacom", "--seeds", "1")
    return lambda what, *options: go(what, *options)[0]


# ---------------------------------------------------------------------------------------------------------- F3

def test_the_loss_based_ablation_of_a_shipped_ns3_file_names_every_key_and_the_options_that_run_it(ns3):
    # before: one key per attempt (7 rounds for this file), with advice no option could follow ('remove ...')
    rel = SMOOTH.relative_to(ROOT)
    err = ns3(rel, "ddacom.delay_based=false")
    assert err == (f"error: {rel}: key 'sender_params.ddacom.target_utilization': {SMOOTH_KEYS} are read by the "
                   "delay-based probe only (with delay_based false they would be ignored): they need delay_based: "
                   f"true (DDACOM's default); for the loss-based probe run a copy of {rel} without these 7 keys, or "
                   f"give each its default with --sender-param too: {SMOOTH_OPTIONS} (with --sender-param "
                   "ddacom.delay_based=false)")
    # the options given: the run starts, with the loss-based sender's params exactly
    options = ["ddacom.delay_based=false"] + SMOOTH_OPTIONS.replace("--sender-param ", "").split()
    assert ns3(rel, *options) is None
    cfg = experiment.load(str(SMOOTH))
    cli = parse_sender_params(options, ["ddacom"], check=False)["ddacom"]
    check_config_sender_params("ddacom", cfg["sender_params"]["ddacom"], cli, file=str(rel))
    taken = DDACOMSenderParams(**{**cfg["sender_params"]["ddacom"], **cli})
    assert taken.model_dump() == DDACOMSenderParams(delay_based=False).model_dump()


def test_every_shipped_ns3_file_names_all_its_delay_based_keys_at_once(ns3):
    for path in sorted((ROOT / "configs" / "ns3").glob("*.yaml")):
        given = experiment.load(str(path))["sender_params"]["ddacom"]
        keys = [k for k in DELAY_BASED_KEYS if k in given]
        err = ns3(path, "ddacom.delay_based=false")
        assert f"without these {len(keys)} keys" in err, err
        for k in keys:
            assert f"{k} {value_text(given[k]) if not isinstance(given[k], float) else f'{given[k]:g}'}" in err
            assert f"--sender-param ddacom.{k}=" in err


def test_a_delay_based_key_given_as_an_option_too_keeps_the_generic_advice(ns3):
    err = ns3("{target_utilization: 0.7}", "ddacom.delay_based=false", "ddacom.capacity_window=4")
    assert err.endswith("target_utilization 0.7 and capacity_window 4 are read by the delay-based probe only (with "
                        "delay_based false they would be ignored): they need delay_based: true (DDACOM's default); "
                        "remove these 2 keys (or give each its default: target_utilization 1, capacity_window 1) or "
                        "delay_based: false (with --sender-param ddacom.delay_based=false, ddacom.capacity_window=4)"), err


def test_the_python_api_names_every_delay_based_key_at_once():
    with pytest.raises(ConfigError) as e:
        DDACOMSender(delay_based=False, target_utilization=0.7, max_growth=1.25, xtraffic_gain=1.0)
    assert str(e.value) == ("key 'target_utilization': target_utilization 0.7, max_growth 1.25 and xtraffic_gain 1 "
                            "are read by the delay-based probe only (with delay_based false they would be ignored): "
                            "they need delay_based: true (DDACOM's default); remove these 3 keys (or give each its "
                            "default: target_utilization 1, max_growth null, xtraffic_gain null) or delay_based: false")
    assert e.value.key == "target_utilization" and e.value.value == 0.7
    assert e.value.also == ("delay_based", "max_growth", "xtraffic_gain")
    # another refusal first (an earlier key): it alone, as before
    with pytest.raises(ConfigError) as e:
        DDACOMSender(delay_based=False, target_utilization=0.7, hold_steps=-1)
    assert str(e.value).startswith("key 'hold_steps': invalid value -1: Input should be greater than or equal to 0")


def test_the_refusal_carries_the_keys_and_values():
    err = DelayBasedOnlyError("max_growth", 1.25)
    assert err.also == ("delay_based",) and (err.key, err.value) == ("max_growth", 1.25)
    assert str(err).endswith("remove max_growth (or give it its default, null) or delay_based: false")
    assert delay_based_conflicts({"delay_based": False, "max_growth": None, "capacity_window": 3, "cap_m": 2}) == \
        {"capacity_window": 3}
    assert delay_based_conflicts({"max_growth": 1.25}) == {}  # delay-based: nothing refused
    assert [delay_based_default(k) for k in ("target_utilization", "curvature", "xtraffic_window")] == [1.0, True, 5.0]


def test_a_run_config_override_of_delay_based_names_every_key_of_the_file(tmp_path):
    cfg = _run_config(tmp_path, "{target_utilization: 0.84, max_growth: 1.25, startup_growth: 1.75, "
                                "app_limited_hold: true}")
    err = _err(run_cli("validate", cfg, f"{SP}.delay_based=false"))
    assert err == (f"error: command-line override '{SP}.delay_based=false' (config {cfg}): key "
                   f"'{SP}.target_utilization': target_utilization 0.84, max_growth 1.25, startup_growth 1.75 and "
                   "app_limited_hold true are read by the delay-based probe only (with delay_based false they would be "
                   "ignored): they need delay_based: true (DDACOM's default); remove these 4 keys (or give each its "
                   "default: target_utilization 1, max_growth null, startup_growth null, app_limited_hold false) or "
                   "delay_based: false")
    # each given its default with an override: taken (F7a), the loss-based sender
    r = run_cli("validate", cfg, f"{SP}.delay_based=false", f"{SP}.target_utilization=1", f"{SP}.max_growth=null",
                f"{SP}.startup_growth=null", f"{SP}.app_limited_hold=false")
    assert r.returncode == 0 and r.stdout.startswith(f"ok: {cfg} is valid"), r.stderr


# ---------------------------------------------------------------------------------------------------------- F4

def test_the_generator_names_the_override_as_typed_and_the_full_key(tmp_path):
    # before: "error: gen.yaml: key 'hold_steps': invalid value '010': ..." (the file blamed, the key bare)
    cfg = _gen_config(tmp_path, "{hold_steps: 10}")
    err = _err(run_cli("validate", cfg, f"{GSP}.hold_steps=010"))
    assert err == (f"error: command-line override '{GSP}.hold_steps=010' (config {cfg}): key '{GSP}.hold_steps': 010 "
                   "has a leading zero, which YAML 1.1 reads as the octal number 8; write 10")


@pytest.mark.parametrize("sender_params, key, text", [
    ({"hold_steps": "010"}, "hold_steps", "invalid value '010': an integer is required, not a string (remove the quotes: "
                                          "10)"),
    ({"cap_m": "2"}, "cap_m", "invalid value '2': a number is required, not a string (remove the quotes: 2)"),
    ({"cap_m": float("nan")}, "cap_m", "invalid value nan: must be a finite number"),
    ({"startup_growth": 2}, "startup_growth", "invalid value 2: must come with max_growth"),
    ({"bogus": 1}, "bogus", "unknown parameter 'bogus' (value 1); valid parameters: app_limited_hold,"),
    ({"delay_based": False, "capacity_window": 3}, "capacity_window", "invalid value 3: capacity_window 3 is read by "
                                                                      "the delay-based probe only"),
    ({"hold_steps": 10**21}, "hold_steps", "invalid value 1000000000000000000000: Input should be less than or equal "
                                           "to 1000000000"),
])
def test_the_generators_sender_params_are_refused_under_the_hooks_key(sender_params, key, text):
    spec = {"module": GEN, "params": {"sender_params": sender_params}}
    with pytest.raises(ConfigError) as e:
        load_hook(spec, key="agents.params.comm", file="gen.yaml", kind=CommModule)
    assert e.value.key == f"{GSP}.{key}" and e.value.file == "gen.yaml"
    assert str(e.value).startswith(f"gen.yaml: key '{GSP}.{key}': {text}"), str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError) as e:  # built in Python: the key below the generator's params
        DDACOMGenerator(sender_params=sender_params)
    assert e.value.key == f"sender_params.{key}"


def test_a_cross_key_refusal_in_the_generator_carries_its_other_key():
    spec = {"module": GEN, "params": {"sender_params": {"delay_based": False, "max_growth": 1.25}}}
    with pytest.raises(ConfigError) as e:
        load_hook(spec, key="agents.params.comm", kind=CommModule)
    assert e.value.key == f"{GSP}.max_growth" and e.value.also == (f"{GSP}.delay_based",)
    with pytest.raises(ConfigError) as e:
        load_hook({"module": GEN, "params": {"sender": "broadcast", "sender_params": {"hold_steps": 10}}},
                  key="agents.params.comm", kind=CommModule)
    assert str(e.value) == ("key 'agents.params.comm.params.sender_params': sender_params are for sender 'ddacom' "
                            "only; got {'hold_steps': 10} for 'broadcast'")
    assert e.value.also == ("agents.params.comm.params.sender",)
    gen = load_hook({"module": GEN, "params": {"sender_params": {"hold_steps": 10}}}, key="agents.params.comm",
                    kind=CommModule)  # valid: taken as before
    assert gen.p.sender_params == {"hold_steps": 10}


# ---------------------------------------------------------------------------------------------------------- F5

def test_a_hold_past_10_to_the_9_is_refused_in_one_line(ns3):
    assert MAX_HOLD_STEPS == 10**9
    with pytest.raises(ConfigError) as e:
        DDACOMSender(hold_steps=10**30, max_hold_steps=10**30)
    assert str(e.value) == ("key 'hold_steps': invalid value 1000000000000000000000000000000: Input should be less "
                            "than or equal to 1000000000 (reports without probing after a loss, at most 1000000000)")
    with pytest.raises(ConfigError) as e:
        SafeRateProbe((1, 2), initial_rate_bps=1e3, min_rate_bps=1e2, max_rate_bps=1e4, max_hold_steps=2**63)
    assert str(e.value).startswith("key 'max_hold_steps': invalid value 9223372036854775808: Input should be less than "
                                   "or equal to 1000000000")
    with pytest.raises(ConfigError) as e:
        parse_sender_params(["ddacom.max_hold_steps=1000000000000000000000"], ["ddacom"])
    assert str(e.value).startswith("key '--sender-param ddacom.max_hold_steps': invalid value 1000000000000000000000: "
                                   "Input should be less than or equal to 1000000000")
    err = ns3("{hold_steps: 1000000000000000000000, max_hold_steps: 1000000000000000000000}")
    assert "key 'sender_params.ddacom.hold_steps': invalid value 1000000000000000000000: Input should be less than " \
           "or equal to 1000000000" in err


def test_a_hold_of_10_to_the_9_is_taken_and_runs():
    s = DDACOMSender(hold_steps=MAX_HOLD_STEPS, max_hold_steps=MAX_HOLD_STEPS)
    s.reset(num_envs=1, num_agents=2, num_entities=4, dt_s=0.1, copy_bytes=100, demand_bps=1e5)
    lost = Feedback(delivered_bytes=np.full((1, 2), 100.0), lost_bytes=np.full((1, 2), 900.0),
                    delivered_copies=np.ones((1, 2)), lost_copies=np.full((1, 2), 9.0), latency_max_s=None)
    for _ in range(5):  # repeated losses: the hold doubles, capped at max_hold_steps
        s.probe.update(lost)
    assert s.probe._hold.max() == MAX_HOLD_STEPS and s.probe._hold_len.dtype == np.int64


# ---------------------------------------------------------------------------------------------------------- F6

def test_values_are_shown_as_yaml_writes_them(tmp_path):
    assert [value_text(v) for v in (None, True, False, 0.5, "abc", [True, 32])] == \
        ["null", "true", "false", "0.5", "'abc'", "[true, 32]"]
    err = _err(run_cli("validate", DDACOM_RUN, f"{SP}.cap_m=null"))
    assert err == (f"error: command-line override '{SP}.cap_m=null' (config {DDACOM_RUN}): key '{SP}.cap_m': invalid "
                   "value null: Input should be a valid number (deviation given to unknown info (m), > 0)")
    with pytest.raises(ConfigError) as e:
        DDACOMSender(hold_steps=True)
    assert str(e.value) == "key 'hold_steps': invalid value true: a number is required, not a boolean"


# ---------------------------------------------------------------------------------------------------------- F7

@pytest.mark.parametrize("key", DELAY_BASED_KEYS)
def test_a_delay_based_key_at_its_default_is_taken_beside_delay_based_false(key):
    default = delay_based_default(key)
    s = DDACOMSender(delay_based=False, **{key: default})
    assert s.params.model_dump() == DDACOMSenderParams(delay_based=False).model_dump()


def test_the_off_values_spelled_out_are_taken_everywhere(ns3):
    off = {"delay_based": False, "startup_growth": None, "app_limited_hold": False}
    assert DDACOMSender(**off).params.startup_growth is None
    assert ns3("{delay_based: false, startup_growth: null, app_limited_hold: false}") is None
    assert ns3("{delay_based: false}", "ddacom.startup_growth=null", "ddacom.app_limited_hold=false") is None
    # another value: still refused, named as typed
    err = ns3("{delay_based: false, startup_growth: null}", "ddacom.app_limited_hold=true")
    assert err.startswith("error: key '--sender-param ddacom.app_limited_hold': invalid value true: app_limited_hold "
                          "true is read by the delay-based probe only"), err


def test_app_limited_hold_says_to_give_max_growth():
    # before: 'needs max_growth or startup_growth', and startup_growth alone is refused for want of max_growth
    with pytest.raises(ConfigError) as e:
        DDACOMSender(app_limited_hold=True)
    assert str(e.value).startswith("key 'app_limited_hold': invalid value true: needs max_growth (the growth cap whose "
                                   "floor it keeps; startup_growth only raises that cap in the first reports), e.g. "
                                   "max_growth 1.25 (")
    assert e.value.also == ("max_growth",)
    with pytest.raises(ConfigError, match="needs max_growth"):
        SafeRateProbe((1, 2), initial_rate_bps=1e3, min_rate_bps=1e2, max_rate_bps=1e4, dt_s=0.1, delay_based=True,
                      app_limited_hold=True)
    s = DDACOMSender(app_limited_hold=True, max_growth=1.25)  # the advice followed: taken
    assert (s.params.app_limited_hold, s.params.max_growth) == (True, 1.25)
