"""The ns-3 experiment caches its safe-rate oracle: a second run reads it back, and the cache key depends on
everything the sweep depends on (channel, grid, scenario, seed) and on nothing it does not (the senders)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from cli_helpers import SMALL_NS3_EXPERIMENT
from coopsim.comm.ns3.experiment import main, oracle_cache_key, parse_sender_params
from coopsim.errors import ConfigError

SMALL = {**SMALL_NS3_EXPERIMENT, "sender_params": {"ddacom": {"target_utilization": 0.5}}}
KW = {"num_agents": 3, "obs_radius_m": 0.5, "num_envs": 1, "payload_floats": 24, "episodes": 1}


def test_cache_key_ignores_senders_and_follows_the_channel():
    rates = np.array([1e5, 2e5])
    k = oracle_cache_key(SMALL, KW, 0, rates, 25)
    other_senders = dict(SMALL, senders=["broadcast"], sender_params={"ddacom": {"target_utilization": 0.9}})
    assert oracle_cache_key(other_senders, KW, 0, rates, 25) == k
    assert oracle_cache_key(SMALL, KW, 1, rates, 25) != k  # seed
    assert oracle_cache_key(SMALL, KW, 0, rates * 2, 25) != k  # grid
    assert oracle_cache_key(SMALL, KW, 0, rates, 50) != k  # steps
    louder = dict(SMALL, channel={"id": "ns3-v0", "params": {"latency_bound_s": 0.2}})
    assert oracle_cache_key(louder, KW, 0, rates, 25) != k


def test_sender_param_overrides_parse_yaml_values_and_name_bad_items():
    assert parse_sender_params(["ddacom.target_utilization=0.6", "ddacom.max_growth=1.5"], ["ddacom"]) == {
        "ddacom": {"target_utilization": 0.6, "max_growth": 1.5}}
    with pytest.raises(ConfigError, match="SENDER.KEY=VALUE"):
        parse_sender_params(["target_utilization=0.6"], ["ddacom"])
    with pytest.raises(ConfigError, match="'periodic' is not run"):
        parse_sender_params(["periodic.period_steps=2"], ["ddacom"])
    with pytest.raises(ConfigError, match="unknown parameter 'target_util'.*did you mean 'target_utilization'"):
        parse_sender_params(["ddacom.target_util=0.6"], ["ddacom"])


def test_bad_sender_params_of_the_config_fail_before_the_anchors(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({**SMALL, "sender_params": {"ddacom": {"margin": 3}}}))
    with pytest.raises(ConfigError, match=r"sender_params.ddacom.margin.*invalid value 3") as e:
        main([str(cfg), "--no-oracle", "--out", str(tmp_path / "out.json")])
    assert e.value.file == str(cfg)
    assert "anchors" not in capsys.readouterr().out and not (tmp_path / "out.json").exists()


def test_second_run_reads_the_cached_oracle(ns3_bridge, tmp_path, capsys):
    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(SMALL))
    cache = tmp_path / "cache"
    args = [str(cfg), "--oracle-cache", str(cache)]
    main(args + ["--out", str(tmp_path / "a.json")])
    (entry,) = cache.glob("oracle-seed0-*.json")
    assert "cached" not in capsys.readouterr().out
    main(args + ["--out", str(tmp_path / "b.json"), "--sender-param", "ddacom.target_utilization=0.7"])
    assert f"cached {entry}" in capsys.readouterr().out
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert a["safe_bps"] == b["safe_bps"] == {"0": json.loads(entry.read_text())["safe_bps"]}
    assert len(a["safe_bps"]["0"]) == 25  # one safe rate per step of the one 25-step episode
    assert b["config"]["sender_params"]["ddacom"]["target_utilization"] == 0.7


def test_an_unknown_sender_is_refused_before_anything_runs(tmp_path):
    import time
    from pathlib import Path

    cfg = Path(__file__).resolve().parents[2] / "configs" / "ns3" / "ddacom-spread.yaml"
    t0 = time.time()
    with pytest.raises(ConfigError, match="unknown sender 'bogus'") as e:
        main([str(cfg), "--out", str(tmp_path / "x.json"), "--senders", "ddacom,bogus"])
    assert e.value.key == "--senders" and e.value.value == "bogus"
    assert time.time() - t0 < 30 and not (tmp_path / "x.json").exists()  # no anchors, no oracle, nothing written


def test_no_oracle_gives_the_same_returns_without_utilization(ns3_bridge, tmp_path, capsys):
    # --no-oracle skips the sweep (most of the wall time) and changes nothing the senders do: the same seed gives
    # the same returns, losses and messages as a run with the oracle; only utilization is missing
    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(SMALL))
    main([str(cfg), "--oracle-cache", "", "--out", str(tmp_path / "with.json")])
    main([str(cfg), "--oracle-cache", "", "--no-oracle", "--seeds", "2", "--out", str(tmp_path / "without.json")])
    out = capsys.readouterr().out
    assert "util - (no oracle)" in out and "oracle: safe rate" in out.split("util - (no oracle)")[0]
    w, wo = (json.loads((tmp_path / n).read_text()) for n in ("with.json", "without.json"))
    assert w["oracle"] is True and wo["oracle"] is False and wo["seeds_done"] == 2 and wo["safe_bps"] == {}
    ns3 = [[r for r in d["runs"] if r["channel_name"] == "ns3"] for d in (w, wo)]
    assert [r["seed"] for r in ns3[1]] == [0, 1]
    for k in ("return", "loss", "messages_vs_broadcast"):
        assert ns3[0][0][k] == ns3[1][0][k]
    assert "utilization" in ns3[0][0] and "utilization" not in ns3[1][0]
    assert "utilization" not in wo["summary"]["rows"]["ns3/ddacom"]
    # the anchors cover every ns-3 seed even when the config asks for fewer anchor seeds
    assert sorted({r["seed"] for r in wo["runs"] if r["channel_name"] == "ideal"}) == [0, 1]


def test_no_oracle_refuses_plot_and_bad_out_before_running(tmp_path):
    from pathlib import Path

    cfg = Path(__file__).resolve().parents[2] / "configs" / "ns3" / "ddacom-spread.yaml"
    with pytest.raises(SystemExit) as e:
        main([str(cfg), "--no-oracle", "--plot", str(tmp_path / "p.png")])
    assert e.value.code == 2
    (tmp_path / "f.json").write_text("")
    with pytest.raises(ConfigError, match="cannot write") as e:  # a file where a folder must be
        main([str(cfg), "--out", str(tmp_path / "f.json" / "x.json")])
    assert e.value.key == "--out"
    with pytest.raises(ConfigError, match="is a folder") as e:
        main([str(cfg), "--out", str(tmp_path), "--senders", "ddacom"])
    assert e.value.key == "--out"


def test_a_resumed_run_equals_a_run_in_one_go(ns3_bridge, tmp_path, capsys):
    # seed 0, then seeds 0-1 into the same --out: seed 0 is reused (not rerun in ns-3), seed 1 runs; the file is the
    # one a 2-seed run writes in one go (ns-3 is deterministic per seed), with the oracle and its time series
    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(dict(SMALL, seeds=2)))
    args = [str(cfg), "--oracle-cache", str(tmp_path / "cache")]
    main(args + ["--out", str(tmp_path / "once.json")])
    main(args + ["--seeds", "1", "--out", str(tmp_path / "resumed.json")])
    capsys.readouterr()
    main(args + ["--out", str(tmp_path / "resumed.json")])
    out = capsys.readouterr().out
    assert f"reusing 1 finished seed(s) from {tmp_path / 'resumed.json'}" in out
    assert "seed 0 ddacom" not in out and "seed 1 ddacom" in out
    assert "2 seed(s) read from" in out  # the anchors came from their cache
    once, resumed = (json.loads((tmp_path / n).read_text()) for n in ("once.json", "resumed.json"))
    for k in ("seeds_done", "settings", "safe_bps", "summary", "time_series", "runs"):
        assert resumed[k] == once[k], k


def test_the_cache_keeps_the_grids_runs_for_either_estimator(ns3_bridge, tmp_path, capsys):
    # real ns-3: one sweep (max), then an isotonic run of the same grid reads the same cache file (no second sweep)
    # and its safe rates are the isotonic fit of the cached runs; both runs' per-step-demand utilization is
    # delivered bits / sum_t min(N * safe_t * dt, full broadcast's copies at t over ideal-v0 * copy bits)
    from coopsim.comm.oracle import window_safe_rate

    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(SMALL))
    cache = tmp_path / "cache"
    main([str(cfg), "--oracle-cache", str(cache), "--out", str(tmp_path / "max.json")])
    (entry,) = cache.glob("oracle-seed0-*.json")
    e = json.loads(entry.read_text())
    # (fresh36b N11) a safe rate at the grid's top may be higher: said, with the steps it holds for
    top = int(np.sum(np.asarray(json.loads((tmp_path / "max.json").read_text())["safe_bps"]["0"]) >= e["rates_bps"][-1]))
    said = f"note: seed 0: the safe rate is the grid's highest rate (0.5 x demand) at {top} of 25 steps x envs"
    assert (said in capsys.readouterr().out) == (top > 0)
    off, lost = np.asarray(e["offered_bytes"], float), np.asarray(e["lost_bytes"], float)
    assert off.shape == (3, 25, 1) and lost.shape == off.shape and off.sum() > 0
    iso = {**SMALL, "oracle": {**SMALL["oracle"], "estimator": "isotonic"}}
    cfg.write_text(yaml.safe_dump(iso))
    capsys.readouterr()
    main([str(cfg), "--oracle-cache", str(cache), "--cached-oracle-only", "--out", str(tmp_path / "iso.json")])
    assert f"cached {entry}" in capsys.readouterr().out and len(list(cache.glob("oracle-seed0-*.json"))) == 1
    for name, est in (("max.json", "max"), ("iso.json", "isotonic")):
        d = json.loads((tmp_path / name).read_text())
        want = window_safe_rate(off.transpose(1, 0, 2), lost.transpose(1, 0, 2), np.asarray(e["rates_bps"]),
                                estimator=est)
        np.testing.assert_array_equal(np.asarray(d["safe_bps"]["0"]), want)
        (r,) = [r for r in d["runs"] if r["channel_name"] == "ns3"]
        (fb,) = [r for r in d["runs"] if r["channel_name"] == "ideal" and r["sender"] == "broadcast"]
        den = np.minimum(3 * want * 0.1, np.asarray(fb["series"]["offered_copies"], float) * d["copy_bytes"] * 8)
        assert r["utilization_fb_demand"] == pytest.approx(np.sum(r["series"]["delivered_bits"]) / den.sum(), rel=1e-12)
        assert d["summary"]["rows"]["ns3/ddacom"]["utilization_fb_demand"][0] == pytest.approx(r["utilization_fb_demand"])
    # benchmarks/ns3_oracle_grid.py reads the same cache: its full-grid rows are the two runs' utilizations
    from bench_loader import load_benchmark

    grid = load_benchmark("ns3_oracle_grid")
    rows = {(r["rates"], r["estimator"]): r for r in grid.main([str(tmp_path / "max.json"),
                                                                "--oracle-cache", str(cache),
                                                                "--out", str(tmp_path / "grid.json")])}
    saved = json.loads((tmp_path / "grid.json").read_text())["rows"]  # (a 1-seed half-width, nan, is written null)
    assert [(r["rates"], r["estimator"], r["safe_frac"], r["ddacom"][0]) for r in saved] == [
        (r["rates"], r["estimator"], r["safe_frac"], r["ddacom"][0]) for r in rows.values()]
    assert set(rows) == {(2, "max"), (2, "isotonic"), (3, "max"), (3, "isotonic")}  # (no 1-rate "grid")
    for name, est in (("max.json", "max"), ("iso.json", "isotonic")):
        d = json.loads((tmp_path / name).read_text())
        (r,) = [r for r in d["runs"] if r["channel_name"] == "ns3"]
        assert rows[(3, est)]["ddacom"][0] == pytest.approx(r["utilization"], rel=1e-12)
    out = capsys.readouterr().out
    assert "utilization against each grid and estimator, 1 seed(s)" in out and "    3  isotonic" in out
    assert "    1  " not in out
    # no cache for the seed: exit 2 naming it; a compact copy (no series): exit 2 saying so
    from coopsim.errors import run_script

    with pytest.raises(SystemExit) as info:
        run_script(grid.main, [str(tmp_path / "max.json"), "--oracle-cache", str(tmp_path / "none")])
    assert info.value.code == 2 and "seed 0: no cached oracle" in capsys.readouterr().err
    compact = tmp_path / "compact.json"
    d = json.loads((tmp_path / "max.json").read_text())
    for r in d["runs"]:
        r.pop("series", None)
    compact.write_text(json.dumps(d))
    with pytest.raises(SystemExit) as info:
        run_script(grid.main, [str(compact), "--oracle-cache", str(cache)])
    assert info.value.code == 2 and "is a compact copy" in capsys.readouterr().err
    # the results file's own settings are used (fresh36b N6: a config of 1 env against a run of 2 gave twice the
    # utilization); a cache file of another run size is refused, not divided by
    entry.write_text(json.dumps({**e, "offered_bytes": np.concatenate([off, off], 2).tolist(),
                                 "lost_bytes": np.concatenate([lost, lost], 2).tolist()}))
    with pytest.raises(SystemExit) as info:
        run_script(grid.main, [str(tmp_path / "max.json"), "--oracle-cache", str(cache)])
    assert info.value.code == 2 and "is not this run's sweep (its runs are (3, 25, 2)" in capsys.readouterr().err
    # no such file; a file given as the cache folder
    for argv, text in (([str(tmp_path / "nope.json")], "no such file"),
                       ([str(tmp_path / "max.json"), "--oracle-cache", str(cfg)], "not a folder")):
        with pytest.raises(SystemExit) as info:
            run_script(grid.main, argv)
        assert info.value.code == 2 and text in capsys.readouterr().err


def test_jobs_gives_the_run_of_one_process_seed_for_seed(ns3_bridge, tmp_path, capsys):
    # --jobs 2 runs seeds in two processes, each with its own ns-3 child: the file is the one a single process
    # writes (same safe rates, runs, summary and time series), and the oracles the workers swept are cached
    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(dict(SMALL, seeds=3)))
    main([str(cfg), "--oracle-cache", str(tmp_path / "c1"), "--out", str(tmp_path / "one.json")])
    main([str(cfg), "--oracle-cache", str(tmp_path / "c2"), "--out", str(tmp_path / "two.json"), "--jobs", "2"])
    out = capsys.readouterr().out
    assert "running seeds 0..2 in 2 processes" in out
    one, two = (json.loads((tmp_path / n).read_text()) for n in ("one.json", "two.json"))
    for k in ("seeds_done", "settings", "safe_bps", "summary", "time_series"):
        assert two[k] == one[k], k
    assert two["runs"] == one["runs"] and [r["seed"] for r in two["runs"] if r["channel_name"] == "ns3"] == [0, 1, 2]
    assert sorted(p.name.split("-")[1] for p in (tmp_path / "c2").glob("oracle-*")) == ["seed0", "seed1", "seed2"]


def test_writes_are_spaced_yet_an_interrupt_keeps_every_finished_seed(ns3_bridge, tmp_path, monkeypatch, capsys):
    # --out is written at the first seed, then at most every WRITE_EVERY_S (here never), at the last seed, and on an
    # interrupt: seed 1 finished after the first write, seed 2 is interrupted, so the file holds seeds 0-1; the
    # rerun resumes from both and gives the file of a run in one go; without the oracle the anchors' per-step series
    # are left out of the file (nothing reads them) and the ns-3 runs keep theirs (a resume checks them)
    from coopsim.comm.ns3 import experiment

    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(dict(SMALL, seeds=3)))
    args = [str(cfg), "--oracle-cache", str(tmp_path / "cache"), "--no-oracle"]
    main(args + ["--out", str(tmp_path / "once.json")])
    monkeypatch.setattr(experiment, "WRITE_EVERY_S", 1e9)
    real = experiment.seed_runs

    def stop_at_2(seed, **kw):
        if seed == 2:
            raise KeyboardInterrupt
        return real(seed, **kw)

    monkeypatch.setattr(experiment, "seed_runs", stop_at_2)
    with pytest.raises(KeyboardInterrupt):
        main(args + ["--out", str(tmp_path / "cut.json")])
    cut = json.loads((tmp_path / "cut.json").read_text())
    assert cut["seeds_done"] == 2 and [r["seed"] for r in cut["runs"] if r["channel_name"] == "ns3"] == [0, 1]
    assert experiment.kept_on_interrupt().startswith(f"{tmp_path / 'cut.json'} with 2 of 3 seed(s)")
    monkeypatch.setattr(experiment, "seed_runs", real)
    capsys.readouterr()
    main(args + ["--out", str(tmp_path / "cut.json")])
    assert "reusing 2 finished seed(s)" in capsys.readouterr().out
    once, cut = (json.loads((tmp_path / n).read_text()) for n in ("once.json", "cut.json"))
    for k in ("seeds_done", "settings", "summary", "runs"):
        assert cut[k] == once[k], k
    assert all("series" not in r for r in once["runs"] if r["channel_name"] == "ideal")
    assert all("series" in r for r in once["runs"] if r["channel_name"] == "ns3")
