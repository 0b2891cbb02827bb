"""Fixes of fresh-user pass 31 (ddacom.train with --first-seed and merged run folders): results.json's seeds_done counts
the complete seeds whatever the first seed; a run folder without its settings file is judged only by a results.json
that evaluated it (a run copied in is refused, not silently reused), and a corrupt settings file is named; a file
where a run folder goes is refused before any training; a results.json that is not this command's is never
replaced."""
import json
import shutil

import pytest

from cli_helpers import run_main  # noqa: E402  (tests/ is on sys.path under pytest)
from coopsim.agents.ddacom import train

TINY = ["--steps", "200", "--num-envs", "2", "--eval-envs", "2", "--eval-episodes", "1"]
SL = ["--task", "speaker_listener", "--policy-reads", "slots"]


def _main(argv):
    """The train script run in-process: (exit code, stdout, stderr)."""
    return run_main(train.main, argv)


@pytest.fixture(scope="module")
def seeds_2_3(tmp_path_factory):
    """Seeds 2-3 of the no_comm anchor on the speaker-listener (a folder trained with --first-seed 2)."""
    out = tmp_path_factory.mktemp("f31") / "b"
    code, _, err = _main([*SL, "--seeds", "2", "--first-seed", "2", *TINY, "--variants", "no_comm", "--out", str(out)])
    assert code == 0, err
    return out


def test_seeds_done_counts_the_complete_seeds_from_any_first_seed(seeds_2_3):
    res = json.loads((seeds_2_3 / "results.json").read_text())
    assert set(res["evals"]["no_comm"]) == {"2", "3"} and res["seeds_done"] == 2


def _no_training(monkeypatch):
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("trained although the run's settings are unknown"))


def test_a_run_copied_in_without_its_settings_file_is_refused_not_reused(seeds_2_3, tmp_path, monkeypatch):
    """A seed folder copied from another --out without ddacom_settings.json: this folder's results.json holds no eval of
    it, so its settings are unknown (it used to be judged by this folder's args and silently reused)."""
    out = tmp_path / "merged"
    code, _, err = _main([*SL, "--seeds", "1", *TINY, "--variants", "no_comm", "--out", str(out)])
    assert code == 0, err
    shutil.copytree(seeds_2_3 / "no_comm" / "seed-2", out / "no_comm" / "seed-2")
    (out / "no_comm" / "seed-2" / train.SETTINGS_NAME).unlink()
    before = (out / "results.json").read_bytes()
    _no_training(monkeypatch)
    code, _, err = _main([*SL, "--seeds", "3", *TINY, "--variants", "no_comm", "--out", str(out)])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{out / 'no_comm' / 'seed-2'} has training files but no {train.SETTINGS_NAME}" in err
    assert "holds no eval of it" in err and (out / "results.json").read_bytes() == before


def test_a_run_without_its_settings_file_is_judged_by_the_results_json_that_evaluated_it(seeds_2_3, tmp_path):
    """A run from before the settings file existed: the results.json that evaluated it speaks for it, with only the
    keys that shape its variant (no encoder flags for an anchor) and the agent count of its task (2 here)."""
    out = tmp_path / "old"
    shutil.copytree(seeds_2_3, out)
    for s in (2, 3):
        (out / "no_comm" / f"seed-{s}" / train.SETTINGS_NAME).unlink()
    rec = train.recorded_settings(out / "no_comm" / "seed-2", out)
    assert rec["task"] == "speaker_listener" and rec["num_agents"] == 2 and rec["num_envs"] == 2
    assert "cf_coef" not in rec and "inbox" not in rec
    code, stdout, err = _main([*SL, "--seeds", "2", "--first-seed", "2", *TINY, "--variants", "no_comm", "--out", str(out)])
    assert code == 0, err
    assert stdout.count("reusing the finished run") == 2


@pytest.mark.parametrize("text", ["{\"task\": ", "[1, 2]"])
def test_a_corrupt_settings_file_is_named(seeds_2_3, tmp_path, monkeypatch, text):
    out = tmp_path / "c"
    shutil.copytree(seeds_2_3, out)
    (out / "no_comm" / "seed-3" / train.SETTINGS_NAME).write_text(text)
    _no_training(monkeypatch)
    code, _, err = _main([*SL, "--seeds", "2", "--first-seed", "2", *TINY, "--variants", "no_comm", "--out", str(out)])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {out / 'no_comm' / 'seed-3' / train.SETTINGS_NAME}: ")
    assert "restore it, remove" in err


