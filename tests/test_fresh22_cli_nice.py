"""Fresh-user test 22, "nice to have" on the command line: --version and -h, out_dir= in the help and the README,
whole sentences in `coopsim list`, help for `python -m coopsim.comm.ns3.build`, and the `seeds=0,1` hint."""
import io
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from rich.console import Console

from coopsim import cli
from coopsim.errors import ConfigError
from coopsim.platform.registry import Variant

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "examples" / "line-random.yaml"


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "coopsim.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


# 1. --version and -h

def test_version_prints_the_package_version():
    r = run_cli("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"coopsim {version('coopsim')}\n"


@pytest.mark.parametrize("command", [[], ["list"], ["run"], ["sweep"], ["train"], ["eval"], ["report"]])
def test_h_is_help(command):
    short, long = run_cli(*command, "-h"), run_cli(*command, "--help")
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout and "Usage: python -m coopsim.cli" in short.stdout
    assert "No such option" not in short.stderr


# 2. out_dir= in the help of the commands that write runs, and in the README

@pytest.mark.parametrize("command", ["run", "train", "sweep", "eval"])
def test_help_names_out_dir_and_its_default(command):
    r = run_cli(command, "--help")
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.stdout).split())
    assert "out_dir=/data/runs sets where run directories are written (default: runs/" in text


