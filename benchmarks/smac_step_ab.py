"""Interleaved A/B of two SMACCore versions in one process (CPU time): ``before.py`` against the installed core.

Usage: ``taskset -c 0 .venv/bin/python benchmarks/smac_step_ab.py BEFORE_CORE_PY REPS MAP:BATCH:STEPS ...``, e.g.
``git show 6ef6ec2:coopsim/scenarios/smac/core.py > /tmp/before.py`` (the last numpy core; the compiled one
replaced it) then
``... /tmp/before.py 6 3m:1:100 3m:64:20 2s3z:1:100 2s3z:64:20 27m_vs_30m:1:40 27m_vs_30m:64:3 3m:1024:2 27m_vs_30m:1024:1``.
Each block steps one core STEPS times (random valid actions, finished envs reset); blocks alternate REPS times.
"""
import importlib.util, sys, time
import numpy as np
import coopsim.scenarios.smac.core as new
from smac_speed import random_stepper  # same directory (run as a script)
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); sys.modules[name] = m; spec.loader.exec_module(m); return m


def main():
    old = load(sys.argv[1], "oldcore")
    reps = int(sys.argv[2])
    cases = [a.split(":") for a in sys.argv[3:]]
    def make(cls, m, b):
        one = random_stepper(cls(num_envs=b, map_name=m), seed=0)
        for _ in range(3): one()
        return one
    for m, b, n in cases:
        b, n = int(b), int(n)
        fo, fn = make(old.SMACCore, m, b), make(new.SMACCore, m, b)
        to, tn = [], []
        for rep in range(reps):
            for f, acc in ((fo, to), (fn, tn)):
                c0 = time.process_time()
                for _ in range(n): f()
                acc.append((time.process_time() - c0) / (b * n))
        to, tn = np.array(to), np.array(tn)
        print(f"{m:11s} b={b:5d}: steps/CPU-s old min-time {1/to.min():9,.0f} med {1/np.median(to):9,.0f} | new {1/tn.min():9,.0f} med {1/np.median(tn):9,.0f} | x{to.min()/tn.min():.2f} (med x{np.median(to)/np.median(tn):.2f})", flush=True)


if __name__ == "__main__":
    from coopsim.errors import run_script

    run_script(main)
