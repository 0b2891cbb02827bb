"""Bad input to the bandwidth channel's capacity traces: every bad rate, CSV file or size is a ConfigError that names
the key (or the file and line) and the value, never a silent dead channel, a numpy warning or a traceback."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from coopsim.comm.bandwidth import CAPACITY_VALUES_MAX, HORIZON_STEPS_MAX, BandwidthChannel
from coopsim.comm.traces import MAX_RATE_BPS, CsvTrace
from coopsim.errors import ConfigError
from coopsim.platform.comm import MessageBatch
from coopsim.platform.config import load_config
from coopsim.platform.registry import make_component, validate_params

INF, NAN = float("inf"), float("nan")


def params_error(params: dict) -> ConfigError:
    """The ConfigError of validating bandwidth-v0 ``params`` as a run config's ``channel.params``."""
    with pytest.raises(ConfigError) as ei:
        validate_params("channel", "bandwidth-v0", params, file="run.yaml", key_prefix="channel.params.")
    return ei.value


def build_error(params: dict) -> ConfigError:
    """The ConfigError of building the channel (what `coopsim validate` and `run` do)."""
    with pytest.raises(ConfigError) as ei:
        make_component("channel", "bandwidth-v0", **params)
    return ei.value


def write(tmp_path, name: str, data: bytes | str) -> str:
    p = tmp_path / name
    if isinstance(data, str):
        p.write_text(data, encoding="utf-8")
    else:
        p.write_bytes(data)
    return str(p)


def broadcast_batch(n: int) -> MessageBatch:
    return MessageBatch(np.zeros(n, np.int32), np.arange(n, dtype=np.int32), np.full(n, -1, np.int32),
                        np.zeros((n, 4), np.float32), np.zeros(n))


# ------------------------------------------------------------------ rates given in the config

RATE_VALID = "must be a finite number of bit/s in [0, 1e12] (1 Tbit/s, the most the bandwidth channel's int64 arithmetic takes)"


@pytest.mark.parametrize("trace, key, shown", [
    ({"kind": "constant", "rate": INF}, "channel.params.trace.rate", "inf"),
    ({"kind": "constant", "rate": NAN}, "channel.params.trace.rate", "nan"),
    ({"kind": "constant", "rate": 1e30}, "channel.params.trace.rate", "1e+30"),
    ({"kind": "constant", "rate": -1}, "channel.params.trace.rate", "-1"),
    ({"kind": "step", "high": INF, "low": 1, "drop_at_s": 1}, "channel.params.trace.high", "inf"),
    ({"kind": "step", "high": 1, "low": NAN, "drop_at_s": 1}, "channel.params.trace.low", "nan"),
    ({"kind": "sinusoid", "mean": INF, "amplitude": 1, "period_s": 1}, "channel.params.trace.mean", "inf"),
    ({"kind": "sinusoid", "mean": 1, "amplitude": 1e300, "period_s": 1}, "channel.params.trace.amplitude", "1e+300"),
    ({"kind": "markov", "levels": [1, INF], "switch_prob": 0.1}, "channel.params.trace.levels", "[1, inf]"),
    ({"kind": "markov", "levels": [NAN, 1], "switch_prob": 0.1}, "channel.params.trace.levels", "[nan, 1]"),
])
def test_bad_rate_names_the_key_without_the_union_tag(trace, key, shown):
    err = params_error({"trace": trace})
    assert err.key == key  # the YAML path, not pydantic's trace.constant.rate
    assert str(err).startswith(f"run.yaml: key '{key}': invalid value {shown}: ")
    assert RATE_VALID in str(err)
    for kind in ("constant", "step", "sinusoid", "markov"):
        assert f"trace.{kind}." not in str(err)


