"""Bad input a new user gives: each is one clear error (file, key, value, what is valid; exit code 2), never a
traceback; and a learner run without a checkpoint warns."""
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import check_buildable, load_config

ROOT = Path(__file__).resolve().parents[2]
LINE = ROOT / "configs" / "examples" / "line-random.yaml"
MAPF = ROOT / "configs" / "mapf" / "random-32-32-10.yaml"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def _build_error(path, overrides) -> ConfigError:
    cfg = load_config(path, overrides)
    with pytest.raises(ConfigError) as info:
        check_buildable(cfg, file=str(path))
    return info.value


# 1. a shield on a scenario without the capabilities it calls: validate and run refuse alike

@pytest.mark.parametrize("path", [LINE, ROOT / "configs" / "smac" / "3m-focus-fire.yaml",
                                  ROOT / "configs" / "mpe" / "spread-po-ddacom-markov.yaml"])
def test_certificate_shield_needs_constraints(path):
    exc = _build_error(path, ["shield.id=certificate-v0", "seeds=[0]"])
    assert exc.key == "shield.id" and exc.value == "certificate-v0"
    msg = str(exc)
    assert str(path) in msg
    assert "shield 'certificate-v0' needs a scenario with constraints(); scenario '" in msg and "has none" in msg
    assert "scenarios with constraints: " in msg and "mapf/MGMAPF-v0" in msg and "coop_game/Grid4x4-v0" in msg


def test_oracle_shield_needs_true_support_on_mapf():
    exc = _build_error(MAPF, ["shield.id=oracle-v0", "seeds=[0]", "scenario.params.num_agents=4"])
    assert exc.key == "shield.id"
    assert "shield 'oracle-v0' needs a scenario with true_support(); scenario 'mapf/MGMAPF-v0' has none" in str(exc)
    assert "mapf/MGMAPF-v0" not in str(exc).split("scenarios with true_support: ", 1)[1]


def test_shield_mismatch_cli_validate_and_run_exit_2(tmp_path):
    for cmd in (["validate", LINE], ["run", LINE, f"out_dir={tmp_path}", "--no-progress"]):
        r = cli(*cmd, "shield.id=certificate-v0")
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert "command-line override 'shield.id=certificate-v0'" in r.stderr
        assert "needs a scenario with constraints(); scenario 'line/LineWalk-v0' has none" in r.stderr
    assert not any(tmp_path.iterdir())  # no run directory


def test_matching_shields_still_build():
    check_buildable(load_config(MAPF, ["shield.id=certificate-v0", "seeds=[0]", "scenario.params.num_agents=4",
                                       "scenario.params.conflicts=allow"]))
    check_buildable(load_config(ROOT / "configs" / "safety" / "coop-grid4x4-2ag-all.yaml", ["shield={id: oracle-v0}"]))


# 2. a config file that is not UTF-8 text

def test_binary_config_file_is_a_clear_error(tmp_path):
    f = tmp_path / "bin.yaml"
    f.write_bytes(b"\x89PNG\x00\x01")
    with pytest.raises(ConfigError, match="not a UTF-8 text \\(YAML\\) file"):
        load_config(f)
    for cmd in ("validate", "run", "train"):
        r = cli(cmd, f)
        assert r.returncode == 2, (cmd, r.stderr)
        assert f"{f}: not a UTF-8 text (YAML) file" in r.stderr and "Traceback" not in r.stderr


# 3. the PettingZoo adapter given something that is not a ParallelEnv

