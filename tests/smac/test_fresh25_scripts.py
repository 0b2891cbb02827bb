"""Fresh-user pass 25, the SMAC research scripts (/work/exp/fresh25_findings.md, bugs 2-5 and 7 and their polish):

- ``smac_expert_iteration.py --resume`` after an interrupt at any point equals the uninterrupted run (no round's rows
  twice); a resume with other settings is refused naming every differing flag, one on a finished run says so in one
  line; an unsuitable run leaves no ``--out`` folder and is refused in the script's own words.
- ``smac_time_to_win.py --resume`` of a run that ``coopsim train --resume`` finished evaluates ``policy.pt`` as the
  final result; ``coopsim train --resume`` of such a run warns once; an interrupted run prints its ``--resume``.
- The rollout planners refuse recurrent / frame-stacked policies up front; best-of-K plays them (whole games).
- ``--plot`` with a non-image suffix is one ``error:`` line and exit code 2.
- ``--out`` of best-of-K and the rollout ceiling: one rule (a .json file in an existing writable folder, overwrite ok).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from coopsim.errors import ConfigError
from coopsim.platform.config import dump_config, load_config

from test_best_of_k import _load, _tiny_run  # noqa: E402  (tests/smac is on sys.path under pytest)
from test_time_to_win import _tiny, interrupt_at_evaluation  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _script(tmp_path, name, *args, timeout=120):
    return subprocess.run([sys.executable, str(BENCH / name), *map(str, args)], capture_output=True, text=True,
                          env=ENV, cwd=tmp_path, timeout=timeout)


def _fake_seed_dir(tmp_path: Path, config: str, overrides: list[str]) -> Path:
    """A seed directory whose ``policy.pt`` is not a policy: anything that loads it or plays a game fails, so a
    refusal from it shows the check came first."""
    run = tmp_path / "fake-run"
    (run / "seed-0").mkdir(parents=True)
    (run / "config.yaml").write_text(dump_config(load_config(str(ROOT / config), overrides)))
    (run / "seed-0" / "policy.pt").write_bytes(b"not a policy")
    return run / "seed-0"


# --- 1. expert iteration: resume after an interrupt at any point equals the uninterrupted run ----------------------

def _ei_args(seed_dir, out, *extra):
    return [str(seed_dir), "--out", str(out), "--games", "4", "-k", "2", "-r", "1", "--epochs", "2",
            "--eval-episodes", "4", *extra]


def _net(path: Path) -> dict:
    return torch.load(path, weights_only=False)["net"]


@pytest.mark.parametrize("where", ["distillation", "evaluation"])
def test_expert_iteration_resume_after_an_interrupt_equals_the_uninterrupted_run(tmp_path, monkeypatch, where):
    seed_dir = _tiny_run(tmp_path / "run", "3m-mappo")
    ref = _load("smac_expert_iteration")
    ref.main(_ei_args(seed_dir, tmp_path / "ref", "--rounds", "2"))

    ei = _load("smac_expert_iteration")
    out = tmp_path / "cut"
    if where == "distillation":
        real = ei.distil

        def distil(seed_dir_, policy, data, new, *a, **k):  # Ctrl-C while round 2 fits, after its data.npz was
            if k.get("seed") == 2:                           # written (what the earlier version did)
                data.save(out / "data.npz")
                raise KeyboardInterrupt
            return real(seed_dir_, policy, data, new, *a, **k)

        monkeypatch.setattr(ei, "distil", distil)
    else:
        real = ei.greedy_wins
        calls = {"n": 0}

        def greedy_wins(*a, **k):  # base, round 1, round 2: Ctrl-C in round 2's evaluation (its policy is written)
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt
            return real(*a, **k)

        monkeypatch.setattr(ei, "greedy_wins", greedy_wins)
    with pytest.raises(KeyboardInterrupt):
        ei.main(_ei_args(seed_dir, out, "--rounds", "2"))
    assert len(json.loads((out / "summary.json").read_text())["rounds"]) == 1
    monkeypatch.undo()

    _load("smac_expert_iteration").main(_ei_args(seed_dir, out, "--rounds", "2", "--resume"))
    with np.load(tmp_path / "ref" / "data.npz") as a, np.load(out / "data.npz") as b:
        assert np.bincount(a["round"]).tolist()[1:] == np.bincount(b["round"]).tolist()[1:]  # no round twice
        for key in ("x", "mask", "y", "round"):
            np.testing.assert_array_equal(a[key], b[key])
    one, two = (json.loads((d / "summary.json").read_text()) for d in (tmp_path / "ref", out))
    strip = lambda rows: [{k: v for k, v in r.items() if not k.endswith("_s")} for r in rows]  # noqa: E731
    assert strip(one["rounds"]) == strip(two["rounds"]) and len(two["rounds"]) == 2
    assert two["rounds"][-1]["rows"] == len(np.load(out / "data.npz")["y"])
    sa, sb = _net(tmp_path / "ref" / "round-2" / "seed-0" / "policy.pt"), _net(out / "round-2" / "seed-0" / "policy.pt")
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_expert_iteration_resume_keeps_the_runs_settings_and_says_when_it_is_done(tmp_path, monkeypatch, capsys):
    ei = _load("smac_expert_iteration")
    seed_dir = _tiny_run(tmp_path / "run", "3m-mappo")
    out = tmp_path / "ei"
    ei.main(_ei_args(seed_dir, out, "--rounds", "1"))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()

    # another setting: refused, every differing flag named, nothing written
    with pytest.raises(ConfigError) as e:
        ei.main(_ei_args(seed_dir, out, "--rounds", "2", "--resume", "-k", "3", "--games", "8", "--lr", "0.01"))
    msg = str(e.value)
    assert "--resume continues the run with the settings it was started with, but 3 differ: --games 8 (the run's: 4)" \
           ", -k 3 (the run's: 2), --lr 0.01 (the run's: 0.0003)" in msg, msg
    assert "only --rounds may grow" in msg and e.value.key == "--games/-k/--lr"
    other = _tiny_run(tmp_path / "other", "3m-mappo")
    with pytest.raises(ConfigError, match=r"1 differ: seed_dir .*other.* \(the run's: .*run.*\)"):
        ei.main(_ei_args(other, out, "--rounds", "2", "--resume"))
    for flags in (["--per-agent", "1"], ["--margin", "0.5"], ["--epochs", "3"], ["-r", "2"], ["--eval-seed", "1"]):
        with pytest.raises(ConfigError, match="1 differ: " + flags[0]):
            ei.main(_ei_args(seed_dir, out, "--rounds", "2", "--resume", *flags))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    # a finished run: one line, nothing done
    capsys.readouterr()
    ei.main(_ei_args(seed_dir, out, "--rounds", "1", "--resume"))
    assert capsys.readouterr().out.splitlines() == [f"{out}: already done: 1 round(s) finished, --rounds 1; nothing "
                                                    f"to do (give --rounds N > 1 to continue)"]
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    # flags left out take the run's values (-k 2, --games 4, ...), not the parser's defaults (-k 8, --games 256)
    seen = {}

    def stop(seed_dir_, games, k, r, **kw):
        seen.update(games=games, k=k, r=r, per_agent=kw["per_agent"])
        raise KeyboardInterrupt

    monkeypatch.setattr(ei, "rollout_games", stop)
    with pytest.raises(KeyboardInterrupt):
        ei.main([str(seed_dir), "--out", str(out), "--rounds", "2", "--resume"])
    assert seen == {"games": 4, "k": 2, "r": 1, "per_agent": 0}


def test_expert_iteration_refuses_unsuitable_runs_in_its_own_words_and_leaves_no_out_folder(tmp_path):
    ei = _load("smac_expert_iteration")
    line = _fake_seed_dir(tmp_path / "lw", "configs/ppo/linewalk-mappo.yaml", [])
    with pytest.raises(ConfigError) as e:
        ei.main(_ei_args(line, tmp_path / "out1"))
    assert "expert iteration plays SMAC maps; the run trained line/LineWalk-v0" in str(e.value)
    assert "best-of-K" not in str(e.value) and e.value.key == "scenario.id"
    assert not (tmp_path / "out1").exists()
    r = _script(tmp_path, "smac_expert_iteration.py", line, "--out", tmp_path / "out2")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == "", r.stderr
    assert r.stderr.strip().splitlines() == ["error: key 'scenario.id': expert iteration plays SMAC maps; the run "
                                             "trained line/LineWalk-v0 (give the seed directory of a PPO training "
                                             "run on a smac/ scenario)"]
    assert not (tmp_path / "out2").exists()
    # greedy_wins (its evaluation) speaks of expert iteration too
    with pytest.raises(ConfigError, match="expert iteration plays SMAC maps"):
        ei.greedy_wins(line, 2, 0)


# --- 3. planners refuse memory policies before any folder or game; best-of-K plays them ----------------------------

MEMORY = [("agents.params.recurrent=true", "agents.params.recurrent", "the policy is recurrent (a GRU state)"),
          ("agents.params.stack_frames=2", "agents.params.stack_frames",
           "the policy reads its last 2 observations (a frame history)")]
NEED = "needs a memoryless (feed-forward, one-frame) policy"


@pytest.mark.parametrize("override, key, what", MEMORY)
def test_planners_refuse_memory_policies_before_any_folder_or_game(tmp_path, override, key, what):
    seed_dir = _fake_seed_dir(tmp_path, "configs/smac/3m-mappo.yaml", [override])  # any load or game would fail
    rc = _load("smac_rollout_ceiling")
    for per_agent in (0, 1):
        with pytest.raises(ConfigError) as e:
            rc.rollout_games(seed_dir, games=2, k=2, r=1, progress=False, per_agent=per_agent)
        assert e.value.key == key and what in e.value.message and f"the rollout planner {NEED}" in e.value.message
    ei = _load("smac_expert_iteration")
    with pytest.raises(ConfigError) as e:
        ei.main(_ei_args(seed_dir, tmp_path / "out"))
    assert e.value.key == key and f"expert iteration {NEED}" in e.value.message
    assert not (tmp_path / "out").exists()
    r = _script(tmp_path, "smac_rollout_ceiling.py", seed_dir, "--games", "2", "--per-agent", "1", "-r", "1")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [f"error: key '{key}': {what}; the rollout planner {NEED}: its rollouts "
                                             f"copy the game's state, not the real agent's memory (train one with "
                                             f"{key}={'false' if 'recurrent' in key else '1'})"]


def test_a_variants_memory_default_counts_and_memoryless_policies_pass(tmp_path):
    rc = _load("smac_rollout_ceiling")
    cfg = load_config(str(ROOT / "configs/smac/3m-mappo.yaml"))
    from coopsim.platform import registry

    cls = registry.spec("agent", cfg.agents.id).load()
    rc.memoryless_policy(cfg, cls)  # recurrent: false, stack_frames 1 by default: accepted

    class Variant:  # a registered variant whose defaults make the policy recurrent
        Params = cls.Params
        defaults = {"recurrent": True}

    plain = cfg.model_copy(update={"agents": cfg.agents.model_copy(update={"params": {"hidden": [64, 64]}})})
    with pytest.raises(ConfigError, match="the policy is recurrent"):
        rc.memoryless_policy(plain, Variant)


@pytest.mark.parametrize("override", ["agents.params.recurrent=true", "agents.params.stack_frames=2"])
def test_best_of_k_plays_memory_policies_and_the_planners_refuse_them(tmp_path, override):
    """Best-of-K plays every pass as a whole game from the reset, with the agent reset with it (GRU state zero,
    frame history restarted), so memory policies are handled: it runs and repeats exactly. The planners refuse the
    same trained policy in one error."""
    ttw = _load("smac_time_to_win")
    assert ttw.main([str(ROOT / "configs/smac/3m-mappo.yaml"), "--seeds", "0", "--eval-every", "256",
                     "--eval-episodes", "2", "train.total_env_steps=256", "train.num_envs=2",
                     "train.minibatches=2", override,
                     f"out_dir={tmp_path / 'run'}"]) == 0
    (run,) = (tmp_path / "run").iterdir()
    seed_dir = run / "seed-0"
    bok = _load("smac_best_of_k")
    a = bok.wins_from_fixed_starts(seed_dir, starts=4, k=2, reset_seed=5)
    b = bok.wins_from_fixed_starts(seed_dir, starts=4, k=2, reset_seed=5)
    assert a["sampled"].shape == (2, 4)
    np.testing.assert_array_equal(a["greedy"], b["greedy"])
    np.testing.assert_array_equal(a["sampled"], b["sampled"])
    with pytest.raises(ConfigError, match=re.escape(NEED)):
        _load("smac_rollout_ceiling").rollout_games(seed_dir, games=2, k=2, r=1, progress=False)


# --- 2. time to win: a run finished by `coopsim train --resume` -------------------------------------------------

def test_time_to_win_resume_evaluates_a_policy_trained_on_by_coopsim_train(tmp_path, monkeypatch):
    from coopsim.platform.training import time_to_win_warning, train_main

    ttw = _load("smac_time_to_win")
    assert ttw.main(_tiny(tmp_path, "whole")) == 0
    (whole,) = (tmp_path / "whole").iterdir()
    ref = json.loads((whole / "time_to_win.json").read_text())["per_seed"]["0"]

    interrupt_at_evaluation(monkeypatch, ttw, 3)  # Ctrl-C during the third evaluation (at 192 env steps)
    with pytest.raises(KeyboardInterrupt):
        ttw.main(_tiny(tmp_path, "cut"))
    monkeypatch.undo()
    (cut,) = (tmp_path / "cut").iterdir()

    # coopsim train --resume: trains on (exactly), without evaluations, and says where those are made
    said = []
    assert train_main("", [], str(cut), info=said.append) == cut
    warn = [m for m in said if m.startswith("warning:")]
    assert warn == [f"warning: {cut} is a run of benchmarks/smac_time_to_win.py; coopsim train --resume trains it, "
                    f"but its periodic greedy win-rate checks are made only by `benchmarks/smac_time_to_win.py "
                    f"--resume {cut}` (which also evaluates the policy.pt of a seed trained past its last check)"]
    assert time_to_win_warning(whole.parent) is None  # any other directory: no warning
    kept = json.loads((cut / "time_to_win.json").read_text())["per_seed"]["0"]
    assert [e["env_steps"] for e in kept["evals"]] == [64, 128] and kept["final"] is None

    assert ttw.main(["--resume", str(cut)]) == 0
    got = json.loads((cut / "time_to_win.json").read_text())["per_seed"]["0"]
    # the final result is policy.pt at 256 env steps, equal to the uninterrupted run's last evaluation, not the
    # stale one at 128
    assert got["final"]["env_steps"] == 256 == ref["final"]["env_steps"]
    assert got["final"]["greedy_win"] == ref["final"]["greedy_win"] and got["final"]["policy"] == "policy.pt"
    assert [(e["env_steps"], e["greedy_win"]) for e in got["evals"]] == \
        [(e["env_steps"], e["greedy_win"]) for e in ref["evals"] if e["env_steps"] != 192]
    assert got["final"] == got["evals"][-1] and got["final"]["train_wall_s"] > 0
    again = (cut / "time_to_win.json").read_bytes()
    assert ttw.main(["--resume", str(cut)]) == 0 and (cut / "time_to_win.json").read_bytes() == again  # once


@pytest.mark.parametrize("script", ["smac_time_to_win.py", "mappo_on_smax.py"])
def test_an_interrupted_time_to_win_run_prints_its_resume_command(tmp_path, script):
    args = _tiny(tmp_path, "i")
    args = [a for a in args if not a.startswith("train.total_env_steps=")] + ["train.total_env_steps=100000000"]
    p = subprocess.Popen([sys.executable, str(BENCH / script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV, cwd=tmp_path)
    try:
        t0 = time.monotonic()
        while not list((tmp_path / "i").glob("*/seed-0/checkpoint.pt")) and time.monotonic() - t0 < 120:
            time.sleep(0.2)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    (run,) = (tmp_path / "i").iterdir()
    assert p.returncode == 130 and "Traceback" not in err, err
    (last,) = [x for x in err.splitlines() if x.startswith("interrupted; kept: ")]
    command = last.split("; continue with: ")[1]
    assert shlex.split(command)[1:] == [str(BENCH / script), "--resume", str(run)], last


# --- 4. --plot with a non-image suffix ------------------------------------------------------------------------------

@pytest.mark.parametrize("script", ["smac_time_to_win.py", "mappo_on_smax.py"])
def test_plot_with_a_non_image_suffix_is_one_error_line(tmp_path, script):
    r = _script(tmp_path, script, "--plot", tmp_path, tmp_path / "out.txt")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'out.txt'}: matplotlib cannot write the format 'txt'; give OUT an "
                           f"image suffix: ") and ".png" in line
    assert not (tmp_path / "out.txt").exists()


# --- 5. --out: one rule for best-of-K and the rollout ceiling ----------------------------------------------------------

@pytest.mark.parametrize("script", ["smac_best_of_k.py", "smac_rollout_ceiling.py"])
def test_out_is_a_json_file_in_an_existing_writable_folder(tmp_path, script):
    # the flag is checked before the seed directory is read (SEED does not exist)
    for out, need in ((tmp_path / "bok.txt", f"{tmp_path / 'bok.txt'} is not a .json file; give a .json file in an "
                                             f"existing writable folder"),
                      (tmp_path / "nodir" / "b.json", f"the folder {tmp_path / 'nodir'} does not exist; give a .json "
                                                      f"file in an existing writable folder"),
                      (tmp_path, f"{tmp_path} is a folder; give the file to write")):
        r = _script(tmp_path, script, "SEED", "--out", out)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines() == [f"error: key '--out': {need}"]
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "bok.txt").exists()


def test_out_overwrites_an_existing_json_and_the_help_says_so(tmp_path, capsys):
    rc, bok = _load("smac_rollout_ceiling"), _load("smac_best_of_k")
    for mod in (rc, bok):
        with pytest.raises(SystemExit) as e:
            mod.main(["--help"])
        assert e.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "a new" not in text and "(an existing file is overwritten)" in text
        assert ".json file in an existing writable folder" in text
        if mod is bok:
            assert "--starts STARTS fixed starts, one batched core (default 256)" in text
            assert "-k K sampled passes (default 16)" in text
    seed_dir = _tiny_run(tmp_path / "run", "3m-mappo")
    for mod, args in ((rc, ["--games", "2", "-k", "1", "-r", "1"]), (bok, ["--starts", "2", "-k", "1"])):
        out = tmp_path / "old.json"
        out.write_text("old")
        mod.main([str(seed_dir), *args, "--out", str(out)])
        assert json.loads(out.read_text())["greedy"] and sorted(p.name for p in tmp_path.iterdir()) == ["old.json",
                                                                                                        "run"]
