"""PPO for teams (IPPO / MAPPO) on the batched scenario core: one loop, read top to bottom.

``PPOTrainer.train_iteration`` is the whole algorithm, in CleanRL ``ppo.py`` order:

1. rollout ``T`` vector steps in ``E`` envs (actions sampled from masked logits; messages through the
   channel [HOOK comm]; finished envs reset with ``core.reset(env_ids=...)``);
2. intrinsic reward added to the extrinsic reward [HOOK intrinsic], then GAE (Schulman et al. 2016) with
   de-normalised values, done flags per agent slot;
3. ``epochs`` x ``minibatches`` of the clipped objective + value loss + entropy bonus + auxiliary
   losses [HOOK aux] (minibatches over agent-steps, or over whole (env, agent) sequences with a GRU);
4. statistics.

Dead or finished slots (``core.alive`` False) are masked out of every loss, bonus and statistic. Their
episode ends when they die, unless ``death_masking`` (team rewards): then a dead slot keeps the team reward
and its teammates' mean value until the env's episode ends (:func:`death_mask_values`).

What the hooks return is checked (:func:`coopsim.platform.hooks.check_bonus` and its siblings: a ConfigError naming
the hook's key). A nan or inf -- in the intrinsic bonus (checked once per iteration), an auxiliary loss, the PPO loss
or its gradient norm (one scalar each per minibatch) -- raises :class:`~coopsim.errors.TrainingDiverged` naming the
hook's key (or "the PPO loss") and the iteration, before the optimizer step: the weights stay finite, and
:func:`coopsim.platform.trainer.fit` writes no policy file (the run's last checkpoint is the last finite state).
"""
from __future__ import annotations

import math
import pickle
import time
import types
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from coopsim.errors import ConfigError, TrainingDiverged
from coopsim.platform.comm import MessageBatch
from coopsim.platform.hooks import (AuxiliaryLoss, IntrinsicReward, Minibatch, RolloutBatch, check_aux_loss, check_bonus,
                                    check_stats, hook_name, load_hook, non_finite_count)
from coopsim.platform.trainer import annealed_lr, entropy_coef  # noqa: F401 (entropy_coef: also this module's API)

from .agent import COMM_KEY, PPOAgent, sample_categorical, sticky_logp, sticky_sample
from .config import PPOTrainConfig, sticky_eps
from .networks import flatten_obs


