"""Figures and tables review fresh34c (F1 F2 F3 F4 F5 F7 F12 F13 F14): metrics.png puts the task's metrics before
the channel/shield counters, drops exact duplicates and names what the panel limit leaves out; a learn-during-run
agent's figure says its seeds are not independent and draws no band, and a count's band never goes below 0; each
seed's mean is drawn and its episode dots are jittered; runs that differ in no numeric key get a point-with-CI
chart per metric and the table says when it shows only the first metrics; train_curves.png marks every point,
names the run and says what a point is; tables say what the CI is and name the headline metrics with units;
comparison lines have their own markers and styles and a titled legend; a cell has one precision."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from coopsim.platform import report
from coopsim.platform.stats import summarize

REPO = Path(__file__).resolve().parents[2]


def make_run(folder: Path, rows: list[dict], *, name="r", agent="mapf/pibt-v0", seeds_note=None, summary=None,
             extra_cfg=None) -> Path:
    """A run directory as `coopsim run` writes it (config.yaml, metrics.jsonl, summary.json)."""
    folder.mkdir(parents=True)
    seeds = sorted({r["seed"] for r in rows})
    cfg = {"name": name, "scenario": {"id": "mapf/grid-v0", "params": {}}, "agents": {"id": agent, "params": {}},
           "seeds": seeds, "episodes": max(sum(1 for r in rows if r["seed"] == s) for s in seeds),
           **(extra_cfg or {})}
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summ = {"metrics": summary if summary is not None else summarize(rows), "interrupted": False,
            "episodes_finished": len(rows), "checkpoint": None}
    if seeds_note:
        summ["seeds_note"] = seeds_note
    (folder / "summary.json").write_text(json.dumps(summ))
    return folder


def mpe_rows(seeds=(0, 1), episodes=2):
    rng = np.random.default_rng(1)
    rows = []
    for s in seeds:
        for e in range(episodes):
            lost = float(rng.integers(1, 500))
            row = {"seed": s, "episode": e, "episode_return": float(rng.normal(-50, 10)),
                   "mpe/final_cover_dist_m": float(rng.uniform(0.2, 2)), "mpe/occupied_landmarks": float(e + s),
                   "reward/collision": -float(e), "comm/lost_bytes": lost, "comm/lost_bytes/late": lost}
            for k in ("delivered_bytes", "delivered_copies", "latency_max_s", "latency_mean_s", "latency_p50_s",
                      "offered_bytes", "offered_copies", "messages_sent", "lost_copies", "queue_bytes",
                      "retries", "drops_total"):
                row[f"comm/{k}"] = float(rng.integers(1, 1000))
            rows.append(row)
    return rows


def test_a_task_metric_equal_to_another_by_chance_keeps_its_panel(tmp_path):
    """Only channel/shield counters are merged as aliases: SMAC's allies_left equalled win in every episode of a
    small run (wins with one ally left) and lost its panel as "(= win)"."""
    rows = [{"seed": s, "episode": e, "win": float(w), "allies_left": float(w), "episode_return": 10.0 * w + e}
            for s, e, w in ((0, 0, 1), (0, 1, 0), (1, 0, 1), (1, 1, 1))]
    fig, info = report.metrics_figure(report.load_run(make_run(tmp_path / "smac", rows)))
    try:
        assert info["duplicates"] == {} and {"win", "allies_left"} <= set(info["panels"])
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_metrics_png_shows_the_task_metrics_first_drops_duplicates_and_names_what_the_limit_leaves_out(tmp_path):
    """F1: the MPE task's own metrics were cut for 11 comm/* panels, duplicates included, without a word."""
    run = report.load_run(make_run(tmp_path / "mpe", mpe_rows()))
    fig, info = report.metrics_figure(run)
    try:
        panels = info["panels"]
        assert len(panels) == 12
        assert panels[:5] == ["episode_return", "mpe/final_cover_dist_m", "mpe/occupied_landmarks",
                              "reward/collision", "comm/offered_copies"]  # task metrics before the counters
        assert info["duplicates"] == {"comm/lost_bytes/late": "comm/lost_bytes"}
        assert "comm/lost_bytes/late" not in panels and info["dropped"]
        assert all(m.startswith("comm/") for m in info["dropped"])
        foot = info["footnote"]
        assert "comm/lost_bytes/late (= comm/lost_bytes)" in foot
        assert "not plotted (12-panel limit; all are in summary.json): " + ", ".join(info["dropped"]) in foot
        titles = [ax.get_title() for ax in fig.axes if ax.axison]
        assert titles == panels
        texts = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
        assert "12-panel limit" in texts and "comm/lost_bytes/late" in texts
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    # plot_selection (the panels and the all-zero footnote) keeps its shape and uses the same order
    assert report.plot_selection(run["summary"]["metrics"])[0][:4] == panels[:4]


