"""`python -m coopsim.agents.ppo.curves`: the default panels follow the runs (SMAC's win and return, MG-MAPF's success
and goal fraction, episode/return for any other run; a clear error when none is there), the env-step tick labels are
distinct at every scale (they read "0k 0k 1k 2k 2k ..." on a 4k-step run), and a --smooth window longer than the
curve is clipped to it (it used to return the raw curve, so a larger window smoothed less)."""
import json

import numpy as np
import pytest

from coopsim.agents.ppo import curves
from coopsim.errors import CoopsimError

# the metrics.csv header of a real `coopsim train configs/smac/3m-qmix.yaml` run (QMIX) and of an MG-MAPF MAPPO run
SMAC_HEAD = ("iteration,env_steps,train/epsilon,train/episodes,episodes,episode/return,episode/length,episode/win,"
             "episode/draw,episode/timeout,episode/allies_left,episode/enemies_left,episode/damage_dealt,"
             "episode/damage_taken,episode/episode_steps,time/wall_s,time/env_steps_per_s,loss/td,loss/grad_norm")
MAPF_HEAD = ("iteration,env_steps,loss/policy,episodes,episode/collisions,episode/goal_fraction,episode/length,"
             "episode/return,episode/soc,episode/success")


def _run(root, name, head, rows, seeds=(0,)):
    """A fake `coopsim train` run directory: ``<root>/<name>/seed-<s>/metrics.csv`` with ``head`` and one line per
    dict of ``rows`` (columns not given are empty cells, as the trainer writes them)."""
    cols = head.split(",")
    for s in seeds:
        d = root / name / f"seed-{s}"
        d.mkdir(parents=True)
        lines = [head] + [",".join(str(r.get(c, "")) for c in cols) for r in rows]
        (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    return root / name


def _smac_rows(n=20, step=205):
    """``n`` iterations of ``step`` env steps: win = i/100, return = i (i = 1..n), the losses only from i = 3."""
    return [{"iteration": i, "env_steps": i * step, "episodes": 3, "train/epsilon": 1.0 - i / 100,
             "episode/return": float(i), "episode/win": i / 100, "episode/draw": 0.0, "episode/length": 60,
             **({"loss/td": 0.5} if i >= 3 else {})} for i in range(1, n + 1)]


def _main(capsys, *args):
    curves.main([str(a) for a in args])
    cap = capsys.readouterr()
    return json.loads(cap.out), cap.err


# --- default metrics ---------------------------------------------------------------------------------------------

def test_smac_run_gets_win_and_return_by_default(tmp_path, capsys):
    run = _run(tmp_path, "smac-3m-qmix", SMAC_HEAD, _smac_rows(), seeds=(0, 1))
    res, err = _main(capsys, tmp_path / "c.png", run)
    assert list(res["final_smoothed"]) == ["episode/win", "episode/return"]
    # the last smoothed value (--smooth 10): the mean of i = 11..20
    assert res["final_smoothed"]["episode/win"] == pytest.approx([0.155, 0.155])
    assert res["final_smoothed"]["episode/return"] == pytest.approx([15.5, 15.5])
    assert res["seeds"] == {"seed-0": 4100, "seed-1": 4100}
    assert err == ""  # nothing left out: no note
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_default_choice_per_kind_of_run(tmp_path):
    smac = _run(tmp_path, "smac", SMAC_HEAD, _smac_rows(3))
    mapf = _run(tmp_path, "mapf", MAPF_HEAD, [{"iteration": 1, "env_steps": 512, "episode/success": 0.0,
                                               "episode/goal_fraction": 0.25, "episode/return": -900.0}])
    other = _run(tmp_path, "other", "iteration,env_steps,episode/return,loss/x",
                 [{"iteration": 1, "env_steps": 100, "episode/return": 1.5, "loss/x": 0.1}])
    pick = lambda run: curves.choose_metrics(curves.seed_dirs([str(run)]), [str(run)], None)  # noqa: E731
    assert pick(smac) == ("episode/win", "episode/return")
    assert pick(mapf) == ("episode/success", "episode/goal_fraction")  # MG-MAPF's set (return not added)
    assert pick(other) == ("episode/return",)  # not SMAC's set: no note about episode/win
    # --metric still wins over the defaults
    assert curves.choose_metrics(curves.seed_dirs([str(smac)]), [str(smac)], ["loss/td"]) == ("loss/td",)
    # the sets themselves
    assert curves.default_metrics(["episode/return", "episode/win"]) == ("episode/win", "episode/return")
    assert curves.default_metrics(["episode/return"]) == ("episode/return",)
    assert curves.default_metrics(["episode/goal_fraction", "episode/win"]) == curves.DEFAULT_METRIC_SETS[0]
    assert curves.default_metrics(["loss/value"]) == ()


def test_mapf_defaults_unchanged_and_note_names_the_missing_member(tmp_path, capsys):
    mapf = _run(tmp_path, "mapf", MAPF_HEAD, [{"iteration": i, "env_steps": 512 * i, "episode/success": 0.0,
                                               "episode/goal_fraction": 0.25, "episode/return": -900.0}
                                              for i in (1, 2)])
    res, err = _main(capsys, tmp_path / "c.png", mapf)
    assert list(res["final_smoothed"]) == ["episode/success", "episode/goal_fraction"]
    assert res["final_smoothed"]["episode/goal_fraction"] == pytest.approx([0.25])
    assert err.splitlines() == ["note: default metric(s) episode/soc_over_lb not in these runs: left out"]


def test_no_default_metric_is_a_clear_error(tmp_path):
    bare = _run(tmp_path, "bare", "iteration,env_steps,loss/value,episode/return",
                [{"iteration": 1, "env_steps": 100, "loss/value": 0.3}])  # no episode finished yet
    with pytest.raises(CoopsimError, match=r"^none of the default metrics \(episode/success, episode/soc_over_lb, "
                                           r"episode/goal_fraction, episode/win, episode/return\) is in the "
                                           r"metrics.csv of .*; choose columns with --metric; metrics in these "
                                           r"runs: loss/value$"):
        curves.main([str(tmp_path / "c.png"), str(bare)])
    assert not (tmp_path / "c.png").exists()


def test_plot_without_metrics_uses_the_defaults(tmp_path):
    run = _run(tmp_path, "smac", SMAC_HEAD, _smac_rows(4))
    res = curves.plot(tmp_path / "c.png", [str(run)])
    assert list(res["final_smoothed"]) == ["episode/win", "episode/return"]
    assert res["final_smoothed"]["episode/return"] == pytest.approx([2.5])  # 4 points < --smooth 10: their mean


# --- env-step tick labels ----------------------------------------------------------------------------------------

def test_tick_labels_of_a_4k_step_axis_are_distinct():
    from matplotlib.ticker import AutoLocator

    ticks = AutoLocator().tick_values(0, 4096)
    assert list(ticks) == [0, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500]
    labels = curves.step_labels(ticks)
    assert labels == ["0", "500", "1,000", "1,500", "2,000", "2,500", "3,000", "3,500", "4,000", "4,500"]
    assert curves.step_formatter().format_ticks(ticks) == labels
    assert [f"{v / 1e3:.0f}k" for v in ticks].count("2k") == 3  # the old formatter: "2k" three times


@pytest.mark.parametrize("lo, hi, expect", [
    (0, 12_000, ["0", "2k", "4k", "6k", "8k", "10k", "12k"]),
    (0, 3e6, ["0", "0.5M", "1.0M", "1.5M", "2.0M", "2.5M", "3.0M"]),
    (0, 10, ["0", "2", "4", "6", "8", "10"]),
    (2e6, 2.0005e6, ["2.0000M", "2.0001M", "2.0002M", "2.0003M", "2.0004M", "2.0005M"]),
])
def test_tick_labels_at_other_scales(lo, hi, expect):
    from matplotlib.ticker import AutoLocator

    labels = curves.step_labels(AutoLocator().tick_values(lo, hi))
    assert labels == expect


@pytest.mark.parametrize("hi", [1, 7, 64, 640.1, 2048, 4096, 9999, 10_000, 15_360, 99_999, 250_000, 800_000,
                                1_000_000, 1_234_567, 3_000_000, 2e7])
def test_tick_labels_are_distinct_at_every_scale(hi):
    from matplotlib.ticker import AutoLocator, MaxNLocator

    for locator in (AutoLocator(), MaxNLocator(12)):
        for lo in (0, hi * 0.999):
            ticks = locator.tick_values(lo, hi)
            labels = curves.step_labels(ticks)
            assert len(set(labels)) == len(labels) == len(ticks), (lo, hi, labels)


def test_the_drawn_x_axis_of_a_4k_run_has_distinct_labels(tmp_path, monkeypatch):
    run = _run(tmp_path, "smac", SMAC_HEAD, _smac_rows())  # env steps 205 .. 4,100
    seen = []
    real = curves.atomic_savefig

    def spy(fig, out, **kw):
        fig.canvas.draw()
        for ax in fig.axes:
            lo, hi = ax.get_xlim()
            seen.append([t.get_text() for t, v in zip(ax.get_xticklabels(), ax.get_xticks()) if lo <= v <= hi])
        return real(fig, out, **kw)

    monkeypatch.setattr(curves, "atomic_savefig", spy)
    curves.plot(tmp_path / "c.png", [str(run)])
    # the old "{v/1e3:.0f}k" labels of these ticks: 0k 1k 2k 2k 2k 3k 4k 4k
    assert seen == [["500", "1,000", "1,500", "2,000", "2,500", "3,000", "3,500", "4,000"]] * 2


# --- smoothing -----------------------------------------------------------------------------------------------------

def test_smooth_known_values_of_a_line():
    y = 2.0 * np.arange(6) + 1  # 1, 3, 5, 7, 9, 11
    # k = 3: the mean of the last 3 points (of the points so far at the start)
    assert curves.smooth(y, 3) == pytest.approx([1, 2, 3, 5, 7, 9])
    assert curves.smooth(y, 6) == pytest.approx([1, 2, 3, 4, 5, 6])
    assert curves.smooth(y, 1) is y
    assert curves.smooth(y, 3).shape == y.shape


@pytest.mark.parametrize("k", [7, 10, 1000])
def test_smooth_window_longer_than_the_curve_is_clipped(k):
    y = np.array([4.0, 0.0, 2.0, 6.0, 3.0, 9.0])
    assert curves.smooth(y, k) == pytest.approx(curves.smooth(y, len(y)))
    assert curves.smooth(y, k) == pytest.approx([4, 2, 2, 3, 3, 4])  # the running mean
    # a larger window never smooths less: the spread of the smoothed curve does not grow with k
    spreads = [np.ptp(curves.smooth(y, j)) for j in (1, 2, 3, 6, k)]
    assert spreads == sorted(spreads, reverse=True)


def test_smooth_edge_cases():
    assert curves.smooth(np.array([5.0]), 10) == pytest.approx([5.0])
    assert len(curves.smooth(np.array([]), 10)) == 0


def test_cli_larger_smooth_window_gives_the_mean_not_the_raw_curve(tmp_path, capsys):
    run = _run(tmp_path, "smac", SMAC_HEAD, _smac_rows())
    res20, _ = _main(capsys, tmp_path / "a.png", run, "--smooth", "20")
    res50, _ = _main(capsys, tmp_path / "b.png", run, "--smooth", "50")
    assert (res20.pop("smooth"), res50.pop("smooth")) == (20, 50)  # the window asked for, as the figure says it
    assert res50 == res20
    assert res50["final_smoothed"]["episode/return"] == pytest.approx([10.5])  # mean of 1..20 (the raw last point is 20)
    with pytest.raises(SystemExit):
        curves.main(["--help"])
    assert "clipped to the curve's length" in " ".join(capsys.readouterr().out.split())
