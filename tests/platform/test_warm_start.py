"""`train.init_policy` (warm start / fine-tuning): every seed starts from the given policy's weights, a resume does
not read it again, and a policy that does not fit is refused with the key and the reason before anything is
written."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config
from coopsim.platform.training import build_trainer, train_main

REPO = Path(__file__).resolve().parents[2]
CFG = str(REPO / "configs" / "ppo" / "linewalk-mappo.yaml")
TINY = ["train.total_env_steps=256", "train.num_envs=4", "train.rollout_steps=32", "train.epochs=1",
        "train.checkpoint_every=128", "train.progress=false", "train.tensorboard=false", "seeds=[0]"]


def cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    return train_main(CFG, [f"out_dir={out}", *TINY, "seeds=[3]"], None)


def net_of(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=False)["net"]


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_each_seed_starts_from_the_policy_and_training_moves_on_from_it(source_run, tmp_path):
    src = net_of(source_run / "seed-3" / "policy.pt")
    for seed in (0, 7):  # another seed's random init would differ; the warm start is the same for each seed
        cold = build_trainer(load_config(CFG, TINY), seed)[0].agent.net.state_dict()
        warm = build_trainer(load_config(CFG, [*TINY, f"train.init_policy={source_run / 'seed-3'}"]), seed)[0]
        assert same(warm.agent.net.state_dict(), src) and not same(cold, src)
        # the value normalisation comes with it (what the critic's outputs are scaled by)
        vn = torch.load(source_run / "seed-3" / "policy.pt", weights_only=False)["value_norm"]
        assert same(warm.agent.value_norm.state_dict(), vn)
    # a fine-tuning run: its first update starts from the source weights (lr 0: the weights stay exactly them)
    run = train_main(CFG, [f"out_dir={tmp_path}", *TINY, "train.lr=1e-12", "train.anneal_lr=false",
                           f"train.init_policy={source_run / 'seed-3' / 'policy.pt'}"], None)
    after = net_of(run / "seed-0" / "policy.pt")
    assert all(torch.allclose(after[k], src[k], atol=1e-6) for k in src)


def test_qmix_target_networks_copy_the_warm_started_weights(tmp_path):
    qcfg = str(REPO / "configs" / "smac" / "3m-qmix.yaml")
    base = ["train.num_envs=2", "train.progress=false", "train.tensorboard=false"]
    donor = build_trainer(load_config(qcfg, base), 11)[0]
    donor.agent.save(tmp_path / "q.pt")
    tr = build_trainer(load_config(qcfg, [*base, f"train.init_policy={tmp_path / 'q.pt'}"]), 0)[0]
    assert same(tr.agent.net.state_dict(), donor.agent.net.state_dict())
    assert same(tr.target_net.state_dict(), donor.agent.net.state_dict())
    assert same(tr.target_mixer.state_dict(), donor.agent.mixer.state_dict())


def test_a_policy_that_does_not_fit_is_refused_with_the_key(source_run, tmp_path):
    pol = str(source_run / "seed-3" / "policy.pt")
    with pytest.raises(ConfigError, match=r"key 'train.init_policy'.*hidden.*\(agents.params.hidden\)"):
        build_trainer(load_config(CFG, [*TINY, f"train.init_policy={pol}", "agents.params.hidden=[32]"]), 0, file=CFG)
    with pytest.raises(ConfigError, match=r"key 'train.init_policy'.*(no such|not found|does not exist)"):
        build_trainer(load_config(CFG, [*TINY, f"train.init_policy={tmp_path / 'nope.pt'}"]), 0, file=CFG)
    # another learner's policy (QMIX) into a PPO agent
    q = build_trainer(load_config(str(REPO / "configs" / "smac" / "3m-qmix.yaml"), ["train.num_envs=2"]), 0)[0]
    q.agent.save(tmp_path / "q.pt")
    with pytest.raises(ConfigError, match=r"key 'train.init_policy'.*PPO"):
        build_trainer(load_config(CFG, [*TINY, f"train.init_policy={tmp_path / 'q.pt'}"]), 0, file=CFG)
    # on the command line: one line, exit 2, nothing written
    r = cli("train", CFG, *TINY, f"out_dir={tmp_path / 'out'}", f"train.init_policy={pol}", "agents.params.hidden=[32]")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "train.init_policy" in r.stderr and not (tmp_path / "out").exists()


def test_relative_path_is_found_beside_the_config_and_stored_absolute(source_run, tmp_path):
    cfg_dir = tmp_path / "exp"
    cfg_dir.mkdir()
    shutil.copytree(source_run / "seed-3", cfg_dir / "donor")
    cfg = yaml.safe_load(Path(CFG).read_text())
    cfg["train"]["init_policy"] = "donor"
    (cfg_dir / "ft.yaml").write_text(yaml.safe_dump(cfg))
    run = train_main(str(cfg_dir / "ft.yaml"), [f"out_dir={tmp_path / 'runs'}", *TINY], None)  # from another cwd
    stored = yaml.safe_load((run / "config.yaml").read_text())["train"]["init_policy"]
    assert Path(stored).is_absolute() and Path(stored) == (cfg_dir / "donor").resolve()


def test_a_resume_continues_its_checkpoint_without_the_init_policy(source_run, tmp_path):
    donor = tmp_path / "donor.pt"
    shutil.copy(source_run / "seed-3" / "policy.pt", donor)
    run = train_main(CFG, [f"out_dir={tmp_path}", *TINY, f"train.init_policy={donor}"], None)
    donor.unlink()  # gone: a resume must not need it
    resumed = train_main(CFG, [*TINY, f"train.init_policy={donor}", "train.total_env_steps=512"], str(run))
    import json

    assert json.loads((resumed / "seed-0" / "train_summary.json").read_text())["env_steps"] >= 512


def test_qmix_architecture_mismatch_names_the_key_not_a_torch_error(tmp_path):
    qcfg = str(REPO / "configs" / "smac" / "3m-qmix.yaml")
    base = ["train.num_envs=2", "train.progress=false", "train.tensorboard=false"]
    build_trainer(load_config(qcfg, base), 0)[0].agent.save(tmp_path / "q.pt")
    for over, key in (("agents.params.hidden=32", "hidden"), ("agents.params.mixing_embed=16", "mixing_embed"),
                      ("agents.params.obs_last_action=false", "obs_last_action")):
        with pytest.raises(ConfigError, match=rf"key 'train.init_policy'.*{key}=.*\(agents.params.{key}\)"):
            build_trainer(load_config(qcfg, [*base, over, f"train.init_policy={tmp_path / 'q.pt'}"]), 0, file=qcfg)
    # the same check serves coopsim eval --checkpoint: one line, exit 2
    r = cli("eval", qcfg, "agents.params.hidden=32", "episodes=1", "--checkpoint", str(tmp_path / "q.pt"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "agents.params.hidden" in r.stderr, r.stderr


def test_missing_file_is_named_and_a_resume_checks_it_before_training(source_run, tmp_path):
    missing = tmp_path / "gone.pt"
    with pytest.raises(ConfigError, match=f"cannot warm-start from {missing}"):
        build_trainer(load_config(CFG, [*TINY, f"train.init_policy={missing}"]), 0, file=CFG)
    donor = tmp_path / "donor.pt"
    shutil.copy(source_run / "seed-3" / "policy.pt", donor)
    run = train_main(CFG, [f"out_dir={tmp_path}", *TINY, "seeds=[0,1]", f"train.init_policy={donor}"], None)
    shutil.rmtree(run / "seed-1")  # seed 1 never started (as after a Ctrl-C during seed 0)
    donor.unlink()
    before = (run / "seed-0" / "checkpoint.pt").read_bytes()
    with pytest.raises(ConfigError, match=f"train.init_policy.*cannot warm-start from {donor}"):
        train_main(CFG, [*TINY, "seeds=[0,1]", f"train.init_policy={donor}", "train.total_env_steps=512"], str(run))
    assert (run / "seed-0" / "checkpoint.pt").read_bytes() == before  # seed 0 did not train on first


def test_run_says_init_policy_is_for_train(source_run):
    from coopsim.platform.runner import untrained_learner_warning

    pol = str(source_run / "seed-3" / "policy.pt")
    w = untrained_learner_warning(load_config(CFG, [f"train.init_policy={pol}"]), None)
    assert f"train.init_policy ({pol}) is read by `coopsim train` only" in w and f"--checkpoint {pol}" in w
    assert "init_policy" not in untrained_learner_warning(load_config(CFG), None)


def test_time_to_win_refuses_a_bad_init_policy_before_making_its_run_dir(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import smac_time_to_win

    with pytest.raises(ConfigError, match="train.init_policy"):
        smac_time_to_win.main([str(REPO / "configs" / "smac" / "3m-mappo.yaml"), "--seeds", "0",
                               f"train.init_policy={tmp_path / 'nope.pt'}", f"out_dir={tmp_path / 'runs'}"])
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
