"""The certificate shield's counters in metrics.jsonl are per episode (what it did during that episode); its totals
over the run are in summary.json under `totals`."""
import json
from pathlib import Path

import numpy as np

from coopsim.platform import registry
from coopsim.platform.config import load_config
from coopsim.platform.recorder import read_jsonl
from coopsim.platform.runner import run_config

CFG = Path(__file__).resolve().parents[2] / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"


def test_rows_carry_per_episode_shield_counts_and_the_summary_the_totals(tmp_path):
    # random agents on the constrained grid: the shield changes some of their actions in most episodes
    cfg = load_config(CFG, [f"out_dir={tmp_path}", "seeds=[0,1]", "episodes=3", "agents.id=random-v0", "agents.params={}"])
    d = run_config(cfg, progress=False)
    rows = read_jsonl(d / "metrics.jsonl")
    assert len(rows) == 6
    changed = [r["shield/changed_agents"] for r in rows]
    assert sum(changed) > 0 and sum(1 for c in changed if c > 0) >= 2
    # one env: the agents the shield changed during an episode are the runner's count of that episode's interventions
    assert changed == [float(r["shield/interventions"]) for r in rows]
    assert all(0 < r["shield/max_neighbourhood"] <= cfg.scenario.params["num_agents"] for r in rows)
    totals = json.loads((d / "summary.json").read_text())["totals"]
    assert totals["shield/changed_agents"] == sum(changed)
    assert totals["shield/filter_calls"] == sum(r["steps"] for r in rows)
    assert totals["shield/max_neighbourhood"] == max(r["shield/max_neighbourhood"] for r in rows)
    assert 0 < totals["shield/intervention_steps"] <= sum(changed)


def test_reset_starts_the_episode_counts_at_zero_and_keeps_the_totals():
    sc = registry.make_scenario("coop_game/Grid4x4-v0", num_envs=1, num_agents=2,
                                constraints=["separation", "resource", "connectivity"])
    shield = registry.make_component("shield", "certificate-v0")
    agent = registry.make_component("agent", "random-v0", sc)
    per_episode = []
    for ep in range(3):
        obs = sc.reset(seed=ep)
        agent.reset(ep)
        shield.reset(ep, sc)
        assert shield.stats() == {"shield/changed_agents": 0.0, "shield/max_neighbourhood": 0.0}
        n = 0
        while not sc.done.all():
            a, _ = agent.act(obs, None)
            safe, cert = shield.filter(sc.constraints(), a)
            n += int(np.count_nonzero(cert.changed))
            obs = sc.step(safe).obs
        assert shield.stats()["shield/changed_agents"] == n
        per_episode.append(n)
    assert shield.run_stats()["shield/changed_agents"] == sum(per_episode)
