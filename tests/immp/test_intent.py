"""Neighbour-intent labels from local observations: exact on hand-made windows and against the simulator."""
import numpy as np
import torch

from coopsim.agents.immp.intent import IGNORE, MOVES, expected_occupancy, move_labels, own_displacement, shift
from coopsim.agents.ppo.networks import flatten_obs
from coopsim.scenarios.mapf import ACTION_DELTAS, MGMAPFCore


def test_shift_semantics():
    x = torch.arange(9.0).reshape(1, 3, 3)
    # out[i, j] = x[i + dy, j + dx]: the value one cell to the right
    assert shift(x, 1, 0)[0].tolist() == [[1, 2, 0], [4, 5, 0], [7, 8, 0]]
    assert shift(x, 0, -1)[0].tolist() == [[0, 0, 0], [0, 1, 2], [3, 4, 5]]


def test_move_labels_hand_made():
    s = 7
    a0 = torch.zeros(1, s, s)
    a1 = torch.zeros(1, s, s)
    a0[0, 2, 2] = 1      # neighbour A at (x=2, y=2) moves right -> (3, 2)
    a1[0, 2, 3] = 1
    a0[0, 4, 4] = 1      # neighbour B at (4, 4) waits
    a1[0, 4, 4] = 1
    a0[0, 0, 5] = 1      # neighbour C on the border: unlabeled
    a1[0, 0, 5] = 1
    a0[0, 5, 1] = 1      # D at (1, 5) and E at (1, 4): E moves up to (1, 3), D follows to (1, 4)
    a0[0, 4, 1] = 1
    a1[0, 3, 1] = 1
    a1[0, 4, 1] = 1
    lab = move_labels(a0, a1, torch.zeros(1, 2, dtype=torch.long), torch.ones(1, dtype=torch.bool))[0]
    assert lab[2, 2] == 4 and lab[4, 4] == 0
    assert lab[0, 5] == IGNORE
    assert lab[5, 1] == 1                                   # D: only (1, 4) among its candidates is occupied
    assert lab[4, 1] == IGNORE                              # E: (1, 4) and (1, 3) both occupied -> ambiguous
    assert (lab[a0[0] == 0] == IGNORE).all()
    # the observer itself moved left: the t+1 window is centred one cell to the left
    a1_shifted = torch.zeros(1, s, s)
    a1_shifted[0, 2, 4] = 1                                 # A at x=3 appears at column 3 - (-1) = 4
    a1_shifted[0, 4, 5] = 1
    lab2 = move_labels(a0, a1_shifted, torch.tensor([[-1, 0]]), torch.ones(1, dtype=torch.bool))[0]
    assert lab2[2, 2] == 4 and lab2[4, 4] == 0


def test_expected_occupancy_moves_mass():
    s = 5
    agents = torch.zeros(1, s, s)
    agents[0, 2, 2] = 1
    logits = torch.full((1, 5, s, s), -30.0)
    logits[0, 2, 2, 2] = 30.0           # move 2 = down (y+1)
    occ = expected_occupancy(agents, logits)[0]
    assert abs(float(occ[3, 2]) - 1.0) < 1e-6 and abs(float(occ.sum()) - 1.0) < 1e-6


def test_labels_match_the_simulator_ground_truth():
    """Every label inferred from two consecutive local observations equals the neighbour's real move."""
    core = MGMAPFCore(2, map="random-32-32-10", num_agents=48, num_goals=3, obs_radius=3, max_steps=40)
    obs = core.reset(seed=0)
    rng = np.random.default_rng(0)
    k, s, r = 3, 7, 3
    checked = 0
    for _ in range(20):
        xy0 = core.agent_xy().astype(np.int64)
        act = rng.integers(0, 5, size=(2, 48))
        res = core.step(act)
        xy1 = core.agent_xy().astype(np.int64)
        moved = xy1 - xy0                                                   # realised moves [E, N, 2]
        o0 = torch.as_tensor(flatten_obs(obs, core.observation_space)).reshape(96, -1)
        o1 = torch.as_tensor(flatten_obs(res.obs, core.observation_space)).reshape(96, -1)
        d, valid = own_displacement(o0, o1, k, s)
        np.testing.assert_array_equal(d[valid].numpy(), moved.reshape(96, 2)[valid.numpy()])
        w0 = o0[:, 4 * k:].reshape(-1, 3, s, s)[:, 1]
        w1 = o1[:, 4 * k:].reshape(-1, 3, s, s)[:, 1]
        lab = move_labels(w0, w1, d, valid).numpy()
        for b, i, j in zip(*np.nonzero(lab != IGNORE)):
            e, a = divmod(int(b), 48)
            cell = xy0[e, a] + np.array([j - r, i - r])
            nb = np.flatnonzero((xy0[e] == cell).all(1))
            assert len(nb) == 1
            true = moved[e, nb[0]]
            assert tuple(true) == MOVES[lab[b, i, j]]
            checked += 1
        obs = res.obs
    assert checked > 100
    assert ACTION_DELTAS.tolist() == [list(m) for m in MOVES]


