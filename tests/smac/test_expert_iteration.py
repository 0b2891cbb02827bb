"""benchmarks/smac_expert_iteration.py: the recorded rows are what the planner played, rounds resume exactly."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from coopsim.errors import ConfigError

from test_best_of_k import _load, _tiny_run  # noqa: E402  (tests/smac is on sys.path under pytest)


def _args(seed_dir, out, *extra):
    return [str(seed_dir), "--out", str(out), "--games", "4", "-k", "1", "-r", "1", "--epochs", "2",
            "--eval-episodes", "4", *extra]


def test_rows_are_the_planners_actions_and_distillation_fits_them(tmp_path):
    ei = _load("smac_expert_iteration")
    rc = _load("smac_rollout_ceiling")
    seed_dir = _tiny_run(tmp_path / "run", "3m-mappo")
    data = ei.Dataset()
    played = rc.rollout_games(seed_dir, games=4, k=1, r=1, reset_seed=3, progress=False, record=data.add(1))
    x, mask, y, rnd = data.arrays()
    # one row per living agent-step, and with one candidate the planner plays the greedy policy: the base actor's
    # argmax over each recorded input and mask gives back the recorded action
    assert len(y) == played["agent_steps"] > 0 and (rnd == 1).all()
    assert mask[np.arange(len(y)), y].all() and (y != 0).all()  # available, and never no-op for a living unit
    cfg_agent = rc.sampling_run(seed_dir, "")[0]
    from coopsim.platform import registry
    env = registry.make_scenario(cfg_agent.scenario.id, num_envs=1, **cfg_agent.scenario_params())
    a = registry.make_component("agent", cfg_agent.agents.id, env, **cfg_agent.agents.params)
    a.load(str(seed_dir / "policy.pt"))
    with torch.no_grad():
        feat, _ = a.net.features(torch.as_tensor(x), None)
        logits = a.net.logits(feat, torch.as_tensor(mask))
        before = float(torch.nn.functional.cross_entropy(logits, torch.as_tensor(y)))
    np.testing.assert_array_equal(logits.argmax(-1).numpy(), y)
    # distillation toward those actions lowers their cross-entropy from the base policy's
    fit = ei.distil(seed_dir, seed_dir / "policy.pt", data, tmp_path / "d" / "policy.pt", epochs=5, lr=1e-3,
                    batch=64, ent_coef=0.0, seed=0)
    assert fit["loss"] < before and (tmp_path / "d" / "policy.pt").is_file()


def test_resume_continues_exactly_and_bad_output_folders_are_refused(tmp_path, capsys):
    ei = _load("smac_expert_iteration")
    seed_dir = _tiny_run(tmp_path / "run", "3m-mappo")
    ei.main(_args(seed_dir, tmp_path / "two", "--rounds", "2"))
    ei.main(_args(seed_dir, tmp_path / "one", "--rounds", "1"))
    ei.main(_args(seed_dir, tmp_path / "one", "--rounds", "2", "--resume"))
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    strip = lambda rows: [{k: v for k, v in r.items() if not k.endswith("_s")} for r in rows]  # noqa: E731
    assert len(two["rounds"]) == 2 and strip(one["rounds"]) == strip(two["rounds"])
    assert (tmp_path / "one" / "round-2" / "seed-0" / "policy.pt").is_file()
    assert (tmp_path / "one" / "round-2" / "config.yaml").is_file()  # other SMAC benchmarks read round-2/seed-0
    assert "round 2: planner" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="exists and is not empty"):
        ei.main(_args(seed_dir, tmp_path / "two", "--rounds", "3"))
    with pytest.raises(ConfigError, match="holds no summary.json"):
        ei.main(_args(seed_dir, tmp_path / "none", "--rounds", "1", "--resume"))
    with pytest.raises(ConfigError, match="--lr nan"):
        ei.main(_args(seed_dir, tmp_path / "x", "--lr", "nan"))
