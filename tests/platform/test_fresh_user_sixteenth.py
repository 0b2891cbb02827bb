"""Fixes from the sixteenth new-user pass: seeds and budgets too large for torch/ns-3, a report in a read-only run
directory, a run on a full disk, a huge ETA, an unwritable ns-3 build directory, focus fire on a non-SMAC
scenario, ``smac_fingerprint.py --help``."""
from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coopsim.errors import ConfigError, CoopsimError
from coopsim.platform.config import EPISODES_MAX, SEED_MAX, load_config
from coopsim.platform.trainer import TOTAL_ENV_STEPS_MAX

ROOT = Path(__file__).resolve().parents[2]
LINE = ROOT / "configs" / "examples" / "line-random.yaml"
SMAC_FF = ROOT / "configs" / "smac" / "3m-focus-fire.yaml"
MAPPO = ROOT / "configs" / "smac" / "3m-mappo.yaml"
QMIX = ROOT / "configs" / "smac" / "3m-qmix.yaml"
MAPF = ROOT / "configs" / "mapf" / "random-32-32-10.yaml"


def _cli(args, monkeypatch=None):
    """``coopsim ARGS`` in this process (so monkeypatches apply): (exit code, stdout + stderr)."""
    from typer.testing import CliRunner

    from coopsim.cli import app

    res = CliRunner().invoke(app, [str(a) for a in args])
    out = res.output + (getattr(res, "stderr", "") if res.stderr_bytes is not None else "")
    return res.exit_code, out


# 1. seeds are bounded to 0 .. 2**31 - 1 (torch.manual_seed refused 2**64 with a traceback)

@pytest.mark.parametrize("seed", [2**64, 2**64 - 1, 2**31])
def test_a_too_large_seed_is_refused_naming_the_key_and_value(seed):
    with pytest.raises(ConfigError, match=rf"seed {seed} is too large \(at most {SEED_MAX}\)") as info:
        load_config(SMAC_FF, [f"seeds=[{seed}]"], check_components=False)
    assert info.value.key == "seeds" and "command-line override" in str(info.value)
    assert str(seed) in str(info.value)


def test_the_largest_seed_and_episodes_fit_every_consumer():
    import torch

    cfg = load_config(SMAC_FF, [f"seeds=[0, {SEED_MAX}]", f"episodes={EPISODES_MAX}"], check_components=False)
    assert cfg.seeds == [0, SEED_MAX] and cfg.episodes == EPISODES_MAX == 10**9 and SEED_MAX == 2**31 - 1
    last_episode_seed = SEED_MAX * EPISODES_MAX + EPISODES_MAX - 1  # the runner's seed * episodes + e
    assert last_episode_seed < 2**63  # an int64: torch, numpy and ns-3's RngSeed/RngRun take it
    torch.Generator().manual_seed(last_episode_seed)
    torch.manual_seed(SEED_MAX)


def test_the_largest_seed_runs_a_learner(tmp_path):
    from coopsim.platform.config import check_buildable

    cfg = load_config(MAPPO, [f"seeds=[{SEED_MAX}]", f"out_dir={tmp_path}"])
    check_buildable(cfg, file=str(MAPPO))  # used to fail: torch.manual_seed(2**64 - 1) blamed the agent
    from coopsim.platform.training import build_trainer

    # and that seed is a seed like any other: two builds start from the same weights, another seed does not
    a, b, c = (build_trainer(cfg, s)[0].agent.net.state_dict() for s in (SEED_MAX, SEED_MAX, 0))
    assert all((a[k] == b[k]).all() for k in a) and not all((a[k] == c[k]).all() for k in a)


@pytest.mark.parametrize("episodes", [EPISODES_MAX + 1, 10**17])
def test_too_many_episodes_are_refused(episodes):
    with pytest.raises(ConfigError, match=r"less than or equal to 1000000000") as info:
        load_config(SMAC_FF, [f"episodes={episodes}"], check_components=False)
    assert info.value.key == "episodes" and info.value.value == episodes


def test_cli_validate_refuses_a_huge_seed_in_one_line():
    code, out = _cli(["validate", MAPPO, "seeds=[18446744073709551616]"])
    assert code == 2, out
    assert "Traceback" not in out and "Overflow" not in out and "cannot act" not in out
    assert "key 'seeds'" in out and "18446744073709551616" in out and str(SEED_MAX) in out


# 4. total_env_steps is bounded, and a huge ETA prints as a string

