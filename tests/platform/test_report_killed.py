"""`coopsim report` on the run directory of a SIGKILLed `coopsim run` (no summary.json): it reports the finished
episodes of metrics.jsonl, says the run did not finish, and never names a summary.json that is not there."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from coopsim.platform.recorder import read_jsonl
from coopsim.platform.report import load_run
from coopsim.platform.stats import summarize

CFG = Path(__file__).resolve().parents[2] / "configs" / "examples" / "line-random.yaml"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "250"})


def _killed_run(out: Path) -> Path:
    p = subprocess.Popen([sys.executable, "-m", "coopsim.cli", "run", str(CFG), f"out_dir={out}", "seeds=[0,1]",
                          "episodes=100000", "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ms = list(out.glob("*/metrics.jsonl"))
            if ms and len(read_jsonl(ms[0])) >= 3:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the run wrote no 3 episodes in 120 s")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    (d,) = [m.parent for m in out.glob("*/metrics.jsonl")]
    return d


def test_report_of_a_killed_run_says_it_did_not_finish(tmp_path):
    d = _killed_run(tmp_path)
    assert not (d / "summary.json").exists()
    rows = read_jsonl(d / "metrics.jsonl")
    run = load_run(d)
    assert run["has_summary"] is False
    assert run["summary"]["metrics"] == summarize(rows)
    assert f"the {len(rows)} of 200000 episode(s) finished so far" in run["note"]

    r = cli("report", str(d), "--no-gif")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())  # the table's caption may wrap
    assert "summary.json has every metric" not in out
    assert "metrics.jsonl has every value" in out
    assert ("the run has not finished: it has no summary.json yet (it is still running, or its process stopped "
            "before writing one: it was killed, or a write failed, e.g. on a full disk)") in out
    # the table's episode count is what metrics.jsonl holds
    (line,) = [ln for ln in r.stdout.splitlines() if ln.strip("│ ").startswith("episode_return ")]
    assert line.split("│")[-2].strip() == str(len(rows))
    assert not (d / "summary.json").exists()  # a report does not pretend the run finished

    # compared with a finished run, the comparison notes the unfinished one
    r = cli("run", str(CFG), f"out_dir={tmp_path}", "seeds=[0]", "episodes=1", "name=done", "--no-progress")
    assert r.returncode == 0, r.stderr
    done = Path(r.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    r = cli("report", str(d), str(done))
    assert r.returncode == 0, r.stderr
    assert f"note: {d}: the run has not finished" in " ".join(r.stdout.split())
    assert f"note: {done}" not in r.stdout


def test_report_of_a_finished_and_an_interrupted_run(tmp_path):
    r = cli("run", str(CFG), f"out_dir={tmp_path}", "seeds=[0]", "episodes=1", "--no-progress")
    assert r.returncode == 0, r.stderr
    d = Path(r.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    run = load_run(d)
    assert run["has_summary"] is True and run["note"] is None
    s = json.loads((d / "summary.json").read_text())
    s["interrupted"] = True
    (d / "summary.json").write_text(json.dumps(s))
    assert load_run(d)["note"] == "the run was interrupted: 1 of 1 episode(s) finished"
