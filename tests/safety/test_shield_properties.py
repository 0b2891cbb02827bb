"""Property tests (hypothesis) of the certificate shield against an explicit enumeration of outcomes."""
from __future__ import annotations

import copy

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.shields import CertificateShield, OracleShield
from coopsim.scenarios.coop_game import CoopGameCore
from safety_helpers import brute_force_safe

CONSTRAINT_MIXES = [["separation"], ["resource"], ["connectivity"], ["separation", "resource", "connectivity"],
                    ["separation", "connectivity"]]


@st.composite
def situations(draw):
    """A reachable coop_game state, plausible sets (random subsets of the prior keeping one outcome), a proposal."""
    n = draw(st.integers(2, 3))
    size = draw(st.integers(3, 5))
    cons = draw(st.sampled_from(CONSTRAINT_MIXES))
    world_seed = draw(st.integers(0, 50))
    min_dist = draw(st.sampled_from([1.0, 1.5]))
    steps = draw(st.integers(0, 4))
    try:
        sc = CoopGameCore(num_envs=1, height=size, width=size, num_agents=n, constraints=cons,
                           world_seed=world_seed, min_dist=min_dist, comm_range=2.5, max_steps=8)
    except Exception:  # noqa: BLE001 - placement impossible for this draw
        from hypothesis import assume

        assume(False)
    sc.reset(seed=world_seed)
    oracle = OracleShield()
    oracle.reset(0, sc)
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    for _ in range(steps):  # walk to a reachable safe state through the oracle shield
        a, _ = oracle.filter(sc.constraints(), rng.integers(0, 5, (1, n)))
        sc.step(a)
    state = sc.constraints()
    keep = rng.random(state.outcome_mask.shape) < draw(st.sampled_from([0.5, 0.8, 1.0]))
    keep[..., 0] = True  # the intended cell always stays plausible (a subset that is non-empty)
    plausible = state.outcome_mask & keep
    proposal = rng.integers(0, 5, (1, n)).astype(np.int64)
    return state, plausible, proposal


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(situations())
def test_shield_output_is_safe_under_given_plausible_sets_and_keeps_certified_proposals(sit):
    state, plausible, proposal = sit
    state_before = copy.deepcopy(state)
    prop_before = proposal.copy()
    class Fixed(CertificateShield):
        def plausible(self, s):
            return plausible

    fixed = Fixed(learn=False)
    fixed.reset(0, None)
    out, cert = fixed.filter(state, proposal)
    # never mutates its input (the joint action nor any array of the safety state)
    assert np.array_equal(proposal, prop_before)
    for f in ("positions", "loads", "intended", "outcomes", "outcome_loads", "outcome_mask", "cells", "outcome_cells", "t"):
        assert np.array_equal(getattr(state, f), getattr(state_before, f)), f
    assert out is not proposal
    # the returned joint action survives every combination of plausible outcomes (explicit enumeration)
    assert brute_force_safe(state, plausible[0], out[0])
    assert cert.certified[0]
    # an already safe proposal is returned unchanged; the changed mask is exact
    if brute_force_safe(state, plausible[0], proposal[0]):
        assert np.array_equal(out, proposal)
        assert not cert.changed.any()
    assert np.array_equal(cert.changed[0], out[0] != proposal[0])
    # the table certificate agrees with the enumeration on this proposal
    c = SafetyCertificate(state, plausible[0])
    assert bool(c.certified(proposal[0])) == brute_force_safe(state, plausible[0], proposal[0])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(situations())
def test_certificate_equals_enumeration_on_every_joint_action(sit):
    from itertools import product

    state, plausible, _ = sit
    c = SafetyCertificate(state, plausible[0])
    n = state.num_agents
    joints = np.array(list(product(range(5), repeat=n)), np.int64)
    table = c.certified(joints)
    brute = np.array([brute_force_safe(state, plausible[0], j) for j in joints])
    assert np.array_equal(table, brute)
    assert table[0]  # all-stay is certified from a safe state


def test_repair_is_deterministic_and_changes_one_agent_for_a_head_on_collision():
    # 1x5 corridor, no slip: agents at cells 1 and 3 both step into cell 2
    sc = CoopGameCore(height=1, width=5, num_agents=2, constraints=["separation"], slip=0.0,
                       world_seed=0, start_spacing=2.0)
    sc.reset(seed=0)
    state = sc.constraints()
    cells = state.cells[0]
    # action 4 = right, 3 = left: move towards each other
    left_agent = int(np.argmin(cells))
    proposal = np.zeros((1, 2), np.int64)
    proposal[0, left_agent] = 4
    proposal[0, 1 - left_agent] = 3
    shield = OracleShield()
    shield.reset(0, sc)
    out1, cert1 = shield.filter(state, proposal)
    out2, _ = shield.filter(state, proposal)
    assert np.array_equal(out1, out2)
    assert int(cert1.changed.sum()) == 1  # fewest changes: one agent yields
    assert cert1.certified.all()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29)), max_size=40),
       st.lists(st.lists(st.integers(0, 29), min_size=1, max_size=4, unique=True), max_size=4))
def test_coupling_graph_matches_networkx(n, raw_pairs, groups):
    import networkx as nx

    from coopsim.safety.graph import CouplingGraph

    pairs = np.array([(min(a, b), max(a, b)) for a, b in raw_pairs if a < n and b < n and a != b], np.int64).reshape(-1, 2)
    hyper = [("resource", np.array([g for g in grp if g < n], np.int64)) for grp in groups]
    g = CouplingGraph(n, pairs, ["separation"] * len(pairs), hyper)
    ref = nx.Graph()
    ref.add_nodes_from(range(n))
    ref.add_edges_from(pairs.tolist())
    for _, m in hyper:
        ref.add_edges_from((int(a), int(b)) for a in m for b in m if a < b)
    assert sorted(map(sorted, nx.connected_components(ref))) == [c.tolist() for c in g.components()]
    for i in range(n):
        assert sorted(ref.neighbors(i)) == g.neighbours(i).tolist()
    assert g.max_neighbourhood == max((d for _, d in ref.degree()), default=0) + 1
    assert nx.is_isomorphic(g.nx, ref)
