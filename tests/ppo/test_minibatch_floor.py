"""`train.minibatches` that would leave < 2 samples per minibatch is refused before any run dir is written."""
import subprocess
import sys

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config
from coopsim.platform.training import build_trainer

CFG = "configs/ppo/linewalk-mappo.yaml"


def test_too_many_minibatches_is_a_config_error():
    cfg = load_config(CFG, ["train.minibatches=4096", "train.num_envs=4", "train.rollout_steps=8"])
    n = 3 if cfg.scenario.params.get("num_agents") is None else cfg.scenario.params["num_agents"]
    samples = 4 * 8 * n
    with pytest.raises(ConfigError, match=rf"key 'train\.minibatches': invalid value 4096: a rollout holds {samples} "
                                          rf"samples .*valid: 1\.\.{samples // 2}"):
        build_trainer(cfg, 0, file=CFG)


def test_largest_valid_minibatches_builds():
    cfg = load_config(CFG, ["train.num_envs=4", "train.rollout_steps=8", "train.minibatches=1"])
    trainer, _ = build_trainer(cfg, 0, file=CFG)
    most = trainer.core.num_envs * 8 * trainer.core.num_agents // 2
    cfg = load_config(CFG, ["train.num_envs=4", "train.rollout_steps=8", f"train.minibatches={most}"])
    build_trainer(cfg, 0, file=CFG)
    cfg = load_config(CFG, ["train.num_envs=4", "train.rollout_steps=8", f"train.minibatches={most + 1}"])
    with pytest.raises(ConfigError, match=rf"invalid value {most + 1}"):
        build_trainer(cfg, 0, file=CFG)


def test_cli_exit_2_and_no_run_dir(tmp_path):
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "train", CFG, f"out_dir={tmp_path}", "train.minibatches=1000",
                        "train.total_env_steps=1000"], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "key 'train.minibatches': invalid value 1000" in r.stderr
    assert not any(tmp_path.iterdir())
