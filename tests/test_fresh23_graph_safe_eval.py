"""`coopsim eval` / `coopsim run --checkpoint` of a trained graph-safe policy measure the trained policy.

The runner builds the agent and the shield apart; a fresh learning ``certificate-v0`` shield certified from the
prior sets only and blocked the trained policy (return 0.05 of V* = 7.05, 14 interventions per episode on
grid4x4-2ag-all). ``graph_safe-v0`` now offers its model for its scenario
(:func:`coopsim.safety.shields.offer_model`) and the shield adopts it at ``reset``, as ``coopsim train`` shares it.
"""
from __future__ import annotations

import gc
import json
from pathlib import Path

import numpy as np
import pytest

from coopsim.platform import registry
from coopsim.platform.config import load_config
from coopsim.platform.recorder import read_jsonl
from coopsim.platform.runner import RunParts
from coopsim.platform.training import eval_main, train_main
from coopsim.safety.model import PlausibleModel
from coopsim.safety.shields import CertificateShield, OracleShield, offer_model, offered_model

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"
# p_min = 0.1 (the true minimum outcome probability of these worlds) and num_runs = 1: n_remove = 106 tries, so
# 1200 env steps (150 episodes) get past the goal-directed expansion to the optimal safe plan
FAST = ["agents.params.p_min=0.1", "shield.params.p_min=0.1", "agents.params.num_runs=1", "shield.params.num_runs=1"]
SCENARIO = dict(num_agents=2, constraints=["separation", "resource", "connectivity"])


def _scenario():
    return registry.make_scenario("coop_game/Grid4x4-v0", num_envs=1, **SCENARIO)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A training run of one seed (its run directory: config.yaml, seed-0/)."""
    out = tmp_path_factory.mktemp("train")
    return train_main(str(CFG), [*FAST, f"out_dir={out}", "seeds=[0]", "train.total_env_steps=1200",
                                 "train.progress=false", "train.tensorboard=false"], None)


def _eval(run: Path, out: Path, *overrides: str) -> list[dict]:
    """``coopsim eval RUN/config.yaml 'seeds=[0]' --checkpoint RUN/seed-0`` (train's "next:" line), 5 episodes;
    the episodes' metrics.jsonl rows."""
    d = eval_main(str(run / "config.yaml"), ["seeds=[0]", "episodes=5", f"out_dir={out}", *overrides],
                  str(run / "seed-0"), progress=False)
    return read_jsonl(d / "metrics.jsonl")


def test_eval_of_a_trained_policy_under_its_own_config_equals_the_oracle_shield(trained, tmp_path):
    own = _eval(trained, tmp_path / "own")
    oracle = _eval(trained, tmp_path / "oracle", "shield.id=oracle-v0", "shield.params={}")
    prior_only = _eval(trained, tmp_path / "prior", "shield.params.learn=false")  # what the fresh shield certified
    ret = lambda rows: np.array([r["episode_return"] for r in rows])  # noqa: E731
    # the trained policy itself: exactly the oracle shield's episodes (neither shield changes an action)
    np.testing.assert_allclose(ret(own), ret(oracle), rtol=0, atol=1e-9)
    assert all(r["shield/interventions"] == 0 and r["violations"] == 0 for r in own + oracle), own
    v_star = float(np.mean([r["optimal_return"] for r in own]))
    assert v_star == pytest.approx(7.05, abs=0.01)
    assert ret(own).mean() > 0.9 * v_star, ret(own)
    # before the fix the run's shield knew the prior sets only: the policy was blocked (0.1, 14 interventions)
    assert ret(prior_only).mean() < 1.0 and ret(own).mean() > ret(prior_only).mean() + 5.0, (ret(own), ret(prior_only))
    assert all(r["shield/interventions"] > 0 for r in prior_only)
    summary = json.loads((next((tmp_path / "own").iterdir()) / "summary.json").read_text())
    assert summary["totals"]["shield/changed_agents"] == 0


def test_run_parts_with_a_checkpoint_give_the_shield_the_checkpoints_counts(trained):
    """``coopsim run CONFIG --checkpoint`` and ``coopsim eval`` build RunParts: the shield certifies with the loaded
    counts (the same object the agent keeps learning in), not with an empty model."""
    cfg = load_config(trained / "config.yaml", ["seeds=[0]"])
    parts = RunParts(cfg, checkpoint=str(trained / "seed-0"))
    try:
        assert parts.agent.model.tries.sum() > 0
        parts.shield.reset(0, parts.scenario)
        assert parts.shield.model is parts.agent.model
        assert parts.shield.n_remove == parts.agent.model.n_remove == 106
    finally:
        parts.close()


def test_reset_adopts_the_offered_model_only_where_it_should():
    sc = _scenario()
    ag = registry.make_component("agent", "graph_safe-v0", sc, num_runs=360)
    assert offered_model(sc) is ag.model
    fresh = CertificateShield(num_runs=360)
    assert fresh.model is None
    fresh.reset(0, sc)
    assert fresh.model is ag.model
    # the learner replaces its model (a resumed trainer does): the adopted one follows at the next reset
    ag.model = PlausibleModel(*ag.model.shape, num_runs=360)
    fresh.reset(1, sc)
    assert fresh.model is ag.model
    # prior only, the oracle, another scenario, no scenario: nothing adopted
    off = CertificateShield(learn=False)
    off.reset(0, sc)
    assert off.model is None
    oracle = OracleShield()
    oracle.reset(0, sc)
    assert oracle.model is None
    other = CertificateShield()
    other.reset(0, _scenario())
    assert other.model is None
    CertificateShield().reset(0, None)
    # a model shared explicitly (coopsim train) is kept
    mine = PlausibleModel(*ag.model.shape, num_runs=360)
    explicit = CertificateShield(num_runs=360)
    explicit.share_model(mine)
    explicit.reset(0, sc)
    assert explicit.model is mine
    # nothing is kept alive by the offer
    del ag
    gc.collect()
    assert offered_model(sc) is None
    offer_model(None, object())  # a key that cannot be weakly referenced: no offer, no error


def test_a_stricter_shield_keeps_its_own_removal_threshold_with_the_learners_counts():
    sc = _scenario()
    ag = registry.make_component("agent", "graph_safe-v0", sc, num_runs=1, p_min=0.1)
    shield = CertificateShield(num_runs=360, p_min=0.1)
    with pytest.warns(UserWarning, match="stricter than the learner's 106"):
        shield.reset(0, sc)
    assert shield.model is ag.model and shield.n_remove == 165 > ag.model.n_remove == 106
    # an action tried 106 times without some prior outcome: ruled out for the learner, still plausible for the shield
    sc.reset(seed=0)
    state = sc.constraints()
    c, a = int(state.cells[0, 0]), 1
    k = int(np.flatnonzero(state.outcome_mask[0, 0, a])[0])
    ag.model.tries[c, a] = 106
    ag.model.seen[c, a, k] = 106
    assert state.outcome_mask[0, 0, a].sum() > 1
    learner = ag.model.plausible(state)[0, 0, a]
    certifier = shield.plausible(state)[0, 0, a]
    assert learner.sum() == 1 and (certifier == state.outcome_mask[0, 0, a]).all()
