"""The runner loop: one step of a run flows one way through every layer.

::

    scenario.observe ─► team.act(obs, inbox) ─► shield.filter(joint_action) ─► scenario.step(safe_action)
           ▲                  │ outgoing messages                                   │
           └── channel.deliver(t+1), feedback(t+1) ◄── channel.send(t)         recorder (metrics.jsonl)

Episode ``e`` of seed ``s`` resets every component with the episode seed ``s * episodes + e``, so
distinct seeds never share an episode and a seed list ``[0, 1, 2]`` with one episode each uses
scenario seeds 0, 1, 2.
"""
from __future__ import annotations

import contextlib
import shlex
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from coopsim.errors import ConfigError, CoopsimError, in_file
from coopsim.platform import registry
from coopsim.platform.agent import Transition
from coopsim.platform.comm import add_comm_stats
from coopsim.platform.config import RunConfig, dump_config
from coopsim.platform.recorder import (JsonlWriter, WriteError, atomic_savez, atomic_write_json, atomic_write_text,
                                      new_run_dir, read_jsonl)
from coopsim.platform.stats import summarize


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``run_dir`` holds every finished episode and a valid summary."""

    def __init__(self, run_dir: Path):
        super().__init__(str(run_dir))
        self.run_dir = run_dir


@contextlib.contextmanager
def seeded_torch(seed: int):
    """Run the block with torch's global generator seeded with ``seed`` and restore its state afterwards.

    The runner builds the agent inside it, so an agent whose networks draw their initial weights from torch's
    global generator (PPO, QMIX, ...) and is not loaded from a checkpoint starts from the same weights in
    every run, and from the ones ``coopsim train`` gives seed ``seed`` (:func:`coopsim.platform.training.build_trainer`
    calls ``torch.manual_seed(seed)`` before building the agent). Without torch loaded, nothing is done.
    """
    import sys

    if "torch" not in sys.modules:  # agents without torch do not pay for importing it
        yield
        return
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


class RunParts:
    """The four components of a run, built from the registry (num_envs == 1); the agent is built under
    :func:`seeded_torch` with the first run seed, so an untrained learner's initial weights are reproducible."""

    def __init__(self, cfg: RunConfig, checkpoint: str | None = None, *, file: str | None = None):
        try:
            self.scenario = registry.make_scenario(cfg.scenario.id, num_envs=1, **cfg.scenario_params())
        except ConfigError as exc:
            raise scenario_error(exc, file) from None
        try:
            self._build(cfg, checkpoint, file)
        except BaseException:
            self.scenario.close()
            raise

    def _build(self, cfg: RunConfig, checkpoint: str | None, file: str | None) -> None:
        missing = [c for c in getattr(registry.spec("agent", cfg.agents.id).load(), "requires", ()) if not hasattr(self.scenario, c)]
        if missing:
            raise ConfigError(f"agent '{cfg.agents.id}' needs scenario capabilities {missing}, which '{cfg.scenario.id}' lacks",
                              file=file, key="agents.id", value=cfg.agents.id)
        check_shield_fits(cfg, self.scenario, file=file)
        with seeded_torch(cfg.seeds[0]):  # an agent's initial network weights, as `coopsim train` seeds them
            try:
                self.agent = registry.make_component("agent", cfg.agents.id, self.scenario, **cfg.agents.params)
            except ConfigError as exc:  # the agent's own checks know the key, not the file
                raise in_file(exc, file) from None
        if checkpoint is not None:
            from pathlib import Path as _P

            if not _P(checkpoint).exists():
                raise ConfigError(f"checkpoint not found: {checkpoint} (give policy.pt, checkpoint.pt or a training "
                                  "run's seed-<s> directory)", key="--checkpoint", value=str(checkpoint))
            self.agent.load(checkpoint)
        self.channel = registry.make_component("channel", cfg.channel.id, **cfg.channel.params)
        self.shield = registry.make_component("shield", cfg.shield.id, **cfg.shield.params)

    def close(self) -> None:
        self.channel.close()
        self.scenario.close()


def scenario_error(exc: ConfigError, file: str | None) -> ConfigError:
    """``exc``, raised by a scenario's own check (which names its param only, ``num_goals``, and no file),
    re-addressed to ``scenario.params.<key>`` of ``file`` (its ``also`` keys likewise); ``exc`` itself when it names
    both already."""
    if not ((exc.key and not exc.key.startswith("scenario.")) or (file and not exc.file)):
        return exc
    msg = str(exc)
    if exc.file and msg.startswith(f"{exc.file}: "):
        msg = msg[len(str(exc.file)) + 2:]
    if exc.key and msg.startswith(f"key '{exc.key}': "):
        msg = msg[len(f"key '{exc.key}': "):]
    def full(k: str | None) -> str | None:
        return k if not k or k.startswith("scenario.") else f"scenario.params.{k}"

    # the other params of a check across params (``also``) too, so an override of one of them can be blamed
    return ConfigError(msg, file=exc.file or file, key=full(exc.key), value=exc.value,
                       also=tuple(full(k) for k in getattr(exc, "also", ())))


