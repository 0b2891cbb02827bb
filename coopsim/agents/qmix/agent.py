"""The QMIX team plugin (``qmix/qmix-v0``): recurrent agent Q-networks acting epsilon-greedily on masked
Q-values, trained by :class:`coopsim.agents.qmix.trainer.QMIXTrainer` with a monotonic mixer."""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from coopsim.errors import ConfigError
from coopsim.platform.agent import AgentPlugin

from .config import QMIXAgentParams, QMIXTrainConfig
from .networks import QMixer, RNNAgent

POLICY_FORMAT = "coopsim.qmix/1"


def flat_obs(obs: Any) -> np.ndarray:
    """float32 ``[E, N, D]`` from a batched observation array ``[E, N, ...]`` or a dict of them (key order)."""
    if isinstance(obs, dict):
        parts = [np.asarray(v, np.float32).reshape(*np.asarray(v).shape[:2], -1) for v in obs.values()]
        return np.concatenate(parts, -1)
    obs = np.asarray(obs, np.float32)
    return obs.reshape(obs.shape[0], obs.shape[1], -1)


class QMIXAgent(AgentPlugin):
    """QMIX (Rashid et al. 2018) for any coopsim scenario with a ``Discrete`` action space and a global
    ``state()``: one GRU Q-network shared by all agent slots (inputs: observation, last action one-hot,
    slot one-hot), greedy or epsilon-greedy over the actions ``scenario.action_masks()`` allows.

    Acting: observations ``[E, N, ...]`` -> int64 actions ``[E, N]``; the GRU state is kept per (env, slot)
    and cleared by :meth:`reset` (all envs) or :meth:`reset_envs`.

    Raises:
        ConfigError: the scenario has no ``state_space`` (QMIX's mixer needs the global state), its action
            space is not discrete, or a policy file does not match (in :meth:`load`).
    """

    Params: ClassVar = QMIXAgentParams
    TrainConfig: ClassVar = QMIXTrainConfig
    requires: ClassVar[tuple[str, ...]] = ("action_masks", "state")

    def __init__(self, scenario, **params: Any):
        super().__init__(scenario, **params)
        p: QMIXAgentParams = self.params
        if scenario.state_space is None:
            raise ConfigError("QMIX needs a scenario with a global state (state_space)", key="agents.id", value="qmix/qmix-v0")
        if not hasattr(scenario.action_space, "n"):
            raise ConfigError("QMIX needs a Discrete action space", key="agents.id", value="qmix/qmix-v0")
        self.n_agents = scenario.num_agents
        self.n_actions = int(scenario.action_space.n)
        self.obs_dim = int(np.prod(scenario.observation_space.shape)) if scenario.observation_space.shape else \
            sum(int(np.prod(s.shape)) for s in scenario.observation_space.spaces.values())
        self.state_dim = int(np.prod(scenario.state_space.shape))
        self.in_dim = self.obs_dim + (self.n_actions if p.obs_last_action else 0) + (self.n_agents if p.obs_agent_id else 0)
        self.net = RNNAgent(self.in_dim, self.n_actions, p.hidden)
        self.mixer = QMixer(self.n_agents, self.state_dim, p.mixing_embed, p.hypernet_embed)
        self.epsilon = p.epsilon
        self.reset(p.seed)

    def inputs(self, obs_flat: np.ndarray | torch.Tensor, last_action: np.ndarray | torch.Tensor) -> torch.Tensor:
        """float32 ``[..., N, in_dim]`` from observations ``[..., N, D]`` and last actions int ``[..., N]``."""
        x = torch.as_tensor(obs_flat, dtype=torch.float32)
        parts = [x]
        if self.params.obs_last_action:
            parts.append(torch.nn.functional.one_hot(torch.as_tensor(last_action, dtype=torch.int64), self.n_actions).float())
        if self.params.obs_agent_id:
            parts.append(torch.eye(self.n_agents).expand(*x.shape[:-1], self.n_agents))
        return torch.cat(parts, -1)

    def reset(self, seed: int | None = None) -> None:
        e = self.scenario.num_envs
        self.h = torch.zeros(e * self.n_agents, self.params.hidden)
        self.last_action = np.zeros((e, self.n_agents), np.int64)
        self.rng = np.random.default_rng(self.params.seed if seed is None else int(seed))

    def reset_envs(self, env_ids: np.ndarray) -> None:
        """Clear the memory of the listed envs (after ``scenario.reset(env_ids=...)``)."""
        h = self.h.view(self.scenario.num_envs, self.n_agents, -1)
        h[torch.as_tensor(np.asarray(env_ids, np.int64))] = 0.0
        self.last_action[np.asarray(env_ids, np.int64)] = 0

    def select(self, q: torch.Tensor, masks: np.ndarray, epsilon: float) -> np.ndarray:
        """Epsilon-greedy over available actions: int64 ``[E, N]`` from Q ``[E, N, A]`` and masks bool ``[E, N, A]``."""
        qm = q.detach().numpy().copy()
        qm[~masks] = -np.inf
        greedy = qm.argmax(-1)
        if epsilon <= 0:
            return greedy.astype(np.int64)
        u = self.rng.random(masks.shape) * masks
        rand = (u + masks * 1e-9).argmax(-1)
        explore = self.rng.random(greedy.shape) < epsilon
        return np.where(explore, rand, greedy).astype(np.int64)

    def act(self, obs, inbox=None):
        e = self.scenario.num_envs
        x = self.inputs(flat_obs(obs), self.last_action)
        with torch.no_grad():
            q, self.h = self.net(x.reshape(e * self.n_agents, -1), self.h)
        a = self.select(q.view(e, self.n_agents, -1), self.scenario.action_masks(), self.epsilon)
        self.last_action = a
        return a, None

    # --- files -----------------------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        return {"format": POLICY_FORMAT, "params": self.params.model_dump(), "in_dim": self.in_dim,
                "n_actions": self.n_actions, "state_dim": self.state_dim,
                "net": self.net.state_dict(), "mixer": self.mixer.state_dict(),
                "scenario": self.trained_on()}

    def save(self, path: str | Path) -> None:
        from coopsim.platform.trainer import atomic_save

        atomic_save(self.checkpoint(), path)

    def load(self, path: str | Path) -> None:
        """Read a ``policy.pt`` written by :meth:`save` (or a training ``checkpoint.pt``, or a run dir).

        Raises:
            ConfigError: not a QMIX policy, a key missing from the file, or its sizes differ from this agent's
                scenario.
        """
        from coopsim.platform.trainer import open_policy

        ck, path = open_policy(path, POLICY_FORMAT, "QMIX", {
            "params": dict, "in_dim": int, "n_actions": int, "state_dim": int, "net": dict, "mixer": dict})
        # the architecture first: obs_last_action / obs_agent_id change in_dim, which is the agent's doing, not the
        # scenario's; a key missing from an older file takes its default
        mine = self.params.model_dump()
        for k in ("hidden", "mixing_embed", "hypernet_embed", "obs_last_action", "obs_agent_id"):
            theirs = (ck.get("params") or {}).get(k, QMIXAgentParams.model_fields[k].default)
            if theirs != mine[k]:
                raise ConfigError(f"checkpoint was trained with {k}={theirs!r}; the config says {mine[k]!r}",
                                  file=str(path), key=f"agents.params.{k}")
        for k in ("in_dim", "n_actions", "state_dim"):
            if ck[k] != getattr(self, k):
                from coopsim.platform.trainer import policy_size_mismatch

                raise policy_size_mismatch(k, ck[k], getattr(self, k), ck.get("scenario"),
                                           self.trained_on(), file=str(path))
        from coopsim.platform.trainer import warn_other_scenario

        warn_other_scenario(path, ck.get("scenario"), self.trained_on())
        try:
            self.net.load_state_dict(ck["net"])
            self.mixer.load_state_dict(ck["mixer"])
        except (RuntimeError, KeyError, TypeError) as exc:  # a damaged or hand-edited file
            raise ConfigError(f"the checkpoint's weights do not fit this QMIX network ({str(exc).splitlines()[0]})",
                              file=str(path)) from None

    @classmethod
    def make_trainer(cls, agent: "QMIXAgent", train: QMIXTrainConfig, seed: int, *, channel=None, file: str | None = None):
        """The :class:`~coopsim.platform.trainer.Trainer` of this plugin."""
        from .trainer import QMIXTrainer

        return QMIXTrainer(agent, train, seed, file=file)
