"""QMIX training loop (Rashid et al. 2018; TD(lambda) and double-Q targets as in PyMARL2, Hu et al. 2021).

``QMIXTrainer.train_iteration`` is the whole algorithm, top to bottom:

1. reset every env, then run one episode in each (``E`` episodes), acting epsilon-greedily on masked
   Q-values of the recurrent agent network; store whole episodes (observations, states, masks, actions,
   team reward, termination, padding mask) in the episode replay buffer;
2. ``updates_per_iteration`` times: sample ``batch_episodes`` episodes, unroll online and target agent
   networks over them, mix the chosen Q-values with the online mixer and the (double-Q) next values with
   the target mixer, build TD(lambda) targets backwards, minimise the masked squared TD error;
3. copy online to target networks every ``target_update_episodes`` episodes.

Team reward: ``info["team_reward"]`` if the scenario reports it (SMAC does), else the mean reward of the
slots alive at the start of the step. A time-limit truncation is bootstrapped; a termination is not.
"""
from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import torch

from coopsim.errors import ConfigError

from .agent import QMIXAgent, flat_obs
from .config import QMIXTrainConfig


def lambda_returns(reward: torch.Tensor, term: torch.Tensor, filled: torch.Tensor, next_values: torch.Tensor,
                   gamma: float, lam: float) -> torch.Tensor:
    """TD(lambda) targets of a padded episode batch, computed backwards (Sutton & Barto 2018, eq. 12.3).

    ``G_t = r_t + gamma (1 - term_t) [(1 - lam) V_{t+1} + lam G_{t+1}]``, where past the episode's last step
    (``filled[t+1]`` False) only the bootstrap ``V_{t+1}`` is used (a truncated episode bootstraps from its
    final state, a terminated one not at all).

    Args:
        reward, term, filled: float ``[B, T]`` (term and filled 0/1).
        next_values: float ``[B, T+1]``; column ``t+1`` is the target value of the state after step ``t``.
        gamma, lam: discount and lambda, in [0, 1].

    Returns:
        float ``[B, T]`` targets (values at unfilled steps are meaningless and masked by the caller).
    """
    B, T = reward.shape
    targets = torch.zeros(B, T, dtype=next_values.dtype)
    g = next_values[:, T]
    filled_next = torch.cat([filled[:, 1:], torch.zeros(B, 1, dtype=filled.dtype)], 1)
    for t in reversed(range(T)):
        boot = next_values[:, t + 1]
        mix = torch.where(filled_next[:, t] > 0, (1 - lam) * boot + lam * g, boot)
        g = reward[:, t] + gamma * (1 - term[:, t]) * mix
        targets[:, t] = g
    return targets


class EpisodeBuffer:
    """Ring buffer of whole episodes padded to ``T`` steps (arrays ``[capacity, T(+1), ...]``)."""

    def __init__(self, capacity: int, T: int, N: int, D: int, S: int, A: int):
        self.capacity, self.size, self.pos = capacity, 0, 0
        self.obs = np.zeros((capacity, T + 1, N, D), np.float32)
        self.state = np.zeros((capacity, T + 1, S), np.float32)
        self.avail = np.zeros((capacity, T + 1, N, A), bool)
        self.actions = np.zeros((capacity, T, N), np.int64)
        self.reward = np.zeros((capacity, T), np.float32)
        self.term = np.zeros((capacity, T), bool)
        self.filled = np.zeros((capacity, T), bool)

    def add(self, batch: dict[str, np.ndarray]) -> None:
        n = batch["reward"].shape[0]
        idx = (self.pos + np.arange(n)) % self.capacity
        for k, v in batch.items():
            getattr(self, k)[idx] = v
        self.pos = int((self.pos + n) % self.capacity)
        self.size = int(min(self.size + n, self.capacity))

    def sample(self, rng: np.random.Generator, b: int) -> dict[str, np.ndarray]:
        idx = rng.choice(self.size, size=min(b, self.size), replace=False)
        T = int(self.filled[idx].sum(1).max())  # trim to the longest sampled episode
        return {"obs": self.obs[idx, :T + 1], "state": self.state[idx, :T + 1], "avail": self.avail[idx, :T + 1],
                "actions": self.actions[idx, :T], "reward": self.reward[idx, :T], "term": self.term[idx, :T],
                "filled": self.filled[idx, :T]}


