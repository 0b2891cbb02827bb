"""Result files of benchmarks/ are written atomically (coopsim.platform.recorder.atomic_write_text): an interrupted
benchmark leaves the previous file or the new one, never half of one."""
import ast
import json
from argparse import Namespace
from pathlib import Path

from coopsim.platform import recorder
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

ROOT = Path(__file__).resolve().parents[2]
#: owned by other work (the SMAC speed and fingerprint scripts), or already atomic and in use by running jobs
NOT_HERE = {"smac_speed.py", "_smax_worker.py", "smac_fingerprint.py", "smac_step_ab.py", "smac_time_to_win.py"}


def _direct_writes(path: Path) -> list[str]:
    """``file:line call`` of every write straight to a final path: ``.write_text``/``.write_bytes``, ``json.dump``
    and ``open(..., "w"/"a"/"x")``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        direct = name in ("write_text", "write_bytes") or (
            name == "dump" and isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "json")
        if name == "open":
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            direct = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax")
        if direct:
            found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_no_benchmark_writes_a_result_file_in_place():
    scripts = sorted(p for p in (ROOT / "benchmarks").rglob("*.py") if p.name not in NOT_HERE)
    assert len(scripts) > 10
    assert [w for p in scripts for w in _direct_writes(p)] == []


def test_the_check_sees_a_direct_write(tmp_path):
    (tmp_path / "b.py").write_text("import json\nfrom pathlib import Path\nPath('x').write_text('a')\n"
                                   "json.dump({}, open('y', 'w'))\n")
    assert _direct_writes(tmp_path / "b.py") == ["b.py:3 write_text", "b.py:4 dump", "b.py:4 open"]


def test_mpe_mappo_report_goes_through_atomic_write_text(tmp_path, monkeypatch):
    mod = load_benchmark("mpe_mappo_vs_benchmarl")
    written = []
    real = recorder.atomic_write_text
    monkeypatch.setattr(recorder, "atomic_write_text", lambda p, t: (written.append(Path(p).name), real(p, t)))
    runs = [{"learner": "coopsim ppo/mappo-v0", "seed": s, "per_agent_return": r, "wall_s": 10.0 + s}
            for s, r in ((0, -20.0), (1, -22.0))]
    mod.write(runs, Namespace(frames=100, seeds=2, episodes=1), tmp_path / "sub" / "mappo", 0.0)
    assert written == ["mappo.json", "mappo.md"]
    data = json.loads((tmp_path / "sub" / "mappo.json").read_text())
    assert data["rows"]["coopsim ppo/mappo-v0"]["seeds"] == [0, 1]
    assert data["rows"]["coopsim ppo/mappo-v0"]["per_agent_return"][0] == -21.0
    assert "| coopsim ppo/mappo-v0 | -21.00 +- " in (tmp_path / "sub" / "mappo.md").read_text()
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["mappo.json", "mappo.md"]  # no temp file left
