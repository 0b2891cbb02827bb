"""Run any PettingZoo ``ParallelEnv`` as a coopsim scenario (a batched core over a list of envs).

Description:
    Wraps ``num_envs`` instances of a PettingZoo parallel env, built from ``env`` (``"module:callable"``,
    e.g. ``"mpe2.simple_spread_v3:parallel_env"``) with ``env_kwargs``, or given directly as a list
    (:meth:`PettingZooCore.from_envs`, one distinct env object per slot). Agent slots are ``possible_agents``
    of the first env. Not vectorized inside: each env steps in Python (this adapter is for reaching external
    envs, not speed).

Observation: the env's ``Box`` observation, flattened to float32 and zero-padded to the widest agent's.

Action: ``Discrete(max n)`` over agents; actions an agent's own space lacks are masked
(:meth:`action_masks`); a masked or non-alive slot takes action 0 / is not passed to the env.

Reward: the env's reward per agent (0 for slots not alive).

Episode end: an agent that terminates or truncates leaves (``alive`` False); the env ends when no
agent is left or at ``max_steps``. An env whose ``step()`` returns no termination/truncation entry for an agent
that acted breaks PettingZoo's parallel API and is refused (ConfigError), never kept alive.

Agents that join: an agent of ``possible_agents`` that is in the env's ``agents`` after a ``step()`` (with an
observation in the returned dicts) but was not alive before joins its slot: ``alive`` from that step on (it gets
actions, its rewards count, the env's reward for it at the joining step too). An agent in ``agents`` that is not
one of ``possible_agents`` (the fixed slots), a joining agent without an observation, and an agent back in
``agents`` after it left in the same episode (PettingZoo's API test forbids revival) are refused (ConfigError).

Rendering: the adapter draws no frames (``render_modes`` is empty); the wrapped env renders itself when
``env_kwargs`` sets its ``render_mode``: ``env.core.envs[0].render()`` on the view
:func:`coopsim.platform.registry.make` builds.

Seeding: ``reset(seed=s)`` resets env ``e`` with ``seed = default_rng([s, e]).integers(2**31)``.

Arguments: ``env``, ``env_kwargs``, ``max_steps``, ``dt_s``.

Version history: v0 -- initial version.
"""
from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

import gymnasium
import numpy as np
from pydantic import Field

from coopsim.errors import ConfigError
from coopsim.platform.scenario import (ScenarioCore, ScenarioParams, StepResult, check_num_envs, discrete_joint_actions,
                                       reset_ids)


class PettingZooParams(ScenarioParams):
    env: Optional[str] = Field(None, description="'module:callable' returning a PettingZoo ParallelEnv")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the callable")
    max_steps: int = Field(10_000, ge=1, le=1_000_000, description="step limit on top of the env's own, 1..1e6")
    dt_s: float = Field(0.1, gt=0, description="simulated seconds per step (s), > 0")


_EG = "e.g. 'mpe2.simple_spread_v3:parallel_env'"


def _load(path: str) -> Callable[..., Any]:
    """The callable ``path`` ('module:callable') names: both parts non-empty, the module a dotted identifier, not
    the standard library or builtins (``sys:exit``, ``os:abort`` are not env factories).

    Raises:
        ConfigError: key ``env``; a malformed path, a standard-library target, a module that cannot be imported
            (not installed, or misspelt) or a missing attribute.
    """
    import sys

    if ":" not in path:
        raise ConfigError(f"env must be 'module:callable', got {path!r} ({_EG})", key="env", value=path)
    mod, attr = path.split(":", 1)
    if not mod or not all(p.isidentifier() for p in mod.split(".")) or not all(
            p.isidentifier() for p in attr.split(".")):
        raise ConfigError(f"env must be 'module:callable' with a dotted module name and a callable name, got "
                          f"{path!r} ({_EG})", key="env", value=path)
    if mod == "__main__" or mod == "coopsim.cli" or mod.startswith("coopsim.cli."):
        raise ConfigError(f"{path!r} is coopsim's own command line: not a PettingZoo env factory ({_EG})",
                          key="env", value=path)
    top = mod.split(".", 1)[0]
    if top in getattr(sys, "stdlib_module_names", ()) or top in sys.builtin_module_names or top == "builtins":
        raise ConfigError(f"{path!r} is in the Python standard library: not a PettingZoo env factory ({_EG})",
                          key="env", value=path)
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as exc:  # a ConfigError so that the message names the file and the key
        raise ConfigError(f"cannot import {mod!r} for env {path!r}: {exc} (is the module name right? if so, install "
                          "the package providing it into this Python)", key="env", value=path) from None
    except Exception as exc:  # noqa: BLE001 - a module that fails on import is a bad env, not a crash
        raise ConfigError(f"importing {mod!r} for env {path!r} raised {type(exc).__name__}: {exc}",
                          key="env", value=path) from None
    try:
        for a in attr.split("."):
            obj = getattr(obj, a)
    except AttributeError:
        raise ConfigError(f"module {mod!r} has no attribute {attr!r}", key="env", value=path) from None
    return obj


