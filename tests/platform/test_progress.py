"""Progress when stdout is not a terminal (a file, a pipe): complete plain lines, not a rich bar cut to 80 columns."""
import io
import subprocess
import sys
from pathlib import Path

from rich.progress import Progress

from coopsim.platform import progress as prog
from coopsim.platform.progress import LineProgress, make_progress

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "configs" / "examples" / "line-random.yaml"


def test_line_progress_prints_whole_lines_every_interval_and_at_the_end(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(prog.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    p = LineProgress(unit="episodes", every_s=10, file=out)
    with p:
        task = p.add_task("run", total=4)
        clock[0] += 4
        p.update(task, advance=1, description="run  soc=3")          # 4 s: no line yet
        clock[0] += 6
        p.update(task, advance=1, description="run  soc=5")          # 10 s: a line
        clock[0] += 3
        p.update(task, advance=1)                                   # 3 s after it: none
        clock[0] += 3
        p.update(task, advance=1, description="run  soc=7")          # done: a line
    assert out.getvalue().splitlines() == [
        "run  soc=5: 2/4 episodes (50%), 0:00:10 elapsed, ~0:00:10 left",
        "run  soc=7: 4/4 episodes (100%), 0:00:16 elapsed",
    ]


def test_line_progress_stop_prints_an_unfinished_task_once_with_its_info():
    out = io.StringIO()
    p = LineProgress(unit="env steps", every_s=1e9, file=out, info_field="info")
    task = p.add_task("train", total=1000, completed=200, info="")
    p.update(task, completed=600, info="return=-3.5")
    p.stop()
    p.stop()
    (line,) = out.getvalue().splitlines()
    assert line.startswith("train: 600/1,000 env steps (60%), 0:00:00 elapsed")
    assert line.endswith("  return=-3.5")


def test_line_progress_counts_with_separators_not_exponents():
    out = io.StringIO()
    p = LineProgress(unit="env steps", every_s=1e9, file=out)
    task = p.add_task("train", total=4_000_000, completed=0)
    p.update(task, completed=2_289_664)
    p.update(task, completed=2_500_000.5)  # a fractional count keeps :g
    p.stop()
    (line,) = out.getvalue().splitlines()
    assert line.startswith("train: 2.5e+06/4,000,000 env steps (63%)"), line
    out2 = io.StringIO()
    p2 = LineProgress(unit="env steps", every_s=0.0, file=out2)
    p2.update(p2.add_task("t", total=4e6), completed=2_289_664)
    assert "t: 2,289,664/4,000,000 env steps (57%)" in out2.getvalue(), out2.getvalue()


def test_make_progress_picks_bar_lines_or_nothing():
    assert isinstance(make_progress(terminal=False, unit="episodes"), LineProgress)
    bar = make_progress(terminal=True)
    assert isinstance(bar, Progress) and not bar.disable
    off = make_progress(enabled=False, terminal=False)
    assert isinstance(off, Progress) and off.disable


def test_run_piped_prints_a_plain_progress_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "run", str(CFG), f"out_dir={tmp_path}", "seeds=[0,1]",
                        "episodes=3"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("run directory: ")  # named at the start in a log (the progress line comes next)
    first = lines[1]
    assert first.startswith("line-random  last episode: success=") and ": 6/6 episodes (100%), " in first, first
    assert "\x1b" not in r.stdout and "━" not in first  # no bar, no cursor control


def test_train_piped_prints_a_plain_progress_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "train", str(ROOT / "configs" / "ppo" / "linewalk-mappo.yaml"),
                        f"out_dir={tmp_path}", "train.total_env_steps=1024", "train.num_envs=4",
                        "train.checkpoint_every=512", "train.progress=true"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    done = [ln for ln in r.stdout.splitlines() if "1,024/1,024 env steps (100%)" in ln]
    assert len(done) == 1, r.stdout
    assert "\x1b" not in r.stdout and "━" not in done[0]


def test_training_progress_shows_running_means_over_the_finished_episodes():
    from coopsim.platform.trainer import progress_info

    means = {}
    assert progress_info({"loss/policy": 0.5}, means) == "policy loss=0.5"  # no episode finished yet
    assert progress_info({"episodes": 3.0, "episode/win": 1.0, "episode/return": 20.0, "loss/policy": -0.01},
                         means) == "mean win=1 return=20 over 3 episodes, policy loss=-0.01"
    # the last iteration's values (win=0 return=4) are not what is shown: the mean over all 4 episodes is
    assert progress_info({"episodes": 1.0, "episode/win": 0.0, "episode/return": 4.0}, means) == \
        "mean win=0.75 return=16 over 4 episodes"
    assert progress_info({"episodes": 0.0, "episode/win": float("nan")}, means) == \
        "mean win=0.75 return=16 over 4 episodes"


def test_train_below_one_iteration_shows_the_steps_it_trained(tmp_path):
    """A budget of 1 env step trains one whole iteration (4 envs x 128 rollout steps here): the line says 512/512,
    as rich's bar does, not 1/1 or 512/1 (51200%)."""
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "train", str(ROOT / "configs" / "ppo" / "linewalk-mappo.yaml"),
                        f"out_dir={tmp_path}", "train.total_env_steps=1", "train.num_envs=4", "train.rollout_steps=128",
                        "train.progress=true"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert any(": 512/512 env steps (100%)" in ln for ln in r.stdout.splitlines()), r.stdout
    assert "/1 env steps" not in r.stdout and "trained 512" in r.stdout
