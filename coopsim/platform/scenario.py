"""The scenario contract: a batched, vectorized core and its PettingZoo ``ParallelEnv`` view.

Every coopsim scenario is written once, as a :class:`ScenarioCore` that holds the state of
``num_envs`` independent environments in arrays with a leading ``[num_envs, num_agents, ...]`` shape
and steps all of them at once (no per-agent Python loop). Training and benchmarks use the core
directly; :class:`ScenarioEnv` is the ``pettingzoo.ParallelEnv`` view of a core with ``num_envs == 1``
and follows PettingZoo exactly (agents that terminate or truncate leave ``env.agents``).

Batched-core conventions (checked by :func:`coopsim.testing.check_scenario`):

* Agent slots are fixed for the whole episode. ``alive`` (bool ``[E, N]``) says which slots are
  still in the episode; the core masks a slot that is not alive to the no-op action
  (``noop_action``), gives it reward 0, and keeps reporting ``terminated``/``truncated`` True for it.
  A slot may join once, mid-episode (alive from a step on, not before: the PettingZoo adapter over an env
  whose agents join); a slot that left never comes back within the episode.
* Seeding: ``reset(seed=s)`` gives env ``e`` the generator ``np.random.default_rng([s, e])``, so env 0
  of a batch reproduces a single env reset with the same seed. ``reset(seed=None, env_ids=...)``
  resets only the listed envs and continues their generators (used by trainers on finished envs).
* Observations are a ``np.ndarray`` ``[E, N, *shape]`` for a ``Box`` observation space, or a
  ``dict[str, np.ndarray]`` of such arrays (keys in the order of a ``Dict`` space).
* ``dt_s`` is the simulated time one step stands for (s); comm channels, ns-3 and robots use it.

Optional capabilities a layer may ask for (present when the scenario supports them):
``positions() -> float64 [E, N, 3]`` (m), ``constraints()`` (a safety-layer ``SafetyState``),
``episode_metrics() -> list[dict[str, float]]`` (one dict per env, valid once an env is done).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv
from pydantic import BaseModel, ConfigDict, Field

Obs = Union[np.ndarray, dict]
"""Batched observations: ``[E, N, *shape]`` array, or a dict of such arrays."""


class ScenarioParams(BaseModel):
    """Base params schema of every scenario; subclasses add fields with units in their names."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int = Field(256, ge=1, le=1_000_000, description="episode step limit, 1..1e6")


@dataclass
class StepResult:
    """What :meth:`ScenarioCore.step` returns for a batch.

    Attributes:
        obs: next observations, ``[E, N, ...]`` (array or dict of arrays).
        reward: float32 ``[E, N]``; 0 for slots that were not alive at the start of the step (except a slot
            that joins in this step: its env's reward for it, usually 0).
        terminated: bool ``[E, N]``; True from the step an agent's episode ended on.
        truncated: bool ``[E, N]``; True when the episode hit ``max_steps`` (time limit).
        info: named arrays, e.g. ``{"reward/goal": float32 [E, N], "cost/collision": float32 [E]}``.
    """

    obs: Obs
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, np.ndarray] = field(default_factory=dict)


#: what a batched core's ``step()`` raises (RuntimeError) before its first ``reset()``, as the PettingZoo view does
STEP_BEFORE_RESET = "step() before reset(): call reset(seed=...) first"


