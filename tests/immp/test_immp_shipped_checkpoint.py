"""Fresh-user pass 35 (F10): ``checkpoint: shipped`` on the no-intent ablation (``mapf/immp-nointent-v0``) silently
loaded the decentralized-PPO baseline's policy (trained with individual reward and the baselines' high level), and
``mapf/dppo-v0`` with ``shipped-ppo`` got it too. A configuration that no shipped policy matches is now the
ConfigError that ``shipped_checkpoint``'s docstring promised; every shipped config still loads its own file."""
from pathlib import Path

import pytest
import yaml

from coopsim.agents.immp.agent import SHIPPED_BASELINE, SHIPPED_CHECKPOINT, SHIPPED_PPO
from coopsim.errors import ConfigError
from coopsim.platform import registry
from coopsim.platform.config import load_config
from coopsim.scenarios.mapf import MGMAPFCore

SEED1 = SHIPPED_CHECKPOINT.parent / "seed-1"


def _core():
    return MGMAPFCore(1, map="random-32-32-10", num_agents=4, num_goals=2, obs_radius=3, max_steps=64)


@pytest.mark.parametrize("agent_id, params", [
    ("mapf/immp-nointent-v0", {"checkpoint": "shipped"}),
    ("mapf/immp-v0", {"checkpoint": "shipped", "intent": False}),        # the same configuration under IMMP's id
    ("mapf/immp-nointent-v0", {"checkpoint": str(SEED1)}),             # a shipped seed directory
])
def test_no_shipped_policy_for_the_no_intent_ablation(agent_id, params):
    with pytest.raises(ConfigError) as exc:
        registry.make_component("agent", agent_id, _core(), **params)
    msg = str(exc.value)
    assert exc.value.key == "agents.params.checkpoint"
    assert "no shipped policy for mapf/immp-nointent-v0" in msg and "team_weight=0.5" in msg
    assert "coopsim train configs/mapf/immp-train-immp-nointent.yaml" in msg


def test_shipped_ppo_is_only_for_an_agent_with_the_intent_module():
    with pytest.raises(ConfigError, match="'shipped-ppo' is IMMP's shipped policy before its intent module") as exc:
        registry.make_component("agent", "mapf/dppo-v0", _core(), checkpoint="shipped-ppo")
    assert exc.value.key == "agents.params.checkpoint"


@pytest.mark.parametrize("agent_id, params, name", [
    ("mapf/immp-v0", {"checkpoint": "shipped"}, SHIPPED_CHECKPOINT.name),
    ("mapf/immp-v0", {"checkpoint": "shipped-ppo"}, SHIPPED_PPO.name),
    ("mapf/immp-nocong-v0", {"checkpoint": "shipped"}, SHIPPED_CHECKPOINT.name),
    ("mapf/dppo-v0", {"checkpoint": "shipped"}, SHIPPED_BASELINE.name),
    ("mapf/dppo-v0", {"checkpoint": "shipped", "cs_pibt": True}, SHIPPED_BASELINE.name),
    ("mapf/immp-nointent-v0", {"checkpoint": "shipped", "team_weight": 0.0}, SHIPPED_BASELINE.name),
])
def test_the_shipped_policies_still_match_their_configurations(agent_id, params, name):
    agent = registry.make_component("agent", agent_id, _core(), **params)
    assert agent.shipped_checkpoint().name == name


CONFIGS = sorted(p for p in Path("configs/mapf").glob("*.yaml") if "checkpoint: shipped" in p.read_text())


def test_every_shipped_config_under_configs_mapf_still_loads():
    assert len(CONFIGS) == 15
    for path in CONFIGS:
        cfg = load_config(path)                                        # builds and checks the agent's params
        params = dict(yaml.safe_load(path.read_text())["agents"]["params"])
        agent = registry.make_component("agent", cfg.agents.id, _core(), **params)
        want = {"shipped": SHIPPED_BASELINE.name if "dppo" in path.name else SHIPPED_CHECKPOINT.name,
                "shipped-ppo": SHIPPED_PPO.name}[params["checkpoint"]]
        assert agent.shipped_checkpoint().name == want, path