def learns_online(cls: Any, params: dict[str, Any] | None = None) -> bool:
    """Whether an agent class learns while ``coopsim run`` plays it: it overrides
    :meth:`coopsim.platform.agent.AgentPlugin.observe` (a no-op in the base class; the runner hands it every step's
    transition, and e.g. ``graph_safe-v0`` and ``safe_baselines/iql-v0`` update their model there) and its params
    (``params``, the config's ``agents.params``) do not switch on ``greedy``, the evaluation mode those agents
    have (no exploration, no learning; ``coopsim.agents.graph_safe.train`` sets it the same way)."""
    from coopsim.platform.agent import AgentPlugin

    if getattr(cls, "observe", AgentPlugin.observe) is AgentPlugin.observe:
        return False
    field = getattr(getattr(cls, "Params", None), "model_fields", {}).get("greedy")
    if field is not None and bool((params or {}).get("greedy", field.default)):
        return False
    return True


def agent_learns_online(agent_id: Any, params: Any = None) -> bool:
    """:func:`learns_online` of the registered agent ``agent_id`` with ``params`` (a config's ``agents.id`` and
    ``agents.params``, e.g. as read back from a run's config.yaml); False when the id cannot be loaded. Raises
    nothing."""
    try:
        cls = _unwrap(registry.spec("agent", str(agent_id)).load())
        return learns_online(cls, params if isinstance(params, dict) else {})
    except Exception:  # noqa: BLE001 - an unknown or broken agent id: no claim either way
        return False


def shared_learner_note(agent_id: Any, params: Any, seeds: Any) -> str | None:
    """The one-line note of a run whose seeds are not independent samples: the agent learns during ``coopsim run``
    (:func:`agent_learns_online`) and the run has two or more seeds, which one learner plays in order, so a seed's
    episodes depend on the seeds before it in the list; None otherwise (summary.json's ``seeds_note``, the run's
    summary table). Raises nothing."""
    if not isinstance(seeds, (list, tuple)) or len(set(map(str, seeds))) < 2 or not agent_learns_online(agent_id, params):
        return None
    order = ", ".join(map(str, seeds[:3])) + (", ..." if len(seeds) > 3 else "")
    return (f"seeds are not independent samples: agent '{agent_id}' learns during the run and carries what it learnt "
            f"from one seed to the next (in the order {order}), while the 95% CI over seeds assumes independent "
            f"seeds; for independent seeds run one seed per run (coopsim sweep CONFIG --grid seeds=...)")


def _agent_class(cfg: RunConfig) -> type | None:
    """The agent class of ``cfg.agents.id`` (wrappers unwrapped), or None when it cannot be loaded (the run
    reports that itself)."""
    try:
        return _unwrap(registry.spec("agent", cfg.agents.id).load())
    except CoopsimError:
        return None


def untrained_learner_warning(cfg: RunConfig, checkpoint: str | None) -> str | None:
    """The warning for a run that evaluates a learner (an agent class with ``make_trainer``) with neither
    ``--checkpoint`` nor ``agents.params.checkpoint``: its policy is untrained (random initial weights); None
    otherwise, and None for a learner that learns during the run itself (:func:`learns_online`, e.g.
    ``graph_safe-v0``: ``coopsim run`` is its documented workflow), unless ``train.init_policy`` is set, which
    ``coopsim run`` does not read (the warning then says so)."""
    if checkpoint is not None or cfg.agents.params.get("checkpoint"):
        return None
    cls = _agent_class(cfg)
    if cls is None or not hasattr(cls, "make_trainer"):
        return None
    init = (cfg.train or {}).get("init_policy")
    if learns_online(cls, cfg.agents.params):
        if not init:
            return None
        return (f"agent '{cfg.agents.id}' learns during the run, starting from scratch: train.init_policy ({init}) is "
                f"read by `coopsim train` only; to start from that policy, pass --checkpoint {init}")
    has_param = "checkpoint" in getattr(getattr(cls, "Params", None), "model_fields", {})
    greedy = ("; agents.params.greedy is true, so it does not learn during the run either"
              if learns_online(cls, {**cfg.agents.params, "greedy": False}) else "")
    return (f"agent '{cfg.agents.id}' is a learner and no checkpoint was given: evaluating an untrained policy "
            f"(train it with `coopsim train CONFIG`, or pass --checkpoint"
            f"{' / agents.params.checkpoint' if has_param else ''}){greedy}"
            + (f"; train.init_policy ({init}) is read by `coopsim train` only: to evaluate that policy, pass "
               f"--checkpoint {init}" if init else ""))


def evaluated_file(checkpoint: str | Path) -> str:
    """The absolute path of the file ``--checkpoint checkpoint`` loads
    (:func:`coopsim.platform.trainer.resolve_policy_path`: a training seed directory's ``policy.pt``, or its
    ``checkpoint.pt`` when it has no ``policy.pt`` yet; any other path is itself).

    Raises:
        ConfigError: ``checkpoint`` is a training run directory (give one of its seed directories).
    """
    from coopsim.platform.trainer import resolve_policy_path

    return str(resolve_policy_path(Path(checkpoint).resolve()))