class ScenarioCore(ABC):
    """Batched simulator core of one scenario family (see the module docstring for conventions).

    Subclasses set ``Params`` (a pydantic schema of their keyword arguments), ``dt_s``,
    ``agent_ids``, ``observation_space`` and ``action_space`` (per agent, identical for all agents),
    and implement :meth:`reset`, :meth:`step`, :attr:`alive` and :meth:`state`.

    Args:
        num_envs: number of independent environments stepped together (leading axis ``E``).
        **params: validated against ``Params``.
    """

    Params: ClassVar[type[ScenarioParams]] = ScenarioParams
    #: ``render_modes`` lists ``"rgb_array"`` only on a core whose :meth:`render` draws a frame (the base class draws
    #: none); :func:`coopsim.platform.registry.make` and :class:`ScenarioEnv` refuse a ``render_mode`` not listed. A
    #: core whose params decide it (coop_game's graph world) sets ``self.metadata`` per instance
    metadata: ClassVar[dict[str, Any]] = {"name": "scenario", "render_modes": [], "is_parallelizable": True}
    noop_action: ClassVar[int] = 0
    #: True when every agent receives the same team reward each step (SMAC): the runner's ``episode_return``
    #: then counts it once per step (the mean over the agents alive at the step's start), not once per agent
    team_reward: ClassVar[bool] = False
    #: params the registry-wide conformance test builds this id with (for ids that need some, e.g. an adapter)
    example_params: ClassVar[dict[str, Any]] = {}

    dt_s: float = 1.0
    num_envs: int
    agent_ids: tuple[str, ...]
    observation_space: gymnasium.Space
    action_space: gymnasium.spaces.Discrete
    state_space: gymnasium.spaces.Box | None = None
    #: True from construction (a core's ``__init__`` sets it) until the first :meth:`reset` clears it; :meth:`step`
    #: raises RuntimeError (:data:`STEP_BEFORE_RESET`) while it is set, one bool test per step. A core pickled before
    #: the flag existed (an older training checkpoint) reads this class default and steps on after a resume
    _never_reset: bool = False

    @property
    def num_agents(self) -> int:
        return len(self.agent_ids)

    @abstractmethod
    def reset(self, seed: int | None = None, env_ids: np.ndarray | None = None) -> Obs:
        """Reset all envs (``env_ids is None``) or only ``env_ids`` (int array); returns the full batch's observations."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> StepResult:
        """Step every env with joint actions ``actions`` int64 ``[E, N]`` (slots not alive are ignored); before the
        first :meth:`reset` raise ``RuntimeError(STEP_BEFORE_RESET)``.

        Any integer dtype (or a nested list of ints) is accepted; bool and float arrays (even integral floats), strings
        and other dtypes raise ValueError "actions must be integers ..." (:func:`discrete_joint_actions`), as the
        ``ScenarioEnv`` view refuses a bool or float per agent."""

    @property
    @abstractmethod
    def alive(self) -> np.ndarray:
        """bool ``[E, N]``: slots still in their episode."""

    @property
    def done(self) -> np.ndarray:
        """bool ``[E]``: envs whose episode has ended (no slot alive)."""
        return ~self.alive.any(axis=1)

    @abstractmethod
    def state(self) -> np.ndarray:
        """Global state float32 ``[E, S]`` (centralized critics, ``ParallelEnv.state``)."""

    def action_masks(self) -> np.ndarray:
        """bool ``[E, N, A]``: available actions; by default every action for alive slots and only the no-op otherwise."""
        masks = np.zeros((self.num_envs, self.num_agents, int(self.action_space.n)), dtype=bool)
        alive = self.alive
        masks[alive] = True
        masks[~alive, self.noop_action] = True
        return masks

    def episode_metrics(self) -> list[dict[str, float]]:
        """Per-env metrics of the episode that just ended (empty dicts if the scenario has none)."""
        return [{} for _ in range(self.num_envs)]

    def render(self, env_index: int = 0) -> np.ndarray | None:
        """RGB frame uint8 ``[H, W, 3]`` of env ``env_index``, or None if the scenario cannot render."""
        return None

    def close(self) -> None:
        pass

    # helpers for subclasses --------------------------------------------------------------
    @staticmethod
    def env_rng(seed: int, env_index: int) -> np.random.Generator:
        """The generator env ``env_index`` gets on ``reset(seed=seed)``.

        Raises:
            ValueError: ``seed`` is not an integer >= 0 (a float, string or bool was silently truncated or cast).
        """
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0 (or None); got {seed!r}")
        return np.random.default_rng([int(seed), int(env_index)])


def check_num_envs(num_envs: Any) -> int:
    """``num_envs`` as an int if it is an integer >= 1 (``int`` or a numpy integer, not a bool or a float).

    Raises:
        ConfigError: names the value and the valid range (a ``ValueError``).
    """
    from coopsim.errors import ConfigError

    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)):
        raise ConfigError(f"num_envs must be an integer >= 1 (the number of envs stepped together); got {num_envs!r} "
                          f"({type(num_envs).__name__})", value=num_envs)
    if num_envs < 1:
        raise ConfigError(f"num_envs must be an integer >= 1 (the number of envs stepped together); got {num_envs!r}",
                          value=num_envs)
    return int(num_envs)


def reset_ids(env_ids: Any, num_envs: int) -> np.ndarray:
    """int64 ``[K]`` env indices a core's ``reset(env_ids=...)`` resets: every env for None; a bool mask ``[E]``
    (e.g. ``core.done``) selects the envs where it is True; else integer indices (a 1-D sequence or one integer).

    Raises:
        ValueError: a mask of another length, ids that are not integers (1.5, '0') or not 1-D, or an id outside
            ``[0, num_envs)``; checked before anything is reset.
    """
    if env_ids is None:
        return np.arange(num_envs, dtype=np.int64)
    a = np.asarray(env_ids)
    if a.size == 0 and a.ndim == 1:
        return np.zeros(0, np.int64)
    if a.dtype == bool:
        if a.shape != (num_envs,):
            raise ValueError(f"an env_ids mask must be bool [num_envs] = [{num_envs}]; got shape {a.shape}")
        return np.flatnonzero(a).astype(np.int64)
    if a.dtype.kind not in "iu" or a.ndim > 1:
        raise ValueError(f"env_ids must be integer env indices in [0, {num_envs}) (a 1-D sequence) or a bool mask "
                         f"[{num_envs}]; got {env_ids!r}")
    ids = a.astype(np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= num_envs):
        raise ValueError(f"env_ids must be in [0, {num_envs}); got {ids.tolist()}")
    return ids


def given_shape(actions: Any, a: np.ndarray) -> str:
    """How a wrongly shaped joint action is named in errors: its shape, or ``None`` / a scalar said as such
    (``np.asarray(None).shape`` is ``()``, which would read as an empty shape)."""
    if actions is None:
        return "None"
    if a.ndim == 0 and not isinstance(actions, np.ndarray):
        return f"a scalar {actions!r} (shape ())"
    return str(a.shape)


def discrete_joint_actions(actions: Any, shape: tuple[int, int], n: int, valid: str | None = None,
                           agent_names: tuple[str, ...] | None = None, *, scenario: str | None = None) -> np.ndarray:
    """A batched core's joint actions as int64 ``shape`` (``[E, N]``), every slot checked, alive or not, against
    ``Discrete(n)``. int64 input costs one vectorized comparison; other integer dtypes (and nested lists of ints)
    are accepted; bools, floats (even integral ones), strings, objects, complex numbers and other dtypes are refused,
    as the ``ScenarioEnv`` view refuses them per agent (never cast: a bool mask passed by mistake for an argmax is
    not "action 1", and ``'3'`` is not 3).

    Args:
        valid: how the valid actions are named in errors (default ``0..n-1``).
        agent_names: agent ids, named beside the agent index in errors.
        scenario: the core, named in front of the errors of a non-integer value or dtype (e.g. ``"SMACCore (map
            '3m')"``).

    Raises:
        ValueError: wrong shape, a non-integer value or dtype, or an action out of range (naming env, agent, the
            value as given, e.g. 2**63 of a uint64 array, and the valid actions); nothing is changed.
    """
    valid = valid or f"0..{n - 1}"
    a = actions if type(actions) is np.ndarray else np.asarray(actions)
    if a.shape != shape:
        raise ValueError(f"actions must have shape (num_envs, num_agents) = {shape}; got {given_shape(actions, a)}")

    def who(i: int) -> str:
        return f"agent {i} ({agent_names[i]})" if agent_names else f"agent {i}"

    if a.dtype == np.int64:  # the usual case: one comparison, negatives wrap to huge unsigned values
        bad = a.view(np.uint64) >= n
    else:
        kind = a.dtype.kind
        owner = f"{scenario}: " if scenario else ""
        if kind == "f":
            frac = a != np.floor(a)  # NaN counts as not integral
            if frac.any():
                e, i = np.argwhere(frac)[0]
                raise ValueError(f"{owner}actions must be integers; got {a[e, i].item()!r} (dtype {a.dtype}) for env "
                                 f"{e} {who(i)}; valid: {valid}")
        if kind not in "iu":  # bools, floats, strings, objects, complex, datetimes, ...: never cast
            hint = {"b": " (a bool array: an action mask or a comparison, not actions? take e.g. mask.argmax(-1))",
                    "f": " (cast an integral float array with a.astype(np.int64))"}.get(kind, "")
            raise ValueError(f"{owner}actions must be integers in {valid}; got dtype {a.dtype}{hint}; give an integer "
                             "array, e.g. int64")
        bad = (a < 0) | (a >= n)  # compared in the given dtype: a uint64 2**63 stays 2**63
    if bad.any():
        e, i = np.argwhere(bad)[0]
        raise ValueError(f"action {a[e, i].item()!r} of env {e} {who(i)} out of range; valid: {valid}")
    return a if a.dtype == np.int64 else a.astype(np.int64)


def _discrete_range(space: gymnasium.spaces.Discrete) -> str:
    lo = int(space.start)
    return f"{lo}..{lo + int(space.n) - 1}"


def _discrete_action(agent: str, act: Any, space: gymnasium.spaces.Discrete) -> int:
    """``act`` as an int if it is an integer scalar (``int``, a numpy integer or a 0-d integer array; not a bool)
    in ``space``'s range; else ValueError naming the agent, the value and the valid range."""
    is_int = isinstance(act, (int, np.integer)) and not isinstance(act, bool)
    if not is_int and isinstance(act, np.ndarray) and act.shape == () and np.issubdtype(act.dtype, np.integer):
        is_int = True
    valid = _discrete_range(space)
    if not is_int:
        what = f"{type(act).__name__}" + (f" of shape {act.shape}" if isinstance(act, np.ndarray) else "")
        raise ValueError(f"action of agent {agent!r} must be one integer in {valid}; got {act!r} ({what})")
    v = int(act)
    lo = int(space.start)
    if not lo <= v < lo + int(space.n):
        raise ValueError(f"action of agent {agent!r} out of range: got {v}; valid: {valid}")
    return v


