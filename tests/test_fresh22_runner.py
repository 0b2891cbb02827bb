"""Fixes from the fresh22 newcomer test (/work/exp/fresh22_findings.md, defects 1, 5, 6, 7):

1. ``coopsim run`` no longer warns "evaluating an untrained policy" for agents that learn during the run
   (``graph_safe-v0``, ``safe_baselines/iql-v0``); PPO/QMIX-type learners, and the online ones in greedy
   (no-learning) mode, still get it.
2. a ``scenario.params.max_steps`` override that the top-level ``max_steps`` would silently replace is refused.
3. a key given twice among the command-line overrides is refused (as ``sweep`` refuses a ``--grid`` key twice).
4. ``train.*`` settings that ``coopsim run`` / ``eval`` ignore get a one-line warning naming them.
"""
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import check_unique_overrides, load_config
from coopsim.platform.runner import ignored_train_warning, learns_online, untrained_learner_warning

ROOT = Path(__file__).resolve().parents[1]
SAFE = ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml"
IQL = ROOT / "configs" / "safety" / "baselines" / "coop-grid4x4-2ag-all-iql-noshield.yaml"
MAPPO = ROOT / "configs" / "ppo" / "linewalk-mappo.yaml"
LINE = ROOT / "configs" / "examples" / "line-random.yaml"
MAPF = ROOT / "configs" / "mapf" / "random-32-32-10.yaml"
TINY = ["train.total_env_steps=256", "train.num_envs=4", "train.rollout_steps=32", "train.epochs=1",
        "train.checkpoint_every=128", "train.progress=false", "train.tensorboard=false"]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


def one_line_error(r) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def agent_class(cfg):
    from coopsim.platform import registry
    from coopsim.platform.runner import _unwrap

    return _unwrap(registry.spec("agent", cfg.agents.id).load())


# --- 1. online learners ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [SAFE, IQL])
def test_online_learners_get_no_untrained_policy_warning(path):
    cfg = load_config(path)
    assert learns_online(agent_class(cfg), cfg.agents.params)
    assert untrained_learner_warning(cfg, None) is None


def test_offline_learners_keep_the_untrained_policy_warning():
    for path in (MAPPO, ROOT / "configs" / "smac" / "3m-qmix.yaml"):
        cfg = load_config(path)
        assert not learns_online(agent_class(cfg), cfg.agents.params)
        w = untrained_learner_warning(cfg, None)
        assert w.startswith(f"agent '{cfg.agents.id}' is a learner and no checkpoint was given: evaluating an "
                            "untrained policy"), w
        assert untrained_learner_warning(cfg, "policy.pt") is None
    assert untrained_learner_warning(load_config(LINE), None) is None  # not a learner


@pytest.mark.parametrize("path", [SAFE, IQL])
def test_online_learner_in_greedy_mode_learns_nothing_and_is_warned(path):
    cfg = load_config(path, ["agents.params.greedy=true"])
    assert not learns_online(agent_class(cfg), cfg.agents.params)
    w = untrained_learner_warning(cfg, None)
    assert "evaluating an untrained policy" in w and "agents.params.greedy is true" in w
    assert untrained_learner_warning(cfg, "policy.pt") is None


def test_online_learner_with_init_policy_is_told_run_does_not_read_it(tmp_path):
    pol = tmp_path / "policy.pt"
    w = untrained_learner_warning(load_config(SAFE, [f"train.init_policy={pol}"]), None)
    assert "learns during the run, starting from scratch" in w and f"--checkpoint {pol}" in w
    assert "untrained" not in w


def test_run_of_the_safety_configs_does_not_warn(tmp_path):
    for path in (SAFE, IQL):
        r = cli("run", path, "seeds=[0]", "episodes=2", f"out_dir={tmp_path}", "--no-progress")
        assert r.returncode == 0, r.stderr
        assert "untrained" not in r.stderr and "warning" not in r.stderr, r.stderr
    r = cli("run", MAPPO, "seeds=[0]", "episodes=1", f"out_dir={tmp_path}", "--no-progress")
    assert r.returncode == 0 and "evaluating an untrained policy" in r.stderr, r.stderr


# --- 2. max_steps and scenario.params.max_steps -------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [["max_steps=500", "scenario.params.max_steps=10"],
                                       ["scenario.params.max_steps=10", "max_steps=500"]])
