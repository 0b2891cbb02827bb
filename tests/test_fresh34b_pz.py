"""fresh34b findings on the PettingZoo adapter, its view, registry.make and validate: N4, N5, N6, N9, N10, N12."""
import contextlib
import io
import json
import sys
import types
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from pettingzoo import ParallelEnv

from coopsim.errors import ConfigError
from coopsim.platform import registry as reg
from coopsim.platform.scenario import ScenarioEnv
from coopsim.scenarios.pettingzoo_adapter import PettingZooCore

ROOT = Path(__file__).resolve().parents[1]
MOD = "coopsim_fake_pz34b"


class JoinEnv(ParallelEnv):
    """p0 and p1 from the start; p2 joins after step ``join_at`` (with entries in every returned dict, its reward
    ``join_reward``); every agent gets reward 1.0 for each step it acts and truncates at ``horizon``.

    ``strict``: step() reads an action for every agent in ``agents`` (KeyError otherwise), as many envs do.
    ``joiner``: the joining agent's name (one outside possible_agents breaks the API); ``revive``: p0 terminates
    after step 2 and is back in ``agents`` after step 4; ``no_obs``: the joiner gets no observation.
    """

    metadata = {"name": "join_v0", "render_modes": ["rgb_array"]}

    def __init__(self, join_at=3, horizon=10, join_reward=0.5, strict=True, joiner="p2", revive=False,
                 no_obs=False, render_mode=None):
        self.possible_agents = ["p0", "p1", "p2"]
        self.join_at, self.horizon, self.join_reward = join_at, horizon, join_reward
        self.strict, self.joiner, self.revive, self.no_obs = strict, joiner, revive, no_obs
        self.render_mode = render_mode
        self._o = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
        self._a = gymnasium.spaces.Discrete(3)
        self.agents = []
        self.acted = {}

    def observation_space(self, agent):
        return self._o

    def action_space(self, agent):
        return self._a

    def _ob(self):
        return np.array([self.t / 100, 0.5], np.float32)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = ["p0", "p1"]
        self.acted = {a: 0 for a in self.possible_agents}
        return {a: self._ob() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        for a in self.agents:
            if self.strict:
                actions[a]
            if a in actions:
                self.acted[a] += 1
        acting = list(self.agents)
        rew = {a: 1.0 for a in acting}
        te = {a: self.revive and a == "p0" and self.t == 2 for a in acting}
        tr = {a: self.t >= self.horizon for a in acting}
        obs = {a: self._ob() for a in acting}
        info = {a: {} for a in acting}
        self.agents = [a for a in acting if not (te[a] or tr[a])]
        if self.t == self.join_at and self.joiner not in self.agents:
            self.agents.append(self.joiner)
            if not self.no_obs:
                obs[self.joiner] = self._ob()
            rew[self.joiner], te[self.joiner], tr[self.joiner], info[self.joiner] = self.join_reward, False, False, {}
        if self.revive and self.t == 4:
            self.agents.append("p0")
            obs["p0"], rew["p0"], te["p0"], tr["p0"], info["p0"] = self._ob(), 0.0, False, False, {}
        return obs, rew, te, tr, info

    def render(self):
        return np.zeros((4, 4, 3), np.uint8) if self.render_mode == "rgb_array" else None


class Wrapper(ParallelEnv):
    """A thin wrapper of a parallel env (``unwrapped`` is the inner env's), as PettingZoo's wrappers are."""

    def __init__(self, env):
        self.env = env
        self.possible_agents = env.possible_agents

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def observation_space(self, agent):
        return self.env.observation_space(agent)

    def action_space(self, agent):
        return self.env.action_space(agent)

    @property
    def agents(self):
        return self.env.agents

    def reset(self, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        return self.env.step(actions)


@pytest.fixture
def fake(monkeypatch):
    """A module ``coopsim_fake_pz34b`` with env factories (a 'module:callable' the adapter can load)."""
    mod = types.ModuleType(MOD)
    cached = {}

    def join(**kw):
        return JoinEnv(**kw)

    def cached_env(**kw):
        return cached.setdefault("env", JoinEnv(**kw))

    def cached_wrappers(**kw):
        return Wrapper(cached.setdefault("env", JoinEnv(**kw)))

    def forwards(**kw):  # a factory that passes its keyword arguments on (as mpe2's parallel_env does)
        return JoinEnv(**kw)

    def needs_x(x, **kw):  # takes the keyword arguments but needs a positional one: not an env factory
        return JoinEnv(**kw)

    mod.join, mod.cached_env, mod.cached_wrappers, mod.forwards, mod.needs_x = (join, cached_env, cached_wrappers,
                                                                                 forwards, needs_x)
    monkeypatch.setitem(sys.modules, MOD, mod)
    return mod


def _play(core, steps=None):
    """Step ``core`` (one env) with action 1 for every slot until it ends; (alive history, summed reward [N])."""
    core.reset(seed=0)
    hist, total = [], np.zeros(core.num_agents)
    while core.alive.any() and (steps is None or len(hist) < steps):
        res = core.step(np.ones((1, core.num_agents), np.int64))
        hist.append(core.alive[0].tolist())
        total += res.reward[0]
    return hist, total


# N5: an agent that joins mid-episode is controlled from then on

def test_joining_agent_gets_actions_and_its_rewards_count():
    env = JoinEnv(join_at=3, horizon=10, join_reward=0.5)
    core = PettingZooCore.from_envs([env])
    hist, total = _play(core)
    assert [h[2] for h in hist] == [False, False] + [True] * 7 + [False]
    assert hist[1] == [True, True, False] and hist[2] == [True, True, True]
    assert env.acted == {"p0": 10, "p1": 10, "p2": 7}
    assert total.tolist() == [10.0, 10.0, 7.5]   # the join step's reward counts too
    assert "join" in PettingZooCore.step.__doc__
    assert "Agents that join" in sys.modules[PettingZooCore.__module__].__doc__


def test_joining_agent_is_not_terminated_and_reset_forgets_it():
    core = PettingZooCore.from_envs([JoinEnv(join_at=2, horizon=5)])
    core.reset(seed=0)
    res = core.step(np.zeros((1, 3), np.int64))
    assert res.terminated[0].tolist() == [False, False, True]   # not alive yet: reported terminated
    res = core.step(np.zeros((1, 3), np.int64))
    assert core.alive[0].tolist() == [True, True, True]
    assert res.terminated[0].tolist() == [False, False, False] and res.truncated[0].tolist() == [False] * 3
    assert core.action_masks()[0, 2].all()
    core.reset(seed=1)
    assert core.alive[0].tolist() == [True, True, False]


def test_runner_counts_the_joining_agents_return(fake, tmp_path):
    from coopsim.platform.config import load_config
    from coopsim.platform.runner import run_config

    cfg = tmp_path / "join.yaml"
    cfg.write_text(f"name: join\nscenario: {{id: pettingzoo/adapter-v0, params: {{env: '{MOD}:join', "
                   "env_kwargs: {join_at: 3, horizon: 10, join_reward: 0.5}}}\nagents: {id: random-v0}\n"
                   f"seeds: [0]\nepisodes: 2\nmax_steps: 50\nout_dir: {tmp_path}\n")
    run = Path(run_config(load_config(cfg), progress=False))
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["episode_return"] for r in rows] == [27.5, 27.5]   # 10 + 10 + (0.5 + 7); was 20 without p2
    assert all(r["steps"] == 10 for r in rows)


def test_view_lists_the_joining_agent_and_passes_the_api_tests(fake):
    from pettingzoo.test import api_test, parallel_api_test
    from pettingzoo.utils import parallel_to_aec

    env = reg.make("pettingzoo/adapter-v0", env=f"{MOD}:join")
    env.reset(seed=0)
    acts = {"p0": 1, "p1": 1}
    for _ in range(3):
        obs, rew, te, tr, infos = env.step({a: 1 for a in env.agents})
    assert env.agents == ["p0", "p1", "p2"]
    assert set(obs) == set(rew) == set(te) == set(tr) == set(infos) == {"p0", "p1", "p2"}
    assert te["p2"] is False and tr["p2"] is False and rew["p2"] == 0.5
    assert infos["p2"]["action_mask"].dtype == np.int8 and infos["p2"]["action_mask"].tolist() == [1, 1, 1]
    obs, rew, *_ = env.step({**acts, "p2": 2})
    assert rew["p2"] == 1.0 and env.core.envs[0].acted["p2"] == 1
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        parallel_api_test(reg.make("pettingzoo/adapter-v0", env=f"{MOD}:join"), num_cycles=30)
    assert not [w for w in caught if "was not given" in str(w.message) or "dead last turn" in str(w.message)]
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api_test(parallel_to_aec(reg.make("pettingzoo/adapter-v0", env=f"{MOD}:join")), num_cycles=30)
    assert "joins mid-episode" in ScenarioEnv.__doc__ and "joined" in ScenarioEnv.step.__doc__


def test_check_scenario_accepts_joining_but_not_coming_back(fake):
    from coopsim.errors import ScenarioCheckError
    from coopsim.testing import _check_core_step, check_scenario

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_scenario("pettingzoo/adapter-v0", params={"env": f"{MOD}:join"}, num_steps=25, api_cycles=15)

    class Core:  # a slot alive now that was alive before in the episode: still refused
        num_envs, num_agents, alive = 1, 2, np.array([[True, True]])
        observation_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)

    res = types.SimpleNamespace(reward=np.zeros((1, 2), np.float32), terminated=np.zeros((1, 2), bool),
                                truncated=np.zeros((1, 2), bool), obs=np.zeros((1, 2, 1), np.float32))
    before = np.array([[True, False]])
    _check_core_step(Core(), res, before, 3, ever_alive=np.array([[True, False]]))   # slot 1 joins: fine
    with pytest.raises(ScenarioCheckError, match="came back alive"):
        _check_core_step(Core(), res, before, 3, ever_alive=np.array([[True, True]]))