def test_move_risk_vertex_and_swap_from_intents():
    """risk = predicted occupancy of the target + chance its occupant swaps into my cell; 0 for wait."""
    from coopsim.agents.immp.net import move_risk

    s, r, big = 7, 3, 30.0
    agents = torch.zeros(1, s, s)
    logits = torch.zeros(1, 5, s, s)
    agents[0, r - 1, r] = 1.0          # neighbour above, predicted to wait: blocks "up"
    logits[0, 0, r - 1, r] = big
    agents[0, r, r + 1] = 1.0          # neighbour to the right, predicted to move left (into my cell): swap on "right"
    logits[0, 3, r, r + 1] = big
    agents[0, r + 2, r] = 1.0          # neighbour two below, predicted to move up: enters my "down" target
    logits[0, 1, r + 2, r] = big
    risk = move_risk(agents, logits)[0]
    # wait, up, down, left, right
    torch.testing.assert_close(risk, torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0]), atol=1e-6, rtol=0)
    logits[0, 3, r, r + 1] = 0.0       # uniform intent on the right neighbour: stays 1/5, swaps 1/5
    torch.testing.assert_close(move_risk(agents, logits)[0, 4], torch.tensor(0.4), atol=1e-6, rtol=0)


def test_policy_masks_obstacle_moves_from_its_own_window():
    from coopsim.agents.immp.net import IMMPNet

    s = 7
    for intent in (False, True):
        net = IMMPNet(s, 20, 5, [16], "relu", intent, 4)
        x = torch.zeros(2, net.in_dim)
        x[0, 2 * s + 3] = 1.0          # obstacle channel: cell above the centre (row 2, col 3)
        x[1, 3 * s + 2] = 1.0          # cell left of the centre (row 3, col 2)
        feat, _ = net.features(x)
        lg = net.logits(feat, torch.ones(2, 5, dtype=torch.bool))
        assert lg[0, 1] < -1e8 and lg[1, 3] < -1e8
        assert (lg[0, [0, 2, 3, 4]] > -1e8).all() and (lg[1, [0, 1, 2, 4]] > -1e8).all()


def test_last_moves_hand_made():
    from coopsim.agents.immp.intent import last_moves

    s = 7
    prev = torch.zeros(1, s, s)
    cur = torch.zeros(1, s, s)
    prev[0, 3, 2] = 1     # A at (x=2, y=3) moved right -> (3, 3)
    cur[0, 3, 3] = 1
    prev[0, 2, 4] = 1     # B at (4, 2) moved up -> (4, 1)
    cur[0, 1, 4] = 1
    prev[0, 5, 5] = 1     # C waited at (5, 5)
    cur[0, 5, 5] = 1
    lm = last_moves(prev, cur)[0]
    assert sorted(map(tuple, lm.nonzero().tolist())) == [(0, 5, 5), (1, 1, 4), (4, 3, 3)]


def test_intent_net_with_last_move_starts_equal_and_reads_the_new_input():
    from coopsim.agents.immp.intent import IntentNet

    torch.manual_seed(0)
    base = IntentNet(8)
    ext = base.with_last_move()
    x = (torch.rand(32, 4, 7, 7) > 0.7).float()
    assert ext.body[0].in_channels == 9 and ext.last_move
    assert torch.allclose(base(x), ext(x))
    with torch.no_grad():
        ext.body[0].weight[:, 4:] += 1.0
    assert not torch.allclose(base(x), ext(x))


def _x4(s, prev_cells, cur_cells):
    """Intent input [1, 4, S, S] with the given (x, y) neighbour cells before / now (no obstacles, no goals)."""
    x = torch.zeros(1, 4, s, s)
    for cx, cy in cur_cells:
        x[0, 1, cy, cx] = 1
    for cx, cy in prev_cells:
        x[0, 3, cy, cx] = 1
    return x


