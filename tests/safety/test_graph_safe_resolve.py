"""Conservativeness diagnosis (:mod:`coopsim.agents.graph_safe.diagnose`) and the resolve phase of graph-safe RL.

The diagnosis is checked on a hand-built corridor (1x3 grid, 2 agents, separation, no slip) whose classes
can be worked out by hand; the resolve phase on the 4x4 instance of the regret runs with every (cell,
action) resolved except one that is off the optimal path: only ``resolve_bonus`` makes the learner try it,
and after exactly ``n_remove`` tries every truly safe joint action is certified (conservativeness 1).
"""
from __future__ import annotations

import numpy as np
import pytest

from coopsim.agents.graph_safe import GraphSafeAgent
from coopsim.agents.graph_safe.diagnose import closure, diagnose_agent, reachable
from coopsim.agents.graph_safe.train import _share, run_episode
from coopsim.errors import ConfigError
from coopsim.safety.shields import CertificateShield
from coopsim.scenarios.coop_game import CoopGameCore
from coopsim.scenarios.coop_game.solver import joint_index

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def _corridor():
    sc = CoopGameCore(num_envs=1, height=1, width=3, num_agents=2, constraints=["separation"], slippery_frac=0.0,
                      max_steps=4)
    sc.reset(seed=0)
    return sc, GraphSafeAgent(sc, num_runs=1, p_min=0.1)


def test_corridor_classes_worked_out_by_hand():
    sc, ag = _corridor()
    w, tab = sc.world(), ag.ensure_table()
    assert list(sc.starts()) == [1, 0]  # agent 0 in the middle, agent 1 on the left: they can never pass each other
    d = diagnose_agent(ag)
    kind = {(p["cell"], p["action"]): p["class"] for p in d.per_pair}
    # moving right from the left end: the other agent is in cell 1 or 2, and the prior outcome set {1, 0, 2}
    # always meets it, so no certified joint action ever contains it
    assert kind[(0, RIGHT)] == "never"
    # right from the middle with the other agent on the left and staying: outcomes {2, 1}, certified at the start
    assert kind[(1, RIGHT)] == "triable_now"
    # left from the middle needs the other agent on the right: agent 1 can never get past agent 0
    assert kind[(1, LEFT)] == "unreachable"
    assert sum(d.classes.values()) == d.truly_safe - d.certified
    assert d.certified <= d.certifiable < d.truly_safe
    # "never" means: even with every other (cell, action) resolved, a joint action with (0, right) is uncertified
    true = w.true_prob > 0
    sup = true.copy()
    sup[0, RIGHT] = ag.plausible_support()[0, RIGHT]
    safe = tab.safe(sup)
    for i in range(2):
        with_it = (tab.states[:, i][:, None] == 0) & (tab.actions[:, i][None, :] == RIGHT)
        assert not (safe & with_it).any()
    # the reachable joint states: (1, 0) at t = 0, then agent 0 may step right: (2, 0); never agent 1 to the right
    r = reachable(tab.safe(ag.plausible_support()), true, w, np.array([joint_index(sc.starts(), 3)]), 4)
    assert set(np.flatnonzero(r[0])) == {1 * 3 + 0} and set(np.flatnonzero(r.any(0))) == {1 * 3 + 0, 2 * 3 + 0}


def test_closure_without_reachability_contains_the_reachable_one():
    sc, ag = _corridor()
    w = sc.world()
    true = w.true_prob > 0
    starts = np.array([joint_index(sc.starts(), 3)])
    res_reach, _, _ = closure(ag.ensure_table(), w, ag.plausible_support(), true, starts, 4)
    res_any, _, _ = closure(ag.ensure_table(), w, ag.plausible_support(), true, starts, 4, use_reach=False)
    assert (res_reach <= res_any).all() and res_any.sum() > res_reach.sum()
    assert res_reach[1, RIGHT] and not res_reach[1, LEFT] and res_any[1, LEFT] and not res_any[0, RIGHT]


PARAMS = dict(height=4, width=4, num_agents=2, constraints=["separation", "resource", "connectivity"], max_steps=8)


