"""train_main / eval_main: config errors naming the key, run directory contents, exact resume after a kill,
evaluation through the runner, and every shipped PPO config validating."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config
from coopsim.platform.recorder import read_jsonl
from coopsim.platform.trainer import load_checkpoint, read_metrics
from coopsim.platform.training import eval_main, train_config, train_main, trainable_class

REPO = Path(__file__).resolve().parents[2]

CFG = {
    "name": "ppo-test",
    "scenario": {"id": "line/LineWalk-v0", "params": {"num_agents": 3, "length": 7}},
    "agents": {"id": "ppo/mappo-v0", "params": {"hidden": [16], "recurrent": True}},
    "seeds": [0],
    "max_steps": 12,
    "train": {
        "total_env_steps": 20 * 8 * 8, "num_envs": 8, "rollout_steps": 8, "lr": 0.003, "epochs": 2, "minibatches": 2,
        "checkpoint_every": 64, "progress": False, "tensorboard": True,
        "intrinsic": {"module": "coopsim.agents.ppo.hook_examples:SimHashCountBonus", "params": {"beta": 0.05}},
        "aux_losses": [{"module": "coopsim.agents.ppo.hook_examples:NextObsPrediction", "params": {"coef": 0.1}}],
    },
}


def write_cfg(tmp_path, data, name="cfg.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return str(p)


@pytest.mark.parametrize("override, key, words", [
    ("train.lr=-1", "train.lr", "greater than 0"),
    ("train.epochs=abc", "train.epochs", "valid integer"),
    ("train.bogus=1", "train.bogus", "valid parameters"),
    ("train.aux_losses=[{module: nowhere.mod:X}]", "train.aux_losses.0.module", "cannot import"),
    ("agents={id: random-v0}", "agents.id", "cannot be trained; trainable agent ids:"),
])
def test_bad_train_config_names_the_key(tmp_path, override, key, words):
    with pytest.raises(ConfigError) as ei:
        train_main(write_cfg(tmp_path, {**CFG, "out_dir": str(tmp_path)}), [override], None)
    assert f"key '{key}'" in str(ei.value) and words in str(ei.value)
    assert not any(p.is_dir() for p in tmp_path.iterdir())  # nothing ran


def test_missing_train_section(tmp_path):
    data = {k: v for k, v in CFG.items() if k != "train"}
    with pytest.raises(ConfigError, match="key 'train'.*total_env_steps"):
        train_main(write_cfg(tmp_path, data), [], None)


def test_resume_after_kill_reproduces_the_uninterrupted_run(tmp_path):
    cfg = write_cfg(tmp_path, CFG)
    full = train_main(cfg, [f"out_dir={tmp_path / 'full'}"], None)
    # the same run in a child process, killed (SIGKILL) once it has logged a few iterations
    code = ("import sys; from coopsim.platform.training import train_main; "
            f"train_main({cfg!r}, ['out_dir={tmp_path / 'killed'}'], None)")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    csv_glob = lambda: list((tmp_path / "killed").glob("*/seed-0/metrics.csv"))  # noqa: E731
    deadline = time.time() + 300
    while time.time() < deadline:
        files = csv_glob()
        if files and len(files[0].read_text().splitlines()) >= 1 + 6:
            break
        assert child.poll() is None, "the child finished before it could be killed; make its budget larger"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    run = csv_glob()[0].parent.parent
    ck = load_checkpoint(run / "seed-0" / "checkpoint.pt")
    stopped_at = ck["trainer"]["iteration"]
    assert 4 <= stopped_at < 20, stopped_at  # killed mid-run, after some checkpoints
    assert train_main(cfg, [], str(run)) == run
    a, b = read_metrics(full / "seed-0"), read_metrics(run / "seed-0")
    assert len(a) == 20 and a == b  # every row, every column (except wall-clock ones), bit for bit
    pa = torch.load(full / "seed-0" / "policy.pt", weights_only=False)["net"]
    pb = torch.load(run / "seed-0" / "policy.pt", weights_only=False)["net"]
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    s = json.loads((run / "train_summary.json").read_text())
    assert s["total_env_steps_budget"] == 1280 and s["per_seed"]["0"]["env_steps"] == 1280
    assert s["per_seed"]["0"]["resumed"] and s["wall_time_s"] > 0
    # TensorBoard event files were written
    assert list((run / "seed-0" / "tb").glob("events.out.tfevents.*"))


def test_train_then_eval_through_the_runner(tmp_path):
    data = {**CFG, "seeds": [0, 1], "episodes": 2, "out_dir": str(tmp_path),
            "agents": {"id": "ppo/ippo-v0", "params": {"hidden": [16]}}}
    data["train"] = {**CFG["train"], "total_env_steps": 3 * 64, "intrinsic": None, "aux_losses": [], "tensorboard": False}
    cfg = write_cfg(tmp_path, data)
    run = train_main(cfg, [], None)
    s = json.loads((run / "train_summary.json").read_text())
    assert s["seeds"] == [0, 1] and s["total_env_steps_budget"] == 192
    for seed in (0, 1):
        sd = run / f"seed-{seed}"
        rows = read_metrics(sd)
        assert [int(r["env_steps"]) for r in rows] == [64, 128, 192]
        assert json.loads((sd / "train_summary.json").read_text())["env_steps"] == 192
    # seeds train differently
    assert read_metrics(run / "seed-0") != read_metrics(run / "seed-1")
    ev = eval_main(cfg, [], str(run / "seed-1" / "policy.pt"))
    rows = read_jsonl(ev / "metrics.jsonl")
    assert len(rows) == 4 and all("soc" in r for r in rows)
    # the evaluated policy is named in the run directory
    ck = str((run / "seed-1" / "policy.pt").resolve())
    assert json.loads((ev / "summary.json").read_text())["checkpoint"] == ck
    assert (ev / "config.yaml").read_text().startswith(f"# evaluated with --checkpoint {ck}\n")
    # a checkpoint of another architecture is refused, naming the key
    with pytest.raises(ConfigError, match="agents.params.hidden"):
        eval_main(cfg, ["agents.params.hidden=[32]"], str(run / "seed-1" / "policy.pt"))


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "ppo").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_validate(path):
    cfg = load_config(path)
    _, cls = trainable_class(cfg)
    train = train_config(cfg, cls)
    assert train.total_env_steps > 0  # every shipped training config has a step budget


def test_mgmapf_trainer_resumes_from_its_state_dict_exactly():
    """The MG-MAPF trainer's checkpoint state (torch.save / torch.load, as fit() does) continues bit for bit: the
    scenario core pickled in it observes exactly as the original (regression: its window views went stale)."""
    import io

    from coopsim.agents.ppo import PPOAgent, PPOTrainConfig, PPOTrainer
    from coopsim.agents.ppo.mapf_shaping import MGMAPFGoalShaping
    from coopsim.platform.registry import make_scenario

    def trainer():
        core = make_scenario("mapf/MGMAPF-v0", num_envs=2, map="random", random_size=(8, 8), num_agents=3,
                             num_goals=2, obs_radius=2, max_steps=16)
        cfg = PPOTrainConfig(total_env_steps=10**6, num_envs=2, rollout_steps=8, epochs=1, minibatches=2)
        return PPOTrainer(PPOAgent(core, hidden=[16], critic="central"), cfg, seed=0,
                          intrinsic=MGMAPFGoalShaping(num_goals=2, gamma=cfg.gamma))

    tr = trainer()
    for _ in range(2):
        tr.train_iteration()
    buf = io.BytesIO()
    torch.save(tr.state_dict(), buf)
    buf.seek(0)
    again = trainer()
    again.load_state_dict(torch.load(buf, weights_only=False))
    for _ in range(3):  # 24 steps: episodes end (max_steps 16) and reset inside the resumed rollouts
        a, b = tr.train_iteration(), again.train_iteration()
        a, b = ({k: v for k, v in s.items() if not k.startswith("time/")} for s in (a, b))
        assert a == b
    sa, sb = tr.net.state_dict(), again.net.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
