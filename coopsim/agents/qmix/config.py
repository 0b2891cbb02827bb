"""Schemas of the QMIX plugin: agent params (architecture, acting) and the ``train:`` section."""
from __future__ import annotations

from pydantic import Field

from coopsim.platform.agent import AGENT_SEED_MAX, AgentParams
from coopsim.platform.trainer import TrainSchedule


class QMIXAgentParams(AgentParams):
    """Architecture of QMIX (what a policy file must match) and acting options."""

    hidden: int = Field(64, ge=1, le=4096, description="agent network width (fc and GRU), in [1, 4096]")
    mixing_embed: int = Field(32, ge=1, le=4096, description="mixing network width, in [1, 4096]")
    hypernet_embed: int = Field(64, ge=1, le=4096, description="hypernetwork hidden width, in [1, 4096]")
    obs_last_action: bool = Field(True, description="feed each agent its own last action (one-hot)")
    obs_agent_id: bool = Field(True, description="feed each agent its slot one-hot (shared parameters)")
    epsilon: float = Field(0.0, ge=0.0, le=1.0, description="exploration when acting outside training (0 = greedy), in [0, 1]")
    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX, description="seed of the exploration generator, 0 .. 2**32-1")


class QMIXTrainConfig(TrainSchedule):
    """The ``train:`` section for ``qmix/qmix-v0`` (defaults after PyMARL2's fine-tuned QMIX, Hu et al. 2021)."""

    num_envs: int = Field(8, ge=1, le=4096, description="environments run in parallel; one iteration = one episode in each")
    max_episode_steps: int | None = Field(None, ge=1, description="episode length bound of the buffer; None = the scenario's limit")
    buffer_episodes: int = Field(2000, ge=1, le=1_000_000, description="replay capacity in episodes")
    batch_episodes: int = Field(32, ge=1, le=4096, description="episodes per gradient step")
    updates_per_iteration: int = Field(1, ge=0, le=1000, description="gradient steps after each iteration")
    lr: float = Field(1e-3, gt=0, le=1.0, description="Adam learning rate")
    gamma: float = Field(0.99, ge=0, le=1, description="discount per step, in [0, 1]")
    td_lambda: float = Field(0.6, ge=0, le=1, description="lambda of the TD(lambda) target (0 = one-step TD), in [0, 1]")
    double_q: bool = Field(True, description="choose next actions with the online network (double Q-learning)")
    target_update_episodes: int = Field(200, ge=1, description="episodes between hard target-network updates")
    epsilon_start: float = Field(1.0, ge=0, le=1, description="initial epsilon, in [0, 1]")
    epsilon_finish: float = Field(0.05, ge=0, le=1, description="final epsilon, in [0, 1]")
    epsilon_anneal_steps: int = Field(100_000, ge=1, description="env steps of the linear epsilon decay")
    grad_clip: float = Field(10.0, gt=0, description="global gradient-norm clip")