def _slice_obs(obs: Obs, e: int, i: int):
    if isinstance(obs, dict):
        return {k: np.array(v[e, i], copy=True) for k, v in obs.items()}
    return np.array(obs[e, i], copy=True)


class RebindsViews:
    """Mixin for a core that keeps numpy views into its own arrays (named slices, strided windows). Pickle (the
    trainers' checkpoints pickle the core) stores each view as an array of its own, so after unpickling writes
    through a view would no longer reach the array it came from. The attributes named in ``_VIEWS`` are left out of
    the pickled state and rebuilt by ``_bind()``, which the core defines and also calls in ``__init__``.

    Raises:
        TypeError: at class definition, a subclass that names ``_VIEWS`` but defines no ``_bind``.
    """

    _VIEWS: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls._VIEWS and not callable(getattr(cls, "_bind", None)):
            raise TypeError(f"{cls.__name__} names views {cls._VIEWS} but has no _bind() to rebuild them")

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in self._VIEWS}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind()


def check_render_mode(render_mode: Any, metadata: Mapping[str, Any], owner: str,
                      hint: str | None = None) -> str | None:
    """``render_mode`` if it is None or one of ``metadata["render_modes"]``.

    Args:
        hint: added to the message of a refused mode (e.g. the PettingZoo adapter's core's ``render_hint``: where
            the wrapped env's frames are).

    Raises:
        ConfigError: key ``render_mode``: not a string (e.g. ``1``), or a mode the scenario does not list (naming
            the value and the valid modes of ``metadata``; ``owner`` names the scenario).
    """
    from coopsim.errors import ConfigError

    modes = list(metadata.get("render_modes") or [])
    valid = (f"valid: None or {', '.join(map(repr, modes))}" if modes
             else "valid: None (this scenario cannot render)")
    if hint:
        valid += f"; {hint}"
    if render_mode is None:
        return None
    if not isinstance(render_mode, str):
        raise ConfigError(f"render_mode must be None or a string; got {render_mode!r} ({type(render_mode).__name__}); "
                          f"{valid}", key="render_mode", value=render_mode)
    if render_mode not in modes:
        raise ConfigError(f"render_mode {render_mode!r} is not supported by {owner}; {valid}", key="render_mode",
                          value=render_mode)
    return render_mode


