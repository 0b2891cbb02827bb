import numpy as np
import pytest

from coopsim.agents.comm_baselines.senders import BroadcastSender, NoveltySender, PeriodicSender
from coopsim.agents.ddacom.evaluate import run
from coopsim.agents.ddacom.sender import DDACOMSender
from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.oracle import safe_rate_oracle, utilization
from coopsim.platform.comm import Feedback, MessageBatch
from coopsim.platform.registry import make_component, make_scenario

E, N, K = 2, 3, 6
COPY = 40
DEMAND = (1 + N) * (N - 1) * COPY * 8 / 0.1  # 25600 bit/s


def setup(sender):
    sender.reset(E, N, K, 0.1, COPY, DEMAND)
    values = np.zeros((E, N, K, 2))
    values[..., 0] = np.arange(K)  # entity k at (k, 0)
    valid = np.ones((E, N, K), bool)
    return values, valid


def test_broadcast_periodic_novelty_masks():
    b = BroadcastSender()
    v, ok = setup(b)
    ok[0, 1, 2] = False
    m = b.select(0, v, ok)
    assert m.sum() == (E * N * K - 1) * (N - 1) and not m[:, np.arange(N), :, np.arange(N)].any()
    p = PeriodicSender(period_steps=3)
    setup(p)
    for t in range(6):
        sent_by = p.select(t, v, np.ones_like(ok)).any(axis=(0, 2, 3))
        assert sent_by.tolist() == [(t - i) % 3 == 0 for i in range(N)]
    nv = NoveltySender(threshold_m=0.5)
    setup(nv)
    m0 = nv.select(0, v, np.ones_like(ok))
    nv.commit(m0, v)
    v2 = v.copy()
    v2[0, 0, 4, 1] += 0.6  # entity 4 moved 0.6 m for sender 0 of env 0
    v2[0, 0, 5, 1] += 0.4  # below the threshold
    m1 = nv.select(1, v2, np.ones_like(ok))
    assert m1.sum() == N - 1 and m1[0, 0, 4, 1:].all()


def test_ddacom_budget_is_the_token_bucket_and_ranking_prefers_unknown_info():
    d = DDACOMSender(initial_rate_frac=0.25)  # 6400 bit/s = 800 bytes per step = 2 copies of 40 B... per 0.1 s
    v, ok = setup(d)
    m = d.select(0, v, ok)
    per_sender = m.sum(axis=(2, 3))
    assert (per_sender == 2).all()  # floor(6400 * 0.1 / 320) = 2 copies per step
    d.commit(m, v)
    # what was sent is now the teammate's info: the next top-ranked copies are other (entity, receiver) pairs
    m2 = d.select(1, v, ok)
    assert not (m & m2).any() and (m2.sum(axis=(2, 3)) == 2).all()
    # a teammate told me entity 5's value: that copy ranks below never-shared ones
    d.on_receive(MessageBatch(np.array([0], np.int32), np.array([1], np.int32), np.array([0], np.int32),
                              np.array([[5, 5.0, 0.0]], np.float32), np.array([0.1])))
    score, team = d.score(v, ok)
    assert team[0, 0, 5, 1] == 0.0 and score[0, 0, 5, 1] < score[0, 0, 3, 1]


@pytest.mark.parametrize("resend", [False, True])
def test_ddacom_resend_lost_ranks_copies_of_a_lossy_report_as_unknown(resend):
    d = DDACOMSender(initial_rate_frac=1.0, resend_lost=resend)  # the whole demand: every copy goes at step 0
    v, ok = setup(d)
    ok[..., 4:] = False  # 4 candidates x 2 teammates = the 8 copies of full-broadcast demand per sender
    m0 = d.select(0, v, ok)
    d.commit(m0, v)
    assert m0.sum() == E * N * 4 * (N - 1)
    # env 0, sender 1 is told of one lost copy (which one is not said); every other sender of a clean report
    lost = np.zeros((E, N), np.int64)
    lost[0, 1] = 1
    d.on_feedback(Feedback(np.full((E, N), 4) - lost, lost, np.full((E, N), 160) - 40 * lost, 40 * lost))
    _, team = d.score(v, ok)
    unknown = np.isinf(team) & (team > 0)
    if resend:  # all of sender 1's copies of env 0 count as not held, no other sender's
        assert unknown[0, 1, :4][:, [0, 2]].all() and unknown.sum() == 4 * (N - 1)
    else:
        assert not unknown.any()
    # teammate 2 tells sender 1 (env 0) entity 3: teammate 2 holds it again, the others stay in doubt
    d.on_receive(MessageBatch(np.array([0], np.int32), np.array([2], np.int32), np.array([1], np.int32),
                              np.array([[3, 3.0, 0.0]], np.float32), np.array([0.1])))
    _, team = d.score(v, ok)
    assert team[0, 1, 3, 2] == 0.0 and np.isinf(team[0, 1, 3, 0]) == resend
    # the doubted copies rank first (the budget, lowered by the loss, is filled with them), and a copy sent again
    # is held again
    doubted = np.isinf(team) & (team > 0)
    m1 = d.select(1, v, ok)
    d.commit(m1, v)
    if resend:
        assert m1[0, 1].sum() >= 1 and not (m1[0, 1] & ~doubted[0, 1]).any()
        _, team = d.score(v, ok)
        assert (np.isinf(team) & (team > 0)).sum() == doubted.sum() - m1[0, 1].sum()