def test_inertia_calibration_exact_online_step():
    """beta moves by exactly -lr * sum(p_last - [y == last]) per step, and only neighbours with a known last
    move count; a fresh episode puts it back to 0."""
    from coopsim.agents.immp.intent import InertiaCalibration, IntentNet

    s, lr = 7, 0.25
    cal = InertiaCalibration(lr)
    xy = torch.tensor([[10, 10]])
    no = torch.tensor([False])
    # step t: neighbour A moved right (1,2) -> (2,2); neighbour B appeared at (4,4) (no previous cell seen)
    x_t = _x4(s, [(1, 2)], [(2, 2), (4, 4)])
    beta = cal.step(x_t, xy, no)
    assert beta.tolist() == [0.0]
    raw = torch.zeros(1, 5, s, s)                   # uniform predictions: p = 0.2 everywhere
    cal.remember(x_t, xy, raw)
    # step t+1: A kept going right (2,2) -> (3,2): y == last; B moved up (4,4) -> (4,3) (no last move: ignored)
    x_t1 = _x4(s, [(2, 2), (4, 4)], [(3, 2), (4, 3)])
    beta = cal.step(x_t1, xy, no)
    assert abs(float(beta[0]) - (-lr * (0.2 - 1.0))) < 1e-7          # 0.2
    # calibrated logits: beta on "right" (4) at A's new cell and on "up" (1) at B's, nothing elsewhere
    net = IntentNet(4, last_move=True)
    with torch.no_grad():
        d = net(x_t1, beta) - net(x_t1)
    assert abs(float(d[0, 4, 2, 3]) - float(beta[0])) < 1e-6 and abs(float(d[0, 1, 3, 4]) - float(beta[0])) < 1e-6
    assert abs(float(d.abs().sum()) - 2 * float(beta[0])) < 1e-5
    # step t+2: A turned down (3,2) -> (3,3) where it had been given +beta on 'right'; B waited at (4,3), but
    # (3,3) is also one of B's candidate cells, so B's move is ambiguous and does not count
    b1 = float(beta[0])
    lg = torch.zeros(1, 5, s, s)
    lg[0, 4, 2, 3] = b1                              # the calibrated logits of a module whose raw output is 0
    lg[0, 1, 3, 4] = b1
    cal.remember(x_t1, xy, lg)
    beta = cal.step(_x4(s, [(3, 2), (4, 3)], [(3, 3), (4, 3)]), xy, no)
    p_last = np.exp(b1) / (4 + np.exp(b1))
    assert abs(float(beta[0]) - (b1 - lr * (p_last - 0.0))) < 1e-6
    assert cal.step(_x4(s, [], []), xy, torch.tensor([True])).tolist() == [0.0]


def test_agent_with_calibration_off_decides_as_the_module_as_trained():
    """intent_adapt_lr 0: the decision's intent logits are the module's; on: they differ from it only by
    beta * onehot(last move), with beta the calibrator's."""
    from coopsim.agents.immp.intent import last_moves
    from coopsim.platform import registry

    outs = {}
    for lr in (0.0, 0.5):
        core = MGMAPFCore(1, map="random-32-32-10", num_agents=32, num_goals=2, obs_radius=3, max_steps=12)
        agent = registry.make_component("agent", "mapf/immp-v0", core, checkpoint="shipped", intent_adapt_lr=lr)
        obs = core.reset(seed=3)
        agent.reset(3)
        acts, betas = [], []
        for _ in range(12):
            flat = flatten_obs(obs, agent.obs_space)
            x = agent.actor_input(flat)
            a = agent.decide(x)
            x4 = x.reshape(32, -1)[:, :4 * 49].reshape(-1, 4, 7, 7)
            with torch.no_grad():
                raw = agent.net.intent_logits(x.reshape(32, -1))
            beta = torch.zeros(32) if agent._inertia is None else agent._inertia.beta
            assert torch.allclose(agent.last_intent_logits, raw + beta[:, None, None, None] * last_moves(x4[:, 3], x4[:, 1]),
                                  atol=1e-5)
            betas.append(beta.clone())
            acts.append(a)
            obs = core.step(a).obs
        outs[lr] = (np.stack(acts), torch.stack(betas))
    assert (outs[0.0][1] == 0).all() and (outs[0.5][1] != 0).any()