def checkpoint_note(checkpoint: str | Path | None) -> str | None:
    """The note for ``--checkpoint`` naming a training seed directory that has no ``policy.pt`` but a
    ``checkpoint.pt`` (its training was interrupted, or is still running): the run evaluates that mid-training
    checkpoint, e.g. ``seed-0 has no policy.pt (its training stopped at 52,736 of 60,000 env steps): evaluating
    checkpoint.pt``. The steps come from the checkpoint and the
    budget from the training run's ``config.yaml``; when they cannot be read, the note says so without numbers.
    Returns None for anything else (a file, a finished seed, no checkpoint). Never raises."""
    if checkpoint is None:
        return None
    from coopsim.platform.trainer import CHECKPOINT_NAME as CHECKPOINT_FILE, POLICY_NAME as POLICY_FILE

    try:
        seed_dir = Path(checkpoint).resolve()
        if not seed_dir.is_dir() or (seed_dir / POLICY_FILE).is_file() or not (seed_dir / CHECKPOINT_FILE).is_file():
            return None
    except (OSError, RuntimeError):  # an unreadable path, a symlink loop: the run reports it
        return None
    steps, budget = _checkpoint_steps(seed_dir), _training_budget(seed_dir.parent)
    name = seed_dir.name
    if steps is None:
        why = ("its training did not finish; the env steps its checkpoint.pt holds could not be read"
               + (f"; its budget: {budget:,} env steps" if budget is not None else ""))
    elif budget is None:
        why = f"its training stopped at {steps:,} env steps"
    elif steps < budget:
        why = f"its training stopped at {steps:,} of {budget:,} env steps"
    else:
        why = (f"its checkpoint.pt is at {steps:,} env steps, the end of its {budget:,}-step budget, but policy.pt is "
               f"missing")
    return f"{name} has no {POLICY_FILE} ({why}): evaluating {CHECKPOINT_FILE}"


def _checkpoint_steps(seed_dir: Path) -> int | None:
    """The env steps a training seed directory holds (:func:`coopsim.platform.training.steps_done`), or None when
    they cannot be read."""
    from coopsim.platform.training import steps_done

    try:
        return steps_done(seed_dir)
    except Exception:  # noqa: BLE001 - a note, never an error: the run itself reports an unreadable checkpoint
        return None


def _training_budget(run_dir: Path) -> int | None:
    """``train.total_env_steps`` of a training run's ``config.yaml`` (resumes record a changed budget there), or
    None."""
    import yaml

    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
        budget = cfg["train"]["total_env_steps"]
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError):
        return None
    return int(budget) if isinstance(budget, int) and not isinstance(budget, bool) else None


def train_override_keys(overrides: list[str] | tuple[str, ...]) -> list[str]:
    """The keys of the ``train`` / ``train.*`` overrides among ``overrides`` (``key=value`` texts), in order, each
    once; texts that are no valid override are left out (load_config reports them)."""
    from coopsim.platform.config import override_keys

    keys = [k for k, _, _ in override_keys(overrides) if k == "train" or k.startswith("train.")]
    return list(dict.fromkeys(keys))


def ignored_train_warning(cfg: RunConfig, overrides: list[str] | tuple[str, ...] = (),
                          checkpoint: str | None = None, *, command: str = "coopsim run") -> str | None:
    """The warning for ``train:`` settings that ``command`` (``coopsim run``, ``coopsim eval``) ignores: it never
    reads the ``train:`` section (``coopsim train`` does). For an agent that cannot be trained (its class has no
    ``make_trainer``) every key of the section is named, from the file or the command line; for a learner, whose
    config file's ``train:`` section is there for ``coopsim train``, only the ``train.*`` keys given on this command
    line (``overrides``), except ``train.init_policy`` where :func:`untrained_learner_warning` names it already.
    None when nothing is ignored."""
    if not cfg.train:
        return None
    cls = _agent_class(cfg)
    if cls is None:
        return None
    if not hasattr(cls, "make_trainer"):
        keys = [f"train.{k}" for k in cfg.train]
        return (f"agent '{cfg.agents.id}' cannot be trained, so `{command}` ignores {', '.join(keys)} (the train: "
                f"section is read by `coopsim train`, which needs a learner: `coopsim list agent` shows the agents)")
    keys = train_override_keys(overrides)
    if "train.init_policy" in keys and "train.init_policy" in (untrained_learner_warning(cfg, checkpoint) or ""):
        keys.remove("train.init_policy")
    if not keys:
        return None
    return (f"`{command}` ignores {', '.join(keys)} given on the command line: only `coopsim train` reads the "
            f"train: section")


def open_loop_shield_warning(cfg: RunConfig) -> str | None:
    """The warning for an open-loop agent (one whose class sets ``open_loop = True``: it replays a plan made at
    ``reset`` and never reads what happened, e.g. ``mapf/prioritized-v0``) under a shield other than
    ``passthrough-v0``: a shield that changes one planned move desynchronises the plan, the agent never replans, and
    the episode can fail (success 0, invalid moves) although the plan was conflict-free; None otherwise."""
    if cfg.shield.id == "passthrough-v0":
        return None
    try:
        cls = _unwrap(registry.spec("agent", cfg.agents.id).load())
    except CoopsimError:
        return None
    if not getattr(cls, "open_loop", False):
        return None
    return (f"agent '{cfg.agents.id}' plays an open-loop plan and never replans, so shield '{cfg.shield.id}' changing "
            f"any of its moves leaves the rest of the plan out of step (the run can end with success 0 although the "
            f"plan is conflict-free); its plans need no shield: use shield.id=passthrough-v0, or a closed-loop agent")


