"""The ns-3 experiment's normalization: the anchor gap's CI over paired anchor seeds, issue 6's three-half-widths
condition, and the normalized return's delta-method CI, on hand-made returns with known answers (no ns-3)."""
from __future__ import annotations

import math

import pytest
import yaml
from scipy import stats

import numpy as np

from coopsim.comm.ns3.experiment import anchor_gap, load, normalized_return, time_series
from coopsim.errors import ConfigError


def test_anchor_gap_is_the_paired_difference_with_a_t_interval_over_seeds():
    none = {0: -10.0, 1: -20.0, 2: -30.0}
    bcast = {0: -8.0, 1: -17.0, 2: -26.0}  # paired gaps 2, 3, 4: mean 3, sd 1
    g = anchor_gap(none, bcast)
    assert g["mean"] == pytest.approx(3.0)
    assert g["half_width"] == pytest.approx(stats.t.ppf(0.975, 2) / math.sqrt(3))  # 4.303 / 1.732 = 2.484
    assert g["seeds"] == 3 and not g["judged"]  # 3 < 3 x 2.484
    # the same spread of gaps over 100 seeds: half-width 1.984 x 1 / 10, judged
    none = {k: -float(k) for k in range(100)}
    bcast = {k: -float(k) + 3.0 + (-1) ** k * math.sqrt(99 / 100) for k in range(100)}  # gaps 3 +- 0.995, sd 1
    g = anchor_gap(none, bcast)
    assert g["mean"] == pytest.approx(3.0)
    assert g["sd_over_seeds"] == pytest.approx(1.0)
    assert g["half_width"] == pytest.approx(stats.t.ppf(0.975, 99) / 10)
    assert g["judged"]


def test_anchor_gap_wants_the_same_seeds_in_both_anchors():
    with pytest.raises(ValueError, match="same seeds"):
        anchor_gap({0: 0.0, 1: 0.0}, {0: 1.0})


def test_normalized_return_of_a_sender_that_recovers_a_fixed_share_of_every_gap_is_exact():
    none = {0: -10.0, 1: -20.0, 2: -30.0, 3: -12.0}
    bcast = {0: -8.0, 1: -17.0, 2: -26.0, 3: -7.0}
    sender = {k: none[k] + 0.5 * (bcast[k] - none[k]) for k in none}
    nr, hw = normalized_return(sender, none, bcast)
    assert nr == pytest.approx(0.5)
    assert hw == pytest.approx(0.0, abs=1e-12)  # numerator and gap move together seed by seed


def test_normalized_return_is_the_paired_ratio_with_a_delta_method_interval():
    # gaps 2, 6, 4 (sum 12); R - R_none 2, 4, 3 (sum 9): NR 0.75; residuals 2 - 1.5, 4 - 4.5, 3 - 3 = 0.5, -0.5, 0
    # (sd 0.5); half-width t(0.975, 2) x 0.5 / sqrt(3) / mean gap 4
    none = {0: -10.0, 1: -20.0, 2: -30.0, 3: -99.0}  # seed 3: an anchor seed with no ns-3 run, not used
    bcast = {0: -8.0, 1: -14.0, 2: -26.0, 3: -50.0}
    sender = {0: -8.0, 1: -16.0, 2: -27.0}
    nr, hw = normalized_return(sender, none, bcast)
    assert nr == pytest.approx(0.75)
    assert hw == pytest.approx(stats.t.ppf(0.975, 2) * 0.5 / math.sqrt(3) / 4)
    with pytest.raises(ValueError, match="both anchors"):
        normalized_return({7: 1.0}, none, bcast)
    assert math.isnan(normalized_return({0: -8.0}, none, bcast)[1])  # one seed: no interval


def test_config_anchor_seeds_must_cover_the_ns3_seeds(tmp_path):
    cfg = yaml.safe_load(open("configs/ns3/ddacom-spread.yaml"))
    assert load("configs/ns3/ddacom-spread.yaml")["anchor_seeds"] >= cfg["seeds"]
    for bad in (cfg["seeds"] - 1, 0, True, 1.5):
        p = tmp_path / "bad.yaml"
        p.write_text(yaml.safe_dump(dict(cfg, anchor_seeds=bad)))
        with pytest.raises(ConfigError, match="anchor_seeds"):
            load(str(p))


def test_time_series_normalized_return_per_episode_is_the_paired_ratio():
    T, E = 20, 2  # 2 episodes of 10 steps (time_series reads the per-episode returns only), 2 envs

    def run(channel, sender, seed, ep_returns):
        z = np.zeros((T, E)).tolist()
        return {"channel_name": channel, "sender": sender, "seed": seed, "series": {
            "delivered_bits": z, "offered_copies": z, "lost_copies": z, "broadcast_copies": z,
            "return_per_episode": [[x, x] for x in ep_returns]}}

    results = [run("ideal", "none", 0, [-10, -20]), run("ideal", "broadcast", 0, [-6, -18]),
               run("ideal", "none", 1, [-12, -10]), run("ideal", "broadcast", 1, [-4, -8]),
               run("ns3", "ddacom", 0, [-7, -19]), run("ns3", "ddacom", 1, [-6, -8])]
    ts = time_series(results, {0: np.ones((T, E)), 1: np.ones((T, E))}, 3, 10.0)
    # episode 0: (3 + 6) / (4 + 8); episode 1: (1 + 2) / (2 + 2)
    assert ts["ddacom"]["normalized_return_per_episode"] == pytest.approx([0.75, 0.75])
    assert len(ts["ddacom"]["utilization"]) == 2


def test_cached_oracle_only_fails_before_any_run(tmp_path):
    """With --cached-oracle-only and no cache, the experiment stops before the anchors' 400 runs (fresh-user report)."""
    import time
    from pathlib import Path

    import pytest

    from coopsim.comm.ns3.experiment import main
    from coopsim.errors import ConfigError

    cfg = Path(__file__).resolve().parents[2] / "configs" / "ns3" / "ddacom-spread.yaml"
    t0 = time.time()
    with pytest.raises(ConfigError, match=r"no cached oracle for 6 of 6 seeds"):
        main([str(cfg), "--cached-oracle-only", "--oracle-cache", str(tmp_path), "--out", str(tmp_path / "x.json")])
    assert time.time() - t0 < 10 and not (tmp_path / "x.json").exists()
