"""fresh34c figure findings: the IMMP evaluation figure (F8: a colour per method, a marker per K, bars over training
seeds as in the README table and clipped, a log and a zoomed SoC/LB row, legend outside, title, --plot-only),
the regret / conservativeness figure (F9: label not clipped, legends >= 8 pt outside the data, panel titles, no
entry for a hidden series), the ns-3 time-series figure (F10: title, subtitle with seeds x envs and 1 s bins, a
utilization = 1 line) and the PPO learning curves (F6/F16: the smoothing said on the figure and in the JSON,
``final_smoothed`` beside ``last_iteration``; F5: a one-point series drawn with a marker). Each test draws from
small synthetic data and inspects the matplotlib artists."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from bench_loader import load_benchmark  # noqa: E402


def capture(monkeypatch, module) -> list:
    """Patch ``module.atomic_savefig`` to keep the figure (and still write it); returns the list it fills."""
    figs: list = []
    real = module.atomic_savefig

    def keep(fig, path, **kw):
        figs.append(fig)
        real(fig, path, **kw)

    monkeypatch.setattr(module, "atomic_savefig", keep)
    return figs


def texts(fig) -> str:
    """Every text of a figure: figure texts, suptitle, axes titles and labels, legend texts and titles."""
    out = [t.get_text() for t in fig.texts]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()] + [leg.get_title().get_text()]
    for leg in fig.legends:
        out += [t.get_text() for t in leg.get_texts()]
    return "\n".join(out)


# --- F8: benchmarks/immp_compare.py ------------------------------------------------------------------------------

def _cell(soc, mk, per=None, succ=1.0):
    c = {"n": 15 if per else 5, "solved": 15, "success": succ, "soc_over_lb": soc, "soc_over_lb_ci": 0.01,
         "makespan": mk, "makespan_ci": 1.0}
    if per:
        c["per_train_seed"] = {str(i): {"soc_over_lb": s, "makespan": m, "solved": k, "n": 5}
                               for i, (s, m, k) in enumerate(per)}
    return c


def _immp_table() -> dict:
    """Two maps, N 32 / 64 at K = 3 and N 64 at K = 5; 7 methods (5 learned with 3 training seeds, 2 without)."""
    tab = {}
    for mp in ("random-32-32-10", "room-32-32-4"):
        for n, k in ((32, 3), (64, 3), (64, 5)):
            tab[f"{mp}|{n}|{k}"] = {
                "mapf/immp-v0": _cell(1.05, 100, [(1.04, 98, 5), (1.05, 100, 5), (1.06, 102, 5)]),
                "mapf/immp-v0-nocspibt": _cell(5.0, 380, [(3.0, 384, 0), (5.5, 384, 1), (6.5, 300, 5)], 0.4),
                "mapf/immp-nocong-v0": _cell(1.06, 101, [(1.05, 99, 5), (1.06, 101, 5), (1.07, 103, 5)]),
                "mapf/dppo-v0": _cell(2.0, 30, [(1.2, 5, 0), (2.0, 30, 1), (2.8, 55, 5)], 0.4),
                "mapf/dppo-v0+cspibt": _cell(1.09, 104, [(1.08, 100, 5), (1.09, 104, 5), (1.10, 108, 5)]),
                "mapf/pibt-v0": _cell(1.07, 105),
                "mapf/prioritized-v0": _cell(1.03, 97),
            }
    return tab


@pytest.fixture(scope="module")
def immp():
    return load_benchmark("immp_compare", "immp_compare_fresh34c")


def test_immp_plot_colours_markers_bars_and_labels(immp, tmp_path, monkeypatch):
    figs = capture(monkeypatch, immp)
    tab = _immp_table()
    immp.plot(tab, tmp_path / "immp_eval.png")
    assert (tmp_path / "immp_eval.png").stat().st_size > 0
    (fig,) = figs
    axes = np.array(fig.axes).reshape(4, 2)
    # a distinct colour per method: every line of one panel's K = 3 series has its own colour
    lines = [ln for ln in axes[0, 0].get_lines() if ln.get_linestyle() == "-" and len(ln.get_xdata()) == 2]
    colours = {mcolors.to_hex(ln.get_color()) for ln in lines}
    assert len(lines) == 7 and len(colours) == 7
    # a marker per K: K = 3 filled circles on a line, K = 5 hollow squares without a line
    markers = {ln.get_marker() for ln in axes[0, 0].get_lines() if ln.get_marker() not in ("None", None, "")}
    assert {"o", "s"} <= markers
    hollow = [ln for ln in axes[0, 0].get_lines() if ln.get_marker() == "s"]
    assert hollow and all(mcolors.to_hex(ln.get_markerfacecolor()) == "#ffffff" for ln in hollow)
    # success bars stay in [0, 1], makespan bars >= 0 (dppo's per-seed makespans 5 / 30 / 55 give a t-interval
    # reaching far below 0; immp-v0-nocspibt's success 0 / 0.2 / 1 one above 1)
    for j in range(2):
        lo, hi = axes[3, j].get_ylim()
        assert -0.05 <= lo and hi <= 1.05
        for coll in axes[3, j].collections:
            for seg in coll.get_segments():
                assert np.all(seg[:, 1] >= -1e-9) and np.all(seg[:, 1] <= 1 + 1e-9)
        for coll in axes[2, j].collections:
            for seg in coll.get_segments():
                assert np.all(seg[:, 1] >= -1e-9)
        assert axes[0, j].get_yscale() == "log"
        assert axes[1, j].get_ylim()[1] <= 1.5  # the zoomed SoC/LB row
    t = texts(fig)
    assert "95% Student-t CI over training seeds" in t and "IMMP evaluation" in t
    assert "no bar" in t and "clipped" in t
    # the legend is the figure's, below the panels, not on a panel's data; it names every method and both Ks
    assert fig.legends and not any(ax.get_legend() for ax in fig.axes)
    leg = [x.get_text() for x in fig.legends[0].get_texts()]
    assert "immp-v0" in leg and "pibt-v0" in leg and "K = 3 goals" in leg and "K = 5 goals (64 agents only)" in leg
    assert fig.legends[0].get_texts()[0].get_fontsize() >= 8


def test_immp_plot_points_are_over_training_seeds_and_clipped(immp):
    from scipy import stats

    c = _cell(2.0, 30, [(1.2, 5, 0), (2.0, 30, 1), (2.8, 55, 5)], 0.4)
    p = immp.plot_points(c)
    half = stats.t.ppf(0.975, 2) * np.std([1.2, 2.0, 2.8], ddof=1) / np.sqrt(3)
    assert p["soc_over_lb"] == pytest.approx((2.0, max(2.0 - half, 1.0), 2.0 + half))
    assert p["makespan"][0] == pytest.approx(30) and p["makespan"][1] == 0.0  # clipped at 0
    assert p["success"][0] == pytest.approx(0.4) and (p["success"][1], p["success"][2]) == (0.0, 1.0)
    # a method without training seeds: the mean over instances, no interval
    assert immp.plot_points(_cell(1.07, 105)) == {"soc_over_lb": (1.07, 1.07, 1.07), "makespan": (105, 105, 105),
                                                  "success": (1.0, 1.0, 1.0)}


def test_immp_plot_only_redraws_from_the_json(immp, tmp_path, capsys):
    src = tmp_path / "immp_eval.json"
    src.write_text(json.dumps({"table": _immp_table(), "targets": {}}))
    immp.main(["--plot-only", str(src)])
    assert (tmp_path / "immp_eval.png").stat().st_size > 0
    assert "immp_eval.png" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        immp.main(["--plot-only", str(src), str(tmp_path)])  # roots with --plot-only: refused
    assert "give no roots" in capsys.readouterr().err


def test_immp_committed_json_draws(immp, tmp_path):
    """The shipped command: docs/immp/immp_eval.json redraws without any run."""
    root = Path(__file__).resolve().parents[1]
    immp.main(["--plot-only", str(root / "docs/immp/immp_eval.json"), "--out", str(tmp_path)])
    assert (tmp_path / "immp_eval.png").stat().st_size > 0


# --- F9: graph_safe _plot_regret ---------------------------------------------------------------------------------

def _regret_json(folder: Path, case: str, seed: int, certifiable: bool, n: int = 40) -> None:
    k = np.arange(1, n + 1)
    cons = [[e, min(1.0, 0.4 + 0.01 * e), min(1.0, 0.5 + 0.01 * e)] for e in range(0, n, 5)]
    d = {"case": case, "seed": seed, "cumulative_regret": (10 * np.sqrt(k) + seed).tolist(),
         "slope_second_half": 0.5, "conservativeness": cons}
    if certifiable:
        d.update(truly_safe=100, certifiable=100)
    (folder / f"regret-{case}-seed{seed}.json").write_text(json.dumps(d))


def test_regret_plot_labels_legends_and_hidden_series(tmp_path, monkeypatch):
    from coopsim.agents.graph_safe import experiments as gx

    figs = capture(monkeypatch, gx)
    _regret_json(tmp_path, "case-a", 0, certifiable=True)
    _regret_json(tmp_path, "case-a", 1, certifiable=True)
    _regret_json(tmp_path, "case-b", 0, certifiable=False)
    gx._plot_regret(tmp_path)
    assert (tmp_path / "regret_conservativeness.png").is_file()
    (fig,) = figs
    left, right = fig.axes[:2]
    assert left.get_title() and right.get_title()  # panel titles
    assert len(left.get_ylabel()) <= 40  # short enough not to be cut at the figure's edge
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the figure was closed after saving: give it a canvas to lay out again
    canvas.draw()
    r = canvas.get_renderer()
    box = left.yaxis.label.get_window_extent(r)
    assert box.y0 >= 0 and box.y1 <= fig.bbox.height  # the label fits in the figure
    for ax in (left, right):
        leg = ax.get_legend()
        assert leg is not None and all(t.get_fontsize() >= 8 for t in leg.get_texts())
        # outside the data: the legend box lies below the axes
        assert leg.get_window_extent(r).y1 <= ax.get_window_extent(r).y0 + 1
    t = texts(fig)
    assert "case-a (2 seeds" in t and "case-b (1 seed," in t  # "1 seed", not "1 seeds"
    # case-a's "of certifiable" curve equals its solid curve: no dotted line, no legend entry; the note says why
    assert not [ln for ln in right.get_lines() if ln.get_linestyle() == ":"]
    assert "of certifiable" not in " ".join(x.get_text() for x in right.get_legend().get_texts())
    assert "case-a" in " ".join(x.get_text() for x in fig.texts) and "not recorded" in t


# --- F10: ns-3 experiment plot -----------------------------------------------------------------------------------

def test_ns3_plot_title_subtitle_and_utilization_line(tmp_path, monkeypatch):
    from coopsim.comm.ns3 import experiment as ns3x

    figs = capture(monkeypatch, ns3x)
    row = {"utilization": [0.5, 1.2, 0.8], "loss": [0.0, 0.01, 0.002], "messages_vs_broadcast": [0.3, 0.4, 0.35],
           "normalized_return_per_episode": [1.0]}
    ts = {"ddacom": row, "broadcast": {**row, "utilization": [1.1, 1.6, 1.2]}, "none": row,
          "safe_rate_frac": [0.4, 0.2, 0.4]}
    ns3x.plot(ts, str(tmp_path / "a.png"), seeds=6, envs=2)
    ns3x.plot(ts, str(tmp_path / "b.png"))
    a, b = figs
    assert "pooled over 6 seeds x 2 envs, 1 s bins" in texts(a)
    assert "every seed x env of the run" in texts(b) and "1 s bins" in texts(b)
    assert a._suptitle is not None and a._suptitle.get_text()
    util = a.axes[0]
    assert any(np.allclose(ln.get_ydata(), 1.0) and len(set(ln.get_ydata())) == 1 for ln in util.get_lines())
    assert "utilization 1" in texts(a) or any("utilization 1" in t.get_text() for t in util.texts)
    assert util.get_legend() is not None


# --- F5 / F6 / F16: coopsim.agents.ppo.curves --------------------------------------------------------------------

def _train_run(root: Path, rows: dict[int, list[float]]) -> Path:
    run = root / "run"
    for seed, ys in rows.items():
        d = run / f"seed-{seed}"
        d.mkdir(parents=True)
        lines = ["iteration,env_steps,episode/success"] + [f"{i},{(i + 1) * 512},{y}" for i, y in enumerate(ys)]
        (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    return run


def test_curves_say_they_are_smoothed_and_give_the_last_iteration(tmp_path, monkeypatch):
    from coopsim.agents.ppo import curves

    figs = capture(monkeypatch, curves)
    run = _train_run(tmp_path, {0: [0.3, 0.6, 0.7, 0.89], 1: [0.4]})
    res = curves.plot(tmp_path / "c.png", [str(run)], ("episode/success",), smooth_k=10)
    assert res["smooth"] == 10
    assert res["final_smoothed"]["episode/success"] == pytest.approx([np.mean([0.3, 0.6, 0.7, 0.89]), 0.4])
    assert res["last_iteration"]["episode/success"] == pytest.approx([0.89, 0.4])
    assert "metrics" not in res  # the smoothed values are not called plain "metrics" any more
    (fig,) = figs
    t = texts(fig)
    assert "trailing mean over 10 logged iterations" in t
    assert "trailing mean over 10 logged iterations" in fig.axes[0].get_ylabel()
    # the one-point seed is drawn with a marker (a line of one point would not show); the 4-point one is a line
    one = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) == 1]
    four = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) == 4]
    assert one and one[0].get_marker() == "o"
    assert four and four[0].get_marker() in ("None", None, "")


def test_curves_unsmoothed_says_so(tmp_path, monkeypatch):
    from coopsim.agents.ppo import curves

    figs = capture(monkeypatch, curves)
    run = _train_run(tmp_path, {0: [0.3, 0.6]})
    res = curves.plot(tmp_path / "c.png", [str(run)], ("episode/success",), smooth_k=1, title="my run")
    assert res["final_smoothed"] == res["last_iteration"] == {"episode/success": [0.6]}
    t = texts(figs[0])
    assert "unsmoothed" in t and "my run" in t and "trailing mean" not in t