def _unexpected_keyword(exc: TypeError, kwargs: dict[str, Any]) -> str | None:
    """The key of ``kwargs`` that ``exc`` ("... got an unexpected keyword argument 'x'") names, or None."""
    m = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
    return m.group(1) if m and m.group(1) in kwargs else None


def _close_all(envs: list) -> None:
    """Close each distinct env of ``envs`` (built before an error), ignoring failures."""
    done: set[int] = set()
    for env in envs:
        if id(env) not in done:
            done.add(id(env))
            with contextlib.suppress(Exception):
                env.close()


def _unwrapped(env: Any) -> Any:
    """``env.unwrapped`` when the env has one (PettingZoo's envs and wrappers), else ``env``."""
    try:
        inner = getattr(env, "unwrapped", env)
    except Exception:  # noqa: BLE001 - a property that raises: compare the env itself
        return env
    return env if inner is None else inner


def _shared_env(envs: list) -> tuple[int, int, str | None] | None:
    """``(k, j, inner)`` for the first env ``envs[k]`` that is ``envs[j]`` (j < k; ``inner`` None) or has the same
    ``unwrapped`` env (two wrappers of one env; ``inner`` names its type); None when every env is its own."""
    seen: dict[int, int] = {}
    inner: dict[int, int] = {}
    for k, env in enumerate(envs):
        if id(env) in seen:
            return k, seen[id(env)], None
        seen[id(env)] = k
        u = _unwrapped(env)
        if id(u) in inner:
            return k, inner[id(u)], type(u).__name__
        inner[id(u)] = k
    return None


def _env_list(envs: Any) -> list:
    """``envs`` (a list, a tuple, a generator, any iterable of envs) as a non-empty list.

    Raises:
        ConfigError: key ``envs``: not an iterable of envs (one env, a string, a mapping) or no envs.
    """
    eg = "e.g. [make_env() for _ in range(n)]"
    if isinstance(envs, (str, bytes, Mapping)) or _parallel_env_problem(envs) is None:
        one = " (one env: give [env])" if not isinstance(envs, (str, bytes, Mapping)) else ""
        raise ConfigError(f"envs must be a non-empty list (or other iterable) of PettingZoo ParallelEnvs, one per "
                          f"slot, {eg}; got {envs!r}{one}", key="envs")
    try:
        out = list(envs)
    except TypeError:
        raise ConfigError(f"envs must be a non-empty list (or other iterable) of PettingZoo ParallelEnvs, one per "
                          f"slot, {eg}; got {envs!r} (not iterable)", key="envs") from None
    if not out:
        raise ConfigError(f"envs must be a non-empty list (or other iterable) of PettingZoo ParallelEnvs, one per "
                          f"slot, {eg}; got no envs ({envs!r})", key="envs")
    return out