@pytest.mark.parametrize("where", ["no_comm", "no_comm/seed-1"])
def test_a_file_where_a_run_folder_goes_is_refused_before_any_training(tmp_path, monkeypatch, where):
    out = tmp_path / "f"
    (out / where).parent.mkdir(parents=True, exist_ok=True)
    (out / where).write_text("hi")
    _no_training(monkeypatch)
    code, _, err = _main([*SL, "--seeds", "2", *TINY, "--variants", "no_comm", "--out", str(out)])
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"{out / where} is a file where this run keeps the folder" in err
    assert not (out / "no_comm" / "seed-0").is_dir()  # refused before seed 0 trained
    assert (out / where).read_text() == "hi"


@pytest.mark.parametrize("text", ["garbage", json.dumps({"runs": [], "seeds_done": 1, "settings": {}})])
def test_a_results_json_that_is_not_this_commands_is_never_replaced(tmp_path, monkeypatch, text):
    out = tmp_path / "r"
    out.mkdir()
    (out / "results.json").write_text(text)
    _no_training(monkeypatch)
    code, _, err = _main([*SL, "--seeds", "1", *TINY, "--variants", "no_comm", "--out", str(out)])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {out / 'results.json'}: ") and "move it away" in err
    assert (out / "results.json").read_text() == text


def test_evaluate_first_seed_is_bounded_like_trains(capsys):
    from coopsim.agents.ddacom import evaluate

    with pytest.raises(SystemExit):
        evaluate.main(["--first-seed", "99999999999"])
    assert "--first-seed" in capsys.readouterr().err


def _catches_sigterm(pid):
    """Whether process ``pid`` has a SIGTERM handler installed (Linux: bit 15 of SigCgt in /proc/<pid>/status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            cgt = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(cgt & (1 << 14))


def _term_after(argv, ready=None, timeout=120):
    """Start ``python -m <argv>``, send SIGTERM once it handles SIGTERM and the path ``ready`` (if any) exists;
    (exit code, stderr)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-m", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    t0 = time.time()
    while not (_catches_sigterm(p.pid) and (ready is None or ready.exists())) and p.poll() is None \
            and time.time() - t0 < timeout:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=timeout)
    return p.returncode, err


def test_sigterm_stops_ddacom_train_as_ctrl_c_does_and_says_what_it_kept(tmp_path):
    out = tmp_path / "t"
    code, err = _term_after(["coopsim.agents.ddacom.train", *SL, "--seeds", "1", "--steps", "2000000", "--num-envs", "2",
                             "--variants", "no_comm", "--out", str(out)], out / "no_comm" / "seed-0" / "metrics.csv")
    assert code == 143, err
    assert "terminated; kept: " in err and "the same command resumes" in err and "Traceback" not in err
    assert "with a checkpoint at" in err and (out / "no_comm" / "seed-0" / "checkpoint.pt").is_file()


def test_sigterm_stops_ddacom_evaluate_with_the_kept_line(tmp_path):
    out = tmp_path / "e.json"
    code, err = _term_after(["coopsim.agents.ddacom.evaluate", "--seeds", "50", "--num-envs", "2", "--episodes", "200",
                             "--out", str(out)])
    assert code == 143 and "terminated; kept: " in err and "Traceback" not in err, err


def test_a_text_file_given_as_a_checkpoint_is_called_a_text_file(tmp_path):
    from coopsim.errors import ConfigError
    from coopsim.platform.trainer import load_checkpoint

    f = tmp_path / "metrics.csv"
    f.write_text("env_steps,episode/return\n100,-3.5\n")
    with pytest.raises(ConfigError, match=r"not a checkpoint: a text file \(34 bytes, starting 'env_steps,episode/return'\)"):
        load_checkpoint(f)


def test_ns3_seconds_print_a_dash_when_nothing_was_delivered():
    from coopsim.comm.ns3.experiment import _secs

    assert _secs(float("nan")) == "-" and _secs(0.01234) == "0.012 s"


def test_a_table_that_pools_seeds_not_asked_for_says_so(seeds_2_3, tmp_path):
    out = tmp_path / "pool"
    shutil.copytree(seeds_2_3, out)
    code, stdout, err = _main([*SL, "--seeds", "1", "--first-seed", "7", *TINY, "--variants", "no_comm,broadcast_ideal",
                               "--out", str(out)])
    assert code == 0, err
    assert json.loads((out / "results.json").read_text())["summary"]["seeds"] == [7]  # no_comm alone at 2-3: no ratio
    code, stdout, err = _main([*SL, "--seeds", "1", "--first-seed", "2", *TINY, "--variants", "broadcast_ideal",
                               "--out", str(out)])
    assert code == 0, err
    assert json.loads((out / "results.json").read_text())["summary"]["seeds"] == [2, 7]
    assert "the table above pools seeds 2, 7:" in stdout and "(it asked for 2..2)" in stdout