@pytest.mark.parametrize("config", [MAPPO, QMIX])
def test_a_huge_step_budget_is_refused(config):
    code, out = _cli(["validate", config, "train.total_env_steps=99999999999999999999999"])
    assert code == 2, out
    assert "key 'train.total_env_steps'" in out and "less than or equal to 1000000000000" in out and "Traceback" not in out


def test_the_largest_step_budget_is_accepted():
    from coopsim.agents.ppo.config import PPOTrainConfig
    from coopsim.agents.qmix.config import QMIXTrainConfig

    assert PPOTrainConfig(total_env_steps=TOTAL_ENV_STEPS_MAX).total_env_steps == 10**12
    assert QMIXTrainConfig(total_env_steps=TOTAL_ENV_STEPS_MAX).total_env_steps == 10**12
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="less than or equal to 1000000000000"):
        PPOTrainConfig(total_env_steps=TOTAL_ENV_STEPS_MAX + 1)


@pytest.mark.parametrize("seconds, shown", [
    (0, "0:00:00"), (10.7, "0:00:10"), (-5, "0:00:00"), (90000, "1 day, 1:00:00"),
    (99999 * 3600, "4166 days, 15:00:00"), (99999 * 3600 + 1, ">99999 h"), (1e20, ">99999 h"),
    (float("inf"), ">99999 h"), (float("-inf"), "0:00:00"), (float("nan"), "?"), (10**400, ">99999 h"),
    (-10**400, "0:00:00"), (None, "?"),
])
def test_hms_never_raises(seconds, shown):
    from coopsim.platform.progress import _hms

    assert _hms(seconds) == shown


def test_a_line_progress_of_a_huge_budget_prints_its_eta():
    from coopsim.platform.progress import LineProgress

    out = io.StringIO()
    p = LineProgress(unit="env steps", every_s=0.0, file=out)
    with p:
        task = p.add_task("train", total=10**23, completed=0)
        p.tasks[task]["start"] -= 10.0  # 10 s elapsed for the first step: an ETA of ~1e24 s
        p.update(task, advance=1)
    assert "~>99999 h left" in out.getvalue()


# 2. a report in a read-only run directory

@pytest.fixture
def small_run(tmp_path):
    from coopsim.platform.runner import run_config

    cfg = load_config(SMAC_FF, [f"out_dir={tmp_path}", "seeds=[0]", "episodes=1"])
    return run_config(cfg, progress=False)


def _refuse_writes(monkeypatch, err: int):
    import tempfile

    from coopsim.platform import recorder

    def refused(*a, dir=None, **k):
        raise OSError(err, os.strerror(err), str(dir))

    monkeypatch.setattr(recorder.tempfile, "mkstemp", refused)
    return tempfile