def test_a_learner_run_says_its_seeds_are_not_independent_and_draws_no_band(tmp_path):
    """F2: a graph_safe run's figure drew a 'Student-t 95% CI' band over seeds one learner played in turn."""
    rows = [{"seed": s, "episode": e, "episode_return": float(s + e), "plans": float(4 * s + e + 1)}
            for s in range(3) for e in range(4)]
    note = "seeds are not independent samples: agent 'graph_safe-v0' learns during the run"
    run = report.load_run(make_run(tmp_path / "gs", rows, agent="graph_safe-v0", seeds_note=note))
    fig, info = report.metrics_figure(run)
    import matplotlib.pyplot as plt

    try:
        assert info["bands"] == {}
        assert all(not ax.patches for ax in fig.axes)  # no axhspan anywhere
        assert "seeds are not independent" in fig._suptitle.get_text()
        assert note in fig._suptitle.get_text().replace("\n", " ")
        assert "band: Student-t" not in fig._suptitle.get_text()
    finally:
        plt.close(fig)


def test_a_count_never_gets_a_band_below_zero(tmp_path):
    """F2: an interval of a count reaching below 0 (an older summary.json's, unclipped) is drawn clipped at 0."""
    rows = [{"seed": s, "episode": 0, "collisions": float(c)} for s, c in enumerate([0, 0, 9])]
    summ = summarize(rows)
    summ["collisions"].update(ci95_low=-9.9, ci95_high=15.9)  # as an unclipped older summary.json
    run = report.load_run(make_run(tmp_path / "c", rows, summary=summ))
    fig, info = report.metrics_figure(run)
    import matplotlib.pyplot as plt

    try:
        lo, hi = info["bands"]["collisions"]
        assert lo == 0.0 and hi == pytest.approx(15.9)
        (ax,) = [a for a in fig.axes if a.get_title() == "collisions"]
        (span,) = ax.patches
        fig.canvas.draw()
        ys = ax.transData.inverted().transform(span.get_window_extent().get_points())[:, 1]
        assert min(ys) == pytest.approx(0.0, abs=1e-3) and min(ys) >= -1e-3
    finally:
        plt.close(fig)


def test_each_seed_mean_is_drawn_and_its_episode_dots_are_spread(tmp_path):
    """F3: the 0/1 win of a seed's 3 episodes collapsed to two dots at one x, its win rate nowhere."""
    wins = {0: [0, 0, 0], 1: [1, 1, 1], 2: [1, 1, 0]}
    rows = [{"seed": s, "episode": e, "win": float(w)} for s, ws in wins.items() for e, w in enumerate(ws)]
    run = report.load_run(make_run(tmp_path / "smac", rows))
    fig, info = report.metrics_figure(run)
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PathCollection

    try:
        assert info["seed_means"]["win"] == pytest.approx({0: 0.0, 1: 1.0, 2: 2 / 3})
        (ax,) = [a for a in fig.axes if a.get_title() == "win"]
        bars = [c for c in ax.collections if isinstance(c, LineCollection)]
        levels = sorted(seg[0][1] for c in bars for seg in c.get_segments())
        assert levels == pytest.approx([0.0, 2 / 3, 1.0])  # one short bar per seed at its mean
        dots = [c for c in ax.collections if isinstance(c, PathCollection)]
        seed2 = dots[2].get_offsets()
        xs = np.asarray(seed2)[:, 0]
        assert len(set(np.round(xs, 6))) == 3  # the seed's three episodes at three x positions
        assert all(abs(x - 2) <= report.JITTER for x in xs)
    finally:
        plt.close(fig)


