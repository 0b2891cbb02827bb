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

What the trainer checks of what a hook returns (:func:`check_bonus`, :func:`check_aux_loss`, :func:`check_stats`,
:func:`check_received`, :func:`check_messages`): ``IntrinsicReward.reward`` a float tensor (or numpy array) of shape
exactly ``[T, E, N]``, no broadcasting -- detached and copied to the CPU (a reward carries no gradient: a bonus
computed without ``torch.no_grad()`` never joins PPO's backward; the hook trains itself in ``update``);
``AuxiliaryLoss.loss`` a pair ``(0-dim float tensor, stats)``; ``update`` and the loss's statistics a dict of
numbers (``None`` is read as ``{}``, "nothing to report"; a string is refused); ``CommModule.receive`` a float array
(or tensor) of shape exactly ``[E, N, input_dim]``, ``CommModule.messages`` a ``MessageBatch`` or None (checked
in training and in the runner loop alike). Anything else is a :class:`~coopsim.errors.ConfigError` naming the
hook's config key and class and what was expected against what came. A nan or inf in a bonus, an auxiliary loss or
what ``receive`` returns stops training (:class:`~coopsim.errors.TrainingDiverged`, naming the key and the
iteration) before it reaches the weights; a nan or inf statistic is logged as it is, with one warning.

Exact ``--resume``: a hook's ``state_dict()`` / ``load_state_dict(s)`` must hold everything its ``update`` (or
``loss``) keeps between iterations -- counters, running statistics, its own numpy or torch generators -- or a resumed
run continues from a restarted hook. (``nn.Module.state_dict`` holds parameters and buffers only.) One thing the
trainer saves for every hook itself: the state of each ``torch.optim.Optimizer`` and LR scheduler
(``torch.optim.lr_scheduler.LRScheduler``) the hook holds as an attribute (e.g. an RND/FIM predictor's own Adam in
``self.opt``), in a list, tuple or dict attribute, or on an ``nn.Module`` or plain object attribute
(:func:`coopsim.agents.ppo.trainer.hook_optimizers`), restored after the hook's ``load_state_dict``; one held deeper
is named in a warning at the first checkpoint. A hook without ``state_dict`` is not saved at all.

Hook params: a hook whose class has a pydantic ``Params`` model, or whose ``__init__`` parameters are annotated
(``beta: float``), gets the run config's checks of component params before it is built: ``true`` for a number, a
quoted number (``'16'``), a YAML 1.1 number, nan or inf are refused with the key ``<hook key>.params.<name>``.
"""
from __future__ import annotations

import importlib
import math
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
        rewards: float32 ``[T, E, N]`` extrinsic rewards (with ``train.bootstrap_truncated``, plus
            ``gamma * V(final obs)`` at a step where an episode is cut by its time limit).
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

    ``reward`` must return a float tensor of shape exactly ``[T, E, N]`` (made float32; 0 where ``batch.alive`` is
    False is enforced by the trainer, and the value there is not read); ``update`` may learn from the batch and
    returns statistics ``{name: number}`` (``{}``, or None, if nothing to report).
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

    ``loss`` receives the minibatch and ``features`` float32 ``[B, F]`` (with gradient) and returns a pair: a
    0-dim float tensor (already averaged over ``mb.alive``) and statistics ``{name: number}`` (``{}`` or None if
    none); the trainer adds ``coef * loss``.
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
    article = "an" if kind.__name__[:1] in "AEIOU" else "a"
    return ConfigError(f"{cls.__module__}:{cls.__qualname__} is not {article} {kind.__name__} hook (it needs the methods "
                       f"{methods}{also}; coopsim.platform.hooks)", file=file, key=f"{key}.module", value=ref)


def load_hook(spec: Any, *, key: str, file: str | None = None, kind: type | None = None) -> Any:
    """Build a hook from ``{module: "pkg.mod:Class", params: {...}}`` (or return an already built object).

    ``kind``: the hook protocol (e.g. :class:`IntrinsicReward`) the class must implement; its methods are checked on
    the class before it is called, so a wrong class never runs with the params (``coopsim validate`` is a dry check).

    Raises:
        ConfigError: the spec is not a mapping with ``module``, the module or class cannot be imported, the class
            lacks ``kind``'s methods, or it rejects the params; the message names ``key`` (``<key>.params.<param>``
            when the class raised a ConfigError naming one of its params, e.g. DDACOMGenerator's
            ``sender_params.hold_steps``).
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
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"params must be a mapping {{name: value}}; got {type(params).__name__}", file=file,
                          key=f"{key}.params", value=params)
    params = dict(params)  # the checks below make a whole float for an int an int: in this copy only
    check_hook_params(cls, params, key=key, file=file)
    try:
        hook = cls(**params)
    except ConfigError as exc:
        inner = _param_error(cls, exc, key=key, file=file)
        if inner is None:
            raise ConfigError(f"{ref} rejected its params: {exc}", file=file, key=f"{key}.params",
                              value=spec.get("params")) from None
        raise inner from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{ref} rejected its params: {exc}", file=file, key=f"{key}.params",
                          value=spec.get("params")) from None
    if kind is not None and not isinstance(hook, kind):  # an attribute set in __init__ (coef, input_dim) is missing
        raise not_a_hook(cls, kind, key=key, file=file, ref=ref)
    return hook


