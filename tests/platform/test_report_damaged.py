"""`coopsim report` on a damaged or missing run directory: one message naming the file, exit 2, no traceback."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True)


def new_run(tmp_path_factory, episodes: int) -> Path:
    """A `coopsim run` of line-random with ``episodes`` 5-step episodes on seed 0; its run directory."""
    out = tmp_path_factory.mktemp("runs")
    r = cli("run", str(CFG), f"out_dir={out}", "seeds=[0]", f"episodes={episodes}", "max_steps=5", "--no-progress")
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip().splitlines()[-1].split(": ", 1)[1])


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    return new_run(tmp_path_factory, 1)


def damaged(good_run, tmp_path):
    d = tmp_path / "RUN"
    shutil.copytree(good_run, d)
    return d


def check(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


@pytest.mark.parametrize("text, why", [("x\n", "not valid JSON"), ('{"a": 1}', "not a run summary"),
                                       ('{"metrics": {"soc": "abc"}}', "metric 'soc' is 'abc', not a mapping"),
                                       ('{"metrics": {"soc": {"mean": "abc"}}}', "metrics.soc.mean is 'abc', not a number"),
                                       ('{"metrics": {"soc": {"per_seed": {"0": "x"}}}}', "metrics.soc.per_seed is")])
def test_bad_summary_json_is_summarized_from_the_episodes(good_run, tmp_path, text, why):
    """A damaged summary.json of a finished run: the report shows the summary of metrics.jsonl with one note (it
    once said 'delete it and report rebuilds it', and then called the finished run killed)."""
    d = damaged(good_run, tmp_path)
    (d / "summary.json").write_text(text)
    r = cli("report", str(d), "--no-gif")
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0 and "Traceback" not in out, out
    assert f"{d / 'summary.json'}: {why}" in out and "the summary of metrics.jsonl's 1 episode(s)" in out
    assert "has not finished" not in out and (d / "summary.json").read_text() == text  # left as it was
    assert "metrics.jsonl has every value" in out and "summary.json has every metric" not in out


@pytest.mark.parametrize("key, value, why", [("interrupted", "no", "interrupted is 'no', not true or false"),
                                             ("interrupted", 0, "interrupted is 0, not true or false"),
                                             ("episodes_finished", "6", "episodes_finished is '6', not a count")])
def test_summary_flags_of_the_wrong_type_are_not_read_by_truthiness(good_run, tmp_path, key, value, why):
    """fresh34 F9: a hand-edited ``"interrupted": "no"`` was read as true ("the run was interrupted: 6 of 6 ...")."""
    import json

    d = damaged(good_run, tmp_path)
    summ = json.loads((d / "summary.json").read_text())
    (d / "summary.json").write_text(json.dumps({**summ, key: value}))
    r = cli("report", str(d), "--no-gif")
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0 and "Traceback" not in out, out
    assert f"{d / 'summary.json'}: {why}" in out and "the summary of metrics.jsonl's 1 episode(s)" in out
    assert "was interrupted" not in out


def test_a_metric_that_is_not_a_number_leaves_its_line_out(good_run, tmp_path):
    import json

    d = damaged(good_run, tmp_path)
    (d / "summary.json").unlink()
    row = json.loads((d / "metrics.jsonl").read_text().splitlines()[0])
    bad = [{**row, "episode": 1, next(k for k in row if k not in ("seed", "episode")): v}
           for v in ("yes", [1, 2], {"a": 1})]
    with open(d / "metrics.jsonl", "a") as f:
        f.write("".join(json.dumps(b) + "\n" for b in bad))
    r = cli("report", str(d), "--no-gif")
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0 and "Traceback" not in out, out
    assert "3 damaged line(s) left out" in out and "'yes', not a number" in out and "[1, 2], not a number" in out


def test_bad_config_yaml(good_run, tmp_path):
    d = damaged(good_run, tmp_path)
    (d / "config.yaml").write_text("name: [\n")
    check(cli("report", str(d)), f"{d / 'config.yaml'}: not valid YAML")


def test_bad_replay_npz(good_run, tmp_path):
    d = damaged(good_run, tmp_path)
    cfg = (d / "config.yaml").read_text().replace("line/LineWalk-v0", "mapf/MGMAPF-v0")  # a scenario that renders replays
    (d / "config.yaml").write_text(cfg)
    (d / "replays").mkdir(exist_ok=True)
    (d / "replays" / "seed0_ep0.npz").write_text("x\n")
    r = cli("report", str(d))
    check(r, f"{d / 'replays' / 'seed0_ep0.npz'}: not a replay file", "damaged")
    assert "allow_pickle" not in r.stderr  # numpy's advice for pickled data is not for a damaged replay


def test_missing_path(tmp_path):
    check(cli("report", str(tmp_path / "nope")), f"{tmp_path / 'nope'}: does not exist")


def test_validate_a_directory(tmp_path):
    check(cli("validate", str(tmp_path)), f"{tmp_path}: is a directory, not a file")


def test_replay_steps_thin_long_episodes_keeping_first_and_last():
    import numpy as np

    from coopsim.platform.report import replay_steps

    assert replay_steps(5, 300).tolist() == [0, 1, 2, 3, 4] and replay_steps(5).tolist() == [0, 1, 2, 3, 4]
    s = replay_steps(70_934, 300)
    assert len(s) == 300 and s[0] == 0 and s[-1] == 70_933 and (np.diff(s) > 0).all()
    assert replay_steps(10, 3).tolist() == [0, 4, 9]  # rounded from linspace(0, 9, 3) = 0, 4.5, 9


def test_a_long_mgmapf_replay_is_drawn_in_at_most_max_frames():
    import numpy as np

    from coopsim.platform.report import MAX_GIF_FRAMES
    from coopsim.scenarios.mapf.core import MGMAPFCore

    T, n = 2000, 2
    pos = np.zeros((T + 1, n, 2), np.int64)
    pos[:, 1, 0] = np.arange(T + 1) % 4
    replay = {"positions": pos, "goals": np.full((n, 1, 2), 3), "goal_reached_at": np.array([[-1], [T]]),
              "blocked": np.zeros((4, 4), bool)}
    frames = MGMAPFCore.render_replay(replay, cell_px=4, max_frames=MAX_GIF_FRAMES)
    assert len(frames) == MAX_GIF_FRAMES and len(MGMAPFCore.render_replay(replay, cell_px=4, max_frames=10)) == 10
    assert len(MGMAPFCore.render_replay({**replay, "positions": pos[:5], "goal_reached_at": np.array([[-1], [4]])},
                                        cell_px=4)) == 5


def test_a_run_given_twice_is_refused(good_run):
    r = cli("report", str(good_run), str(good_run) + "/")
    check(r, "given twice", "give each run directory once")


def test_table_cells_of_huge_and_non_finite_numbers():
    from coopsim.platform.report import _fmt

    assert _fmt(1e20) == "1e+20" and _fmt(-1e306) == "-1e+306"  # not 21 / 307 digits
    assert _fmt(float("nan")) == "nan" and _fmt(float("inf")) == "inf"  # int(nan) raised before
    assert _fmt(3290.0) == "3290" and _fmt(12345678.0) == "12345678" and _fmt(1.0233) == "1.023" and _fmt(None) == "—"


# --- a readable summary.json with a damaged, short or missing metrics.jsonl: report from summary.json, say why ---

@pytest.fixture(scope="module")
def five_episode_run(tmp_path_factory):
    return new_run(tmp_path_factory, 5)


def report_ok(d):
    """`coopsim report d --no-gif` that succeeds: its output on one line (the table's caption and notes may wrap)
    and the episodes column of the table's episode_return row."""
    import os

    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "report", str(d), "--no-gif"], capture_output=True,
                       text=True, env={**os.environ, "COLUMNS": "250"})
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, (r.returncode, r.stdout, r.stderr)
    (line,) = [ln for ln in r.stdout.splitlines() if ln.strip("│ ").startswith("episode_return ")]
    return " ".join(r.stdout.split()), line.split("│")[-2].strip()