def test_conflicting_scenario_max_steps_override_is_refused(overrides):
    with pytest.raises(ConfigError) as info:
        load_config(LINE, overrides)
    msg = str(info.value)
    assert info.value.key == "scenario.params.max_steps" and info.value.value == 10
    assert msg.startswith("command-line override 'scenario.params.max_steps=10' (config ")
    assert "'max_steps=500' on the command line" in msg
    assert "keep max_steps=500 and drop scenario.params.max_steps, or give max_steps=10 instead" in msg


def test_scenario_max_steps_override_against_the_files_max_steps_is_refused():
    with pytest.raises(ConfigError) as info:
        load_config(LINE, ["scenario.params.max_steps=10"])
    assert "max_steps: 40 in the file" in str(info.value) and "give max_steps=10 instead" in str(info.value)
    with pytest.raises(ConfigError, match="conflicts with the top-level max_steps"):  # set with its parent key
        load_config(LINE, ["scenario.params={num_agents: 4, length: 10, max_steps: 10}"])


def test_agreeing_or_documented_max_steps_are_accepted(tmp_path):
    assert load_config(LINE, ["scenario.params.max_steps=40"]).scenario_params()["max_steps"] == 40
    assert load_config(LINE, ["max_steps=30", "scenario.params.max_steps=30.0"]).scenario_params()["max_steps"] == 30
    # the top-level max_steps overrides a file's scenario.params.max_steps, as documented; both in one file (a
    # run's stored config.yaml holds both after such an override) stay accepted, the top-level value counts
    f = tmp_path / "c.yaml"
    f.write_text(LINE.read_text().replace("length: 10}", "length: 10, max_steps: 20}").replace("max_steps: 40\n", ""))
    assert load_config(f, ["max_steps=30"]).scenario_params()["max_steps"] == 30
    f.write_text(LINE.read_text().replace("length: 10}", "length: 10, max_steps: 20}"))
    assert load_config(f).scenario_params()["max_steps"] == 40


def test_conflicting_max_steps_through_the_cli_and_a_sweep_grid():
    err = one_line_error(cli("run", LINE, "seeds=[0]", "max_steps=500", "scenario.params.max_steps=10"))
    assert "key 'scenario.params.max_steps'" in err and "max_steps=500" in err
    err = one_line_error(cli("sweep", LINE, "--grid", "scenario.params.max_steps=10,20"))
    assert err.startswith("error: --grid value 'scenario.params.max_steps=10' (config ")
    assert "max_steps: 40 in the file" in err


# --- 3. a key given twice on the command line ---------------------------------------------------------------------

@pytest.mark.parametrize("overrides, key, first, second", [
    (["episodes=2", "episodes=3"], "episodes", "episodes=2", "episodes=3"),
    (["seeds=[0]", "episodes=1", " seeds =[1]"], "seeds", "seeds=[0]", " seeds =[1]"),
    (["scenario.params.num_agents=6", "scenario.params.num_agents=6"], "scenario.params.num_agents",
     "scenario.params.num_agents=6", "scenario.params.num_agents=6"),
])
def test_override_key_given_twice_is_refused(overrides, key, first, second):
    with pytest.raises(ConfigError) as info:
        check_unique_overrides(overrides, LINE)
    assert info.value.key == key
    assert str(info.value) == (f"command-line override '{second}' (config {LINE}): key '{key}': is given twice on the "
                               f"command line ('{first}' and '{second}'); give it once, e.g. {second.strip()}")
    load_config(LINE, overrides)  # from Python, the last one counts (lists built as [*BASE, "seeds=[3]"])


def test_a_key_beside_its_parent_or_child_is_not_a_repeat():
    ov = ["train={lr: 0.1}", "train.epochs=2"]
    check_unique_overrides(ov, MAPPO)
    assert load_config(MAPPO, ov).train == {"lr": 0.1, "epochs": 2}


def test_repeated_override_through_the_cli():
    err = one_line_error(cli("validate", MAPF, "scenario.params.num_agents=64", "scenario.params.num_agents=32"))
    assert "key 'scenario.params.num_agents': is given twice on the command line" in err
    assert "'scenario.params.num_agents=64' and 'scenario.params.num_agents=32'" in err
    for cmd in (["run"], ["sweep", "--grid", "seeds=0,1"], ["eval", "--checkpoint", "nope.pt"], ["train"]):
        err = one_line_error(cli(*cmd, LINE, "episodes=2", "episodes=3"))
        assert "key 'episodes': is given twice on the command line ('episodes=2' and 'episodes=3')" in err, cmd