def scenario_params_warning(cfg: RunConfig) -> str | None:
    """The scenario's own warning about its params (a core class's ``params_warning(params)``, e.g. MG-MAPF's
    weaker ``lb`` at ``num_goals`` > 10: :meth:`~coopsim.scenarios.mapf.core.MGMAPFCore.params_warning`); None
    without one, or when the scenario or its params cannot be loaded (the run reports that itself)."""
    try:
        factory = registry.spec("scenario", cfg.scenario.id).load()
        check = getattr(_unwrap(factory), "params_warning", None)
        if check is None:
            return None
        params = _unwrap(factory).Params(**{**getattr(factory, "defaults", {}), **cfg.scenario_params()})
    except (CoopsimError, ValueError):  # pydantic's ValidationError is a ValueError
        return None
    return check(params)


def _unwrap(factory: Any) -> Any:
    return factory.cls if isinstance(factory, registry.Variant) else factory


def scenarios_with(capability: str) -> list[str]:
    """Registered scenario ids whose class has ``capability`` (those that cannot be loaded are left out)."""
    ids = []
    for s in registry.specs("scenario"):
        try:
            cls = _unwrap(s.load())
        except CoopsimError:
            continue
        if callable(getattr(cls, capability, None)):
            ids.append(s.id)
    return ids


def check_shield_fits(cfg: RunConfig, scenario: Any, *, file: str | None = None) -> None:
    """Raise a ConfigError (key ``shield.id``) when the configured shield needs a scenario capability
    (:func:`coopsim.platform.shield.required_capabilities`: ``constraints()``, ``true_support()``, ...) that
    ``scenario`` lacks. :class:`RunParts` calls it, so ``coopsim validate``, ``sweep`` and ``run`` refuse alike."""
    from coopsim.platform.shield import required_capabilities

    shield_cls = _unwrap(registry.spec("shield", cfg.shield.id).load())
    for cap in required_capabilities(shield_cls):
        if not callable(getattr(scenario, cap, None)):
            having = scenarios_with(cap)
            raise ConfigError(f"shield '{cfg.shield.id}' needs a scenario with {cap}(); scenario '{cfg.scenario.id}' "
                              f"has none (scenarios with {cap}: {', '.join(having) or 'none registered'}; or use "
                              f"shield.id=passthrough-v0)", file=file, key="shield.id", value=cfg.shield.id)


def play_episodes(core, agent, seed: int) -> list[dict[str, float]]:
    """Reset ``core`` and ``agent`` with ``seed`` and step them until every env is done, with no channel and no
    shield (planners, benchmarks, tests); returns ``core.episode_metrics()``, one dict per env.
    :func:`run_episode` is the full loop with the layers and the recorder."""
    obs = core.reset(seed=seed)
    agent.reset(seed)
    while not core.done.all():
        actions, _ = agent.act(obs)
        obs = core.step(actions).obs
    return core.episode_metrics()


def play_episode(core, agent, seed: int) -> dict[str, float]:
    """:func:`play_episodes`, env 0's ``episode_metrics()`` only."""
    return play_episodes(core, agent, seed)[0]


def joint_action_problem(actions: np.ndarray, n: int, num_envs: int, num_agents: int, t: int) -> str | None:
    """What is wrong with ``actions`` as an integer ``[num_envs, num_agents]`` joint action in ``0..n-1`` at step
    ``t``, or None when it is valid (the runner's per-step check; :class:`FirstStep` names the agent with it)."""
    a = np.asarray(actions)
    if a.shape == (num_envs, num_agents) and np.issubdtype(a.dtype, np.integer) and a.min() >= 0 and a.max() < n:
        return None
    return (f"the agent's joint action at step {t} is not valid for the scenario: shape {a.shape} ({a.dtype}), "
            f"values [{a.min() if a.size else '-'}, {a.max() if a.size else '-'}]; needed: integers 0..{n - 1} "
            f"(Discrete({n})), shape ({num_envs}, {num_agents})")


