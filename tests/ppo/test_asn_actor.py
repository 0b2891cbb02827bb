"""PPO's action-semantics actor (``agents.params.actor: asn``, Wang et al. 2020): exact logits, the entity layout
the SMAC core declares, what it refuses, and that it is part of a checkpoint's architecture."""
import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.agents.ppo.networks import ASNActorCritic
from coopsim.errors import ConfigError
from coopsim.platform.registry import make_scenario


def test_smac_entity_layout_is_the_enemy_block():
    core = make_scenario("smac/2s3z-v0", num_envs=1)
    first, n, offset, feats = core.action_entities()
    assert (first, n, offset, feats) == (6, core.n_enemies, 4, core.enemy_feats)
    assert first + n == core.action_space.n
    obs = core.reset(seed=1)
    masks = core.action_masks()
    # the 'attackable' feature (the first of each enemy block) is exactly the attack action's availability
    for j in range(n):
        np.testing.assert_array_equal(obs[0, :, offset + j * feats] > 0, masks[0, :, first + j])


def test_asn_logits_are_the_hand_formula():
    core = make_scenario("smac/3m-v0", num_envs=2, obs_own_cooldown=True)
    obs = core.reset(seed=4)
    torch.manual_seed(0)
    ag = PPOAgent(core, actor="asn", activation="relu", hidden=[16, 8])
    net = ag.net
    assert isinstance(net, ASNActorCritic)
    for p in net.parameters():  # move the small-std heads away from ~0 so the check has numbers to compare
        p.data.normal_(0.0, 0.5)
    x = ag.actor_input(obs.reshape(2, 3, -1), None).reshape(6, -1)
    mask = torch.ones(6, core.action_space.n, dtype=torch.bool)
    got = net.logits(net.features(x, None)[0], mask)
    first, n, offset, feats = core.action_entities()
    relu = torch.relu
    for r in range(6):
        z = x[r]
        for lin in (net.encoder[0], net.encoder[2]):
            z = relu(lin(z))
        want = list(net.pi(z))
        for j in range(n):
            e = x[r, offset + j * feats: offset + (j + 1) * feats]
            e = relu(net.entity[0](e))
            want.append(torch.dot(net.q(z), e))
        assert torch.allclose(got[r], torch.stack(want), atol=1e-5)
    # masked actions are -1e9, as with the MLP actor
    mask[:, 0] = False
    assert (net.logits(net.features(x, None)[0], mask)[:, 0] == -1e9).all()


def test_an_enemy_block_moves_only_its_own_attack_logit_through_the_entity_stream():
    """Changing enemy 1's features with the MLP stream's input weights for that block zeroed changes only
    logit 6 + 1: the attack logit of an enemy is computed from that enemy's own block."""
    core = make_scenario("smac/3m-v0", num_envs=1)
    obs = core.reset(seed=2)
    ag = PPOAgent(core, actor="asn", activation="relu")
    first, n, offset, feats = core.action_entities()
    lo, hi = offset + feats, offset + 2 * feats
    with torch.no_grad():
        ag.net.encoder[0].weight[:, lo:hi] = 0.0
        ag.net.q.weight.normal_(0.0, 0.3)
    x = ag.actor_input(obs.reshape(1, 3, -1), None).reshape(3, -1)
    y = x.clone()
    y[:, lo:hi] += torch.linspace(0.1, 0.5, feats)
    mask = torch.ones(3, core.action_space.n, dtype=torch.bool)
    a, b = ag.net.logits(ag.net.features(x, None)[0], mask), ag.net.logits(ag.net.features(y, None)[0], mask)
    changed = (a - b).abs() > 1e-7
    assert changed[:, first + 1].all() and not changed[:, :first + 1].any() and not changed[:, first + 2:].any()


def test_asn_is_refused_where_it_cannot_apply():
    line = make_scenario("line/LineWalk-v0", num_envs=1)
    with pytest.raises(ConfigError, match="action_entities") as info:
        PPOAgent(line, actor="asn", critic="local")
    assert info.value.key == "agents.params.actor"
    smac = make_scenario("smac/3m-v0", num_envs=1)
    with pytest.raises(ConfigError, match="feed-forward") as info:
        PPOAgent(smac, actor="asn", recurrent=True)
    assert info.value.key == "agents.params.actor"


def test_actor_is_part_of_the_architecture_and_trains(tmp_path):
    core = make_scenario("smac/3m-v0", num_envs=4)
    torch.manual_seed(0)
    ag = PPOAgent(core, actor="asn")
    tr = PPOTrainer(ag, PPOTrainConfig(total_env_steps=10**6, num_envs=4, rollout_steps=16, epochs=1,
                                       minibatches=2, team_reward=True), seed=0)
    before = [p.detach().clone() for p in ag.net.entity.parameters()]
    m = tr.train_iteration()
    assert np.isfinite(m["loss/policy"])
    assert any(not torch.equal(p, q) for p, q in zip(before, ag.net.entity.parameters()))  # the entity stream learns
    ag.save(tmp_path / "asn.pt")
    again = PPOAgent(core, actor="asn")
    again.load(tmp_path / "asn.pt")
    for p, q in zip(ag.net.parameters(), again.net.parameters()):
        assert torch.equal(p, q)
    with pytest.raises(ConfigError, match="actor") as info:
        PPOAgent(core).load(tmp_path / "asn.pt")  # an MLP agent refuses the ASN policy, naming the key
    assert info.value.key == "agents.params.actor"


def test_cross_key_refusal_blames_the_override_that_set_the_other_key():
    """``actor: asn`` in the file with ``agents.params.recurrent=true`` on the command line: the error is addressed
    to that override (the file says recurrent: false), not to the file's actor key."""
    from coopsim.platform.config import blame_override

    smac = make_scenario("smac/3m-v0", num_envs=1)
    with pytest.raises(ConfigError) as info:
        PPOAgent(smac, actor="asn", recurrent=True)
    assert info.value.also == ("agents.params.recurrent",)
    blamed = blame_override(info.value, "c.yaml", ["episodes=2", "agents.params.recurrent=true"])
    assert str(blamed).startswith("command-line override 'agents.params.recurrent=true' (config c.yaml): "
                                  "key 'agents.params.actor': actor 'asn' is feed-forward")
    # an override of the error's own key still wins; no matching override leaves the error as it was
    blamed = blame_override(info.value, "c.yaml", ["agents.params.recurrent=true", "agents.params.actor=asn"])
    assert str(blamed).startswith("command-line override 'agents.params.actor=asn'")
    assert blame_override(info.value, "c.yaml", ["episodes=2"]) is info.value