def _laughs(levels: int) -> str:
    """YAML whose ``max_steps`` is ``levels`` nested aliases of 10-item lists (10 ** levels values, a few hundred bytes)."""
    lines = ["x0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nname: t\nscenario: {{id: line/walk-v0}}\nagents: {{id: random-v0}}\nmax_steps: *a{levels - 1}\n"


def test_a_config_whose_aliases_expand_past_the_limit_is_refused_at_once(tmp_path):
    """Nine nested aliases (10^9 values in under 1 kB) used to take gigabytes and minutes before a traceback."""
    import time

    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_raw

    f = tmp_path / "laughs.yaml"
    f.write_text(_laughs(9))
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"aliases \(\*name\) expand to [\d,]+ values, more than the "
                                          r"1,000,000 a config may hold") as info:
        load_raw(f)
    assert time.perf_counter() - t0 < 5 and str(f) in str(info.value) and "line 1" in str(info.value)


def test_a_large_invalid_value_is_shown_cut_short(tmp_path):
    """Five nested aliases (10^5 values, under the limit) where a number goes: the message is short (was megabytes)."""
    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config

    f = tmp_path / "big.yaml"
    f.write_text(_laughs(5))
    with pytest.raises(ConfigError) as info:
        load_config(f)
    text = str(info.value)
    assert "key 'max_steps'" in text and "invalid value [[[" in text and len(text) < 600, text[:800]


def test_yaml_merge_keys_and_plain_aliases_still_load(tmp_path):
    import yaml

    from coopsim.platform.config import UniqueKeyLoader

    d = yaml.load("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\nlist: &l [1, 2]\nagain: *l\n", Loader=UniqueKeyLoader)
    assert d["other"] == {"x": 1, "y": 3} and d["again"] == [1, 2]


def test_validate_checks_a_hook_class_before_calling_it(tmp_path):
    """`coopsim validate` with train.intrinsic.module=subprocess:Popen used to run the class (here: touch a file) before
    saying it is not a hook."""
    from coopsim.errors import ConfigError
    from coopsim.platform.hooks import IntrinsicReward, load_hook

    flag = tmp_path / "ran"
    spec = {"module": "subprocess:Popen", "params": {"args": ["touch", str(flag)]}}
    with pytest.raises(ConfigError, match=r"subprocess:Popen is not an IntrinsicReward hook \(it needs the methods "
                                          r"setup\(...\), reward\(...\), update\(...\)"):
        load_hook(spec, key="train.intrinsic", kind=IntrinsicReward)
    assert not flag.exists()


@pytest.mark.parametrize("value, hint", [("1", " (write true)"), ("0", " (write false)"), ("2", "")])
def test_a_number_for_a_boolean_param_is_refused(value, hint):
    """`obs_last_action=1` used to be read as true while the run's stored config kept 1 (a report then split two runs of
    one setting into rows `1` and `True`)."""
    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config

    with pytest.raises(ConfigError) as info:
        load_config("configs/smac/2s3z-focus-fire.yaml", [f"scenario.params.obs_last_action={value}"])
    assert f"key 'scenario.params.obs_last_action': invalid value {value}: a boolean (true or false) is required, " \
           f"not a number{hint}" in str(info.value)
    assert load_config("configs/smac/2s3z-focus-fire.yaml", ["scenario.params.obs_last_action=false"]) is not None


def test_unreachable_agents_are_those_with_a_goal_behind_a_wall():
    """A 3 x 5 map split by a wall column (x = 2): agent 0's goal is across it, agent 1's on its own side; agent 2's
    second goal is across."""
    import numpy as np

    from coopsim.agents.mapf_baselines.prioritized import unreachable_agents

    blocked = np.zeros((3, 5), bool)
    blocked[:, 2] = True
    starts = np.array([[0, 0], [4, 2], [1, 1]])
    goals = np.array([[[4, 0], [4, 0]], [[3, 0], [4, 1]], [[0, 2], [3, 2]]])
    assert unreachable_agents(blocked, starts, goals).tolist() == [0, 2]


@pytest.mark.parametrize("sid", ["line/walk-v0", "mpe/simple_spread-v0"])
def test_max_steps_is_capped_at_1e6_for_every_scenario(sid):
    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config

    cfg = {"line/walk-v0": "configs/ppo/linewalk-mappo.yaml", "mpe/simple_spread-v0": "configs/mpe/spread-po-no_comm-markov.yaml"}
    with pytest.raises(ConfigError, match=r"invalid value 99999999999: Input should be less than or equal to 1000000"):
        load_config(cfg[sid], ["max_steps=99999999999"])


