"""`coopsim eval --checkpoint` takes a policy.pt, a checkpoint.pt or a seed dir for the tabular safe learners too."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from coopsim.errors import ConfigError
from coopsim.platform import registry
from coopsim.platform.training import eval_main, train_main

ROOT = Path(__file__).resolve().parents[2]
GRAPH_SAFE = ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"
IQL = ROOT / "configs" / "safety" / "baselines" / "coop-grid4x4-2ag-all-iql-noshield.yaml"
LEARNERS = {"graph_safe-v0": (GRAPH_SAFE, []),
            "safe_baselines/iql-v0": (IQL, []),
            "safe_baselines/lagrangian-v0": (IQL, ["agents.id=safe_baselines/lagrangian-v0"])}


def _eval(cfg: Path, overrides: list[str], checkpoint: Path, out: Path) -> dict:
    run = eval_main(str(cfg), [*overrides, f"out_dir={out}", "seeds=[0]", "episodes=3"], str(checkpoint), progress=False)
    s = json.loads((run / "summary.json").read_text())
    return {k: v for k, v in s.items() if isinstance(v, (int, float)) and "time" not in k and "wall" not in k}


@pytest.mark.parametrize("agent_id", list(LEARNERS))
def test_eval_takes_policy_checkpoint_and_seed_dir_with_identical_metrics(agent_id, tmp_path):
    cfg, overrides = LEARNERS[agent_id]
    run = train_main(str(cfg), [*overrides, f"out_dir={tmp_path / 'train'}", "seeds=[0]", "train.total_env_steps=300",
                                "train.progress=false", "train.tensorboard=false"], None)
    seed_dir = run / "seed-0"
    got = {form: _eval(cfg, overrides, seed_dir / form if form else seed_dir, tmp_path / f"eval-{form or 'dir'}")
           for form in ("policy.pt", "checkpoint.pt", "")}
    assert got["policy.pt"], got
    assert got["policy.pt"] == got["checkpoint.pt"] == got[""], got
    # the three forms restore the same learned state
    agents = []
    for form in ("policy.pt", "checkpoint.pt", ""):
        sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=1, num_agents=2,
                                    constraints=["separation", "resource", "connectivity"])
        a = registry.make_component("agent", agent_id, sc)
        a.load(seed_dir / form if form else seed_dir)
        agents.append(a)
    key = "model" if agent_id == "graph_safe-v0" else "q"
    for a in agents[1:]:
        if key == "model":
            assert np.array_equal(a.model.seen, agents[0].model.seen) and a.episodes == agents[0].episodes > 0
        else:
            assert np.array_equal(a.q, agents[0].q) and a.eps == agents[0].eps
            assert getattr(a, "lam", None) == getattr(agents[0], "lam", None)
    if key == "q":
        assert agents[0].eps < agents[0].params.epsilon  # trained episodes were restored, not a fresh agent


def _agent(agent_id: str, grid: str = "Grid4x4"):
    sc = registry.make_scenario(f"coop_game/{grid}-v0", num_envs=1, num_agents=2,
                                constraints=["separation", "resource", "connectivity"])
    return registry.make_component("agent", agent_id, sc)


@pytest.mark.parametrize("saver,loader", [
    ("graph_safe-v0", "safe_baselines/iql-v0"), ("safe_baselines/iql-v0", "graph_safe-v0"),
    ("safe_baselines/iql-v0", "safe_baselines/lagrangian-v0"), ("safe_baselines/lagrangian-v0", "safe_baselines/iql-v0"),
    ("ppo/mappo-v0", "graph_safe-v0"), ("ppo/mappo-v0", "safe_baselines/iql-v0"),
])
def test_a_file_of_another_agent_is_a_config_error_naming_it(saver, loader, tmp_path):
    path = tmp_path / "policy.pt"
    if saver.startswith("ppo/"):
        from coopsim.platform.trainer import atomic_save

        atomic_save({"format": "coopsim.ppo/1", "params": {}}, path)
    else:
        _agent(saver).save(path)
    with pytest.raises(ConfigError, match="not a .*policy file") as e:
        _agent(loader).load(path)
    assert str(path) in str(e.value)
    with pytest.raises(ConfigError, match="not found"):
        _agent(loader).load(tmp_path / "nothing-here")


def test_other_scenario_sizes_and_legacy_pickles(tmp_path):
    for agent_id in ("graph_safe-v0", "safe_baselines/iql-v0"):
        path = tmp_path / f"{agent_id.replace('/', '_')}.pt"
        _agent(agent_id, "Grid5x5").save(path)
        with pytest.raises(ConfigError, match="shape") as e:
            _agent(agent_id).load(path)
        assert str(path) in str(e.value)
    # a plain-pickle file of the earlier save() still loads
    a = _agent("safe_baselines/iql-v0")
    a.q[0, 0, 0, 0] = 7.0
    with open(tmp_path / "old.pt", "wb") as f:
        pickle.dump({"q": a.q, "eps": 0.5}, f)
    b = _agent("safe_baselines/iql-v0")
    b.load(tmp_path / "old.pt")
    assert b.q[0, 0, 0, 0] == 7.0 and b.eps == 0.5
