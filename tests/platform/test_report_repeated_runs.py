"""`coopsim report` on several runs counts runs of one config (seeds and episodes included) once: they are repeats of
one experiment (runs are deterministic: the same config and seed give the same episodes), e.g. a sweep cell that
`sweep --skip-done` ran again beside its interrupted copy. The run kept is one that finished uninterrupted, else the
one with the most episodes, else the newest; each run left out is named in a note. Runs that differ in their seeds
are still pooled."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from coopsim.platform.config import load_config
from coopsim.platform.report import compare_runs, load_run, repeated_runs, same_config
from coopsim.platform.stats import summarize

from cli_helpers import run_config_until

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"  # random agents, LineWalk
EPISODES = 6


def _run(out: Path, seed: int, stop_after: int | None = None) -> Path:
    """A run of line-random with ``seeds=[seed]``, ``episodes=6`` in ``out``; interrupted (as by Ctrl-C) after
    ``stop_after`` episodes when given, as a sweep interrupted mid-cell leaves it."""
    cfg = load_config(CFG, [f"out_dir={out}", f"seeds=[{seed}]", f"episodes={EPISODES}"])
    return run_config_until(cfg, stop_after)


def _rows(d: Path) -> list[dict]:
    return [json.loads(ln) for ln in (d / "metrics.jsonl").read_text().splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Seed 0 run whole, seed 0 interrupted after 2 episodes, seed 0 interrupted after 4, seed 1 run whole (all of
    one out_dir and name, as a sweep leaves them)."""
    out = tmp_path_factory.mktemp("repeats") / "runs"
    whole0 = _run(out, 0)
    part2 = _run(out, 0, stop_after=2)
    part4 = _run(out, 0, stop_after=4)
    whole1 = _run(out, 1)
    return {"whole0": whole0, "part2": part2, "part4": part4, "whole1": whole1}


def _csv_row(path: Path) -> dict[str, str]:
    (row,) = list(csv.DictReader(path.read_text().splitlines()))
    return row


def test_the_premise_a_repeat_holds_the_same_episodes(runs):
    whole = (runs["whole0"] / "metrics.jsonl").read_text().splitlines()
    assert (runs["part2"] / "metrics.jsonl").read_text().splitlines() == whole[:2]  # byte-identical episodes
    assert (runs["part4"] / "metrics.jsonl").read_text().splitlines() == whole[:4]
    assert same_config(load_run(runs["whole0"])["config"], load_run(runs["part2"])["config"])
    assert not same_config(load_run(runs["whole0"])["config"], load_run(runs["whole1"])["config"])  # other seeds


def test_a_repeat_is_left_out_of_the_pooled_row_and_compare_csv(runs, tmp_path):
    whole0, part2, whole1 = runs["whole0"], runs["part2"], runs["whole1"]
    res = compare_runs([part2, whole0, whole1], out_dir=tmp_path)
    assert res["left_out"] == {str(part2): str(whole0)}
    (row,) = res["table"]
    assert row["seeds"] == [0, 1]
    kept = _rows(whole0) + _rows(whole1)
    want = summarize(kept)
    for m in ("episode_return", "soc"):
        st = row["summary"][m]
        assert st["n_episodes"] == 2 * EPISODES == 12 and st["n_seeds"] == 2
        assert st["mean"] == pytest.approx(want[m]["mean"])
        assert st == want[m]
    # the old count: seed 0's first two episodes twice (14 episodes), which moves the mean
    doubled = summarize(kept + _rows(part2))["episode_return"]
    assert doubled["n_episodes"] == 14 and doubled["mean"] != want["episode_return"]["mean"]
    # the file on disk holds the same numbers
    line = _csv_row(tmp_path / "compare.csv")
    assert float(line["episode_return"]) == pytest.approx(want["episode_return"]["mean"])
    assert line["episode_return:n_seeds"] == "2"
    # the note names the run left out and the run it repeats; the left-out run's own note is gone
    note = res["notes"][f"left out {part2}"]
    assert note == (f"it repeats {whole0} (same config and seeds: all 2 of its episodes are the same episodes); runs "
                    f"of one config are counted once: {whole0.name} is kept, as it finished uninterrupted "
                    f"({EPISODES} episodes)")
    assert str(part2) not in res["notes"]
    assert not any(k.startswith("seed ") for k in res["notes"])  # seed 0 is no longer 'run twice'


def test_of_two_interrupted_repeats_the_one_with_more_episodes_is_kept(runs, tmp_path):
    part2, part4, whole1 = runs["part2"], runs["part4"], runs["whole1"]
    res = compare_runs([part4, part2, whole1], out_dir=tmp_path)
    assert res["left_out"] == {str(part2): str(part4)}
    want = summarize(_rows(part4) + _rows(whole1))
    assert res["table"][0]["summary"]["episode_return"] == want["episode_return"]
    assert res["table"][0]["summary"]["episode_return"]["n_episodes"] == 4 + EPISODES
    assert res["notes"][f"left out {part2}"].startswith(
        f"it repeats {part4} (same config and seeds: all 2 of its episodes are the same episodes); runs of one "
        f"config are counted once: {part4.name} is kept, as it has more finished episodes (4)")
    # the kept run's own note (interrupted) stays
    assert res["notes"][str(part4)] == f"the run was interrupted: 4 of {EPISODES} episode(s) finished"


