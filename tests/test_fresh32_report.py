"""Fixes of fresh-user pass 32 (report, platform, SMAC docs): a policy file with the right format tag but missing
or mistyped keys is refused with the file and key named (QMIX, PPO, IMMP loaders; F7); the batched core refuses
bool and float action arrays like the ParallelEnv view (F9); runs of agents that learn during `coopsim run` say their
seeds are not independent, and `report` does not pool a seed across their runs with different seed lists (F10);
comparison rows that pool an interrupted run are marked and compare.csv says so (F3); the generic smac/SMAC-v0 id
(F5); sweep --jobs capped (F13); tiny mean regrets shown as 0 (F13)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from coopsim.errors import ConfigError
from coopsim.platform import registry as reg


# --- F7: a policy file with the right format tag but missing keys -------------------------------------------------

@pytest.fixture(scope="module")
def grid():
    return reg.make_scenario("coop_game/Grid4x4-v0", num_envs=1)


@pytest.mark.parametrize("agent_id,fmt,first_key", [("qmix/qmix-v0", "coopsim.qmix/1", "params"),
                                                     ("ppo/mappo-v0", "coopsim.ppo/1", "params")])
def test_policy_file_missing_keys_is_a_config_error_naming_file_and_key(tmp_path, grid, agent_id, fmt, first_key):
    agent = reg.make_component("agent", agent_id, grid)
    f = tmp_path / "fake.pt"
    torch.save({"format": fmt}, f)
    with pytest.raises(ConfigError) as e:
        agent.load(f)
    assert e.value.file == str(f) and f"lacks key {first_key!r}" in str(e.value)


@pytest.mark.parametrize("agent_id,size_key", [("qmix/qmix-v0", "in_dim"), ("ppo/mappo-v0", "obs_dim")])
def test_policy_file_lacking_a_size_or_weights_key_names_it(tmp_path, grid, agent_id, size_key):
    agent = reg.make_component("agent", agent_id, grid)
    good = agent.checkpoint()
    f = tmp_path / "p.pt"
    for drop in (size_key, "net"):
        torch.save({k: v for k, v in good.items() if k != drop}, f)
        with pytest.raises(ConfigError, match=f"lacks key '{drop}'"):
            agent.load(f)
    torch.save({**good, size_key: True}, f)   # a bool is not a size
    with pytest.raises(ConfigError, match=f"key '{size_key}' holds a bool, expected int"):
        agent.load(f)
    torch.save(good, f)   # the complete file still loads
    agent.load(f)


def test_cli_eval_of_a_qmix_file_without_keys_exits_2_naming_the_key(tmp_path):
    from cli_helpers import _err, run_cli

    f = tmp_path / "fake.pt"
    torch.save({"format": "coopsim.qmix/1", "params": {}}, f)
    err = _err(run_cli("eval", "configs/smac/3m-qmix.yaml", "seeds=[0]", "episodes=1", "--checkpoint", str(f)))
    assert f"{f}: QMIX policy file lacks key 'in_dim'" in err
