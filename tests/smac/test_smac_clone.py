"""benchmarks/smac_clone.py: DAgger labels are the teacher's own greedy actions across observation layouts, the played
games are the acting policy's own, the fit lowers the cross-entropy, and bad input is refused before any game."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from coopsim.errors import ConfigError
from coopsim.platform import registry
from coopsim.platform.config import load_config
from coopsim.platform.runner import play_episodes

from test_best_of_k import ROOT, _load, _tiny_run  # noqa: E402  (tests/smac is on sys.path under pytest)

STUDENT = ROOT / "configs/smac/3m-mappo.yaml"  # observes its own cooldown: one column more than the QMIX teacher


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    return _tiny_run(tmp_path_factory.mktemp("qmix"), "3m-qmix")


def _teacher_alone(sc, teacher_dir: Path, games: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The teacher playing greedily in its own core: its living agents' actions, step by step (concatenated), and
    the games' wins."""
    tcfg = load_config(teacher_dir.parent / "config.yaml")
    core = registry.make_scenario(tcfg.scenario.id, num_envs=games, **tcfg.scenario_params())
    t = sc.make_teacher(tcfg, teacher_dir, core)
    obs = core.reset(seed=seed)
    t.reset(seed)
    acts = []
    while not core.done.all():
        a, _ = t.act(obs)
        live = np.asarray(core.alive) & ~np.asarray(core.done)[:, None]
        acts.append(np.asarray(a)[live])
        obs = core.step(a).obs
    return np.concatenate(acts), np.array([m["win"] for m in core.episode_metrics()])


def test_teacher_round_records_the_teachers_own_actions_in_the_students_observation(teacher):
    sc = _load("smac_clone")
    tcfg = sc.check_teacher(teacher)
    scfg = sc.check_student(STUDENT, tcfg)
    data = sc.Dataset()
    played = sc.play(tcfg, teacher, scfg, None, games=5, seed=3, teacher_plays=True, data=data)
    x, mask, y = (v.numpy() for v in data.tensors())
    want, wins = _teacher_alone(sc, teacher, 5, 3)
    # the labels are exactly what the teacher plays alone from the same starts, and so are the games
    np.testing.assert_array_equal(y, want)
    assert played["win_rate"] == wins.mean()
    assert mask[np.arange(len(y)), y].all() and (y != 0).all()  # available, never no-op for a living unit
    # the rows are the student's inputs: its observation (with the own-cooldown column the teacher lacks) + agent id
    t_dim = registry.make_scenario(tcfg.scenario.id, num_envs=1, **tcfg.scenario_params()).observation_space.shape[-1]
    s_dim = registry.make_scenario(scfg.scenario.id, num_envs=1, **scfg.scenario_params()).observation_space.shape[-1]
    assert s_dim == t_dim + 1 and x.shape == (len(y), s_dim + 3)
    np.testing.assert_array_equal(x[:, s_dim:].sum(1), np.ones(len(y)))  # one-hot agent id