def test_a_resumed_runs_progress_says_its_counts_are_this_sessions():
    import io

    from coopsim.platform.progress import LineProgress
    from coopsim.platform.trainer import progress_info

    out = io.StringIO()
    p = LineProgress(unit="env steps", every_s=1e9, file=out)
    p.add_task("seed 0", total=1000, completed=400)  # resumed at 400
    fresh = p.add_task("seed 1", total=1000, completed=0)
    p.stop()
    resumed_line, fresh_line = out.getvalue().splitlines()
    assert "elapsed this session" in resumed_line and "elapsed this session" not in fresh_line
    assert fresh == 1
    means: dict = {}
    assert progress_info({"episodes": 4, "episode/return": 2.0}, means, since_resume=True) == \
        "mean return=2 over 4 episodes since the resume"


def test_channel_and_shield_null_mean_their_defaults_and_an_upper_case_id_is_suggested():
    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config

    cfg = load_config("configs/smac/2s3z-focus-fire.yaml", ["channel=null", "shield=null"])
    assert cfg.channel.id == "ideal-v0" and cfg.shield.id == "passthrough-v0"
    with pytest.raises(ConfigError, match=r"unknown agent id 'RANDOM-V0'. Did you mean 'random-v0'\?"):
        load_config("configs/smac/2s3z-focus-fire.yaml", ["agents.id=RANDOM-V0"])


def test_eval_of_an_agent_without_parameters_names_its_id_and_says_to_run_it(capsys):
    from coopsim.errors import ConfigError
    from coopsim.platform.training import eval_main

    with pytest.raises(ConfigError) as info:
        eval_main("configs/smac/2s3z-focus-fire.yaml", [], "README.md", progress=False)
    assert str(info.value).startswith("configs/smac/2s3z-focus-fire.yaml: key 'agents.id': agent 'smac/focus-fire-v0' "
                                      "has no learned parameters and takes no checkpoint: evaluate it with `coopsim run")


def test_an_override_inside_a_list_says_to_set_the_whole_value():
    from coopsim.errors import ConfigError
    from coopsim.platform.config import load_config

    with pytest.raises(ConfigError, match=r"command-line override 'seeds.0=5': 'seeds' is \[0, 1, 2, 3, 4\], not a "
                                          r"mapping, so no key can be set inside it; set the whole value instead"):
        load_config("configs/smac/2s3z-focus-fire.yaml", ["seeds.0=5"])


def test_the_comparison_table_keeps_a_long_key_when_it_is_the_only_one_that_differs():
    from coopsim.platform.report import MAX_TABLE_VALUE, shown_line_keys

    long = [f"/tmp/maps/{'x' * MAX_TABLE_VALUE}-{i}.map" for i in range(3)]
    flat = [{"scenario.params.map": m, "agents.id": "mapf/pibt-v0"} for m in long]
    assert shown_line_keys(["scenario.params.map"], flat) == ["scenario.params.map"]
    assert shown_line_keys(["scenario.params.map", "max_steps"], [{**f, "max_steps": i} for i, f in enumerate(flat)]) \
        == ["max_steps"]  # a short key tells the rows apart: the long one stays in compare.csv


def test_the_threshold_benchmark_reproduces_the_trained_eval_and_sends_less_at_a_higher_threshold(tmp_path):
    """benchmarks/ddacom_sl_eval_threshold.py: at the trained threshold it gives the train script's own eval; at a
    threshold past any payload move only never-held copies go (at most one per episode and sender)."""
    from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

    out = tmp_path / "sl"
    code, _, err = _main([*SL, "--seeds", "1", *TINY, "--variants", "learned_ddacom", "--inbox", "hold",
                          "--payload-dim", "4", "--out", str(out)])
    assert code == 0, err
    trained = json.loads((out / "results.json").read_text())["evals"]["learned_ddacom"]["0"]
    bench = load_benchmark("ddacom_sl_eval_threshold")
    code, stdout, err = run_main(bench.main, [str(out), "--thresholds", "1e-6,10", "--eval-envs", "2",
                                              "--eval-episodes", "1"])
    assert code == 0, err
    rows = [line.split() for line in stdout.splitlines()[1:]]
    assert [r[:2] for r in rows] == [["0", "1e-06"], ["0", "10"]]
    assert float(rows[0][2]) == pytest.approx(trained["return"], abs=1e-3)
    assert float(rows[0][3]) == pytest.approx(trained["messages_vs_broadcast"], abs=1e-4)
    assert float(rows[1][3]) <= 4 / 100  # the first copy of each sender in each env (4) of 2 x 25 x 2 slots
    code, _, err = run_main(bench.main, [str(tmp_path / "none")])
    assert code == 2 and "no learned_ddacom/seed-<s>/policy.pt under" in err
    code, stdout, err = run_main(bench.main, [str(out), "--code-distances"])
    assert code == 0, err
    d = [float(x) for x in stdout.split(":")[-1].split("/")]
    assert len(d) == 3 and all(x >= 0 for x in d) and max(d) <= sum(d) - max(d) + 1e-9  # a triangle of payloads
