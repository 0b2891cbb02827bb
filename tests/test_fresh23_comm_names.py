"""One naming scheme for the comm counters, and the MPE tasks' own channel (``comm_channel``) in a run's metrics.

(1) Every channel names its counters ``comm/<what>_{copies,bytes}`` (offered, delivered, lost, queued): a run
without a channel of its own (the default ``ideal-v0``: every MG-MAPF / SMAC run) and one with ``bandwidth-v0``
have the same keys, and ``coopsim report`` reads the old ``comm/copies_offered`` of earlier runs as today's name.
(2) ``configs/mpe/simple_reference-bandwidth.yaml`` routes the task's utterances through a step-drop bandwidth
channel inside the scenario: its offered/delivered/lost/queued copies appear in each episode's metrics.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.ideal import IdealChannel
from coopsim.platform.comm import BROADCAST, COMM_COUNTERS, MessageBatch, add_comm_stats
from coopsim.platform.config import validate_config
from coopsim.platform.recorder import read_jsonl
from coopsim.platform.registry import make_scenario
from coopsim.platform.runner import run_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "mpe" / "simple_reference-bandwidth.yaml"
OLD = ("comm/copies_offered", "comm/copies_delivered")


def _run(tmp_path, name, **extra):
    cfg = validate_config({"name": name, "out_dir": str(tmp_path), "max_steps": 5, "seeds": [0], "episodes": 1,
                           "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 2, "length": 6}},
                           "agents": {"id": "random-v0"}, **extra})
    return read_jsonl(run_config(cfg, progress=False) / "metrics.jsonl")[0]


def _comm_keys(row):
    return {k for k in row if k.startswith("comm/") and "latency" not in k and k.count("/") == 1}


def test_a_run_without_a_channel_and_one_with_a_channel_name_the_copy_counters_alike(tmp_path):
    plain = _run(tmp_path, "plain")  # default channel: ideal-v0
    bw = _run(tmp_path, "bw", channel={"id": "bandwidth-v0", "params": {"trace": {"kind": "constant", "rate": 1e5}}})
    for row in (plain, bw):
        assert not set(OLD) & set(row)
        assert set(COMM_COUNTERS) <= set(row)
    assert _comm_keys(plain) == _comm_keys(bw)


def _traffic(ch, steps=4):
    ch.reset(0, num_envs=2, num_agents=3, dt_s=0.1)
    for t in range(steps):
        ch.send(t, MessageBatch(np.array([0, 1], np.int32), np.array([0, 2], np.int32),
                                np.array([BROADCAST, 1], np.int32), np.ones((2, 4), np.float32), np.full(2, t * 0.1)))
        ch.deliver(t + 1)
    return ch.stats()


def test_ideal_and_bandwidth_channels_count_the_same_traffic_under_the_same_names():
    ideal, bw = _traffic(IdealChannel()), _traffic(BandwidthChannel(trace={"kind": "constant", "rate": 1e6}))
    for k in COMM_COUNTERS + ("comm/messages_sent",):
        assert ideal[k] == bw[k], k
    assert ideal["comm/offered_copies"] == 4 * 3 and ideal["comm/delivered_copies"] == 4 * 3
    assert ideal["comm/offered_bytes"] == ideal["comm/delivered_bytes"] == 12 * (16 + 28)
    pc = IdealChannel()
    _traffic(pc)
    assert pc.per_copy()["offered_copies"][0, 0].tolist() == [0, 4, 4] and pc.per_copy()["offered_copies"][1, 2, 1] == 4


def test_report_reads_an_old_runs_copies_offered_as_offered_copies(tmp_path):
    from coopsim.platform.report import compare_runs

    def fake(d, name, value):
        d.mkdir()
        (d / "config.yaml").write_text(yaml.safe_dump({"name": d.name, "scenario": {"id": "line/LineWalk-v0",
                                                        "params": {"num_agents": 2}}, "seeds": [0]}))
        (d / "metrics.jsonl").write_text("".join(json.dumps({"seed": 0, "episode": e, "soc": 1.0 + e, name: value})
                                                 + "\n" for e in (0, 1)))
        return d

    res = compare_runs([fake(tmp_path / "old", "comm/copies_offered", 6.0),
                        fake(tmp_path / "new", "comm/offered_copies", 8.0)], out_dir=tmp_path)
    assert "comm/offered_copies" in res["metrics"] and not set(OLD) & set(res["metrics"])
    head = (tmp_path / "compare.csv").read_text().splitlines()[0].split(",")
    assert "comm/offered_copies" in head and not set(OLD) & set(head)


def test_add_comm_stats_adds_counters_and_keeps_the_delivering_sides_latency():
    task = {"comm/offered_copies": 10.0, "comm/delivered_copies": 6.0, "comm/lost_copies/late": 4.0,
            "comm/latency_p50_s": 0.05, "comm/latency_mean_s": 0.04, "mpe/return": -3.0}
    run = {"comm/offered_copies": 0.0, "comm/delivered_copies": 0.0, "comm/messages_sent": 0.0,
           "comm/latency_p50_s": 0.0}
    m = add_comm_stats(dict(task), run)
    assert m["comm/offered_copies"] == 10 and m["comm/delivered_copies"] == 6 and m["comm/lost_copies/late"] == 4
    assert m["comm/latency_p50_s"] == 0.05 and m["comm/messages_sent"] == 0 and m["mpe/return"] == -3
    both = add_comm_stats(dict(task), {"comm/delivered_copies": 2.0, "comm/latency_mean_s": 0.08,
                                       "comm/latency_p50_s": 0.07})
    assert both["comm/delivered_copies"] == 8 and both["comm/latency_mean_s"] == pytest.approx(0.05)
    assert both["comm/latency_p50_s"] == 0.07
    assert add_comm_stats({}, run) == run


def _conserved(m):
    for u in ("copies", "bytes"):
        assert m[f"comm/offered_{u}"] == m[f"comm/delivered_{u}"] + m[f"comm/lost_{u}"] + m[f"comm/queued_{u}"]
        causes = [k for k in m if k.startswith(f"comm/lost_{u}/")]
        assert not causes or m[f"comm/lost_{u}"] == sum(m[k] for k in causes)


def test_simple_reference_bandwidth_config_reports_its_channels_copies_per_episode(tmp_path):
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg.update(out_dir=str(tmp_path), seeds=[0], episodes=2)
    rows = read_jsonl(run_config(validate_config(cfg), progress=False) / "metrics.jsonl")
    assert len(rows) == 2
    for m in rows:
        # 2 speakers x 25 steps, one copy each to the other agent; the drop (500 bit/s) loses utterances
        assert m["comm/offered_copies"] == 50 and m["comm/messages_sent"] == 50
        assert m["comm/lost_copies"] > 0 and m["comm/lost_copies/late"] == m["comm/lost_copies"]
        _conserved(m)


def _episode(core, steps, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        core.step(rng.integers(0, 50, (core.num_envs, 2)))
    return core.episode_metrics()


def test_the_step_drop_loses_exactly_the_utterances_of_the_drop_steps():
    # 68-byte copies (10 floats + 28-byte header): 8000 bit/s sends one per 0.068 s, within the 0.1 s bound;
    # at 500 bit/s none makes it: the 10 steps of [1 s, 2 s) lose both agents' utterances, the rest arrive
    cc = {"id": "bandwidth-v0", "params": {"trace": {"kind": "step", "high": 8000, "low": 500, "drop_at_s": 1.0,
                                                     "recover_at_s": 2.0}, "latency_bound_s": 0.1}}
    core = make_scenario("mpe/simple_reference-v0", num_envs=3, comm_channel=cc)
    core.reset(seed=0)
    for m in _episode(core, 25):
        assert (m["comm/offered_copies"], m["comm/delivered_copies"], m["comm/lost_copies"]) == (50, 30, 20)
        assert m["comm/lost_copies/late"] == 20 and m["comm/offered_bytes"] == 50 * 68
        _conserved(m)
    # a reset of one env (as training does): its new episode counts from zero, the others keep theirs
    core.reset(env_ids=np.array([1]))
    m = core.episode_metrics()
    assert m[1]["comm/offered_copies"] == 0 and m[1]["comm/messages_sent"] == 0 and m[0]["comm/offered_copies"] == 50


def test_ideal_comm_channel_reports_every_utterance_delivered_and_direct_comm_reports_none():
    ideal = make_scenario("mpe/simple_reference-v0", num_envs=2, comm_channel={"id": "ideal-v0"})
    ideal.reset(seed=1)
    for m in _episode(ideal, 25):
        assert m["comm/offered_copies"] == m["comm/delivered_copies"] == 50 and m["comm/lost_copies"] == 0
        _conserved(m)
    direct = make_scenario("mpe/simple_reference-v0", num_envs=2)
    direct.reset(seed=1)
    assert all(set(m) == {"mpe/return"} for m in _episode(direct, 25))
