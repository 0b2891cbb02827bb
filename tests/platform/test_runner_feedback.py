"""The runner closes the feedback path: a rate-adaptive team receives its channel's per-sender delivery feedback."""

from coopsim.platform.config import validate_config
from coopsim.platform.runner import RunParts, run_episode


def test_runner_passes_channel_feedback_to_the_team(tmp_path, monkeypatch):
    cfg = validate_config({
        "name": "fb", "scenario": {"id": "mpe/simple_spread-v0", "params": {"num_agents": 3}},
        "agents": {"id": "comm/broadcast-v0"},
        "channel": {"id": "bandwidth-v0", "params": {"trace": {"kind": "constant", "rate": 4000}, "queue_packets": 2}},
        "out_dir": str(tmp_path), "max_steps": 10,
    })
    parts = RunParts(cfg)
    got = []
    monkeypatch.setattr(parts.agent, "on_feedback", lambda fb: got.append(fb))
    metrics, _ = run_episode(parts, 0)
    assert len(got) == metrics["steps"] == 10
    delivered = sum(int(fb.delivered_copies.sum()) for fb in got)
    lost = sum(int(fb.lost_copies.sum()) for fb in got)
    # every copy whose fate was reported is counted in the channel's own totals
    assert delivered <= metrics["comm/delivered_copies"] and lost <= metrics["comm/lost_copies"]
    assert delivered > 0 and lost > 0  # a 4 kbit/s channel cannot carry full broadcast