def test_sweep_with_a_fixed_name_still_runs(tmp_path):
    # the sweep names each run itself (name=<name>-<grid values>): the user's name=... must not reach the child
    # `coopsim run` as a second name
    r = cli("sweep", LINE, "--grid", "seeds=0,1", "name=mine", "episodes=1", f"out_dir={tmp_path}", "--jobs", "2")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert sorted(p.name.rsplit("-", 2)[0] for p in tmp_path.iterdir() if not p.name.startswith("compare-")) == \
        ["mine-0", "mine-1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished tiny MAPPO training, its config given scenario.params.max_steps (20) and a top-level max_steps
    override (16): the stored config.yaml holds both."""
    from coopsim.platform.training import train_main

    d = tmp_path_factory.mktemp("fresh22")
    cfg = d / "lw.yaml"
    cfg.write_text(MAPPO.read_text().replace("length: 8}", "length: 8, max_steps: 20}").replace("max_steps: 32\n", ""))
    run = train_main(str(cfg), [f"out_dir={d / 'runs'}", "max_steps=16", *TINY], None)
    return cfg, Path(run)


def test_resume_still_works(trained):
    cfg, run = trained
    text = (run / "config.yaml").read_text()
    assert "max_steps: 16" in text and "max_steps: 20" in text
    r = cli("train", "--resume", run)  # the config left out: the run's config.yaml
    assert r.returncode == 0 and "already complete" in r.stdout, (r.stdout, r.stderr)
    r = cli("train", cfg, f"out_dir={run.parent}", "max_steps=16", *TINY, "--resume", run)
    assert r.returncode == 0 and "already complete" in r.stdout, (r.stdout, r.stderr)
    r = cli("train", "--resume", run, "train.total_env_steps=256")  # an override in CONFIG's place
    assert r.returncode == 0 and "already complete" in r.stdout, (r.stdout, r.stderr)
    err = one_line_error(cli("train", "--resume", run, "train.total_env_steps=256", "train.total_env_steps=512"))
    assert "key 'train.total_env_steps': is given twice" in err


# --- 4. train.* settings that run / eval ignore -------------------------------------------------------------------

def test_train_keys_for_an_agent_that_cannot_train_are_named():
    w = ignored_train_warning(load_config(MAPF, ["train.lr=0.1"]), ["train.lr=0.1"])
    assert w == ("agent 'mapf/prioritized-v0' cannot be trained, so `coopsim run` ignores train.lr (the train: "
                 "section is read by `coopsim train`, which needs a learner: `coopsim list agent` shows the agents)")
    w = ignored_train_warning(load_config(LINE, ["train={lr: 0.1, epochs: 2}"]), [])  # the file's section too
    assert "ignores train.lr, train.epochs (" in w
    assert ignored_train_warning(load_config(MAPF), []) is None


def test_train_overrides_for_a_learner_are_named_but_not_its_files_section(tmp_path):
    assert ignored_train_warning(load_config(MAPPO), []) is None  # the file's train: is for `coopsim train`
    ov = ["train.lr=0.1", "seeds=[0]", "train.epochs=2"]
    assert ignored_train_warning(load_config(MAPPO, ov), ov) == (
        "`coopsim run` ignores train.lr, train.epochs given on the command line: only `coopsim train` reads the "
        "train: section")
    ov = [f"train.init_policy={tmp_path / 'p.pt'}"]  # the untrained-policy warning names it already
    assert ignored_train_warning(load_config(MAPPO, ov), ov) is None
    assert "train.init_policy" in ignored_train_warning(load_config(MAPPO, ov), ov, "policy.pt")


def test_run_and_eval_warn_about_ignored_train_keys(tmp_path, trained):
    r = cli("run", LINE, "seeds=[0]", "episodes=1", "train.lr=0.1", f"out_dir={tmp_path}", "--no-progress")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "train.lr" in ln]
    assert len(lines) == 1 and lines[0].startswith("warning: agent 'random-v0' cannot be trained, so `coopsim run` "
                                                   "ignores train.lr"), r.stderr
    cfg, run = trained
    r = cli("eval", run / "config.yaml", "--checkpoint", run / "seed-0", "episodes=1", "train.lr=0.5",
            f"out_dir={tmp_path}", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "warning: `coopsim eval` ignores train.lr given on the command line" in r.stderr, r.stderr