@pytest.mark.parametrize("kw, match", [
    ({"joiner": "zz"}, r"env 0 \(JoinEnv\): agent 'zz' is in env\.agents after step\(\) but not in its "
                       r"possible_agents \['p0', 'p1', 'p2'\]"),
    ({"revive": True, "join_at": 99}, r"env 0 \(JoinEnv\): agent 'p0' is in env\.agents again after it terminated"),
    ({"no_obs": True}, r"env 0 \(JoinEnv\): agent 'p2' joined env\.agents in step\(\) but the step returned no "
                       r"observation"),
])
def test_joining_that_breaks_the_api_is_a_config_error(kw, match):
    core = PettingZooCore.from_envs([JoinEnv(**kw)])
    with pytest.raises(ConfigError, match=match):
        _play(core, steps=6)


def test_an_agent_outside_possible_agents_at_reset_is_refused():
    env = JoinEnv()
    env.reset = lambda seed=None, options=None: (setattr(env, "agents", ["p0", "ghost"]) or
                                                 ({"p0": np.zeros(2, np.float32)}, {"p0": {}}))
    with pytest.raises(ConfigError, match=r"agent 'ghost' is in env\.agents after reset\(\)"):
        PettingZooCore.from_envs([env]).reset(seed=0)


# N6: the duplicate-env check compares env.unwrapped, and runs on a factory's envs too

