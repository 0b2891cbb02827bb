

def test_runner_counts_the_team_reward_once_per_step(tmp_path):
    """SMAC's shared reward: a won 3m episode has episode_return exactly 20 in the run's metrics (not 20 per survivor),
    and the named reward terms add up to it."""
    from coopsim.platform.config import validate_config
    from coopsim.platform.recorder import read_jsonl
    from coopsim.platform.runner import run_config

    cfg = validate_config({"name": "ff", "out_dir": str(tmp_path), "seeds": [0], "episodes": 8,
                           "scenario": {"id": "smac/3m-v0"}, "agents": {"id": "smac/focus-fire-v0"}})
    rows = read_jsonl(run_config(cfg, progress=False) / "metrics.jsonl")
    won = [r for r in rows if r["win"] == 1.0]
    assert won, "focus fire should win some 3m episodes"
    for r in won:
        assert abs(r["episode_return"] - 20.0) < 1e-3
    for r in rows:
        assert abs(r["reward/damage"] + r["reward/kill"] + r["reward/win"] - r["episode_return"]) < 1e-3