def _param_error(cls: type, exc: ConfigError, *, key: str, file: str | None) -> ConfigError | None:
    """``exc``, raised by hook class ``cls``'s constructor naming one of its own params (``sender_params.hold_steps``:
    its key starts with a param of :func:`hook_params_model`) and no file, re-addressed below the hook's config key
    (``<key>.params.sender_params.hold_steps``, its ``also`` too) in ``file``, so that ``coopsim validate`` / ``run``
    name the override that set it; None for another ConfigError (told as the hook's refusal of its params)."""
    model = hook_params_model(cls)
    head = (exc.key or "").split(".")[0]
    if exc.file or model is None or head not in model.model_fields:
        return None
    return ConfigError(exc.message, file=file, key=f"{key}.params.{exc.key}", value=exc.value,
                       also=tuple(f"{key}.params.{a}" for a in exc.also))


def hook_params_model(cls: type) -> Any:
    """The pydantic model of a hook class's params: its ``Params`` attribute when that is a pydantic model, else one
    built from the annotated parameters of its ``__init__`` (``beta: float = 0.1``); None when neither gives one
    (no annotations, ``**params`` only, annotations that cannot be resolved)."""
    import inspect
    import typing

    from pydantic import BaseModel, ConfigDict, create_model

    p = getattr(cls, "Params", None)
    if isinstance(p, type) and issubclass(p, BaseModel):
        return p
    try:
        hints = typing.get_type_hints(cls.__init__)
        sig = inspect.signature(cls.__init__)
        fields = {name: (hints[name], ... if par.default is inspect.Parameter.empty else par.default)
                  for name, par in sig.parameters.items()
                  if name in hints and par.kind in (par.POSITIONAL_OR_KEYWORD, par.KEYWORD_ONLY)}
        if not fields:
            return None
        return create_model(f"{cls.__name__}Params", __config__=ConfigDict(arbitrary_types_allowed=True), **fields)
    except Exception:  # noqa: BLE001 - an annotation pydantic cannot take: the hook checks its params itself
        return None


def check_hook_params(cls: type, params: dict[str, Any], *, key: str, file: str | None = None) -> None:
    """The run config's checks of component params (:func:`coopsim.platform.config.reject_bools`: ``true`` for a
    number, a quoted or YAML 1.1 number; and nan or inf for a number, unless that is the param's default) for a hook's
    ``params``, where :func:`hook_params_model` gives the hook's param types; a whole float for an int is made that
    int in ``params``. Unknown names and values pydantic would refuse are left to the hook's constructor.

    Raises:
        ConfigError: key ``<key>.params.<name>``, naming the value.
    """
    model = hook_params_model(cls)
    if model is None:
        return
    from coopsim.platform.config import reject_bools
    from coopsim.platform.registry import _numeric_field

    reject_bools(params, model, file=file, key_prefix=f"{key}.params.")
    for k, v in params.items():
        if isinstance(v, float) and not math.isfinite(v) and _numeric_field(model, k):
            d = model.model_fields[k].default
            if not (isinstance(d, float) and v == d):
                raise ConfigError(f"invalid value {v!r}: must be a finite number (not nan or inf)", file=file,
                                  key=f"{key}.params.{k}", value=v)


#: largest finite float32: a number param that ends up in a float32 tensor must stay below it
FLOAT32_MAX = 3.4028234663852886e38


def check_number(name: str, value: Any, *, integer: bool = False, ge: float | None = None, gt: float | None = None,
                 le: float | None = None) -> float | int:
    """``value`` as a hook's number param ``name``: an int or float (not a bool, not a string), finite and below
    :data:`FLOAT32_MAX` (bonuses and losses are float32), whole when ``integer``, within the bounds given.

    Returns:
        ``value`` as an int (``integer``) or a float.

    Raises:
        ValueError: naming ``name``, the value and what is valid (:func:`load_hook` reports it on the hook's
            ``params`` key).
    """
    what = "an integer" if integer else "a finite number"
    low = f"[{ge:g}" if ge is not None else f"({gt:g}" if gt is not None else None
    if low is not None and le is not None:
        need = f"{what} in {low}, {le:g}]"
    elif low is not None:
        need = f"{what} {'>=' if ge is not None else '>'} {low[1:]}"
    else:
        need = what + (f" <= {le:g}" if le is not None else "")
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = math.isfinite(value) and abs(value) < FLOAT32_MAX and (not integer or float(value).is_integer())
    if ok:
        ok = (ge is None or value >= ge) and (gt is None or value > gt) and (le is None or value <= le)
    if not ok:
        raise ValueError(f"{name} must be {need}; got {value!r}")
    return int(value) if integer else float(value)