def test_readme_command_list_names_out_dir():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Using it", 1)[1].split("```", 2)[1]
    assert any(line.startswith(".venv/bin/coopsim ") and "out_dir=" in line and "default runs/" in line
               for line in block.splitlines())


# 3. `coopsim list`: whole sentences, wrapped on a terminal

class _Spec:
    def __init__(self, obj):
        self.obj = obj

    def load(self):
        return self.obj


def _cls(doc):
    return type("C", (), {"__doc__": doc})


def test_list_description_keeps_a_sentence_that_spans_docstring_lines():
    doc = """IPPO / MAPPO team policy: one actor shared by all agent slots (agent-id one-hot input), a GRU
    option, and a critic.

    More detail that is not shown.
    """
    assert cli._list_description(_Spec(_cls(doc))) == ("IPPO / MAPPO team policy: one actor shared by all agent "
                                                       "slots (agent-id one-hot input), a GRU option, and a critic.")


def test_list_description_stops_at_a_sentence_end_when_long():
    first = "A first sentence that says what it is (Rashid et al. 2018, e.g. ``x``), " + "long " * 25 + "end."
    doc = f"{first} A second sentence.\n\nDetails."
    assert cli._list_description(_Spec(_cls(doc))) == first  # "et al. 2018", "e.g. ``x``" do not end it
    short = "Short one. Another short one.\n    Still the same paragraph."
    assert cli._list_description(_Spec(_cls(short))) == "Short one. Another short one. Still the same paragraph."


def test_list_description_of_a_variant_names_its_params():
    spec = _Spec(Variant(_cls("Walks.\n\nMore."), defaults={"n": 3}))
    assert cli._list_description(spec) == "Walks.  [n=3]"


def test_list_description_drops_pointers_to_the_module_docstring():
    """`coopsim list` is read without the source at hand: "(see the module docstring)" is dropped (session 23)."""
    for doc, want in [("Batched core over PettingZoo parallel envs (see the module docstring).", "Batched core over "
                       "PettingZoo parallel envs."),
                      ("Batched MG-MAPF simulator (see the module docstring for the full specification).\n\nMore.",
                       "Batched MG-MAPF simulator."),
                      ("A team with a sender (see module docstring). Acts on ``[E, N]``.",
                       "A team with a sender. Acts on ``[E, N]``."),
                      ("IMMP on ``mapf/MGMAPF-v0``; see the module docstring.", "IMMP on ``mapf/MGMAPF-v0``.")]:
        assert cli._list_description(_Spec(_cls(doc))) == want
    r = run_cli("list")
    assert r.returncode == 0, r.stderr
    assert "docstring" not in r.stdout


def test_list_piped_shows_whole_sentences_one_line_per_id():
    r = run_cli("list", "agent")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split(None, 1)[1] for line in r.stdout.splitlines()[1:]}
    assert rows["ppo/ippo-v0"].startswith("IPPO / MAPPO team policy")
    assert "centralised (MAPPO, on ``scenario.state()``) critic.  [critic='local']" in rows["ppo/ippo-v0"]
    assert rows["qmix/qmix-v0"].endswith("allows.")
    for id_, text in rows.items():  # each ends a sentence (or the variant's params after one)
        assert text.endswith((".", "]")), (id_, text)


def test_list_on_a_terminal_wraps_long_descriptions_in_their_column(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=out, force_terminal=True, width=100, color_system=None,
                                                emoji=False))
    cli.list_cmd("agent")
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 100 for line in lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("  ppo/ippo-v0 "))
    col = lines[start].index("IPPO")
    assert col >= 36
    cont = []  # the continuation lines: blank under the id column
    for line in lines[start + 1:]:
        if line[:col].strip():
            break
        cont.append(line[col:])
    text = " ".join(" ".join([lines[start][col:], *cont]).split())
    assert text.endswith("centralised (MAPPO, on ``scenario.state()``) critic. [critic='local']")


# 4. python -m coopsim.comm.ns3.build --help

def test_ns3_build_help_says_what_and_where_without_building(tmp_path):
    where = tmp_path / "b"
    r = subprocess.run([sys.executable, "-m", "coopsim.comm.ns3.build", "--help"], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, "COOPSIM_NS3_BUILD_DIR": str(where)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: python -m coopsim.comm.ns3.build [-h]")
    text = " ".join(r.stdout.split())
    assert "coopsim-ns3-bridge" in text and "ns3-v0 channel" in text and "CMake" in text
    assert f"Build directory: {where} (set COOPSIM_NS3_BUILD_DIR" in text
    assert not where.exists()  # nothing was built or made


def test_ns3_build_main_without_arguments_builds_and_prints_the_path(monkeypatch, capsys):
    from coopsim.comm.ns3 import build

    calls = []
    monkeypatch.setattr(build, "ensure_bridge", lambda quiet=True: calls.append(quiet) or Path("/x/coopsim-ns3-bridge"))
    monkeypatch.setattr(sys, "argv", ["pytest", "-q", "--whatever"])  # the caller's argv is not parsed
    assert build.main() == 0
    assert capsys.readouterr().out == "/x/coopsim-ns3-bridge\n" and calls == [False]
    with pytest.raises(SystemExit) as exc:
        build.main(["--help"])
    assert exc.value.code == 0 and calls == [False]


# 5. seeds=0,1

@pytest.mark.parametrize("command", [["run"], ["train"], ["validate"], ["eval", "--checkpoint", "nope.pt"],
                                     ["sweep", "--grid", "episodes=1,2"]])
def test_seeds_without_brackets_suggests_the_quoted_list(command):
    r = run_cli(command[0], str(CFG), *command[1:], "seeds=0,1")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    err = " ".join(r.stderr.split())
    assert "key 'seeds': invalid value '0,1': seeds is a list; write 'seeds=[0,1]' (with the brackets, quoted" in err
    assert ("--grid seeds=0,1 for one run per seed" in err) == (command[0] == "sweep")


def test_seeds_check_leaves_other_forms_alone():
    cli._check_seeds_overrides(["seeds=[0,1]", "seeds=3", "scenario.params.seeds=0,1", "x=0,1", "episodes=1"], CFG)
    with pytest.raises(ConfigError) as exc:
        cli._check_seeds_overrides(["episodes=1", " seeds = 0, 1,2"], CFG)
    assert "'seeds=[0,1,2]'" in str(exc.value) and exc.value.key == "seeds"
