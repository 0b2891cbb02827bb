"""Docs examples are tests: every ```python block of README.md and docs/smac.md runs, and every config the README
names exists. (docs/ns3.md's block needs ns-3 and is left out.)"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


#: docs whose ```python blocks must run as written
SNIPPET_DOCS = ("README.md", "docs/smac.md")


@pytest.mark.parametrize("doc, block", [(d, b) for d in SNIPPET_DOCS
                                        for b in re.findall(r"```python\n(.*?)```", (ROOT / d).read_text(), flags=re.S)])
def test_python_blocks_run(doc, block):
    exec(compile(block, doc, "exec"), {})


def test_named_configs_exist_and_validate():
    from coopsim.platform.config import load_config

    names = sorted(set(re.findall(r"configs/[\w./-]+\.yaml", README)))
    assert "configs/mapf/random-32-32-10.yaml" in names
    import yaml

    for n in names:
        data = yaml.safe_load((ROOT / n).read_text())
        if "name" in data:  # run configs; experiment files (e.g. configs/ns3/ddacom-spread.yaml) have their own schema
            load_config(ROOT / n)