def test_student_round_plays_the_student_and_the_fit_lowers_its_loss(teacher, tmp_path):
    sc = _load("smac_clone")
    tcfg = sc.check_teacher(teacher)
    scfg = sc.check_student(STUDENT, tcfg)
    data = sc.Dataset()
    sc.play(tcfg, teacher, scfg, None, games=4, seed=5, teacher_plays=True, data=data)
    first = tmp_path / "r1" / "policy.pt"
    sc.fit(scfg, None, data, first, epochs=1, lr=1e-3, batch=64, seed=1)
    n1 = len(data)
    played = sc.play(tcfg, teacher, scfg, first, games=4, seed=6, teacher_plays=False, data=data)
    # a student round plays the student's own greedy games (the same wins as the student alone from those starts)
    core = registry.make_scenario(scfg.scenario.id, num_envs=4, **scfg.scenario_params())
    alone = sc.make_student(scfg, core, first, 0)
    assert played["win_rate"] == np.mean([m["win"] for m in play_episodes(core, alone, 6)])
    assert len(data) > n1 and 0.0 <= played["agreement"] <= 1.0
    # the fit lowers the cross-entropy of the teacher's actions under the student
    x, m, y = data.tensors()

    def ce(policy):
        s = sc.make_student(scfg, registry.make_scenario(scfg.scenario.id, num_envs=1, **scfg.scenario_params()),
                            policy, 0)
        with torch.no_grad():
            feat, _ = s.net.features(x, None)
            logits = s.net.logits(feat, m)
            return float(torch.nn.functional.cross_entropy(logits, y)), float((logits.argmax(-1) == y).float().mean())

    second = tmp_path / "r2" / "policy.pt"
    stats = sc.fit(scfg, first, data, second, epochs=20, lr=3e-3, batch=64, seed=2)
    assert ce(second)[0] < ce(first)[0]
    # the reported accuracy is the saved, fitted actor's on every row (not the last epoch's running one)
    assert stats["accuracy"] == pytest.approx(ce(second)[1], abs=1e-6)  # float32 mean vs exact ratio


def test_main_writes_its_rounds_and_refuses_bad_input_before_any_game(teacher, tmp_path, capsys):
    sc = _load("smac_clone")
    out = tmp_path / "clone"
    sc.main([str(teacher), str(STUDENT), "--out", str(out), "--rounds", "2", "--games", "3", "--epochs", "1",
             "--eval-episodes", "3"])
    summary = json.loads((out / "summary.json").read_text())
    assert [r["played_by"] for r in summary["rounds"]] == ["teacher", "student"]
    assert summary["rounds"][1]["rows"] > summary["rounds"][0]["rows"] > 0
    for r in summary["rounds"]:
        assert r["ci95"][0] <= r["win_rate"] <= r["ci95"][1]
    # each round reads as a training run's seed directory: a PPO policy and the student's config beside it
    assert load_config(out / "round-2" / "config.yaml").agents.id == "ppo/mappo-v0"
    assert (out / "round-2" / "seed-0" / "policy.pt").is_file()
    assert "train.init_policy=" in capsys.readouterr().out

    def refused(match: str, *argv: str) -> None:
        with pytest.raises(ConfigError, match=match):
            sc.main([*argv, "--out", str(tmp_path / "new"), "--games", "2", "--eval-episodes", "2"])
        assert not (tmp_path / "new").exists()

    with pytest.raises(ConfigError, match="exists and is not empty"):
        sc.main([str(teacher), str(STUDENT), "--out", str(out)])
    refused("not a training run's seed directory", str(tmp_path), str(STUDENT))
    refused("plays smac/8m-v0 but the teacher played smac/3m-v0", str(teacher), str(ROOT / "configs/smac/8m-mappo.yaml"))
    refused("is not PPO", str(teacher), str(ROOT / "configs/smac/3m-qmix.yaml"))
    recurrent = tmp_path / "recurrent.yaml"
    raw = yaml.safe_load(STUDENT.read_text())
    raw["agents"]["params"]["recurrent"] = True
    recurrent.write_text(yaml.safe_dump(raw))
    refused("memoryless", str(teacher), str(recurrent))
    refused("does not exist", str(teacher), str(tmp_path / "missing.yaml"))
    refused("--lr", str(teacher), str(STUDENT), "--lr", "0")
    # a student whose params change the game (not only what it observes) is refused where the games part
    moved = tmp_path / "surrounded.yaml"
    raw = yaml.safe_load(STUDENT.read_text())
    raw["scenario"]["params"]["start_positions"] = "surrounded"
    moved.write_text(yaml.safe_dump(raw))
    refused("change the game.*start_positions: 'surrounded'", str(teacher), str(moved))
    longer = tmp_path / "longer.yaml"  # the games would part only at the time limit: refused up front all the same
    raw = yaml.safe_load(STUDENT.read_text())
    raw["scenario"]["params"]["max_steps"] = 10
    longer.write_text(yaml.safe_dump(raw))
    refused("max_steps: 10", str(teacher), str(longer))
    refused("is a directory, not a file", str(teacher), str(tmp_path))
    refused("did you mean .*seed-0", str(teacher.parent), str(STUDENT))
    broken = tmp_path / "broken" / "seed-0"  # a teacher whose policy file is not QMIX's: refused before --out
    broken.mkdir(parents=True)
    (broken.parent / "config.yaml").write_text((teacher.parent / "config.yaml").read_text())
    (broken / "policy.pt").write_bytes((out / "round-1" / "seed-0" / "policy.pt").read_bytes())
    refused("not a QMIX policy", str(broken), str(STUDENT))
    for flag, value in (("--seed", "20001"), ("--eval-seed", "99999999999999999999"), ("--games", "65537"),
                        ("--eval-episodes", "1000000000000"), ("--rounds", "0")):
        with pytest.raises(SystemExit) as e:
            sc.main([str(teacher), str(STUDENT), "--out", str(tmp_path / "new"), flag, value])
        assert e.value.code == 2 and not (tmp_path / "new").exists()