def check_buffer_memory(capacity: int, T: int, N: int, D: int, S: int, A: int, *, file: str | None = None) -> None:
    """Refuse, before allocating, an :class:`EpisodeBuffer` larger than half the available memory
    (:func:`coopsim.platform.memory.over_limit`; below 256 MiB nothing is refused).

    Raises:
        ConfigError: key ``train.buffer_episodes``: the bytes needed, the limit and the most episodes that fit.
    """
    from coopsim.platform.memory import MEMORY_FRACTION, gib, over_limit

    per_episode = (T + 1) * (N * D * 4 + S * 4 + N * A) + T * (N * 8 + 4 + 2)
    need = capacity * per_episode
    over = over_limit(need)
    if over is None:
        return
    limit, avail = over
    fit = (f"what fits: train.buffer_episodes <= {limit // per_episode}" if limit // per_episode >= 1 else
           f"nothing fits at any train.buffer_episodes: one episode of {T} steps needs {gib(per_episode)}")
    raise ConfigError(
        f"invalid value {capacity}: the replay buffer needs {gib(need)} ({capacity} episodes x {T} steps x {N} agents; "
        f"{per_episode} bytes per episode), more than {MEMORY_FRACTION:.0%} of the available memory ({gib(limit)} of "
        f"{gib(avail)}); {fit}", file=file, key="train.buffer_episodes", value=capacity)


