import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.comm.traces import CsvTrace, MarkovTrace, SinusoidTrace, StepTrace
from coopsim.errors import ConfigError
from coopsim.platform.comm import BROADCAST, MessageBatch
from coopsim.platform.registry import make_component

# payload 3 float32 = 12 B + 28 B header = 40 B = 320 bits per copy
P = 3
BITS = 320


def batch(t, env, src, dst, dt=0.1):
    n = len(src)
    return MessageBatch(np.asarray(env, np.int32), np.asarray(src, np.int32), np.asarray(dst, np.int32),
                        np.arange(n * P, dtype=np.float32).reshape(n, P), np.full(n, t * dt))


def conserved(ch):
    pc = ch.per_copy()
    for u in ("bytes", "copies"):
        assert (pc[f"offered_{u}"] == pc[f"delivered_{u}"] + pc[f"lost_{u}"] + pc[f"queued_{u}"]).all()


def test_fifo_service_latency_exact():
    # 3200 bit/s at dt 0.1 s serves exactly one 320-bit copy per step
    ch = make_component("channel", "bandwidth-v0", trace={"kind": "constant", "rate": 3200}, queue_packets=8)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    ch.send(0, batch(0, [0, 0, 0], [0, 0, 0], [1, 1, 1]))
    got = [len(ch.deliver(t)) for t in range(1, 5)]
    assert got == [1, 1, 1, 0]
    assert np.allclose(ch.latencies_s(), [0.1, 0.2, 0.3])
    s = ch.stats()
    assert s["comm/offered_bytes"] == 120 and s["comm/delivered_bytes"] == 120 and s["comm/lost_bytes"] == 0


def test_partial_service_carries_remaining_bits_and_delay_adds():
    # 2400 bit/s: 240 bits per step; a 320-bit copy needs 1/3 s = 0.1333.. s, +0.05 s delay
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 2400}, delay_s=0.05)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    ch.send(0, batch(0, [0], [1], [0]))
    assert len(ch.deliver(1)) == 0 and len(ch.deliver(2)) == 1
    assert ch.latencies_s()[0] == pytest.approx(320 / 2400 + 0.05, abs=1e-6)


def test_overflow_drops_tail_and_counts_per_copy():
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 0}, queue_packets=3)
    ch.reset(0, num_envs=1, num_agents=3, dt_s=0.1)
    ch.send(0, batch(0, [0, 0], [0, 0], [BROADCAST, 1]))  # 2 + 1 copies fill the queue
    ch.send(1, batch(1, [0, 0], [0, 1], [2, BROADCAST]))  # sender 0: 1 copy dropped; sender 1: 2 copies fit
    pc = ch.per_copy()
    assert pc["lost/overflow_copies"][0].tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0]]
    assert pc["queued_copies"][0].tolist() == [[0, 2, 1], [1, 0, 1], [0, 0, 0]]
    assert pc["offered_bytes"].sum() == 6 * 40
    conserved(ch)
    fb = ch.feedback(1)
    assert fb.lost_copies[0].tolist() == [1, 0, 0] and fb.delivered_copies.sum() == 0


def test_latency_bound_one_step_loses_late_copies():
    # 4800 bit/s: 480 bits per step, 1.5 copies; bound 0.1 s: a second copy cannot finish in its step
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 4800}, latency_bound_s=0.1)
    ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1)
    for t in range(10):
        ch.send(t, batch(t, [0, 0], [0, 0], [1, 1]))
        ch.deliver(t + 1)
    pc = ch.per_copy()
    # step t: copy 1 done after 0.0667 s, copy 2 partly sent and dropped at the end of the step (late)
    assert pc["delivered_copies"].sum() == 10 and pc["lost/late_copies"].sum() == 10
    assert pc["queued_copies"].sum() == 0
    assert np.allclose(ch.latencies_s(), 320 / 4800)
    conserved(ch)


def test_feedback_is_one_step_later_and_sums_to_fates():
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 3200}, latency_bound_s=0.1, queue_packets=2)
    ch.reset(0, num_envs=2, num_agents=2, dt_s=0.1)
    tot_d = tot_l = 0
    for t in range(6):
        ch.send(t, batch(t, [0, 0, 0, 1], [0, 0, 0, 1], [1, 1, 1, 0]))
        got = ch.deliver(t + 1)
        fb = ch.feedback(t + 1)
        # env 0 sender 0: 3 copies: 1 overflows now, 1 delivered, 1 expires by t + 1
        assert fb.delivered_copies.tolist() == [[1, 0], [0, 1]]
        assert fb.lost_copies.tolist() == [[2, 0], [0, 0]]
        tot_d += fb.delivered_bytes.sum()
        tot_l += fb.lost_bytes.sum()
        assert len(got) == 2
    s = ch.stats()
    assert tot_d == s["comm/delivered_bytes"] and tot_l == s["comm/lost_bytes"]