class FirstStep:
    """The one-step check of a run: the agent's first ``act()`` and the scenario's first ``step()`` with its joint
    action, so that an agent built for another scenario family fails with a message instead of deep inside the run.

    :func:`run_episode` applies it to the first step of a run's first episode, so nothing is built or played
    twice; :func:`check_first_step` applies it alone (``coopsim validate``, ``coopsim sweep``). Both go through
    the same checks, :meth:`act`, :func:`check_joint_action`, :meth:`messages` (the agent's first messages against
    the channel's size limit) and :meth:`step`, so their messages cannot drift apart.

    Args:
        cfg: the run config (its agent and scenario ids are named in the messages).
        file: the config file, named in the messages.
        passed: called once the checked step went through (the runner makes the run directory there).
    """

    def __init__(self, cfg: RunConfig, *, file: str | None = None, passed: Callable[[], None] | None = None):
        self.what = f"agent '{cfg.agents.id}' cannot act on scenario '{cfg.scenario.id}'"
        self.file, self.agent_id, self.passed = file, cfg.agents.id, passed

    def error(self, detail: str) -> ConfigError:
        """A ConfigError, key ``agents.id``: the agent cannot act on the scenario, because of ``detail``."""
        return ConfigError(f"{self.what}: {detail}", file=self.file, key="agents.id", value=self.agent_id)

    def act_failed(self, exc: Exception) -> ConfigError:
        return self.error(f"its first act() raised {type(exc).__name__}: {exc}")

    def step_failed(self, exc: Exception) -> ConfigError:
        return self.error(f"the scenario could not step with its joint action ({type(exc).__name__}: {exc})")

    # the checked step's three checks, which check_first_step and run_episode both call

    def act(self, agent, obs, inbox):
        """``agent.act(obs, inbox)``; any failure other than a CoopsimError is :meth:`act_failed`."""
        try:
            return agent.act(obs, inbox)
        except CoopsimError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of a foreign agent is a config mismatch
            raise self.act_failed(exc) from None

    def messages(self, channel, batch) -> None:
        """The channel's check of the agent's first messages (``check_message_size``, where a channel has one, e.g.
        ``ns3-v0``'s IP packet limit with its ``header_bytes``): a ConfigError it raises names the file."""
        check = getattr(channel, "check_message_size", None)
        if check is None or batch is None:
            return
        try:
            check(batch)
        except ConfigError as exc:
            raise in_file(exc, self.file) from None

    def step(self, scenario, joint_action):
        """``scenario.step(joint_action)``; any failure other than a CoopsimError is :meth:`step_failed`."""
        try:
            return scenario.step(joint_action)
        except CoopsimError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.step_failed(exc) from None


def check_joint_action(actions, scenario, n: int, t: int, check: FirstStep | None = None) -> None:
    """Raise when ``actions`` is not a valid joint action of ``scenario`` (``Discrete(n)``; nothing is checked
    when ``n`` is 0) at step ``t``: the :class:`FirstStep` error with ``check``, else a ConfigError (key
    ``agents.id``)."""
    problem = joint_action_problem(actions, n, scenario.num_envs, scenario.num_agents, t) if n else None
    if problem:
        raise check.error(problem) if check is not None else ConfigError(problem, key="agents.id")


def _action_n(scenario) -> int:
    return int(getattr(scenario.action_space, "n", 0) or 0)


def check_resets(scenario, cfg: RunConfig, *, file: str | None = None) -> None:
    """Reset ``scenario`` with each seed's first episode seed: catches what only a reset reveals (a bad map or
    scen file, more agents than a scen file has rows).

    Raises:
        ConfigError: key ``scenario.params``; the reset raised ValueError, KeyError or IndexError.
    """
    try:
        for s in cfg.seeds:
            scenario.reset(seed=s * cfg.episodes)
    except (ValueError, KeyError, IndexError) as exc:
        if isinstance(exc, ConfigError):
            raise scenario_error(exc, file) from None
        if isinstance(exc, CoopsimError):
            raise
        raise ConfigError(f"the scenario cannot be built with these params: {exc}", file=file,
                          key="scenario.params") from None


def check_first_step(parts: RunParts, cfg: RunConfig, *, file: str | None = None) -> None:
    """The agent acts once on the first seed's first reset, its joint action is checked against the
    scenario's action space, and the scenario steps once with it (the :class:`FirstStep` check, on its own).

    Raises:
        ConfigError: key ``agents.id``; the agent raised, returned a joint action of the wrong shape, or
            actions outside ``Discrete(n)``; or the scenario could not step with it. The channel's key (e.g.
            ``channel.params.header_bytes``) when the agent's first messages do not fit the channel
            (:meth:`FirstStep.messages`).
    """
    check = FirstStep(cfg, file=file)
    sc, seed = parts.scenario, cfg.seeds[0] * cfg.episodes
    try:
        obs = sc.reset(seed=seed)
        parts.agent.reset(seed)
    except CoopsimError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a foreign agent is a config mismatch
        raise check.act_failed(exc) from None
    actions, outgoing = check.act(parts.agent, obs, None)  # the same checks as run_episode's checked step
    a = np.asarray(actions)
    check_joint_action(a, sc, _action_n(sc), 0, check)
    check.messages(parts.channel, outgoing)
    check.step(sc, a)


#: steps between two calls of run_episode's ``on_step`` (the step progress of long episodes)
STEP_CALLBACK_EVERY = 1024
#: seconds an episode runs before the progress display shows its step count (short episodes never do)
STEP_PROGRESS_AFTER_S = 5.0


