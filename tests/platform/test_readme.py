"""Docs examples are tests: every ```python block of README.md runs, and every config the README names exists."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", README, flags=re.S))
def test_python_blocks_run(block):
    exec(compile(block, "README.md", "exec"), {})


def test_named_configs_exist_and_validate():
    from coopsim.platform.config import load_config

    names = sorted(set(re.findall(r"configs/[\w./-]+\.yaml", README)))
    assert "configs/mapf/random-32-32-10.yaml" in names
    import yaml

    for n in names:
        data = yaml.safe_load((ROOT / n).read_text())
        if "name" in data:  # run configs; experiment files (e.g. configs/ns3/ddacom-spread.yaml) have their own schema
            load_config(ROOT / n)