def test_from_envs_refuses_two_wrappers_of_one_env():
    inner = JoinEnv()
    with pytest.raises(ConfigError, match=r"envs\[0\] and envs\[1\] wrap the same env \(their env\.unwrapped is "
                                          r"one JoinEnv object\): each slot needs an env of its own") as info:
        PettingZooCore.from_envs([Wrapper(inner), Wrapper(inner)])
    assert info.value.key == "envs"
    with pytest.raises(ConfigError, match=r"envs\[1\] and envs\[2\] wrap the same env"):
        PettingZooCore.from_envs([JoinEnv(), inner, Wrapper(inner)])
    assert PettingZooCore.from_envs([Wrapper(JoinEnv()), Wrapper(JoinEnv())]).num_envs == 2


def test_from_envs_refuses_two_aec_to_parallel_wrappers_of_one_mpe_env():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3
    from pettingzoo.utils.conversions import aec_to_parallel

    raw = simple_spread_v3.raw_env(N=3, max_cycles=25)
    with pytest.raises(ConfigError, match=r"envs\[0\] and envs\[1\] wrap the same env"):
        PettingZooCore.from_envs([aec_to_parallel(raw), aec_to_parallel(raw)])


@pytest.mark.parametrize("factory, match", [
    ("cached_env", r"returned the same env object \(JoinEnv\) for env 1 as for env 0, a cached env\?"),
    ("cached_wrappers", r"returned envs 0 and 1 that wrap the same env \(their env\.unwrapped is one JoinEnv"),
])
def test_a_factory_returning_one_env_for_two_slots_is_refused_at_build(fake, factory, match):
    with pytest.raises(ConfigError, match=match) as info:
        reg.make_scenario("pettingzoo/adapter-v0", num_envs=2, env=f"{MOD}:{factory}")
    assert info.value.key == "env" and "num_envs=2" in str(info.value)
    assert reg.make_scenario("pettingzoo/adapter-v0", num_envs=1, env=f"{MOD}:{factory}").num_envs == 1
    assert reg.make_scenario("pettingzoo/adapter-v0", num_envs=3, env=f"{MOD}:join").num_envs == 3


