"""Benchmark scripts: a bad flag is one clear line and exit code 2, checked before any expensive work (a peer venv,
training, ns-3); a peer venv whose install was interrupted is rebuilt, not used."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
needs_taskset = pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) not installed")


def bench(tmp_path, script, *args):
    """Run ``benchmarks/<script>`` in ``tmp_path`` (nothing lands in the repository); 60 s is far more than an
    argument check needs (each of these ends before any measurement)."""
    return subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, env=ENV,
                          cwd=tmp_path, timeout=60)


INT1 = "an integer >= 1 is required"


@pytest.mark.parametrize("script, args, needle", [
    ("mapf_planners.py", ["--seeds", "-1"], "argument --seeds: invalid value '-1': an integer >= 0 is required"),
    ("mapf_planners.py", ["--goals", "0"], f"argument --goals: invalid value '0': {INT1}"),
    ("mapf_planners.py", ["--maps", "nope"], "error: key '--maps': unknown map 'nope': not a shipped map"),
    ("mapf_throughput.py", ["--reps", "0"], f"argument --reps: invalid value '0': {INT1}"),
    ("mapf_throughput.py", ["--seconds", "0"], "argument --seconds: invalid value '0': a number > 0 is required"),
    ("shield_scaling.py", ["--sizes", "-5"], "argument --sizes: invalid value '-5': an integer >= 2 is required"),
    ("shield_scaling.py", ["--steps", "0"], f"argument --steps: invalid value '0': {INT1}"),
    # --out is checked before the measurement (it once failed after it, with a FileNotFoundError traceback)
    ("shield_scaling.py", ["--out", "/proc/x", "--sizes", "2", "--steps", "1"],
     "error: key '--out': cannot write /proc/x"),
    # smac_best_of_k.py: flags before the seed directory is read (SEED does not exist) and before any game
    ("smac_best_of_k.py", ["SEED", "--reset-seed", "-5"],
     "argument --reset-seed: invalid value '-5': a seed in 0..2147483647 is required"),
    ("smac_best_of_k.py", ["SEED", "--starts", "10000000000"],
     "error: key '--starts': 10000000000 fixed starts (envs of one batched core) are too many; give at most 1,048,576"),
    ("smac_best_of_k.py", ["SEED", "-k", "100000000", "--starts", "4"],
     "error: key '-k/--starts': -k x --starts = 400000000 sampled games; keep it at most 67,108,864"),
    ("smac_best_of_k.py", ["SEED", "--out", "."], "error: key '--out': . is a folder; give the file to write"),
    ("smac_best_of_k.py", ["SEED", "--out", "/proc/x.json"], "error: key '--out': cannot write /proc/x.json"),
    ("train_throughput.py", ["--iters", "0"], f"argument --iters: invalid value '0': {INT1}"),
    ("train_throughput.py", ["--num-envs", "70000"], "error: PPOTrainConfig: key 'num_envs'"),
    ("comm_overhead.py", ["--steps", "0"], "argument --steps: invalid value '0': an integer in 1..100000 is required"),
    ("comm_overhead.py", ["--copies", "100000"], "argument --copies: invalid value '100000': an integer in 1..64 is required"),
    ("mpe_speed.py", ["--seconds", "0"], "argument --seconds: invalid value '0': a number > 0 is required"),
    ("mpe_speed.py", ["--seconds", "-1"], "argument --seconds: invalid value '-1': a number > 0 is required"),
    ("mpe_speed.py", ["--seconds", "nan"], "argument --seconds: invalid value 'nan': a number > 0 is required"),
    ("immp_inference.py", ["--steps", "0"], f"argument --steps: invalid value '0': {INT1}"),
    ("immp_inference.py", ["--map", "nope"], "error: key '--map': unknown map 'nope'"),
    ("immp_highlevel_sweep.py", ["--instances", "0"], f"argument --instances: invalid value '0': {INT1}"),
    ("immp_highlevel_sweep.py", ["--weights", "x"], "argument --weights: invalid value 'x': order_weight:path_weight"),
    ("smac_speed.py", ["--batches", "0"], f"argument --batches: invalid value '0': {INT1}"),
    ("smac_speed.py", ["--maps", "nope"], "error: key '--maps': unknown SMAC map 'nope'"),
    ("smac_speed.py", ["--maps", "corridor"], "error: key '--maps': 'corridor' is a coopsim map that SMAX 0.2 does not"),
    ("smac_speed.py", ["--calib-maps", "3m", "nope"], "error: key '--calib-maps': unknown SMAC map 'nope'"),
    ("smac_speed.py", ["--seconds", "-1"], "argument --seconds: invalid value '-1': a number > 0 is required"),
    ("smac_step_ab.py", ["missing.py", "2", "3m:1:10"], "error: key 'BEFORE_CORE_PY': missing.py is not a Python file"),
    ("smac_step_ab.py", ["--x"], "the following arguments are required: BEFORE_CORE_PY, REPS, MAP:BATCH:STEPS"),
    ("smac_step_ab.py", [str(ROOT / "coopsim/scenarios/smac/core.py"), "0", "3m:1:10"],
     f"argument REPS: invalid value '0': {INT1}"),
    ("smac_step_ab.py", [str(ROOT / "coopsim/scenarios/smac/core.py"), "2", "nope:1:10"],
     "argument MAP:BATCH:STEPS: invalid value 'nope:1:10': unknown SMAC map 'nope'"),
    ("smac_step_ab.py", [str(ROOT / "coopsim/scenarios/smac/core.py"), "2", "3m:0:10"],
     "argument MAP:BATCH:STEPS: invalid value '3m:0:10': MAP:BATCH:STEPS with BATCH and STEPS integers >= 1"),
    ("mpe_mappo_vs_benchmarl.py", ["--seeds", "0"], f"argument --seeds: invalid value '0': {INT1}"),
    ("mpe_mappo_vs_benchmarl.py", ["--seeds", "-1"], f"argument --seeds: invalid value '-1': {INT1}"),
    ("mpe_mappo_vs_benchmarl.py", ["--frames", "7000"],
     "error: key '--frames': 7000 is not a multiple of 6000 (BenchMARL's frames per batch)"),
    ("ns3_overhead.py", ["--steps", "0"], f"argument --steps: invalid value '0': {INT1}"),
    pytest.param("mapf_throughput.py", ["--cpu", "99999"], "error: key '--cpu': invalid CPU list '99999'",
                 marks=needs_taskset),
    pytest.param("smac_speed.py", ["--cores", "99999"], "error: key '--cores': invalid CPU list '99999'",
                 marks=needs_taskset),
])
def test_bad_flag_is_one_line_and_exit_2(tmp_path, script, args, needle):
    r = bench(tmp_path, script, *args)
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    assert needle in r.stderr.strip().splitlines()[-1], r.stderr  # one line says it (argparse puts usage above)
    # nothing expensive started: no peer venv, no measurement row
    assert "creating" not in r.stdout and "rebuilding" not in r.stdout and r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_smac_step_ab_help_prints_usage():
    """``--help`` was taken for the old core's file (spec_from_file_location gives None for a name without .py)."""
    r = subprocess.run([sys.executable, str(BENCH / "smac_step_ab.py"), "--help"], capture_output=True, text=True,
                       env=ENV, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and r.stderr == ""
    assert "usage: smac_step_ab.py" in r.stdout and "BEFORE_CORE_PY REPS MAP:BATCH:STEPS" in r.stdout


def test_smac_step_ab_still_compares(tmp_path):
    """The A/B itself, the installed core against a copy of itself, 1 rep of a few steps."""
    before = tmp_path / "before.py"
    shutil.copy(ROOT / "coopsim/scenarios/smac/core.py", before)
    r = bench(tmp_path, "smac_step_ab.py", str(before), "1", "3m:1:3")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("3m          b=    1: steps/CPU-s old min-time")


def test_curves_refuses_an_unknown_image_format_up_front(tmp_path):
    r = subprocess.run([sys.executable, "-m", "coopsim.agents.ppo.curves", str(tmp_path / "out.txt"), "RUN"],
                       capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'out.txt'}: matplotlib cannot write the format 'txt'; give OUT an image suffix: "
        + r.stderr.split("image suffix: ", 1)[1].strip()]
    assert ".png" in r.stderr and ".pdf" in r.stderr and ".svg" in r.stderr
    assert not (tmp_path / "out.txt").exists()


