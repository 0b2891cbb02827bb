"""The ns-3 experiment's normalization: the anchor gap's CI over paired anchor seeds, issue 6's three-half-widths
condition, and the normalized return's delta-method CI, on hand-made returns with known answers (no ns-3)."""
from __future__ import annotations

import math

import pytest
import yaml
from scipy import stats

from coopsim.comm.ns3.experiment import anchor_gap, load, normalized_return
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
    assert hw == pytest.approx(0.0, abs=1e-6)  # the covariance term cancels the two variances exactly


def test_normalized_return_with_a_known_gap_is_the_numerators_t_interval_over_the_gap():
    # every anchor seed has gap 4 exactly (var G = 0): the CI is the numerator's paired t interval / 4
    none = {k: -float(k) for k in range(10)}
    bcast = {k: none[k] + 4.0 for k in range(10)}
    d = {0: 3.0, 1: 4.0, 2: 5.0}  # R - R_none on the 3 sender seeds: mean 4, sd 1
    nr, hw = normalized_return({k: none[k] + d[k] for k in d}, none, bcast)
    assert nr == pytest.approx(1.0)
    assert hw == pytest.approx(stats.t.ppf(0.975, 2) / math.sqrt(3) / 4)


def test_normalized_return_counts_the_covariance_of_the_shared_seeds():
    # sender seeds 0-1 with d = 1, 3 (mean 2, var of the mean 1); gap over 4 anchor seeds 2, 6, 4, 4 (mean 4,
    # var of the mean 8/3/4 = 2/3); the shared seeds 0-1 have gaps 2, 6: cov(d, g) = 4, cov(D, G) = 4 / 4 = 1.
    none = {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}
    bcast = {0: 2.0, 1: 6.0, 2: 4.0, 3: 4.0}
    nr, hw = normalized_return({0: 1.0, 1: 3.0}, none, bcast)
    assert nr == pytest.approx(0.5)
    var = (1.0 - 2 * 0.5 * 1.0 + 0.25 * (2 / 3)) / 16
    assert hw == pytest.approx(stats.t.ppf(0.975, 1) * math.sqrt(var))
    with pytest.raises(ValueError, match="both anchors"):
        normalized_return({7: 1.0}, none, bcast)


def test_config_anchor_seeds_must_cover_the_ns3_seeds(tmp_path):
    cfg = yaml.safe_load(open("configs/ns3/ddacom-spread.yaml"))
    assert load("configs/ns3/ddacom-spread.yaml")["anchor_seeds"] >= cfg["seeds"]
    for bad in (cfg["seeds"] - 1, 0, True, 1.5):
        p = tmp_path / "bad.yaml"
        p.write_text(yaml.safe_dump(dict(cfg, anchor_seeds=bad)))
        with pytest.raises(ConfigError, match="anchor_seeds"):
            load(str(p))