def _two_agent_runs(tmp_path):
    def rows(shift):
        return [{"seed": s, "episode": e, "episode_return": float(s + e + shift), "soc": 100.0 + s + shift,
                 "makespan": 20.0 + e, "mpe/x": float(s), "comm/a": 1.0 + s, "comm/b": 2.0 + s, "comm/c": 3.0 + e,
                 "comm/d": 4.0 + s, "comm/e": 5.0 + s}
                for s in range(3) for e in range(2)]
    a = make_run(tmp_path / "a", rows(0), agent="mapf/pibt-v0")
    b = make_run(tmp_path / "b", rows(5), agent="mapf/prioritized-v0")
    return a, b


def test_runs_that_differ_only_by_agent_get_a_point_chart_per_metric(tmp_path):
    """F4: `coopsim report A B` of two agents wrote no figure; its table showed 6 metrics without saying so."""
    a, b = _two_agent_runs(tmp_path)
    out = tmp_path / "cmp"
    out.mkdir()
    res = report.compare_runs([a, b], out_dir=out)
    assert res["x_key"] is None
    shown = res["metrics"][:report.TABLE_METRICS]
    assert shown[:4] == ["soc", "makespan", "episode_return", "mpe/x"]  # task metrics before comm/ counters
    assert [p.name for p in res["plots"]] == [f"compare_{m.replace('/', '_')}.png" for m in shown]
    import matplotlib.pyplot as plt

    fig, points = report.compare_points_figure(plt, res["table"], "soc", ["mapf/pibt-v0", "mapf/prioritized-v0"],
                                               "agents.id")
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["mapf/pibt-v0", "mapf/prioritized-v0"]
        assert ax.get_xlabel() == "agents.id"
        assert [p[1] for p in points] == pytest.approx([101.0, 106.0])
        for (_, mean, lo, hi), row in zip(points, res["table"]):
            assert (lo, hi) == (row["summary"]["soc"]["ci95_low"], row["summary"]["soc"]["ci95_high"])
    finally:
        plt.close(fig)
    assert "the first 6 of" in report.comparison_files_text(res)
    caption = str(report.comparison_table(res).caption)
    assert f"first 6 of {len(res['metrics'])} metrics" in caption and "compare.csv has all" in caption


def test_runs_of_one_row_still_get_no_chart(tmp_path):
    """Runs that differ only in their seeds pool into one row: nothing to compare in a chart."""
    rows0 = [{"seed": 0, "episode": 0, "soc": 1.0}]
    rows1 = [{"seed": 1, "episode": 0, "soc": 2.0}]
    a, b = make_run(tmp_path / "a", rows0), make_run(tmp_path / "b", rows1)
    out = tmp_path / "cmp"
    out.mkdir()
    res = report.compare_runs([a, b], out_dir=out)
    assert res["plots"] == [] and "compare.csv only; no plots:" in report.comparison_files_text(res)