def run_episode(parts: RunParts, episode_seed: int, *, check: FirstStep | None = None,
                on_step: Callable[[int], None] | None = None, replay: bool = True
                ) -> tuple[dict[str, float], dict[str, np.ndarray] | None]:
    """Run one episode to its end; returns its metrics and the scenario's replay arrays (None if the scenario records
    none, or with ``replay=False``).

    With ``check`` (a run's first episode), a failure of the first ``act()`` or ``step()``, or an invalid first
    joint action, is the :class:`FirstStep` ConfigError (key ``agents.id``), and ``check.passed()`` is called once
    the first step went through. ``on_step(t)`` is called every :data:`STEP_CALLBACK_EVERY` steps (the progress of a
    long episode).
    """
    sc, agent, channel, shield = parts.scenario, parts.agent, parts.channel, parts.shield
    obs = sc.reset(seed=episode_seed)
    agent.reset(episode_seed)
    channel.reset(episode_seed, num_envs=sc.num_envs, num_agents=sc.num_agents, dt_s=sc.dt_s, scenario=sc)
    shield.reset(episode_seed, sc)
    inbox = None
    t = 0
    team_return = 0.0
    interventions = 0
    certified_steps = 0
    costs: dict[str, float] = {}
    terms: dict[str, float] = {}
    n_actions = _action_n(sc)
    while True:
        first = check if (check is not None and t == 0) else None  # the checked step: FirstStep's checks
        actions, outgoing = first.act(agent, obs, inbox) if first is not None else agent.act(obs, inbox)
        check_joint_action(actions, sc, n_actions, t, first)
        if first is not None:
            first.messages(channel, outgoing)
        safety_state = sc.constraints() if shield.needs_state else None
        safe, cert = shield.filter(safety_state, actions)
        interventions += int(np.count_nonzero(cert.changed))
        certified_steps += int(np.count_nonzero(cert.certified))
        channel.send(t, outgoing)
        alive_before = sc.alive.copy()
        res = first.step(sc, safe) if first is not None else sc.step(safe)
        if first is not None and first.passed is not None:
            first.passed()
        inbox = channel.deliver(t + 1)
        feedback = channel.feedback(t + 1)
        if feedback is not None:
            agent.on_feedback(feedback)
        agent.observe(Transition(obs, safe, res.reward, res.terminated, res.truncated, res.obs, alive_before, res.info))
        n_alive = max(int(alive_before.sum()), 1)
        # team-reward scenarios count the shared reward once per step; others sum every agent's reward
        share = (1.0 / n_alive) if sc.team_reward else 1.0
        team_return += float(res.reward.sum()) * share
        for k, v in res.info.items():
            if k.startswith("cost/"):
                costs[k] = costs.get(k, 0.0) + float(np.sum(v))
            elif k.startswith("reward/"):
                v = np.asarray(v)
                per_agent = v.ndim >= 2 and v.shape[-1] == sc.num_agents
                terms[k] = terms.get(k, 0.0) + float(np.sum(v)) * (share if per_agent else 1.0)
        obs = res.obs
        t += 1
        if bool(sc.done[0]):
            break
        if on_step is not None and t % STEP_CALLBACK_EVERY == 0:
            on_step(t)
    metrics: dict[str, float] = {"episode_return": team_return, "steps": t}
    metrics.update(sc.episode_metrics()[0])
    metrics.update(costs)
    metrics.update(terms)
    metrics["shield/interventions"] = interventions
    if shield.needs_state:
        metrics["shield/certified_steps"] = certified_steps
    add_comm_stats(metrics, channel.stats())  # adds up with the comm/* of a scenario's own channel (MPE comm_channel)
    metrics.update(shield.stats())
    metrics.update(agent.episode_metrics())
    arrays = sc.replay(0) if replay and hasattr(sc, "replay") else None
    return metrics, arrays


