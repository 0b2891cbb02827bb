"""No benchmark script writes into a committed result by default: a newcomer's trial run (``mapf_throughput.py
--quick``, ``smac_speed.py --quick``, ...) used to overwrite ``benchmarks/results/*`` or ``docs/*`` silently. Every
default of every script's flags lies outside ``benchmarks/results/`` and ``docs/`` (the scripts write under ``runs/``);
the commands in README.md and docs/ that regenerate a committed result name it with ``--out``."""
import argparse
import ast
import inspect
import os
import re
from pathlib import Path

import pytest
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

from coopsim.platform import registry

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
#: folders of committed results a default must not point into
COMMITTED = (ROOT / "benchmarks" / "results", ROOT / "docs")
#: the scripts (``smax_core.py`` and ``_*.py`` are modules, not scripts)
SCRIPTS = sorted(p.stem for p in BENCH.glob("[a-z]*.py") if p.name != "smax_core.py")
#: script -> (default under runs/, the committed result its --help names)
MOVED = {
    "mapf_throughput": ("runs/benchmarks/mapf_throughput.md", "benchmarks/results/mapf_throughput.md"),
    "smac_speed": ("runs/benchmarks/smac_speed.json", "benchmarks/results/smac_speed.json"),
    "mpe_mappo_vs_benchmarl": ("runs/benchmarks/mpe_mappo_vs_benchmarl", "benchmarks/results/mpe_mappo_vs_benchmarl"),
}


class _Parsed(Exception):
    """Raised in place of parsing: carries the parser a script's ``main`` built."""


def script_parser(name: str, monkeypatch) -> argparse.ArgumentParser:
    """The argparse parser ``benchmarks/<name>.py``'s ``main`` builds, caught at its first ``parse_args`` (nothing
    after it runs)."""
    def caught(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", caught)
    # mappo_on_smax.py adds SMAX's ids to the registry before it parses: keep that out of later tests
    monkeypatch.setattr(registry, "_eps", registry._eps)
    for attr in ("_smax_registered", "_smax_orig_eps"):
        monkeypatch.setattr(registry, attr, getattr(registry, attr, None), raising=False)
    mod = load_benchmark(name, f"s33_defaults_{name}")
    with pytest.raises(_Parsed) as ei:
        mod.main([]) if inspect.signature(mod.main).parameters else mod.main()
    return ei.value.args[0]


def committed_defaults(parser: argparse.ArgumentParser, base: Path = ROOT) -> list[str]:
    """``flag=default`` of every default (a path, or a list of them) inside a committed-results folder; a relative
    default is taken from ``base`` (the scripts are run from the repository root)."""
    found = []
    for act in parser._actions:
        values = act.default if isinstance(act.default, (list, tuple)) else [act.default]
        for v in values:
            if isinstance(v, (str, os.PathLike)) and str(v):
                p = (base / v).resolve()
                if any(p == c or p.is_relative_to(c) for c in COMMITTED):
                    found.append(f"{'/'.join(act.option_strings) or act.dest}={v}")
    return found


def test_every_script_is_checked():
    assert len(SCRIPTS) >= 27 and set(MOVED) | {"shield_scaling"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_no_default_output_lies_in_a_committed_result(name, monkeypatch):
    assert committed_defaults(script_parser(name, monkeypatch)) == []


def test_the_check_sees_a_committed_default():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "x.json"))
    ap.add_argument("--plot", type=Path, default=Path("docs"))
    ap.add_argument("--csv", nargs="+", default=["runs/a.csv", "docs/b.csv"])
    ap.add_argument("--run-dir", default=str(ROOT / "runs" / "x"))
    ap.add_argument("--map", default="random-32-32-10")
    assert committed_defaults(ap) == [f"--out={ROOT}/benchmarks/results/x.json", "--plot=docs", "--csv=docs/b.csv"]


#: a path part naming a committed-results folder; the calls that take a path
FOLDER_PARTS, CALLS = ("results", "docs", "benchmarks/results"), ("Path", "open")


def _path_literals(path: Path) -> list[str]:
    """``file:line`` of every path built in code from a literal that names a committed-results folder:
    ``X / "results"``, ``X / "docs"`` or ``Path("benchmarks/results/...")`` / ``Path("docs...")`` (help texts and
    docstrings may name them)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            consts = [n.value for n in (node.left, node.right) if isinstance(n, ast.Constant)]
            bad = [c for c in consts if isinstance(c, str) and c.strip("/") in FOLDER_PARTS]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in CALLS:
            consts = [n.value for n in node.args if isinstance(n, ast.Constant)]
            bad = [c for c in consts if isinstance(c, str) and re.match(r"(\./)?(benchmarks/results|docs)(/|$)", c)]
        else:
            continue
        if bad:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_script_builds_a_committed_result_path():
    """Also an output path computed in code (``a.out or ROOT / "benchmarks" / "results" / ...``), which the argparse
    defaults do not show."""
    assert [w for p in sorted(BENCH.glob("*.py")) for w in _path_literals(p)] == []


def test_the_path_check_sees_one(tmp_path):
    (tmp_path / "b.py").write_text('from pathlib import Path\nROOT = Path(".")\nx = ROOT / "benchmarks" / "results"\n'
                                   'y = Path("docs/shield.png")\nz = Path("runs") / "x"\n')
    assert _path_literals(tmp_path / "b.py") == ["b.py:3", "b.py:4"]


@pytest.mark.parametrize("name", sorted(MOVED))
def test_help_names_the_default_and_the_committed_result(name, capsys):
    default, committed = MOVED[name]
    mod = load_benchmark(name, f"s33_help_{name}")
    assert mod.DEFAULT_OUT == ROOT / default  # under the repository's runs/, wherever the script is run from
    with pytest.raises(SystemExit):
        mod.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {default}; the committed result is {committed}: pass --out there to regenerate it)" in text


@pytest.mark.parametrize("name", sorted(MOVED))
def test_doc_commands_that_regenerate_a_result_name_it(name):
    """Every ``python benchmarks/<name>.py ...`` command of README.md and docs/*.md goes with the numbers it
    produced, so it passes ``--out`` with the committed path (benchmarks/README.md shows trial runs too)."""
    committed = MOVED[name][1]
    commands = [(doc.name, c) for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
                for c in re.findall(rf"`[^`]*python benchmarks/{name}\.py[^`]*`", doc.read_text())]
    assert commands and [(d, c) for d, c in commands if f"--out {committed}`" not in c] == []
    assert f"--out {committed}" in (BENCH / "README.md").read_text()