def hook_name(hook: Any) -> str:
    """``package.module:Class`` of a hook object, as its config's ``module`` names it."""
    return f"{type(hook).__module__}:{type(hook).__qualname__}"


def _shape(x: Any) -> str:
    shape = getattr(x, "shape", None)
    return str(tuple(shape)) if shape is not None else f"a {type(x).__name__}"


def check_bonus(value: Any, hook: Any, *, key: str, shape: tuple[int, int, int], file: str | None = None
                ) -> "torch.Tensor":
    """What ``IntrinsicReward.reward`` returned, as a float32 CPU tensor ``[T, E, N]`` without autograd history.

    A tensor is detached and copied to the CPU: a reward is data, as in every RND / count-bonus implementation (the
    bonus of a predictor computed without ``torch.no_grad()`` would otherwise join PPO's graph: with one minibatch
    PPO's backward would add gradients to the hook's parameters, with more it fails on the freed graph). The hook
    trains its parameters in ``update``; a bonus on a GPU is read like one on the CPU.

    Args:
        value: the return value: a float tensor or numpy array of shape exactly ``shape``.
        hook: the hook (named in the error); key: its config key; shape: ``(T, E, N)`` of the rollout.

    Raises:
        ConfigError: ``key``; another type, dtype (bool, integer) or shape (no broadcasting: ``[T, E, 1]`` or ``[N]``
            is refused), naming the hook's class and the expected and the received shape; or a tensor whose values
            cannot be read on the CPU (the ``meta`` device), naming the device.
    """
    import torch

    value = _float_values(value, f"{hook_name(hook)}.reward returned", f"a float32 tensor of shape (T, E, N) = {shape}",
                          shape, f"(T, E, N) = {tuple(shape)} (one bonus per step, env and agent slot; no broadcasting)",
                          file=file, key=key)
    return torch.as_tensor(value, dtype=torch.float32)


def _float_values(value: Any, where: str, want: str, shape: tuple[int, ...], want_shape: str, *, file: str | None,
                  key: str) -> "np.ndarray | torch.Tensor":
    """``value``, a float numpy array or tensor of shape exactly ``shape``; a tensor detached and on the CPU.

    Raises:
        ConfigError: ``key``; another type or dtype (``... returned <what>, expected <want>``) or shape (``expected
            <want_shape>``), or a tensor whose values cannot be copied to the CPU.
    """
    import torch

    if isinstance(value, torch.Tensor):
        floating = value.is_floating_point()
    elif isinstance(value, np.ndarray):
        floating = np.issubdtype(value.dtype, np.floating)
    else:
        raise ConfigError(f"{where} {type(value).__name__}, expected {want}", file=file, key=key)
    if tuple(value.shape) != tuple(shape):
        raise ConfigError(f"{where} shape {tuple(value.shape)}, expected {want_shape}", file=file, key=key)
    if not floating:
        raise ConfigError(f"{where} dtype {value.dtype}, expected {want}", file=file, key=key)
    if isinstance(value, torch.Tensor):
        value = _to_cpu(value.detach(), where, file=file, key=key)
    return value


def _to_cpu(value: "torch.Tensor", where: str, *, file: str | None, key: str) -> "torch.Tensor":
    """``value`` on the CPU (itself when it is there); a ConfigError naming ``where`` and the device when its values
    cannot be copied (the ``meta`` device holds none)."""
    if value.device.type == "cpu":
        return value
    try:
        return value.to("cpu")
    except (RuntimeError, NotImplementedError) as exc:
        raise ConfigError(f"{where} a tensor on device {value.device} whose values cannot be copied to the CPU "
                          f"({str(exc).splitlines()[0]})", file=file, key=key) from None