def test_three_copies_of_one_config_keep_the_finished_run(runs, tmp_path):
    whole0, part2, part4 = runs["whole0"], runs["part2"], runs["part4"]
    res = compare_runs([part2, part4, whole0], out_dir=tmp_path)
    assert res["left_out"] == {str(part2): str(whole0), str(part4): str(whole0)}
    (row,) = res["table"]
    assert row["summary"]["episode_return"] == summarize(_rows(whole0))["episode_return"]
    assert not res["pooled_seeds"]
    assert res["notes"][f"left out {part4}"].startswith(
        f"it repeats {whole0} (same config and seeds: all 4 of its episodes are the same episodes; 1 other run "
        f"left out repeats it too); runs of one config are counted once: {whole0.name} is kept, as it finished "
        f"uninterrupted ({EPISODES} episodes)")


def test_equal_finished_repeats_keep_the_newest(runs, tmp_path):
    old = runs["whole0"]
    new = tmp_path / "runs" / "line-random-29991231T235959Z-abcdef"  # a later time in its name
    shutil.copytree(old, new)
    loaded = [load_run(new), load_run(old)]
    assert repeated_runs(loaded) == {1: 0}
    res = compare_runs([old, new], out_dir=tmp_path)
    assert res["left_out"] == {str(old): str(new)}
    assert res["notes"][f"left out {old}"].endswith(f"{new.name} is kept, as it is the newest ({EPISODES} episodes)")


def test_runs_that_differ_in_their_seeds_are_still_pooled(runs, tmp_path):
    whole0, whole1 = runs["whole0"], runs["whole1"]
    res = compare_runs([whole0, whole1], out_dir=tmp_path)
    assert res["left_out"] == {} and res["pooled_seeds"] is True
    assert not any(k.startswith("left out") for k in res["notes"])
    (row,) = res["table"]
    st = row["summary"]["episode_return"]
    assert st["n_episodes"] == len(_rows(whole0)) + len(_rows(whole1)) == 2 * EPISODES
    assert st["n_seeds"] == 2 and st == summarize(_rows(whole0) + _rows(whole1))["episode_return"]
    # an interrupted run of other seeds is pooled too (not a repeat: another config)
    res = compare_runs([runs["part2"], whole1], out_dir=tmp_path / "b")
    assert res["left_out"] == {}
    assert res["table"][0]["summary"]["episode_return"]["n_episodes"] == 2 + EPISODES


def test_coopsim_report_prints_the_note_and_writes_the_deduplicated_csv(runs):
    from typer.testing import CliRunner

    from coopsim.cli import app

    whole0, part2, whole1 = runs["whole0"], runs["part2"], runs["whole1"]
    res = CliRunner().invoke(app, ["report", str(part2), str(whole0), str(whole1)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert (f"note: left out {part2}: it repeats {whole0} (same config and seeds: all 2 of its episodes are the same "
            f"episodes); runs of one config are counted once") in res.output
    assert f"note: {part2}:" not in res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("comparison: ")]
    folder = Path(line.split(": ", 1)[1].split(" (", 1)[0])
    try:
        row = _csv_row(folder / "compare.csv")
        want = summarize(_rows(whole0) + _rows(whole1))["episode_return"]
        assert float(row["episode_return"]) == pytest.approx(want["mean"])
        assert float(row["episode_return:ci95_low"]) == pytest.approx(want["ci95_low"])
    finally:
        shutil.rmtree(folder)  # the fixture's runs are shared: no comparison folder left among them


def test_report_out_dir_star_skips_the_comparison_folder_a_sweep_wrote(runs):
    """`coopsim report out_dir/*` after a sweep also matches the sweep's compare-* folder: it is skipped with a note
    (it stopped the report with "not a run directory"); comparison folders alone are refused in one line."""
    from typer.testing import CliRunner

    from coopsim.cli import app

    whole0, whole1 = runs["whole0"], runs["whole1"]
    first = CliRunner().invoke(app, ["report", str(whole0), str(whole1)], env={"COLUMNS": "250"})
    assert first.exit_code == 0, first.output
    (line,) = [ln for ln in first.output.splitlines() if ln.startswith("comparison: ")]
    folder = Path(line.split(": ", 1)[1].split(" (", 1)[0])
    try:
        assert (folder / "compare.csv").is_file() and not (folder / "config.yaml").exists()
        res = CliRunner().invoke(app, ["report", str(whole0), str(folder), str(whole1)], env={"COLUMNS": "250"})
        assert res.exit_code == 0, res.output
        assert f"note: skipped {folder}: a comparison folder (compare.csv) that coopsim sweep or report wrote, " \
               "not a run" in res.output
        (line2,) = [ln for ln in res.output.splitlines() if ln.startswith("comparison: ")]
        folder2 = Path(line2.split(": ", 1)[1].split(" (", 1)[0])
        try:  # the same two runs compared: the same pooled row as without the folder
            assert _csv_row(folder2 / "compare.csv") == _csv_row(folder / "compare.csv")
        finally:
            shutil.rmtree(folder2)
        copy = folder.with_name(folder.name + "-copy")
        shutil.copytree(folder, copy)
        try:
            only = CliRunner().invoke(app, ["report", str(folder), str(copy)], env={"COLUMNS": "250"})
        finally:
            shutil.rmtree(copy)
        assert only.exit_code == 2 and "Traceback" not in only.output
        assert "no folder given is a run directory (each is a comparison folder, a training run or one of its seed" in only.output
    finally:
        shutil.rmtree(folder)