@pytest.mark.parametrize("trace, key, shown, valid", [
    ({"kind": "constant", "rate": 1, "scale_bps": INF}, "channel.params.trace.scale_bps", "inf",
     "scale_bps must be a finite number in (0, 1e12]"),
    ({"kind": "constant", "rate": 1, "scale_bps": NAN}, "channel.params.trace.scale_bps", "nan",
     "scale_bps must be a finite number in (0, 1e12]"),
    ({"kind": "constant", "rate": 1, "scale_bps": 1e13}, "channel.params.trace.scale_bps", "10000000000000.0",
     "scale_bps must be a finite number in (0, 1e12]"),
    ({"kind": "step", "high": 1, "low": 1, "drop_at_s": INF}, "channel.params.trace.drop_at_s", "inf",
     "drop_at_s must be a finite number (not nan or inf)"),
    ({"kind": "step", "high": 1, "low": 1, "drop_at_s": 1, "recover_at_s": NAN}, "channel.params.trace.recover_at_s",
     "nan", "recover_at_s must be a number of seconds > drop_at_s, or inf (never)"),
    ({"kind": "sinusoid", "mean": 1, "amplitude": 1, "period_s": 1, "phase_rad": NAN},
     "channel.params.trace.phase_rad", "nan", "phase_rad must be a finite number (not nan or inf)"),
    ({"kind": "sinusoid", "mean": 1, "amplitude": 1, "period_s": INF},
     "channel.params.trace.period_s", "inf", "period_s must be a finite number (not nan or inf)"),
])
def test_bad_scale_or_time_names_the_key(trace, key, shown, valid):
    err = params_error({"trace": trace})
    assert err.key == key
    assert str(err).startswith(f"run.yaml: key '{key}': invalid value {shown}: {valid}")


@pytest.mark.parametrize("trace, what", [
    ({"kind": "constant", "rate": 1e6, "scale_bps": 1e7}, "rate = 1e+06 times scale_bps = 1e+07 is 1e+13 bit/s"),
    ({"kind": "sinusoid", "mean": 6e11, "amplitude": 6e11, "period_s": 1}, "mean + amplitude = 1.2e+12"),
    ({"kind": "markov", "levels": [0.5, 2.0], "switch_prob": 0.1, "scale_bps": 6e11}, "levels[1] = 2 times"),
    ({"kind": "step", "high": 1, "low": 3, "drop_at_s": 1, "scale_bps": 4e11}, "low = 3 times"),
])
def test_rate_times_scale_above_the_maximum_is_refused(trace, what):
    err = params_error({"trace": trace})
    assert err.key == "channel.params.trace"
    assert what in str(err) and "1e12" in str(err)


def test_infinite_rate_through_the_channel_constructor_is_a_config_error():
    err = build_error({"trace": {"kind": "constant", "rate": INF}})
    assert isinstance(err, ConfigError) and "trace.rate" in err.key and "inf" in str(err)