def run_config(
    cfg: RunConfig,
    *,
    checkpoint: str | None = None,
    run_dir: Path | None = None,
    progress: bool = True,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
    file: str | None = None,
    on_open: Callable[[Path], None] | None = None,
) -> Path:
    """Run every episode of every seed of ``cfg`` and write a run directory.

    Each component is built once. Before anything is written, the scenario is reset with each seed's first
    episode seed (:func:`check_resets`) and the first step of the first episode is checked (:class:`FirstStep`):
    a config that cannot run fails with a ConfigError naming ``file`` and leaves no run directory.

    ``on_open`` is called with the run directory once it exists (the CLI names it at the start, for logs of long
    runs). Returns the run directory. On ``KeyboardInterrupt`` the finished episodes are kept, the summary
    is written (``"interrupted": true``) and the interrupt is re-raised (as :class:`RunInterrupted` once the
    run directory exists).

    Raises:
        ConfigError, RegistryError: invalid components or params, or an agent that cannot act on the scenario
            (before the run directory exists).
        WriteError: a file of the run directory could not be written (a full disk): the run stops; the message
            (:func:`run_write_error`) names the file and what was kept, ``run_dir`` is set.
    """
    parts = RunParts(cfg, checkpoint=checkpoint, file=file)
    # lazily: episodes=10**8 must not build 10**8 pairs before the first episode (nor itertools.product, which
    # makes a tuple of each input)
    jobs = ((s, e) for s in cfg.seeds for e in range(cfg.episodes))
    n_jobs = len(cfg.seeds) * cfg.episodes
    bar = _progress(progress)
    shown_bar = contextlib.ExitStack()
    run: dict[str, Any] = {}  # the run directory and its writers, once the first step went through

    def open_run() -> None:
        d = Path(run_dir) if run_dir else new_run_dir(cfg.out_dir, cfg.name)
        d.mkdir(parents=True, exist_ok=True)
        text = dump_config(cfg)
        read = None  # the policy file the agent read
        if checkpoint is not None:
            # the policy that ran is part of the run: named in config.yaml (as the agent's own `checkpoint` param
            # where it has one, so `coopsim run config.yaml` repeats the evaluation) and in summary.json
            ck = str(Path(checkpoint).resolve())
            shown = cfg
            if "checkpoint" in type(parts.agent.params).model_fields:
                agents = cfg.agents.model_copy(update={"params": {**cfg.agents.params, "checkpoint": ck}})
                shown = cfg.model_copy(update={"agents": agents})
            text = f"# evaluated with --checkpoint {shlex.quote(ck)}\n" + dump_config(shown)
            atomic_write_text(d / "checkpoint.txt", ck + "\n")
            # the file the agent read (a seed directory's policy.pt, or its checkpoint.pt while training runs): what
            # `coopsim report` tells runs apart by (summary.json's checkpoint_file)
            read = evaluated_file(ck)
        atomic_write_text(d / "config.yaml", text)
        run.update(dir=d, metrics=JsonlWriter(d / "metrics.jsonl"), timing=JsonlWriter(d / "timing.jsonl"),
                   started=time.perf_counter(), checkpoint_file=read)
        if on_open is not None:  # before the progress bar shows: what it prints stays above the bar
            on_open(d)
        shown_bar.enter_context(bar)
        run["task"] = bar.add_task(f"{cfg.name}", total=n_jobs)

    check = FirstStep(cfg, file=file, passed=open_run)
    max_steps = getattr(getattr(parts.scenario, "params", None), "max_steps", None)
    max_text = f" of at most {max_steps:,}" if isinstance(max_steps, int) else ""
    interrupted = False
    error = None  # "Type: message" of an exception that ends the run after its directory exists
    write_failed: WriteError | None = None  # a file of the run directory could not be written (e.g. a full disk)
    summary_failed: WriteError | None = None
    try:
        with shown_bar:
            check_resets(parts.scenario, cfg, file=file)
            for i, (seed, ep) in enumerate(jobs):
                ep_seed = seed * cfg.episodes + ep
                t0 = time.perf_counter()

                def step_progress(t: int, i: int = i, t0: float = t0) -> None:  # a long episode: its step count
                    if "task" in run and time.perf_counter() - t0 >= STEP_PROGRESS_AFTER_S:
                        bar.update(run["task"], description=f"{cfg.name}  episode {i + 1} of {n_jobs}: step {t:,}"
                                                            f"{max_text}")

                keep_replay = cfg.replays is None or ep < cfg.replays  # the config's replays: N per seed
                metrics, replay = run_episode(parts, ep_seed, check=None if i else check, on_step=step_progress,
                                              replay=keep_replay)
                row = {"seed": seed, "episode": ep, "episode_seed": ep_seed, **metrics}
                if replay is not None:
                    atomic_savez(run["dir"] / "replays" / f"seed{seed}_ep{ep}.npz", **replay)
                run["metrics"].write(row)
                run["episodes"] = run.get("episodes", 0) + 1
                run["timing"].write({"seed": seed, "episode": ep, "wall_s": round(time.perf_counter() - t0, 6),
                                     **parts.agent.episode_timings(), **parts.shield.episode_timings()})
                if on_episode:
                    on_episode(row)
                bar.update(run["task"], advance=1, description=_bar_text(cfg.name, row))
    except KeyboardInterrupt:
        if not run:  # before the first step went through: nothing was written, nothing to keep
            raise
        interrupted = True
    except WriteError as exc:  # a full disk, say: the run stops, :func:`run_write_error` says what was kept
        if not run:  # config.yaml could not be written: no episode was kept
            raise
        write_failed, error = exc, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # the run failed: its summary says why (report shows it), then the error propagates
        error = f"{type(exc).__name__}: {exc}"
        if run:  # the CLI names the kept run directory instead of printing a traceback
            with contextlib.suppress(AttributeError):
                exc.run_dir = run["dir"]
        raise
    finally:
        if not run:
            parts.close()
        else:
            with _sigint_deferred() as late:   # a second Ctrl-C while the results are written waits for them
                run["metrics"].close()
                run["timing"].close()
                parts.close()
                try:
                    write_summary(run["dir"], interrupted=interrupted, wall_s=time.perf_counter() - run["started"],
                                  totals=parts.shield.run_stats(), error=error,
                                  checkpoint_file=run.get("checkpoint_file"),
                                  seeds_note=shared_learner_note(cfg.agents.id, cfg.agents.params, list(cfg.seeds)))
                except WriteError as exc:
                    summary_failed = exc
                else:
                    # no episode finished (interrupted or failed in the first): nothing to plot, and no warning that
                    # the plot failed
                    if run.get("episodes"):
                        try:
                            from coopsim.platform.report import plot_run

                            plot_run(run["dir"])
                        except Exception as exc:  # plotting never loses results
                            from coopsim.platform.report import record_plot_error

                            record_plot_error(run["dir"], exc)  # whole or not at all: a full disk leaves no empty file
            interrupted = interrupted or late[0]
            if summary_failed is not None and error is not None and write_failed is None:
                # another error ended the run and the summary that would record it could not be written
                raise run_write_error(run["dir"], summary_failed, summary_written=False, failed=error) from None
    if write_failed is not None or summary_failed is not None:
        raise run_write_error(run["dir"], write_failed or summary_failed, summary_written=summary_failed is None,
                              interrupted=interrupted)
    if interrupted:
        raise RunInterrupted(run["dir"])
    return run["dir"]


