"""The `coopsim` CLI in a subprocess, for tests that check its messages (tests/ is on sys.path under pytest)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=ROOT):
    """``python -m coopsim.cli *args`` in ``cwd`` (the repository by default), wide terminal, one thread."""
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "400", "OMP_NUM_THREADS": "1"})


def _err(r) -> str:
    """The stderr of a refused command (exit 2, no traceback) on one line."""
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    return " ".join(r.stderr.split())


def run_main(main, argv):
    """``coopsim.errors.run_script(main, argv)`` in-process, as ``python -m`` runs a script: (exit code, stdout,
    stderr)."""
    import contextlib
    import io

    from coopsim.errors import run_script

    o, e = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            run_script(main, argv)
        except SystemExit as exc:
            code = exc.code
    return code, o.getvalue(), e.getvalue()


def run_config_until(cfg, stop_after=None):
    """``run_config(cfg)`` (a loaded config), interrupted as by Ctrl-C after ``stop_after`` episodes when given (as a
    sweep interrupted mid-cell leaves a run); returns the run directory."""
    import pytest

    from coopsim.platform.runner import RunInterrupted, run_config

    if stop_after is None:
        return Path(run_config(cfg, progress=False))
    done = []

    def stop(_row):
        done.append(1)
        if len(done) == stop_after:
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted) as info:
        run_config(cfg, progress=False, on_episode=stop)
    return Path(info.value.run_dir)


#: the smallest ns-3 experiment file (3 agents, 1 env, 1 episode, 1 seed, a 3-rate oracle), without sender_params
SMALL_NS3_EXPERIMENT = {
    "scenario": {"num_agents": 3, "obs_radius_m": 0.5, "payload_floats": 24},
    "senders": ["ddacom"],
    "num_envs": 1, "episodes": 1, "seeds": 1,
    "oracle": {"rates": 3, "min_frac": 0.1, "max_frac": 0.5, "drain_steps": 3},
    "channel": {"id": "ns3-v0", "params": {"latency_bound_s": 0.1}},
}


class Started(Exception):
    """Raised in place of the ns-3 experiment's first work (anchors, runs, sweep, calibration): its checks passed."""


def experiment_until_work(tmp_path, monkeypatch, *extra: str):
    """``go(ddacom, *options)`` runs ``python -m coopsim.comm.ns3.experiment`` in-process on
    :data:`SMALL_NS3_EXPERIMENT` with ``sender_params.ddacom`` written as ``ddacom`` (YAML text, or a dict), or on the
    file ``ddacom`` when it is a :class:`~pathlib.Path`, with ``--sender-param`` for each option and ``extra``
    arguments, stopping at its first work. Returns ``(the one-line error, the file)``, the error None when the work
    started; asserts that a refusal exits 2 on one line without a traceback."""
    import yaml

    from coopsim.comm.ns3 import experiment

    def started(*a, **k):
        raise Started

    for name in ("run_anchors", "run", "safe_rate_sweep", "calibrate"):
        monkeypatch.setattr(experiment, name, started)

    def go(ddacom, *options: str):
        if isinstance(ddacom, Path):
            cfg = ddacom
        else:
            cfg = tmp_path / "c.yaml"
            cfg.write_text(yaml.safe_dump(SMALL_NS3_EXPERIMENT) + (
                f"sender_params:\n  ddacom: {ddacom}\n" if isinstance(ddacom, str) else
                yaml.safe_dump({"sender_params": {"ddacom": ddacom}})))
        argv = [str(cfg), *extra, "--oracle-cache", str(tmp_path / "cache"), "--out", str(tmp_path / "o.json")]
        for o in options:
            argv += ["--sender-param", o]
        try:
            code, _, err = run_main(experiment.main, argv)
        except Started:
            return None, str(cfg)
        assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / "o.json").exists()
        return err.strip(), str(cfg)

    return go


#: a shipped DDACOM run config, and the line of it that names the agent
DDACOM_RUN = ROOT / "configs" / "mpe" / "spread-po-ddacom-markov.yaml"
DDACOM_AGENTS_LINE = "agents: {id: ddacom/spread-v0}"


def ddacom_run_config(tmp_path, sender_params: str) -> str:
    """:data:`DDACOM_RUN` with ``agents.params.sender_params`` written as ``sender_params`` (YAML), in ``tmp_path``."""
    text = DDACOM_RUN.read_text()
    assert DDACOM_AGENTS_LINE in text
    path = tmp_path / "run.yaml"
    path.write_text(text.replace(DDACOM_AGENTS_LINE, f"agents: {{id: ddacom/spread-v0, params: {{sender_params: "
                                                     f"{sender_params}}}}}"))
    return str(path)