PZ = ["scenario.id=pettingzoo/adapter-v0", "seeds=[0]", "agents.id=random-v0"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_pettingzoo_aec_env_is_refused():
    pytest.importorskip("pettingzoo.classic.rps_v2")
    exc = _build_error(LINE, PZ + ["scenario.params={env: 'pettingzoo.classic.rps_v2:env'}"])
    assert exc.key == "scenario.params.env" and exc.value == "pettingzoo.classic.rps_v2:env"
    assert "'pettingzoo.classic.rps_v2:env'" in str(exc) and str(LINE) in str(exc)
    assert "not a PettingZoo ParallelEnv" in str(exc) and "use its parallel_env" in str(exc)
    assert "pettingzoo.classic.rps_v2:parallel_env" in str(exc)


def test_pettingzoo_non_env_callables_are_refused():
    # (not standard-library targets such as os:getcwd: those are refused before import, see
    # test_bad_input_second_pass.py)
    exc = _build_error(LINE, PZ + ["scenario.params={env: 'numpy:float64'}"])
    assert exc.key == "scenario.params.env" and "'numpy:float64'" in str(exc)
    assert "is not a PettingZoo ParallelEnv" in str(exc) and "an AEC env? use its parallel_env" in str(exc)
    exc = _build_error(LINE, PZ + ["scenario.params={env: 'numpy:pi'}"])
    assert exc.key == "scenario.params.env" and "not a callable" in str(exc)


def test_pettingzoo_reset_return_is_checked():
    from coopsim.scenarios.pettingzoo_adapter import PettingZooCore

    class Fake:  # a duck-typed parallel env whose reset returns the old (obs only) API
        possible_agents = ["a"]

        def reset(self, seed=None):
            return {"a": [0.0]}

        def step(self, actions):
            raise AssertionError

        def action_space(self, a):
            import gymnasium
            return gymnasium.spaces.Discrete(2)

        def observation_space(self, a):
            import gymnasium
            return gymnasium.spaces.Box(0, 1, (1,))

        def close(self):
            pass

    core = PettingZooCore.from_envs([Fake()])
    with pytest.raises(ConfigError, match=r"reset\(\) returned dict, not \(observations, infos\)"):
        core.reset(seed=0)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_pettingzoo_parallel_env_still_works():
    pytest.importorskip("pettingzoo.classic.rps_v2")
    check_buildable(load_config(LINE, PZ + ["scenario.params={env: 'pettingzoo.classic.rps_v2:parallel_env'}"]))


# 4. distance maps too large for the memory are refused before they are allocated

BIG = ["scenario.params.map=random", "scenario.params.random_size=[512,512]", "scenario.params.num_agents=8192"]


def test_distance_maps_over_memory_are_a_config_error(monkeypatch):
    import numpy as np

    from coopsim.platform import memory
    from coopsim.scenarios.mapf import metrics

    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 2 * 2**20)  # 2 MiB "available"
    monkeypatch.setattr(memory, "MEMORY_CHECK_MIN_BYTES", 0)
    blocked = np.zeros((64, 64), bool)
    with pytest.raises(ConfigError) as info:
        metrics.bfs_distances(blocked, np.array([[x, 0] for x in range(64)]))
    exc = info.value
    assert exc.key == "scenario.params.num_agents"
    assert "need 4 MiB" in str(exc) and "more than 50% of the available memory (1 MiB of 2 MiB)" in str(exc)
    assert "at most about 16 goal cells fit" in str(exc) and "random_size" in str(exc)
    assert metrics.bfs_distances(blocked, np.array([[0, 0], [1, 0]])).shape == (2, 64, 64)  # small ones pass


def test_huge_mapf_run_is_refused_by_validate_and_run(tmp_path):
    from coopsim.platform.memory import available_memory_bytes

    avail = available_memory_bytes()
    if avail is None or avail > 2 * 96 * 2**30:
        pytest.skip("this machine has the memory for it")
    for cmd in (["validate", MAPF], ["run", MAPF, f"out_dir={tmp_path}", "--no-progress"]):
        r = cli(*cmd, *BIG, "seeds=[0]")
        assert r.returncode == 2, (cmd, r.stderr)
        assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr
        assert "key 'scenario.params.num_agents'" in r.stderr and "distance maps need 96.0 GiB" in r.stderr
    assert not any(tmp_path.iterdir())


# 5. the goal-sampling error of a random instance (no first goals) and of a scen instance

def test_goal_sampling_wording_random_instance(tmp_path):
    m = tmp_path / "tiny.map"
    m.write_text("type octile\nheight 2\nwidth 3\nmap\n...\n.@.\n")
    exc = _build_error(MAPF, [f"scenario.params.map={m}", "scenario.params.num_agents=2", "seeds=[0]"])
    assert exc.key == "scenario.params.num_goals" and str(MAPF) in str(exc)
    assert "cannot sample 3 goal(s) for each of the 2 agents" in str(exc)
    assert "first goals" not in str(exc) and "extra" not in str(exc)
    assert "num_agents x (1 + num_goals) = 8 > 5 free cells" in str(exc)