def test_ddacom_rate_follows_feedback():
    d = DDACOMSender(initial_rate_frac=0.5, hold_steps=0)
    v, ok = setup(d)
    before = d.select(0, v, ok).sum(axis=(2, 3))
    assert (before == 4).all()
    # feedback: 2 of 4 copies lost at the estimate, 2 delivered -> estimate at most the delivered 6400 bit/s
    fb = Feedback(np.full((E, N), 2), np.full((E, N), 2), np.full((E, N), 80), np.full((E, N), 80))
    d.on_feedback(fb)
    assert np.allclose(d.probe.estimate_bps, 6400)
    after = d.select(1, v, ok).sum(axis=(2, 3))
    assert (after == 2).all()


def test_oracle_safe_rate_on_constant_and_step_traces():
    ch = BandwidthChannel(trace={"kind": "step", "high": 16000, "low": 6400, "drop_at_s": 3.0, "recover_at_s": 6.0},
                          latency_bound_s=0.1, queue_packets=16)
    ch.reset(0, num_envs=1, num_agents=3, dt_s=0.1)
    grid = np.arange(1000, 30001, 100)
    safe = safe_rate_oracle(ch, 90, COPY, grid)[:, 0]
    # 16000 bit/s serves exactly 5 copies of 320 bits per step, 6400 exactly 2. A constant-rate source a
    # little above that sends an extra copy only every few steps (its bucket gains rate - capacity per
    # step), so a 10-step window may still be loss-free up to one copy per window above capacity.
    assert ((safe[:20] >= 16000) & (safe[:20] < 16000 + 3200 / 10 + 100)).all()  # windows before the drop
    assert ((safe[30:51] >= 6400) & (safe[30:51] < 6400 + 3200 / 10 + 100)).all()  # windows inside it
    assert ((safe[60:80] >= 16000) & (safe[60:80] < 16000 + 3200 / 10 + 100)).all()
    assert (safe[21:30] < 16000).all()  # windows reaching into the drop
    assert utilization(np.full((90, 1), 3 * 1600.0), np.full((90, 1), 16000.0), 25600, 3, 0.1) == pytest.approx(1.0)


def test_oracle_sweeps_in_blocks_when_envs_times_grid_exceed_the_capacity_table(monkeypatch):
    """The sweep runs its rates in blocks whose capacity tables fit the channel's limit: the same safe rates as one
    block, and many envs times a fine grid (issue 6's evaluation at --num-envs 128) no longer trip horizon_steps."""
    import coopsim.comm.oracle as oracle

    ch = BandwidthChannel(trace={"kind": "markov", "levels": [3000, 8000, 16000], "switch_prob": 0.1},
                          latency_bound_s=0.1, queue_packets=16)
    ch.reset(3, num_envs=4, num_agents=3, dt_s=0.1)
    grid = np.arange(1000, 20001, 500)
    whole = safe_rate_oracle(ch, 60, COPY, grid)
    monkeypatch.setattr(oracle, "CAPACITY_VALUES_MAX", 61 * 4 * 3 * 7)  # blocks of 7 of the 39 rates
    np.testing.assert_array_equal(safe_rate_oracle(ch, 60, COPY, grid), whole)
    monkeypatch.undo()
    big = BandwidthChannel(trace={"kind": "constant", "rate": 16000}, latency_bound_s=0.1, queue_packets=16)
    big.reset(0, num_envs=128, num_agents=3, dt_s=0.1)  # 4096 x 128 x 100 x 3 values would be 1.2 GiB
    safe = safe_rate_oracle(big, 20, COPY, np.linspace(0.01, 1.0, 100) * 32000)
    assert safe.shape == (20, 128) and (safe >= 16000 - 320).all() and (safe <= 16000 + 640).all()


