"""benchmarks/smac_time_to_win.py: the greedy evaluation works for PPO and QMIX configs and refuses other learners."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config
from coopsim.platform.training import build_trainer
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[2]


def _ttw():
    return load_benchmark("smac_time_to_win")


@pytest.mark.parametrize("config, greedy", [("3m-qmix", {"epsilon": 0.0}), ("3m-mappo", {"deterministic": True}),
                                            ("3m-ippo", {"deterministic": True})])
def test_greedy_copy_of_ppo_and_qmix(config, greedy):
    ttw = _ttw()
    cfg = load_config(str(ROOT / "configs" / "smac" / f"{config}.yaml"), ["train.num_envs=2"])
    agent = build_trainer(cfg, 0)[0].agent
    if "epsilon" in greedy:
        agent.epsilon = 0.7  # as during training: the copy must still act with epsilon 0
    ev = ttw.GreedyEvaluator(cfg.scenario.id, cfg.scenario_params(), 2, 10_000)
    win = ev.greedy_win_rate(agent)
    assert 0.0 <= win <= 1.0
    copy = ev._agent
    assert all(getattr(copy.params, k) == v for k, v in greedy.items())
    if "epsilon" in greedy:
        assert copy.epsilon == 0.0
    src, dst = agent.net.state_dict(), copy.net.state_dict()
    assert all((src[k] == dst[k]).all() for k in src)
    assert ev.greedy_win_rate(agent) == win and ev._agent is copy  # same reset seed, same copy


def test_tiny_qmix_run_writes_time_to_win(tmp_path):
    ttw = _ttw()
    rc = ttw.main([str(ROOT / "configs/smac/3m-qmix.yaml"), "--seeds", "0", "--eval-every", "100", "--eval-episodes", "2",
                   "train.total_env_steps=200", "train.num_envs=2", f"out_dir={tmp_path}"])
    assert rc == 0
    (run,) = tmp_path.iterdir()
    evals = json.loads((run / "time_to_win.json").read_text())["per_seed"]["0"]["evals"]
    assert len(evals) == 2 and all(0.0 <= e["greedy_win"] <= 1.0 for e in evals)


def test_learner_without_greedy_params_is_refused():
    from coopsim.agents.graph_safe.agent import GraphSafeAgent

    with pytest.raises(ConfigError, match=r"key 'agents.id'.*cannot evaluate agent 'graph_safe-v0' greedily: its params "
                                          r"have neither 'deterministic'.*nor 'epsilon'"):
        _ttw().greedy_params(GraphSafeAgent, "graph_safe-v0")


def test_main_refuses_before_training(tmp_path):
    with pytest.raises(ConfigError, match="cannot evaluate agent 'graph_safe-v0' greedily"):
        _ttw().main([str(ROOT / "configs/safety/coop-grid4x4-2ag-all.yaml"), f"out_dir={tmp_path}"])
    assert list(tmp_path.iterdir()) == []


def _tiny(tmp_path, name):
    return [str(ROOT / "configs/smac/3m-mappo.yaml"), "--seeds", "0", "--eval-every", "64", "--eval-episodes", "2",
            "train.total_env_steps=256", "train.num_envs=2", "train.rollout_steps=32", "train.checkpoint_every=1",
            "train.progress=false", f"out_dir={tmp_path / name}"]


def interrupt_at_evaluation(monkeypatch, ttw, n: int):
    """Make the ``n``-th greedy evaluation of ``ttw`` (a loaded smac_time_to_win module) raise KeyboardInterrupt, as
    a Ctrl-C during it would; returns the real ``GreedyEvaluator.greedy_win_rate``."""
    real = ttw.GreedyEvaluator.greedy_win_rate
    calls = {"n": 0}

    def interrupted(self, agent):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return real(self, agent)

    monkeypatch.setattr(ttw.GreedyEvaluator, "greedy_win_rate", interrupted)
    return real


def test_resume_after_an_interrupt_matches_an_uninterrupted_run(tmp_path, monkeypatch):
    import torch

    ttw = _ttw()
    assert ttw.main(_tiny(tmp_path, "whole")) == 0
    (whole,) = (tmp_path / "whole").iterdir()
    ref = json.loads((whole / "time_to_win.json").read_text())

    ttw2 = _ttw()
    real = interrupt_at_evaluation(monkeypatch, ttw2, 3)  # Ctrl-C during the third evaluation (at 192 env steps)
    with pytest.raises(KeyboardInterrupt):
        ttw2.main(_tiny(tmp_path, "cut"))
    (cut,) = (tmp_path / "cut").iterdir()
    kept = json.loads((cut / "time_to_win.json").read_text())  # written after every evaluation: two survive
    assert [e["env_steps"] for e in kept["per_seed"]["0"]["evals"]] == [64, 128]
    monkeypatch.setattr(ttw2.GreedyEvaluator, "greedy_win_rate", real)
    assert ttw2.main(["--resume", str(cut)]) == 0  # seeds and evaluation settings come from the run
    got = json.loads((cut / "time_to_win.json").read_text())
    pick = lambda d: [(e["env_steps"], e["greedy_win"]) for e in d["per_seed"]["0"]["evals"]]  # noqa: E731
    assert pick(got) == pick(ref) == [(64, pick(ref)[0][1]), (128, pick(ref)[1][1]), (192, pick(ref)[2][1]),
                                      (256, pick(ref)[3][1])]
    assert got["per_seed"]["0"]["resumed_from"][0]["env_steps"] == 128
    assert got["per_seed"]["0"]["final"]["env_steps"] == 256
    a = torch.load(whole / "seed-0" / "policy.pt", weights_only=False)
    b = torch.load(cut / "seed-0" / "policy.pt", weights_only=False)
    sa, sb = ({**x["net"], **{f"vn.{k}": v for k, v in x["value_norm"].items()}} for x in (a, b))
    assert len(sa) > 5 and sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)  # bit for bit
    assert ttw2.main(["--resume", str(cut)]) == 0  # a finished run: nothing trained again
    assert json.loads((cut / "time_to_win.json").read_text()) == got


def test_resume_refuses_other_settings_and_non_runs(tmp_path):
    ttw = _ttw()
    with pytest.raises(ConfigError, match="written by smac_time_to_win.py"):
        ttw.main(["--resume", str(tmp_path)])
    assert ttw.main(_tiny(tmp_path, "r")) == 0
    (run,) = (tmp_path / "r").iterdir()
    with pytest.raises(ConfigError, match=r"--eval-every 100 differs from the run's 64"):
        ttw.main(["--resume", str(run), "--eval-every", "100"])
    with pytest.raises(ConfigError, match=r"train.lr"):
        ttw.main(["--resume", str(run), "train.lr=0.1"])
    with pytest.raises(SystemExit):
        ttw.main(["--resume", str(run), str(ROOT / "configs/smac/3m-mappo.yaml")])


def test_resume_keeps_a_seed_that_stopped_at_the_target(tmp_path):
    ttw = _ttw()
    args = _tiny(tmp_path, "s") + ["--stop", "--target", "0.0"]  # the first evaluation reaches a target of 0
    assert ttw.main(args) == 0
    (run,) = (tmp_path / "s").iterdir()
    first = json.loads((run / "time_to_win.json").read_text())
    assert [e["env_steps"] for e in first["per_seed"]["0"]["evals"]] == [64] and first["stop"] is True
    assert ttw.main(["--resume", str(run)]) == 0  # not trained on past its stop
    assert json.loads((run / "time_to_win.json").read_text()) == first


# --- fresh-user pass 17: resume keeps finished work, refuses what it cannot honour ------------------------------

@pytest.fixture
def finished_run(tmp_path):
    ttw = _ttw()
    assert ttw.main(_tiny(tmp_path, "f")) == 0
    (run,) = (tmp_path / "f").iterdir()
    return ttw, run


def test_resume_of_a_finished_run_rewrites_nothing(finished_run):
    ttw, run = finished_run
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    json.loads((run / "seed-0" / "train_summary.json").read_text())["final_metrics"]["episode/win"]  # noqa: B018
    res = json.loads((run / "time_to_win.json").read_text())
    res["per_seed"]["0"]["final"] = None  # as if Ctrl-C came between the seed's end and the file's last write
    (run / "time_to_win.json").write_text(json.dumps(res))
    assert ttw.main(["--resume", str(run)]) == 0
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if p.name != "time_to_win.json"} == \
        {p: b for p, b in files.items() if p.name != "time_to_win.json"}  # summary, checkpoint, policy untouched
    assert json.loads((run / "time_to_win.json").read_text()) == json.loads(files[run / "time_to_win.json"])
    assert yaml_seeds(run) == [0]  # the run's config.yaml names the seeds it trains (--seeds 0), not the file's


def yaml_seeds(run):
    import yaml

    return yaml.safe_load((run / "config.yaml").read_text())["seeds"]


def test_resume_refuses_a_lower_budget_and_leaves_the_config(finished_run):
    ttw, run = finished_run
    before = (run / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"the budget 128 is below the 256 env steps the run has already done") as e:
        ttw.main(["--resume", str(run), "train.total_env_steps=128"])
    assert e.value.key == "train.total_env_steps" and (run / "config.yaml").read_text() == before
    with pytest.raises(ConfigError, match=r"command-line override 'train.total_env_steps=abc'"):
        ttw.main(["--resume", str(run), "train.total_env_steps=abc"])
    with pytest.raises(ConfigError, match=r"--stop True differs from the run's False"):
        ttw.main(["--resume", str(run), "--stop"])
    with pytest.raises(ConfigError, match=r"--resume trains the run's seeds \[0\], but --seeds gives \[1\]"):
        ttw.main(["--resume", str(run), "--seeds", "1"])


def test_resume_refuses_missing_paths_files_and_train_runs(finished_run, tmp_path):
    ttw, run = finished_run
    with pytest.raises(ConfigError, match="the run directory does not exist"):
        ttw.main(["--resume", str(tmp_path / "nope")])
    with pytest.raises(ConfigError, match="this is a file, not a run directory"):
        ttw.main(["--resume", str(run / "config.yaml")])
    train_run = tmp_path / "smac-3m-mappo-train-20261204T000000Z-abcdef"
    train_run.mkdir()
    (train_run / "config.yaml").write_text((run / "config.yaml").read_text())
    with pytest.raises(ConfigError, match="a coopsim train run: resume it with coopsim train --resume"):
        ttw.main(["--resume", str(train_run)])
    legacy = tmp_path / "smac-3m-mappo-ttw-20261204T000000Z-abcdef"  # no time_to_win.json: settings unknown
    legacy.mkdir()
    (legacy / "config.yaml").write_text((run / "config.yaml").read_text())
    with pytest.raises(ConfigError, match="evaluation settings are unknown; give --eval-every and --eval-episodes"):
        ttw.main(["--resume", str(legacy)])


@pytest.mark.parametrize("damage, why", [
    ({"per_seed": {"0": 5}}, "per_seed entry '0' is not a seed with a list of evaluations"),
    ({"per_seed": {"1": {"evals": "x"}}}, "per_seed entry '1'"),
    ({"per_seed": {"x": {"evals": []}}}, "per_seed entry 'x'"),
    ({"per_seed": {}, "seeds": "ab"}, "key seeds: invalid value 'ab'"),
    ({"per_seed": {}, "eval_every": 0}, "key eval_every: invalid value 0"),
    ({"per_seed": 5}, "no per_seed mapping"),
    ("{", "cannot be read as JSON"),
])
def test_a_damaged_time_to_win_json_is_one_error(finished_run, damage, why):
    ttw, run = finished_run
    (run / "time_to_win.json").write_text(damage if isinstance(damage, str) else json.dumps(damage))
    with pytest.raises(ConfigError, match="not a time_to_win.json written by smac_time_to_win.py") as e:
        ttw.main(["--resume", str(run)])
    assert why in e.value.message and e.value.file == str(run / "time_to_win.json")
    assert str(run) not in e.value.message  # the path is the error's file, not repeated in its text


@pytest.mark.parametrize("flags, text", [
    (["--eval-every", "0"], "--eval-every: invalid value 0"), (["--eval-every", "-64"], "--eval-every: invalid value -64"),
    (["--seeds", "-1"], "--seeds: invalid value [-1]"), (["--seeds", "3000000000"], "--seeds: invalid value"),
    (["--seeds", "0", "0"], "distinct integer seeds"), (["--eval-episodes", "0"], "--eval-episodes: invalid value 0"),
    (["--eval-episodes", "1000000"], "an integer 1..65536"), (["--eval-seed", "-1"], "--eval-seed: invalid value -1"),
    (["--target", "nan"], "--target: invalid value nan"), (["--target", "2"], "a win rate in [0, 1]"),
    (["--seeds", "x"], "--seeds: invalid int value: 'x'"),
    (["--eval-every", "1.5"], "--eval-every: invalid value '1.5': a whole number of env steps is required"),
    (["--eval-every", "abc"], "--eval-every: invalid value 'abc'"), (["--eval-every", "0e3"], "invalid value 0"),
])
def test_bad_flags_are_refused_before_a_run_directory(tmp_path, capsys, flags, text):
    with pytest.raises(SystemExit) as e:
        _ttw().main(_tiny(tmp_path, "b")[:1] + flags + [f"out_dir={tmp_path / 'b'}"])
    assert e.value.code == 2 and text in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_overrides_after_seeds_and_non_smac_configs(tmp_path):
    ttw = _ttw()
    args = ttw._parse(["configs/smac/3m-mappo.yaml", "--seeds", "0", "1", "train.total_env_steps=64", "a.b=1"])
    assert args.seeds == [0, 1] and args.overrides == ["train.total_env_steps=64", "a.b=1"]
    assert ttw._parse(["--seeds", "3", "configs/smac/3m-mappo.yaml"]).config == "configs/smac/3m-mappo.yaml"
    with pytest.raises(ConfigError, match=r"scenario.id 'mgmapf/line-v0'|not a SMAC map") as e:
        ttw.main([str(ROOT / "configs/ppo/linewalk-mappo.yaml"), "--seeds", "0", f"out_dir={tmp_path}"])
    assert e.value.key == "scenario.id" and list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit):
        ttw.main(["--plot"])
    with pytest.raises(ConfigError, match="--plot needs a run directory written by smac_time_to_win.py"):
        ttw.main(["--plot", str(tmp_path), str(tmp_path / "x.png")])


def test_settings_are_stored_before_the_first_evaluation(tmp_path, monkeypatch):
    ttw = _ttw()

    def interrupted(self, agent):
        raise KeyboardInterrupt

    monkeypatch.setattr(ttw.GreedyEvaluator, "greedy_win_rate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ttw.main(_tiny(tmp_path, "e"))
    (run,) = (tmp_path / "e").iterdir()
    kept = json.loads((run / "time_to_win.json").read_text())
    assert (kept["eval_every"], kept["eval_episodes"], kept["seeds"], kept["per_seed"]) == (64, 2, [0], {})
    monkeypatch.undo()
    assert ttw.main(["--resume", str(run)]) == 0  # the stored settings, not the defaults (50,000 / 256)
    got = json.loads((run / "time_to_win.json").read_text())
    assert [e["env_steps"] for e in got["per_seed"]["0"]["evals"]] == [64, 128, 192, 256]


def test_a_second_resume_while_one_trains_is_refused_in_the_scripts_own_words(finished_run):
    from coopsim.platform.training import run_dir_lock

    ttw, run = finished_run
    with run_dir_lock(run, "smac_time_to_win"):  # as a first --resume holds it while it trains
        with pytest.raises(ConfigError, match="being trained by another smac_time_to_win process right now"):
            ttw.main(["--resume", str(run), "train.total_env_steps=512"])


def test_eval_every_takes_scientific_notation_as_total_env_steps_does():
    from coopsim.errors import int_at_least, int_in_range, whole_number

    assert _ttw()._parse(["configs/smac/3m-mappo.yaml", "--eval-every", "5e5"]).eval_every == 500_000
    assert [whole_number(t) for t in ("2000000", "2e6", "1.5e3", " 64 ", "1.5", "abc", "nan", "inf", "1e400")] == \
        [2_000_000, 2_000_000, 1500, 64, None, None, None, None, None]
    assert int_at_least(1)("2e6") == 2_000_000 and int_in_range(1, 65536)("6.4e1") == 64
