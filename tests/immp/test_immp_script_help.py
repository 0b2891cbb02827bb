"""Fresh-user pass 35 (F9): ``benchmarks/immp_*.py --help`` left several options without help text or a stated
default (``--first-seed`` 10, i.e. the held-out scen files 11-20, was invisible). Every option now says what it is
and its default."""
import argparse
import contextlib
import io
from pathlib import Path

import pytest
from bench_loader import load_benchmark  # noqa: E402  (tests/ is on sys.path under pytest)

SCRIPTS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "benchmarks").glob("immp_*.py"))


def _help(name: str) -> str:
    mod = load_benchmark(name, f"f35_help_{name}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        mod.main(["--help"])
    assert exc.value.code == 0
    return " ".join(out.getvalue().split())          # one line: argparse wraps the help text


def _parser(name: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``main`` builds, caught at its ``parse_args`` (nothing after it runs)."""
    class Parsed(Exception):
        pass

    def caught(self, *args, **kwargs):
        raise Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    mod = load_benchmark(name, f"f35_parser_{name}")
    with pytest.raises(Parsed) as exc:
        mod.main([])
    return exc.value.args[0]


def test_every_immp_script_option_has_help_and_its_default(monkeypatch):
    assert len(SCRIPTS) == 7
    for name in SCRIPTS:
        parser = _parser(name, monkeypatch)
        fmt = parser._get_formatter()
        assert isinstance(fmt, argparse.ArgumentDefaultsHelpFormatter), name
        for act in parser._actions:
            if not act.option_strings or isinstance(act, argparse._HelpAction):
                continue
            assert act.help, (name, act.option_strings)                       # says what it is
            assert act.required or "%(default)" in fmt._get_help_string(act), (name, act.option_strings)


@pytest.mark.parametrize("name, needle", [
    ("immp_cs_pibt_sweep", "the default, 10 with 10 instances, is scen files 11-20, held out from the evaluation "
                           "(scen files 1-5) (default: 10)"),
    ("immp_highlevel_sweep", "the default, 10 with 5 instances, is scen files 11-15, held out from the evaluation "
                             "(scen files 1-5) (default: 10)"),
    ("immp_highlevel_sweep", "(default: 1:0.5 0.3:0 0.3:0.02 0.2:0.02 0.1:0.02)"),
    ("immp_cs_pibt_sweep", "--agents AGENTS agents per instance (>= 1) (default: 64)"),
    ("immp_inference", "--goals GOALS goals per agent (>= 1) (default: 5)"),
    ("immp_intent_finetune", "--rounds ROUNDS DAgger rounds: rollouts, then training (>= 1) (default: 3)"),
    ("immp_intent_finetune", "(default: [24, 48])"),
])
def test_defaults_that_were_invisible(name, needle):
    assert needle in _help(name)