def gae(rewards: torch.Tensor, values: torch.Tensor, last_values: torch.Tensor, dones: torch.Tensor,
        gamma: float, lam: float) -> torch.Tensor:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) per agent slot.

    Args:
        rewards: float32 ``[T, ...]`` reward of step t.
        values: float32 ``[T, ...]`` V(s_t) (environment units, not normalised).
        last_values: float32 ``[...]`` V(s_T) after the rollout.
        dones: bool ``[T, ...]`` the slot's episode ended with step t (no bootstrap across it).
        gamma, lam: discount and GAE lambda.

    Returns:
        float32 ``[T, ...]`` advantages; returns are ``advantages + values``.
    """
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(last_values)
    for t in reversed(range(T)):
        next_v = last_values if t == T - 1 else values[t + 1]
        notdone = (~dones[t]).float()
        delta = rewards[t] + gamma * next_v * notdone - values[t]
        last = delta + gamma * lam * notdone * last
        adv[t] = last
    return adv


def value_loss(v: torch.Tensor, target: torch.Tensor, kind: str = "mse", delta: float = 10.0) -> torch.Tensor:
    """Per-sample value loss: ``0.5 * e^2`` ('mse') or Huber ('huber': ``0.5 * e^2`` for ``|e| <= delta``, else
    ``delta * (|e| - 0.5 * delta)``), with ``e = v - target``. Huber's gradient is clipped at ``delta``, which
    keeps rare large targets from dominating the critic (MAPPO, Yu et al. 2022, uses delta 10)."""
    if kind == "mse":
        return 0.5 * (v - target) ** 2
    return torch.nn.functional.huber_loss(v, target, reduction="none", delta=delta)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """Fraction of the variance of the value targets the critic's predictions explain, over the masked samples:
    ``1 - Var(returns - values) / Var(returns)`` (1 perfect, 0 no better than the targets' mean, negative worse;
    nan with fewer than two samples or targets of zero variance), as Stable-Baselines3 and CleanRL log it.

    Args:
        values: float ``[...]`` the critic's predictions made during the rollout (the targets' units).
        returns: float ``[...]`` the value targets (GAE returns), same shape.
        mask: bool ``[...]`` samples that count (alive agent-steps).
    """
    y, v = returns[mask].double(), values[mask].double()
    if y.numel() < 2:
        return float("nan")
    var = y.var(unbiased=False)
    return float("nan") if var <= 0 else float(1.0 - (y - v).var(unbiased=False) / var)


def death_mask_values(values: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
    """Values of dead slots replaced by the mean value of their env's living slots (death masking).

    With a team reward every living agent's critic estimates the same team return, so a dead agent's
    value is its teammates' mean; GAE then runs through the agent's death to the end of the episode and
    an agent is not credited for staying alive (MAPPO's death masking, Yu et al. 2022, sec. 5 and
    appendix; here the dead agent's value is the team's instead of a learned zero-state value).

    Args:
        values: float32 ``[..., N]`` values of every agent slot (environment units).
        alive: bool ``[..., N]`` the slot's unit is alive.

    Returns:
        float32 ``[..., N]``: ``values`` where alive, else the mean of ``values`` over the living slots
        of the same env (0 if none is alive).
    """
    a = alive.to(values.dtype)
    team = (values * a).sum(-1, keepdim=True) / a.sum(-1, keepdim=True).clamp(min=1.0)
    return torch.where(alive, values, team.expand_as(values))


#: fewest samples a minibatch may hold: with 1, per-minibatch advantage normalisation makes every advantage 0
MIN_MINIBATCH_SAMPLES = 2


def check_minibatches(cfg: PPOTrainConfig, num_envs: int, num_agents: int, recurrent: bool, *,
                      file: str | None = None) -> None:
    """Refuse a ``train.minibatches`` that leaves fewer than :data:`MIN_MINIBATCH_SAMPLES` samples per minibatch.

    A rollout holds ``num_envs x rollout_steps x num_agents`` agent-steps (feed-forward policy) or
    ``num_envs x num_agents`` whole sequences (recurrent policy); the minibatches split them.

    Raises:
        ConfigError: key ``train.minibatches``, with the valid range.
    """
    from coopsim.errors import ConfigError

    if recurrent:
        samples, what = num_envs * num_agents, f"num_envs {num_envs} x {num_agents} agents sequences (recurrent policy)"
    else:
        samples = num_envs * cfg.rollout_steps * num_agents
        what = f"num_envs {num_envs} x rollout_steps {cfg.rollout_steps} x {num_agents} agents agent-steps"
    most = max(1, samples // MIN_MINIBATCH_SAMPLES)
    if cfg.minibatches > most:
        raise ConfigError(f"invalid value {cfg.minibatches}: a rollout holds {samples} samples ({what}), so a minibatch "
                          f"would hold {samples / cfg.minibatches:.2g} (at least {MIN_MINIBATCH_SAMPLES} are needed: "
                          f"advantages are normalised per minibatch); valid: 1..{most}", file=file,
                          key="train.minibatches", value=cfg.minibatches)


def _linear_in(module: torch.nn.Module) -> int:
    """Input width of the first ``nn.Linear`` in ``module`` (0 without one)."""
    return next((int(m.in_features) for m in module.modules() if isinstance(m, torch.nn.Linear)), 0)


def rollout_bytes_per_agent_step(obs_dim: int, actor_in: int, critic_in: int, num_actions: int) -> int:
    """Bytes one agent-step takes in a rollout of :meth:`PPOTrainer.train_iteration` at its peak: obs and next obs,
    the actor and critic inputs (as steps and stacked), float32 each; the action mask; action (int64), log-prob,
    value, reward, advantage, return, target and the agent index; alive and done flags."""
    return 4 * (2 * obs_dim + 2 * actor_in + 2 * critic_in) + num_actions + 8 + 4 * 7 + 8 + 2


def check_rollout_memory(num_envs: int, rollout_steps: int, num_agents: int, per_agent_step: int, *,
                         file: str | None = None) -> None:
    """Refuse, before allocating, rollout buffers (``num_envs x rollout_steps x num_agents`` agent-steps of
    ``per_agent_step`` bytes) larger than half the available memory (:func:`coopsim.platform.memory.over_limit`;
    below 256 MiB nothing is refused).

    Raises:
        ConfigError: key ``train.num_envs`` (the message names ``train.rollout_steps`` too): the bytes needed, the
            limit, and the largest num_envs (at this rollout_steps) and rollout_steps (at this num_envs) that fit
            (only values >= 1; when neither does, the largest product of the two that fits, if any).
    """
    from coopsim.errors import ConfigError
    from coopsim.platform.memory import MEMORY_FRACTION, gib, over_limit

    step = num_agents * per_agent_step
    need = num_envs * rollout_steps * step
    over = over_limit(need)
    if over is None:
        return
    limit, avail = over
    fit_e, fit_t = limit // max(rollout_steps * step, 1), limit // max(num_envs * step, 1)
    # both are >= 1 (train schema): an alternative below 1 is left out
    fits = [f"train.num_envs <= {fit_e} at rollout_steps {rollout_steps}"] if fit_e >= 1 else []
    fits += [f"train.rollout_steps <= {fit_t} at num_envs {num_envs}"] if fit_t >= 1 else []
    if fits:
        fit = "what fits: " + ", or ".join(fits)
    elif limit // max(step, 1) >= 1:
        fit = f"what fits: lower both, to num_envs x rollout_steps <= {limit // max(step, 1)}"
    else:
        fit = f"nothing fits at any num_envs or rollout_steps: one step of one env needs {gib(step)}"
    raise ConfigError(
        f"invalid value {num_envs} (with train.rollout_steps {rollout_steps}): the rollout buffers need {gib(need)} "
        f"({num_envs} envs x {rollout_steps} steps x {num_agents} agents x {per_agent_step} bytes), more than "
        f"{MEMORY_FRACTION:.0%} of the available memory ({gib(limit)} of {gib(avail)}); {fit}",
        file=file, key="train.num_envs", value=num_envs)


#: what the trainer saves of a hook besides its own ``state_dict``: optimizers and learning-rate schedulers
HOOK_OPTIM_TYPES = (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler)
#: how deep :func:`hook_optimizers` saves them: 1 a hook's attribute, 2 one level below (an item of a list, tuple or
#: dict attribute, or an attribute of an ``nn.Module`` or plain object attribute); one level further down they are
#: only looked for, to be named in a warning (:func:`hook_optimizer_states`)
HOOK_OPTIM_DEPTH = 2
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
_NOT_WALKED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, torch.Tensor,
               np.ndarray, np.random.Generator, torch.Generator, str, bytes) + HOOK_OPTIM_TYPES
_MAX_ITEMS = 256  # a longer list or dict (a replay buffer) is not looked into


def _members(obj: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` of what ``obj`` holds: a list's or tuple's items (by index), a dict's (by key), else its
    attributes (``__dict__`` by name, an ``nn.Module``'s sub-modules included and its internal tables left out)."""
    if isinstance(obj, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(obj)] if len(obj) <= _MAX_ITEMS else []
    if isinstance(obj, dict):
        return [(str(k), v) for k, v in obj.items()] if len(obj) <= _MAX_ITEMS else []
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict):
        return []
    if isinstance(obj, torch.nn.Module):
        attrs = {**{k: v for k, v in attrs.items() if k not in _MODULE_INTERNALS}, **obj._modules}
    return sorted(attrs.items())