class UnknownAgentError(KeyError):
    """``ScenarioEnv.observation_space`` / ``action_space`` of an agent that is not one of ``possible_agents``
    (a KeyError, as PettingZoo's envs raise); ``str()`` is the plain message."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ScenarioEnv(ParallelEnv):
    """PettingZoo ``ParallelEnv`` view of one environment of a :class:`ScenarioCore` (``num_envs == 1``).

    Agents that terminate or truncate leave ``agents``; an agent whose slot joins mid-episode (the PettingZoo
    adapter over an env whose agents join) enters ``agents`` after that step. ``step`` needs an action for every
    agent in ``agents`` (PettingZoo's convention); for a ``Discrete`` action space each must be an integer (``int``
    or a numpy integer, not a bool or a float) in the space's range. Actions for agents that already left ``agents``
    are ignored (their slots take the core's no-op). ``infos[agent]["action_mask"]`` is int8 0/1 ``[A]`` as in
    PettingZoo's own masked envs, so ``env.action_space(agent).sample(mask=infos[agent]["action_mask"])`` works.
    Capabilities of the core (``positions``, ``constraints``, ``episode_metrics``, ``dt_s``) are forwarded; ``core``
    is the batched core itself.

    Args:
        core: a batched core with ``num_envs == 1``.
        render_mode: None, or one of ``metadata["render_modes"]`` (``"rgb_array"`` on the scenarios that draw
            frames: MG-MAPF, SMAC, coop_game grids).

    Raises:
        ValueError: if ``core.num_envs != 1``.
        ConfigError: ``render_mode`` is not None and not one of the core's ``metadata["render_modes"]`` (a
            ``ValueError``).
    """

    def __init__(self, core: ScenarioCore, render_mode: str | None = None):
        if core.num_envs != 1:
            raise ValueError(f"ScenarioEnv views exactly one env; got a core with num_envs={core.num_envs}")
        self.metadata = dict(core.metadata)
        self.render_mode = check_render_mode(render_mode, self.metadata, type(core).__name__,
                                             getattr(core, "render_hint", None))
        self.core = core
        # one space object per instance, returned for every agent (PettingZoo's api tests want the same object on
        # every call); not functools.lru_cache on the methods, whose cache would keep every env alive
        self._observation_space: gymnasium.Space = core.observation_space
        self._action_space: gymnasium.Space = core.action_space
        self.possible_agents = list(core.agent_ids)
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self.agents: list[str] = []
        self._was_reset = False
        self.dt_s = core.dt_s
        if core.state_space is not None:
            self.state_space = core.state_space

    def _check_agent(self, agent: Any) -> None:
        try:
            known = agent in self._index
        except TypeError:  # an unhashable value (a list)
            known = False
        if not known:
            raise UnknownAgentError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")

    def observation_space(self, agent: str) -> gymnasium.Space:
        """The core's observation space (the same object for every agent and call).

        Raises:
            UnknownAgentError: a KeyError: ``agent`` is not one of ``possible_agents`` (as PettingZoo's envs raise).
        """
        self._check_agent(agent)
        return self._observation_space

    def action_space(self, agent: str) -> gymnasium.Space:
        """The core's action space (the same object for every agent and call; ``Discrete(A)`` on every scenario).

        Raises:
            UnknownAgentError: a KeyError: ``agent`` is not one of ``possible_agents`` (as PettingZoo's envs raise).
        """
        self._check_agent(agent)
        return self._action_space

    def _infos(self, agents: list[str]) -> dict[str, dict]:
        """``{agent: {"action_mask": int8 [A]}}`` (0/1; the core's bool masks cast, one copy per agent)."""
        masks = self.core.action_masks()[0].astype(np.int8)
        return {a: {"action_mask": masks[self._index[a]].copy()} for a in agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict[str, Any], dict[str, dict]]:
        """Reset the env and return ``(observations, infos)`` for the agents alive after the reset.

        Args:
            seed: an integer >= 0 (the core's ``reset(seed=...)``: the same seed gives the same episode), or None.
            options: accepted for PettingZoo compatibility; unused.

        Returns:
            ``observations``: ``{agent: obs}``, each one agent's slice of the core's batched observation, a copy:
            an array of the core's ``observation_space`` shape and dtype (float32 on the built-in scenarios; e.g.
            ``[5]`` on ``coop_game/Grid4x4-v0``, ``[30]`` on ``smac/3m-v0``), or a dict of arrays for a ``Dict`` space.
            ``infos``: ``{agent: {"action_mask": int8 [A]}}``, 1 for the actions available now and 0 otherwise
            (``A`` = ``action_space(agent).n``), the dtype PettingZoo's masked envs use and Gymnasium's
            ``Discrete.sample(mask=...)`` requires; ``mask.astype(bool)`` gives a bool [A] mask (never ``~mask``
            on the int8 array: ``~np.int8(1)`` is -2). The batched core's ``action_masks()`` stays bool.

        Raises:
            ValueError: ``seed`` is not an integer >= 0 (a float, string or bool is refused, not truncated).
        """
        obs = self.core.reset(seed=seed)
        self._was_reset = True
        alive = self.core.alive[0]
        self.agents = [a for a, i in self._index.items() if alive[i]]
        observations = {a: _slice_obs(obs, 0, self._index[a]) for a in self.agents}
        return observations, self._infos(self.agents)

    def step(self, actions: dict[str, Any]) -> tuple[
        dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict]
    ]:
        """Step the env with one action per agent in ``env.agents``.

        Args:
            actions: ``{agent: action}``, one entry for every agent in ``env.agents``; each a Python ``int`` or numpy
                integer in the ``Discrete`` space's range (not a bool, not a float: ``1.0`` and ``True`` are refused
                as by the batched core). Entries for agents that already left ``env.agents`` are ignored.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, each ``{agent: ...}`` over the agents that
            acted: observations as in :meth:`reset` (copies); rewards Python ``float`` (the scenario's reward units;
            on team-reward scenarios such as ``smac`` every agent gets the same team reward); terminations and
            truncations Python ``bool`` (truncation = the ``max_steps`` time limit); infos
            ``{"action_mask": int8 [A]}`` (0/1, as in :meth:`reset`) for the next step. Agents that terminated or
            truncated leave ``env.agents``; the episode is over when it is empty. An agent that joined in this step
            (the PettingZoo adapter over an env whose agents join) is in every dict too (terminated and truncated
            False) and in ``env.agents`` from now on.

        Raises:
            RuntimeError: before the first :meth:`reset`.
            TypeError: ``actions`` is not a mapping.
            KeyError: an action for an agent id the env does not have.
            ValueError: an agent in ``env.agents`` has no action, or an action is not an integer in range.
        """
        if not self._was_reset:
            raise RuntimeError("step() before reset(): call env.reset(seed=...) first")
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict {{agent: action}} with one entry per agent in env.agents; "
                            f"got {type(actions).__name__} {actions!r}")
        unknown = [a for a in actions if a not in self._index]
        if unknown:
            raise KeyError(f"actions for unknown agents {unknown}; valid agents: {self.possible_agents}")
        space = self.core.action_space
        missing = [a for a in self.agents if a not in actions]
        if missing:
            valid = f" (each an integer in {_discrete_range(space)})" if isinstance(space, gymnasium.spaces.Discrete) else ""
            raise ValueError(f"no action for agent{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}: "
                             f"step() needs an action for every agent in env.agents{valid}; agents that have left "
                             f"env.agents need none")
        joint = np.full((1, self.core.num_agents), self.core.noop_action, dtype=np.int64)
        acting = list(self.agents)
        for a in acting:
            act = actions[a]
            if isinstance(space, gymnasium.spaces.Discrete):
                joint[0, self._index[a]] = _discrete_action(a, act, space)
            else:  # pragma: no cover - every core so far has a Discrete action space
                joint[0, self._index[a]] = int(act)
        res = self.core.step(joint)
        observations, rewards, terms, truncs = {}, {}, {}, {}
        for a in acting:
            i = self._index[a]
            observations[a] = _slice_obs(res.obs, 0, i)
            rewards[a] = float(res.reward[0, i])
            terms[a] = bool(res.terminated[0, i])
            truncs[a] = bool(res.truncated[0, i])
        still = [a for a in acting if not (terms[a] or truncs[a])]
        alive = self.core.alive[0]
        joined: list[str] = []
        if int(np.count_nonzero(alive)) != len(still):  # a slot joined in this step (the PettingZoo adapter)
            held = set(acting)
            joined = [a for a, i in self._index.items() if alive[i] and a not in held]
            for a in joined:
                i = self._index[a]
                observations[a] = _slice_obs(res.obs, 0, i)
                rewards[a] = float(res.reward[0, i])
                terms[a] = truncs[a] = False
        infos = self._infos(acting + joined)
        self.agents = still + joined
        return observations, rewards, terms, truncs, infos

    def state(self) -> np.ndarray:
        """The global state: float32 ``[S]`` (``S = state_space.shape[0]``), a copy of the core's ``state()[0]``;
        for centralized critics (QMIX's mixer, MAPPO's critic)."""
        return np.array(self.core.state()[0], copy=True)

    def render(self) -> np.ndarray | None:
        """With ``render_mode="rgb_array"``: the core's frame, uint8 ``[H, W, 3]``, after :meth:`reset`; before the
        first reset None and a warning on every scenario (there is no episode to draw yet; cheap and the same for
        SMAC, whose core could draw its initial arrays, and MG-MAPF, whose core has no map before a reset). With
        ``render_mode=None``: None and Gymnasium's warning, as PettingZoo's envs do (the core's own ``render(0)``
        draws regardless)."""
        if self.render_mode is None:
            gymnasium.logger.warn("You are calling render method without specifying any render mode.")
            return None
        if not self._was_reset:
            gymnasium.logger.warn("render() before reset(): no episode to draw yet; call env.reset(seed=...) first")
            return None
        return self.core.render(0)

    def close(self) -> None:
        self.core.close()

    # capabilities, forwarded for one env
    def positions(self) -> dict[str, np.ndarray]:
        """Agent positions in metres, ``{agent: float64 [3]}`` (raises AttributeError if the scenario has none)."""
        pos = self.core.positions()[0]
        return {a: pos[i].copy() for a, i in self._index.items()}

    def episode_metrics(self) -> dict[str, float]:
        return self.core.episode_metrics()[0]
