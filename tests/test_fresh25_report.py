"""Fresh-user pass 25, report items: `coopsim report` keeps runs of different evaluated checkpoints (and a run beside
an eval of the same config) in rows of their own, labelled by a short checkpoint column, and never calls them "the
same settings"; old run directories without the record still compare; eval runs of different agent kinds show the
agent/scenario keys and the checkpoint before the train.* keys; an interrupted sweep that kept one run says "look at
it"; `coopsim eval --checkpoint seed-<s>` of an interrupted training names the mid-training checkpoint it evaluates."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from coopsim.platform.config import load_config
from coopsim.platform.report import (MAX_TABLE_KEYS, NO_CHECKPOINT, NOT_RECORDED, checkpoint_labels, compare_runs,
                                     comparison_table, evaluated_checkpoint, load_run, shown_line_keys)
from coopsim.platform.runner import checkpoint_note, evaluated_file, run_config
from coopsim.platform.training import eval_main, train_main

TRAIN_CFG = {
    "name": "f25-train",
    "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 3, "length": 7}},
    "agents": {"id": "ppo/ippo-v0", "params": {"hidden": [16]}},
    "seeds": [0, 1],
    "episodes": 3,
    "max_steps": 12,
    "train": {"total_env_steps": 3 * 64, "num_envs": 8, "rollout_steps": 8, "lr": 0.003, "epochs": 2,
              "minibatches": 2, "checkpoint_every": 64, "progress": False, "tensorboard": False},
}


def _flat(text: str) -> str:
    return " ".join(text.split())


def _table_text(table, width: int = 400) -> str:
    from rich.console import Console

    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished two-seed training run (IPPO on LineWalk, 192 env steps) and its config file."""
    root = tmp_path_factory.mktemp("f25train")
    cfg = root / "train.yaml"
    cfg.write_text(yaml.safe_dump({**TRAIN_CFG, "out_dir": str(root / "runs")}))
    return train_main(str(cfg), [], None), cfg


# --- 1. runs of different evaluated checkpoints are rows of their own ----------------------------------------------

def test_a_run_and_evals_of_two_checkpoints_are_three_rows_with_their_own_numbers(trained, tmp_path):
    run, cfg = trained
    over = ["seeds=[0]", f"out_dir={tmp_path}"]
    untrained = run_config(load_config(cfg, over), progress=False)
    ev0 = eval_main(str(cfg), over, str(run / "seed-0"), progress=False)
    ev1 = eval_main(str(cfg), over, str(run / "seed-1"), progress=False)

    # the record: summary.json names the given checkpoint and the file read (null for `coopsim run`)
    s_run = json.loads((untrained / "summary.json").read_text())
    assert s_run["checkpoint"] is None and "checkpoint_file" not in s_run
    s0 = json.loads((ev0 / "summary.json").read_text())
    assert s0["checkpoint"] == str((run / "seed-0").resolve())
    assert s0["checkpoint_file"] == str((run / "seed-0" / "policy.pt").resolve())
    assert evaluated_checkpoint(untrained) == NO_CHECKPOINT
    assert evaluated_checkpoint(ev1) == str((run / "seed-1" / "policy.pt").resolve())
    # re-running an eval's config.yaml still works: the record is not in the config
    assert load_config(ev0 / "config.yaml").agents.params == {"hidden": [16]}

    dirs = [untrained, ev0, ev1]
    res = compare_runs(dirs, out_dir=tmp_path / "cmp")
    assert res["line_keys"] == ["checkpoint"] and res["shown_line_keys"] == ["checkpoint"]
    assert len(res["table"]) == 3
    assert not res["pooled_seeds"] and not any(k.startswith("seed ") for k in res["notes"])
    by_ck = {row["line"]["checkpoint"]: row for row in res["table"]}
    assert set(by_ck) == {NO_CHECKPOINT, s0["checkpoint_file"], str((run / "seed-1" / "policy.pt").resolve())}
    for d in dirs:  # every row holds its own run's episodes only: its means are the run's own summary means
        own = json.loads((d / "summary.json").read_text())["metrics"]
        row = by_ck[evaluated_checkpoint(d)]
        assert row["seeds"] == [0]
        for m in ("episode_return", "soc", "success"):
            assert row["summary"][m]["mean"] == own[m]["mean"], (d, m)
            assert row["summary"][m]["n_episodes"] == 3
    # the table shows short forms, the csv the absolute paths
    assert res["labels"]["checkpoint"] == {NO_CHECKPOINT: NO_CHECKPOINT,
                                           s0["checkpoint_file"]: f"{run.name}/seed-0",
                                           str((run / "seed-1" / "policy.pt").resolve()): f"{run.name}/seed-1"}
    text = _table_text(comparison_table(res))
    assert f"{run.name}/seed-0" in text and f"{run.name}/seed-1" in text and "policy.pt" not in text
    assert "pooled" not in text
    csv_text = (tmp_path / "cmp" / "compare.csv").read_text()
    assert csv_text.splitlines()[0].startswith("checkpoint,")
    assert s0["checkpoint_file"] in csv_text