@pytest.mark.parametrize("keep_rest", [False, True], ids=["only-line", "then-4-more"])
def test_a_cut_off_first_line_reports_from_summary_json(five_episode_run, tmp_path, keep_rest):
    """A cut-off first line once made the report say 'the run finished no episode: it failed before its first
    episode ended' although summary.json counts 5: it reports summary.json's 5 and names the damaged line."""
    d = damaged(five_episode_run, tmp_path)
    lines = (d / "metrics.jsonl").read_text().splitlines(keepends=True)
    (d / "metrics.jsonl").write_text(lines[0][:60] + ("\n" + "".join(lines[1:]) if keep_rest else ""))
    out, episodes = report_ok(d)
    assert episodes == "5" and "summary.json has every metric" in out
    assert "failed before its first episode" not in out and "finished no episode" not in out
    m = d / "metrics.jsonl"
    if keep_rest:
        assert f"{m}: it holds 4 episode(s), fewer than the 5 summary.json counts; the summary table shows " \
               f"summary.json's 5 episode(s), the plot (and a comparison with other runs) metrics.jsonl's 4" in out
        assert f"{m}: 1 damaged line(s) left out (line 1: not valid JSON)" in out
        assert f"plot: {d / 'metrics.png'}" in out
    else:
        assert f"{m}: line 1 is a damaged line (cut off: not complete JSON) and is left out; it holds none of the 5 " \
               f"episode(s) summary.json counts; the summary table shows summary.json's 5 episode(s)" in out
        assert "per-episode plots (metrics.png) and comparisons with other runs need metrics.jsonl's episodes" in out
        assert "plot:" not in out


