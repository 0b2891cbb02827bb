"""`python -m coopsim.agents.ddacom.evaluate`: one seed prints values without a (nan) interval and says so; its
ci95 is platform.stats.t_interval's interval (bit for bit the former Student-t formula for two or more seeds)."""
import json
import math

import numpy as np
import pytest
from scipy import stats

from coopsim.agents.ddacom import evaluate
from coopsim.platform.stats import t_interval

FAST = ["--num-envs", "2", "--episodes", "1", "--senders", "none,broadcast"]


def _former_ci95(x):  # the formula ci95 had before it used t_interval
    a = np.asarray(x, float)
    return float(a.mean()), float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a)))


@pytest.mark.parametrize("n", [2, 3, 5, 17])
def test_ci95_is_t_interval_and_the_former_numbers(n):
    x = list(np.random.default_rng(n).normal(3.0, 2.0, size=n))
    mean, half = evaluate.ci95(x)
    assert (mean, half) == _former_ci95(x)
    m, lo, hi = t_interval(x)
    assert (m, lo, hi) == (mean, mean - half, mean + half)


def test_ci95_of_one_value_has_no_half_width():
    mean, half = evaluate.ci95([1.25])
    assert mean == 1.25 and math.isnan(half)


def test_one_seed_prints_no_nan_and_says_there_is_no_ci(tmp_path, capsys):
    evaluate.main(["--seeds", "1", *FAST, "--out", str(tmp_path / "e.json")])
    out = capsys.readouterr().out
    assert "nan" not in out.lower()
    (gap,) = [ln for ln in out.splitlines() if ln.startswith("R_broadcast_ideal - R_no_comm = ")]
    summary = json.loads((tmp_path / "e.json").read_text())["summary"]
    assert gap == f"R_broadcast_ideal - R_no_comm = {summary['ideal_gap'][0]:.2f} (1 seed, no CI)"
    (row,) = [ln for ln in out.splitlines() if ln.startswith("ideal/broadcast ")]
    assert row.split()[1:] == ["1.000", "-", "0.000", "1.000"]  # values alone, no +-
    assert "1 seed, no CI" in out.split("channel/sender")[0]


def test_two_seeds_print_intervals(tmp_path, capsys):
    evaluate.main(["--seeds", "2", *FAST, "--out", str(tmp_path / "e.json")])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "e.json").read_text())["summary"]
    g = summary["ideal_gap"]
    assert f"R_broadcast_ideal - R_no_comm = {g[0]:.2f} +- {g[1]:.2f} (95% CI half-width)" in out
    assert "no CI" not in out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("markov/broadcast ")]
    nr = summary["rows"]["markov/broadcast"]["loss"]
    assert f"{nr[0] * 100:7.3f}+-{nr[1] * 100:5.3f}".strip() in row


def test_sender_params_reach_the_sender_and_bad_ones_fail_before_any_run(tmp_path):
    from coopsim.errors import ConfigError

    def msgs(*extra):
        out = tmp_path / f"e{len(extra)}.json"  # other settings, as many seeds: each its own --out (fresh36 F11)
        evaluate.main(["--seeds", "1", "--num-envs", "2", "--episodes", "2", "--senders", "novelty", *extra,
                       "--out", str(out)])
        rows = json.loads(out.read_text())["summary"]["rows"]
        return [rows[f"{c}/novelty"]["messages_vs_broadcast"][0] for c in ("markov", "sinusoid", "step")]

    default, far = msgs(), msgs("--sender-param", "novelty.threshold_m=1000")
    # a 1000 m threshold sends each (entity, teammate) once per episode: far fewer copies on every channel
    assert all(f < 0.5 * d for f, d in zip(far, default))
    for bad, match in [("novelty.threshold=1", "unknown parameter 'threshold'.*did you mean 'threshold_m'"),
                       ("novelty.threshold_m=-1", "novelty.threshold_m.*invalid value -1"),
                       ("ddacom.margin=0.5", "'ddacom' is not run"), ("margin=0.5", "SENDER.KEY=VALUE")]:
        with pytest.raises(ConfigError, match=match):
            evaluate.main(["--senders", "novelty", "--sender-param", bad, "--out", str(tmp_path / "bad.json")])
    with pytest.raises(ConfigError, match="--senders.*unknown sender 'nope'"):
        evaluate.main(["--senders", "novelty,nope", "--out", str(tmp_path / "bad.json")])
    assert not (tmp_path / "bad.json").exists()


def test_first_seed_and_a_seed_whose_anchors_tie(tmp_path, capsys):
    def row(ch, snd, seed, ret):
        return {"channel_name": ch, "sender": snd, "seed": seed, "return": ret, "loss": 0.0, "messages_vs_broadcast": 0.5}

    rs = [row("ideal", "none", 100, -10.0), row("ideal", "broadcast", 100, -6.0), row("step", "ddacom", 100, -7.0),
          row("ideal", "none", 101, -8.0), row("ideal", "broadcast", 101, -8.0), row("step", "ddacom", 101, -9.0)]
    s = evaluate.summarize(rs)  # seed 101's gap is 0: its ratio is left out instead of dividing by zero
    assert s["zero_gap_seeds"] == [101]
    assert s["rows"]["step/ddacom"]["normalized_return"][0] == pytest.approx(0.75)
    evaluate.print_table(s)
    assert "leaves out seeds [101]" in capsys.readouterr().out
    out = tmp_path / "e.json"
    evaluate.main(["--first-seed", "7", "--seeds", "2", *FAST, "--out", str(out)])
    d = json.loads(out.read_text())
    assert d["seeds_done"] == 2 and sorted({r["seed"] for r in d["runs"]}) == [7, 8]
