"""DDACOM message generation (coopsim.agents.ddacom.generator): counterfactual arithmetic, masking of dropped
copies, decoupling from the action policy, and the trainer's comm-hook wiring."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from coopsim.agents.ddacom.generator import DDACOMGenerator, MessageReceiver
from coopsim.agents.ppo.agent import MAPPO
from coopsim.agents.ppo.config import PPOTrainConfig
from coopsim.agents.ppo.trainer import PPOTrainer
from coopsim.comm.ideal import IdealChannel
from coopsim.platform.comm import DEFAULT_HEADER_BYTES
from coopsim.platform.hooks import HookContext
from coopsim.platform.registry import make_component, make_scenario

GEN = "coopsim.agents.ddacom.generator:DDACOMGenerator"


def tiny_receiver(seed=0):
    torch.manual_seed(seed)
    return MessageReceiver(obs_dim=3, payload_dim=2, num_agents=3, hidden=4, attn_dim=2, value_dim=2).double()


def test_marginal_value_equals_value_with_minus_value_without():
    rec = tiny_receiver()
    g = torch.Generator().manual_seed(1)
    B, N = 6, 3
    obs = torch.randn(B, 3, generator=g, dtype=torch.float64)
    pay = torch.randn(B, N, 2, generator=g, dtype=torch.float64)
    present = torch.tensor([[0, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    cf = rec.counterfactual(obs, pay, present)
    for b in range(B):
        for j in range(N):
            if not present[b, j]:
                assert cf["delta"][b, j] == 0.0 and cf["alpha"][b, j] == 0.0
                continue
            # "without j": the copy removed from the receiver's input altogether (a garbage row, masked out)
            p2, m2 = pay.clone(), present.clone()
            p2[b, j], m2[b, j] = 1e6, False
            v_wo = rec.value(obs[b:b + 1], p2[b:b + 1], m2[b:b + 1])[0][0]
            assert torch.isclose(cf["v_without"][b, j], v_wo, rtol=0, atol=1e-12)
            assert torch.isclose(cf["delta"][b, j], cf["v_with"][b] - v_wo, rtol=0, atol=1e-12)
    # the null slot takes the rest of the attention; an empty inbox gives z = 0 and V = V(o, {})
    assert torch.all(cf["alpha"].sum(1) < 1.0)
    z, alpha, _ = rec.attend(obs, pay, torch.zeros(B, N, dtype=torch.bool))
    assert torch.equal(z, torch.zeros_like(z)) and torch.equal(alpha, torch.zeros_like(alpha))


def test_value_by_hand_for_one_copy():
    """One delivered copy: alpha = sigmoid(s - b_null), z = alpha * v_j, V = head([h, z]) -- computed by hand."""
    rec = tiny_receiver(3)
    obs = torch.tensor([[0.3, -0.2, 0.5]], dtype=torch.float64)
    pay = torch.tensor([[[9.0, 9.0], [0.4, -0.7], [9.0, 9.0]]], dtype=torch.float64)
    present = torch.tensor([[False, True, False]])
    with torch.no_grad():
        hid = torch.tanh(rec.h[0](obs))
        x = torch.cat([pay[0, 1], torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)])
        s = rec.k(x) @ rec.q(hid)[0] / np.sqrt(2)
        a = torch.sigmoid(s - rec.null)
        z = a * rec.v(x)
        v = rec.head(torch.cat([hid[0], z]))[0]
        got_v, got_a = rec.value(obs, pay, present)
    assert torch.isclose(got_a[0, 1], a, atol=1e-12) and torch.isclose(got_v[0], v, atol=1e-12)


def make_gen(sender="broadcast", E=2, N=3, D=4, **kw):
    torch.manual_seed(0)
    gen = DDACOMGenerator(sender=sender, payload_dim=2, hidden=8, attn_dim=4, value_dim=3, **kw)
    gen.setup(HookContext(obs_dim=D, feature_dim=8, num_agents=N, num_actions=5, state_dim=0, num_envs=E, dt_s=0.1, seed=0))
    return gen


def test_dropped_copies_are_absent_at_the_receiver():
    E, N, D = 2, 3, 4
    gen = make_gen(E=E, N=N, D=D)
    obs = np.random.default_rng(0).standard_normal((E, N, D)).astype(np.float32)
    out = gen.messages(torch.zeros(E, N, 8), np.ones((E, N), bool), 0, 0.1, obs=obs)
    assert len(out) == E * N * (N - 1)  # full broadcast: one unicast copy per teammate
    assert out.size_bytes()[0] == 2 * 4 + DEFAULT_HEADER_BYTES
    with torch.no_grad():
        np.testing.assert_allclose(out.payload, gen.encode(torch.as_tensor(obs))[out.env, out.src].numpy(), atol=1e-7)
    keep = np.arange(len(out)) % 3 != 0  # the channel dropped every third copy
    got = gen.receive(out.select(keep), E, N, obs=obs)
    payload, present, sobs = gen.dense(out.select(keep), E, N)
    exp_present = np.zeros((E, N, N), bool)
    exp_present[out.env[keep], out.dst[keep], out.src[keep]] = True
    np.testing.assert_array_equal(present, exp_present)
    np.testing.assert_array_equal(sobs[present], obs[np.nonzero(present)[0], np.nonzero(present)[2]])
    with torch.no_grad():
        z, _, _ = gen.receiver.attend(torch.as_tensor(obs).reshape(-1, D), torch.as_tensor(payload).reshape(-1, N, 2),
                                      torch.as_tensor(exp_present).reshape(-1, N))
        # dropped copies carry no weight: scrambling their payload rows changes nothing
        scrambled = torch.as_tensor(payload).reshape(-1, N, 2).clone()
        scrambled[~torch.as_tensor(exp_present).reshape(-1, N)] = 123.0
        z2, _, _ = gen.receiver.attend(torch.as_tensor(obs).reshape(-1, D), scrambled, torch.as_tensor(exp_present).reshape(-1, N))
    np.testing.assert_allclose(got[..., :3], z.numpy().reshape(E, N, 3), atol=1e-6)
    assert torch.equal(z, z2)
    np.testing.assert_allclose(got[..., 3], exp_present.sum(-1) / (N - 1))


def test_policy_reads_slots_gives_each_senders_payload_and_zero_where_dropped():
    """``policy_reads: slots``: the policy reads [N * P] payloads (sender slot j's copy at j * P, zeros where none
    arrived) and N present flags; the receiver's records for training are the same as with attention."""
    E, N, D = 2, 3, 4
    gen = make_gen(E=E, N=N, D=D, policy_reads="slots")
    assert gen.input_dim == N * 2 + N
    obs = np.random.default_rng(1).standard_normal((E, N, D)).astype(np.float32)
    out = gen.messages(torch.zeros(E, N, 8), np.ones((E, N), bool), 0, 0.1, obs=obs)
    keep = np.arange(len(out)) % 4 != 1
    got = gen.receive(out.select(keep), E, N, obs=obs)
    assert got.shape == (E, N, N * 2 + N) and got.dtype == np.float32
    with torch.no_grad():
        pay = gen.encode(torch.as_tensor(obs)).numpy()
    want = np.zeros((E, N, N, 2), np.float32)
    flags = np.zeros((E, N, N), np.float32)
    for e, src, dst in zip(out.env[keep], out.src[keep], out.dst[keep]):
        want[e, dst, src], flags[e, dst, src] = pay[e, src], 1.0
    np.testing.assert_allclose(got[..., :N * 2], want.reshape(E, N, N * 2), atol=1e-7)
    np.testing.assert_array_equal(got[..., N * 2:], flags)
    assert flags.sum() == keep.sum() and (flags[:, np.arange(N), np.arange(N)] == 0).all()  # no copy to oneself
    assert gen._records[-1]["present"].sum() == keep.sum()