def test_broadcast_beats_no_comm_under_partial_observation():
    kw = dict(num_agents=3, obs_radius_m=0.5, num_envs=8, episodes=2, seed=0, oracle=False)
    r_none = run("none", "ideal-v0", {}, **kw)
    r_bc = run("broadcast", "ideal-v0", {}, **kw)
    assert r_bc["return"] > r_none["return"] + 2.0
    assert r_none["copies_offered"] == 0 and r_bc["messages_vs_broadcast"] == pytest.approx(1.0)


def test_registered_team_runs_in_the_runner_loop():
    core = make_scenario("mpe/simple_spread-v0", num_envs=2, obs_radius_m=0.5)
    team = make_component("agent", "ddacom/spread-v0", core)
    ch = make_component("channel", "bandwidth-v0", trace={"kind": "constant", "rate": 8000}, latency_bound_s=0.1)
    ch.reset(0, num_envs=2, num_agents=3, dt_s=0.1)
    obs, inbox = core.reset(seed=0), None
    team.reset(0)
    for t in range(25):
        a, out = team.act(obs, inbox)
        assert a.shape == (2, 3) and out.payload.shape[1] == 3
        ch.send(t, out)
        obs = core.step(a).obs
        inbox = ch.deliver(t + 1)
        team.on_feedback(ch.feedback(t + 1))
    s = ch.stats()
    assert s["comm/offered_bytes"] == s["comm/delivered_bytes"] + s["comm/lost_bytes"] + s["comm/queued_bytes"]
    assert s["comm/offered_copies"] > 0


def test_receiver_view_counts_what_a_receiver_sees_as_held_and_the_team_computes_it_from_beliefs():
    from coopsim.agents.comm_baselines.team import SpreadCommTeam

    d = DDACOMSender(initial_rate_frac=1.0, receiver_view=True)
    v, ok = setup(d)
    sees = np.zeros((E, N, K, N), bool)
    sees[1, 2, 4, 0] = True  # env 1: sender 2 believes receiver 0 sees entity 4
    d.observe_receivers(sees)
    score, team = d.score(v, ok)
    assert team[1, 2, 4, 0] == 0.0 and np.isinf(team[1, 2, 4, 1]) and np.isinf(team[0, 2, 4, 0])
    off = DDACOMSender(initial_rate_frac=1.0, receiver_view=False)  # the option off: the same view changes nothing
    setup(off)
    off.observe_receivers(sees)
    assert np.isinf(off.score(v, ok)[1][1, 2, 4, 0])

    core = make_scenario("mpe/simple_spread-v0", num_envs=1, num_agents=3, obs_radius_m=0.5)
    team_ = SpreadCommTeam(core, sender="ddacom", sender_params={"receiver_view": True}, view_margin=0.8)
    team_.known[:] = False
    b = team_.belief
    b[0, 0, 0] = (0.0, 0.0)  # agent 0's own position
    b[0, 0, 1] = (0.3, 0.0)  # where agent 0 believes agent 1 is
    b[0, 0, 3] = (0.3, 0.39)  # landmark 0: 0.39 m from agent 1 (inside 0.8 x 0.5 m), 0.49 m from agent 0
    b[0, 0, 4] = (0.3, 0.41)  # landmark 1: 0.41 m from agent 1 (outside)
    team_.known[0, 0, [0, 1, 3, 4]] = True
    s = team_.receiver_sees()
    assert s.shape == (1, 3, 6, 3)
    assert s[0, 0, 3, 1] and not s[0, 0, 4, 1]
    assert s[0, 0, 0, 1]  # agent 1 (believed 0.3 m away) sees agent 0
    assert not s[0, 0, :, 2].any()  # agent 2's position is unknown to agent 0: nothing is assumed seen
    assert not s[0, 0, :, 0].any()  # never the sender itself


@pytest.mark.parametrize("hist_weight", [0.0, 0.5])
def test_a_new_episodes_first_copies_follow_the_history_weight(hist_weight):
    d = DDACOMSender(initial_rate_frac=0.125, hist_weight=hist_weight)  # 3200 bit/s: 1 copy of 320 bits per step
    v, ok = setup(d)
    ok[:, :, :N] = np.eye(N, dtype=bool)[None]  # candidates: own position and the 3 landmarks
    sent = []
    for t in range(2):
        m = d.select(t, v, ok)
        d.commit(m, v)
        sent.append([tuple(x) for x in np.argwhere(m[0, 0])])  # sender 0: (entity, receiver)
    assert sent[0] == [(0, 1)]  # everything ties: entity order, its own position, to the first teammate
    if hist_weight == 0:  # own position to the other teammate next: only sender 0 can tell it
        assert sent[1] == [(0, 2)]
    else:  # an entity already sent to someone ranks below never-sent ones: the first landmark goes next
        assert sent[1] == [(N, 1)]
