"""fresh37 F13: the README's quick start says what `make demo` installs (the Makefile's one install step)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_demo_line_names_the_install_the_makefile_does():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo: install$", make, re.M) and re.search(r"^test: install$", make, re.M)
    extras = re.findall(r"pip install -q -e '\.\[(\w+)\]'", make)
    assert extras == ["dev"]  # one install step, with the dev extras
    demo = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("make demo "))
    assert "installs coopsim[dev]" in demo, demo