# N9: an unknown env_kwargs key (the factory's TypeError) is blamed on env_kwargs and its override

@pytest.mark.parametrize("factory", ["join", "forwards"])
def test_unknown_env_kwargs_key_names_env_kwargs(fake, factory):
    with pytest.raises(ConfigError) as info:
        reg.make_scenario("pettingzoo/adapter-v0", env=f"{MOD}:{factory}", env_kwargs={"horizon": 5, "bogus": 1})
    assert info.value.key == "env_kwargs" and info.value.value == {"horizon": 5, "bogus": 1}
    msg = str(info.value)
    assert "unexpected keyword argument 'bogus'" in msg and "env_kwargs key 'bogus' is not a keyword argument" in msg


def test_a_factory_that_does_not_bind_stays_blamed_on_env(fake):
    with pytest.raises(ConfigError, match=r"needs_x\(\*\*env_kwargs\) raised TypeError: .*missing 1 required") as info:
        reg.make_scenario("pettingzoo/adapter-v0", env=f"{MOD}:needs_x", env_kwargs={"horizon": 5})
    assert info.value.key == "env"


def test_unknown_env_kwargs_key_blames_its_override(fake, tmp_path):
    from coopsim.platform.config import blame_override, check_buildable, load_config

    cfg = tmp_path / "pz.yaml"
    cfg.write_text(f"name: pz\nscenario: {{id: pettingzoo/adapter-v0, params: {{env: '{MOD}:join'}}}}\n"
                   "agents: {id: random-v0}\nseeds: [0]\nepisodes: 1\nmax_steps: 5\n")
    overrides = ["scenario.params.env_kwargs.bogus=1"]
    with pytest.raises(ConfigError) as info:
        check_buildable(load_config(cfg, overrides), file=str(cfg))
    msg = str(blame_override(info.value, cfg, overrides))
    assert msg.startswith("command-line override 'scenario.params.env_kwargs.bogus=1'")
    assert "key 'scenario.params.env_kwargs'" in msg and "'bogus'" in msg
    assert "key 'scenario.params.env'" not in msg


# N4: a non-string render_mode lists the scenario's real modes

def test_non_string_render_mode_lists_the_real_modes():
    for bad in (1, b"rgb_array"):
        with pytest.raises(ConfigError, match=r"render_mode must be None or a string; .*valid: None or 'rgb_array'"):
            reg.make("smac/3m-v0", render_mode=bad)
    with pytest.raises(ConfigError, match=r"got 1 \(int\); valid: None \(this scenario cannot render\)"):
        reg.make("mpe/simple_spread-v0", render_mode=1)


# N12: view polish

@pytest.mark.parametrize("agent", ["nobody", 0, None, ["agent_0"]])
def test_spaces_of_an_unknown_agent_raise_key_error(agent):
    env = reg.make("smac/3m-v0")
    for space in (env.observation_space, env.action_space):
        with pytest.raises(KeyError, match="unknown agent .*possible agents"):
            space(agent)
    a = env.possible_agents[0]
    assert env.observation_space(a) is env.observation_space(a) and env.action_space(a) is env.action_space(a)
    assert "KeyError" in ScenarioEnv.observation_space.__doc__ and "KeyError" in ScenarioEnv.action_space.__doc__


def test_make_accepts_num_envs_1_only():
    env = reg.make("line/LineWalk-v0", num_envs=1)
    assert env.core.num_envs == 1
    assert reg.make("line/LineWalk-v0", num_envs=np.int64(1)).core.num_envs == 1
    for bad in (2, True, 1.0, "1"):
        with pytest.raises(ConfigError, match="takes no num_envs other than 1") as info:
            reg.make("line/LineWalk-v0", num_envs=bad)
        assert info.value.key == "num_envs"