def test_update_rejects_a_rollout_that_does_not_match_the_receive_calls():
    gen = make_gen()
    from coopsim.platform.hooks import RolloutBatch

    z = torch.zeros(2, 2, 3, 4)
    batch = RolloutBatch(obs=z, next_obs=z, actions=torch.zeros(2, 2, 3, dtype=torch.long), rewards=torch.zeros(2, 2, 3),
                         alive=torch.ones(2, 2, 3, dtype=torch.bool), dones=torch.zeros(2, 2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="receive"):
        gen.update(batch)


def trainer(epochs, sender="ddacom", channel="markov", E=4):
    core = make_scenario("mpe/simple_spread-v0", num_envs=E, num_agents=3, obs_radius_m=0.5)
    torch.manual_seed(0)
    ag = MAPPO(core, hidden=[16], comm={"module": GEN, "params": {"sender": sender, "epochs": epochs, "hidden": 8,
                                                                      "lr": 1e-2}})
    ch = IdealChannel() if channel == "ideal" else make_component(
        "channel", "bandwidth-v0", trace={"kind": "constant", "rate": 7680.0}, queue_packets=4, latency_bound_s=0.1)
    cfg = PPOTrainConfig(total_env_steps=10_000, num_envs=E, rollout_steps=10, epochs=2, minibatches=2,
                         tensorboard=False, progress=False)
    return PPOTrainer(ag, cfg, seed=0, channel=ch), ch


def params(m):
    return [p.detach().clone() for p in m.parameters()]


def test_policy_gradients_do_not_reach_the_encoder():
    tr, _ = trainer(epochs=0)
    gen = tr.agent.comm
    ppo_params = {id(p) for g in tr.optimizer.param_groups for p in g["params"]}
    assert not any(id(p) in ppo_params for p in gen.parameters())  # left out of the policy's optimizer
    enc0, rec0, pol0 = params(gen.encoder), params(gen.receiver), params(tr.net)
    stats = tr.train_iteration()
    assert all(torch.equal(a, b) for a, b in zip(enc0, params(gen.encoder)))  # PPO's update left them alone
    assert all(torch.equal(a, b) for a, b in zip(rec0, params(gen.receiver)))
    assert any(not torch.equal(a, b) for a, b in zip(pol0, params(tr.net)))  # while the policy did learn
    assert all(p.grad is None for p in gen.encoder.parameters())
    assert stats["comm/delivered_per_receiver"] > 0  # messages did reach the policy's input


def test_encoder_trains_on_its_own_signal_and_the_probe_gets_feedback():
    tr, ch = trainer(epochs=2)
    gen = tr.agent.comm
    enc0 = params(gen.encoder)
    est0 = gen.sender.s.probe.estimate_bps.copy()
    stats = tr.train_iteration()
    assert any(not torch.equal(a, b) for a, b in zip(enc0, params(gen.encoder)))
    assert {"comm/loss_encoder", "comm/marginal_value", "comm/attention_on_messages"} <= set(stats)
    assert not np.array_equal(est0, gen.sender.s.probe.estimate_bps)  # delivery feedback reached DDACOM's probe
    s = ch.stats()
    # 7680 bit/s = 1.6 copies of 60 B per step and sender, below full broadcast (2): DDACOM's sender offers less
    assert 0 < s["comm/delivered_copies"] <= s["comm/offered_copies"] < 10 * 4 * 3 * 2


@pytest.mark.parametrize("objective", ["value", "error"])
def test_marginal_gain_by_removing_each_copy(objective):
    """The encoder's credit per copy: with ``cf_objective: value`` the change of the receiver's value estimate, with
    ``error`` the reduction of its squared value error, each computed here by removing the copy; 0 where absent."""
    E, N, D = 2, 3, 4
    gen = make_gen(E=E, N=N, D=D, cf_objective=objective)
    g = torch.Generator().manual_seed(3)
    obs, pay = torch.randn(5, D, generator=g), torch.randn(5, N, 2, generator=g)
    present = torch.tensor([[1, 1, 0], [0, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 1]], dtype=torch.bool)
    target = torch.randn(5, generator=g)
    cf = gen.receiver.counterfactual(obs, pay, present)
    gain = gen.marginal_gain(cf, target)
    with torch.no_grad():
        v_with, _ = gen.receiver.value(obs, pay, present)
        for b in range(5):
            for j in range(N):
                if not present[b, j]:
                    assert gain[b, j] == 0
                    continue
                without = present[b:b + 1].clone()
                without[0, j] = False
                v_wo, _ = gen.receiver.value(obs[b:b + 1], pay[b:b + 1], without)
                want = (v_with[b] - v_wo[0] if objective == "value"
                        else (v_wo[0] - target[b]) ** 2 - (v_with[b] - target[b]) ** 2)
                assert torch.isclose(gain[b, j], want, atol=1e-6), (b, j)
    with pytest.raises(ValueError):
        DDACOMGenerator(cf_objective="flattery")


def test_hold_inbox_keeps_each_senders_last_copy_until_the_episode_ends():
    """``inbox: hold``: a receiver reads each sender's last copy of the episode (a newer one replaces it); the
    envs that start an episode (``new_episode``) drop theirs, the others keep them; ``step`` reads only this step's."""
    E, N, D = 2, 3, 4
    hold = make_gen(E=E, N=N, D=D, inbox="hold", policy_reads="slots")
    step = make_gen(E=E, N=N, D=D, policy_reads="slots")
    rng = np.random.default_rng(4)
    o1, o2 = (rng.standard_normal((E, N, D)).astype(np.float32) for _ in range(2))
    out1 = hold.messages(torch.zeros(E, N, 8), np.ones((E, N), bool), 0, 0.1, obs=o1)
    with torch.no_grad():
        p1, p2 = (hold.encode(torch.as_tensor(o)).numpy() for o in (o1, o2))
    first = (out1.src == 0) & (out1.dst == 1)  # only sender 0 -> receiver 1 arrives, in both envs
    got = hold.receive(out1.select(first), E, N, obs=o1)
    np.testing.assert_allclose(got[:, 1, 0:2], p1[:, 0], atol=1e-7)
    got = hold.receive(out1.select(np.zeros(len(out1), bool)), E, N, obs=o1)  # nothing arrives: still held
    np.testing.assert_allclose(got[:, 1, 0:2], p1[:, 0], atol=1e-7)
    assert got[:, 1, N * 2:].tolist() == [[1, 0, 0]] * E and (got[:, [0, 2]] == 0).all()
    assert step.receive(out1.select(np.zeros(len(out1), bool)), E, N, obs=o1).sum() == 0  # step: nothing
    out2 = hold.messages(torch.zeros(E, N, 8), np.ones((E, N), bool), 1, 0.1, obs=o2)
    newer = (out2.src == 0) & (out2.dst == 1) & (out2.env == 0)
    got = hold.receive(out2.select(newer), E, N, obs=o2)
    np.testing.assert_allclose(got[0, 1, 0:2], p2[0, 0], atol=1e-7)  # replaced in env 0
    np.testing.assert_allclose(got[1, 1, 0:2], p1[1, 0], atol=1e-7)  # kept in env 1
    assert hold._records[-1]["present"][:, 1, 0].all()  # the encoder trains on what the receiver read
    hold.new_episode(np.array([1]))
    got = hold.receive(out2.select(np.zeros(len(out2), bool)), E, N, obs=o2)
    np.testing.assert_allclose(got[0, 1, 0:2], p2[0, 0], atol=1e-7)
    assert (got[1] == 0).all()  # env 1 started an episode: nothing held
    step.new_episode(None)  # a no-op with inbox: step


def test_an_unchanged_payload_is_not_resent_after_hearing_the_receiver():
    """DDACOM's sender over payloads with ``min_deviation_m``: a copy goes once; hearing the receiver's own payload
    does not make the sender believe the receiver holds something else (before, it resent every step); a new
    episode (``inbox: hold``) sends it again."""
    E, N, D = 1, 2, 4
    gen = make_gen(sender="ddacom", E=E, N=N, D=D, inbox="hold",
                   sender_params={"min_deviation_m": 1e-6, "initial_rate_frac": 1.0})
    obs = np.random.default_rng(5).standard_normal((E, N, D)).astype(np.float32)
    sent = []
    for t in range(4):
        out = gen.messages(torch.zeros(E, N, 8), np.ones((E, N), bool), t, 0.1, obs=obs)
        sent.append(len(out))
        gen.receive(out, E, N, obs=obs)  # every copy arrives
    assert sent == [2, 0, 0, 0]
    gen.new_episode(None)
    assert len(gen.messages(torch.zeros(E, N, 8), np.ones((E, N), bool), 4, 0.1, obs=obs)) == 2


def test_the_trainer_tells_the_comm_module_which_envs_start_an_episode(monkeypatch):
    tr, _ = trainer(epochs=0, channel="ideal")
    calls = []
    monkeypatch.setattr(tr.agent.comm, "new_episode", lambda ids: calls.append(np.asarray(ids).tolist()), raising=False)
    for _ in range(3):  # 3 rollouts of 10 steps: the 25-step episodes of all 4 envs end once
        tr.train_iteration()
    assert calls == [[0, 1, 2, 3]]


@pytest.mark.parametrize("inbox", ["step", "hold"])
def test_a_resumed_trainer_continues_exactly(inbox, monkeypatch):
    """A checkpoint taken mid-run and loaded into a fresh trainer continues exactly as the run that went on: the
    generator's sender state, held copies and rollout records travel in the checkpoint (fresh29b #1: they did not,
    so a resumed DDACOM run sent other copies from its first iteration on)."""
    import io

    def make():
        tr, _ = trainer(epochs=1)
        tr.agent.comm.p = tr.agent.comm.p.model_copy(update={"inbox": inbox})
        return tr

    a = make()
    for _ in range(3):
        stats_a = a.train_iteration()
    b = make()
    for _ in range(2):
        b.train_iteration()
    buf = io.BytesIO()
    torch.save(b.state_dict(), buf)
    c = make()
    buf.seek(0)
    c.load_state_dict(torch.load(buf, weights_only=False))
    stats_c = c.train_iteration()
    assert stats_c["comm/delivered_per_receiver"] == stats_a["comm/delivered_per_receiver"]
    assert stats_c["loss/policy"] == stats_a["loss/policy"]
    for x, y in zip(params(a.agent.comm), params(c.agent.comm)):
        assert torch.equal(x, y)
    np.testing.assert_array_equal(a.agent.comm.sender.s.probe.estimate_bps, c.agent.comm.sender.s.probe.estimate_bps)