def _parallel_env_problem(env: Any) -> str | None:
    """Why ``env`` is not a PettingZoo ``ParallelEnv`` (an AEC env, or no ``reset``/``step``/``possible_agents``/
    ``action_space``/``observation_space``), or None when it looks like one."""
    try:
        from pettingzoo.utils.env import AECEnv, ParallelEnv
    except ImportError:  # duck typing only
        AECEnv = ParallelEnv = None  # noqa: N806
    if ParallelEnv is not None and isinstance(env, ParallelEnv):
        return None
    if (AECEnv is not None and isinstance(env, AECEnv)) or hasattr(env, "agent_selection"):
        return "AEC"
    lacks = [a for a in ("reset", "step", "action_space", "observation_space") if not callable(getattr(env, a, None))]
    try:
        agents = getattr(env, "possible_agents", None)
    except Exception:  # noqa: BLE001 - a property that raises is as good as missing
        agents = None
    if not isinstance(agents, (list, tuple)) or not agents:
        lacks.append("possible_agents")
    if lacks:
        return f"a {type(env).__name__} without {', '.join(lacks)}"
    return None


def _not_parallel(what: str, env: Any, problem: str, path: str | None) -> ConfigError:
    key = "env" if path else None
    if problem == "AEC":
        mod = path.split(":", 1)[0] if path and ":" in path else None
        eg = f" (e.g. '{mod}:parallel_env')" if mod else ""
        return ConfigError(f"{what} is an AEC env ({type(env).__name__}), not a PettingZoo ParallelEnv: use its "
                           f"parallel_env{eg}", key=key, value=path)
    return ConfigError(f"{what} is not a PettingZoo ParallelEnv ({problem}; an AEC env? use its parallel_env)",
                       key=key, value=path)