def _training_run(tmp_path, rows_per_seed):
    d = tmp_path / "train"
    d.mkdir()
    (d / "config.yaml").write_text(yaml.safe_dump({"name": "lw", "scenario": {"id": "x"},
                                                   "agents": {"id": "ppo/mappo-v0"}, "seeds": [0]}))
    for s, rows in rows_per_seed.items():
        (d / f"seed-{s}").mkdir()
        with open(d / f"seed-{s}" / "metrics.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["env_steps", "episode/return", "episode/success"])
            w.writeheader()
            w.writerows(rows)
    return d


def test_train_curves_mark_every_point_and_say_what_they_show(tmp_path):
    """F5/F7: one logged iteration drew blank axes (a line without markers); no title, y label or point note."""
    d = _training_run(tmp_path, {0: [{"env_steps": 512, "episode/return": -44.75, "episode/success": 0.3125}]})
    import matplotlib.pyplot as plt

    fig, cols = report.training_figure(d)
    try:
        assert cols == ["episode/return", "episode/success"] == report.training_columns(d)
        for ax in fig.axes:
            (line,) = ax.get_lines()
            assert line.get_marker() not in (None, "None", "", " ")
            assert list(line.get_xdata()) == [512.0]
            assert ax.get_ylabel()
        title = fig._suptitle.get_text()
        assert "lw" in title and "ppo/mappo-v0" in title
        assert "mean over the training episodes (sampled actions) that finished in that iteration" in title
    finally:
        plt.close(fig)
    # report's printed line names the panels drawn (it said "episode return/win" for a run plotting success)
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "report", str(d)], capture_output=True, text=True,
                       cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    assert f"plot: {d / 'train_curves.png'} (training curves: episode/return, episode/success vs env steps)" in \
        " ".join(r.stdout.split())


def test_tables_say_what_the_ci_is_and_name_the_headline_metrics(tmp_path):
    """F12: the tables used bare ids without units and did not say what the interval is or what — means."""
    from rich.console import Console

    rows = [{"seed": s, "episode": 0, "soc": 100.0 + s, "makespan": 20.0 + s, "custom": 1.0} for s in range(3)]
    run = report.load_run(make_run(tmp_path / "m", rows))
    t = report.summary_table(run)
    caption = str(t.caption)
    assert report.CI_CAPTION in caption
    assert "Student-t" in caption and "per-seed means (n = seeds)" in caption and "clipped to the metric's range" in caption
    assert "— = one seed" in caption
    assert "soc = sum of costs (agent-steps), makespan (steps)" in caption
    assert "custom =" not in caption
    console = Console(width=120, record=True)
    console.print(t)
    text = console.export_text()
    assert "│ soc " in text and "│ makespan " in text  # the ids stay as they are (files and tools use them)


def test_comparison_lines_have_their_own_markers_and_styles_and_a_titled_legend(tmp_path):
    """F13: two identical series hid each other (same marker, same solid line); the legend named no key."""
    import matplotlib.pyplot as plt

    rows = [{"seed": s, "episode": 0, "success": 1.0} for s in range(3)]
    groups = {("mapf/pibt-v0",): {8: rows, 16: rows}, ("mapf/prioritized-v0",): {8: rows, 16: rows}}
    fig = report.compare_line_figure(plt, groups, "success", "scenario.params.num_agents", legend_title="agents.id")
    try:
        ax = fig.axes[0]
        lines = ax.get_lines()
        assert len(lines) == 2
        assert lines[0].get_marker() != lines[1].get_marker()
        assert lines[0].get_linestyle() != lines[1].get_linestyle()
        assert lines[0].get_markersize() > lines[1].get_markersize()  # the later one leaves the earlier's ring
        assert ax.get_legend().get_title().get_text() == "agents.id"
        assert "Student-t 95% CI" in ax.get_title()
    finally:
        plt.close(fig)


def test_a_sweep_comparison_plot_titles_its_legend_with_the_varied_key(tmp_path, monkeypatch):
    def rows(n, shift):
        return [{"seed": s, "episode": 0, "soc": float(n * 10 + s + shift)} for s in range(2)]
    runs = [make_run(tmp_path / f"{a}-{n}", rows(n, i), agent=a, extra_cfg={"scenario": {"id": "mapf/grid-v0",
                                                                                       "params": {"num_agents": n}}})
            for i, a in enumerate(["mapf/pibt-v0", "mapf/prioritized-v0"]) for n in (8, 16)]
    out = tmp_path / "cmp"
    out.mkdir()
    seen = {}
    orig = report.atomic_savefig

    def spy(fig, path, **kw):
        seen[Path(path).name] = fig.axes[0].get_legend().get_title().get_text()
        return orig(fig, path, **kw)

    monkeypatch.setattr(report, "atomic_savefig", spy)
    res = report.compare_runs(runs, out_dir=out)
    assert res["x_key"] == "scenario.params.num_agents"
    assert seen["compare_soc.png"] == "agents.id"


