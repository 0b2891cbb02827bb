"""PPO's action-semantics actor (``agents.params.actor: asn``, Wang et al. 2020): exact logits, the entity layout
the SMAC core declares, what it refuses, and that it is part of a checkpoint's architecture."""
import numpy as np
import pytest
import torch

from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
from coopsim.agents.ppo.networks import ASNActorCritic
from coopsim.errors import ConfigError
from coopsim.platform.registry import make_scenario

COMM = {"module": "coopsim.agents.ppo.hook_examples:MeanBroadcast", "params": {"width": 4}}


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
    with pytest.raises(ConfigError, match="no comm module") as info:
        PPOAgent(smac, actor="asn", comm=COMM)
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
    """``actor: asn`` in the file with ``agents.params.comm`` on the command line: the error is addressed to that
    override (the file has no comm module), not to the file's actor key."""
    from coopsim.platform.config import blame_override

    smac = make_scenario("smac/3m-v0", num_envs=1)
    with pytest.raises(ConfigError) as info:
        PPOAgent(smac, actor="asn", comm=COMM)
    assert info.value.also == ("agents.params.comm",)
    over = "agents.params.comm.module=coopsim.agents.ppo.hook_examples:MeanBroadcast"
    blamed = blame_override(info.value, "c.yaml", ["episodes=2", over])
    assert str(blamed).startswith(f"command-line override '{over}' (config c.yaml): "
                                  "key 'agents.params.actor': actor 'asn' takes no comm module")
    # an override of the error's own key still wins; no matching override leaves the error as it was
    blamed = blame_override(info.value, "c.yaml", [over, "agents.params.actor=asn"])
    assert str(blamed).startswith("command-line override 'agents.params.actor=asn'")
    assert blame_override(info.value, "c.yaml", ["episodes=2"]) is info.value


def test_recurrent_asn_is_the_hand_formula_over_a_gru_and_its_sequence_pass_matches_the_steps():
    """``actor: asn`` with ``recurrent: true``: ``z`` is the GRU's output over the encoder, the attack logits
    ``(Q z) . e_j`` with feed-forward entity embeddings; the training pass over a sequence (``features_seq``, state
    zeroed where an episode starts) gives exactly the logits of stepping one observation at a time."""
    core = make_scenario("smac/3m-v0", num_envs=2, obs_own_cooldown=True)
    torch.manual_seed(1)
    ag = PPOAgent(core, actor="asn", activation="relu", hidden=[16, 8], recurrent=True)
    net = ag.net
    assert isinstance(net, ASNActorCritic) and net.recurrent
    for p in net.parameters():
        p.data.normal_(0.0, 0.5)
    first, n, offset, feats = core.action_entities()
    A = core.action_space.n
    mask = torch.ones(6, A, dtype=torch.bool)
    xs, obs = [], core.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        xs.append(ag.actor_input(obs.reshape(2, 3, -1), None).reshape(6, -1))
        m = core.action_masks().reshape(6, A)
        act = np.array([rng.choice(np.flatnonzero(r)) for r in m]).reshape(2, 3)
        obs = core.step(act).obs
    x = torch.stack(xs)  # [L=5, B=6, in]
    starts = torch.zeros(5, 6, dtype=torch.bool)
    starts[3, :3] = True  # env 0's agents start an episode at step 3: their state restarts from zero
    h = torch.zeros(6, net.feature_dim)
    hh = torch.zeros(net.feature_dim)  # row 0's state, by hand
    stepped = []
    for t in range(5):
        h = h * (~starts[t]).unsqueeze(-1).float()
        feat, h = net.features(x[t], h)
        stepped.append(net.logits(feat, mask))
        # hand formula for row 0 at this step
        z = relu_mlp(net, x[t, 0])
        hh = gru_cell(net.gru, z, hh * (0.0 if starts[t, 0] else 1.0))
        want = list(net.pi(hh))
        for j in range(n):
            e = torch.relu(net.entity[0](x[t, 0, offset + j * feats: offset + (j + 1) * feats]))
            want.append(torch.dot(net.q(hh), e))
        assert torch.allclose(stepped[-1][0], torch.stack(want), atol=1e-5)
    seq = net.logits(net.features_seq(x, torch.zeros(6, net.feature_dim), starts), mask.expand(5, 6, A))
    assert torch.allclose(seq, torch.stack(stepped), atol=1e-5)
    # the restart matters: without it env 0's logits after step 3 differ
    other = net.logits(net.features_seq(x, torch.zeros(6, net.feature_dim), torch.zeros_like(starts)), mask.expand(5, 6, A))
    assert not torch.allclose(other[3:, :3], seq[3:, :3], atol=1e-4)
    assert torch.allclose(other[:3], seq[:3], atol=1e-6)


def relu_mlp(net, x):
    z = x
    for lin in (net.encoder[0], net.encoder[2]):
        z = torch.relu(lin(z))
    return z


def gru_cell(gru, x, h):
    """torch.nn.GRU's documented equations (r, z, n gates), one step, one row."""
    W, U, b, c = gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0
    gi, gh = W @ x + b, U @ h + c
    H = gru.hidden_size
    r = torch.sigmoid(gi[:H] + gh[:H])
    u = torch.sigmoid(gi[H:2 * H] + gh[H:2 * H])
    nn_ = torch.tanh(gi[2 * H:] + r * gh[2 * H:])
    return (1 - u) * nn_ + u * h


def test_recurrent_asn_trains_acts_and_its_recurrence_is_part_of_the_architecture(tmp_path):
    core = make_scenario("smac/3m-v0", num_envs=4)
    torch.manual_seed(0)
    ag = PPOAgent(core, actor="asn", recurrent=True)
    tr = PPOTrainer(ag, PPOTrainConfig(total_env_steps=10**6, num_envs=4, rollout_steps=16, epochs=1,
                                       minibatches=2, team_reward=True), seed=0)
    before = [p.detach().clone() for p in ag.net.gru.parameters()]
    m = tr.train_iteration()
    assert np.isfinite(m["loss/policy"])
    assert any(not torch.equal(p, q) for p, q in zip(before, ag.net.gru.parameters()))  # the GRU learns
    ag.save(tmp_path / "rasn.pt")
    with pytest.raises(ConfigError, match="recurrent") as info:
        PPOAgent(core, actor="asn").load(tmp_path / "rasn.pt")
    assert info.value.key == "agents.params.recurrent"
    again = PPOAgent(core, actor="asn", recurrent=True)
    again.load(tmp_path / "rasn.pt")
    obs = core.reset(seed=0)
    again.reset(0)
    acts, _ = again.act(obs)
    assert acts.shape == (4, 3) and core.action_masks()[np.arange(4)[:, None], np.arange(3), acts].all()
    assert again._h.abs().sum() > 0  # acting carries the GRU state to the next step