def test_gilbert_elliott_all_bad_loses_everything_as_burst():
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 1e6},
                          gilbert_elliott={"p_good_to_bad": 1.0, "p_bad_to_good": 0.0, "loss_bad": 1.0})
    ch.reset(3, num_envs=1, num_agents=3, dt_s=0.1)
    for t in range(4):
        ch.send(t, batch(t, [0], [1], [BROADCAST]))
        assert len(ch.deliver(t + 1)) == 0
    s = ch.stats()
    assert s["comm/lost_copies/burst"] == 8 and s["comm/delivered_copies"] == 0
    conserved(ch)


def test_gilbert_elliott_mean_loss_matches_stationary_rate():
    ge = {"p_good_to_bad": 0.1, "p_bad_to_good": 0.3, "loss_good": 0.0, "loss_bad": 0.5}
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 1e7}, gilbert_elliott=ge)
    ch.reset(1, num_envs=50, num_agents=2, dt_s=0.1)
    env = np.repeat(np.arange(50), 4)
    for t in range(200):
        ch.send(t, batch(t, env, np.zeros(200), np.ones(200)))
        ch.deliver(t + 1)
    s = ch.stats()
    # stationary P(bad) = 0.1 / 0.4 = 0.25; loss = 0.25 * 0.5 = 0.125 (40000 copies: sd ~ 0.005)
    assert s["comm/lost_copies/burst"] / s["comm/offered_copies"] == pytest.approx(0.125, abs=0.02)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), queue=st.integers(1, 6), bound=st.sampled_from([None, 0.1, 0.25]),
       delay=st.sampled_from([0.0, 0.03]), ge=st.booleans(), steps=st.integers(1, 12))
def test_conservation_per_copy_property(seed, queue, bound, delay, ge, steps):
    rng = np.random.default_rng(seed)
    ch = BandwidthChannel(trace={"kind": "markov", "levels": [0, 1000, 4000, 9000], "switch_prob": 0.3},
                          queue_packets=queue, latency_bound_s=bound, delay_s=delay,
                          gilbert_elliott={"p_good_to_bad": 0.3, "p_bad_to_good": 0.5, "loss_bad": 0.7} if ge else None)
    E, N = 2, 3
    ch.reset(seed, num_envs=E, num_agents=N, dt_s=0.1)
    fb_total = 0
    for t in range(steps):
        m = int(rng.integers(0, 8))
        src = rng.integers(0, N, m)
        dst = rng.integers(-1, N, m)
        dst = np.where(dst == src, BROADCAST, dst)
        ch.send(t, batch(t, rng.integers(0, E, m), src, dst))
        out = ch.deliver(t + 1)
        assert (out.dst >= 0).all() and (out.dst != out.src).all()
        fb = ch.feedback(t + 1)
        fb_total += fb.delivered_bytes.sum() + fb.lost_bytes.sum()
        conserved(ch)
    pc = ch.per_copy()
    assert fb_total == pc["delivered_bytes"].sum() + pc["lost_bytes"].sum()


def test_traces_values():
    st_ = StepTrace(high=10, low=2, drop_at_s=0.3, recover_at_s=0.5, scale_bps=100)
    assert st_.sample(7, 1, 2, 0.1)[:, 0, 0].tolist() == [1000, 1000, 1000, 200, 200, 1000, 1000]
    sin = SinusoidTrace(mean=5, amplitude=5, period_s=0.4).sample(4, 1, 1, 0.1)[:, 0, 0]
    assert np.allclose(sin, [5, 10, 5, 0])
    mk = MarkovTrace(levels=[1, 2, 3], switch_prob=0.5)
    a = mk.sample(50, 3, 4, 0.1, np.random.default_rng(7))
    b = mk.sample(50, 3, 4, 0.1, np.random.default_rng(7))
    assert (a == b).all() and set(np.unique(a)) <= {1, 2, 3} and a.shape == (50, 3, 4)
    switches = (np.diff(a, axis=0) != 0).mean()
    assert 0.35 < switches < 0.65