def test_a_metrics_jsonl_with_fewer_episodes_than_summary_json_says_so(five_episode_run, tmp_path):
    d = damaged(five_episode_run, tmp_path)
    lines = (d / "metrics.jsonl").read_text().splitlines(keepends=True)
    (d / "metrics.jsonl").write_text("".join(lines[:2]))
    out, episodes = report_ok(d)
    assert episodes == "5"  # the table is summary.json's, and the note says so
    assert f"note: {d / 'metrics.jsonl'}: it holds 2 episode(s), fewer than the 5 summary.json counts; the summary " \
           f"table shows summary.json's 5 episode(s), the plot (and a comparison with other runs) metrics.jsonl's 2" \
        in out
    assert "damaged line" not in out


def test_a_missing_metrics_jsonl_reports_from_summary_json(five_episode_run, tmp_path):
    """It once said 'nothing to report' although summary.json holds the run's whole summary."""
    d = damaged(five_episode_run, tmp_path)
    (d / "metrics.jsonl").unlink()
    (d / "metrics.png").unlink(missing_ok=True)
    out, episodes = report_ok(d)
    assert episodes == "5" and "nothing to report" not in out and "summary.json has every metric" in out
    assert f"note: {d / 'metrics.jsonl'}: missing; shown: summary.json's 5 episode(s); per-episode plots " \
           f"(metrics.png) and comparisons with other runs need metrics.jsonl, so they are unavailable" in out
    assert "plot:" not in out and not (d / "metrics.png").exists()


def test_no_metrics_jsonl_and_no_usable_summary_is_still_nothing_to_report(five_episode_run, tmp_path):
    d = damaged(five_episode_run, tmp_path)
    (d / "metrics.jsonl").unlink()
    (d / "summary.json").write_text("x\n")
    check(cli("report", str(d), "--no-gif"), f"{d / 'metrics.jsonl'}: missing", "nothing to report")