def check_received(value: Any, hook: Any, *, key: str, shape: tuple[int, int, int], file: str | None = None
                   ) -> np.ndarray:
    """What ``CommModule.receive`` returned, as a float32 numpy array ``[E, N, input_dim]`` (a tensor is detached
    and copied to the CPU first). Its values are not checked here: see :func:`non_finite_count`.

    Raises:
        ConfigError: ``key`` (``agents.params.comm``); not a float array or tensor, or not of shape exactly ``shape``
            (the policy's input is ``input_dim`` wide), naming the hook's class and the expected and received shape.
    """
    import torch

    want = f"a float32 array of shape (E, N, input_dim) = {tuple(shape)}"
    value = _float_values(value, f"{hook_name(hook)}.receive returned", want, shape,
                          f"{want} (input_dim is the module's input_dim attribute; no broadcasting)", file=file, key=key)
    if isinstance(value, torch.Tensor):
        value = value.numpy()
    return np.asarray(value, dtype=np.float32)


def non_finite_count(value: np.ndarray) -> tuple[int, int]:
    """``(nan entries, inf entries)`` of a float array."""
    return int(np.isnan(value).sum()), int(np.isinf(value).sum())


def check_messages(value: Any, hook: Any, *, key: str, file: str | None = None) -> "MessageBatch | None":
    """What ``CommModule.messages`` returned: a :class:`~coopsim.platform.comm.MessageBatch` or None (nothing sent).

    Raises:
        ConfigError: ``key``; another type, or a payload that is not a float array, naming the hook's class.
    """
    from coopsim.platform.comm import MessageBatch

    if value is None:
        return None
    where = f"{hook_name(hook)}.messages returned"
    if not isinstance(value, MessageBatch):
        raise ConfigError(f"{where} a {type(value).__name__}, expected a MessageBatch (coopsim.platform.comm) or None",
                          file=file, key=key)
    payload = value.payload
    if not (isinstance(payload, np.ndarray) and np.issubdtype(payload.dtype, np.floating)):
        got = f"dtype {payload.dtype}" if isinstance(payload, np.ndarray) else f"a {type(payload).__name__}"
        raise ConfigError(f"{where} a MessageBatch whose payload is {got}, expected a float32 numpy array [M, P]",
                          file=file, key=key)
    return value


def check_aux_loss(value: Any, hook: Any, *, key: str, file: str | None = None
                   ) -> tuple["torch.Tensor", dict[str, float]]:
    """What ``AuxiliaryLoss.loss`` returned: ``(loss, stats)`` with ``loss`` a 0-dim float tensor.

    Raises:
        ConfigError: ``key``; not a pair, a loss that is not a tensor, not floating or not 0-dim (e.g. a per-sample
            vector ``[B]``: average it over ``mb.alive``), naming the hook's class and the shape received.
    """
    import torch

    where = f"{hook_name(hook)}.loss returned"
    if not (isinstance(value, tuple) and len(value) == 2):
        got = (f"a tuple of {len(value)}" if isinstance(value, tuple) else f"a tensor of shape {tuple(value.shape)}"
               if isinstance(value, torch.Tensor) else f"a {type(value).__name__}")
        raise ConfigError(f"{where} {got}, expected a pair (loss, stats): a 0-dim float tensor and a dict",
                          file=file, key=key)
    loss, stats = value
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or not loss.is_floating_point():
        got = (f"a tensor of shape {tuple(loss.shape)} and dtype {loss.dtype}" if isinstance(loss, torch.Tensor)
               else f"a {type(loss).__name__}")
        raise ConfigError(f"{where} a loss that is {got}, expected a 0-dim float tensor (shape (); a per-sample loss "
                          f"must be averaged over mb.alive)", file=file, key=key)
    return loss, check_stats(stats, hook, "loss", key=key, file=file)


def check_stats(value: Any, hook: Any, method: str, *, key: str, file: str | None = None) -> dict[str, float]:
    """Statistics a hook's ``method`` (``update``, ``loss``) returned: a dict ``{name: number}`` (a Python or numpy
    number or a one-element tensor), as floats; None is ``{}``. A nan or inf is kept (the trainer logs it and warns
    once per statistic).

    Raises:
        ConfigError: ``key``; not a dict, or a value that is not a number (a string such as ``"1.5"`` included),
            naming the hook's class.
    """
    if value is None:
        return {}
    where = f"{hook_name(hook)}.{method} returned"
    if not isinstance(value, dict):
        raise ConfigError(f"{where} a {type(value).__name__} as its statistics, expected a dict {{name: number}} "
                          f"({{}} or None for none)", file=file, key=key)
    out = {}
    for k, v in value.items():
        if isinstance(v, (str, bytes)):  # float("1.5") would read it: a statistic is a number
            raise ConfigError(f"{where} statistic {k!r} = {v!r:.60}, a string, expected a number", file=file, key=key)
        try:
            out[str(k)] = float(v)
        except (TypeError, ValueError, RuntimeError):
            raise ConfigError(f"{where} statistic {k!r} = {_shape(v) if hasattr(v, 'shape') else repr(v)[:60]}, "
                              f"expected a number", file=file, key=key) from None
    return out
