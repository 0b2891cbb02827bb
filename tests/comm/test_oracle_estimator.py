"""The safe-rate oracle's two estimators (coopsim.comm.oracle.window_safe_rate) and the ns-3 experiment's cache of
the grid's runs: ``max`` takes the highest rate lossless on its own, ``isotonic`` first fits the window loss
non-decreasing in the rate (weighted by the window's offered bytes), so a lucky rate above a lossy one is pooled
with it. The vectorized fit is checked against scipy's pool-adjacent-violators isotonic regression."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from scipy.optimize import isotonic_regression

from coopsim.comm.oracle import window_safe_rate
from coopsim.comm.ns3 import experiment as X
from coopsim.errors import ConfigError

RATES = np.array([1.0, 2.0, 3.0, 4.0])


def one_window(offered_per_rate, lost_per_rate):
    """[T=1, R, E=1] arrays: one step, so the window [0, 10) is that step."""
    return (np.asarray(offered_per_rate, float)[None, :, None], np.asarray(lost_per_rate, float)[None, :, None])


def test_a_lucky_rate_above_a_lossy_one_is_pooled_with_it():
    # window losses 0, 1 %, 0, 0 (equal weights): max takes rate 4 (lossless by luck); the monotone fit pools
    # rates 2-4 to 1/3 %, above 0.3 %, so only rate 1 is safe
    off, lost = one_window([1000, 1000, 1000, 1000], [0, 10, 0, 0])
    assert window_safe_rate(off, lost, RATES)[0, 0] == 4.0
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 1.0


def test_the_fit_weighs_rates_by_their_offered_bytes():
    # rate 2's 1 % is 10 bytes of 1000; rates 3 and 4 offered 10x more without loss: pooled 10 / 21000 < 0.3 %
    off, lost = one_window([1000, 1000, 10000, 10000], [0, 10, 0, 0])
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 4.0
    # exactly at the threshold counts as safe (<= 0.3 %), as for max: 30 lost of 10000 pooled
    off, lost = one_window([5000, 5000, 5000, 5000], [0, 0, 0, 30])
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 3.0
    off, lost = one_window([5000, 5000, 5000, 10000], [0, 0, 0, 30])
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 4.0


def test_both_estimators_agree_when_loss_grows_with_the_rate():
    off, lost = one_window([1000, 1000, 1000, 1000], [0, 2, 5, 40])
    assert window_safe_rate(off, lost, RATES)[0, 0] == 2.0
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 2.0
    # nothing safe: 0 for both
    off, lost = one_window([1000, 1000, 1000, 1000], [5, 5, 5, 5])
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_the_vectorized_fit_matches_scipys_isotonic_regression(seed):
    rng = np.random.default_rng(seed)
    T, R, E = 30, 17, 3
    rates = np.linspace(1e5, 1e6, R)
    offered = rng.integers(1, 4, (T, R, E)) * 412.0 * (1 + np.arange(R))[None, :, None]
    lost = np.where(rng.random((T, R, E)) < 0.02 * (1 + np.arange(R))[None, :, None] / R, offered, 0.0)
    got = window_safe_rate(offered, lost, rates, estimator="isotonic")
    cs_o = np.concatenate([np.zeros((1, R, E)), np.cumsum(offered, 0)])
    cs_l = np.concatenate([np.zeros((1, R, E)), np.cumsum(lost, 0)])
    hi = np.minimum(np.arange(T) + 10, T)
    wo, wl = cs_o[hi] - cs_o[:T], cs_l[hi] - cs_l[:T]
    want = np.zeros((T, E))
    for t in range(T):
        for e in range(E):
            m = wo[t, :, e] > 0
            fit = isotonic_regression(wl[t, m, e] / wo[t, m, e], weights=wo[t, m, e]).x
            ok = np.flatnonzero(fit <= 0.003)
            want[t, e] = rates[m][ok[-1]] if len(ok) else 0.0
    np.testing.assert_array_equal(got, want)


def test_an_unknown_estimator_is_refused():
    off, lost = one_window([1, 1, 1, 1], [0, 0, 0, 0])
    with pytest.raises(ValueError, match="estimator must be one of max, isotonic; got 'median'"):
        window_safe_rate(off, lost, RATES, estimator="median")


SMOOTH = "configs/ns3/ddacom-spread-smooth.yaml"


def test_the_config_refuses_an_unknown_estimator(tmp_path):
    cfg = yaml.safe_load(open(SMOOTH))
    cfg["oracle"]["estimator"] = "median"
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as e:
        X.load(str(p))
    assert "oracle.estimator" in str(e.value) and "'max' or 'isotonic'" in str(e.value)


def test_the_estimator_is_not_part_of_the_sweeps_cache_key():
    cfg = X.load(SMOOTH)
    kw = X._scenario_kw(cfg)
    rates = np.linspace(0.05, 0.6, 89) * 1e6
    keys = {est: X.oracle_cache_key({**cfg, "oracle": {**cfg["oracle"], "estimator": est}}, kw, 3, rates, 100)
            for est in ("max", "isotonic")}
    assert keys["max"] == keys["isotonic"]
    # a file written before the estimator existed (its key had no estimator) keeps its key
    assert "estimator" not in X._sweep_setting(cfg["oracle"])
    assert X._sweep_setting(cfg["oracle"]) == {k: v for k, v in cfg["oracle"].items() if k != "estimator"}


def test_a_cached_sweep_serves_both_estimators_and_an_old_file_only_max(tmp_path):
    # two rates, two envs, one step: env 0 loses 1 % at the low rate only (the high one lossless by luck)
    off = np.array([[[1000, 1000]], [[1000, 1000]]], float)  # [R, T, E]
    lost = np.array([[[10, 0]], [[0, 0]]], float)
    rates = [1e5, 2e5]
    new = tmp_path / "new.json"
    new.write_text(json.dumps({"rates_bps": rates, "safe_bps": [[2e5, 2e5]], "offered_bytes": off.tolist(),
                               "lost_bytes": lost.tolist()}))
    assert X._read_cached_oracle(new, "max").tolist() == [[2e5, 2e5]]
    assert X._read_cached_oracle(new, "isotonic").tolist() == [[0.0, 2e5]]  # pooled 0.5 % > 0.3 %: none safe
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"rates_bps": rates, "safe_bps": [[2e5, 2e5]]}))
    assert X._read_cached_oracle(old, "max").tolist() == [[2e5, 2e5]]
    assert X._read_cached_oracle(old, "isotonic") is None  # the sweep runs again (and keeps its runs)
    assert X._usable_cache(old, 1, 2, "max") and not X._usable_cache(old, 1, 2, "isotonic")


def test_a_rate_without_copies_in_a_window_takes_the_level_below_it():
    # (fresh36b N10: the docstring said "lossless for both") rate 2 offered nothing: max counts it lossless; the
    # isotonic fit gives it the level of the rates below it
    off, lost = one_window([1000, 0, 1000, 1000], [10, 0, 0, 0])
    assert window_safe_rate(off, lost, RATES)[0, 0] == 4.0
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 0.0  # pooled with rate 1's 1 %
    off, lost = one_window([1000, 0, 1000, 1000], [0, 0, 10, 10])
    assert window_safe_rate(off, lost, RATES, estimator="isotonic")[0, 0] == 2.0


@pytest.mark.parametrize("kwargs, text", [
    (dict(offered=np.ones((2, 4, 1)), lost=np.zeros((2, 4, 2))), r"both be \[T, R, E\].*\(2, 4, 1\) and \(2, 4, 2\)"),
    (dict(offered=np.ones((2, 4)), lost=np.zeros((2, 4))), r"both be \[T, R, E\]"),
    (dict(rates_bps=[1.0, 3.0, 2.0, 4.0]), "4 finite increasing rates"),
    (dict(rates_bps=[1.0, 2.0, 3.0]), "4 finite increasing rates"),
    (dict(lost=np.full((2, 4, 1), np.nan)), r"at step 0, rate 0, env 0: offered 1.0, lost nan"),
    (dict(lost=np.full((2, 4, 1), 2.0)), "lost <= offered"),
    (dict(window=0), "window must be a whole number of steps >= 1; got 0"),
])
def test_bad_oracle_input_is_named(kwargs, text):
    args = dict(offered=np.ones((2, 4, 1)), lost=np.zeros((2, 4, 1)), rates_bps=RATES)
    args.update(kwargs)
    with pytest.raises(ValueError, match=text):
        window_safe_rate(args.pop("offered"), args.pop("lost"), args.pop("rates_bps"), **args, estimator="isotonic")


def test_cached_oracle_only_says_why_a_cache_file_cannot_serve(tmp_path):
    # fresh36b N7: "no cached oracle for 1 of 1 seeds: <path>" for a file that exists
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"rates_bps": [1e5, 2e5], "safe_bps": [[2e5, 2e5]]}))
    assert X.cache_problem(old, 1, 2, "max") is None
    assert "holds the max estimator's safe rates only" in X.cache_problem(old, 1, 2, "isotonic")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert X.cache_problem(bad, 1, 2, "max") == "unreadable (not JSON)"
    assert X.cache_problem(tmp_path / "none.json", 1, 2, "max") == "no such file"
    # a file of another grid (hand-edited: the key covers the grid) is not used
    assert X._read_cached_oracle(old, "max", np.array([1e5, 3e5])) is None
    assert X.cache_problem(old, 1, 2, "max", np.array([1e5, 3e5])) == "unreadable or of another run size or grid"