def _find_hook_optimizers(hook: Any, depth: int) -> list[tuple[str, Any, int]]:
    """``(path, object, level)`` of every optimizer or LR scheduler (:data:`HOOK_OPTIM_TYPES`) held by ``hook`` down to
    ``depth`` levels (1: its attributes), breadth first; an object held twice is listed once, at its shallowest path
    (``opt``, ``opts.0``, ``inner.opt``, ``scheds.warmup``)."""
    if hook is None:
        return []
    found, seen = [], {id(hook)}
    level = [("", hook)]
    for d in range(1, depth + 1):
        nxt = []
        for prefix, obj in level:
            for name, v in _members(obj):
                if id(v) in seen:
                    continue
                seen.add(id(v))
                if isinstance(v, HOOK_OPTIM_TYPES):
                    found.append((prefix + name, v, d))
                elif not isinstance(v, _NOT_WALKED) and (isinstance(v, (list, tuple, dict))
                                                         or isinstance(getattr(v, "__dict__", None), dict)):
                    nxt.append((f"{prefix}{name}.", v))
        level = nxt
    return found


def hook_optimizers(hook: Any) -> dict[str, Any]:
    """The optimizers (``torch.optim.Optimizer``) and learning-rate schedulers (``torch.optim.lr_scheduler.
    LRScheduler``) of a hook object, by attribute path: its attributes (e.g. ``{"opt": Adam, "sched": StepLR}`` of an
    RND-style intrinsic reward that trains its predictor in ``update``), the items of its list, tuple and dict
    attributes (``"opts.0"``, ``"scheds.warmup"``) and the attributes of its ``nn.Module`` or plain object attributes
    (``"inner.opt"``); ``{}`` for None or a hook without any."""
    return {path: obj for path, obj, _ in _find_hook_optimizers(hook, HOOK_OPTIM_DEPTH)}


