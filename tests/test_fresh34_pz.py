"""fresh34 findings on the PettingZoo view, the adapter and registry.make: F1, F2, F3, F8, F13, F14."""
import contextlib
import gc
import io
import sys
import types
import weakref

import numpy as np
import pytest

from coopsim.errors import ConfigError, ScenarioCheckError
from coopsim.platform import registry as reg
from coopsim.platform.scenario import ScenarioEnv

SAMPLE = ["mpe/simple_spread-v0", "smac/3m-v0", "coop_game/Grid4x4-v0", "mapf/MGMAPF-v0"]


# F13: infos' action_mask is int8 0/1 [A], as PettingZoo's masked envs give it

@pytest.mark.parametrize("sid", SAMPLE)
def test_info_action_mask_is_int8_and_samples(sid):
    env = reg.make(sid)
    _, infos = env.reset(seed=0)
    n = env.action_space(env.agents[0]).n
    for t in range(3):
        core_masks = env.core.action_masks()[0]
        for a in env.agents:
            m = infos[a]["action_mask"]
            assert m.dtype == np.int8 and m.shape == (n,)
            assert set(np.unique(m).tolist()) <= {0, 1}
            assert np.array_equal(m.astype(bool), core_masks[env._index[a]])
        # the PettingZoo idiom: masked sampling straight from the info
        acts = {a: env.action_space(a).sample(mask=infos[a]["action_mask"]) for a in env.agents}
        assert all(infos[a]["action_mask"][acts[a]] == 1 for a in env.agents)
        _, _, _, _, infos = env.step(acts)
        if not env.agents:
            break
    assert env.core.action_masks().dtype == np.bool_   # the batched core keeps bool masks


@pytest.mark.parametrize("sid", SAMPLE)
def test_pettingzoo_aec_api_test_passes(sid):
    from pettingzoo.test import api_test
    from pettingzoo.utils import parallel_to_aec

    with contextlib.redirect_stdout(io.StringIO()):
        api_test(parallel_to_aec(reg.make(sid)), num_cycles=20)


def test_check_scenario_runs_the_aec_api_test(monkeypatch):
    from coopsim.testing import check_scenario

    def bool_infos(self, agents):  # the old infos: bool masks, refused by Discrete.sample(mask=...)
        masks = self.core.action_masks()[0]
        return {a: {"action_mask": masks[self._index[a]].copy()} for a in agents}

    monkeypatch.setattr(ScenarioEnv, "_infos", bool_infos)
    with pytest.raises(ScenarioCheckError, match=r"api_test \(AEC.*np\.int8"):
        check_scenario("line/LineWalk-v0", num_steps=5, api_cycles=5)


def test_view_docstrings_say_int8_masks():
    assert "int8 [A]" in ScenarioEnv.reset.__doc__ and "int8 [A]" in ScenarioEnv.step.__doc__
    assert "astype(bool)" in ScenarioEnv.reset.__doc__


# F1: from_envs refuses one env object twice and an empty list; an env that drops an acting agent is refused

def _spread():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=25)


def test_from_envs_refuses_the_same_env_twice_and_empty():
    from coopsim.scenarios.pettingzoo_adapter import PettingZooCore

    e = _spread()
    with pytest.raises(ConfigError, match=r"envs\[1\] is the same object as envs\[0\].*one env per slot") as info:
        PettingZooCore.from_envs([e] * 2)
    assert info.value.key == "envs"
    with pytest.raises(ConfigError, match="non-empty list"):
        PettingZooCore.from_envs([])
    core = PettingZooCore.from_envs([_spread(), _spread()])   # distinct envs: the episode ends with the env's own
    core.reset(seed=0)
    steps = 0
    while core.alive.any():
        core.step(np.zeros((2, 3), np.int64))
        steps += 1
    assert steps == 25