def test_csv_trace_and_errors(tmp_path):
    p = tmp_path / "cap.csv"
    p.write_text("time_s,rate_0,rate_1\n0,100,200\n0.25,50,60\n")
    v = CsvTrace(path=str(p)).sample(4, 1, 2, 0.1)
    assert v[:, 0, :].tolist() == [[100, 200], [100, 200], [100, 200], [50, 60]]
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,rate\n0,100\n0.1,abc\n")
    with pytest.raises(ConfigError, match="bad.csv: key 'trace.path': line 3: non-numeric") as err:
        CsvTrace(path=str(bad)).sample(2, 1, 1, 0.1)
    assert err.value.key == "trace.path"  # so a run config's error names its key and the override that set it


def test_a_bad_csv_trace_in_a_run_names_the_override_the_key_and_the_csv_line(tmp_path):
    from cli_helpers import _err, run_cli

    bad = tmp_path / "bad.csv"
    bad.write_text("t_s,rate\n0,100\n")
    override = f"channel.params.trace={{kind: csv, path: {bad}}}"
    assert _err(run_cli("validate", "configs/mpe/spread-po-ddacom-markov.yaml", override)) == (
        f"error: command-line override '{override}' (config configs/mpe/spread-po-ddacom-markov.yaml): {bad}: key "
        "'channel.params.trace.path': line 1: header must be 'time_s,rate' or 'time_s,rate_0,...'; got 't_s,rate'")


def test_bad_params_name_the_key():
    with pytest.raises(ConfigError, match="queue_packets"):
        make_component("channel", "bandwidth-v0", queue_packets=0)
    with pytest.raises(ConfigError, match="trace"):
        make_component("channel", "bandwidth-v0", trace={"kind": "step", "high": 1, "low": 1, "drop_at_s": 2, "recover_at_s": 1})


@pytest.mark.parametrize("ge", [None, {"p_good_to_bad": 0.3, "p_bad_to_good": 0.3, "loss_good": 0.1, "loss_bad": 0.8}])
def test_batch_order_across_senders_changes_nothing(ge):
    # the channel takes a fast path when a batch is grouped by sender and sorts otherwise; interleaving the
    # senders' copies (each sender's own order kept) must give the same fates, latencies and counters
    E, N, T = 3, 4, 40
    rng = np.random.default_rng(7)
    chans = []
    for _ in range(2):
        ch = BandwidthChannel(trace={"kind": "markov", "levels": [3000, 9000, 20000], "switch_prob": 0.2},
                              queue_packets=5, latency_bound_s=0.2, delay_s=0.01, gilbert_elliott=ge)
        ch.reset(3, num_envs=E, num_agents=N, dt_s=0.1)
        chans.append(ch)
    for t in range(T):
        m = int(rng.integers(0, 30))
        env, src = rng.integers(0, E, m), rng.integers(0, N, m)
        dst = (src + rng.integers(1, N, m)) % N
        pay = np.arange(m * 3, dtype=np.float32).reshape(m, 3) + 1000 * t
        grouped = np.lexsort((np.arange(m), src, env))  # by sender, each sender's copies in their order
        outs, fbs = [], []
        for ch, o in zip(chans, (grouped, np.arange(m))):
            ch.send(t, MessageBatch(env[o].astype(np.int32), src[o].astype(np.int32), dst[o].astype(np.int32),
                                    pay[o], np.full(m, t * 0.1)))
            d = ch.deliver(t + 1)
            key = np.lexsort((d.payload[:, 0], d.src, d.env)) if len(d) else np.zeros(0, int)
            outs.append((d.env[key], d.src[key], d.dst[key], d.payload[key]))
            fbs.append(ch.feedback(t + 1))
        for a, b in zip(*outs):
            np.testing.assert_array_equal(a, b)
        for name in ("delivered_copies", "lost_copies", "delivered_bytes", "lost_bytes", "latency_max_s"):
            np.testing.assert_array_equal(getattr(fbs[0], name), getattr(fbs[1], name))
        for k, v in chans[0].last_step.items():
            np.testing.assert_array_equal(v, chans[1].last_step[k])
    pa, pb = chans[0].per_copy(), chans[1].per_copy()
    for k in pa:
        np.testing.assert_array_equal(pa[k], pb[k])
    assert pa["offered_copies"].sum() > 300 and pa["lost/overflow_copies"].sum() > 0 and pa["lost/late_copies"].sum() > 0
    np.testing.assert_array_equal(np.sort(chans[0].latencies_s()), np.sort(chans[1].latencies_s()))