class PettingZooCore(ScenarioCore):
    """Batched core over PettingZoo parallel envs (see the module docstring)."""

    Params = PettingZooParams
    metadata = {"name": "pettingzoo_adapter_v0", "render_modes": [], "is_parallelizable": True}

    example_params = {"env": "mpe2.simple_spread_v3:parallel_env", "env_kwargs": {"N": 3}}

    def __init__(self, num_envs: int = 1, envs: Iterable[Any] | None = None, **params: Any):
        from coopsim.platform.registry import checked_params
        if envs is None:  # as make_scenario: 0, 2.5, True or '2' used to build a core (with envs: their number)
            num_envs = check_num_envs(num_envs)
        self.params = checked_params(self.Params, params, type(self).__name__)
        if envs is None:
            if self.params.env is None:
                raise ConfigError("give 'env' ('module:callable') or a list of envs", key="env")
            path = self.params.env
            fn = _load(path)
            if not callable(fn):
                raise ConfigError(f"{path!r} is a {type(fn).__name__}, not a callable returning a PettingZoo "
                                  "ParallelEnv", key="env", value=path)
            envs = []
            for _ in range(num_envs):
                try:
                    env = fn(**self.params.env_kwargs)
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - a factory that exits is a bad env
                    if isinstance(exc, ConfigError):
                        raise
                    kwargs = self.params.env_kwargs
                    if isinstance(exc, TypeError):
                        bad = _unexpected_keyword(exc, kwargs)
                        if bad is not None:  # a key of env_kwargs the factory does not take: blame env_kwargs
                            _close_all(envs)
                            raise ConfigError(f"{path}(**env_kwargs) raised TypeError: {exc}: env_kwargs key {bad!r} "
                                              f"is not a keyword argument of {path} (env_kwargs: {kwargs!r})",
                                              key="env_kwargs", value=kwargs, also=("env",)) from None
                        if exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
                            # raised by the call itself (the arguments do not bind): the callable is not a factory
                            # taking these keyword arguments
                            _close_all(envs)
                            raise ConfigError(f"{path}(**env_kwargs) raised TypeError: {exc} (env_kwargs: "
                                              f"{kwargs!r})", key="env", value=path) from None
                    _close_all(envs)
                    if kwargs:  # the factory took its keyword arguments and failed on their values: blame those
                        raise ConfigError(f"{path}(**env_kwargs) raised {type(exc).__name__}: {exc} (with env_kwargs "
                                          f"{kwargs!r}: are their values valid for {path}?)", key="env_kwargs",
                                          value=kwargs, also=("env",)) from None
                    raise ConfigError(f"{path}() raised {type(exc).__name__}: {exc} (not a PettingZoo "
                                      f"env factory?)", key="env", value=path) from None
                problem = _parallel_env_problem(env)
                if problem:
                    with contextlib.suppress(Exception):
                        env.close()
                    _close_all(envs)
                    raise _not_parallel(f"{path!r} returned a value that", env, problem, path)
                envs.append(env)
            shared = _shared_env(envs)
            if shared is not None:  # a factory that caches its env: one env would be stepped once per slot
                k, j, inner = shared
                _close_all(envs)
                what = (f"the same env object ({type(envs[k]).__name__}) for env {k} as for env {j}" if inner is None
                        else f"envs {j} and {k} that wrap the same env (their env.unwrapped is one {inner} object)")
                raise ConfigError(f"{path!r} returned {what}, a cached env?: each of the num_envs={num_envs} slots "
                                  "needs an env of its own (one env would be stepped once per slot), so the callable "
                                  "must build a new env on every call", key="env", value=path)
        else:
            envs = _env_list(envs)
            for env in envs:
                problem = _parallel_env_problem(env)
                if problem:
                    raise _not_parallel(f"env {env!r}", env, problem, None)
            shared = _shared_env(envs)
            if shared is not None:  # it would be reset and stepped once per slot, each step of every slot
                k, j, inner = shared
                what = (f"envs[{k}] is the same object as envs[{j}] ({type(envs[k]).__name__})" if inner is None
                        else f"envs[{j}] and envs[{k}] wrap the same env (their env.unwrapped is one {inner} object)")
                raise ConfigError(f"{what}: each slot needs an env of its own; build one env per slot, e.g. "
                                  "[make_env() for _ in range(n)], not [env] * n", key="envs")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.dt_s = float(self.params.dt_s)
        e0 = self.envs[0]
        self.agent_ids = tuple(e0.possible_agents)
        acts, dims = [], []
        for a in self.agent_ids:
            sp = e0.action_space(a)
            if not isinstance(sp, gymnasium.spaces.Discrete):
                raise ConfigError(f"agent {a!r} has action space {sp}; the adapter supports Discrete only", key="env")
            acts.append(int(sp.n))
            dims.append(int(np.prod(e0.observation_space(a).shape)))
        self._n_act = np.array(acts)
        self._obs_dim = np.array(dims)
        self.action_space = gymnasium.spaces.Discrete(int(self._n_act.max()))
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, shape=(int(self._obs_dim.max()),), dtype=np.float32)
        N = len(self.agent_ids)
        self.state_space = gymnasium.spaces.Box(-np.inf, np.inf, shape=(N * int(self._obs_dim.max()),), dtype=np.float32)
        self._obs = np.zeros((self.num_envs, N, int(self._obs_dim.max())), np.float32)
        self._alive = np.zeros((self.num_envs, N), bool)
        self._t = np.zeros(self.num_envs, np.int64)
        self._term = np.zeros((self.num_envs, N), bool)
        self._trunc = np.zeros((self.num_envs, N), bool)
        self._left = np.zeros((self.num_envs, N), bool)  # slots that terminated or truncated in this episode
        self._slot = {a: i for i, a in enumerate(self.agent_ids)}
        self._seed_rngs = [self.env_rng(0, e) for e in range(self.num_envs)]

    @classmethod
    def from_envs(cls, envs: Iterable[Any], **params: Any) -> "PettingZooCore":
        """Wrap already-built parallel envs, one distinct env object per slot (``num_envs`` = their number), e.g.
        ``[mpe2.simple_spread_v3.parallel_env() for _ in range(4)]``; any iterable of envs (a tuple, a generator)
        is taken as a list.

        Raises:
            ConfigError: key ``envs``: no envs (an empty list or generator), not an iterable of envs (one env, a
                string, a mapping), one env object given twice or two envs with the same ``env.unwrapped`` (``[env] *
                2``, or two ``aec_to_parallel`` wrappers of one AEC env, would reset and step one env once per slot);
                or an env that is not a PettingZoo ``ParallelEnv``.
        """
        return cls(envs=envs, **params)

    def __setstate__(self, state: dict) -> None:
        """Unpickle (trainers' checkpoints pickle the core); a core pickled before agents could join gets the
        bookkeeping of joining (no slot has left: an agent that left before the resume may join again)."""
        self.__dict__.update(state)
        if "_left" not in state:
            self._left = np.zeros_like(self._alive)
            self._slot = {a: i for i, a in enumerate(self.agent_ids)}

    @property
    def render_hint(self) -> str:
        """What :func:`coopsim.platform.scenario.check_render_mode` adds when it refuses a ``render_mode`` for
        this core (it draws no frames; the wrapped env draws its own)."""
        mode = self.params.env_kwargs.get("render_mode")
        if mode is not None:
            return (f"the adapter draws no frames of its own; the wrapped env renders itself with env_kwargs' "
                    f"render_mode={mode!r}: its frames are at env.core.envs[0].render() (make(...) without "
                    "render_mode)")
        return ("the adapter draws no frames of its own; to render the wrapped env, set its render_mode in "
                "env_kwargs (e.g. scenario.params.env_kwargs.render_mode=rgb_array) and call "
                "env.core.envs[0].render()")

    def _put(self, e: int, obs: dict) -> None:
        self._obs[e] = 0.0
        for i, a in enumerate(self.agent_ids):
            if a in obs:
                o = np.asarray(obs[a], np.float32).reshape(-1)
                self._obs[e, i, : len(o)] = o

    def reset(self, seed=None, env_ids=None):
        ids = reset_ids(env_ids, self.num_envs)
        for e in ids:
            if seed is not None:
                self._seed_rngs[e] = self.env_rng(seed, int(e))
            s = int(self._seed_rngs[e].integers(2**31))
            out = self.envs[e].reset(seed=s)
            if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict)):
                raise ConfigError(f"the env's reset() returned {type(out).__name__}, not (observations, infos) dicts "
                                  "as a PettingZoo ParallelEnv's does (an AEC env? use its parallel_env)",
                                  key="scenario.params.env" if self.params.env else None, value=self.params.env)
            obs = out[0]
            self._check_agents(int(e), "reset()")
            self._put(int(e), obs)
            self._alive[e] = [a in obs for a in self.agent_ids]
            self._term[e] = ~self._alive[e]
            self._trunc[e] = False
            self._left[e] = False
            self._t[e] = 0
        return self._obs.copy()

    def step(self, actions):
        """Step every env that has an alive slot once, with the alive slots' actions (an action outside an agent's
        own ``Discrete(n)`` is masked: action 0).

        An alive agent leaves when its env returns a True termination or truncation for it, or at ``max_steps``.
        PettingZoo's parallel API returns ``terminations`` and ``truncations`` entries for every agent that acted; an
        env whose ``step()`` leaves out an alive agent breaks that contract and is refused, rather than keeping the
        agent alive with reward 0 until ``max_steps``. An agent that is in the env's ``agents`` after the step, was
        not alive before and has an observation in the returned dicts joins (``alive`` True, not terminated or
        truncated; its reward in this step's float32 ``[E, N]`` reward is the env's reward for it, usually 0).

        Raises:
            ValueError: bad ``actions`` (shape, dtype, range; :func:`discrete_joint_actions`).
            ConfigError: an env's ``step()`` returned no termination or truncation entry for an agent that acted; or
                its ``agents`` holds an agent outside ``possible_agents``, a joining agent without an observation, or
                an agent that already left in this episode.
        """
        E, N = self._alive.shape
        reward = np.zeros((E, N), np.float32)
        acts = discrete_joint_actions(actions, (E, N), int(self.action_space.n), agent_names=tuple(self.agent_ids),
                                      scenario="PettingZooCore")   # shape, integers, range (masked: action 0 below)
        for e in np.flatnonzero(self._alive.any(axis=1)):
            live = [i for i in range(N) if self._alive[e, i]]
            act = {self.agent_ids[i]: int(acts[e, i]) if 0 <= acts[e, i] < self._n_act[i] else 0 for i in live}
            obs, rew, te, tr, _ = self.envs[e].step(act)
            lost = [self.agent_ids[i] for i in live if self.agent_ids[i] not in te or self.agent_ids[i] not in tr]
            if lost:
                raise self._contract_error(int(e), lost)
            self._put(int(e), obs)
            self._t[e] += 1
            for i in live:
                a = self.agent_ids[i]
                reward[e, i] = rew.get(a, 0.0)
                self._term[e, i] = bool(te.get(a, False))
                self._trunc[e, i] = not self._term[e, i] and (bool(tr.get(a, False)) or self._t[e] >= self.params.max_steps)
                if self._term[e, i] or self._trunc[e, i]:
                    self._alive[e, i] = False
                    self._left[e, i] = True
            self._join(int(e), set(live), obs, rew, te, tr, reward)
        return StepResult(self._obs.copy(), reward, self._term.copy(), self._trunc.copy(), {})

    def _env_key(self) -> dict[str, Any]:
        return {"key": "scenario.params.env" if self.params.env else None, "value": self.params.env}

    def _check_agents(self, e: int, after: str) -> list | None:
        """The env's ``agents`` (None when it has no list), each checked to be one of ``possible_agents``.

        Raises:
            ConfigError: an agent outside ``possible_agents`` (naming the env and the agent).
        """
        now = getattr(self.envs[e], "agents", None)
        if not isinstance(now, (list, tuple)):
            return None
        for a in now:
            try:
                known = a in self._slot
            except TypeError:  # an unhashable agent id
                known = False
            if not known:
                raise ConfigError(
                    f"env {e} ({type(self.envs[e]).__name__}): agent {a!r} is in env.agents after {after} but not in "
                    f"its possible_agents {list(self.agent_ids)!r}; the adapter's agent slots are possible_agents "
                    "(PettingZoo's parallel API: every agent, also one that joins later, is one of possible_agents)",
                    **self._env_key())
        return list(now)

    def _join(self, e: int, live: set[int], obs: dict, rew: dict, te: dict, tr: dict, reward: np.ndarray) -> None:
        """Make the agents that joined env ``e`` in this step alive (see :meth:`step`)."""
        now = self._check_agents(e, "step()")
        if now is None or self._t[e] >= self.params.max_steps:
            return
        for a in now:
            i = self._slot[a]
            if self._alive[e, i] or i in live:  # alive, or left in this step (its termination/truncation counts)
                continue
            if bool(te.get(a, False)) or bool(tr.get(a, False)):
                continue  # listed, but ended at once: it never acts
            name = f"env {e} ({type(self.envs[e]).__name__}): agent {a!r}"
            if self._left[e, i]:
                raise ConfigError(f"{name} is in env.agents again after it terminated or truncated in this episode; "
                                  "PettingZoo's parallel API does not revive agents (an agent that joins must not have "
                                  "been in the episode before)", **self._env_key())
            if a not in obs:
                raise ConfigError(f"{name} joined env.agents in step() but the step returned no observation for it; "
                                  "a joining agent needs entries in the returned dicts (its first observation)",
                                  **self._env_key())
            self._alive[e, i] = True
            self._term[e, i] = False
            self._trunc[e, i] = False
            reward[e, i] = rew.get(a, 0.0)

    def _contract_error(self, e: int, lost: list[str]) -> ConfigError:
        """The error of an env whose ``step()`` left out agents that acted (see :meth:`step`)."""
        left = getattr(self.envs[e], "agents", None)
        gone = f"; env.agents is now {list(left)!r}" if isinstance(left, (list, tuple)) else ""
        return ConfigError(
            f"env {e} ({type(self.envs[e]).__name__}): step() returned no termination/truncation for agent"
            f"{'s' if len(lost) > 1 else ''} {', '.join(map(repr, lost))}, which acted in this step{gone}. A "
            "PettingZoo ParallelEnv returns an entry for every agent that acted (an agent leaves by a True "
            "termination or truncation); was the env stepped after its episode ended, e.g. one env object given "
            "for two slots?", **self._env_key())

    @property
    def alive(self):
        return self._alive

    def action_masks(self):
        m = np.arange(self.action_space.n)[None, None, :] < self._n_act[None, :, None]
        m = np.broadcast_to(m, (self.num_envs, len(self.agent_ids), self.action_space.n)).copy()
        m[~self._alive] = False
        m[~self._alive, self.noop_action] = True
        return m

    def state(self):
        return self._obs.reshape(self.num_envs, -1).copy()

    def close(self):
        for env in self.envs:
            env.close()