class _DropsAgents:
    """A duck-typed parallel env whose step() returns entries for agent 'a' only (it forgets 'b')."""

    possible_agents = ["a", "b"]

    def __init__(self):
        import gymnasium
        self._obs = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
        self._act = gymnasium.spaces.Discrete(3)
        self.agents = []

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: np.zeros(2, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.agents = ["a"]
        z = np.zeros(2, np.float32)
        return {"a": z}, {"a": 1.0}, {"a": False}, {"a": False}, {"a": {}}

    def close(self):
        pass


def test_adapter_refuses_an_alive_agent_missing_from_step():
    from coopsim.scenarios.pettingzoo_adapter import PettingZooCore

    core = PettingZooCore.from_envs([_DropsAgents()])
    core.reset(seed=0)
    with pytest.raises(ConfigError, match=r"env 0 \(_DropsAgents\): step\(\) returned no termination/truncation for "
                                          r"agent 'b'.*env\.agents is now \['a'\]"):
        core.step(np.zeros((1, 2), np.int64))
    assert "refused" in PettingZooCore.step.__doc__ and "Raises:" in PettingZooCore.from_envs.__doc__


# F2: render_mode checked against metadata; metadata claims rgb_array only where render() draws

def test_make_refuses_a_render_mode_the_scenario_lacks():
    with pytest.raises(ConfigError, match=r"render_mode 'rgb_array' is not supported by scenario "
                                          r"'mpe/simple_spread-v0'; valid: None \(this scenario cannot render\)") as info:
        reg.make("mpe/simple_spread-v0", render_mode="rgb_array")
    assert info.value.key == "render_mode"
    with pytest.raises(ConfigError, match=r"render_mode 'human' .*valid: None or 'rgb_array'"):
        reg.make("smac/3m-v0", render_mode="human")
    with pytest.raises(ConfigError, match="render_mode 'human'"):
        ScenarioEnv(reg.make_scenario("mapf/MGMAPF-v0"), render_mode="human")


@pytest.mark.parametrize("sid", ["line/LineWalk-v0", "coop_game/Graph-v0"])
def test_no_rgb_array_claim_without_a_frame(sid):
    env = reg.make(sid)
    assert "rgb_array" not in env.metadata["render_modes"]
    env.reset(seed=0)
    assert env.core.render(0) is None
    with pytest.raises(ConfigError, match="cannot render"):
        reg.make(sid, render_mode="rgb_array")


@pytest.mark.parametrize("sid", ["coop_game/Grid4x4-v0", "smac/3m-v0", "mapf/MGMAPF-v0"])
def test_every_listed_mode_draws_and_none_follows_pettingzoo(sid):
    env = reg.make(sid, render_mode="rgb_array")
    assert env.metadata["render_modes"] == ["rgb_array"]
    env.reset(seed=0)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    plain = reg.make(sid)
    plain.reset(seed=0)
    with pytest.warns(UserWarning, match="without specifying any render mode"):
        assert plain.render() is None
    assert isinstance(plain.core.render(0), np.ndarray)   # the core (reports, GIFs) draws regardless


def test_registered_metadata_matches_render():
    for sid in reg.list_ids("scenario"):
        if sid.startswith("smac/") and sid not in ("smac/3m-v0",):
            continue   # one SMAC map stands for all (one class)
        factory = reg.spec("scenario", sid).load()
        env = reg.make(sid, **dict(getattr(getattr(factory, "cls", factory), "example_params", {})))
        env.reset(seed=0)
        draws = isinstance(env.core.render(0), np.ndarray)
        assert ("rgb_array" in env.metadata["render_modes"]) == draws, sid
        env.close()


# F3: a factory failing on its env_kwargs names env_kwargs, not env

@pytest.fixture
def failing_factory(monkeypatch):
    mod = types.ModuleType("coopsim_fake_pz34")

    def factory(N=3):
        raise ValueError(f"N must be >= 1, got {N}")

    mod.factory = factory
    monkeypatch.setitem(sys.modules, "coopsim_fake_pz34", mod)
    return "coopsim_fake_pz34:factory"


def test_factory_error_names_env_kwargs(failing_factory):
    with pytest.raises(ConfigError) as info:
        reg.make_scenario("pettingzoo/adapter-v0", env=failing_factory, env_kwargs={"N": 0})
    msg = str(info.value)
    assert info.value.key == "env_kwargs" and info.value.value == {"N": 0}
    assert "ValueError: N must be >= 1, got 0" in msg and "{'N': 0}" in msg
    assert "not a PettingZoo env factory" not in msg
    with pytest.raises(ConfigError, match="not a PettingZoo env factory") as info:   # no kwargs: the factory itself
        reg.make_scenario("pettingzoo/adapter-v0", env=failing_factory)
    assert info.value.key == "env"


def test_factory_error_blames_the_env_kwargs_override(tmp_path):
    pytest.importorskip("mpe2")
    from coopsim.platform.config import blame_override, check_buildable, load_config

    cfg = tmp_path / "pz.yaml"
    cfg.write_text("name: pz\nscenario: {id: pettingzoo/adapter-v0, params: {env: 'mpe2.simple_spread_v3:parallel_env'}}\n"
                   "agents: {id: random-v0}\nseeds: [0]\nepisodes: 1\nmax_steps: 5\n")
    overrides = ["scenario.params.env=mpe2.simple_spread_v3:parallel_env", "scenario.params.env_kwargs.N=0"]
    with pytest.raises(ConfigError) as info:
        check_buildable(load_config(cfg, overrides), file=str(cfg))
    msg = str(blame_override(info.value, cfg, overrides))
    assert "command-line override 'scenario.params.env_kwargs.N=0'" in msg
    assert "key 'scenario.params.env_kwargs'" in msg and "{'N': 0}" in msg
    assert "not a PettingZoo env factory" not in msg


# F8: the view's spaces are cached per instance; a closed env is freed

def test_view_is_freed_after_its_spaces_were_used():
    env = reg.make("smac/3m-v0")
    env.reset(seed=0)
    a = env.agents[0]
    assert env.observation_space(a) is env.observation_space(a) is env.observation_space(env.agents[1])
    assert env.action_space(a) is env.action_space(a)
    ref = weakref.ref(env)
    env.close()
    del env
    gc.collect()
    assert ref() is None


# F14: make() takes no num_envs; render_mode must be a string or None

def test_make_refuses_num_envs_and_a_non_string_render_mode():
    with pytest.raises(ConfigError, match=r"make\(\) builds the one-env PettingZoo view .*use "
                                          r"make_scenario\('smac/3m-v0', num_envs=4\)") as info:
        reg.make("smac/3m-v0", num_envs=4)
    assert info.value.key == "num_envs"
    with pytest.raises(ConfigError, match=r"render_mode must be None or a string; got 1 \(int\)"):
        reg.make("smac/3m-v0", render_mode=1)
    assert "num_envs" in reg.make.__doc__ and "render_mode" in reg.make.__doc__