def test_a_cell_has_one_precision():
    """F14: '1696 [1434.0, 1958.0]' beside '781.7 [649.3, 914]'."""
    assert report._fmt_ci(1696.0, 1434.0, 1958.0) == ("1696", "1434", "1958")
    assert report._fmt_ci(781.6667, 649.3, 914.0) == ("781.7", "649.3", "914.0")
    assert report._fmt_ci(0.5556, 0.0, 1.0) == ("0.556", "0.000", "1.000")
    assert report._fmt_ci(1696.4, 1434.0, 1958.2) == ("1696", "1434", "1958")
    assert report._fmt_ci(5.0, None, None)[0] == "5"
    res = {"x_key": None, "line_keys": [], "table": [{"line": {}, "x": 0, "summary": {
        "soc": {"mean": 1696.0, "ci95_low": 1434.0, "ci95_high": 1958.0},
        "makespan": {"mean": 781.6667, "ci95_low": 649.3, "ci95_high": 914.0}}, "seeds": [0, 1, 2]}],
        "metrics": ["soc", "makespan"]}
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(report.comparison_table(res))
    text = console.export_text()
    assert "1696 [1434, 1958]" in text and "781.7 [649.3, 914.0]" in text


def test_comparison_figures_draw_no_band_or_bar_for_a_learn_during_run_agent(tmp_path, monkeypatch):
    """Session 34's low: a comparison of learn-during-run agents still drew Student-t bands over seeds one learner
    played in turn (metrics.png already drew none). Lines of such runs lose their band, points their bar."""
    note = "seeds are not independent samples: agent 'graph_safe-v0' learns during the run"

    def rows(n, shift):
        return [{"seed": s, "episode": 0, "soc": float(n * 10 + 3 * s + shift)} for s in range(3)]
    lines_runs = [make_run(tmp_path / f"l-{a}-{n}", rows(n, i), agent=a,
                           seeds_note=note if a == "graph_safe-v0" else None,
                           extra_cfg={"scenario": {"id": "mapf/grid-v0", "params": {"num_agents": n}}})
                  for i, a in enumerate(["graph_safe-v0", "mapf/pibt-v0"]) for n in (8, 16)]
    points_runs = [make_run(tmp_path / f"p-{a}", rows(8, i), agent=a, seeds_note=note if a == "graph_safe-v0" else None)
                   for i, a in enumerate(["graph_safe-v0", "mapf/pibt-v0"])]
    seen = {}
    orig = report.atomic_savefig

    def spy(fig, path, **kw):
        ax = fig.axes[0]
        seen[(Path(path).parent.name, Path(path).name)] = (
            len(ax.collections), [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [],
            ax.get_title(), [len(c.get_segments()) for c in ax.collections if hasattr(c, "get_segments")])
        return orig(fig, path, **kw)

    monkeypatch.setattr(report, "atomic_savefig", spy)
    for name, runs in (("lines", lines_runs), ("points", points_runs)):
        (tmp_path / name).mkdir()
        report.compare_runs(runs, out_dir=tmp_path / name)
    n_collections, legend, _, _ = seen[("lines", "compare_soc.png")]
    assert n_collections == 1  # one band (pibt's); graph_safe's line has none
    assert any("graph_safe" in t and "no band: seeds not independent" in t for t in legend)
    assert any("pibt" in t and "no band" not in t for t in legend)
    _, _, title, segments = seen[("points", "compare_soc.png")]
    assert "not independent" in title
    assert sum(segments) == 1  # one error bar (pibt's three seeds); graph_safe's point has none