def test_largest_allowed_rate_still_delivers():
    """1e12 bit/s (the maximum) after scale_bps: no warning, the capacity is exact and every copy is delivered."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's 'invalid value encountered in cast' would fail here
        ch = make_component("channel", "bandwidth-v0", trace={"kind": "constant", "rate": 1e6, "scale_bps": 1e6})
        ch.reset(0, num_envs=2, num_agents=3, dt_s=0.1)
        assert (ch.capacity == int(MAX_RATE_BPS)).all()
        ch.send(0, broadcast_batch(3))
        out = ch.deliver(1)
    assert len(out) == 6  # 3 broadcasts to 2 other agents each
    s = ch.stats()
    assert s["comm/delivered_copies"] == 6 and s["comm/offered_copies"] == 6


def test_maximum_rate_with_too_long_a_step_is_refused_at_reset():
    ch = make_component("channel", "bandwidth-v0", trace={"kind": "constant", "rate": MAX_RATE_BPS})
    with pytest.raises(ConfigError, match=r"key 'channel\.params\.trace'.*step of 10 s.*at most 4\.6") as ei:
        ch.reset(0, num_envs=1, num_agents=2, dt_s=10.0)
    assert ei.value.key == "channel.params.trace"
    ch.reset(0, num_envs=1, num_agents=2, dt_s=1.0)  # 1e12 bit/s x 1 s still fits
    assert ch.capacity.max() == int(MAX_RATE_BPS)


# ------------------------------------------------------------------ CSV traces

@pytest.mark.parametrize("cell", ["inf", "-inf", "nan", "1e30", "1e300", "1e400", "-5", "1e12000"])
def test_csv_bad_rate_names_file_line_column_and_value(tmp_path, cell):
    path = write(tmp_path, "cap.csv", f"time_s,rate\n0,1000\n0.5,{cell}\n")
    for err in (build_error({"trace": {"kind": "csv", "path": path}}),
                pytest.raises(ConfigError, CsvTrace(path=path).load).value):
        assert err.file == path
        key = "channel.params.trace.path" if err.key.startswith("channel.") else "trace.path"  # built / direct
        assert str(err).startswith(f"{path}: key '{key}': line 3: column 'rate': invalid rate '{cell}': ")
        assert "finite" in str(err) and "[0, 1e12]" in str(err)
        assert err.value == cell


def test_csv_rate_times_scale_above_the_maximum(tmp_path):
    path = write(tmp_path, "cap.csv", "time_s,rate_0,rate_1\n0,0.5,2\n")
    err = build_error({"trace": {"kind": "csv", "path": path, "scale_bps": 6e11}})
    assert str(err).startswith(f"{path}: key 'channel.params.trace.path': line 2: column 'rate_1': rate '2' times scale_bps 6e+11 is 1.2e+12 bit/s")


@pytest.mark.parametrize("cell", ["nan", "inf", "-inf"])
def test_csv_non_finite_time(tmp_path, cell):
    path = write(tmp_path, "cap.csv", f"time_s,rate\n0,5\n{cell},5\n")
    err = build_error({"trace": {"kind": "csv", "path": path}})
    assert str(err) == f"{path}: key 'channel.params.trace.path': line 3: time_s '{cell}' must be a finite number of seconds"


def test_csv_times_must_increase(tmp_path):
    path = write(tmp_path, "cap.csv", "time_s,rate\n0,5\n1,5\n1,6\n")
    with pytest.raises(ConfigError, match=r"cap\.csv: key 'channel\.params\.trace\.path': line 4: time_s 1\.0 not after the previous 1\.0"):
        make_component("channel", "bandwidth-v0", trace={"kind": "csv", "path": path})


def test_csv_not_utf8_is_a_config_error_naming_the_file(tmp_path):
    path = write(tmp_path, "cap.csv", b"\xff\xfe")
    err = build_error({"trace": {"kind": "csv", "path": path}})
    assert err.file == path and err.key == "channel.params.trace.path"
    assert "line 1: byte 0xff is not UTF-8 text" in str(err) and "must be a UTF-8 CSV file" in str(err)
    path2 = write(tmp_path, "late.csv", b"time_s,rate\n0,5\n1,\xe9\n")  # Latin-1 further down
    with pytest.raises(ConfigError, match=r"late\.csv: key 'trace\.path': line 3: byte 0xe9 is not UTF-8"):
        CsvTrace(path=path2).load()


def test_csv_with_utf8_bom_loads(tmp_path):
    path = write(tmp_path, "excel.csv", b"\xef\xbb\xbftime_s,rate_0,rate_1\r\n0,100,200\r\n0.25,50,60\r\n")
    times, rates = CsvTrace(path=path).load()
    assert times.tolist() == [0.0, 0.25] and rates.tolist() == [[100.0, 200.0], [50.0, 60.0]]
    ch = make_component("channel", "bandwidth-v0", trace={"kind": "csv", "path": path}, horizon_steps=4)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    assert ch.capacity[:, 0, :].tolist() == [[100, 200], [100, 200], [100, 200], [50, 60]]


def test_csv_missing_file_fails_when_the_channel_is_built(tmp_path):
    path = str(tmp_path / "nope.csv")
    err = build_error({"trace": {"kind": "csv", "path": path}})
    assert err.key == "channel.params.trace.path" and err.value == path
    assert f"capacity trace file not found: {path}" in str(err)
    err = build_error({"trace": {"kind": "csv", "path": str(tmp_path)}})  # a directory where the file should be
    assert err.key == "channel.params.trace.path" and f"capacity trace file is a directory, not a CSV file: {tmp_path}" in str(err)


@pytest.mark.parametrize("text, msg", [
    ("time_s,rate\n0,-5\n", "line 2: column 'rate': invalid rate '-5'"),
    ("t,rate\n0,5\n", "line 1: header must be 'time_s,rate' or 'time_s,rate_0,...'; got 't,rate'"),
    ("time_s,rate\n", "no data rows"),
    # only the channel's reset with the scenario's sizes reveals this one: validate resets it as the run does
    ("time_s,rate_0,rate_1\n0,0.3,0.4\n", "2 rate columns; need 1 or num_agents=3"),
])
def test_validate_refuses_what_run_would(tmp_path, text, msg):
    """`coopsim validate` builds every component (check_buildable): building the channel now reads the CSV."""
    from coopsim.platform.config import check_buildable

    csv_path = write(tmp_path, "cap.csv", text)
    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text(f"""name: t