def test_float_at_least():
    import argparse

    from coopsim.errors import float_at_least

    pos, nonneg = float_at_least(0, exclusive=True), float_at_least(0.5)
    assert pos("0.25") == 0.25 and nonneg("0.5") == 0.5 and nonneg("7") == 7.0
    for f, bad, need in ((pos, "0", "a number > 0"), (pos, "-1", "a number > 0"), (pos, "nan", "a number > 0"),
                         (pos, "inf", "a number > 0"), (pos, "x", "a number > 0"), (nonneg, "0.4", "a number >= 0.5")):
        with pytest.raises(argparse.ArgumentTypeError, match=f"invalid value '{bad}': {need} is required"):
            f(bad)
    ap = argparse.ArgumentParser(prog="p")
    ap.add_argument("--s", type=pos)
    with pytest.raises(SystemExit) as ei:
        ap.parse_args(["--s", "0"])
    assert ei.value.code == 2


# --- peer venvs: ready only when the peer imports ------------------------------------------------------------------

def load(name):
    """``benchmarks/<name>.py`` as a module (the benchmark folder goes on sys.path, as when run as a script)."""
    return load_benchmark(name, f"bench_flags_{name}")


def fake_venv(root: Path, site: Path | None = None) -> Path:
    """``root/bin/python``: this interpreter (without the peers), seeing ``site`` too when given."""
    (root / "bin").mkdir(parents=True)
    py = root / "bin" / "python"
    env = f"export PYTHONPATH='{site}'\n" if site else ""
    py.write_text(f"#!/bin/sh\n{env}exec '{sys.executable}' \"$@\"\n")
    py.chmod(0o755)
    return py


