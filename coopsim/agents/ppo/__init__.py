"""PPO for teams (IPPO, MAPPO): the shared actor-critic trainer every policy-gradient learner plugs into.

Registered agents: ``ppo/mappo-v0`` (centralised critic on ``core.state()``), ``ppo/ippo-v0`` (local
critic). Train with ``coopsim train CONFIG`` (a run config with a ``train:`` section, schema
:class:`PPOTrainConfig`); hooks: :mod:`coopsim.platform.hooks`, examples in :mod:`.hook_examples`.
"""
from .agent import IPPO, MAPPO, PPOAgent
from .config import PPOAgentParams, PPOTrainConfig
from .trainer import PPOTrainer, gae

__all__ = ["IPPO", "MAPPO", "PPOAgent", "PPOAgentParams", "PPOTrainConfig", "PPOTrainer", "gae"]
