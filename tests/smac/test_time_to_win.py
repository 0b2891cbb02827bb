"""benchmarks/smac_time_to_win.py: the greedy evaluation works for PPO and QMIX configs and refuses other learners."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config
from coopsim.platform.training import build_trainer

ROOT = Path(__file__).resolve().parents[2]


def _ttw():
    spec = importlib.util.spec_from_file_location("smac_time_to_win", ROOT / "benchmarks" / "smac_time_to_win.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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


def test_resume_after_an_interrupt_matches_an_uninterrupted_run(tmp_path, monkeypatch):
    import torch

    ttw = _ttw()
    assert ttw.main(_tiny(tmp_path, "whole")) == 0
    (whole,) = (tmp_path / "whole").iterdir()
    ref = json.loads((whole / "time_to_win.json").read_text())

    ttw2 = _ttw()
    real = ttw2.GreedyEvaluator.greedy_win_rate
    calls = {"n": 0}

    def interrupted(self, agent):  # Ctrl-C during the third evaluation (at 192 env steps)
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, agent)

    monkeypatch.setattr(ttw2.GreedyEvaluator, "greedy_win_rate", interrupted)
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