def test_the_same_checkpoint_evaluated_twice_is_still_pooled(trained, tmp_path):
    run, cfg = trained
    a = eval_main(str(cfg), ["seeds=[0]", f"out_dir={tmp_path}"], str(run / "seed-0"), progress=False)
    b = eval_main(str(cfg), ["seeds=[1]", f"out_dir={tmp_path}"], str(run / "seed-0" / "policy.pt"), progress=False)
    res = compare_runs([a, b], out_dir=tmp_path / "cmp")
    assert res["line_keys"] == [] and len(res["table"]) == 1  # seed-0 and seed-0/policy.pt: the same file
    assert res["pooled_seeds"] and res["table"][0]["seeds"] == [0, 1]


def _fake_run(d: Path, cfg: dict, win: float, *, summary: dict | None = None, first_line: str = "",
              checkpoint_txt: str | None = None) -> Path:
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(first_line + yaml.safe_dump(cfg))
    rows = [{"seed": 0, "episode": e, "win": win} for e in range(2)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        metrics = {"win": {"mean": win, "ci95_low": None, "ci95_high": None, "n_seeds": 1, "n_episodes": 2,
                           "per_seed": {"0": win}}}
        (d / "summary.json").write_text(json.dumps({"episodes_finished": 2, "metrics": metrics, **summary}))
    if checkpoint_txt is not None:
        (d / "checkpoint.txt").write_text(checkpoint_txt + "\n")
    return d


CFG = {"name": "f25", "scenario": {"id": "smac/3m-v0"}, "agents": {"id": "ppo/mappo-v0"}, "seeds": [0]}


def test_where_a_runs_checkpoint_is_read_from_old_and_new_run_dirs(tmp_path):
    new = _fake_run(tmp_path / "new", CFG, 0.5,
                    summary={"checkpoint": "/t/r/seed-0", "checkpoint_file": "/t/r/seed-0/policy.pt"})
    assert evaluated_checkpoint(new) == "/t/r/seed-0/policy.pt"
    given = _fake_run(tmp_path / "given", CFG, 0.5, summary={"checkpoint": "/t/r/seed-1"})  # no checkpoint_file
    assert evaluated_checkpoint(given) == "/t/r/seed-1"
    none = _fake_run(tmp_path / "none", CFG, 0.5, summary={"checkpoint": None})
    assert evaluated_checkpoint(none) == NO_CHECKPOINT
    own = {**CFG, "agents": {"id": "mapf/immp-v0", "params": {"checkpoint": "/t/immp.pt"}}}
    param = _fake_run(tmp_path / "param", own, 0.5, summary={"checkpoint": None})
    assert evaluated_checkpoint(param, own) == "/t/immp.pt"  # the agent's own param loads the policy
    old = _fake_run(tmp_path / "old", CFG, 0.5, summary={})  # before the record
    assert evaluated_checkpoint(old) == NOT_RECORDED
    killed = _fake_run(tmp_path / "killed", CFG, 0.5, checkpoint_txt="/t/r/seed-2")  # no summary.json yet
    assert evaluated_checkpoint(killed) == "/t/r/seed-2"
    comment = _fake_run(tmp_path / "comment", CFG, 0.5, first_line="# evaluated with --checkpoint '/t/a b/seed-0'\n")
    assert evaluated_checkpoint(comment) == "/t/a b/seed-0"
    assert load_run(comment)["checkpoint"] == "/t/a b/seed-0"
    bad = _fake_run(tmp_path / "bad", CFG, 0.5)
    (bad / "summary.json").write_text("{not json")
    assert evaluated_checkpoint(bad) == NOT_RECORDED


def test_old_runs_without_a_record_compare_among_themselves_and_apart_from_recorded_ones(tmp_path):
    a = _fake_run(tmp_path / "a", CFG, 0.25, summary={})
    b = _fake_run(tmp_path / "b", {**CFG, "seeds": [1]}, 0.75, summary={})
    res = compare_runs([a, b], out_dir=tmp_path / "ab")
    assert res["line_keys"] == [] and len(res["table"]) == 1 and "checkpoint" not in res["notes"]  # as before
    c = _fake_run(tmp_path / "c", CFG, 1.0, summary={"checkpoint": None})
    res = compare_runs([a, c], out_dir=tmp_path / "ac")
    assert [(r["line"]["checkpoint"], r["summary"]["win"]["mean"]) for r in res["table"]] == \
        [(NO_CHECKPOINT, 1.0), (NOT_RECORDED, 0.25)]
    assert res["notes"]["checkpoint"] == ("a records no evaluated checkpoint (written before coopsim recorded it in "
                                          "summary.json, or stopped before writing summary.json), so it is not "
                                          "pooled with runs that do")
    assert not any(k.startswith("seed ") for k in res["notes"])


def test_checkpoint_labels_are_short_and_distinct():
    assert checkpoint_labels(["/x/run-a/seed-0/policy.pt", "/x/run-a/seed-1/policy.pt", NO_CHECKPOINT]) == \
        {"/x/run-a/seed-0/policy.pt": "run-a/seed-0", "/x/run-a/seed-1/policy.pt": "run-a/seed-1",
         NO_CHECKPOINT: NO_CHECKPOINT}
    # a mid-training checkpoint keeps its file name; any other file is its last two parts
    assert checkpoint_labels(["/x/run-a/seed-0/checkpoint.pt", "/x/run-a/seed-0/policy.pt", "/p/q/mine.pt"]) == \
        {"/x/run-a/seed-0/checkpoint.pt": "run-a/seed-0/checkpoint.pt", "/x/run-a/seed-0/policy.pt": "run-a/seed-0",
         "/p/q/mine.pt": "q/mine.pt"}
    # the same run name in two folders gets one more part
    assert checkpoint_labels(["/x/y/run-a/seed-0/policy.pt", "/x/z/run-a/seed-0/policy.pt"]) == \
        {"/x/y/run-a/seed-0/policy.pt": "y/run-a/seed-0", "/x/z/run-a/seed-0/policy.pt": "z/run-a/seed-0"}
    # a seed directory and its policy.pt recorded apart (an older record) do not look alike
    labels = checkpoint_labels(["/x/run-a/seed-0", "/x/run-a/seed-0/policy.pt"])
    assert labels == {"/x/run-a/seed-0": "run-a/seed-0", "/x/run-a/seed-0/policy.pt": "run-a/seed-0/policy.pt"}
    assert checkpoint_labels([NOT_RECORDED, "/a/b/c"]) == {NOT_RECORDED: NOT_RECORDED, "/a/b/c": "b/c"}


def test_evaluated_file_resolves_a_seed_directory(tmp_path):
    seed = tmp_path / "seed-0"
    seed.mkdir()
    (seed / "checkpoint.pt").write_bytes(b"x")
    assert evaluated_file(seed) == str((seed / "checkpoint.pt").resolve())
    (seed / "policy.pt").write_bytes(b"x")
    assert evaluated_file(seed) == str((seed / "policy.pt").resolve())
    assert evaluated_file(seed / "checkpoint.pt") == str((seed / "checkpoint.pt").resolve())


# --- 2. eval runs of different agent kinds: agent/scenario keys and the checkpoint before train.* -----------------

def test_label_columns_rank_train_keys_last(tmp_path):
    train_a = {f"k{i}": i for i in range(8)}
    a = _fake_run(tmp_path / "a", {**CFG, "agents": {"id": "ppo/mappo-v0", "params": {"hidden": [64, 64]}},
                                   "train": train_a}, 0.5,
                  summary={"checkpoint": "/runs/smac-3m-mappo-train-20261206T000000Z-aaaaaa/seed-0",
                           "checkpoint_file": "/runs/smac-3m-mappo-train-20261206T000000Z-aaaaaa/seed-0/policy.pt"})
    b = _fake_run(tmp_path / "b", {**CFG, "agents": {"id": "qmix/qmix-v0", "params": {"mixer_hidden": 32}},
                                   "train": {f"k{i}": -i for i in range(8)}}, 0.75,
                  summary={"checkpoint": "/runs/smac-3m-qmix-train-20261206T000000Z-bbbbbb/seed-0",
                           "checkpoint_file": "/runs/smac-3m-qmix-train-20261206T000000Z-bbbbbb/seed-0/policy.pt"})
    c = _fake_run(tmp_path / "c", {**CFG, "agents": {"id": "smac/focus-fire-v0"},
                                   "scenario": {"id": "smac/3m-v0", "params": {"obs_last_action": True}}}, 0.25,
                  summary={"checkpoint": None})
    res = compare_runs([a, b, c], out_dir=tmp_path / "cmp")
    assert res["shown_line_keys"] == ["agents.id", "checkpoint", "agents.params.hidden", "agents.params.mixer_hidden",
                                      "scenario.params.obs_last_action", "train.k0"]
    assert len(res["shown_line_keys"]) == MAX_TABLE_KEYS
    text = _flat(_table_text(comparison_table(res)))
    assert "smac-3m-mappo-train-20261206T000000Z-aaaaaa/seed-0" in text  # long, but the checkpoint is always shown
    assert "more config key(s) differ" in text
    narrow = _table_text(comparison_table(res), width=120)  # other columns give way; the checkpoint is never cut
    assert "smac-3m-mappo-train-20261206T000000Z-aaaaaa/seed-0" in narrow
    assert "smac-3m-qmix-train-20261206T000000Z-bbbbbb/seed-0" in narrow
    # the rule itself: train.* after every other key, however shallow
    flat = [{"train.lr": 0.1, "episodes": 1, "agents.params.x": 1},
            {"train.lr": 0.2, "episodes": 2, "agents.params.x": 2}]
    assert shown_line_keys(["agents.params.x", "episodes", "train.lr"], flat) == ["episodes", "agents.params.x",
                                                                                  "train.lr"]


# --- 3. an interrupted sweep that kept one run ---------------------------------------------------------------------

def test_interrupted_sweep_line_with_one_kept_run_says_look_at_it():
    from coopsim import cli

    assert cli._kept_runs_line(["/r/one"]) == "run directories kept: 1; look at it with: coopsim report /r/one"
    assert cli._kept_runs_line(["/r/a", "/r/b c"]) == \
        "run directories kept: 2; compare them with: coopsim report /r/a '/r/b c'"
    assert cli._kept_runs_line([]) == "run directories kept: 0"


# --- 4. eval --checkpoint of a seed whose training was interrupted --------------------------------------------------

@pytest.fixture
def interrupted_seed(trained, tmp_path):
    """A copy of the training run whose seed-0 stopped at 64 of 192 env steps: only checkpoint.pt, no policy.pt."""
    run, _ = trained
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    seed = copy / "seed-0"
    (seed / "policy.pt").unlink()
    (seed / "train_summary.json").unlink()
    state = torch.load(seed / "checkpoint.pt", map_location="cpu", weights_only=False)
    state["env_steps"] = 64
    torch.save(state, seed / "checkpoint.pt")
    return copy


def test_checkpoint_note_names_the_steps_of_an_interrupted_seed(interrupted_seed):
    seed = interrupted_seed / "seed-0"
    assert checkpoint_note(seed) == \
        "seed-0 has no policy.pt (its training stopped at 64 of 192 env steps): evaluating checkpoint.pt"
    assert checkpoint_note(interrupted_seed / "seed-1") is None  # finished: policy.pt
    assert checkpoint_note(seed / "checkpoint.pt") is None  # asked for by name
    assert checkpoint_note(None) is None
    (interrupted_seed / "config.yaml").write_text("name: x\n")  # no budget recorded
    assert checkpoint_note(seed) == \
        "seed-0 has no policy.pt (its training stopped at 64 env steps): evaluating checkpoint.pt"
    (seed / "checkpoint.pt").write_bytes(b"not a checkpoint")
    assert checkpoint_note(seed) == ("seed-0 has no policy.pt (its training did not finish; the env steps its "
                                     "checkpoint.pt holds could not be read): evaluating checkpoint.pt")


def test_checkpoint_note_of_a_full_checkpoint_without_policy(trained, tmp_path):
    run, _ = trained
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    (copy / "seed-1" / "policy.pt").unlink()
    assert checkpoint_note(copy / "seed-1") == ("seed-1 has no policy.pt (its checkpoint.pt is at 192 env steps, the "
                                                "end of its 192-step budget, but policy.pt is missing): evaluating "
                                                "checkpoint.pt")


def test_eval_of_an_interrupted_seed_prints_the_note_and_records_checkpoint_pt(interrupted_seed, trained, tmp_path):
    from typer.testing import CliRunner

    from coopsim.cli import app

    _, cfg = trained
    out = tmp_path / "evals"
    res = CliRunner().invoke(app, ["eval", str(cfg), "seeds=[0]", "episodes=1", f"out_dir={out}", "--checkpoint",
                                   str(interrupted_seed / "seed-0"), "--no-progress"])
    text = _flat(res.output + (res.stderr if res.stderr_bytes is not None else ""))
    assert res.exit_code == 0, text
    assert ("note: seed-0 has no policy.pt (its training stopped at 64 of 192 env steps): evaluating checkpoint.pt"
            in text)
    (ev,) = out.iterdir()
    assert evaluated_checkpoint(ev) == str((interrupted_seed / "seed-0" / "checkpoint.pt").resolve())
    # a finished seed: no note
    res = CliRunner().invoke(app, ["eval", str(cfg), "seeds=[0]", "episodes=1", f"out_dir={out}", "--checkpoint",
                                   str(interrupted_seed / "seed-1"), "--no-progress"])
    assert res.exit_code == 0 and "has no policy.pt" not in res.output + (res.stderr if res.stderr_bytes else "")
