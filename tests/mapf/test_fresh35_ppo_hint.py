"""fresh35 F7: a MAPPO checkpoint evaluated as ``ppo/ippo-v0`` (or the reverse) is refused with the id to use, since
each id fixes its critic; the hint used to be "pass agents.params={} ... with 'agents.id=ppo/ippo-v0'", which gives
the same error again."""
from __future__ import annotations

import subprocess
import sys

import pytest

from coopsim.errors import ConfigError
from coopsim.platform.registry import make_component
from coopsim.scenarios.mapf.core import MGMAPFCore

PARAMS = {"map": "random", "random_size": [6, 6], "num_agents": 2, "num_goals": 1, "obs_radius": 1}


def _core():
    return MGMAPFCore(**PARAMS)


@pytest.mark.parametrize("trained, other", [("ppo/mappo-v0", "ppo/ippo-v0"), ("ppo/ippo-v0", "ppo/mappo-v0")])
def test_critic_mismatch_names_the_id_to_use(tmp_path, trained, other):
    path = tmp_path / "policy.pt"
    make_component("agent", trained, _core(), hidden=[8]).save(path)
    with pytest.raises(ConfigError) as info:
        make_component("agent", other, _core(), hidden=[8]).load(path)
    crit = {"ppo/mappo-v0": "central", "ppo/ippo-v0": "local"}
    assert info.value.key == "agents.id"
    assert str(info.value) == (f"{path}: key 'agents.id': checkpoint was trained with critic={crit[trained]!r}, i.e. "
                               f"agent {trained}; this agent is {other} (critic={crit[other]!r}), and each id fixes its "
                               f"critic (the network's critic input differs): use agents.id={trained}, the id the "
                               f"checkpoint was trained with")
    make_component("agent", trained, _core(), hidden=[8]).load(path)  # what the message says works


def test_eval_cli_blames_the_id_override_without_the_params_hint(tmp_path):
    path = tmp_path / "policy.pt"
    make_component("agent", "ppo/mappo-v0", _core(), hidden=[8]).save(path)
    cfg = tmp_path / "mappo.yaml"
    cfg.write_text("name: t\nscenario:\n  id: mapf/MGMAPF-v0\n  params: {map: random, random_size: [6, 6], num_agents: 2, "
                   "num_goals: 1, obs_radius: 1}\nagents:\n  id: ppo/mappo-v0\n  params: {hidden: [8]}\nseeds: [0]\n"
                   "episodes: 1\nmax_steps: 8\n")
    r = subprocess.run([sys.executable, "-m", "coopsim", "eval", str(cfg), "agents.id=ppo/ippo-v0", "--checkpoint",
                        str(path), f"out_dir={tmp_path / 'runs'}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "command-line override 'agents.id=ppo/ippo-v0'" in r.stderr
    assert "key 'agents.id'" in r.stderr and "use agents.id=ppo/mappo-v0, the id the checkpoint was trained with" in r.stderr
    assert "agents.params={}" not in r.stderr  # the old hint, which led to the same error