def fake_dist(site: Path, dist: str, version: str, modules: dict[str, str]) -> Path:
    """An installed distribution as pip leaves it: the modules, ``<dist>-<version>.dist-info`` with its RECORD."""
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    files = []
    for rel, text in modules.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
        files.append(rel)
    files += [f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    return info


def test_peer_ready_needs_the_whole_peer_to_import(tmp_path):
    pv = load("_peer_venv")
    check = pv.installed_check("fakepeer", "1.0", ("fakepeer", "from fakepeer.sub import X"))
    site = tmp_path / "site"
    py = fake_venv(tmp_path / "venv", site)
    assert pv.peer_ready(tmp_path / "none" / "bin" / "python", check) == (False, f"{tmp_path}/none/bin/python does not exist")
    assert pv.peer_ready(py, check) == (False, "fakepeer is not installed")  # venv made, pip interrupted before
    info = fake_dist(site, "fakepeer", "1.0", {"fakepeer/__init__.py": "", "fakepeer/sub.py": "X = 1\n"})
    assert pv.peer_ready(py, check) == (True, "")
    (site / "fakepeer" / "sub.py").unlink()  # a file of the package never written
    ok, why = pv.peer_ready(py, check)
    assert not ok and why == "fakepeer is installed only in part (interrupted install?); missing: fakepeer/sub.py"
    (site / "fakepeer" / "sub.py").write_text("import fakepeer_dep\nX = 1\n")  # a dependency never installed
    assert pv.peer_ready(py, check) == (False, "ModuleNotFoundError: No module named 'fakepeer_dep'")
    (site / "fakepeer" / "sub.py").write_text("X = 1\n")
    (info / "RECORD").unlink()  # pip writes RECORD last
    ok, why = pv.peer_ready(py, check)
    assert not ok and why.startswith("fakepeer is installed only in part")
    assert pv.peer_ready(py, pv.installed_check("fakepeer", "2.0")) == (False, "fakepeer 1.0 is installed, not 2.0")


class FakeInstall:
    """Stands in for ``subprocess.run`` in ``_peer_venv``: the checks run for real until the (recorded, not run)
    venv and pip commands have built the venv, then pass."""

    def __init__(self, pip_fails=False):
        self.calls, self.built, self.pip_fails, self.real = [], False, pip_fails, subprocess.run

    def __call__(self, cmd, **kw):
        if "-c" in cmd:  # a readiness check
            return subprocess.CompletedProcess(cmd, 0, "", "") if self.built else self.real(cmd, **kw)
        self.calls.append([str(c) for c in cmd])
        pip = list(cmd[1:3]) == ["-m", "pip"]
        if pip and self.pip_fails:
            raise subprocess.CalledProcessError(1, cmd)
        self.built = self.built or pip
        return subprocess.CompletedProcess(cmd, 0)


@pytest.mark.parametrize("script, attr, base, installs", [
    ("smac_speed", "VENV", sys.executable, [["jaxmarl==0.2.0"]]),
    ("mpe_mappo_vs_benchmarl", "VENV", sys.executable,
     [["torch==2.13.0"], ["benchmarl==1.5.2"], ["pettingzoo[mpe]==1.24.3"]]),
    ("mapf_throughput", "VENV", "python3", [["pogema==1.4.0"]]),
])
def test_interrupted_peer_venv_is_rebuilt(tmp_path, monkeypatch, script, attr, base, installs):
    """``bin/python`` exists but the peer never got installed (pip stopped by Ctrl-C): the venv is rebuilt with
    ``venv --clear`` and every install, not used as it is."""
    mod = load(script)
    venv = tmp_path / "venv"
    fake_venv(venv)
    monkeypatch.setattr(mod, attr, venv)
    fake = FakeInstall()
    monkeypatch.setattr(subprocess, "run", fake)  # the one subprocess module, as _peer_venv sees it
    assert mod.ensure_venv() == venv / "bin" / "python"
    py = str(venv / "bin" / "python")
    assert fake.calls == [[base, "-m", "venv", "--clear", str(venv)],
                          *([py, "-m", "pip", "install", "-q", *pkgs] for pkgs in installs)]
    # ready now: nothing is installed again
    fake.calls.clear()
    assert mod.ensure_venv() == venv / "bin" / "python" and fake.calls == []


def test_ns3_pypi_venv_check_does_not_load_the_bindings(tmp_path):
    """ns3's readiness: the wheel installed whole with its ns package; ``from ns import ns`` (a minute of JIT, what
    the route times) is not run by the check."""
    pv, ns3 = load("_peer_venv"), load("ns3_overhead")
    site = tmp_path / "site"
    py = fake_venv(tmp_path / "venv", site)
    assert pv.peer_ready(py, ns3.PYPI_CHECK) == (False, "ns3 is not installed")
    fake_dist(site, "ns3", "3.44.post0", {"ns/__init__.py": "raise SystemExit('bindings loaded by the check')\n"})
    assert pv.peer_ready(py, ns3.PYPI_CHECK) == (True, "")
    (site / "ns" / "__init__.py").unlink()
    assert not pv.peer_ready(py, ns3.PYPI_CHECK)[0]


def test_ns3_pypi_route_rebuilds_an_unready_venv(tmp_path, monkeypatch):
    ns3 = load("ns3_overhead")
    venv = tmp_path / "ns3-pypi"
    fake_venv(venv)
    monkeypatch.setattr(ns3, "PYPI_VENV", venv)
    built, ran = [], []
    monkeypatch.setattr(ns3, "peer_ready", lambda py, check: (check == ns3.PYPI_CHECK and not built, "not installed"))
    monkeypatch.setattr(ns3, "ensure_peer_venv", lambda v, check, installs: built.append((v, check, installs)))
    monkeypatch.setattr(ns3.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or subprocess.CompletedProcess(
        cmd, 0, "import_s 1.0\nstep_ms 2.000\n", ""))
    assert ns3.pypi_route(3) == "installed earlier; import 1.0 s; 2.000 ms/step"  # ready: no install
    assert built == [] and ran[-1][:2] == [str(venv / "bin" / "python"), "-c"]
    monkeypatch.setattr(ns3, "peer_ready", lambda py, check: (False, "ns3 is not installed"))
    out = ns3.pypi_route(3)
    assert built == [(venv, ns3.PYPI_CHECK, [["ns3==3.44.post0"]])]
    assert out.startswith("venv + pip install ") and out.endswith("; import 1.0 s; 2.000 ms/step")


def test_failed_install_is_one_error_and_the_venv_stays_unready(tmp_path, monkeypatch):
    from coopsim.errors import DependencyNotInstalled

    pv = load("_peer_venv")
    venv = tmp_path / "venv"
    fake_venv(venv)
    fake = FakeInstall(pip_fails=True)
    monkeypatch.setattr(pv.subprocess, "run", fake)
    with pytest.raises(DependencyNotInstalled, match=r"`.* -m pip install -q peer==1` failed \(exit code 1\); the "
                                                     "next run rebuilds it"):
        pv.ensure_peer_venv(venv, pv.installed_check("peer", "1"), [["peer==1"]])
    assert [c[1:4] for c in fake.calls] == [["-m", "venv", "--clear"], ["-m", "pip", "install"]]
    # installed, yet the peer still does not import: one error, no second install in the same run
    monkeypatch.setattr(pv, "peer_ready", lambda py, check: (False, "ModuleNotFoundError: No module named 'x'"))
    calls = []
    monkeypatch.setattr(pv.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0))
    with pytest.raises(DependencyNotInstalled, match=r"was built \(pip install x\) but its check still fails: "
                                                     "ModuleNotFoundError: No module named 'x'"):
        pv.ensure_peer_venv(venv, "import x", [["x"]])
    assert len(calls) == 2


@pytest.mark.parametrize("script, args", [
    ("mapf_throughput.py", ["--out", "/proc/x.md"]),
    ("smac_speed.py", ["--out", "/proc/x.json"]),
    ("smac_speed.py", ["--out", "/tmp"]),
    ("mpe_mappo_vs_benchmarl.py", ["--out", "/proc/x"]),
    ("mpe_mappo_vs_benchmarl.py", ["--run-dir", "/proc/x"]),
])
def test_an_unwritable_output_is_refused_before_the_peer_venv(script, args, tmp_path):
    """Fresh-user pass 19: these started building their ~1 GB peer venv before finding --out unwritable."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PIP_NO_INDEX": "1", "PIP_INDEX_URL": "http://127.0.0.1:9/"}
    r = subprocess.run([sys.executable, str(root / "benchmarks" / script), *args], capture_output=True, text=True,
                       env=env, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert ("cannot write" in r.stderr or "is a folder" in r.stderr) and "creating" not in r.stdout + r.stderr
