"""`coopsim validate` builds the train: section's hooks as `coopsim train` would, and both say when a shaping hook's
discount differs from train.gamma (fresh-user pass, session 16)."""
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config
from coopsim.platform.training import hooks_note, train_config, trainable_class

REPO = Path(__file__).resolve().parents[2]
CFG = str(REPO / "configs" / "ppo" / "mgmapf-random16-mappo.yaml")


def _schedule(*overrides):
    cfg = load_config(CFG, list(overrides))
    return train_config(cfg, trainable_class(cfg, file=CFG)[1], file=CFG)


def test_hooks_note_builds_hooks_and_compares_discounts():
    assert hooks_note(_schedule()) is None  # the shipped config: gamma 0.99 in both places
    note = hooks_note(_schedule("train.intrinsic.params.gamma=0.5"))
    assert note.startswith("note: train.intrinsic.params.gamma = 0.5 differs from train.gamma = 0.99")
    with pytest.raises(ConfigError, match="cannot import 'foo.bar:Baz'") as e:
        hooks_note(_schedule("train.intrinsic.module=foo.bar:Baz"), file=CFG)
    assert e.value.key == "train.intrinsic.module"
    with pytest.raises(ConfigError, match="unexpected keyword argument 'bogus'") as e:
        hooks_note(_schedule("train.intrinsic.params.bogus=1"), file=CFG)
    assert e.value.key == "train.intrinsic.params"


@pytest.mark.parametrize("override, exit_code, text", [
    ("train.intrinsic.module=foo.bar:Baz", 2, "command-line override 'train.intrinsic.module=foo.bar:Baz'"),
    ("train.intrinsic.module=collections:OrderedDict", 2,
     "key 'train.intrinsic.module': collections:OrderedDict is not an IntrinsicReward hook"),
    ("train.intrinsic.module=os:getcwd", 2, "key 'train.intrinsic.module': 'os:getcwd' is a builtin_function_or_method, "
                                            "not a class"),
    ("train.intrinsic.params.scale=.nan", 2, "key 'train.intrinsic.params.scale': invalid value nan: must be a finite "
                                             "number"),
    ("train.intrinsic.params.scale=-1", 2, "scale must be a finite number > 0; got -1"),
    ("train.intrinsic.params.bogus=1", 2, "key 'train.intrinsic.params'"),
    ("train.intrinsic.params.gamma=0.5", 0, "differs from train.gamma = 0.99"),
])
def test_validate_checks_the_train_hooks(override, exit_code, text):
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "validate", CFG, override], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == exit_code and "Traceback" not in r.stderr, r.stderr
    assert text in " ".join(r.stderr.split())


def test_eval_checkpoint_directory_without_a_policy_says_what_to_give(tmp_path):
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "eval", str(REPO / "configs/smac/3m-mappo.yaml"),
                        "--checkpoint", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert " ".join(r.stderr.split()) == (f"error: {tmp_path}: key '--checkpoint': the directory holds no policy.pt or "
                                          f"checkpoint.pt: give policy.pt, checkpoint.pt or a training run's seed-<s> "
                                          f"directory")


def test_shaping_num_goals_must_match_the_scenarios(tmp_path):
    """The shaping reads the first 4 K observation entries: a K other than the scenario's would read other fields
    (status bits as distances) without any error; validate and train refuse it, naming the hook's key."""
    from coopsim.platform.training import build_trainer

    cfg = load_config(CFG, ["scenario.params.num_goals=3"])
    with pytest.raises(ConfigError, match=r"num_goals=2 differs from the scenario's num_goals=3.*"
                                          r"give train.intrinsic.params.num_goals: 3") as e:
        build_trainer(cfg, 0, file=CFG)
    assert e.value.key == "train.intrinsic.params" and e.value.file == CFG
    trainer = build_trainer(load_config(CFG, ["scenario.params.num_goals=3", "train.intrinsic.params.num_goals=3"]), 0)[0]
    assert trainer.intrinsic.k == 3
    for cmd in ("validate", "train"):
        r = subprocess.run([sys.executable, "-m", "coopsim.cli", cmd, CFG, "scenario.params.num_goals=3",
                            f"out_dir={tmp_path}"], capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "key 'train.intrinsic.params'" in r.stderr and "the scenario's num_goals=3" in r.stderr
    assert list(tmp_path.iterdir()) == []  # train wrote nothing


def test_shaping_on_a_scenario_that_is_not_mg_mapf_is_refused():
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "validate", str(REPO / "configs/smac/3m-mappo.yaml"),
                        "train.intrinsic.module=coopsim.agents.ppo.mapf_shaping:MGMAPFGoalShaping",
                        "train.intrinsic.params={num_goals: 2}"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "the scenario is not MG-MAPF (its params have no num_goals)" in r.stderr


def test_train_names_the_out_dir_override_it_cannot_write(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "train", str(REPO / "configs/ppo/linewalk-mappo.yaml"),
                        f"out_dir={blocker}"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"command-line override 'out_dir={blocker}'" in " ".join(r.stderr.split())
    assert "cannot create the run directory" in r.stderr


def test_validate_accepts_what_run_accepts_when_the_agent_cannot_be_trained():
    """A config with a train: section and an agent that cannot learn is a valid run config (run ignores train:);
    validate said "cannot be trained" and exited 2 while run ran it (fresh-user pass 18)."""
    cfg = str(REPO / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml")
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "validate", cfg, "agents.id=random-v0", "agents.params={}"],
                       capture_output=True, text=True)
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0, out
    assert "warning: agent 'random-v0' cannot be trained, so `coopsim run` ignores train." in out
    assert "`coopsim validate` does not check its values" in out
    assert "the train: section checked" not in out
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "validate", CFG], capture_output=True, text=True)
    assert r.returncode == 0 and "the train: section checked" in " ".join(r.stdout.split())