def test_report_in_a_read_only_run_directory_is_one_error(small_run, monkeypatch):
    from coopsim.platform.recorder import WriteError
    from coopsim.platform.report import plot_run, render_replays

    _refuse_writes(monkeypatch, errno.EROFS)
    with pytest.raises(WriteError) as info:
        plot_run(small_run)
    msg = str(info.value)
    assert isinstance(info.value, CoopsimError) and isinstance(info.value, OSError)
    assert info.value.errno == errno.EROFS
    assert msg.startswith(f"{small_run}: the folder is not writable (Read-only file system)")
    assert "cannot write its plot metrics.png" in msg and "\n" not in msg
    with pytest.raises(WriteError, match="cannot write the replay GIF replay_seed0_ep0.gif"):
        render_replays(small_run)
    # the CLI still shows the table; the files are skipped with one warning
    code, out = _cli(["report", small_run])
    assert code == 0 and "Traceback" not in out, out
    assert "summary" in out.lower() and "win" in out
    assert "warning: no plot or replay GIF written:" in out and "not writable (Read-only file system)" in out


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="bind mounts need root")
def test_report_on_a_real_read_only_mount(small_run, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(small_run), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("mount --bind is not allowed here")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode != 0:
            pytest.skip("a read-only remount is not allowed here")
        res = subprocess.run([sys.executable, "-m", "coopsim.cli", "report", str(ro)], capture_output=True,
                             text=True, cwd=ROOT)
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "the folder is not writable (Read-only file system)" in res.stderr
    assert "warning: no plot or replay GIF written" in " ".join(res.stderr.split()) and "win" in res.stdout


def test_a_compare_into_an_unwritable_folder_is_one_error(small_run, monkeypatch):
    from coopsim.platform.recorder import WriteError
    from coopsim.platform.report import compare_runs

    _refuse_writes(monkeypatch, errno.EACCES)
    with pytest.raises(WriteError, match=r"the folder is not writable \(Permission denied\).*compare.csv"):
        compare_runs([small_run, small_run], out_dir=small_run.parent / "cmp")


def test_a_multi_run_report_in_an_unwritable_folder_prints_the_table(small_run, monkeypatch):
    """Two runs compared where nothing can be written: the comparison table and one warning, no traceback."""
    from coopsim.platform import recorder

    import shutil

    other = small_run.parent / (small_run.name + "-copy")  # a second run (one folder twice is refused)
    shutil.copytree(small_run, other)
    _refuse_writes(monkeypatch, errno.EACCES)
    code, out = _cli(["report", small_run, other])
    assert code == 0 and "Traceback" not in out, out
    assert "win" in out and "warning: the comparison's files (compare.csv, plots) were not all written:" in " ".join(out.split())
    assert "not writable (Permission denied)" in out
    assert not list(small_run.parent.glob("compare-*"))  # the folder could be made, its files not: removed

    def no_dirs(self, *a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(recorder.Path, "mkdir", no_dirs)  # the folder cannot even be made
    code, out = _cli(["report", small_run, other])
    assert code == 0 and "Traceback" not in out, out
    flat = " ".join(out.split())
    assert "win" in out and "cannot create the comparison folder " in flat and ": Read-only file system;" in flat, out
    assert "copy the run folders to a writable place (cp -r)" in flat


def test_a_multi_run_report_from_inside_a_run_writes_beside_it(small_run, tmp_path, monkeypatch):
    import shutil

    other = tmp_path / "other-run"
    shutil.copytree(small_run, other)
    monkeypatch.chdir(small_run)
    code, out = _cli(["report", ".", other])
    assert code == 0, out
    assert not list(small_run.glob("compare-*"))  # not into the run given as `.`
    assert len(list(small_run.parent.glob("compare-*"))) == 1


def test_a_multi_run_report_of_an_unreadable_run_leaves_no_compare_folder(small_run, tmp_path):
    code, out = _cli(["report", small_run, tmp_path / "nope"])
    assert code == 2 and "does not exist" in out, out
    assert not list(small_run.parent.glob("compare-*"))


# 3. a run on a full disk

def _disk_full_after(monkeypatch, n_ok: int):
    """Every fsync after the first ``n_ok`` fails with ENOSPC (a disk that fills up and stays full)."""
    from coopsim.platform import recorder

    real, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > n_ok:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(recorder.os, "fsync", fsync)


def test_a_run_on_a_full_disk_says_what_it_kept(tmp_path, monkeypatch):
    from coopsim.platform.recorder import WriteError, read_jsonl
    from coopsim.platform.runner import run_config

    cfg = load_config(LINE, [f"out_dir={tmp_path}"])
    _disk_full_after(monkeypatch, 1 + 2 * 3)  # config.yaml, then metrics + timing of three episodes
    with pytest.raises(WriteError) as info:
        run_config(cfg, progress=False)
    run_dir = info.value.run_dir
    rows = read_jsonl(run_dir / "metrics.jsonl")
    msg = str(info.value)
    # the fourth episode's line reached the file (only its fsync failed): the message counts what the file holds
    assert len(rows) == 4 and info.value.errno == errno.ENOSPC and "\n" not in msg
    assert msg.startswith(f"the run stopped: cannot write {run_dir / 'metrics.jsonl'}: No space left on device")
    assert f"kept: the 4 finished episodes in {run_dir / 'metrics.jsonl'} (summary.json was not written)" in msg
    assert not (run_dir / "summary.json").exists()
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


def test_a_run_whose_summary_does_not_fit_says_so(tmp_path, monkeypatch):
    from coopsim.platform.recorder import WriteError
    from coopsim.platform.runner import run_config

    cfg = load_config(LINE, [f"out_dir={tmp_path}"])
    _disk_full_after(monkeypatch, 1 + 2 * 6)  # every episode fits, the summary does not
    with pytest.raises(WriteError) as info:
        run_config(cfg, progress=False)
    msg = str(info.value)
    assert "cannot write" in msg and "summary.json: No space left on device" in msg
    assert "kept: the 6 finished episodes" in msg and "(summary.json was not written)" in msg


def test_a_failed_run_whose_summary_does_not_fit_names_both(tmp_path, monkeypatch, second_episode_fails):
    from coopsim.platform.recorder import WriteError
    from coopsim.platform.runner import run_config

    cfg = load_config(LINE, [f"out_dir={tmp_path}"])
    _disk_full_after(monkeypatch, 1 + 2 * 1)
    with pytest.raises(WriteError) as info:
        run_config(cfg, progress=False)
    msg = str(info.value)
    assert msg.startswith("the run failed (RuntimeError: boom in episode 2), then cannot write")
    assert "kept: the 1 finished episode in" in msg


def test_cli_run_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    _disk_full_after(monkeypatch, 1 + 2 * 2)
    code, out = _cli(["run", LINE, f"out_dir={tmp_path}", "--no-progress"])
    assert code == 2, out
    assert "Traceback" not in out and "During handling" not in out
    assert "No space left on device" in out and "kept: the 3 finished episodes" in out, out


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_run_on_a_real_full_tmpfs(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(full)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs is not allowed here")
    try:
        res = subprocess.run([sys.executable, "-m", "coopsim.cli", "run", str(SMAC_FF), f"out_dir={full}",
                              "--no-progress"], capture_output=True, text=True, cwd=ROOT)
    finally:
        subprocess.run(["umount", str(full)], capture_output=True)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "No space left on device" in res.stderr
    assert "finished episodes in" in res.stderr and "metrics.jsonl" in res.stderr


def test_write_error_keeps_oserror_fields(tmp_path, monkeypatch):
    from coopsim.platform.recorder import WriteError, atomic_write_text

    _refuse_writes(monkeypatch, errno.ENOSPC)
    with pytest.raises(OSError) as info:  # callers that catch OSError still do
        atomic_write_text(tmp_path / "x.txt", "hi")
    assert isinstance(info.value, WriteError)
    assert str(info.value) == (f"cannot write {tmp_path / 'x.txt'}: No space left on device; free some space on "
                               f"that device, or write elsewhere")


# 5. an unwritable ns-3 build directory

def test_an_unusable_ns3_build_dir_names_the_variable(tmp_path, monkeypatch):
    from coopsim.comm.ns3 import build

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("COOPSIM_NS3_BUILD_DIR", str(blocker / "ns3"))
    monkeypatch.setattr(build, "missing_requirements", lambda: [])  # as where ns-3 is installed
    with pytest.raises(ConfigError) as info:
        build.ensure_bridge()
    msg = str(info.value)
    assert msg.startswith(f"COOPSIM_NS3_BUILD_DIR={blocker / 'ns3'}: cannot make or write that directory")
    assert "must name a writable directory" in msg and info.value.value == str(blocker / "ns3")


def test_an_unusable_default_ns3_build_dir_says_to_set_the_variable(tmp_path, monkeypatch):
    from coopsim.comm.ns3 import build

    monkeypatch.delenv("COOPSIM_NS3_BUILD_DIR", raising=False)
    err = build.build_dir_error(OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path)), tmp_path)
    assert str(err) == (f"cannot make or write {tmp_path} (Read-only file system), where the ns-3 bridge is built; "
                        "set COOPSIM_NS3_BUILD_DIR to a writable directory")


def test_ns3_build_script_prints_the_build_dir_error(tmp_path):
    res = subprocess.run([sys.executable, "-m", "coopsim.comm.ns3.build"], capture_output=True, text=True,
                         env={**os.environ, "COOPSIM_NS3_BUILD_DIR": "/proc/nope"}, cwd=ROOT)
    if "needs" in res.stderr and "ns-3" in res.stderr and "COOPSIM_NS3_BUILD_DIR" not in res.stderr:
        pytest.skip("ns-3 is not installed here")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "COOPSIM_NS3_BUILD_DIR=/proc/nope: cannot make or write that directory" in res.stderr


# 6. focus fire on a non-SMAC scenario

@pytest.mark.parametrize("scenario, params", [("mapf/MGMAPF-v0", {"map": "random-32-32-10", "num_agents": 4}),
                                              ("line/LineWalk-v0", {"num_agents": 2})])
def test_focus_fire_refuses_a_non_smac_scenario(scenario, params):
    from coopsim.platform import registry

    sc = registry.make_scenario(scenario, num_envs=1, **params)
    try:
        with pytest.raises(ConfigError, match=rf"agent 'smac/focus-fire-v0' cannot act on scenario '{scenario}': "
                                              r"it needs a smac/\* scenario") as info:
            registry.make_component("agent", "smac/focus-fire-v0", sc)
    finally:
        sc.close()
    assert info.value.key == "agents.id" and info.value.value == "smac/focus-fire-v0"


def test_focus_fire_on_mgmapf_from_the_cli(tmp_path):
    code, out = _cli(["run", MAPF, "agents.id=smac/focus-fire-v0", "agents.params={}", f"out_dir={tmp_path}"])
    assert code == 2, out
    assert "needs a smac/* scenario" in out and "not enough values to unpack" not in out
    assert not list(tmp_path.iterdir())  # refused before a run directory was made


def test_focus_fire_still_builds_on_smac():
    from coopsim.platform import registry

    sc = registry.make_scenario("smac/3m-v0", num_envs=1)
    try:
        agent = registry.make_component("agent", "smac/focus-fire-v0", sc)
        a, _ = agent.act(sc.reset(seed=0))
        assert a.shape == (1, sc.num_agents)
    finally:
        sc.close()


# 7. smac_fingerprint.py --help

def test_smac_fingerprint_help_and_a_bad_path():
    script = ROOT / "benchmarks" / "smac_fingerprint.py"
    res = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.startswith("usage: smac_fingerprint.py") and not res.stderr
    res = subprocess.run([sys.executable, str(script), "/nonexistent/core.py"], capture_output=True, text=True,
                         cwd=ROOT)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: /nonexistent/core.py: key 'core': file not found")


@pytest.mark.parametrize("extra", [[], ["scenario.params.num_agents=3"]])
def test_a_spread_team_on_another_scenario_blames_the_agent_id(extra):
    code, out = _cli(["validate", LINE, "agents.id=ddacom/spread-v0", "agents.params={}", *extra])
    text = " ".join(out.split())
    assert code == 2 and "Traceback" not in out, out
    # the agents.id override, never the scenario.params one nor the file
    assert text.startswith(f"error: command-line override 'agents.id=ddacom/spread-v0' (config {LINE}): key "
                           f"'agents.id': this agent (SpreadCommTeam"), text
    assert "cannot act on scenario 'line/LineWalk-v0': it needs an mpe/simple_spread scenario" in text


def test_a_tab_in_yaml_says_to_indent_with_spaces(tmp_path):
    f = tmp_path / "tab.yaml"
    f.write_text("name: x\nscenario:\n\tid: line/LineWalk-v0\nagents: {id: random-v0}\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(e.value) == (f"{f}: not valid YAML at line 3, column 1: found character '\\t' that cannot start any "
                            f"token (YAML indents with spaces, never tabs: replace the tab with spaces)")


def test_an_agent_that_cannot_act_gets_its_error_alone_without_the_untrained_warning():
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "run", str(MAPF), "agents.id=graph_safe-v0",
                        "agents.params={}"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "warning" not in r.stderr and r.stderr.startswith("error: command-line override 'agents.id=graph_safe-v0'")
    # a run that does start still warns, first
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "run", str(MAPPO), "seeds=[0]", "episodes=1",
                        "--no-progress", f"out_dir={ROOT / 'runs' / 'pytest-untrained'}"], capture_output=True,
                       text=True, cwd=ROOT)
    try:
        assert r.returncode == 0, r.stderr
        assert r.stderr.startswith("warning: agent 'ppo/mappo-v0' is a learner and no checkpoint was given")
    finally:
        import shutil

        shutil.rmtree(ROOT / "runs" / "pytest-untrained", ignore_errors=True)


