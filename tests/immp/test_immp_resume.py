"""Fresh-user pass 35 (F2): `coopsim train --resume` of IMMP and of its decentralized-PPO baseline was not exact.
The agent's per-episode memory (the one-step window, the high-level planner's plans and goal orders) was not in
the checkpoint, so the planner replanned every env mid-episode and the first resumed iteration differed. The
trainer now saves the agent's runtime state; a resumed trainer continues bit for bit."""
import io

import pytest
import torch

from coopsim.platform.config import load_config
from coopsim.platform.training import build_trainer

SMALL = ["scenario.params.random_size=[8,10]", "scenario.params.num_agents=4", "scenario.params.num_goals=2",
         "scenario.params.max_steps=20", "train.num_envs=2", "train.rollout_steps=8", "train.epochs=1",
         "train.minibatches=2"]


@pytest.mark.parametrize("config", ["configs/mapf/immp-train-immp.yaml", "configs/mapf/immp-train-dppo.yaml"])
def test_an_immp_trainer_resumes_from_its_state_dict_exactly(config):
    cfg = load_config(config, SMALL)
    tr, _ = build_trainer(cfg, 0)
    for _ in range(3):  # 24 steps: mid-episode (max_steps 20) with plans made and goals visited
        tr.train_iteration()
    buf = io.BytesIO()
    torch.save(tr.state_dict(), buf)
    buf.seek(0)
    again, _ = build_trainer(cfg, 0)
    again.load_state_dict(torch.load(buf, weights_only=False))
    for _ in range(4):  # on into the resumed episodes and past their resets
        a, b = tr.train_iteration(), again.train_iteration()
        a, b = ({k: v for k, v in s.items() if not k.startswith("time/")} for s in (a, b))
        assert a == b
    sa, sb = tr.net.state_dict(), again.net.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert again.agent.hl.core is again.core  # the restored plans are bound to the restored core