scenario: {{id: mpe/simple_spread-v0, params: {{num_agents: 3}}}}
agents: {{id: random-v0}}
channel: {{id: bandwidth-v0, params: {{trace: {{kind: csv, path: '{csv_path}'}}}}}}
""")
    cfg = load_config(cfg_path)
    with pytest.raises(ConfigError) as ei:
        check_buildable(cfg, file=str(cfg_path))
    assert msg in str(ei.value) and csv_path in str(ei.value)


# ------------------------------------------------------------------ sizes

def test_horizon_steps_has_an_upper_bound():
    err = params_error({"horizon_steps": 10**9})
    assert err.key == "channel.params.horizon_steps" and err.value == 10**9
    assert f"less than or equal to {HORIZON_STEPS_MAX}" in str(err)
    validate_params("channel", "bandwidth-v0", {"horizon_steps": HORIZON_STEPS_MAX})


def test_capacity_table_too_large_is_refused_at_reset_before_allocating():
    ch = BandwidthChannel(horizon_steps=HORIZON_STEPS_MAX)
    with pytest.raises(ConfigError, match=r"key 'channel\.params\.horizon_steps': horizon_steps 1000000 x num_envs 64 "
                                          r"x num_agents 10 = 640,000,000 capacity values .*use horizon_steps <= 104857"):
        ch.reset(0, num_envs=64, num_agents=10, dt_s=0.1)
    assert 104857 * 64 * 10 <= CAPACITY_VALUES_MAX


# ------------------------------------------------------------------ trace kind and keys

def test_missing_kind_lists_the_valid_kinds():
    err = params_error({"trace": {"rate": 5}})
    assert err.key == "channel.params.trace"
    assert "missing key 'kind'" in str(err) and "constant, step, sinusoid, markov, csv" in str(err)
    assert "discriminator" not in str(err)


def test_unknown_kind_lists_the_valid_kinds():
    err = params_error({"trace": {"kind": "pareto", "rate": 5}})
    assert err.key == "channel.params.trace"
    assert "unknown trace kind 'pareto'; valid kinds: constant, step, sinusoid, markov, csv" in str(err)


def test_not_a_mapping_trace():
    err = params_error({"trace": "constant"})
    assert err.key == "channel.params.trace" and "must be a mapping with a 'kind'" in str(err)


def test_unknown_key_of_a_trace_names_the_keys_of_its_own_kind():
    err = params_error({"trace": {"kind": "step", "high": 1, "lo": 1, "drop_at_s": 1}})
    assert err.key == "channel.params.trace.lo"
    assert "unknown key 'lo' of a 'step' trace (did you mean 'low'?)" in str(err)
    assert "valid keys: scale_bps, kind, high, low, drop_at_s, recover_at_s" in str(err)


def test_missing_key_of_a_trace_has_the_yaml_path():
    err = params_error({"trace": {"kind": "markov", "levels": [1, 2]}})
    assert err.key == "channel.params.trace.switch_prob"


def test_valid_traces_still_validate_and_round_trip():
    p = validate_params("channel", "bandwidth-v0", {"trace": {"kind": "markov", "levels": [0.1, 0.5], "switch_prob": 0.1,
                                                              "scale_bps": 25600}})
    again = BandwidthChannel(**p.model_dump())  # as the safe-rate oracle copies a channel
    assert again.params.trace == p.trace
    step = validate_params("channel", "bandwidth-v0", {"trace": {"kind": "step", "high": 1, "low": 0, "drop_at_s": 1}})
    assert step.trace.recover_at_s == INF  # the default inf = never is still allowed


def test_a_comm_channel_inside_the_scenario_names_its_keys_there(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cfg = str(root / "configs" / "mpe" / "simple_reference-bandwidth.yaml")
    for trace, key in (("{kind: constant, rate: 1e13}", "trace.rate"), (f"{{kind: csv, path: {tmp_path}/no.csv}}",
                                                                        "trace.path")):
        r = subprocess.run([sys.executable, "-m", "coopsim.cli", "validate", cfg,
                            f"scenario.params.comm_channel.params.trace={trace}"], capture_output=True, text=True)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert f"key 'scenario.params.comm_channel.params.{key}'" in " ".join(r.stderr.split()), r.stderr
