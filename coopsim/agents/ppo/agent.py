"""The PPO team plugin (``ppo/mappo-v0``, ``ppo/ippo-v0``): a shared-parameter actor-critic that acts in
the runner loop and is trained by :class:`coopsim.agents.ppo.trainer.PPOTrainer`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import BaseModel, ValidationError

from coopsim.errors import ConfigError
from coopsim.platform.agent import AgentPlugin
from coopsim.platform.comm import MessageBatch
from coopsim.platform.hooks import (CommModule, HookContext, check_messages, check_received, hook_name, load_hook,
                                    non_finite_count)
from coopsim.platform.registry import Variant

from .config import PPOAgentParams, PPOTrainConfig
from .networks import ActorCritic, ASNActorCritic, ValueNorm, flatten_obs, obs_dim

CHECKPOINT_FORMAT = "coopsim.ppo/1"

#: the config key of a PPO agent's comm module (named in what its checks refuse)
COMM_KEY = "agents.params.comm"


class PPOAgent(AgentPlugin):
    """IPPO / MAPPO team policy: one actor shared by all agent slots (agent-id one-hot input), a GRU
    option, action masks from ``scenario.action_masks()``, and a local (IPPO) or centralised (MAPPO,
    on ``scenario.state()``) critic.

    Acting (:meth:`act`): observations ``[E, N, ...]`` (array or dict, flattened in Dict-space order)
    -> int64 actions ``[E, N]``; argmax when ``deterministic`` (default), else sampled from its own
    seeded generator. Slots that are not alive get the scenario's no-op. With a comm module, the
    policy also reads the aggregated inbox and returns outgoing messages.

    Papers: Schulman et al. 2017 (PPO); de Witt et al. 2020 (IPPO); Yu et al. 2022 (MAPPO).

    Raises:
        ConfigError: ``critic: central`` on a scenario without ``state_space``; ``comm`` that is not a
            :class:`~coopsim.platform.hooks.CommModule`; a checkpoint that does not match the architecture or holds
            non-finite weights (in :meth:`load`).
    """

    Params: ClassVar = PPOAgentParams
    TrainConfig: ClassVar = PPOTrainConfig
    requires: ClassVar[tuple[str, ...]] = ("action_masks",)
    #: observations the actor reads (``stack_frames``); a subclass that builds its own input keeps 1
    frames: int = 1

    def __init__(self, scenario, **params: Any):
        super().__init__(scenario, **params)
        p: PPOAgentParams = self.params
        self.obs_space = scenario.observation_space
        self.obs_dim = obs_dim(self.obs_space)
        self.num_agents = scenario.num_agents
        self.num_actions = int(scenario.action_space.n)
        self.state_dim = int(np.prod(scenario.state_space.shape)) if scenario.state_space is not None else 0
        if p.critic == "central" and self.state_dim == 0:
            raise ConfigError("critic 'central' (MAPPO) needs a scenario with a global state (state_space); use ppo/ippo-v0",
                              key="agents.params.critic", value=p.critic)
        # kind: a class of another protocol (e.g. an IntrinsicReward) is refused on the key, as train.intrinsic's is
        self.comm: CommModule | None = load_hook(p.comm, key="agents.params.comm", kind=CommModule)
        self.id_dim = self.num_agents if p.agent_id else 0
        comm_dim = 0
        if self.comm is not None:
            self.comm.setup(self._context(feature_dim=p.hidden[-1]))
            comm_dim = int(self.comm.input_dim)
        self.comm_dim = comm_dim
        self.frames = int(p.stack_frames)
        in_dim = self.obs_dim * self.frames + self.id_dim + comm_dim
        critic_dim = (self.state_dim + (self.obs_dim if p.critic_obs else 0) if p.critic == "central" else self.obs_dim) + self.id_dim
        if p.actor == "asn":
            self.net = self._asn(in_dim, critic_dim)
        else:
            self.net = ActorCritic(in_dim, critic_dim, self.num_actions, list(p.hidden), p.activation, p.recurrent,
                                   critic_hidden=p.critic_hidden)
        self.value_norm = ValueNorm()
        self._eye = torch.eye(self.num_agents)
        self.reset(p.seed)

    def _asn(self, in_dim: int, critic_dim: int) -> ASNActorCritic:
        """The ASN actor-critic for ``actor: asn``.

        Raises:
            ConfigError: key ``agents.params.actor``; the scenario has no ``action_entities()``, or a comm module
                is asked for as well.
        """
        p = self.params
        layout = getattr(self.scenario, "action_entities", None)
        if layout is None:
            sid = self.trained_on().get("id") or type(self.scenario).__name__
            raise ConfigError(f"actor 'asn' needs a scenario whose actions act on observed entities "
                              f"(action_entities(), e.g. smac/*); {sid} has none: use actor: mlp",
                              key="agents.params.actor", value=p.actor)
        if p.comm is not None:
            raise ConfigError("actor 'asn' takes no comm module, but agents.params.comm is set: remove comm, or use "
                              "actor: mlp", key="agents.params.actor", value=p.actor,
                              also=("agents.params.comm",))
        first, n, offset, feats = layout()
        return ASNActorCritic(in_dim, critic_dim, self.num_actions, list(p.hidden), p.activation,
                              first_action=first, n_entities=n, offset=offset, feats=feats,
                              frames=self.frames, frame_dim=self.obs_dim, recurrent=p.recurrent,
                              critic_hidden=p.critic_hidden)

    def _context(self, feature_dim: int, seed: int | None = None) -> HookContext:
        return HookContext(obs_dim=self.obs_dim, feature_dim=feature_dim, num_agents=self.num_agents,
                           num_actions=self.num_actions, state_dim=self.state_dim, num_envs=self.scenario.num_envs,
                           dt_s=float(self.scenario.dt_s), seed=self.params.seed if seed is None else seed,
                           scenario_params=dict(self.trained_on()["params"]))

    # --- inputs -------------------------------------------------------------------------------
    def push_frame(self, hist: np.ndarray | None, obs_flat: np.ndarray, starts: np.ndarray | None) -> np.ndarray:
        """The frame history after observing ``obs_flat`` (``stack_frames`` k, MAPPO's stacked observations).

        Args:
            hist: float32 ``[E, N, k, D]`` the previous history (frame 0 newest), or None before the first step.
            obs_flat: float32 ``[E, N, D]`` this step's observation.
            starts: bool ``[E]`` envs whose episode starts with this observation (None: none).

        Returns:
            float32 ``[E, N, k, D]``: ``obs_flat`` then the ``k - 1`` newest frames of ``hist``; where the history
            is None or the env starts an episode, every frame is ``obs_flat``.
        """
        obs = np.asarray(obs_flat, dtype=np.float32)[:, :, None]
        if hist is None:
            return np.repeat(obs, self.frames, axis=2)
        new = np.concatenate([obs, hist[:, :, :-1]], axis=2)
        if starts is not None and np.any(starts):
            new[starts] = obs[starts]
        return new

    def actor_input(self, obs_flat: np.ndarray, inbox_in: np.ndarray | None) -> torch.Tensor:
        """float32 ``[E, N, k*D + N? + C?]``: the observation (``[E, N, D]``; with ``stack_frames`` k > 1 the
        history ``[E, N, k, D]`` of :meth:`push_frame`, flattened newest first), agent-id one-hot, aggregated inbox."""
        obs_flat = np.asarray(obs_flat).reshape(obs_flat.shape[0], obs_flat.shape[1], -1)
        e = obs_flat.shape[0]
        parts = [torch.as_tensor(obs_flat, dtype=torch.float32)]
        if self.id_dim:
            parts.append(self._eye.expand(e, -1, -1))
        if self.comm_dim:
            parts.append(torch.as_tensor(inbox_in, dtype=torch.float32))
        return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]

    def critic_input(self, obs_flat: np.ndarray, state: np.ndarray | None) -> torch.Tensor:
        """float32 ``[E, N, S + D? + N?]`` (central; ``D`` with ``critic_obs``) or ``[E, N, D + N?]`` (local)."""
        e, n = obs_flat.shape[:2]
        if self.params.critic == "central":
            base = torch.as_tensor(np.asarray(state, dtype=np.float32).reshape(e, -1)).unsqueeze(1).expand(-1, n, -1)
            if self.params.critic_obs:  # agent-specific global state: state() followed by the agent's own observation
                base = torch.cat([base, torch.as_tensor(obs_flat, dtype=torch.float32)], dim=-1)
        else:
            base = torch.as_tensor(obs_flat, dtype=torch.float32)
        if self.id_dim:
            return torch.cat([base, self._eye.expand(e, -1, -1)], dim=-1)
        return base

    def _comm_spec_filled(self, spec: Any) -> Any:
        """A comm spec ``{"module", "params"}`` with the params this agent's comm module would fill in by default (a
        module whose params are a pydantic model ``p``), so that a policy file written before a param existed still
        loads; ``spec`` itself when its params do not validate or the module has no such model (a spec naming another
        module still differs from this agent's by its ``module``)."""
        p = getattr(self.comm, "p", None)
        if not (isinstance(spec, dict) and isinstance(spec.get("params"), dict) and isinstance(p, BaseModel)):
            return spec
        try:
            return {**spec, "params": type(p)(**spec["params"]).model_dump()}
        except ValidationError:
            return spec

    def comm_obs(self, obs_flat: np.ndarray) -> dict[str, np.ndarray]:
        """``{"obs": obs_flat}`` for a comm module with ``reads_obs`` (see :mod:`coopsim.platform.hooks`), else ``{}``."""
        return {"obs": obs_flat} if getattr(self.comm, "reads_obs", False) else {}

    def receive(self, inbox: MessageBatch | None, num_envs: int, obs: np.ndarray | None = None, *,
                finite: bool = True) -> np.ndarray | None:
        """float32 ``[E, N, comm_dim]`` policy input from ``inbox`` (zeros if None); ``obs`` float32 ``[E, N, D]``
        goes to a comm module that reads observations.

        Raises:
            ConfigError: key ``agents.params.comm``: what the module's ``receive`` returned is not a float array of
                shape ``[E, N, input_dim]`` (:func:`~coopsim.platform.hooks.check_received`), or (``finite``; the
                trainer checks that itself, as a divergence) holds a nan or inf.
        """
        if self.comm is None:
            return None
        if inbox is None:
            return np.zeros((num_envs, self.num_agents, self.comm_dim), np.float32)
        kw = self.comm_obs(obs) if obs is not None else {}
        out = check_received(self.comm.receive(inbox, num_envs, self.num_agents, **kw), self.comm, key=COMM_KEY,
                             shape=(num_envs, self.num_agents, self.comm_dim))
        if finite:
            nan, inf = non_finite_count(out)
            if nan or inf:
                raise ConfigError(f"{hook_name(self.comm)}.receive returned a non-finite policy input at {nan + inf} "
                                  f"of {out.size} entries ({nan} nan, {inf} inf)", key=COMM_KEY)
        return out

    def messages(self, features: torch.Tensor, alive: np.ndarray, t: int, obs_flat: np.ndarray) -> MessageBatch | None:
        """The comm module's outgoing messages of step ``t`` (features float32 ``[E, N, F]``), checked
        (:func:`~coopsim.platform.hooks.check_messages`, key ``agents.params.comm``)."""
        return check_messages(self.comm.messages(features, alive, t, float(self.scenario.dt_s), **self.comm_obs(obs_flat)),
                              self.comm, key=COMM_KEY)

    def on_feedback(self, feedback) -> None:
        """Pass the channel's delivery feedback to the comm module (if it has ``on_feedback``)."""
        fn = getattr(self.comm, "on_feedback", None)
        if fn is not None:
            fn(feedback)

    # --- AgentPlugin ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        e = self.scenario.num_envs
        self._h = torch.zeros(e * self.num_agents, self.net.feature_dim)
        self._t = 0
        self._hist: np.ndarray | None = None
        self._gen = torch.Generator().manual_seed(self.params.seed if seed is None else int(seed))
        if self.comm is not None and callable(getattr(self.comm, "new_episode", None)):
            self.comm.new_episode(None)  # [HOOK comm] optional: every env starts an episode

    def masked_logits(self, x: torch.Tensor, h: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """For the actor input ``x [E, N, D]``: policy logits ``[E*N, A]`` with invalid actions masked by the
        scenario's ``action_masks()``, the features ``[E*N, F]`` they came from (a comm module reads them), and
        the new recurrent state (None for a feed-forward net); no gradient."""
        e, n = x.shape[:2]
        masks = torch.as_tensor(self.scenario.action_masks()).reshape(e * n, -1)
        with torch.no_grad():
            feat, h = self.net.features(x.reshape(e * n, -1), h)
            return self.net.logits(feat, masks), feat, h

    def act(self, obs, inbox: MessageBatch | None = None) -> tuple[np.ndarray, MessageBatch | None]:
        flat = flatten_obs(obs, self.obs_space)
        e, n = flat.shape[:2]
        if self.frames > 1:  # the runner calls reset() at each episode start: the history restarts there
            self._hist = self.push_frame(self._hist, flat, None)
        x = self.actor_input(self._hist if self.frames > 1 else flat, self.receive(inbox, e, obs=flat))
        logits, feat, h = self.masked_logits(x, self._h if self.net.recurrent else None)
        with torch.no_grad():
            if self.params.deterministic:
                a = logits.argmax(-1)
            else:
                a = sample_categorical(logits, self._gen)
        if h is not None:
            self._h = h
        actions = a.reshape(e, n).numpy().astype(np.int64)
        alive = np.asarray(self.scenario.alive)
        actions[~alive] = self.scenario.noop_action
        out = None
        if self.comm is not None:
            out = self.messages(feat.reshape(e, n, -1), alive, self._t, flat)
        self._t += 1
        return actions, out

    def checkpoint(self) -> dict[str, Any]:
        return {"format": CHECKPOINT_FORMAT, "params": self.params.model_dump(), "obs_dim": self.obs_dim,
                "num_agents": self.num_agents, "num_actions": self.num_actions, "state_dim": self.state_dim,
                "net": self.net.state_dict(), "value_norm": self.value_norm.state_dict(),
                "comm": self.comm.state_dict() if self.comm is not None and hasattr(self.comm, "state_dict") else None,
                "scenario": self.trained_on()}

    def save(self, path: str | Path) -> None:
        from coopsim.platform.trainer import atomic_save

        atomic_save(self.checkpoint(), path)

    def load(self, path: str | Path) -> None:
        """Read a ``policy.pt`` (or a training ``checkpoint.pt``, or a run dir holding ``policy.pt``).

        Raises:
            ConfigError: the file is not a PPO policy, lacks a key, its architecture/sizes differ from this agent's,
                or a weight holds nan or inf (a diverged training's weights: every action would be the argmax of nan).
        """
        from coopsim.platform.trainer import open_policy

        ck, path = open_policy(path, CHECKPOINT_FORMAT, "PPO", {
            "params": dict, "obs_dim": int, "num_agents": int, "num_actions": int, "state_dim": int, "net": dict,
            "value_norm": dict})
        bad = non_finite_entries({"net": ck["net"], "value_norm": ck["value_norm"], "comm": ck.get("comm")})
        if bad:
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            raise ConfigError(f"the policy's weights hold nan or inf ({', '.join(bad[:3])}{more}): its training "
                              f"diverged; use an earlier checkpoint of the run, or train again", file=str(path))
        mine = self.checkpoint()
        for k in ("obs_dim", "num_agents", "num_actions", "state_dim"):
            if ck[k] != mine[k]:
                from coopsim.platform.trainer import policy_size_mismatch

                raise policy_size_mismatch(k, ck[k], mine[k], ck.get("scenario"), mine["scenario"], file=str(path))
        arch = ("critic", "hidden", "critic_hidden", "activation", "recurrent", "actor", "agent_id", "comm", "critic_obs",
                "stack_frames")
        for k in arch:  # a key missing from an older file takes its default
            theirs_k, mine_k = ck["params"].get(k, PPOAgentParams.model_fields[k].default), mine["params"].get(k)
            if k == "comm":  # a comm param missing from an older file takes the module's default too
                theirs_k, mine_k = self._comm_spec_filled(theirs_k), self._comm_spec_filled(mine_k)
            if theirs_k != mine_k and k == "critic" and {theirs_k, mine_k} <= set(CRITIC_IDS):
                # the critic is fixed by the agent id (ppo/mappo-v0 central, ppo/ippo-v0 local), so no param can
                # change it: the fix is the id the checkpoint was trained with (blamed on agents.id, not its params)
                raise ConfigError(f"checkpoint was trained with critic={theirs_k!r}, i.e. agent {CRITIC_IDS[theirs_k]}; "
                                  f"this agent is {CRITIC_IDS[mine_k]} (critic={mine_k!r}), and each id fixes its critic "
                                  f"(the network's critic input differs): use agents.id={CRITIC_IDS[theirs_k]}, the id "
                                  f"the checkpoint was trained with", file=str(path), key="agents.id",
                                  value=CRITIC_IDS[mine_k])
            if theirs_k != mine_k:
                raise ConfigError(f"checkpoint was trained with {k}={ck['params'].get(k)!r}; the config says "
                                  f"{mine['params'].get(k)!r}", file=str(path), key=f"agents.params.{k}")
        from coopsim.platform.trainer import warn_other_scenario

        warn_other_scenario(path, ck.get("scenario"), mine["scenario"])
        try:
            self.net.load_state_dict(ck["net"])
            self.value_norm.load_state_dict(ck["value_norm"])
            if ck.get("comm") is not None and self.comm is not None:
                self.comm.load_state_dict(ck["comm"])
        except (RuntimeError, KeyError, TypeError) as exc:  # a damaged or hand-edited file
            raise ConfigError(f"the checkpoint's weights do not fit this PPO network ({str(exc).splitlines()[0]})",
                              file=str(path)) from None

    # --- training ---------------------------------------------------------------------------------
    @classmethod
    def make_trainer(cls, agent: "PPOAgent", train: PPOTrainConfig, seed: int, *, channel=None, file: str | None = None):
        """The :class:`~coopsim.platform.trainer.Trainer` for this plugin (hooks built from ``train``)."""
        from .trainer import PPOTrainer

        return PPOTrainer(agent, train, seed, channel=channel, file=file)


def non_finite_entries(state: Any, prefix: str = "") -> list[str]:
    """Dotted names of the floating tensors (or numpy arrays) in a nested dict of weights ``state`` that hold a nan or
    inf, e.g. ``["net.encoder.0.weight"]``; ``[]`` if all are finite (one ``isfinite`` per tensor)."""
    out: list[str] = []
    if isinstance(state, dict):
        for k, v in state.items():
            out += non_finite_entries(v, f"{prefix}{k}.")
    elif isinstance(state, torch.Tensor) and state.is_floating_point():
        if not bool(torch.isfinite(state).all()):
            out.append(prefix[:-1])
    elif isinstance(state, np.ndarray) and np.issubdtype(state.dtype, np.floating):
        if not bool(np.isfinite(state).all()):
            out.append(prefix[:-1])
    return out


def sample_categorical(logits: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Sample ``[B]`` from masked logits ``[B, A]`` with the Gumbel-max trick and generator ``gen``."""
    u = torch.rand(logits.shape, generator=gen).clamp_(1e-20, 1.0)
    return (logits - torch.log(-torch.log(u))).argmax(-1)


def sticky_sample(logits: torch.Tensor, mask: torch.Tensor, prev: torch.Tensor, eps: float, gen: torch.Generator
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``[B]`` from the sticky-action mixture ``(1 - eps) * pi + eps * [a == prev]`` (exploration with runs
    of repeated actions; ``train.sticky_eps``).

    Args:
        logits: masked logits ``[B, A]`` of pi.
        mask: bool ``[B, A]`` available actions (also False for every action but the no-op of a dead slot, so its
            previous action is unavailable).
        prev: int64 ``[B]`` each sample's previous action in its episode, -1 for none.
        eps: mixture weight in [0, 1).
        gen: generator (one Gumbel draw per sample, then, with eps > 0, one uniform per sample).

    Returns:
        actions ``[B]`` and float32 ``[B]`` the eps each sample used (``eps`` where ``prev`` is available, else 0),
        which :func:`sticky_logp` needs.
    """
    a = sample_categorical(logits, gen)
    if eps <= 0:
        return a, torch.zeros(a.shape)
    avail = (prev >= 0) & mask.gather(-1, prev.clamp(min=0)[:, None])[:, 0]
    stick = avail & (torch.rand(a.shape, generator=gen) < eps)
    return torch.where(stick, prev, a), torch.where(avail, torch.full(a.shape, float(eps)), torch.zeros(a.shape))


def sticky_logp(logp_all: torch.Tensor, act: torch.Tensor, prev: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """``log((1 - eps) * pi(act) + eps * [act == prev])`` per sample from pi's log-probabilities ``[B, A]``
    (``eps`` ``[B]`` as :func:`sticky_sample` returned it; where it is 0 this is ``log pi(act)`` exactly)."""
    logp = logp_all.gather(-1, act[:, None])[:, 0]
    same = (act == prev) & (eps > 0)
    stick = torch.where(same, torch.log(eps.clamp(min=1e-30)), torch.full_like(logp, -float("inf")))
    return torch.logaddexp(logp + torch.log1p(-eps), stick)


#: the registered id that fixes each critic (named when a checkpoint's critic differs from the agent's)
CRITIC_IDS = {"central": "ppo/mappo-v0", "local": "ppo/ippo-v0"}

MAPPO = Variant(PPOAgent, defaults={"critic": "central"}, fixed=("critic",))
"""``ppo/mappo-v0``: centralised critic on the global state."""
IPPO = Variant(PPOAgent, defaults={"critic": "local"}, fixed=("critic",))
"""``ppo/ippo-v0``: local critic on each agent's observation."""

