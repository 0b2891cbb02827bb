from pathlib import Path

import pytest
import yaml

from coopsim.agents.ddacom.evaluate import load_channels
from coopsim.platform.config import load_config
from coopsim.platform.registry import make_component

CFG = Path(__file__).resolve().parents[2] / "configs" / "mpe"
RUN_CONFIGS = sorted(p for p in CFG.glob("*.yaml") if "scenario" in yaml.safe_load(p.read_text()))


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=[p.stem for p in RUN_CONFIGS])
def test_run_configs_validate(path):
    cfg = load_config(path)
    assert cfg.scenario.id.startswith("mpe/")


def test_channel_configs_build_and_span_015_to_05_of_demand():
    chans = load_channels(3)
    assert set(chans) == {"step", "sinusoid", "markov"}
    for name, (cid, params) in chans.items():
        ch = make_component("channel", cid, **params)
        ch.reset(0, num_envs=2, num_agents=3, dt_s=0.1)
        cap = ch.capacity[:400] / 25600
        assert cap.min() >= 0.15 - 1e-3 and cap.max() <= 0.5 + 1e-3, name
        assert ch.params.latency_bound_s == 0.1 and ch.params.queue_packets == 16