def test_from_envs_takes_any_iterable_of_envs():
    core = PettingZooCore.from_envs(JoinEnv() for _ in range(2))
    assert core.num_envs == 2
    assert PettingZooCore.from_envs((JoinEnv(), JoinEnv())).num_envs == 2
    with pytest.raises(ConfigError, match="got no envs") as info:
        PettingZooCore.from_envs(e for e in [])
    assert info.value.key == "envs"
    with pytest.raises(ConfigError, match=r"one env: give \[env\]"):
        PettingZooCore.from_envs(JoinEnv())
    with pytest.raises(ConfigError, match="non-empty list"):
        PettingZooCore.from_envs({"a": JoinEnv()})
    with pytest.raises(ConfigError, match="non-empty list"):
        PettingZooCore.from_envs(3)


@pytest.mark.parametrize("sid", ["mapf/MGMAPF-v0", "smac/3m-v0"])
def test_render_before_reset_is_none_on_every_scenario(sid):
    env = reg.make(sid, render_mode="rgb_array")
    with pytest.warns(UserWarning, match=r"render\(\) before reset\(\)"):
        assert env.render() is None
    env.reset(seed=0)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3
    assert "before the" in ScenarioEnv.render.__doc__


def test_adapter_render_refusal_names_the_wrapped_envs_frames(fake):
    with pytest.raises(ConfigError, match=r"render_mode='rgb_array': its frames are at "
                                          r"env\.core\.envs\[0\]\.render\(\)"):
        reg.make("pettingzoo/adapter-v0", render_mode="rgb_array", env=f"{MOD}:join",
                 env_kwargs={"render_mode": "rgb_array"})
    with pytest.raises(ConfigError, match=r"set its render_mode in env_kwargs .*env\.core\.envs\[0\]\.render\(\)"):
        ScenarioEnv(reg.make_scenario("pettingzoo/adapter-v0", env=f"{MOD}:join"), render_mode="rgb_array")
    env = reg.make("pettingzoo/adapter-v0", env=f"{MOD}:join", env_kwargs={"render_mode": "rgb_array"})
    env.reset(seed=0)
    assert env.core.envs[0].render().shape == (4, 4, 3)   # what the hint names works
    with pytest.raises(ConfigError, match="cannot render") as info:   # other scenarios: no adapter hint
        reg.make("line/LineWalk-v0", render_mode="rgb_array")
    assert "env.core.envs" not in str(info.value)


# N10: validate on a results JSON without any run-config key says so

@pytest.mark.parametrize("name", ["ddacom_generator.json", "smac_speed.json", "mpe_mappo_vs_benchmarl.json",
                                  "ddacom_speaker_listener.json"])
def test_validate_of_a_results_json_without_config_keys_hints(name):
    from coopsim.platform.config import load_config

    with pytest.raises(ConfigError) as info:
        load_config(ROOT / "benchmarks" / "results" / name)
    assert "not a run config (a results file?)" in str(info.value)
    assert info.value.key == "name"


def test_specific_results_hints_and_config_typos_are_kept(tmp_path):
    from coopsim.platform.config import load_config

    with pytest.raises(ConfigError) as info:
        load_config(ROOT / "benchmarks" / "results" / "ddacom_eval_n3.json")
    assert "`python -m coopsim.agents.ddacom.evaluate` writes (its --out)" in str(info.value)
    assert "a results file?" not in str(info.value)
    f = tmp_path / "typo.yaml"
    f.write_text("nmae: x\nscenrio: {id: line/LineWalk-v0}\nagnets: {id: random-v0}\n")
    with pytest.raises(ConfigError) as info:
        load_config(f)
    assert "a results file?" not in str(info.value) and "did you mean 'name'" in str(info.value)
    f.write_text(json.dumps({"speed": {}, "machine": "x"}))
    with pytest.raises(ConfigError, match=r"not a run config \(a results file\?\)"):
        load_config(f)


def test_a_core_pickled_before_joining_existed_still_steps():
    core = PettingZooCore.from_envs([JoinEnv()])
    core.reset(seed=0)
    state = {k: v for k, v in core.__dict__.items() if k not in ("_left", "_slot")}
    old = PettingZooCore.__new__(PettingZooCore)
    old.__setstate__(state)
    for _ in range(3):
        old.step(np.zeros((1, 3), np.int64))
    assert old.alive[0].tolist() == [True, True, True]