def run_write_error(run_dir: Path, exc: WriteError, *, summary_written: bool, failed: str | None = None,
                    interrupted: bool = False) -> WriteError:
    """The one-line error of a run that could not write a file of its run directory (``exc``, e.g. a full disk):
    what failed and what was kept (the finished episodes in ``metrics.jsonl``, and ``summary.json`` when
    ``summary_written``); ``failed`` is the "Type: message" of another error that ended the run first.

    Returns a :class:`WriteError` (a CoopsimError: the CLI prints it without a traceback) with ``run_dir`` set."""
    from coopsim.platform.report import invoked_as

    n = len(read_jsonl(run_dir / "metrics.jsonl"))
    kept = f"kept: the {n} finished episode{'' if n == 1 else 's'} in {run_dir / 'metrics.jsonl'}"
    if summary_written:
        kept += " and their summary.json (the run is incomplete)"
    else:
        kept += " (summary.json was not written)"
    if n:
        kept += f"; `{invoked_as()} report {shlex.quote(str(run_dir))}` shows them"
    first = f"the run failed ({failed}), then " if failed else ("the run was interrupted, then " if interrupted else
                                                                "the run stopped: ")
    new = WriteError(f"{first}{exc.message}; {kept}", path=exc.path, errno=exc.errno, strerror=exc.strerror)
    new.run_dir = run_dir
    return new


@contextlib.contextmanager
def _sigint_deferred():
    """Hold SIGINT while the block runs (main thread only); yields ``[arrived]``, True if one came meanwhile."""
    import signal
    import threading

    late = [False]
    if threading.current_thread() is not threading.main_thread():
        yield late
        return

    def hold(signum, frame):
        late[0] = True

    old = signal.signal(signal.SIGINT, hold)
    try:
        yield late
    finally:
        signal.signal(signal.SIGINT, old)


def write_summary(run_dir: Path, *, interrupted: bool = False, wall_s: float | None = None,
                  totals: dict[str, float] | None = None, error: str | None = None,
                  checkpoint_file: str | None = None, seeds_note: str | None = None) -> dict:
    """Write ``summary.json`` from the run directory's files and return what it wrote. ``totals`` (the shield's
    :meth:`run_stats`, totals over every episode of the run) go under ``totals``; ``error`` ("Type: message" of the
    exception that ended a failed run) under ``error``. ``checkpoint`` is the evaluated policy's absolute path as
    given to ``--checkpoint`` (the run directory's ``checkpoint.txt``), or null when none was given (``coopsim run``);
    ``checkpoint_file`` (the file read, :func:`evaluated_file`) is written when given. ``coopsim report`` tells runs
    of different policies apart by them. ``seeds_note`` (:func:`shared_learner_note`: the seeds share one learner,
    so they are not independent samples) is written as ``seeds_note`` when given.

    Raises:
        WriteError: summary.json could not be written.
    """
    rows = read_jsonl(run_dir / "metrics.jsonl")
    summary = {
        "episodes_finished": len(rows),
        "interrupted": interrupted,
        "metrics": summarize(rows),
    }
    if error:
        summary["error"] = error
    summary["checkpoint"] = None  # recorded as such: a run of no checkpoint, not one from before it was recorded
    if (run_dir / "checkpoint.txt").is_file():
        summary["checkpoint"] = (run_dir / "checkpoint.txt").read_text().strip()
    if checkpoint_file is not None:
        summary["checkpoint_file"] = str(checkpoint_file)
    if seeds_note:
        summary["seeds_note"] = seeds_note
    if wall_s is not None:
        summary["wall_s"] = round(wall_s, 3)
    if totals:
        from coopsim.platform.recorder import _jsonable

        summary["totals"] = {k: _jsonable(v) for k, v in sorted(totals.items())}
    timing = _mean_timings(run_dir / "timing.jsonl")
    if timing:
        summary["timing"] = timing
    atomic_write_json(run_dir / "summary.json", summary, indent=2, sort_keys=True)
    return summary


def _mean_timings(path: Path) -> dict[str, float]:
    """Per key of ``timing.jsonl`` (episode wall time ``wall_s``, plugins' ``episode_timings()``), its mean over
    the episodes that have it; ``{}`` without the file."""
    if not path.is_file():
        return {}
    sums: dict[str, list[float]] = {}
    for r in read_jsonl(path):
        for k, v in r.items():
            if k not in ("seed", "episode") and isinstance(v, (int, float)) and not isinstance(v, bool):
                sums.setdefault(k, []).append(float(v))
    return {k: round(float(np.mean(v)), 6) for k, v in sorted(sums.items())}


def _bar_text(name: str, row: dict) -> str:
    """The progress line's text: the latest episode's headline metrics, labelled as such (the summary table
    printed at the end has the means)."""
    shown = [k for k in ("success", "soc", "soc_over_lb", "win", "episode_return") if k in row][:3]
    return name + "  last episode: " + "  ".join(f"{k}={row[k]:.3g}" for k in shown)


def _progress(enabled: bool):
    """The run's progress bar; plain lines when stdout is not a terminal (:mod:`coopsim.platform.progress`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from coopsim.platform.progress import make_progress

    return make_progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                         TimeRemainingColumn(), enabled=enabled, unit="episodes")
