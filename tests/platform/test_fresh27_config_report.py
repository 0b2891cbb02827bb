"""Fresh-user pass 27.

P5: a quoted number (``train.sticky_eps='0.5'``, ``sticky_eps: "0.5"`` in a file) or a quoted boolean for a numeric or
boolean key of the ``train:`` section or a component's params is refused with one line (file or override, key, value,
what to write), by ``coopsim validate``, ``run`` and ``train`` and before ``--resume`` compares configs: pydantic read
it as the number while the run's stored config.yaml kept the string, and a resume with the number was then refused.

P6: ``coopsim report`` of a training run whose training has not finished says, per seed, the env steps done of the
budget (seeds not started too) and prints the ``coopsim train --resume RUN`` command; a finished run's note is as
before.
"""
import glob
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coopsim.errors import ConfigError, CoopsimError
from coopsim.platform import training
from coopsim.platform.config import load_config
from coopsim.platform.report import training_run_message
from coopsim.platform.trainer import read_metrics
from coopsim.platform.training import (resume_config, run_dir_lock, steps_done, train_config, train_main,
                                       trainable_class)

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
LINE = "configs/ppo/linewalk-mappo.yaml"
TINY = ["train.total_env_steps=256", "train.num_envs=2", "train.rollout_steps=32", "train.epochs=1",
        "train.progress=false", "train.tensorboard=false"]
STICKY_DESC = ("sticky-action exploration eps in [0, 1): while training, each living agent acts by the mixture "
               "(1 - eps) * pi(a | o) + eps * [a == its previous action] (when that action is still available; at an "
               "episode's start or otherwise plain pi); the PPO ratio uses the mixture's probability, so the update "
               "stays on-policy; 0 = off")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=ENV)


