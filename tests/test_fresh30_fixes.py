"""Fresh-user pass 30 (/work/exp/fresh30_findings.md): channel ``header_bytes`` is range-checked (F8); the ddacom
scripts' and the ns-3 experiment's counts have upper bounds, refused at parse time (F1, F2, F5, F11); an empty
--out is refused (F3); ddacom.evaluate never replaces a file that is not its results file (F6); a CSV trace with the
wrong number of rate columns names the config key and the override (F9); the ns-3 experiment refuses a --plot
suffix matplotlib cannot write (F10) and an --oracle-cache that is a file (F12), before any work."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from coopsim.agents.ddacom import evaluate, train
from coopsim.comm.ns3 import experiment
from coopsim.errors import ConfigError

from cli_helpers import _err, run_cli, run_main  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[1]
MARKOV = "configs/mpe/spread-po-ddacom-markov.yaml"
NS3 = str(ROOT / "configs" / "ns3" / "ddacom-spread.yaml")
SUFFIXES = (".avif, .eps, .gif, .jpeg, .jpg, .pdf, .pgf, .png, .ps, .raw, .rgba, .svg, .svgz, .tif, .tiff, .webp")


def _boom(*a, **k):
    raise AssertionError("the long work started")


def _last_line(err: str) -> str:
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


# --- F8: channel.params.header_bytes in 0..65535 -------------------------------------------------------------------

HEADER_HELP = ("(bytes added to each payload (B), 0 .. 65535 (an IP packet's size limit); default 28 (IPv4 + UDP "
               "headers))")


@pytest.mark.parametrize("value, rule", [("-1", "Input should be greater than or equal to 0"),
                                         ("99999999999999999999", "Input should be less than or equal to 65535"),
                                         ("65536", "Input should be less than or equal to 65535")])
def test_header_bytes_out_of_range_is_refused_at_validate_naming_the_key(value, rule):
    r = run_cli("validate", MARKOV, f"channel.params.header_bytes={value}")
    assert _err(r) == (f"error: command-line override 'channel.params.header_bytes={value}' (config {MARKOV}): key "
                       f"'channel.params.header_bytes': invalid value {value}: {rule} {HEADER_HELP}")


def test_header_bytes_bounds_are_accepted_and_hold_for_every_channel():
    from pydantic import ValidationError

    from coopsim.comm.ns3.channel import Ns3Params
    from coopsim.platform.comm import HEADER_BYTES_MAX
    from coopsim.platform.registry import validate_params

    assert HEADER_BYTES_MAX == 65535
    for cid in ("ideal-v0", "bandwidth-v0"):
        for ok in (0, 28, 65535):
            assert validate_params("channel", cid, {"header_bytes": ok}).header_bytes == ok
        with pytest.raises(ConfigError, match=r"key 'channel\.params\.header_bytes': invalid value -100: Input "
                                              r"should be greater than or equal to 0"):
            validate_params("channel", cid, {"header_bytes": -100}, key_prefix="channel.params.")
    assert Ns3Params(header_bytes=65535).header_bytes == 65535  # ns-3: 28 (its IPv4 + UDP headers) .. 65535
    with pytest.raises(ValidationError, match="less than or equal to 65535"):
        Ns3Params(header_bytes=65536)


# --- F1, F2: ddacom.train --seeds / --eval-envs / --eval-episodes have upper bounds ---------------------------------

@pytest.mark.parametrize("option, value, rng", [("--seeds", "99999999999999999999", "1..1000"),
                                                ("--seeds", "1001", "1..1000"),
                                                ("--eval-envs", "99999999999999999999", "1..4096"),
                                                ("--eval-envs", "1e9", "1..4096"),
                                                ("--eval-episodes", "99999999999999999999", "1..10000"),
                                                ("--eval-episodes", "1e9", "1..10000")])
def test_ddacom_train_counts_out_of_range_are_refused_at_parse_time(option, value, rng, tmp_path, monkeypatch):
    monkeypatch.setattr(train, "check_runs", _boom)
    monkeypatch.setattr(train, "fit", _boom)
    out = tmp_path / "out"
    argv = ["--task", "speaker_listener", "--steps", "400", "--num-envs", "2", "--eval-envs", "2",
            "--eval-episodes", "1", "--seeds", "1", option, value, "--out", str(out)]
    code, stdout, err = run_main(train.main, argv)
    assert code == 2 and stdout == ""
    assert _last_line(err) == (f"python -m coopsim.agents.ddacom.train: error: argument {option}: invalid value "
                               f"{value!r}: an integer in {rng} is required")
    assert not out.exists()


def test_ddacom_train_help_says_the_bounds(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, stdout, _ = run_main(train.main, ["--help"])
    text = " ".join(stdout.split())
    assert code == 0
    assert "--seeds SEEDS number of seeds S, 1-1000: seeds F..F+S-1 from the first seed F (default 5)" in text
    assert "--eval-envs EVAL_ENVS envs of each trained policy's greedy evaluation, 1-4096 (default 32)" in text
    assert ("--eval-episodes EVAL_EPISODES consecutive 25-step episodes of the evaluation over one channel, 1-10000 "
            "(default 10)") in text


# --- F3: an empty --out is refused (check_writable, for every caller) ----------------------------------------------

def test_ddacom_train_refuses_an_empty_out_and_writes_nothing_in_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(train, "check_runs", _boom)
    code, stdout, err = run_main(train.main, ["--task", "speaker_listener", "--seeds", "1", "--out", ""])
    assert code == 2 and stdout == ""
    assert err == "error: key '--out': invalid value '': the path is empty; give the folder to write into\n"
    assert list(tmp_path.iterdir()) == []


def test_check_writable_refuses_an_empty_or_blank_path():
    from coopsim.platform.recorder import check_writable

    with pytest.raises(ConfigError) as info:
        check_writable("--out", "")
    assert str(info.value) == "key '--out': invalid value '': the path is empty; give the file to write"
    assert info.value.key == "--out" and info.value.value == ""
    with pytest.raises(ConfigError, match=r"^key '--run-dir': invalid value ' ': the path is empty; give the folder "
                                          r"to write into$"):
        check_writable("--run-dir", " ", folder=True)


def test_ddacom_evaluate_empty_out_is_said_as_empty_not_as_a_folder(monkeypatch):
    monkeypatch.setattr(evaluate, "run", _boom)
    code, _, err = run_main(evaluate.main, ["--seeds", "1", "--out", ""])
    assert code == 2
    assert err == "error: key '--out': invalid value '': the path is empty; give the file to write\n"


# --- F5: ddacom.evaluate --num-envs / --episodes / --seeds have upper bounds ----------------------------------------

@pytest.mark.parametrize("option, value, rng", [("--num-envs", "99999999999999999999", "1..4096"),
                                                ("--num-envs", "1e9", "1..4096"),
                                                ("--num-envs", "4097", "1..4096"),
                                                ("--episodes", "99999999999999999999", "1..10000"),
                                                ("--seeds", "99999999999999999999", "1..1000"),
                                                ("--seeds", "1001", "1..1000")])
def test_ddacom_evaluate_counts_out_of_range_are_refused_at_parse_time(option, value, rng, tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "run", _boom)
    out = tmp_path / "e.json"
    argv = ["--seeds", "1", "--num-agents", "3", "--num-envs", "2", "--episodes", "1", option, value, "--out", str(out)]
    code, stdout, err = run_main(evaluate.main, argv)
    assert code == 2 and stdout == ""
    assert _last_line(err) == (f"python -m coopsim.agents.ddacom.evaluate: error: argument {option}: invalid value "
                               f"{value!r}: an integer in {rng} is required")
    assert not out.exists()


# --- F6: ddacom.evaluate never replaces a file that is not its results file ----------------------------------------

@pytest.mark.parametrize("name, content", [("readme_copy.md", (ROOT / "README.md").read_text()),
                                           ("other.json", '{"foo": 1}\n'),
                                           ("runs.json", '{"runs": [], "seeds_done": "2"}\n')])
def test_ddacom_evaluate_refuses_an_out_that_is_not_its_results_file(name, content, tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "run", _boom)
    out = tmp_path / name
    out.write_text(content)
    code, stdout, err = run_main(evaluate.main, ["--seeds", "1", "--num-agents", "3", "--num-envs", "2",
                                                "--episodes", "1", "--out", str(out)])
    assert code == 2 and stdout == ""
    assert err == (f"error: key '--out': {out} exists and is not a results file of ddacom.evaluate; give another "
                   "--out or remove it\n")
    assert out.read_text() == content  # untouched
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no partial file either


def test_ddacom_evaluate_writes_into_an_empty_file_and_reuses_its_own_results(tmp_path):
    out = tmp_path / "e.json"
    out.write_text("")  # e.g. made by mktemp: nothing to lose
    argv = ["--seeds", "1", "--num-agents", "3", "--num-envs", "2", "--episodes", "1", "--senders", "none",
            "--out", str(out)]
    code, stdout, err = run_main(evaluate.main, argv)
    assert code == 0, err
    d = json.loads(out.read_text())
    assert d["seeds_done"] == 1 and d["runs"]
    code, stdout, err = run_main(evaluate.main, argv)  # its own results file: reused, not refused
    assert code == 0, err
    assert stdout.startswith(f"reusing 1 finished seed(s) from {out} (seeds 0..0: every setting is the same)")


# --- F9: a CSV trace with the wrong number of rate columns names the key and the override --------------------------

def test_csv_trace_rate_columns_error_names_the_key_and_the_override(tmp_path):
    csv = tmp_path / "twocols.csv"
    csv.write_text("time_s,rate_0,rate_1\n0,0.3,0.4\n")
    override = f"channel.params.trace={{kind: csv, path: {csv}, scale_bps: 25600}}"
    r = run_cli("validate", MARKOV, override)
    assert _err(r) == (f"error: command-line override '{override}' (config {MARKOV}): {csv}: key "
                       "'channel.params.trace.path': 2 rate columns; need 1 or num_agents=3")


def test_csv_trace_rate_columns_error_at_reset_has_the_channel_key(tmp_path):
    from coopsim.platform.registry import make_component

    csv = tmp_path / "twocols.csv"
    csv.write_text("time_s,rate_0,rate_1\n0,0.3,0.4\n")
    ch = make_component("channel", "bandwidth-v0", trace={"kind": "csv", "path": str(csv)})
    with pytest.raises(ConfigError) as info:
        ch.reset(0, num_envs=1, num_agents=3, dt_s=0.1)
    assert info.value.key == "channel.params.trace.path" and info.value.file == str(csv)
    assert str(info.value) == f"{csv}: key 'channel.params.trace.path': 2 rate columns; need 1 or num_agents=3"


# --- F10, F11, F12: the ns-3 experiment's --plot suffix, --seeds bound, --oracle-cache a file; all up front --------

def _ns3(monkeypatch, *argv):
    """``python -m coopsim.comm.ns3.experiment`` with the config's reading and every run made fatal: what is
    refused here is refused before any work."""
    monkeypatch.setattr(experiment, "run", _boom)
    monkeypatch.setattr(experiment, "run_anchors", _boom)
    return run_main(experiment.main, list(argv))


@pytest.mark.parametrize("name, said", [("p.txt", "matplotlib cannot write the format 'txt'"),
                                        ("p.json", "matplotlib cannot write the format 'json'"),
                                        ("p", "has no suffix")])
def test_ns3_plot_suffix_matplotlib_cannot_write_is_refused_up_front(name, said, tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "load", _boom)  # before the config is even read
    plot, out = tmp_path / name, tmp_path / "r.json"
    code, stdout, err = _ns3(monkeypatch, NS3, "--seeds", "1", "--senders", "ddacom", "--oracle-cache",
                             str(tmp_path / "cache"), "--plot", str(plot), "--out", str(out))
    assert code == 2 and stdout == ""
    sep = " " if said == "has no suffix" else ": "
    assert err == f"error: {plot}{sep}{said}; give --plot an image suffix: {SUFFIXES}\n"
    assert list(tmp_path.iterdir()) == []


def test_ns3_plot_with_an_image_suffix_passes_the_check(tmp_path, monkeypatch):
    def past(*a, **k):
        raise ConfigError("past the checks")

    monkeypatch.setattr(experiment, "load", past)  # the first step after the up-front checks
    for name in ("p.png", "p.PDF", "p.svg"):
        code, _, err = _ns3(monkeypatch, NS3, "--plot", str(tmp_path / name), "--out", str(tmp_path / "r.json"))
        assert code == 2 and err == "error: past the checks\n", err


def test_curves_image_check_keeps_its_message_and_no_suffix_png_rule(tmp_path):
    from coopsim.agents.ppo.curves import check_image_path
    from coopsim.errors import CoopsimError

    check_image_path(tmp_path / "curves")  # no suffix: a PNG, as ppo.curves documents
    with pytest.raises(CoopsimError) as info:
        check_image_path(tmp_path / "out.txt")
    assert str(info.value) == (f"{tmp_path / 'out.txt'}: matplotlib cannot write the format 'txt'; give OUT an image "
                               f"suffix: {SUFFIXES}")


@pytest.mark.parametrize("value", ["99999999999999999999", "10001"])
def test_ns3_seeds_out_of_range_is_refused_at_parse_time(value, tmp_path, monkeypatch):
    code, stdout, err = _ns3(monkeypatch, NS3, "--no-oracle", "--senders", "ddacom", "--oracle-cache",
                             str(tmp_path / "cache"), "--seeds", value, "--out", str(tmp_path / "n.json"))
    assert code == 2 and stdout == ""
    assert _last_line(err) == (f"python -m coopsim.comm.ns3.experiment: error: argument --seeds: invalid value "
                               f"{value!r}: an integer in 1..10000 is required")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key", ["seeds", "anchor_seeds"])
def test_ns3_config_seeds_have_the_same_bound(key, tmp_path, monkeypatch):
    cfg = tmp_path / "big.yaml"
    cfg.write_text(yaml.safe_dump({**yaml.safe_load(Path(NS3).read_text()), key: 99999999999}))
    code, _, err = _ns3(monkeypatch, str(cfg), "--no-oracle", "--out", str(tmp_path / "n.json"))
    assert code == 2
    assert err.startswith(f"error: {cfg}: key '{key}': invalid value 99999999999: Input should be less than or "
                          "equal to 10000 (")
    assert err.count("\n") == 1 and "1..10000" in err


@pytest.mark.parametrize("under", [False, True])
def test_ns3_oracle_cache_that_is_a_file_is_refused_up_front(under, tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    cache = afile / "sub" if under else afile
    out = tmp_path / "n.json"
    code, stdout, err = _ns3(monkeypatch, NS3, "--no-oracle", "--senders", "ddacom", "--seeds", "1",
                             "--oracle-cache", str(cache), "--out", str(out))
    assert code == 2 and stdout == ""
    where = f"is under the file {afile}" if under else "is a file"
    assert err == (f"error: key '--oracle-cache': {cache} {where}, not a folder; give --oracle-cache a folder for the "
                   "cached oracle sweeps and anchors, or --oracle-cache '' to run without the cache\n")
    assert not out.exists() and afile.read_text() == "x"
