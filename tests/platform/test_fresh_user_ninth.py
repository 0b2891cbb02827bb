"""Fixes from the ninth new-user pass: the override an error blames, emoji codes echoed verbatim, hints with the
executable as called, the reward options' consistency."""
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SMAC = ROOT / "configs" / "smac" / "3m-focus-fire.yaml"


def blamed(overrides):
    with pytest.raises(ConfigError) as info:
        load_config(SMAC, overrides)
    return str(info.value), info.value.key


@pytest.mark.parametrize("overrides, text, key", [
    (["episodes=1", "seeds=[0]", "episodes=-1"], "override 'episodes=-1'", "episodes"),  # the last one counts
    (["seeds=[0]", "seeds=[-1]"], "override 'seeds=[-1]'", "seeds"),
    (["train.total_env_steps=3000", "train=5"], "override 'train=5'", "train"),  # exact key before a child key
    (["episodes=1", "max_steps=100000000"], "override 'max_steps=100000000'", "max_steps"),  # passed on
])
def test_the_override_that_supplied_the_value_is_blamed(overrides, text, key):
    msg, k = blamed(overrides)
    assert text in msg and k == key
    if key == "max_steps":
        assert "key 'max_steps' (passed on to scenario.params.max_steps)" in msg


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_sweep_blames_the_grid_value_and_emoji_codes_stay_verbatim():
    r = cli("sweep", SMAC, "seeds=[0]", "--grid", "episodes=1,0")
    assert r.returncode == 2 and "error: --grid value 'episodes=0'" in r.stderr, r.stderr
    r = cli("validate", SMAC, "scenario.params.map_name=:smile:")
    assert r.returncode == 2 and ":smile:" in r.stderr and "\U0001F604" not in r.stderr, r.stderr


def test_reward_negative_scale_needs_the_negative_reward():
    with pytest.raises(ConfigError, match="reward_only_positive") as info:
        load_config(SMAC, ["scenario.params.reward_negative_scale=2"])
    assert info.value.key.endswith("reward_negative_scale")
    load_config(SMAC, ["scenario.params.reward_negative_scale=2", "scenario.params.reward_only_positive=false"])
    with pytest.raises(ConfigError, match="reward_sparse"):
        load_config(SMAC, ["scenario.params.reward_negative_scale=2", "scenario.params.reward_only_positive=false",
                           "scenario.params.reward_sparse=true"])


def test_memory_check_honours_the_address_space_limit():
    """`ulimit -v` (RLIMIT_AS) caps what the memory pre-checks count as available, as containers' limits do."""
    import resource

    limit = 3 * 2**30
    code = "from coopsim.platform.memory import available_memory_bytes as a; print(a())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY)))
    assert r.returncode == 0, r.stderr
    assert 0 < int(r.stdout) < limit


def test_component_errors_name_the_override_and_the_scenario_id(tmp_path):
    line = ROOT / "configs" / "ppo" / "linewalk-mappo.yaml"
    r = cli("train", line, f"out_dir={tmp_path}", "train.total_env_steps=2000", "agents.params.actor=asn")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    msg = " ".join(r.stderr.split())
    assert f"command-line override 'agents.params.actor=asn' (config {line})" in msg
    assert "line/LineWalk-v0 has none" in msg
    r = cli("train", ROOT / "configs" / "smac" / "3m-mappo.yaml", f"out_dir={tmp_path}", "agents.params.actor=asn",
            "agents.params.comm.module=coopsim.agents.ppo.hook_examples:MeanBroadcast")
    assert r.returncode == 2 and "actor 'asn' takes no comm module" in " ".join(r.stderr.split())


def test_a_policy_of_another_learner_says_what_it_is(tmp_path):
    import torch

    from coopsim.agents.ppo import PPOAgent
    from coopsim.agents.qmix.agent import POLICY_FORMAT
    from coopsim.platform.registry import make_scenario

    torch.save({"format": POLICY_FORMAT}, tmp_path / "policy.pt")
    with pytest.raises(ConfigError, match="it is a coopsim.qmix/1 policy, which a config with agents.id qmix/qmix-v0"):
        PPOAgent(make_scenario("smac/3m-v0", num_envs=1)).load(tmp_path / "policy.pt")


def test_progress_text_says_its_numbers_are_the_last_episode():
    from coopsim.platform.runner import _bar_text

    assert _bar_text("x", {"win": 0.0, "episode_return": 3.5, "other": 1}) == "x  last episode: win=0  episode_return=3.5"