def test_goal_sampling_wording_scen_instance():
    import numpy as np

    from coopsim.scenarios.mapf.sampling import sample_extra_goals

    blocked = np.zeros((1, 4), bool)
    with pytest.raises(ConfigError, match=r"cannot sample 2 extra goal\(s\) .* \(after starts and first goals\)"):
        sample_extra_goals(blocked, np.array([[0, 0]]), np.array([[0, 0], [1, 0], [2, 0]]), 2, np.random.default_rng(0))


def test_unknown_map_names_its_key_once():
    with pytest.raises(ConfigError) as info:
        load_config(MAPF, ["scenario.params.map=nosuch"])
    msg = str(info.value)
    assert msg.count("key '") == 1 and "key 'scenario.params.map'" in msg
    assert "not a shipped map and no such file" in msg and "random-32-32-10" in msg


# 6. a learner run without a checkpoint warns (stderr) and still runs

def test_untrained_learner_warning():
    from coopsim.platform.runner import untrained_learner_warning

    cfg = load_config(ROOT / "configs" / "smac" / "3m-mappo.yaml")
    w = untrained_learner_warning(cfg, None)
    assert w == ("agent 'ppo/mappo-v0' is a learner and no checkpoint was given: evaluating an untrained policy "
                 "(train it with `coopsim train CONFIG`, or pass --checkpoint)")
    assert untrained_learner_warning(cfg, "policy.pt") is None
    assert untrained_learner_warning(load_config(LINE), None) is None  # not a learner
    immp = load_config(ROOT / "configs" / "mapf" / "immp-eval-random-32-32-10-immp.yaml")
    if immp.agents.params.get("checkpoint"):
        assert untrained_learner_warning(immp, None) is None  # agents.params.checkpoint given


def test_untrained_learner_warning_cli(tmp_path):
    cfg = ROOT / "configs" / "ppo" / "linewalk-mappo.yaml"
    r = cli("run", cfg, f"out_dir={tmp_path}", "seeds=[0]", "episodes=1", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "is a learner and no checkpoint was given: evaluating an untrained policy" in r.stderr
    assert "evaluating an untrained policy" not in r.stdout


# 7. experiment files of the research scripts given to `coopsim validate`

@pytest.mark.parametrize("name, script", [("ns3/ddacom-spread.yaml", "python -m coopsim.comm.ns3.experiment"),
                                          ("mpe/channels.yaml", "python -m coopsim.agents.ddacom.evaluate")])
def test_experiment_file_hint(name, script):
    with pytest.raises(ConfigError) as info:
        load_config(ROOT / "configs" / name)
    assert f"this looks like an experiment file of `{script}`, not a run config" in str(info.value)
    assert info.value.key == "name"


def test_no_experiment_hint_for_a_run_config_typo(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: x\nscenario: {id: line/LineWalk-v0}\nagentz: {id: random-v0}\n")
    with pytest.raises(ConfigError) as info:
        load_config(f)
    assert "experiment file" not in str(info.value)


# 8. small ones: plural kinds, quoted integers, help text line ends

def test_list_accepts_plurals():
    r = cli("list", "scenarios")
    assert r.returncode == 0 and "mapf/MGMAPF-v0" in r.stdout and "random-v0" not in r.stdout
    r = cli("list", "agents")
    assert r.returncode == 0 and "random-v0" in r.stdout
    assert cli("list", "bogus").returncode == 2


@pytest.mark.parametrize("override", ['max_steps="40"', "episodes='2'", 'seeds=[0, "1"]'])
def test_quoted_integers_are_refused(override):
    with pytest.raises(ConfigError, match="must be an integer, not the string .* \\(remove the quotes\\)"):
        load_config(LINE, [override])
    assert load_config(LINE, ["max_steps=40"]).max_steps == 40


def test_train_help_has_no_source_line_ends():
    import os

    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "train", "--help"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "stored budget; a larger budget (train.total_env_steps=N) trains further" in text
    lines = [ln.strip() for ln in r.stdout.splitlines()]
    assert "larger budget" not in lines and "schedule back up" not in lines