class QMIXTrainer:
    """Trains a :class:`QMIXAgent` on its scenario core. Implements :class:`coopsim.platform.trainer.Trainer`;
    ``env_steps`` counts the steps of envs whose episode was running.

    Args:
        agent: the plugin (its ``scenario`` is the batched core, ``E = num_envs``).
        train: the ``train:`` section.
        seed: run seed (scenario reset, exploration ``default_rng([seed, 2])``, replay sampling ``[seed, 3]``).

    Raises:
        ConfigError: the episode length bound is unknown (set ``train.max_episode_steps``).
    """

    def __init__(self, agent: QMIXAgent, train: QMIXTrainConfig, seed: int, *, file: str | None = None):
        self.agent, self.cfg, self.seed = agent, train, int(seed)
        self.core = agent.scenario
        T = train.max_episode_steps or getattr(self.core, "limit", None) or getattr(getattr(self.core, "params", None), "max_steps", None)
        if not T:
            raise ConfigError("cannot tell the scenario's episode limit; set train.max_episode_steps", file=file,
                              key="train.max_episode_steps")
        self.T = int(T)
        self.target_net = copy.deepcopy(agent.net)
        self.target_mixer = copy.deepcopy(agent.mixer)
        self.params = list(agent.net.parameters()) + list(agent.mixer.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=train.lr)
        check_buffer_memory(train.buffer_episodes, self.T, agent.n_agents, agent.obs_dim, agent.state_dim,
                            agent.n_actions, file=file)
        self.buffer = EpisodeBuffer(train.buffer_episodes, self.T, agent.n_agents, agent.obs_dim, agent.state_dim, agent.n_actions)
        agent.rng = np.random.default_rng([self.seed, 2])
        self.sample_rng = np.random.default_rng([self.seed, 3])
        self.env_steps = 0
        self.iteration = 0
        self.episodes = 0
        self.last_target_update = 0
        self._first_reset = True

    def epsilon(self) -> float:
        c = self.cfg
        frac = min(self.env_steps / c.epsilon_anneal_steps, 1.0)
        return c.epsilon_start + frac * (c.epsilon_finish - c.epsilon_start)

    # ------------------------------------------------------------------------------------------
    def collect(self, epsilon: float) -> tuple[dict[str, np.ndarray], list[dict[str, float]]]:
        """Run one episode in every env; returns the padded batch and per-env episode statistics."""
        core, agent, T = self.core, self.agent, self.T
        E, N = core.num_envs, agent.n_agents
        obs = flat_obs(core.reset(seed=self.seed if self._first_reset else None))
        self._first_reset = False
        agent.reset_envs(np.arange(E))
        b = {"obs": np.zeros((E, T + 1, N, agent.obs_dim), np.float32),
             "state": np.zeros((E, T + 1, agent.state_dim), np.float32),
             "avail": np.zeros((E, T + 1, N, agent.n_actions), bool),
             "actions": np.zeros((E, T, N), np.int64), "reward": np.zeros((E, T), np.float32),
             "term": np.zeros((E, T), bool), "filled": np.zeros((E, T), bool)}
        ret = np.zeros(E)
        b["obs"][:, 0], b["state"][:, 0], b["avail"][:, 0] = obs, core.state(), core.action_masks()
        for t in range(T):
            active = ~core.done
            if not active.any():
                break
            x = agent.inputs(obs, agent.last_action)
            with torch.no_grad():
                q, agent.h = agent.net(x.reshape(E * N, -1), agent.h)
            a = agent.select(q.view(E, N, -1), b["avail"][:, t], epsilon)
            agent.last_action = a
            alive0 = core.alive
            res = core.step(a)
            self.env_steps += int(active.sum())
            team = res.info.get("team_reward")
            if team is None:
                team = (res.reward * alive0).sum(1) / np.maximum(alive0.sum(1), 1)
            obs = flat_obs(res.obs)
            done = core.done
            b["actions"][active, t] = a[active]
            b["reward"][active, t] = np.asarray(team)[active]
            b["filled"][active, t] = True
            b["term"][active, t] = (done & ~np.asarray(res.truncated).any(1))[active]
            b["obs"][active, t + 1] = obs[active]
            b["state"][active, t + 1] = core.state()[active]
            b["avail"][active, t + 1] = core.action_masks()[active]
            ret += np.asarray(team) * active
        metrics = core.episode_metrics() if hasattr(core, "episode_metrics") else [{} for _ in range(E)]
        stats = [{"episode/return": float(ret[e]), "episode/length": float(b["filled"][e].sum()),
                  **{f"episode/{k}": float(v) for k, v in metrics[e].items()}} for e in range(E)]
        return b, stats

    def _unroll(self, net, x: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, T+1, N, A]`` of a recurrent net over inputs ``[B, T+1, N, in]``."""
        B, T1, N, _ = x.shape
        h = torch.zeros(B * N, self.agent.params.hidden)
        out = []
        for t in range(T1):
            q, h = net(x[:, t].reshape(B * N, -1), h)
            out.append(q.view(B, N, -1))
        return torch.stack(out, 1)

    def update(self) -> dict[str, float]:
        cfg, agent = self.cfg, self.agent
        s = self.buffer.sample(self.sample_rng, cfg.batch_episodes)
        obs = torch.as_tensor(s["obs"])
        B, T1, N, _ = obs.shape
        T = T1 - 1
        actions = torch.as_tensor(s["actions"])
        last = torch.cat([torch.zeros(B, 1, N, dtype=torch.int64), actions], 1)  # last action at each t
        x = agent.inputs(obs, last[:, :T1])
        avail = torch.as_tensor(s["avail"])
        state = torch.as_tensor(s["state"])
        reward = torch.as_tensor(s["reward"])
        term = torch.as_tensor(s["term"]).float()
        filled = torch.as_tensor(s["filled"]).float()
        q = self._unroll(agent.net, x)  # [B, T+1, N, A]
        chosen = q[:, :T].gather(-1, actions[..., None])[..., 0]  # [B, T, N]
        with torch.no_grad():
            q_tgt = self._unroll(self.target_net, x)
            if cfg.double_q:
                next_a = q.detach().masked_fill(~avail, -1e9).argmax(-1, keepdim=True)
            else:
                next_a = q_tgt.masked_fill(~avail, -1e9).argmax(-1, keepdim=True)
            q_next = q_tgt.gather(-1, next_a)[..., 0]  # [B, T+1, N]
            tot_next = self.target_mixer(q_next.reshape(B * T1, N), state.reshape(B * T1, -1)).view(B, T1)
            targets = lambda_returns(reward, term, filled, tot_next, cfg.gamma, cfg.td_lambda)
        tot = agent.mixer(chosen.reshape(B * T, N), state[:, :T].reshape(B * T, -1)).view(B, T)
        err = (tot - targets) * filled
        loss = (err ** 2).sum() / filled.sum().clamp(min=1.0)
        self.optimizer.zero_grad()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip)
        self.optimizer.step()
        n = filled.sum().clamp(min=1.0)
        return {"loss/td": float(loss.detach()), "loss/grad_norm": float(gnorm),
                "q/taken_mean": float((tot.detach() * filled).sum() / n), "q/target_mean": float((targets * filled).sum() / n)}

    def train_iteration(self) -> dict[str, float]:
        cfg = self.cfg
        eps = self.epsilon()
        batch, stats = self.collect(eps)
        self.buffer.add(batch)
        self.episodes += self.core.num_envs
        # "episodes": this iteration's count, which the progress line weighs its running means by
        out: dict[str, float] = {"train/epsilon": eps, "train/episodes": float(self.episodes),
                                 "episodes": float(self.core.num_envs)}
        for k in stats[0]:  # a nan (a metric undefined for an episode, e.g. MG-MAPF's soc_over_lb) is missing
            vals = [s[k] for s in stats if np.isfinite(s[k])]
            if vals:
                out[k] = float(np.mean(vals))
        acc: dict[str, list[float]] = {}
        if self.buffer.size >= min(cfg.batch_episodes, cfg.buffer_episodes):
            for _ in range(cfg.updates_per_iteration):
                for k, v in self.update().items():
                    acc.setdefault(k, []).append(v)
        out.update({k: float(np.mean(v)) for k, v in acc.items()})
        if self.episodes - self.last_target_update >= cfg.target_update_episodes:
            self.target_net.load_state_dict(self.agent.net.state_dict())
            self.target_mixer.load_state_dict(self.agent.mixer.state_dict())
            self.last_target_update = self.episodes
        self.iteration += 1
        return out

    # --- Trainer: exact resume and the policy file ------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.agent.checkpoint(), "target_net": self.target_net.state_dict(),
                "target_mixer": self.target_mixer.state_dict(), "optimizer": self.optimizer.state_dict(),
                "buffer": pickle.dumps(self.buffer), "world": pickle.dumps(self.core),
                "agent_rng": self.agent.rng.bit_generator.state, "sample_rng": self.sample_rng.bit_generator.state,
                "counters": dict(env_steps=self.env_steps, iteration=self.iteration, episodes=self.episodes,
                                 last_target_update=self.last_target_update, first_reset=self._first_reset)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.net.load_state_dict(state["policy"]["net"])
        self.agent.mixer.load_state_dict(state["policy"]["mixer"])
        self.target_net.load_state_dict(state["target_net"])
        self.target_mixer.load_state_dict(state["target_mixer"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.buffer = pickle.loads(state["buffer"])
        self.core = pickle.loads(state["world"])
        self.agent.scenario = self.core
        self.agent.rng.bit_generator.state = state["agent_rng"]
        self.sample_rng.bit_generator.state = state["sample_rng"]
        c = state["counters"]
        self.env_steps, self.iteration, self.episodes = int(c["env_steps"]), int(c["iteration"]), int(c["episodes"])
        self.last_target_update, self._first_reset = int(c["last_target_update"]), bool(c["first_reset"])

    def save_policy(self, path) -> None:
        self.agent.save(path)