def one_error_line(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def train_section(cfg, file):
    return train_config(cfg, trainable_class(cfg, file=file)[1], file=file)


# --- P5: quoted numbers and booleans ------------------------------------------------------------------------------

def test_validate_refuses_the_quoted_train_number_of_the_report():
    line = one_error_line(cli("validate", "configs/smac/3m-mappo.yaml", "train.sticky_eps='0.5'"))
    assert line == ("error: command-line override 'train.sticky_eps='0.5'' (config configs/smac/3m-mappo.yaml): key "
                    "'train.sticky_eps': invalid value '0.5': a number is required, not a string (remove the quotes: "
                    f"0.5) ({STICKY_DESC})")


def test_train_refuses_a_quoted_number_in_the_file_and_writes_nothing(tmp_path):
    data = yaml.safe_load((REPO / LINE).read_text())
    data["train"]["sticky_eps"] = "0.5"
    cfg = tmp_path / "quoted.yaml"
    cfg.write_text(yaml.safe_dump(data))
    assert 'sticky_eps: \'0.5\'' in cfg.read_text()  # really quoted in the file
    out = tmp_path / "runs"
    line = one_error_line(cli("train", cfg, *TINY, f"out_dir={out}"))
    assert line == (f"error: {cfg}: key 'train.sticky_eps': invalid value '0.5': a number is required, not a string "
                    f"(remove the quotes: 0.5) ({STICKY_DESC})")
    assert not out.exists()


def test_run_refuses_a_quoted_component_param(tmp_path):
    line = one_error_line(cli("run", LINE, "agents.params.hidden=['64', 64]", f"out_dir={tmp_path}"))
    assert line == (f"error: command-line override 'agents.params.hidden=['64', 64]' (config {LINE}): key "
                    "'agents.params.hidden': invalid value '64' in ['64', 64]: an integer is required, not a string "
                    "(remove the quotes: 64) (encoder MLP widths, each in [1, 4096])")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("override, key, value, message", [
    ("scenario.params.length='8'", "scenario.params.length", "8",
     "invalid value '8': an integer is required, not a string (remove the quotes: 8) (cells on the line, >= 2)"),
    ("max_steps=32", None, None, None),  # the top-level key: unchanged
    ("agents.params.hidden=[64, '1_000']", "agents.params.hidden", [64, "1_000"],
     "invalid value '1_000' in [64, '1_000']: an integer is required, not a string (remove the quotes: 1000) "
     "(encoder MLP widths, each in [1, 4096])"),
])
def test_quoted_component_params_are_refused_with_key_and_value(override, key, value, message):
    if key is None:
        assert load_config(LINE, [override]).max_steps == 32
        return
    with pytest.raises(ConfigError) as info:
        load_config(LINE, [override])
    err = info.value
    assert (err.key, err.value) == (key, value)
    assert str(err) == f"command-line override '{override}' (config {LINE}): key '{key}': {message}"


@pytest.mark.parametrize("override, key, message", [
    ("train.lr='1e-3'", "train.lr",
     "invalid value '1e-3': a number is required, not a string (remove the quotes: 1e-3)"),
    ("train.total_env_steps=' 2048 '", "train.total_env_steps",
     "invalid value ' 2048 ': an integer is required, not a string (remove the quotes: 2048)"),
    ("train.ent_coef='0.01'", "train.ent_coef",
     "invalid value '0.01': a number is required, not a string (remove the quotes: 0.01)"),
    ("train.anneal_lr='yes'", "train.anneal_lr",
     "invalid value 'yes': a boolean (true or false) is required, not a string (remove the quotes: true)"),
    ("train.progress='false'", "train.progress",
     "invalid value 'false': a boolean (true or false) is required, not a string (remove the quotes: false)"),
])
def test_quoted_train_values_are_refused(override, key, message):
    cfg = load_config(LINE, [override])  # the train: section is the trainer's: checked by train_config
    with pytest.raises(ConfigError) as info:
        train_section(cfg, LINE)
    assert info.value.key == key
    assert info.value.message.startswith(message), info.value.message


def test_unquoted_numbers_scientific_notation_and_other_strings_are_as_before():
    cfg = load_config(LINE, ["train.total_env_steps=1e6", "train.lr=1e-3", "train.sticky_eps=0.5"])
    sched = train_section(cfg, LINE)
    assert (sched.total_env_steps, sched.lr, sched.sticky_eps) == (1_000_000, 0.001, 0.5)
    assert type(cfg.train["total_env_steps"]) is int and cfg.train["total_env_steps"] == 1_000_000
    # a string that is no number is pydantic's error, as before
    with pytest.raises(ConfigError, match=r"key 'train.lr': invalid value 'abc': Input should be a valid number"):
        train_section(load_config(LINE, ["train.lr=abc"]), LINE)
    # seeds/episodes/max_steps keep their own message
    with pytest.raises(ConfigError, match=r"must be an integer, not the string '3' \(remove the quotes\)"):
        load_config(LINE, ["episodes='3'"])


def test_the_stored_value_is_a_number_and_a_resume_with_it_is_accepted(tmp_path):
    run = train_main(LINE, [*TINY, "train.sticky_eps=0.5", f"out_dir={tmp_path}"], None)
    stored = yaml.safe_load((run / "config.yaml").read_text())["train"]["sticky_eps"]
    assert type(stored) is float and stored == 0.5
    old, new = resume_config(run, "", ["train.total_env_steps=512", "train.sticky_eps=0.5"])
    assert old.train["sticky_eps"] == new.train["sticky_eps"] == 0.5
    assert new.train["total_env_steps"] == 512
    # a quoted value on resume is refused as quoted (not as a difference from the run's 0.5); nothing changes
    before = (run / "config.yaml").read_bytes()
    line = one_error_line(cli("train", "--resume", run, "train.total_env_steps=512", "train.sticky_eps='0.5'"))
    assert line == (f"error: command-line override 'train.sticky_eps='0.5'' (config {run / 'config.yaml'}): key "
                    "'train.sticky_eps': invalid value '0.5': a number is required, not a string (remove the quotes: "
                    f"0.5) ({STICKY_DESC})")
    assert (run / "config.yaml").read_bytes() == before


def test_no_shipped_config_has_a_quoted_number():
    refused = []
    for path in sorted(glob.glob(str(REPO / "configs" / "**" / "*.yaml"), recursive=True)):
        try:
            cfg = load_config(path)
            if cfg.train is not None:
                try:
                    cls = trainable_class(cfg, file=path)[1]
                except ConfigError:  # not a learner: `coopsim train` refuses it, `run` ignores train:
                    continue
                train_config(cfg, cls, file=path)
        except CoopsimError as exc:
            if "not a string" in str(exc):
                refused.append(str(exc))
    assert refused == []


# --- P6: report of an unfinished training run ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A 2-seed run interrupted (SIGINT, as Ctrl-C) during seed 0's third iteration: seed 0 keeps its checkpoint
    after that iteration, seed 1 never started."""
    out = tmp_path_factory.mktemp("p6")
    mp = pytest.MonkeyPatch()
    from test_fresh_user_fixes import _signal_during  # noqa: E402  (tests/platform is on sys.path under pytest)

    _signal_during(mp, 3)
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            train_main(LINE, ["seeds=[0,1]", "train.total_env_steps=1024", "train.num_envs=2", "train.rollout_steps=32",
                              "train.epochs=1", "train.progress=false", "train.tensorboard=false", f"out_dir={out}"],
                       None)
    finally:
        mp.undo()
    return Path(info.value.run_dir)


def test_report_of_a_stopped_training_run_says_how_far_each_seed_got(stopped_run):
    run = stopped_run
    done = steps_done(run / "seed-0")  # from its checkpoint.pt
    assert done == 3 * 2 * 32 == int(read_metrics(run / "seed-0")[-1]["env_steps"])  # 3 iterations of 2 envs x 32 steps
    assert not (run / "seed-1").exists() and not (run / "train_summary.json").exists()
    r = cli("report", run)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    q = shlex.quote
    assert r.stdout.splitlines()[0] == (
        f"note: {run}: a training run (written by coopsim train) whose training has not finished (seed 0 at {done:,} "
        f"of 1,024 env steps; seed 1 not started), not a run of evaluation episodes; evaluate its checkpoints with: "
        f"coopsim eval {q(str(run / 'config.yaml'))} 'seeds=[0]' --checkpoint {q(str(run / 'seed-0'))}; continue its training "
        f"with: coopsim train --resume {q(str(run))}")
    assert r.stdout.splitlines()[1] == (f"plot: {run / 'train_curves.png'} (training curves: episode/return, "
                                        "episode/success vs env steps)")  # the panels drawn (fresh34c F7)


def test_report_of_a_run_being_trained_gives_no_resume_command(stopped_run):
    with run_dir_lock(stopped_run):  # as a `coopsim train` process training it holds it
        msg = training_run_message(stopped_run)
    done = steps_done(stopped_run / "seed-0")
    assert (f"a training run (written by coopsim train) that is being trained right now (seed 0 at {done:,} of 1,024 "
            "env steps; seed 1 not started)") in msg
    assert "--resume" not in msg


def test_the_printed_resume_command_finishes_the_run_and_the_note_is_then_as_before(stopped_run, tmp_path):
    import shutil

    run = tmp_path / stopped_run.name
    shutil.copytree(stopped_run, run)
    r = cli("train", "--resume", run)
    assert r.returncode == 0, r.stderr
    assert [steps_done(run / f"seed-{s}") for s in (0, 1)] == [1024, 1024]
    r = cli("report", run)
    assert r.returncode == 0, r.stderr
    q = shlex.quote
    assert r.stdout.splitlines()[0] == (
        f"note: {run}: a training run (written by coopsim train), not a run of evaluation episodes; evaluate it with: "
        f"coopsim eval {q(str(run / 'config.yaml'))} 'seeds=[0]' --checkpoint {q(str(run / 'seed-0'))}")
