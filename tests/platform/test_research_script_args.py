"""`python -m` research scripts: a bad argument is one clear message and exit 2, never a traceback."""
import os
import subprocess
import sys

import pytest


def py(*args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["coopsim.agents.ddacom.evaluate", "--seeds", "-1"], "argument --seeds: invalid value '-1': an integer in 1..1000 is required"),
    (["coopsim.agents.ddacom.evaluate", "--seeds", "0"], "argument --seeds: invalid value '0': an integer in 1..1000 is required"),
    (["coopsim.agents.ddacom.evaluate", "--num-agents", "0"], "argument --num-agents: invalid value '0': an integer in 2..64 is required"),
    (["coopsim.agents.ddacom.evaluate", "--num-agents", "100", "--seeds", "1", "--out", "{tmp}/e.json"],
     "argument --num-agents: invalid value '100': an integer in 2..64 is required"),
    (["coopsim.agents.ddacom.train", "--seeds", "-1", "--steps", "10"], "argument --seeds: invalid value '-1': an integer in 1..1000 is required"),
    (["coopsim.agents.ddacom.train", "--seeds", "1", "--steps", "-10"], "argument --steps: invalid value '-10': an integer >= 1 is required"),
    (["coopsim.agents.ddacom.train", "--variants", "nope"], "unknown variant(s) 'nope'; valid: no_comm"),
    (["coopsim.agents.ppo.curves", "{tmp}/c.png", "{tmp}/nonexistent"], "error: no seed-*/metrics.csv under"),
])
def test_bad_args_exit_2_without_traceback(tmp_path, args, needle):
    r = py(*[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    assert needle in r.stderr