def _one_unresolved(**kw):
    """4x4 instance, every (cell, action) resolved from exact true frequencies except one move from a cell
    that does not slip, off the optimal path, that blocks truly safe joint actions and is triable now."""
    sc = CoopGameCore(num_envs=1, **PARAMS)
    sc.reset(seed=0)
    ag = GraphSafeAgent(sc, num_runs=1, p_min=0.5, bonus=0.0, **kw)  # p_min only matters for the reset pair (no slip)
    w = sc.world()
    for v in np.flatnonzero(~w.slippery):
        for a in range(1, w.num_actions):
            ag.model.tries[:] = 1000
            ag.model.seen[:] = np.rint(w.true_prob * 1000).astype(np.int64)
            ag.model.tries[v, a] = 0
            ag.model.seen[v, a] = 0
            d = diagnose_agent(ag)
            if d.classes["triable_now"] > 0 and d.certified == d.certifiable - d.classes["triable_now"]:
                ag.plan()
                if not ag.goal_expanding.any():
                    return sc, ag, w, (int(v), int(a)), d
    pytest.fail("no off-path, triable, blocking move from a cell without slip: pick another instance")


def _train(sc, ag, episodes, pair):
    shield = CertificateShield(num_runs=1, p_min=0.5)
    _share(shield, ag)
    for ep in range(episodes):
        if ag.should_replan():
            ag.plan()
        m = run_episode(sc, ag, shield, seed=ep)
        assert m["violations"] == 0 and m["shield/interventions"] == 0
        prior = ag.world.prior[pair] >= 0
        # the pair's plausible set is its whole prior set until its n_remove-th try, then only what was seen
        assert (ag.plausible_support()[pair] == prior).all() == (ag.model.tries[pair] < ag.model.n_remove)
        if ag.model.tries[pair] >= ag.model.n_remove:
            return ep + 1
    return episodes


def test_resolve_bonus_certifies_the_off_path_action_after_n_remove_tries():
    sc, ag, w, pair, d0 = _one_unresolved(resolve_bonus=1.0)
    n = ag.model.n_remove
    assert n == 22  # ceil(ln(400 / 0.01) / 0.5)
    assert ag.resolving[pair] and ag.resolving.sum() == 1
    true = w.true_prob > 0
    c0 = ag.conservativeness(true)
    assert c0 == pytest.approx(d0.certified / d0.truly_safe) and c0 < 1.0
    eps = _train(sc, ag, 200, pair)
    # a move without slip from its cell is tried at most once per step per agent: at least n / (2 H) episodes
    assert ag.model.tries[pair] >= n and int(np.ceil(n / (2 * ag.H))) <= eps <= 20
    # the plausible set of the pair is exactly its true support now; every truly safe joint action is certified
    assert (ag.plausible_support()[pair] == true[pair]).all()
    assert ag.conservativeness(true) == 1.0
    d1 = diagnose_agent(ag)
    assert d1.certified == d1.truly_safe == d0.truly_safe and sum(d1.classes.values()) == 0
    ag.plan()
    assert not ag.resolving.any()  # nothing left to resolve


def test_without_resolve_bonus_the_off_path_action_stays_uncertified():
    sc, ag, w, pair, d0 = _one_unresolved(resolve_bonus=0.0, expand_bonus=0.0)
    assert not ag.resolving.any()
    _train(sc, ag, 40, pair)
    assert ag.model.tries[pair] < ag.model.n_remove
    c = ag.conservativeness(w.true_prob > 0)
    assert c == pytest.approx(d0.certified / d0.truly_safe) and c < 1.0


def test_violation_study_checkpoints_per_seed_and_resumes(tmp_path, capsys):
    import json

    from coopsim.agents.graph_safe.experiments import LEARNER, violations

    cfg = "configs/safety/coop-grid4x4-2ag-resource.yaml"
    path = tmp_path / "violations-coop-grid4x4-2ag-resource.json"
    violations([cfg], 1, 1, tmp_path, seeds=[3])
    d = json.loads(path.read_text())
    assert [r["seed"] for r in d["rows"]] == [3] and d["learner"] == LEARNER and d["complete"] is False
    row3 = d["rows"][0]
    assert row3["gs_steps"] == 2 * 8 and row3["gs_train_violations"] == row3["gs_eval_violations"] == 0
    violations([cfg], 1, 1, tmp_path, seeds=[1, 3])  # seed 3 is kept, not re-run; seed 1 is added in order
    d = json.loads(path.read_text())
    assert [r["seed"] for r in d["rows"]] == [1, 3] and d["rows"][1] == row3
    assert "seeds to run [1]" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="pass --replace"):  # another episode budget is refused ...
        violations([cfg], 2, 1, tmp_path, seeds=[1])
    assert json.loads(path.read_text())["train_episodes"] == 1
    violations([cfg], 2, 1, tmp_path, seeds=[1], replace=True)  # ... and replaces the file when asked
    d = json.loads(path.read_text())
    assert [r["seed"] for r in d["rows"]] == [1] and d["train_episodes"] == 2