def test_an_interrupt_keeps_whole_rounds_and_names_the_last_ones_fine_tune(teacher, tmp_path, monkeypatch):
    sc = _load("smac_clone")
    real_fit = sc.fit
    calls, stop_at = [], [2]

    def fit_then_stop(*args, **kw):  # Ctrl-C while round 2 fits: round 1 is whole, round 2 is not
        calls.append(1)
        if len(calls) == stop_at[0]:
            raise KeyboardInterrupt
        return real_fit(*args, **kw)

    monkeypatch.setattr(sc, "fit", fit_then_stop)
    out = tmp_path / "clone"
    argv = [str(teacher), str(STUDENT), "--out", str(out), "--rounds", "3", "--games", "3", "--epochs", "1",
            "--eval-episodes", "3"]
    with pytest.raises(KeyboardInterrupt) as e:
        sc.main(argv)
    assert [r["round"] for r in json.loads((out / "summary.json").read_text())["rounds"]] == [1]
    assert (out / "round-1" / "seed-0" / "policy.pt").is_file() and not (out / "round-2").exists()
    assert f"train.init_policy={out / 'round-1' / 'seed-0'}" in e.value.args[0]
    # interrupted before any round finished: the folder it made is gone, so the same command can run again
    stop_at[0] = len(calls) + 1  # the next fit, round 1's, is interrupted
    with pytest.raises(KeyboardInterrupt) as e:
        sc.main([*argv[:3], str(tmp_path / "none"), *argv[4:]])
    assert not (tmp_path / "none").exists() and "no round finished" in e.value.args[0]


def test_game_state_tells_equal_games_from_different_ones():
    sc = _load("smac_clone")
    tcfg = load_config(ROOT / "configs/smac/3m-qmix.yaml")
    scfg = load_config(STUDENT)
    t = registry.make_scenario(tcfg.scenario.id, num_envs=3, **tcfg.scenario_params())
    s = registry.make_scenario(scfg.scenario.id, num_envs=3, **scfg.scenario_params())
    t.reset(seed=4)
    s.reset(seed=4)
    sc._same_game(t, s, 0, tcfg, scfg)  # other observation params, the same game
    g = s.game_state()
    assert {"_pos", "_unit_alive", "_kc"} <= set(g) and not g["_pos"].flags.writeable
    moves = np.full((3, 3), 2, np.int64)  # every marine moves north: still the same game in both cores
    t.step(moves)
    s.step(moves)
    sc._same_game(t, s, 1, tcfg, scfg)
    s.step(np.full((3, 3), 3, np.int64))  # the student's marines move on, the teacher's do not
    with pytest.raises(ConfigError, match=r"parted at step 2 \(.*_pos"):
        sc._same_game(t, s, 2, tcfg, scfg)