def hook_optimizer_states(hook: Any, problems: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """``{path: state_dict()}`` of :func:`hook_optimizers`, for the trainer's checkpoint: a hook's ``state_dict``
    (``nn.Module``'s holds parameters and buffers) need not hold them for an exact resume.

    ``problems`` (a list, if given) receives one line per optimizer or scheduler that is not saved: one held a level
    deeper than :data:`HOOK_OPTIM_DEPTH` (``"a.b.opt"``), or one whose ``state_dict()`` fails or cannot be pickled.
    """
    import pickle

    out = {}
    for path, obj, d in _find_hook_optimizers(hook, HOOK_OPTIM_DEPTH + 1):
        kind = type(obj).__name__
        if d > HOOK_OPTIM_DEPTH:
            if problems is not None:
                problems.append(f"the {kind} at {path} is held too deep to be saved (the trainer saves optimizers and "
                                f"LR schedulers that are attributes of the hook, items of its lists, tuples and dicts, "
                                f"or attributes of its sub-objects)")
            continue
        try:
            state = obj.state_dict()
            if isinstance(obj, torch.optim.lr_scheduler.LRScheduler):
                pickle.dumps(state)  # (an optimizer's state is tensors and numbers; a scheduler's may hold anything)
        except Exception as exc:  # noqa: BLE001 - the hook's object: name it, keep the checkpoint
            if problems is not None:
                problems.append(f"the {kind} at {path} cannot be saved ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''})")
            continue
        out[path] = state
    return out


def load_hook_optimizer_states(hook: Any, states: dict[str, dict[str, Any]] | None) -> None:
    """Restore :func:`hook_optimizer_states` into the hook's optimizers and schedulers of the same paths (after the
    hook's own ``load_state_dict``, which may have restored them already: loading the same state twice is the same)."""
    opts = hook_optimizers(hook)
    for k, s in (states or {}).items():
        if k in opts:
            opts[k].load_state_dict(s)


class PPOTrainer:
    """Trains a :class:`PPOAgent` on its scenario core (``agent.scenario``, ``E = num_envs``).

    Implements :class:`coopsim.platform.trainer.Trainer`. ``env_steps`` counts one step per env per
    vector step (an iteration adds ``E * T``).

    Args:
        agent: the plugin to train (its ``scenario`` is the batched core to train on).
        train: the ``train:`` section.
        seed: run seed (scenario reset seed, minibatch shuffles ``default_rng([seed, 1])``, action sampling).
        channel: a :class:`~coopsim.platform.comm.Channel` (needed iff the agent has a comm module).
        intrinsic: an :class:`IntrinsicReward` (overrides ``train.intrinsic``).
        aux_losses: :class:`AuxiliaryLoss` objects (added to ``train.aux_losses``).
    """

    def __init__(self, agent: PPOAgent, train: PPOTrainConfig, seed: int, *, channel=None,
                 intrinsic: IntrinsicReward | None = None, aux_losses: list[AuxiliaryLoss] | tuple = (),
                 file: str | None = None):
        self.agent, self.cfg, self.seed = agent, train, int(seed)
        self.core = agent.scenario
        self.net, self.vnorm = agent.net, agent.value_norm
        check_minibatches(train, self.core.num_envs, self.core.num_agents, self.net.recurrent, file=file)
        check_rollout_memory(self.core.num_envs, train.rollout_steps, self.core.num_agents,
                             rollout_bytes_per_agent_step(agent.obs_dim, _linear_in(self.net.encoder),
                                                          _linear_in(self.net.critic), agent.num_actions), file=file)
        ctx = agent._context(self.net.feature_dim, seed=self.seed)
        self.file = file
        self.intrinsic = intrinsic if intrinsic is not None else load_hook(train.intrinsic, key="train.intrinsic",
                                                                           file=file, kind=IntrinsicReward)
        self.aux = [load_hook(s, key=f"train.aux_losses.{i}", file=file, kind=AuxiliaryLoss)
                    for i, s in enumerate(train.aux_losses)]
        self.aux += list(aux_losses)
        keys = ["train.intrinsic"] if self.intrinsic is not None else []
        keys += [f"train.aux_losses.{i}" for i in range(len(train.aux_losses))] + ["aux_losses"] * len(aux_losses)
        if agent.comm is not None and isinstance(agent.comm, AuxiliaryLoss) and agent.comm not in self.aux:
            self.aux.append(agent.comm)
            keys.append("agents.params.comm")
        self.aux_keys = keys[1:] if self.intrinsic is not None else list(keys)  # each aux hook's config key
        for h, key in zip(([self.intrinsic] if self.intrinsic is not None else []) + self.aux, keys):
            try:
                h.setup(ctx)
            except (TypeError, ValueError) as exc:  # the hook refuses this scenario / network: name its config key
                raise ConfigError(f"{type(h).__name__} cannot be set up for this scenario: {exc}", file=file,
                                  key=f"{key}.params", value=None) from None
        params = list(self.net.parameters())
        # a comm module with update() trains itself ([HOOK comm] self-training): its parameters stay out of PPO's optimizer
        self.comm_self_trained = agent.comm is not None and callable(getattr(agent.comm, "update", None))
        for m in self.aux + ([agent.comm] if agent.comm is not None and not self.comm_self_trained else []):
            if isinstance(m, torch.nn.Module):
                params += [p for p in m.parameters() if all(p is not q for q in params)]
        self.optimizer = torch.optim.Adam(params, lr=train.lr, eps=train.adam_eps)
        self.channel = channel
        if agent.comm is not None and channel is None:
            raise ValueError("the agent has a comm module; give the trainer a channel (e.g. IdealChannel())")
        self._stat_owner: dict[str, str] = {}  # hook statistic (metrics name) -> "key (pkg:Class.method)"
        self._warned_stats: set[str] = set()
        self._warned_unsaved = False  # hook optimizers that cannot be saved: named at the first checkpoint
        self.rng = np.random.default_rng([self.seed, 1])
        self.gen = torch.Generator().manual_seed(self.seed)
        self.env_steps = 0
        self.iteration = 0
        self.ent_coef = entropy_coef(train, 0)
        # rollout carry-over between iterations
        E, N = self.core.num_envs, self.core.num_agents
        self.obs = flatten_obs(self.core.reset(seed=self.seed), agent.obs_space)
        self.h = torch.zeros(E, N, self.net.feature_dim)
        self.starts = np.ones(E, dtype=bool)
        self.hist: np.ndarray | None = None  # [E, N, k, D] observation history (stack_frames k > 1)
        self.t = 0
        self.episode_t0 = np.zeros(E, dtype=np.int64)
        self.inbox_in = agent.receive(None, E)
        self.ep_return = np.zeros(E, dtype=np.float64)
        self._team_scenario = bool(getattr(self.core, "team_reward", False))
        self.ep_len = np.zeros(E, dtype=np.int64)
        self.prev_a = torch.full((E, N), -1, dtype=torch.long)  # each slot's previous action in its episode (-1: none)
        if self.channel is not None:
            self.channel.reset(self.seed, num_envs=E, num_agents=N, dt_s=float(self.core.dt_s), scenario=self.core)

    # ------------------------------------------------------------------------------------------
    def train_iteration(self) -> dict[str, float]:
        cfg, core, net, agent = self.cfg, self.core, self.net, self.agent
        T, E, N, A = cfg.rollout_steps, core.num_envs, core.num_agents, agent.num_actions
        if cfg.anneal_lr:
            for g in self.optimizer.param_groups:
                g["lr"] = annealed_lr(cfg, self.env_steps)
        self.ent_coef = entropy_coef(cfg, self.env_steps)
        eps = sticky_eps(cfg, self.env_steps)  # sticky-action mixture weight of this rollout
        prev_b = torch.full((T, E, N), -1, dtype=torch.long)
        seps_b = torch.zeros(T, E, N)  # the eps each sample's behaviour policy used (0: plain pi)
        x_b, c_b = [], []
        obs_b = np.zeros((T, E, N, agent.obs_dim), np.float32)
        next_obs_b = np.zeros_like(obs_b)
        mask_b = np.zeros((T, E, N, A), bool)
        act_b = torch.zeros(T, E, N, dtype=torch.long)
        logp_b = torch.zeros(T, E, N)
        val_b = torch.zeros(T, E, N)
        rew_b = np.zeros((T, E, N), np.float32)
        alive_b = np.zeros((T, E, N), bool)
        done_b = np.zeros((T, E, N), bool)
        env_done_b = np.zeros((T, E), bool)
        starts_b = np.zeros((T, E), bool)
        h0 = self.h.clone()
        episodes: list[dict[str, float]] = []
        ext_sum = 0.0  # sum of the scenario's rewards over alive agent-steps (reward/extrinsic: no bootstrapped values)

        # 1. rollout ------------------------------------------------------------------------------
        t_rollout = time.perf_counter()
        for t in range(T):
            alive = np.asarray(core.alive).copy()
            masks = np.asarray(core.action_masks())
            if agent.frames > 1:  # frame history, restarted in envs whose episode starts now
                self.hist = agent.push_frame(self.hist, self.obs, self.starts)
            x = agent.actor_input(self.hist if agent.frames > 1 else self.obs, self.inbox_in)
            c = agent.critic_input(self.obs, core.state() if agent.state_dim else None)
            with torch.no_grad():
                h_in = (self.h * torch.as_tensor(~self.starts).float()[:, None, None]).reshape(E * N, -1)
                feat, h = net.features(x.reshape(E * N, -1), h_in if net.recurrent else None)
                logits = net.logits(feat, torch.as_tensor(masks).reshape(E * N, A))
                if eps > 0:  # behaviour (1 - eps) * pi + eps * [a == previous action]; its log-prob is stored
                    prev = self.prev_a.reshape(E * N)
                    a, seps = sticky_sample(logits, torch.as_tensor(masks).reshape(E * N, A), prev, eps, self.gen)
                    seps = seps * torch.as_tensor(alive).reshape(E * N)
                    logp = sticky_logp(F.log_softmax(logits, -1), a, prev, seps)
                    prev_b[t], seps_b[t] = self.prev_a, seps.reshape(E, N)
                else:
                    a = sample_categorical(logits, self.gen)
                    logp = F.log_softmax(logits, -1).gather(-1, a[:, None])[:, 0]
                v = net.value(c.reshape(E * N, -1))
            if h is not None:
                self.h = h.reshape(E, N, -1)
            actions = a.reshape(E, N).numpy().astype(np.int64)
            actions[~alive] = core.noop_action
            x_b.append(x), c_b.append(c)
            obs_b[t], mask_b[t], alive_b[t], starts_b[t] = self.obs, masks, alive, self.starts
            act_b[t], logp_b[t], val_b[t] = torch.as_tensor(actions), logp.reshape(E, N), v.reshape(E, N)
            if agent.comm is not None:  # [HOOK comm] messages of step t leave now, arrive at t + 1
                self.channel.send(self.t, agent.messages(feat.reshape(E, N, -1), alive, self.t, self.obs))

            if cfg.sticky_eps > 0:  # only the sticky mixture reads it: no copy per step otherwise
                self.prev_a = torch.tensor(actions)
            res = core.step(actions)
            next_obs = flatten_obs(res.obs, agent.obs_space)
            reward = np.where(alive, res.reward, 0.0).astype(np.float32)
            ext_sum += float(reward[alive].sum(dtype=np.float64))  # the scenario's own rewards, before any bootstrap
            done = np.asarray(res.terminated) | np.asarray(res.truncated)
            # episode/return as the runner's episode_return: a team-reward scenario's shared reward once per step
            # (the mean over living slots), else the sum over agents
            self.ep_return += reward.sum(axis=1) / (np.maximum(alive.sum(axis=1), 1) if self._team_scenario else 1)
            self.ep_len += 1
            if cfg.bootstrap_truncated:  # time limit is not a terminal state: bootstrap from V(final obs)
                cut = alive & np.asarray(res.truncated) & ~np.asarray(res.terminated)
                if cut.any():
                    with torch.no_grad():
                        cf = agent.critic_input(next_obs, core.state() if agent.state_dim else None)
                        vf = self._denorm(net.value(cf.reshape(E * N, -1))).reshape(E, N).numpy()
                    reward = reward + np.where(cut, cfg.gamma * vf, 0.0).astype(np.float32)
            next_obs_b[t], rew_b[t], done_b[t] = next_obs, reward, done | ~alive
            env_done = np.asarray(core.done)
            env_done_b[t] = env_done
            self.starts = env_done.copy()
            self.t += 1
            if env_done.any():
                ids = np.flatnonzero(env_done)
                em = core.episode_metrics()
                for e in ids:
                    episodes.append({"episode/return": float(self.ep_return[e]), "episode/length": float(self.ep_len[e]),
                                     **{f"episode/{k}": float(v) for k, v in em[e].items()}})
                self.ep_return[ids], self.ep_len[ids] = 0.0, 0
                self.episode_t0[ids] = self.t
                self.prev_a[ids] = -1
                if agent.comm is not None and callable(getattr(agent.comm, "new_episode", None)):
                    agent.comm.new_episode(ids)  # [HOOK comm] optional: these envs start an episode
                next_obs = flatten_obs(core.reset(env_ids=ids), agent.obs_space)
            self.obs = next_obs
            if agent.comm is not None:
                self.inbox_in = agent.receive(self._fresh(self.channel.deliver(self.t)), E, obs=self.obs, finite=False)
                if not np.isfinite(self.inbox_in).all():  # [HOOK comm] before the policy reads it
                    nan, inf = non_finite_count(self.inbox_in)
                    raise self._diverged(f"{COMM_KEY} ({hook_name(agent.comm)}.receive) returned a non-finite policy "
                                         f"input at {nan + inf} of {self.inbox_in.size} entries ({nan} nan, {inf} inf) "
                                         f"at rollout step {t + 1} of {T}", key=COMM_KEY, in_rollout=True)
                agent.on_feedback(self.channel.feedback(self.t))
        self.env_steps += T * E
        self.iteration += 1
        t_update = time.perf_counter()

        # 2. advantages ---------------------------------------------------------------------------
        alive_t = torch.as_tensor(alive_b)
        rewards = torch.as_tensor(rew_b)
        n_alive = int(alive_t.sum())
        extrinsic_mean = ext_sum / n_alive if n_alive else 0.0
        batch = RolloutBatch(obs=torch.as_tensor(obs_b), next_obs=torch.as_tensor(next_obs_b), actions=act_b,
                             rewards=rewards, alive=alive_t, dones=torch.as_tensor(done_b))
        stats: dict[str, float] = {}
        if self.comm_self_trained:  # [HOOK comm] self-training
            comm_stats = check_stats(agent.comm.update(batch), agent.comm, "update", key="agents.params.comm",
                                     file=self.file)
            stats.update({f"comm/{k}": v for k, v in comm_stats.items()})
            self._stat_owner.update({f"comm/{k}": f"{COMM_KEY} ({hook_name(agent.comm)}.update)" for k in comm_stats})
        if self.intrinsic is not None:  # [HOOK intrinsic] bonus joins the reward before GAE
            bonus = check_bonus(self.intrinsic.reward(batch), self.intrinsic, key="train.intrinsic", shape=(T, E, N),
                                file=self.file)
            bonus = torch.where(alive_t, bonus, torch.zeros(()))  # (not bonus * alive: a nan of a dead slot stays out)
            rewards = rewards + bonus
            if not bool(torch.isfinite(rewards).all()):  # one check per iteration
                self._diverged_bonus(bonus, batch.rewards, alive_t, scenario_finite=math.isfinite(ext_sum))
            stats["reward/intrinsic"] = float(bonus[alive_t].mean()) if alive_t.any() else 0.0
            istats = check_stats(self.intrinsic.update(batch), self.intrinsic, "update", key="train.intrinsic",
                                 file=self.file)
            stats.update({f"intrinsic/{k}": v for k, v in istats.items()})
            self._stat_owner.update({f"intrinsic/{k}": f"train.intrinsic ({hook_name(self.intrinsic)}.update)"
                                     for k in istats})
        if cfg.team_reward:
            team = (rewards * alive_t).sum(-1, keepdim=True) / alive_t.sum(-1, keepdim=True).clamp(min=1)
            rewards = team.expand_as(rewards) * (alive_t | cfg.death_masking)
        with torch.no_grad():
            c_last = agent.critic_input(self.obs, core.state() if agent.state_dim else None)
            last_v = self._denorm(net.value(c_last.reshape(E * N, -1))).reshape(E, N)
        values = self._denorm(val_b)
        dones = torch.as_tensor(done_b)
        if cfg.death_masking:  # a dead slot keeps the team's reward and value until its env's episode ends
            values = death_mask_values(values, alive_t)
            last_v = death_mask_values(last_v, torch.as_tensor(np.asarray(core.alive)))
            dones = torch.as_tensor(env_done_b)[:, :, None].expand(T, E, N)
        adv = gae(rewards, values, last_v, dones, cfg.gamma, cfg.gae_lambda)
        returns = adv + values
        if cfg.value_norm:
            self.vnorm.update(returns[alive_t])
            targets = self.vnorm.normalize(returns)
        else:
            targets = returns

        # 3. update -------------------------------------------------------------------------------
        X, C = torch.stack(x_b), torch.stack(c_b)  # [T, E, N, in], [T, E, N, cin]
        flat = dict(x=X, c=C, obs=batch.obs, next_obs=batch.next_obs, mask=torch.as_tensor(mask_b), act=act_b,
                    logp=logp_b, adv=adv, ret=targets, alive=alive_t,
                    agent=torch.arange(N).expand(T, E, N).contiguous())
        if eps > 0:  # the ratio's log-prob is the behaviour mixture's, as in the rollout (plain pi once eps is 0)
            flat.update(prev=prev_b, seps=seps_b)
        if cfg.sticky_eps > 0:
            stats["sticky/eps"] = eps
            stats["sticky/repeat_frac"] = float(((act_b == prev_b) & (seps_b > 0))[alive_t].float().mean()) if alive_t.any() else 0.0
        starts_seq = torch.as_tensor(starts_b)[:, :, None].expand(T, E, N).reshape(T, E * N)
        acc: dict[str, list[float]] = {}
        for _ in range(cfg.epochs):
            if net.recurrent:  # minibatches of whole (env, agent) sequences, GRU re-run from h0
                order = self.rng.permutation(E * N)
                chunks = np.array_split(order, cfg.minibatches)
            else:  # minibatches of alive agent-steps
                order = self.rng.permutation(np.flatnonzero(alive_b.reshape(-1)))
                chunks = np.array_split(order, cfg.minibatches)
            for idx in chunks:
                if len(idx) == 0:
                    continue
                idx_t = torch.as_tensor(idx)
                if net.recurrent:
                    mb = {k: v.reshape(T, E * N, *v.shape[3:]).index_select(1, idx_t).reshape(T * len(idx), *v.shape[3:])
                          for k, v in flat.items()}
                    feat = net.features_seq(flat["x"].reshape(T, E * N, -1).index_select(1, idx_t),
                                            h0.reshape(E * N, -1).index_select(0, idx_t),
                                            starts_seq.index_select(1, idx_t)).reshape(T * len(idx), -1)
                else:
                    mb = {k: v.reshape(T * E * N, *v.shape[3:]).index_select(0, idx_t) for k, v in flat.items()}
                    feat = net.features(mb["x"], None)[0]
                self._update_minibatch(mb, feat, acc)

        # 4. statistics ---------------------------------------------------------------------------
        stats["time/rollout_s"] = t_update - t_rollout
        stats["time/update_s"] = time.perf_counter() - t_update
        stats.update({k: float(np.mean(v)) for k, v in acc.items()})
        stats["reward/extrinsic"] = extrinsic_mean
        stats["loss/explained_variance"] = explained_variance(values, returns, alive_t)
        stats["lr"] = float(self.optimizer.param_groups[0]["lr"])
        stats["ent_coef"] = self.ent_coef
        stats["episodes"] = float(len(episodes))
        keys = sorted({k for ep in episodes for k in ep})
        for k in keys:  # a nan (episode/soc_over_lb of an unsolved MG-MAPF episode) is a missing value
            vals = [ep[k] for ep in episodes if k in ep and np.isfinite(ep[k])]
            if vals:
                stats[k] = float(np.mean(vals))
        self._warn_non_finite_stats(stats)
        return stats

    def _warn_non_finite_stats(self, stats: dict[str, float]) -> None:
        """One warning line (stderr) per hook statistic the first time it is nan or inf; it is logged as it is."""
        import sys

        for k, v in stats.items():
            if k in self._stat_owner and not math.isfinite(v) and k not in self._warned_stats:
                self._warned_stats.add(k)
                print(f"warning: {self._stat_owner[k]} returned the statistic {k.split('/', 1)[1]!r} = {v} in "
                      f"iteration {self.iteration}; it is logged as {k} = {v} (said once per statistic)",
                      file=sys.stderr)

    def _update_minibatch(self, mb: dict[str, torch.Tensor], feat: torch.Tensor, acc: dict[str, list[float]]) -> None:
        cfg, net = self.cfg, self.net
        w = mb["alive"].float()
        n = w.sum().clamp(min=1.0)
        logits = net.logits(feat, mb["mask"])
        logp_all = F.log_softmax(logits, -1)
        if "seps" in mb:  # sticky-action exploration: log((1 - eps) * pi + eps * [a == prev])
            newlogp = sticky_logp(logp_all, mb["act"], mb["prev"], mb["seps"])
        else:
            newlogp = logp_all.gather(-1, mb["act"][:, None])[:, 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        logratio = newlogp - mb["logp"]
        ratio = logratio.exp()
        adv = mb["adv"]
        if cfg.norm_adv:
            m = (adv * w).sum() / n
            s = torch.sqrt((((adv - m) ** 2) * w).sum() / n)
            adv = (adv - m) / (s + 1e-8)
        pg = (torch.max(-adv * ratio, -adv * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)) * w).sum() / n
        v = net.value(mb["c"])
        v_loss = (value_loss(v, mb["ret"], cfg.value_loss, cfg.huber_delta) * w).sum() / n
        ent = (entropy * w).sum() / n
        loss = pg - self.ent_coef * ent + cfg.vf_coef * v_loss
        if self.aux:  # [HOOK aux] extra losses on the policy's features
            amb = Minibatch(obs=mb["obs"], next_obs=mb["next_obs"], actions=mb["act"], agent=mb["agent"],
                            alive=mb["alive"], advantages=mb["adv"], returns=mb["ret"])
            for i, h in enumerate(self.aux):
                aloss, astats = check_aux_loss(h.loss(amb, feat), h, key=self.aux_keys[i], file=self.file)
                aval = float(aloss.detach())
                if not math.isfinite(aval):
                    raise self._diverged(f"{self.aux_keys[i]} ({hook_name(h)}.loss) returned a non-finite loss ({aval})",
                                         key=self.aux_keys[i])
                loss = loss + h.coef * aloss
                name = type(h).__name__
                acc.setdefault(f"aux/{name}", []).append(aval)
                for k, val in astats.items():
                    acc.setdefault(f"aux/{name}/{k}", []).append(val)
                    self._stat_owner[f"aux/{name}/{k}"] = f"{self.aux_keys[i]} ({hook_name(h)}.loss)"
        if not bool(torch.isfinite(loss)):
            parts = ", ".join(f"{k} {float(v.detach()):.4g}" for k, v in (("policy", pg), ("value", v_loss), ("entropy", ent)))
            raise self._diverged(f"the PPO loss is not finite ({parts}{self._hook_note()})")
        self.optimizer.zero_grad()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]],
                                               cfg.max_grad_norm)
        if not bool(torch.isfinite(gnorm)):  # before the step: the weights stay finite
            raise self._diverged(f"the gradient of the PPO loss is not finite (norm {float(gnorm)}){self._hook_note()}")
        self.optimizer.step()
        with torch.no_grad():
            # (r - 1) - log r >= 0 for every r > 0 (Schulman's k3 estimator); clamp the float rounding below 0
            kl = ((((ratio - 1) - logratio) * w).sum() / n).clamp_min(0.0)
            clipfrac = ((((ratio - 1).abs() > cfg.clip).float()) * w).sum() / n
        for k, val in (("loss/policy", pg), ("loss/value", v_loss), ("loss/entropy", ent),
                       ("loss/approx_kl", kl), ("loss/clipfrac", clipfrac)):
            acc.setdefault(k, []).append(float(val.detach()))

    def _hook_note(self) -> str:
        """``"; the run's hooks, a likely cause: train.intrinsic (pkg:Class), ..."`` for a non-finite PPO loss of a run
        with hooks: the intrinsic reward, the auxiliary losses and the comm module ("" without any)."""
        hooks = ([("train.intrinsic", self.intrinsic)] if self.intrinsic is not None else []) + list(
            zip(self.aux_keys, self.aux))
        comm = self.agent.comm
        if comm is not None and all(h is not comm for _, h in hooks):  # (a comm module with a loss is an aux hook too)
            hooks.append((COMM_KEY, comm))
        if not hooks:
            return ""
        return "; the run's hooks, a likely cause: " + ", ".join(f"{k} ({hook_name(h)})" for k, h in hooks)

    def _diverged(self, what: str, key: str | None = None, *, in_rollout: bool = False) -> TrainingDiverged:
        """The error for a non-finite value met in the update of the current iteration (``in_rollout``: in the
        rollout of the next one, before ``iteration`` and ``env_steps`` count it)."""
        T, E = self.cfg.rollout_steps, self.core.num_envs
        it, end = (self.iteration + 1, self.env_steps + T * E) if in_rollout else (self.iteration, self.env_steps)
        return TrainingDiverged(f"{what} in iteration {it} (env steps {end - T * E:,} to {end:,}); training stopped "
                                f"before the optimizer step", key=key, iteration=it)

    def _diverged_bonus(self, bonus: torch.Tensor, extrinsic: torch.Tensor, alive: torch.Tensor, *,
                        scenario_finite: bool = True) -> None:
        """Raise :class:`TrainingDiverged` for an iteration whose rewards plus intrinsic bonus (float32 ``[T, E, N]``
        each, ``alive`` bool ``[T, E, N]``) hold a nan or inf: the bonus's, the extrinsic rewards' (the scenario's own
        unless ``scenario_finite``, else the value bootstrapped into them at a truncation) or their sum's."""
        bad = ~torch.isfinite(bonus) & alive
        name = f"train.intrinsic ({hook_name(self.intrinsic)}.reward)"
        if bool(bad.any()):
            nan = int((torch.isnan(bonus) & alive).sum())
            what = (f"{name} returned a non-finite bonus at {int(bad.sum())} of {int(alive.sum())} alive agent-steps "
                    f"({nan} nan, {int(bad.sum()) - nan} inf)")
        elif not scenario_finite:
            raise self._diverged("the scenario's extrinsic rewards are not finite")
        elif not bool(torch.isfinite(extrinsic[alive]).all()):  # gamma * V(final obs) added at a time-limit cut
            raise self._diverged(f"the value bootstrapped at a truncated episode's end (train.bootstrap_truncated: "
                                 f"gamma * V(final obs)) is not finite{self._hook_note()}")
        else:
            big = float(bonus[alive].abs().max()) if bool(alive.any()) else 0.0
            what = f"{name}: the rewards plus its bonus overflow float32 (largest |bonus| {big:.3g})"
        raise self._diverged(what, key="train.intrinsic")

    def _denorm(self, v: torch.Tensor) -> torch.Tensor:
        return self.vnorm.denormalize(v) if self.cfg.value_norm else v

    def _fresh(self, inbox: MessageBatch) -> MessageBatch:
        """Drop copies sent in an env's previous episode (that env was reset since)."""
        if len(inbox) == 0:
            return inbox
        sent_step = np.rint(inbox.t_sent_s / float(self.core.dt_s)).astype(np.int64)
        return inbox.select(sent_step >= self.episode_t0[inbox.env])

    # --- Trainer: state for exact resume and the policy file --------------------------------------
    def state_dict(self) -> dict[str, Any]:
        def hook_state(h):
            return h.state_dict() if h is not None and hasattr(h, "state_dict") else None

        return {
            "policy": self.agent.checkpoint(),
            "optimizer": self.optimizer.state_dict(),
            "intrinsic": hook_state(self.intrinsic),
            "aux": [hook_state(h) for h in self.aux],
            # each hook's own optimizers and LR schedulers (an RND/FIM predictor's Adam): nn.Module.state_dict does
            # not hold them
            "hook_optimizers": self._hook_optimizer_states(),
            "world": pickle.dumps((self.core, self.channel)),  # arrays + numpy generators of every env
            "rng": self.rng.bit_generator.state, "gen": self.gen.get_state(),
            "carry": dict(obs=self.obs, h=self.h, starts=self.starts, hist=self.hist, t=self.t, episode_t0=self.episode_t0,
                          inbox_in=self.inbox_in, ep_return=self.ep_return, ep_len=self.ep_len,
                          prev_a=self.prev_a),
            "env_steps": self.env_steps, "iteration": self.iteration,
            # [HOOK comm] optional: what a comm module keeps between steps beyond its parameters (DDACOM's sender
            # state, held copies, the records of the rollout in progress), for an exact resume
            "comm_runtime": (self.agent.comm.runtime_state() if self.agent.comm is not None
                             and callable(getattr(self.agent.comm, "runtime_state", None)) else None),
            # optional: what the agent itself keeps between steps of the rollout in progress (IMMP's one-step window
            # memory and its high-level planner's plans), for an exact resume
            "agent_runtime": (self.agent.runtime_state() if callable(getattr(self.agent, "runtime_state", None))
                              else None),
        }

    def _hook_optimizer_states(self) -> dict[str, Any]:
        """``{"intrinsic": states, "aux": [states, ...]}`` of :func:`hook_optimizer_states`; the first time, one warning
        line (stderr) per optimizer or scheduler of a hook that is not saved (its resume would not be exact)."""
        problems: list[tuple[str, Any, list[str]]] = []
        out = {"intrinsic": hook_optimizer_states(self.intrinsic, p := []), "aux": []}
        problems.append(("train.intrinsic", self.intrinsic, p))
        for key, h in zip(self.aux_keys, self.aux):
            out["aux"].append(hook_optimizer_states(h, p := []))
            problems.append((key, h, p))
        if not self._warned_unsaved:
            import sys

            self._warned_unsaved = True
            for key, h, lines in problems:
                for line in lines:
                    print(f"warning: {key} ({hook_name(h)}): {line}; a --resume of this checkpoint restarts it (save "
                          f"it in the hook's state_dict() / load_state_dict())", file=sys.stderr)
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pol = state["policy"]
        self.net.load_state_dict(pol["net"])
        self.vnorm.load_state_dict(pol["value_norm"])
        if pol.get("comm") is not None:
            self.agent.comm.load_state_dict(pol["comm"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state["intrinsic"] is not None:
            self.intrinsic.load_state_dict(state["intrinsic"])
        for h, s in zip(self.aux, state["aux"]):
            if s is not None:
                h.load_state_dict(s)
        opts = state.get("hook_optimizers")  # None in a checkpoint written before they were saved
        if opts is not None:
            load_hook_optimizer_states(self.intrinsic, opts["intrinsic"])
            for h, o in zip(self.aux, opts["aux"]):
                load_hook_optimizer_states(h, o)
        self.core, self.channel = pickle.loads(state["world"])
        self.agent.scenario = self.core
        self.rng.bit_generator.state = state["rng"]
        self.gen.set_state(state["gen"])
        for k, v in state["carry"].items():
            setattr(self, k, v)
        self.env_steps, self.iteration = int(state["env_steps"]), int(state["iteration"])
        if state.get("comm_runtime") is not None and callable(getattr(self.agent.comm, "load_runtime_state", None)):
            self.agent.comm.load_runtime_state(state["comm_runtime"])
        if state.get("agent_runtime") is not None and callable(getattr(self.agent, "load_runtime_state", None)):
            self.agent.load_runtime_state(state["agent_runtime"])  # after the world: it binds to the restored core

    def save_policy(self, path) -> None:
        self.agent.save(path)
