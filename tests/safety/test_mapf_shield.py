"""The certificate shield on MG-MAPF in ``conflicts: allow`` mode: greedy agents collide, shielded greedy agents never do."""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.platform.registry import make_component
from coopsim.safety.certificate import SafetyCertificate
from coopsim.safety.shields import CertificateShield
from coopsim.scenarios.mapf import MGMAPFCore


def _episode(sc, agent, shield, seed):
    sc.reset(seed=seed)
    agent.reset(seed)
    shield.reset(seed, sc)
    collisions, changed = 0.0, 0
    while not sc.done.all():
        a, _ = agent.act(sc.observations(), None)
        state = sc.constraints() if shield.needs_state else None
        safe, cert = shield.filter(state, a)
        assert shield.needs_state is False or cert.certified.all()
        changed += int(cert.changed.sum())
        res = sc.step(safe)
        collisions += float(res.info["cost/collision"].sum())
    return collisions, changed


@pytest.mark.parametrize("seed", [0, 1])
def test_shield_brings_greedy_collisions_to_zero(seed):
    kw = dict(map="random", random_size=(12, 12), num_agents=24, num_goals=2, conflicts="allow", max_steps=40)
    sc = MGMAPFCore(num_envs=2, **kw)
    greedy = make_component("agent", "mapf/greedy-v0", sc)
    raw, _ = _episode(sc, greedy, make_component("shield", "passthrough-v0"), seed)
    assert raw > 0  # greedy agents ignore each other and collide
    shielded, changed = _episode(sc, greedy, CertificateShield(num_runs=360), seed)
    assert shielded == 0.0
    assert changed > 0


def test_mapf_certificate_rejects_exactly_the_colliding_joint_actions():
    sc = MGMAPFCore(num_envs=1, map="random", random_size=(8, 8), num_agents=20, num_goals=1, conflicts="allow")
    sc.reset(seed=3)
    st = sc.constraints().validate()
    assert st.outcome_mask[..., 1:].sum() == 0  # allow mode: a move's only outcome is its intended cell
    cert = SafetyCertificate(st.env(0))
    probe = MGMAPFCore.from_instance(sc.instance(0), num_envs=1, conflicts="allow", max_steps=5)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(80):
        j = rng.integers(0, 5, 20)
        probe.reset(seed=0)
        assert np.array_equal(probe.constraints().positions, st.positions)
        res = probe.step(j[None])
        collided = float(res.info["cost/collision"][0]) > 0
        assert bool(cert.certified(j)) == (not collided)
        assert np.array_equal(probe.constraints().positions[0], st.intended[0, np.arange(20), j])
        seen.add(collided)
    assert seen == {True, False}