def test_a_checkpoint_on_a_full_disk_is_one_write_error(tmp_path, monkeypatch):
    from coopsim.platform.recorder import WriteError
    from coopsim.platform.trainer import atomic_save, load_checkpoint

    atomic_save({"a": 1}, tmp_path / "ok.pt")  # the normal path still round-trips
    assert load_checkpoint(tmp_path / "ok.pt") == {"a": 1}
    _refuse_writes(monkeypatch, errno.ENOSPC)
    with pytest.raises(WriteError) as e:
        atomic_save({"a": 2}, tmp_path / "checkpoint.pt")
    assert str(e.value) == (f"cannot write {tmp_path / 'checkpoint.pt'}: No space left on device; free some space on "
                            f"that device, or write elsewhere")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.pt"]  # no temporary file left behind


def test_a_checkpoint_that_is_not_a_regular_file_says_so(tmp_path):
    from coopsim.platform.trainer import load_checkpoint

    with pytest.raises(ConfigError) as e:
        load_checkpoint("/dev/null")
    assert str(e.value) == ("/dev/null: checkpoint is not a regular file (give policy.pt, checkpoint.pt or a "
                            "training run's seed-<s> directory)")
    with pytest.raises(ConfigError, match=r"checkpoint not found \(give policy.pt"):
        load_checkpoint(tmp_path / "none.pt")
