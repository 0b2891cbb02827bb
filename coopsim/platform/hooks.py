"""Hook protocols of the shared actor-critic trainer (``coopsim.agents.ppo``).

The PPO loop (IPPO/MAPPO) is one function a reader follows top to bottom; plugins extend it at three
marked points, each a small protocol here:

* :class:`IntrinsicReward` -- after the rollout, ``reward(batch)`` returns a bonus ``[T, E, N]`` that
  is *added to the extrinsic rewards before GAE*; ``update(batch)`` lets the module learn (e.g. RND,
  FIM). Used for exploration bonuses.
* :class:`AuxiliaryLoss` -- in every minibatch of the PPO update, ``loss(mb, features)`` returns a
  scalar tensor added (times ``coef``) to the PPO loss; it receives the minibatch and the policy's
  features with their autograd graph, so it shapes the shared encoder (IMMP intent, SSL imitation).
* :class:`CommModule` -- in the rollout and in the runner loop, ``messages(features, ...)`` turns the
  policy's features into an outgoing :class:`~coopsim.platform.comm.MessageBatch` sent through a
  :class:`~coopsim.platform.comm.Channel`; ``receive(inbox, ...)`` turns the copies delivered at the next
  step into a fixed-width input ``[E, N, input_dim]`` the policy reads with its observation.

Every hook is configured by ``{module: "package.module:Class", params: {...}}`` (see
:func:`load_hook`) and receives a :class:`HookContext` through ``setup`` before first use. A hook that
is a ``torch.nn.Module`` has its parameters optimised with the policy (auxiliary losses, comm modules)
or by its own ``update`` (intrinsic rewards), and saved in checkpoints through ``state_dict``.

Messages are data, like observations: they are produced without gradient and stored in the rollout as
the receiver's input, so the policy learns to read them; a comm module that wants to learn what to send
also implements :class:`AuxiliaryLoss` (the trainer then adds its loss too), or -- to learn *apart from*
the policy (DDACOM's decoupled message generation) -- three optional members of :class:`CommModule`:
``reads_obs = True`` (``messages`` and ``receive`` then also get the agents' flattened observations as
``obs``), ``on_feedback(fb)`` (the channel's per-sender delivery feedback after every ``deliver``) and
``update(batch) -> stats`` (called once per rollout with the :class:`RolloutBatch`; the module trains
itself with its own optimizer, and the trainer leaves its parameters out of the policy's optimizer).
A module that keeps state across steps (a receiver that holds the last copy of each sender) may also have
``new_episode(env_ids)``, called for the envs that start an episode.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from coopsim.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from coopsim.platform.comm import MessageBatch


@dataclass(frozen=True)
class HookContext:
    """Sizes a hook needs to build itself (all per agent unless said otherwise).

    Attributes:
        obs_dim: width of the flattened observation (Dict spaces flattened in space key order).
        feature_dim: width of the policy's features (encoder output, after the GRU if recurrent).
        num_agents: agent slots ``N``.
        num_actions: size of the Discrete action space ``A``.
        state_dim: width of the global state ``S`` (0 if the scenario has none).
        num_envs: environments stepped together ``E``.
        dt_s: simulated seconds per step.
        seed: the run seed (hooks seed their own generators from it).
        scenario_params: the scenario's construction params (e.g. MG-MAPF's ``num_goals``), for a hook that reads
            a scenario's observation layout to check it against its own params; empty when unknown.
    """

    obs_dim: int
    feature_dim: int
    num_agents: int
    num_actions: int
    state_dim: int
    num_envs: int
    dt_s: float
    seed: int
    scenario_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutBatch:
    """One rollout of ``T`` steps in ``E`` envs with ``N`` agent slots (torch tensors, CPU).

    Attributes:
        obs: float32 ``[T, E, N, D]`` flattened observations the agents acted on.
        next_obs: float32 ``[T, E, N, D]`` observations after the step (before any reset).
        actions: int64 ``[T, E, N]``.
        rewards: float32 ``[T, E, N]`` extrinsic rewards.
        alive: bool ``[T, E, N]`` slots that acted (only these count in any loss or bonus).
        dones: bool ``[T, E, N]`` the slot's episode ended with this step.
        state: float32 ``[T, E, S]`` global state, or None.
    """

    obs: "torch.Tensor"
    next_obs: "torch.Tensor"
    actions: "torch.Tensor"
    rewards: "torch.Tensor"
    alive: "torch.Tensor"
    dones: "torch.Tensor"
    state: "torch.Tensor | None" = None


@dataclass
class Minibatch:
    """One PPO minibatch of ``B`` agent-steps, flattened (torch tensors, CPU).

    Attributes:
        obs: float32 ``[B, D]``; next_obs: float32 ``[B, D]``.
        actions: int64 ``[B]``; agent: int64 ``[B]`` slot index; alive: bool ``[B]`` (mask every loss with it).
        advantages: float32 ``[B]``; returns: float32 ``[B]`` (value-normalised if normalisation is on).
    """

    obs: "torch.Tensor"
    next_obs: "torch.Tensor"
    actions: "torch.Tensor"
    agent: "torch.Tensor"
    alive: "torch.Tensor"
    advantages: "torch.Tensor"
    returns: "torch.Tensor"


@runtime_checkable
class IntrinsicReward(Protocol):
    """Exploration bonus added to the extrinsic reward before GAE.

    ``reward`` must return float32 ``[T, E, N]`` (0 where ``batch.alive`` is False is enforced by the
    trainer); ``update`` may learn from the batch and returns statistics (``{}`` if nothing to learn).
    """

    def setup(self, ctx: HookContext) -> None:
        return None

    def reward(self, batch: RolloutBatch) -> "torch.Tensor":
        ...

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        return {}


@runtime_checkable
class AuxiliaryLoss(Protocol):
    """An extra loss on the policy's features, added to the PPO loss in every minibatch.

    ``loss`` receives the minibatch and ``features`` float32 ``[B, F]`` (with gradient) and returns a
    scalar tensor (already averaged over ``mb.alive``) and statistics; the trainer adds ``coef * loss``.
    """

    coef: float

    def setup(self, ctx: HookContext) -> None:
        return None

    def loss(self, mb: Minibatch, features: "torch.Tensor") -> tuple["torch.Tensor", dict[str, float]]:
        ...


@runtime_checkable
class CommModule(Protocol):
    """Turns features into messages and received messages into a policy input.

    Attributes:
        input_dim: width of the array ``receive`` returns (fixed; the policy's input grows by it).
    """

    input_dim: int

    def setup(self, ctx: HookContext) -> None:
        return None

    def messages(self, features: "torch.Tensor", alive: np.ndarray, t: int, dt_s: float) -> "MessageBatch | None":
        """Outgoing messages of step ``t`` from ``features`` float32 ``[E, N, F]`` (no gradient); only ``alive`` slots send."""
        ...

    def receive(self, inbox: "MessageBatch", num_envs: int, num_agents: int) -> np.ndarray:
        """float32 ``[E, N, input_dim]`` policy input from the copies delivered this step (zeros if none)."""
        ...

    # Optional members (looked up with getattr; see the module docstring):
    #   reads_obs: bool = False -- messages(..., obs=) and receive(..., obs=) get float32 [E, N, D] observations
    #   on_feedback(fb: Feedback | None) -> None -- per-sender delivery feedback after each deliver
    #   update(batch: RolloutBatch) -> dict[str, float] -- self-training once per rollout (own optimizer)
    #   new_episode(env_ids: np.ndarray | None) -> None -- these envs (None: all) start an episode (the trainer for
    #     the envs it resets, MAPPO.reset for all): a module that keeps state across steps drops it there


def _protocol_methods(kind: type) -> list[str]:
    """The methods a hook protocol ``kind`` declares (public callables of its body)."""
    return [n for n, v in vars(kind).items() if callable(v) and not n.startswith("_")]


def not_a_hook(cls: type, kind: type, *, key: str, file: str | None, ref: Any) -> ConfigError:
    """The error for a class ``cls`` that is not a ``kind`` hook (names the methods it needs)."""
    methods = ", ".join(f"{m}(...)" for m in _protocol_methods(kind))
    attrs = [a for a in getattr(kind, "__annotations__", {}) if not a.startswith("_")]  # e.g. AuxiliaryLoss.coef
    also = f" and the attribute{'s' if len(attrs) > 1 else ''} {', '.join(attrs)}" if attrs else ""
    return ConfigError(f"{cls.__module__}:{cls.__qualname__} is not an {kind.__name__} hook (it needs the methods "
                       f"{methods}{also}; coopsim.platform.hooks)", file=file, key=f"{key}.module", value=ref)


def load_hook(spec: Any, *, key: str, file: str | None = None, kind: type | None = None) -> Any:
    """Build a hook from ``{module: "pkg.mod:Class", params: {...}}`` (or return an already built object).

    ``kind``: the hook protocol (e.g. :class:`IntrinsicReward`) the class must implement; its methods are checked on
    the class before it is called, so a wrong class never runs with the params (``coopsim validate`` is a dry check).

    Raises:
        ConfigError: the spec is not a mapping with ``module``, the module or class cannot be imported, the class
            lacks ``kind``'s methods, or it rejects the params; the message names ``key``.
    """
    if spec is None or not isinstance(spec, (dict,)):
        return spec
    unknown = set(spec) - {"module", "params"}
    if "module" not in spec or unknown:
        raise ConfigError(f"a hook is {{module: 'package.module:Class', params: {{...}}}}; got keys {sorted(spec)}",
                          file=file, key=key, value=spec)
    ref = spec["module"]
    if not isinstance(ref, str) or ":" not in ref:
        raise ConfigError("module must be 'package.module:Class'", file=file, key=f"{key}.module", value=ref)
    mod_name, attr = ref.split(":", 1)
    try:
        cls = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {ref!r}: {exc}", file=file, key=f"{key}.module", value=ref) from None
    if not isinstance(cls, type):  # e.g. os:getcwd, a function: calling it would blame its params
        raise ConfigError(f"{ref!r} is a {type(cls).__name__}, not a class; give the hook's class, "
                          f"'package.module:Class'", file=file, key=f"{key}.module", value=ref)
    if kind is not None and not all(callable(getattr(cls, m, None)) for m in _protocol_methods(kind)):
        raise not_a_hook(cls, kind, key=key, file=file, ref=ref)
    try:
        return cls(**(spec.get("params") or {}))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{ref} rejected its params: {exc}", file=file, key=f"{key}.params",
                          value=spec.get("params")) from None