@pytest.mark.parametrize("flush_events", [4096, 1])
def test_folded_totals_and_step_counters_match_hand_counts(monkeypatch, flush_events):
    # run totals are folded in from pending events (dense bincounts) when read (flush_events 4096) or after
    # every event (1); either way they must equal these copies, counted by hand from the model:
    # 3200 bit/s at dt 0.1 s serves one 40 B (320 bit) copy per sender and step, arriving 0.1 s after its
    # service interval starts; queues hold 3 copies; a copy arriving more than 0.15 s after sending is late
    import coopsim.comm.bandwidth as bw

    monkeypatch.setattr(bw, "_FLUSH_EVENTS", flush_events)
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 3200}, queue_packets=3, latency_bound_s=0.15)
    ch.reset(0, num_envs=2, num_agents=3, dt_s=0.1)
    sends = {0: batch(0, [0, 0, 0, 0, 0, 1], [0, 1, 1, 1, 1, 2], [BROADCAST, 0, 0, 0, 0, 1]),
             1: batch(1, [0], [0], [1]),
             2: batch(2, [1, 1], [0, 0], [2, 2])}
    steps = []
    for t in range(3):
        ch.send(t, sends[t])
        ch.deliver(t + 1)
        steps.append(ch.last_step)

    def counts(*cells):  # int64 [2, 3, 3] copies: cells are (env, src, dst, n)
        out = np.zeros((2, 3, 3), np.int64)
        for e, s, d, n in cells:
            out[e, s, d] += n
        return out

    zero = counts()
    # step 0: env 0 sender 0 broadcasts (2 copies), sender 1 sends 4 copies to 0 (the 4th overflows), env 1
    # sender 2 one copy to 1; interval 0 serves the head copy of each sender, all on time
    # step 1: env 0 sender 0 one more copy to 1; interval 1 serves env 0's second copies, 0.2 s after sending
    # (late), and sender 1's third copy, still waiting at 0.2 s, can no longer make it (late)
    # step 2: env 1 sender 0 two copies to 2; interval 2 serves env 0 sender 0's step-1 copy (late again) and
    # the first of them (on time); the second is still queued
    want_steps = [
        {"offered": counts((0, 0, 1, 1), (0, 0, 2, 1), (0, 1, 0, 4), (1, 2, 1, 1)),
         "delivered": counts((0, 0, 1, 1), (0, 1, 0, 1), (1, 2, 1, 1)), "lost/overflow": counts((0, 1, 0, 1)),
         "lost/late": zero},
        {"offered": counts((0, 0, 1, 1)), "delivered": zero, "lost/overflow": zero,
         "lost/late": counts((0, 0, 2, 1), (0, 1, 0, 2))},
        {"offered": counts((1, 0, 2, 2)), "delivered": counts((1, 0, 2, 1)), "lost/overflow": zero,
         "lost/late": counts((0, 0, 1, 1))},
    ]
    for got, want in zip(steps, want_steps):
        for k, v in want.items():
            np.testing.assert_array_equal(got[f"{k}_copies"], v, err_msg=k)
            np.testing.assert_array_equal(got[f"{k}_bytes"], 40 * v, err_msg=k)
        np.testing.assert_array_equal(got["lost/burst_copies"], zero)
    pc = ch.per_copy()
    want = {k: sum(w[k] for w in want_steps) for k in want_steps[0]}
    want["lost/burst"] = zero
    want["lost"] = want["lost/overflow"] + want["lost/late"]
    want["queued"] = counts((1, 0, 2, 1))
    assert set(pc) == {f"{k}_{u}" for k in want for u in ("bytes", "copies")}
    for k, v in want.items():
        np.testing.assert_array_equal(pc[f"{k}_copies"], v, err_msg=k)
        np.testing.assert_array_equal(pc[f"{k}_bytes"], 40 * v, err_msg=k)
    assert (pc["offered_copies"].sum(), pc["delivered_copies"].sum(), pc["lost_copies"].sum()) == (10, 4, 5)
    np.testing.assert_allclose(ch.latencies_s(), [0.1, 0.1, 0.1, 0.1])


def test_folding_totals_of_mixed_copy_sizes_is_exact():
    ch = BandwidthChannel(trace={"kind": "constant", "rate": 1000})
    ch.reset(0, num_envs=2, num_agents=3, dt_s=0.1)
    ch._count("offered", np.array([0, 1, 1]), np.array([0, 2, 2]), np.array([1, 0, 0]), np.array([40, 48, 52]))
    ch._count("offered", np.array([1]), np.array([2]), np.array([0]), np.array([40]))
    tot = ch.totals
    assert tot["offered_bytes"][0, 0, 1] == 40 and tot["offered_copies"][0, 0, 1] == 1
    assert tot["offered_bytes"][1, 2, 0] == 140 and tot["offered_copies"][1, 2, 0] == 3
    assert tot["offered_bytes"].sum() == 180 and tot["offered_copies"].sum() == 4
