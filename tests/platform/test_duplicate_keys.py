"""A key given twice in a YAML mapping is an error naming file, line and key (plain YAML keeps the last one)."""
import subprocess
import sys

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.config import load_config


def test_duplicate_top_level_key(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("name: x\nname: y\nscenario: {id: line/LineWalk-v0}\nagents: {id: random-v0}\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml, line 2: duplicate key 'name'"):
        load_config(p)


def test_duplicate_nested_key_cli(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("name: x\nscenario:\n  id: line/LineWalk-v0\n  params:\n    num_agents: 2\n    num_agents: 3\n"
                 "agents: {id: random-v0}\n")
    r = subprocess.run([sys.executable, "-m", "coopsim.cli", "validate", str(p)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert "dup.yaml, line 6: duplicate key 'num_agents'" in r.stderr


def test_no_duplicates_still_loads(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("name: x\nscenario: {id: line/LineWalk-v0, params: {num_agents: 2}}\nagents: {id: random-v0}\n")
    assert load_config(p).scenario.params == {"num_agents": 2}
