"""Schemas of the PPO plugin: agent params (the policy's architecture) and the ``train:`` section."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from coopsim.platform.agent import AGENT_SEED_MAX, AgentParams
from coopsim.platform.trainer import TrainSchedule


class PPOAgentParams(AgentParams):
    """Architecture of the IPPO/MAPPO actor-critic (what a checkpoint must match) and acting options."""

    critic: Literal["central", "local"] = Field(
        "central", description="'central': MAPPO critic on the global state core.state(); 'local': IPPO critic on the agent's observation")
    hidden: list[int] = Field(default_factory=lambda: [64, 64], description="encoder MLP widths, each in [1, 4096]")
    critic_hidden: list[int] | None = Field(
        None, description="the critic's MLP widths, each in [1, 4096]; None = the same as hidden (a wider critic "
                          "can explain more of the return's variance on maps where the actor stays small)")
    activation: Literal["tanh", "relu"] = Field("tanh", description="hidden activation")
    recurrent: bool = Field(False, description="a GRU after the encoder (actor memory); the critic stays feed-forward")
    actor: Literal["mlp", "asn"] = Field(
        "mlp", description="'mlp': one MLP from the observation to every logit; 'asn': action semantics network "
                           "(Wang et al. 2020): the logit of an action on an entity (SMAC: attack enemy j) is "
                           "computed from that entity's own observation features by a network shared over entities; "
                           "needs a scenario with action_entities() (smac/*), no comm module; with recurrent: true the "
                           "GRU carries the query of the attack logits and the other logits")
    stack_frames: int = Field(
        1, ge=1, le=16, description="k in 1..16: the actor reads the last k observations, newest first (MAPPO's stacked frames); "
                                    "at an episode's start the missing older frames repeat the first one; with "
                                    "actor: asn each entity's features come from every frame; the critic reads "
                                    "the current step only")
    agent_id: bool = Field(True, description="append a one-hot of the agent slot to actor and critic inputs (shared parameters)")
    critic_obs: bool = Field(
        False, description="central critic only: append the agent's own observation to the global state (MAPPO's "
                           "agent-specific global state, Yu et al. 2022); False: state() + agent id")
    comm: dict[str, Any] | None = Field(
        None, description="communication module {module: 'pkg.mod:Class', params: {...}} (coopsim.platform.hooks.CommModule)")
    deterministic: bool = Field(True, description="act by argmax (True, evaluation) or by sampling (False)")
    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX,
                      description="seed of the sampling generator when deterministic is False, 0 .. 2**32-1")

    @field_validator("critic_obs")
    @classmethod
    def _critic_obs_needs_central(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("critic", "central") != "central":
            raise ValueError("only for the central (MAPPO) critic; the local critic already reads the observation")
        return v

    @field_validator("critic_hidden")
    @classmethod
    def _critic_hidden_ok(cls, v: list[int] | None) -> list[int] | None:
        return None if v is None else cls._hidden_ok(v)

    @field_validator("hidden")
    @classmethod
    def _hidden_ok(cls, v: list[int]) -> list[int]:
        if not v or any(int(h) < 1 or int(h) > 4096 for h in v):
            raise ValueError("must be a non-empty list of widths in [1, 4096], e.g. [64, 64]")
        return v


class PPOTrainConfig(TrainSchedule):
    """The ``train:`` section for ``ppo/*`` agents (after CleanRL ppo.py and MAPPO, Yu et al. 2022)."""

    num_envs: int = Field(16, ge=1, le=65536, description="environments stepped together E")
    rollout_steps: int = Field(64, ge=1, le=100000, description="vector steps T per rollout; an iteration uses E*T env steps")
    lr: float = Field(5e-4, gt=0, le=1.0, description="Adam learning rate")
    anneal_lr: bool = Field(False, description="linearly decay lr to 0 over the step budget")
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon")
    gamma: float = Field(0.99, ge=0, le=1, description="discount per step, in [0, 1]")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE lambda, in [0, 1]")
    clip: float = Field(0.2, gt=0, le=1, description="PPO ratio clip epsilon, in (0, 1]")
    epochs: int = Field(4, ge=1, le=100, description="update epochs per rollout")
    minibatches: int = Field(4, ge=1, le=4096, description="minibatches per epoch (over agent-steps, or over sequences if recurrent)")
    ent_coef: float = Field(0.01, ge=0, description="entropy bonus coefficient")
    ent_coef_end: float | None = Field(
        None, ge=0, description="if set: the entropy coefficient goes linearly from ent_coef (at 0 env steps) to "
                                "ent_coef_end (at total_env_steps); None: constant ent_coef")
    vf_coef: float = Field(0.5, ge=0, description="value loss coefficient")
    value_loss: Literal["mse", "huber"] = Field(
        "mse", description="'mse': 0.5 * (v - target)^2; 'huber': Huber loss with huber_delta (MAPPO), on the "
                           "normalised targets when value_norm is on")
    huber_delta: float = Field(10.0, gt=0, description="Huber loss threshold (value_loss: huber)")
    max_grad_norm: float = Field(0.5, gt=0, description="global gradient-norm clip")
    norm_adv: bool = Field(True, description="normalise advantages per minibatch (alive samples)")
    value_norm: bool = Field(True, description="running mean/std normalisation of value targets (MAPPO ValueNorm)")
    bootstrap_truncated: bool = Field(True, description="add gamma*V(final obs) to the reward of time-limit-truncated agents")
    team_reward: bool = Field(False, description="replace each agent's reward by the team's mean reward (fully cooperative credit)")
    death_masking: bool = Field(
        False, description="with team_reward: a slot that dies (alive turns False) keeps the team reward and the living "
                           "agents' mean value until its env's episode ends, so GAE runs through its death (MAPPO's death "
                           "masking); False: the slot's episode ends when it dies")
    intrinsic: dict[str, Any] | None = Field(
        None, description="intrinsic-reward hook {module, params} (coopsim.platform.hooks.IntrinsicReward)")
    aux_losses: list[dict[str, Any]] = Field(
        default_factory=list, description="auxiliary-loss hooks [{module, params}] (coopsim.platform.hooks.AuxiliaryLoss)")
    sticky_eps: float = Field(
        0.0, ge=0, lt=1, description="sticky-action exploration eps in [0, 1): while training, each living agent acts "
                                     "by the mixture (1 - eps) * pi(a | o) + eps * [a == its previous action] (when that "
                                     "action is still available; at an episode's start or otherwise plain pi); the PPO "
                                     "ratio uses the mixture's probability, so the update stays on-policy; 0 = off")
    sticky_anneal_frac: float = Field(
        0.5, gt=0, le=1, description="sticky_eps goes linearly to 0 at this fraction of total_env_steps")

    def inert_keys(self) -> list[str]:
        """``train.sticky_anneal_frac`` given with ``sticky_eps`` 0 (off) and ``train.huber_delta`` given with
        ``value_loss: mse``: each has no effect, one line each (see :meth:`TrainSchedule.inert_keys`)."""
        out = []
        if "sticky_anneal_frac" in self.model_fields_set and self.sticky_eps == 0:
            out.append(f"train.sticky_anneal_frac ({self.sticky_anneal_frac}) has no effect: sticky-action exploration "
                       f"is off (train.sticky_eps is 0); set train.sticky_eps in (0, 1), e.g. 0.8, to use it")
        if "huber_delta" in self.model_fields_set and self.value_loss != "huber":
            out.append(f"train.huber_delta ({self.huber_delta}) has no effect: train.value_loss is "
                       f"'{self.value_loss}'; set train.value_loss: huber to use it")
        return out

    @field_validator("death_masking")
    @classmethod
    def _death_masking_needs_team_reward(cls, v: bool, info: ValidationInfo) -> bool:
        if v and not info.data.get("team_reward", False):
            raise ValueError("needs team_reward: true (a dead agent keeps the team's reward); set both or neither")
        return v


def sticky_eps(cfg: PPOTrainConfig, env_steps: int) -> float:
    """The sticky-action eps of the rollout after ``env_steps``: ``cfg.sticky_eps`` linearly to 0 at
    ``cfg.sticky_anneal_frac * cfg.total_env_steps`` (0 after it)."""
    if cfg.sticky_eps <= 0:
        return 0.0
    return float(cfg.sticky_eps * max(1.0 - env_steps / (cfg.sticky_anneal_frac * cfg.total_env_steps), 0.0))
