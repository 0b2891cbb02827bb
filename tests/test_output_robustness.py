"""Output robustness: strict JSON result files (nan -> null), atomic figures, rate intervals clipped to [0, 1],
piped CLI output not wrapped at 80 columns."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from coopsim.platform.recorder import atomic_savefig, atomic_write_json, dumps_json
from coopsim.platform.stats import summarize, t_interval


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_dumps_json_writes_nan_and_inf_as_null():
    summary = {"metrics": {"win": {"mean": 1.0, "ci95_low": float("nan"), "ci95_high": np.float64("nan")}},
               "final_metrics": {"loss": np.float32("inf"), "steps": np.int64(3), "ok": np.bool_(True)},
               "pairs": [(1.0, float("-inf"))], "array": np.array([[0.5, np.nan]])}
    back = _strict(dumps_json(summary, indent=2, sort_keys=True))
    assert back == {"metrics": {"win": {"mean": 1.0, "ci95_low": None, "ci95_high": None}},
                    "final_metrics": {"loss": None, "steps": 3, "ok": True},
                    "pairs": [[1.0, None]], "array": [[0.5, None]]}
    with pytest.raises(ValueError):
        _strict(json.dumps({"x": float("nan")}))  # what the writers used to produce


def test_run_summary_json_is_strict(tmp_path):
    from coopsim.platform.runner import write_summary

    (tmp_path / "metrics.jsonl").write_text('{"episode": 0, "seed": 0, "win": 1.0}\n')  # 1 seed: no interval
    write_summary(tmp_path, wall_s=1.0, totals={"shield/x": np.float64("nan")})
    back = _strict((tmp_path / "summary.json").read_text())
    assert back["metrics"]["win"]["ci95_low"] is None and back["totals"]["shield/x"] is None


def test_ddacom_one_seed_results_are_strict_and_still_print(capsys):
    from coopsim.agents.ddacom.evaluate import print_table, summarize as dd_summarize

    results = [{"channel_name": c, "sender": s, "seed": 0, "return": r, "loss": 0.0, "messages_vs_broadcast": m}
               for c, s, r, m in (("ideal", "none", -10.0, 0.0), ("ideal", "broadcast", -5.0, 1.0),
                                  ("wifi", "ddacom", -6.0, 0.3))]
    back = _strict(dumps_json({"summary": dd_summarize(results)}, indent=1))["summary"]
    assert back["rows"]["wifi/ddacom"]["loss"] == [0.0, None]  # one seed: the half-width is null, not NaN
    print_table(back)  # the reader takes the null half-width as "no CI"
    assert "1 seed, no CI" in capsys.readouterr().out


def test_atomic_write_json_is_strict_and_keeps_the_old_file_when_the_object_cannot_be_written(tmp_path):
    path = tmp_path / "results.json"
    atomic_write_json(path, {"win": np.float32(0.5), "loss": float("nan"), "rows": np.arange(3)}, indent=1)
    assert json.loads(path.read_text()) == {"win": 0.5, "loss": None, "rows": [0, 1, 2]}
    before = path.read_bytes()
    with pytest.raises(TypeError):
        atomic_write_json(path, {"bad": object()})
    assert path.read_bytes() == before  # the previous version survives, no partial file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # and no temporary file is left


def test_atomic_savefig_writes_a_readable_png_and_no_temporary_file(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [1, 0])
    out = tmp_path / "sub" / "plot.png"
    atomic_savefig(fig, out, dpi=50)
    atomic_savefig(fig, tmp_path / "plot.pdf")  # the format follows the suffix
    plt.close(fig)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert mpimg.imread(out).shape[:2] == (75, 100)
    assert (tmp_path / "plot.pdf").read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["plot.pdf", "plot.png", "sub"]


def test_t_interval_bounds_clip_and_the_default_is_unchanged():
    values = [1, 1, 1, 0.9, 1]
    mean, lo, hi = t_interval(values)
    half = 2.7764451051977987 * np.std(values, ddof=1) / math.sqrt(5)  # t(0.975, 4 dof)
    assert (mean, lo, hi) == pytest.approx((0.98, 0.98 - half, 0.98 + half))
    assert hi > 1.0
    assert t_interval(values, bounds=(0.0, 1.0)) == pytest.approx((0.98, 0.98 - half, 1.0))
    assert t_interval([0, 0, 0, 0.1, 0], bounds=(0.0, 1.0)) == pytest.approx((0.02, 0.0, 0.02 + half))
    m1, lo1, hi1 = t_interval([1.0], bounds=(0.0, 1.0))  # one value: still no interval
    assert m1 == 1.0 and math.isnan(lo1) and math.isnan(hi1)


def test_summarize_clips_rates_only():
    rows = [{"seed": s, "episode": 0, "win": w, "episode_return": w} for s, w in enumerate([1, 1, 1, 0.9, 1])]
    out = summarize(rows)
    assert out["win"]["ci95_high"] == 1.0
    assert out["episode_return"]["ci95_high"] > 1.0
    assert out["win"]["ci95_low"] == pytest.approx(out["episode_return"]["ci95_low"])


def test_coopsim_list_piped_keeps_one_line_per_id():
    from coopsim.platform import registry

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-m", "coopsim.cli", "list"], capture_output=True, text=True, env=env,
                         check=True).stdout
    lines = out.splitlines()
    ids = [s.id for k in registry.KINDS for s in registry.specs(k)]
    assert len(lines) == len(registry.KINDS) + len(ids)  # no line broken in two
    longest = max(lines, key=len)
    assert len(longest) > 80
    assert any(longest.startswith(f"  {i} ") for i in ids)
