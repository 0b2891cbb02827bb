"""IMMP team plugin (``mapf/immp-v0`` and its ablations) and the decentralized PPO baseline (``mapf/dppo-v0``).

One class, :class:`IMMPAgent`, a :class:`coopsim.agents.ppo.PPOAgent` whose policy input is built by the
IMMP high level (:mod:`.highlevel`) and whose network (:mod:`.net`) may carry the neighbour-intent module
(:mod:`.intent`). It trains through the shared PPO trainer (:class:`coopsim.agents.ppo.trainer.PPOTrainer`):
``make_trainer`` adds the intent auxiliary loss (:class:`.intent.IntentLoss`) and the collaborative reward
hook (:class:`.rewards.CollaborativeReward`). Acting is decentralized: each agent's action depends only on
its own window, its previous window and its own waypoints (the high level shares only the density map).

Registered variants (same class, different defaults):

===================== ============ =================== ============ ============================================
id                    intent       high level          team reward  role
===================== ============ =================== ============ ============================================
mapf/immp-v0          yes          balanced, weighted  0.5          IMMP
mapf/immp-nocong-v0   yes          shortest tour, none 0.5          ablation: no congestion term
mapf/immp-nointent-v0 no           balanced, weighted  0.5          ablation: no intent prediction
mapf/dppo-v0          no           nearest, unweighted 0            decentralized PPO baseline
===================== ============ =================== ============ ============================================

Low-level decision rule (``cs_pibt``, on for the IMMP variants, off for ``mapf/dppo-v0``): CS-PIBT (Veerapaneni,
Wang, Li, Sycara et al., "Improving Learnt Local MAPF Policies with Heuristic Search", ICAPS 2024). The policy's
masked logits (with IMMP's intent-based risk term) order each agent's five actions, and PIBT's one-step
priority inheritance with backtracking (:func:`coopsim.agents.pibt.pibt.pibt_actions`, the same code as
``mapf/pibt-v0``) turns the orders into a joint move without vertex or swap conflicts. ``cs_order`` picks the
order: by probability ('sorted'), sampled without replacement ('sampled'), or sorted until the agent stalls on
its cost-to-go for ``cs_patience`` steps and sampled at ``cs_temperature`` afterwards ('adaptive', default).
CS-PIBT acts at decision time only; training (the shared PPO trainer samples from the policy) is unchanged.

The policy is independent of the number of agents and of goals (no agent id, no K-dependent input), so a
policy trained on generated 17-32 maps runs on MovingAI maps with any N and K, as long as ``obs_radius`` and
``num_waypoints`` match the checkpoint.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

import numpy as np
import torch
from pydantic import Field, field_validator

from coopsim.agents.ppo.agent import PPOAgent
from coopsim.agents.ppo.config import PPOTrainConfig
from coopsim.agents.ppo.networks import ValueNorm, flatten_obs, obs_dim
from coopsim.errors import ConfigError
from coopsim.platform.agent import AGENT_SEED_MAX, AgentParams, AgentPlugin
from coopsim.platform.registry import Variant

from .highlevel import HighLevelParams, ScenarioPlanner, TeamPlanner
from .intent import InertiaCalibration, IntentLoss, IntentNet, shift_per_sample
from .net import IMMPNet
from .rewards import CollaborativeReward

CHECKPOINT_FORMAT = "coopsim.immp/1"
SHIPPED_CHECKPOINT = Path(__file__).parent / "checkpoints" / "immp-v0.pt"
SHIPPED_BASELINE = Path(__file__).parent / "checkpoints" / "dppo-v0.pt"
#: IMMP's policy as PPO trained it (training seed 0, second round), before the intent module was fine-tuned on
#: CS-PIBT rollouts (``benchmarks/immp_intent_finetune.py``; every other tensor of ``immp-v0.pt`` is this file's)
SHIPPED_PPO = Path(__file__).parent / "checkpoints" / "immp-v0-ppo.pt"


class IMMPParams(AgentParams):
    """Parameters of ``mapf/immp-v0`` and its variants (architecture, high level, training terms)."""

    hidden: list[int] = Field(default_factory=lambda: [128, 128], description="encoder MLP widths, each in [1, 4096]")
    activation: Literal["tanh", "relu"] = Field("relu", description="hidden activation")
    intent: bool = Field(True, description="neighbour-intent module whose predictions feed the policy")
    intent_channels: int = Field(8, ge=1, le=256, description="conv width of the intent module, 1..256")
    intent_depth: int = Field(2, ge=1, le=8, description="3x3 conv layers of the intent module, 1..8 (receptive field "
                              "2 * depth + 1 cells); when a checkpoint is loaded, its own setting is used")
    intent_last_move: bool = Field(False, description="the intent module also reads each visible neighbour's last move "
                                                       "(derived from the agent's two consecutive windows); when a "
                                                       "checkpoint is loaded, its own setting is used")
    intent_adapt_lr: float = Field(0.0, ge=0, le=10, description="step size of the online, per-agent calibration of the "
                                   "intent module's trust in each neighbour's last move (InertiaCalibration), applied "
                                   "at CS-PIBT decisions; 0 = the module as trained, 0..10")
    intent_coef: float = Field(0.5, ge=0, le=100, description="weight of the intent loss in the PPO objective, 0..100")
    team_weight: float = Field(0.5, ge=0, le=1, description="share of the team-mean reward in each agent's reward, 0..1")
    goal_bonus: float = Field(2.0, ge=0, le=100, description="shaping reward per goal visited (reward units), 0..100")
    highlevel: HighLevelParams = Field(default_factory=HighLevelParams, description="high-level planner parameters")
    deterministic: bool = Field(True, description="without cs_pibt: act by argmax (True) or by sampling (False); "
                                                   "ignored with cs_pibt (see cs_order)")
    cs_pibt: bool = Field(True, description="low-level decision rule: the policy's action distribution is the preference "
                                            "order of a PIBT one-step collision resolution (CS-PIBT, Veerapaneni et al. "
                                            "ICAPS 2024); false = act on the policy's own choice (the ablation, and the "
                                            "rule of the decentralized PPO baseline mapf/dppo-v0)")
    cs_order: Literal["sorted", "sampled", "adaptive"] = Field(
        "adaptive", description="CS-PIBT preference order: 'sorted' = actions by decreasing policy probability; 'sampled' = "
                                "a sample without replacement from softmax(logits / cs_temperature); 'adaptive' = sorted "
                                "while the agent progresses, sampled once it made no progress on its cost-to-go for "
                                "cs_patience steps or has finished (breaks the livelocks of a fixed order)")
    cs_temperature: float = Field(3.0, gt=0, le=100, description="temperature of the sampled CS-PIBT orders, in (0, 100]; "
                                                                 "1 = the policy itself")
    cs_patience: int = Field(16, ge=1, le=10000, description="'adaptive' order: steps without a new best cost-to-go after "
                                                             "which an agent samples its order, 1..10000")
    cs_finished: Literal["sorted", "sampled"] = Field("sorted", description="'adaptive' order of agents that have "
                                                                             "finished all their goals")
    seed: int = Field(0, ge=0, le=AGENT_SEED_MAX, description="seed of the sampling generator, 0 .. 2**32-1")
    checkpoint: Optional[str] = Field(None, description="policy file loaded at construction (so `coopsim run` evaluates "
                                                        "it); 'shipped' = the checkpoint shipped for this variant (IMMP "
                                                        "and its intent-module variants, or the PPO baseline; none for "
                                                        "the no-intent ablation); "
                                                        "'shipped-ppo' = IMMP's shipped policy before the intent "
                                                        "module's fine-tuning on CS-PIBT rollouts; a relative path "
                                                        "is found in the working folder or beside the config",
                                            json_schema_extra={"file": True, "dir": True})

    @field_validator("hidden")
    @classmethod
    def _hidden_ok(cls, v: list[int]) -> list[int]:
        if not v or any(int(h) < 1 or int(h) > 4096 for h in v):
            raise ValueError("must be a non-empty list of widths in [1, 4096], e.g. [128, 128]")
        return v


class IMMPAgent(PPOAgent):
    """IMMP (and the decentralized PPO baseline) on ``mapf/MGMAPF-v0``; see the module docstring.

    Input per agent: the scenario's window ``[3, S, S]``, the previous agent channel aligned to the current
    frame ``[S, S]`` (from the agent's own last window and move), and the high level's waypoint features
    (:meth:`.highlevel.TeamPlanner.features`). Shapes: observations ``[E, N, ...]`` -> actions int64 ``[E, N]``.

    Raises:
        ConfigError: a scenario without the MG-MAPF capabilities; a checkpoint of another architecture.
    """

    Params: ClassVar = IMMPParams
    TrainConfig: ClassVar = PPOTrainConfig
    requires: ClassVar[tuple[str, ...]] = ("action_masks", "agent_xy", "goals_xy", "goals_visited", "map_data")

    def __init__(self, scenario, **params: Any):
        AgentPlugin.__init__(self, scenario, **params)
        p: IMMPParams = self.params
        #: the params the config set explicitly (a loaded checkpoint's architecture must agree only with these;
        #: loading one, e.g. the shipped policy at construction, updates the params but is not a user setting)
        self._explicit = frozenset(p.model_fields_set)
        for c in self.requires:
            if not hasattr(scenario, c):
                raise ConfigError(f"mapf/immp needs an MG-MAPF scenario with {c}(); got {type(scenario).__name__}",
                                  key="scenario.id")
        self.obs_space = scenario.observation_space
        self.obs_dim = obs_dim(self.obs_space)
        self.num_agents = scenario.num_agents
        self.num_actions = int(scenario.action_space.n)
        self.state_dim = 0
        self.comm, self.comm_dim, self.id_dim = None, 0, 0
        self.k = int(scenario.params.num_goals)
        self.s = 2 * int(scenario.params.obs_radius) + 1
        self.wp_dim = TeamPlanner.feature_dim(p.highlevel.num_waypoints)
        self.net = IMMPNet(self.s, self.wp_dim, self.num_actions, list(p.hidden), p.activation, p.intent, p.intent_channels,
                           intent_last_move=p.intent_last_move, intent_depth=p.intent_depth)
        self.value_norm = ValueNorm()
        self.hl = ScenarioPlanner(scenario, p.highlevel, horizon_key="agents.params.highlevel.horizon")
        self.reset()  # params.seed for the sampling generator; the planner's generator from the high level's seed
        if p.checkpoint is not None:
            if p.checkpoint not in ("shipped", "shipped-ppo") and not Path(p.checkpoint).exists():
                raise ConfigError(f"checkpoint {p.checkpoint!r} not found: give 'shipped' (this variant's shipped "
                                  "policy), 'shipped-ppo', a policy file, or a training run's seed directory",
                                  key="agents.params.checkpoint", value=p.checkpoint)
            self.load(self.shipped_checkpoint() if p.checkpoint in ("shipped", "shipped-ppo") else p.checkpoint)

    def shipped_checkpoint(self, which: str | None = None) -> Path:
        """The policy shipped for this configuration (``which``: 'shipped' or 'shipped-ppo'; default the
        ``checkpoint`` param): IMMP's for an agent with the intent module (``immp-v0.pt``; 'shipped-ppo': its
        PPO-trained original ``immp-v0-ppo.pt``), the decentralized-PPO baseline's (``dppo-v0.pt``) for an agent
        without the intent module and with individual reward (``team_weight`` 0); nothing else is shipped (the
        no-intent ablation, trained with the team reward, has no shipped policy).

        Raises:
            ConfigError: key ``agents.params.checkpoint``; no shipped policy matches (names the configuration,
                the shipped ones and the training command), or the file is missing.
        """
        which = self.params.checkpoint if which is None else which
        path = self._shipped_file(which)
        if not path.is_file():
            raise ConfigError(f"no shipped checkpoint {path.name}; train one with coopsim train configs/mapf/immp-train-*.yaml",
                              key="agents.params.checkpoint", value=which)
        return path

    def _shipped_file(self, which: str) -> Path:
        """:meth:`shipped_checkpoint`'s choice of file (not checked to exist)."""
        p: IMMPParams = self.params
        if p.intent:
            return SHIPPED_PPO if which == "shipped-ppo" else SHIPPED_CHECKPOINT
        if which == "shipped-ppo":
            raise ConfigError("'shipped-ppo' is IMMP's shipped policy before its intent module was fine-tuned; this "
                              "agent has no intent module (intent=false): the decentralized-PPO baseline "
                              "(mapf/dppo-v0) has its policy as 'shipped', the no-intent ablation "
                              "(mapf/immp-nointent-v0) has none shipped (train one with `coopsim train "
                              "configs/mapf/immp-train-immp-nointent.yaml`)", key="agents.params.checkpoint", value=which)
        if p.team_weight == 0:
            return SHIPPED_BASELINE
        raise ConfigError(
                f"no shipped policy for mapf/immp-nointent-v0 (the no-intent ablation: intent=false, team_weight="
                f"{p.team_weight:g}); shipped are IMMP's (intent=true: immp-v0.pt, immp-v0-ppo.pt) and the "
                "decentralized-PPO baseline's (mapf/dppo-v0: intent=false, team_weight=0, dppo-v0.pt). Train one with "
                "`coopsim train configs/mapf/immp-train-immp-nointent.yaml` and give its seed directory as "
                "agents.params.checkpoint", key="agents.params.checkpoint", value=which)

    # --- inputs -------------------------------------------------------------------------------
    def _sync(self) -> np.ndarray:
        """Sync the high level with the scenario; returns the step counters ``[E]``."""
        if self.hl.core is not self.scenario:  # the trainer may swap in a restored core
            self.hl.core = self.scenario
            self.hl.invalidate()
        return self.hl.sync()

    def _input(self, obs_flat: np.ndarray, *, advance: bool) -> torch.Tensor:
        e, n = obs_flat.shape[:2]
        s, k = self.s, self.k
        t = self._sync()
        xy = self.scenario.agent_xy().astype(np.int64)
        win = obs_flat[..., 4 * k:4 * k + 3 * s * s]                   # [E, N, 3SS]
        agents = torch.as_tensor(win[..., s * s:2 * s * s].reshape(e * n, s, s))
        fresh = (t == 0)[:, None] | (self._prev_xy is None)
        if self._prev_xy is None or self._prev_win is None or self._prev_win.shape[0] != e * n:
            prev = agents
        else:
            d = torch.as_tensor(np.clip(xy - self._prev_xy, -1, 1).reshape(e * n, 2))
            prev = shift_per_sample(self._prev_win, d)
            fr = torch.as_tensor(np.broadcast_to(fresh, (e, n)).reshape(-1).copy())
            prev = torch.where(fr[:, None, None], agents, prev)
        wp = self.hl.features()                                          # [E, N, F_w]
        x = torch.cat([torch.as_tensor(win.reshape(e * n, -1), dtype=torch.float32), prev.reshape(e * n, -1).float(),
                       torch.as_tensor(wp.reshape(e * n, -1))], dim=-1).reshape(e, n, -1)
        if advance:
            self._prev_win, self._prev_xy = agents.clone(), xy.copy()
        return x

    def actor_input(self, obs_flat: np.ndarray, inbox_in: np.ndarray | None = None) -> torch.Tensor:
        """float32 ``[E, N, 4 S^2 + F_w]`` (see :mod:`.net`); advances the agent's one-step memory."""
        x = self._input(obs_flat, advance=True)
        self._last = (obs_flat, x)
        return x

    def critic_input(self, obs_flat: np.ndarray, state: np.ndarray | None = None) -> torch.Tensor:
        """The critic reads the actor's input (decentralized critic)."""
        if self._last is not None and self._last[0] is obs_flat:
            return self._last[1]
        return self._input(obs_flat, advance=False)

    # --- low-level decision rule ----------------------------------------------------------------------
    def act(self, obs, inbox=None):
        """Actions int64 ``[E, N]``. With ``cs_pibt`` (default for IMMP) the policy's logits ``[E, N, 5]`` (with
        the risk term and masks already in them) become preference keys and :meth:`resolve` turns them into a
        conflict-free joint move; without it, the policy's own argmax / sample (:meth:`PPOAgent.act`)."""
        if not self.params.cs_pibt:
            return super().act(obs, inbox)
        flat = flatten_obs(obs, self.obs_space)
        actions = self.decide(self.actor_input(flat, None))
        self._t += 1
        return actions, None

    def decide(self, x: torch.Tensor) -> np.ndarray:
        """CS-PIBT decision from the actor input ``x [E, N, D]`` (:meth:`actor_input`, already advanced):
        int64 actions ``[E, N]`` (benchmarks that read the intent logits of the same input call this)."""
        p: IMMPParams = self.params
        e, n = x.shape[:2]
        s = self.s
        cal = self._inertia if (self.net.intent is not None and p.intent_adapt_lr > 0) else None
        if cal is not None:
            x4 = x.reshape(e * n, -1)[:, :4 * s * s].reshape(-1, 4, s, s)
            xy = torch.as_tensor(self.scenario.agent_xy().astype(np.int64).reshape(e * n, 2))
            fresh = torch.as_tensor(np.repeat(self.hl.step_counters() == 0, n))
            self.net.inertia = cal.step(x4, xy, fresh)
        try:
            logits, feat, _ = self.masked_logits(x)
        finally:
            self.net.inertia = None
        if self.net.intent is not None:
            #: float32 ``[E*N, 5, S, S]``: the intent predictions this decision used (calibrated), for benchmarks
            self.last_intent_logits = feat[:, self.net.policy_dim:].reshape(-1, 5, s, s)
            if cal is not None:
                cal.remember(x4, xy, self.last_intent_logits)
        with torch.no_grad():
            if p.cs_order != "sorted":
                # Gumbel-max: the first preference is a sample of softmax(logits / T), the whole order a sample
                # without replacement (Plackett-Luce)
                u = torch.rand(logits.shape, generator=self._gen).clamp_(1e-20, 1.0)
                sampled = logits / p.cs_temperature - torch.log(-torch.log(u))
                if p.cs_order == "sampled":
                    logits = sampled
                else:
                    stuck = torch.as_tensor(self._stalled().reshape(-1))
                    logits = torch.where(stuck[:, None], sampled, logits)
        actions = self.resolve(-logits.reshape(e, n, -1).numpy().astype(np.float64))
        actions[~np.asarray(self.scenario.alive)] = self.scenario.noop_action
        return actions

    def _stalled(self) -> np.ndarray:
        """bool ``[E, N]``: agents whose cost-to-go (high-level field at their cell) has not reached a new minimum
        for ``cs_patience`` steps (the counter restarts when the agent visits a goal, i.e. gets a new field), and,
        with ``cs_finished: sampled``, finished agents. Local: each agent reads only its own field and goals."""
        core = self.scenario
        xy = core.agent_xy().astype(np.int64)
        vis = core.goals_visited()
        nvis = vis.sum(-1)
        t = self.hl.step_counters()
        envs = self.hl.planner.envs
        cost = np.stack([envs[e].fields[np.arange(xy.shape[1]), xy[e, :, 1] * envs[e].w + xy[e, :, 0]]
                         for e in range(xy.shape[0])]).astype(np.float64)
        if self._best is None or self._best.shape != cost.shape:
            self._best, self._stall, self._nvis = cost.copy(), np.zeros(cost.shape, np.int64), nvis.copy()
        restart = (nvis != self._nvis) | (t == 0)[:, None]
        better = cost < self._best - 1e-6
        self._stall = np.where(restart | better, 0, self._stall + 1)
        self._best = np.where(restart, cost, np.minimum(self._best, cost))
        self._nvis = nvis
        out = self._stall >= self.params.cs_patience
        if self.params.cs_finished == "sampled":
            out |= vis.all(-1)
        return out

    def resolve(self, key: np.ndarray) -> np.ndarray:
        """CS-PIBT step: preference keys float ``[E, N, 5]`` (lower = preferred, per action) -> int64 actions
        ``[E, N]`` free of vertex and swap conflicts, by :func:`coopsim.agents.pibt.pibt.pibt_actions` with PIBT's
        priorities (:class:`coopsim.agents.pibt.pibt.PIBTPriorities`: steps since the last goal visit)."""
        from coopsim.agents.pibt.pibt import PIBTPriorities, pibt_actions  # here: pibt imports the immp high level

        core = self.scenario
        if self._prios is None or self._prios.prio.shape != key.shape[:2]:
            self._prios = PIBTPriorities(*key.shape[:2])
        prio = self._prios.update(self.hl.step_counters(), core.goals_visited())
        xy = core.agent_xy().astype(np.int64)
        out = np.zeros(key.shape[:2], np.int64)
        for e in range(key.shape[0]):
            env = self.hl.planner.envs[e]
            cur = xy[e, :, 1] * env.w + xy[e, :, 0]
            out[e] = pibt_actions(cur, env.nbr, key[e], prio[e], env.w, env.h * env.w)
        return out

    def receive(self, inbox, num_envs: int, obs=None, *, finite: bool = True):
        """IMMP's low level sends no messages (only the high level's density map is shared): always None."""
        return None

    # --- AgentPlugin ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._prev_win = None
        self._prev_xy = None
        self._last = None
        self._prios = None
        self._best = self._stall = self._nvis = None
        self._inertia = InertiaCalibration(self.params.intent_adapt_lr) if self.params.intent_adapt_lr > 0 else None
        self.last_intent_logits = None
        self.hl.reset(seed)  # full replan, group shuffles reseeded from the episode seed (independent of earlier episodes)

    def runtime_state(self) -> bytes:
        """What this agent keeps between the steps of an episode in progress, pickled: the one-step window memory
        (``_prev_win``/``_prev_xy``), the high-level planner's per-env plans and goal orders, CS-PIBT's priorities and
        stall counters, the inertia calibration and the sampling generator. The trainer saves it with its checkpoint
        so that a ``--resume`` continues the interrupted episodes exactly (without it the planner replanned every
        env mid-episode and the first resumed iteration differed). The planner's scenario core is left out (the
        trainer restores the core itself); :meth:`load_runtime_state` binds the plans to it."""
        import pickle

        core, self.hl.core = self.hl.core, None
        try:
            return pickle.dumps({"prev_win": self._prev_win, "prev_xy": self._prev_xy, "prios": self._prios,
                                 "best": self._best, "stall": self._stall, "nvis": self._nvis,
                                 "inertia": self._inertia, "gen": self._gen.get_state(), "t": self._t,
                                 "planner": self.hl.planner, "force": self.hl.force})
        finally:
            self.hl.core = core

    def load_runtime_state(self, blob: bytes) -> None:
        """Restore :meth:`runtime_state` onto this agent, whose ``scenario`` is already the restored core."""
        import pickle

        st = pickle.loads(blob)
        self._prev_win, self._prev_xy, self._prios = st["prev_win"], st["prev_xy"], st["prios"]
        self._best, self._stall, self._nvis, self._inertia = st["best"], st["stall"], st["nvis"], st["inertia"]
        self._gen.set_state(st["gen"])
        self._t, self._last = st["t"], None
        self.hl.core, self.hl.planner, self.hl.force = self.scenario, st["planner"], st["force"]

    def checkpoint(self) -> dict[str, Any]:
        return {"format": CHECKPOINT_FORMAT, "params": self.params.model_dump(), "window": self.s,
                "waypoint_dim": self.wp_dim, "num_actions": self.num_actions,
                "net": self.net.state_dict(), "value_norm": self.value_norm.state_dict(), "comm": None}

    def load(self, path: str | Path) -> None:
        """Read a policy written by :meth:`save` (or a training ``checkpoint.pt`` / seed directory, or a shipped
        ``checkpoints/seed-<s>/`` directory: its ``immp-v0.pt``, or ``dppo-v0.pt`` for an agent without intents).

        Raises:
            ConfigError: not an IMMP policy, or a different window / waypoint width / architecture.
        """
        from coopsim.platform.trainer import POLICY_NAME, load_policy

        path = Path(path)
        if path.is_dir() and not (path / POLICY_NAME).is_file():   # a shipped seed directory (checkpoints/seed-<s>/)
            names = {f.name for f in (SHIPPED_CHECKPOINT, SHIPPED_BASELINE)}
            if any((path / f).is_file() for f in names):
                path = path / self._shipped_file("shipped").name   # the file this configuration matches, or why none
        ck, path = load_policy(path)   # a policy file, a training checkpoint.pt or seed directory
        if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
            raise ConfigError(f"not an IMMP policy file (format {CHECKPOINT_FORMAT})", file=str(path))
        from coopsim.platform.trainer import require_policy_keys

        require_policy_keys(ck, {"params": dict, "window": int, "waypoint_dim": int, "num_actions": int, "net": dict,
                                 "value_norm": dict}, path, "IMMP")
        for key, mine in (("window", self.s), ("waypoint_dim", self.wp_dim), ("num_actions", self.num_actions)):
            if ck[key] != mine:
                raise ConfigError(f"checkpoint has {key}={ck[key]} but this config gives {key}={mine} "
                                  "(obs_radius and highlevel.num_waypoints must match the checkpoint)", file=str(path), key=key)
        for key in ("hidden", "activation", "intent"):
            if ck["params"].get(key) != self.params.model_dump().get(key):
                raise ConfigError(f"checkpoint was trained with {key}={ck['params'].get(key)!r}; the config says "
                                  f"{self.params.model_dump().get(key)!r}", file=str(path), key=f"agents.params.{key}")
        if self.net.intent is not None:   # the intent module's width and inputs are details of the file: follow it
            file_arch = {"intent_channels": int(ck["params"].get("intent_channels", self.params.intent_channels)),
                         "intent_last_move": bool(ck["params"].get("intent_last_move", False)),
                         "intent_depth": int(ck["params"].get("intent_depth", 2))}
            for key, v in file_arch.items():   # unless the config asks for something else explicitly
                if key in self._explicit and getattr(self.params, key) != v:
                    raise ConfigError(f"checkpoint was trained with {key}={v!r}; the config says "
                                      f"{getattr(self.params, key)!r} (leave it unset to use the file's)",
                                      file=str(path), key=f"agents.params.{key}")
            self.replace_intent(file_arch["intent_channels"], file_arch["intent_last_move"], file_arch["intent_depth"])
        self.net.load_state_dict(ck["net"])
        self.value_norm.load_state_dict(ck["value_norm"])

    def replace_intent(self, channels: int, last_move: bool, depth: int | None = None) -> None:
        """Give the intent module ``channels`` conv width, ``depth`` conv layers (None: unchanged) and
        (``last_move``) the neighbours' last moves as input.

        Same width and depth: the module is kept, and gaining the last-move input it predicts exactly as before
        until trained (:meth:`.intent.IntentNet.with_last_move`); another width or depth: a fresh, untrained
        module. Used by :meth:`load` (the file's setting wins) and before fine-tuning a policy trained without them.

        Raises:
            ConfigError: this agent has no intent module.
        """
        if self.net.intent is None:
            raise ConfigError("this agent has no intent module", key="agents.params.intent")
        cur = self.net.intent
        depth = cur.depth if depth is None else int(depth)
        if channels != cur.body[0].out_channels or depth != cur.depth:
            self.net.intent = IntentNet(channels, last_move, depth)
        elif last_move != cur.last_move:
            self.net.intent = cur.with_last_move() if last_move else IntentNet(channels, depth=depth)
        self.params = self.params.model_copy(update={"intent_last_move": bool(last_move), "intent_channels": int(channels),
                                                     "intent_depth": depth})

    # --- training ---------------------------------------------------------------------------------
    @classmethod
    def make_trainer(cls, agent: "IMMPAgent", train: PPOTrainConfig, seed: int, *, channel=None, file: str | None = None):
        """The shared PPO trainer with IMMP's hooks: intent loss (if the module exists) and collaborative reward.

        Raises:
            ConfigError: ``train.intrinsic`` is set (IMMP supplies its own reward hook).
        """
        from coopsim.agents.ppo.trainer import PPOTrainer

        if train.intrinsic is not None:
            raise ConfigError("mapf/immp sets its own intrinsic hook (team reward, goal shaping); remove train.intrinsic",
                              file=file, key="train.intrinsic", value=train.intrinsic)
        p: IMMPParams = agent.params
        aux = [IntentLoss(p.intent_coef, agent.k, agent.s, agent.net.policy_dim)] if p.intent else []
        reward = CollaborativeReward(p.team_weight, p.goal_bonus, agent.k)
        return PPOTrainer(agent, train, seed, channel=channel, intrinsic=reward, aux_losses=aux, file=file)


_NOCONG = {"ordering": "balanced", "order_weight": 0.0, "path_weight": 0.0}
_BASE_HL = {"ordering": "nearest", "order_weight": 0.0, "path_weight": 0.0, "rounds": 0}

IMMP = Variant(IMMPAgent, defaults={})
"""``mapf/immp-v0``: IMMP (intent module, balanced ordering, congestion-weighted paths, team reward)."""
IMMP_NOCONG = Variant(IMMPAgent, defaults={"highlevel": _NOCONG})
"""``mapf/immp-nocong-v0``: ablation without the congestion term (shortest tours, unweighted paths)."""
IMMP_NOINTENT = Variant(IMMPAgent, defaults={"intent": False}, fixed=("intent",))
"""``mapf/immp-nointent-v0``: ablation without intent prediction."""
DPPO = Variant(IMMPAgent, defaults={"intent": False, "team_weight": 0.0, "highlevel": _BASE_HL, "cs_pibt": False},
               fixed=("intent",))
"""``mapf/dppo-v0``: decentralized PPO baseline (same observation and waypoints; no intents, no congestion,
nearest-neighbour goal order, individual reward; acts on its own choice -- ``cs_pibt: true`` gives the
mechanism-for-mechanism comparison row)."""
