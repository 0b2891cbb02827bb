"""Train MAPPO with DDACOM's decoupled message generator on partial-observation simple_spread (or a mute speaker-listener); evaluate.

Variants (each trained once per seed with the shared PPO trainer, :mod:`coopsim.agents.ppo`, MAPPO critic on
the concatenated observations, hidden [64, 64]; the comm module is :class:`~coopsim.agents.ddacom.generator.DDACOMGenerator`):

* ``no_comm`` -- no messages (R_no_comm anchor);
* ``broadcast_ideal`` -- raw-observation messages, full broadcast, ideal channel (R_broadcast_ideal anchor);
* ``learned_ddacom`` -- learned 8-float messages, DDACOM's sender, Markov-modulated bandwidth channel;
* ``raw_ddacom`` -- raw-observation messages (23 floats on spread, 11 on speaker_listener), DDACOM's sender, the
  same Markov channel.

Generator options: ``--cf-coef`` / ``--cf-objective`` (the encoder's credit), ``--payload-dim`` (floats per learned
message: a copy is 28 + 4 P bytes, and the Markov channel's lowest level carries at most 48 B per step within the
one-step latency bound, so P <= 5 fits every level) and ``--encoder-lr`` (learned variants); ``--inbox hold``
(receivers read each sender's last copy of the episode, and DDACOM's sender sends a copy only when it moved by more
than ``--hold-threshold``; DDACOM-sent variants); see :class:`~coopsim.agents.ddacom.generator.GeneratorParams`.
One process at a time per ``--out`` (a second one is refused while the first runs).

Tasks (``--task``): ``spread`` -- ``mpe/simple_spread-v0``, N = 3, partial observation at ``--radius`` (default
0.5 m); ``speaker_listener`` -- ``mpe/simple_speaker_listener-v0`` with ``utterances: false``: the speaker's own
words reach nobody, so the goal colour reaches the listener only through the generator's messages (the speaker's
raw observation is its goal colour; a learned message must encode it). There no-communication is blind by
construction, so the anchor gap ``R_broadcast_ideal - R_no_comm`` is large and the normalized return of learned
messages can be judged (on ``spread`` MAPPO does not learn to use a teammate's observation at these budgets:
``docs/comm.md``). The speaker-listener task has no observation radius (``--radius`` is refused with it).

The Markov channel is ``configs/mpe/channels.yaml``'s ``markov`` entry scaled as in
:mod:`coopsim.agents.ddacom.evaluate` (per-sender capacity 0.15-0.5 x 25600 bit/s = 3840-12800 bit/s, 16-packet
queues, latency bound one step): the same network for every message format. A sender's full-broadcast
demand is ``(N - 1) * copy_bytes * 8 / dt_s``: learned 60 B copies, 9600 bit/s (the channel gives 0.4-1.33x
of it); raw 120 B copies, 19200 bit/s (0.2-0.67x). The speaker-listener runs cross the same network (one
teammate per sender: learned copies 4800 bit/s of demand, 0.8-2.67x; raw 72 B copies 5760 bit/s, 0.67-2.2x). (Scaled to each format's own demand, 0.15-0.5x would be
0.3-1 copy per step, and a copy that needs more than one step to transmit is always lost at the one-step
latency bound.)

Evaluation (per seed): the trained policy acts greedily in ``--eval-envs`` envs for ``--eval-episodes``
consecutive 25-step episodes over one channel that is not reset between episodes (as in
:func:`coopsim.agents.ddacom.evaluate.run`), on its training channel and, for a DDACOM-sent variant, under each channel
of ``--eval-channels`` (``markov``, ``step``, ``sinusoid`` of ``configs/mpe/channels.yaml``, scaled alike; results'
variant ``<variant>/<channel>`` for a channel it was not trained on); normalised return
``(R - R_no_comm) / (R_broadcast_ideal - R_no_comm)`` with the anchors of the same seed.

Reruns into the same ``--out``: each (variant, seed) run records the settings it was trained with
(``<variant>/seed-<s>/ddacom_settings.json``: ``--task``, ``--radius``, ``--num-envs``, ``--policy-reads``,
``--steps``, and ``--cf-*`` / ``--inbox`` for the variants they shape); a finished run is reused and an interrupted one resumed only with the same settings (a larger ``--steps`` continues
training), and any other setting is refused before training starts (exit 2, "use another --out").
``results.json`` keeps the evals of the runs a rerun does not redo (fewer ``--seeds`` or ``--variants``) when they
were made with the same settings (the eval ones too), each variant with its own (``eval_settings``). A resumed run
continues exactly (the checkpoint holds the generator's runtime state). Seeds are ``--first-seed`` ..
``--first-seed + --seeds - 1``: two processes may train seeds 0-2 and 3-4 into two folders; copying every
``<variant>/seed-<s>`` into one folder and rerunning there with ``--seeds 5`` reuses them all and writes the table.

Usage::

    .venv/bin/python -m coopsim.agents.ddacom.train --seeds 5 --steps 60000 --out runs/ddacom_gen
    .venv/bin/python -m coopsim.agents.ddacom.train --task speaker_listener --policy-reads slots --seeds 3 --steps 1000000 \\
        --variants no_comm,broadcast_ideal,raw_ddacom,learned_ddacom --inbox hold --cf-objective error --out runs/ddacom_sl
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError

from coopsim.agents.ddacom.evaluate import RADIUS_HELP, RADIUS_TYPE, anchor_check, anchor_warning, ci95, load_channels
from coopsim.agents.ppo.agent import MAPPO
from coopsim.agents.ppo.config import PPOTrainConfig
from coopsim.agents.ppo.trainer import PPOTrainer
from coopsim.comm.ideal import IdealChannel
from coopsim.errors import ConfigError, float_at_least, int_at_least, int_in_range, run_script
from coopsim.platform.recorder import atomic_write_json, check_writable, dumps_json
from coopsim.platform.registry import make_component, make_scenario, pydantic_to_config_error
from coopsim.platform.trainer import CHECKPOINT_NAME, POLICY_NAME, SUMMARY_NAME, fit
from coopsim.platform.training import run_dir_lock

GEN = "coopsim.agents.ddacom.generator:DDACOMGenerator"
VARIANTS: dict[str, tuple[dict[str, Any] | None, str]] = {
    "no_comm": (None, "none"),
    "broadcast_ideal": ({"payload": "raw", "sender": "broadcast"}, "ideal"),
    "learned_ddacom": ({"payload": "learned", "sender": "ddacom"}, "markov"),
    "raw_ddacom": ({"payload": "raw", "sender": "ddacom"}, "markov"),
}
#: --task: (scenario id, its params); spread's obs_radius_m comes from --radius
TASKS: dict[str, tuple[str, dict[str, Any]]] = {
    "spread": ("mpe/simple_spread-v0", {"num_agents": 3}),
    "speaker_listener": ("mpe/simple_speaker_listener-v0", {"utterances": False}),
}
#: the Markov channel is that of the N = 3 spread evaluation for every task: one network, whatever the messages
NETWORK_AGENTS = 3
#: --radius when --task spread gives none (m)
DEFAULT_RADIUS = 0.5


def make_agent(variant: str, num_envs: int, radius: float | None, num_agents: int = 3, policy_reads: str = "attention",
               task: str = "spread", encoder: dict[str, Any] | None = None):
    """The MAPPO agent of ``variant`` on a fresh core of ``task`` (:data:`TASKS`) with ``num_envs`` envs: simple_spread
    of ``num_agents`` with partial observation at ``radius`` (m), or the mute speaker-listener (``radius`` None,
    ``num_agents`` not read); ``policy_reads``: the generator's param of that name; ``encoder``: the generator's
    ``cf_coef`` / ``cf_objective`` for a learned-payload variant (default :data:`ENCODER_DEFAULTS`) and ``inbox``
    for a DDACOM-sent one (``hold``: the generator's ``inbox: hold`` and :data:`HOLD_SENDER`)."""
    comm, _ = VARIANTS[variant]
    sid, params = TASKS[task]
    if task == "spread":
        params = {**params, "num_agents": num_agents, "obs_radius_m": radius}
    core = make_scenario(sid, num_envs=num_envs, **params)
    enc = {**ENCODER_DEFAULTS, **{k: v for k, v in (encoder or {}).items() if k in ENCODER_DEFAULTS}} \
        if learned(variant) else {}
    if ddacom_sent(variant) and (encoder or {}).get("inbox", "step") == "hold":
        enc.update(inbox="hold", sender_params={
            **HOLD_SENDER, "min_deviation_m": (encoder or {}).get("hold_threshold", HOLD_SENDER["min_deviation_m"])})
    spec = None if comm is None else {"module": GEN, "params": {**comm, "policy_reads": policy_reads, **enc}}
    return MAPPO(core, comm=spec, hidden=[64, 64])


def make_channel(variant: str, agent, channel: str | None = None):
    """The variant's channel: None, ideal, or the Markov bandwidth channel of the N = 3 spread evaluation
    (:data:`NETWORK_AGENTS`; per-sender capacity 3840-12800 bit/s), the same network for every task and format.
    ``channel``: another channel of ``configs/mpe/channels.yaml`` (``step``, ``sinusoid``) scaled the same way, for
    evaluating a DDACOM-sent variant (trained on ``markov``) there; None = the variant's training channel."""
    kind = VARIANTS[variant][1]
    if kind == "none":
        return None
    if kind == "ideal":
        return IdealChannel()
    cid, params = load_channels(NETWORK_AGENTS)[channel or kind]  # the network of the docs/comm.md evaluation
    return make_component("channel", cid, **params)


#: the channels of ``configs/mpe/channels.yaml`` a DDACOM-sent variant can be evaluated under (--eval-channels); it
#: is trained on :data:`TRAIN_CHANNEL`, and the evals on another channel c are results.json's variant ``<variant>/c``
EVAL_CHANNELS = ("markov", "step", "sinusoid")
TRAIN_CHANNEL = "markov"


def eval_keys(variants: list[str], channels: list[str]) -> list[str]:
    """results.json's eval keys of ``variants`` evaluated under ``channels``: a variant's own name for its training
    channel (and for the anchors, whose channels are none and ideal), ``<variant>/<channel>`` for the others."""
    keys: list[str] = []
    for v in variants:
        keys += [v if c == TRAIN_CHANNEL else f"{v}/{c}" for c in channels] if ddacom_sent(v) else [v]
    return keys


def evaluate_policy(variant: str, policy: Path, seed: int, radius: float | None, num_envs: int, episodes: int,
                    policy_reads: str = "attention", task: str = "spread",
                    encoder: dict[str, Any] | None = None, channel: str | None = None,
                    sender_threshold: float | None = None) -> dict[str, float]:
    """Greedy evaluation of a trained policy on its training channel, or on ``channel`` of :data:`EVAL_CHANNELS` (see
    module docstring). ``sender_threshold``: the DDACOM sender's resend threshold (``min_deviation_m``) for this
    evaluation instead of the one trained with (sending is decoupled from the policy; ``inbox: hold`` runs)."""
    agent = make_agent(variant, num_envs, radius, policy_reads=policy_reads, task=task, encoder=encoder)
    agent.load(policy)
    if sender_threshold is not None:
        agent.comm.sender.s.params.min_deviation_m = float(sender_threshold)
    core = agent.scenario
    ch = make_channel(variant, agent, channel)
    N = core.num_agents
    if ch is not None:
        ch.reset(seed, num_envs=num_envs, num_agents=N, dt_s=core.dt_s, scenario=core)
    returns = np.zeros((episodes, num_envs))
    t, inbox, slots = 0, None, 0
    new_episode = getattr(agent.comm, "new_episode", None)
    for ep in range(episodes):
        obs = core.reset(seed=seed * 100_003 + ep)
        if callable(new_episode):
            new_episode(None)
        start = t
        while not core.done.all():
            if inbox is not None and len(inbox):
                inbox = inbox.select(np.rint(inbox.t_sent_s / core.dt_s).astype(np.int64) >= start)
            slots += int(np.asarray(core.alive).sum()) * (N - 1)
            actions, out = agent.act(obs, inbox)
            res = core.step(actions)
            if ch is not None:
                ch.send(t, out)
                inbox = ch.deliver(t + 1)
                agent.on_feedback(ch.feedback(t + 1))
            returns[ep] += res.reward.sum(axis=1)
            obs = res.obs
            t += 1
    r: dict[str, float] = {"return": float(returns.mean())}
    if ch is not None:
        s = ch.stats()
        r["copies_offered"] = s.get("comm/offered_copies", 0.0)
        r["copies_lost"] = s.get("comm/lost_copies", 0.0)
        r["bytes_offered"] = s.get("comm/offered_bytes", 0.0)
        r["loss"] = r["copies_lost"] / r["copies_offered"] if r["copies_offered"] else 0.0
        r["messages_vs_broadcast"] = r["copies_offered"] / max(slots, 1)
    return r


def summarize(evals: dict[str, dict[int, dict[str, float]]]) -> dict[str, Any]:
    """Mean and 95% CI half-width over seeds of each variant's metrics and normalised return (a seed whose anchors
    tie has no ratio: left out), and the anchor gap's check (:func:`coopsim.agents.ddacom.evaluate.anchor_check`)."""
    seeds = sorted(set(evals["no_comm"]) & set(evals["broadcast_ideal"]))
    r0 = {s: evals["no_comm"][s]["return"] for s in seeds}
    r1 = {s: evals["broadcast_ideal"][s]["return"] for s in seeds}
    out: dict[str, Any] = {"seeds": seeds, "ideal_gap": ci95([r1[s] - r0[s] for s in seeds]), "rows": {}}
    for v, per in evals.items():
        ss = [s for s in seeds if s in per]
        if not ss:
            continue
        row = {"return": ci95([per[s]["return"] for s in ss]),
               "normalized_return": ci95([(per[s]["return"] - r0[s]) / (r1[s] - r0[s]) for s in ss
                                          if r1[s] != r0[s]] or [float("nan")])}
        for k in ("loss", "messages_vs_broadcast", "bytes_offered"):
            if k in per[ss[0]]:
                row[k] = ci95([per[s][k] for s in ss])
        out["rows"][v] = row
    out["zero_gap_seeds"] = [s for s in seeds if r1[s] == r0[s]]
    # the CI is over training seeds (the variance that matters for a learned policy): one seed has none
    anchors = [{"channel_name": "ideal", "sender": snd, "seed": s, "return": r[s]}
               for s in seeds for snd, r in (("none", r0), ("broadcast", r1))]
    out["anchor_check"] = anchor_check(anchors, seeds, out["ideal_gap"])
    return out


#: a (variant, seed) run's record of the settings it was trained with, beside its checkpoint
SETTINGS_NAME = "ddacom_settings.json"
#: the settings a run's policy depends on, as their options; a run is only continued or reused with the same ones
#: (``--steps`` may grow: training continues)
TRAIN_SETTINGS = {"task": "--task", "radius": "--radius", "cf_coef": "--cf-coef", "cf_objective": "--cf-objective",
                  "payload_dim": "--payload-dim", "encoder_lr": "--encoder-lr", "hold_threshold": "--hold-threshold",
                  "inbox": "--inbox", "num_envs": "--num-envs", "policy_reads": "--policy-reads",
                  "num_agents": "num_agents"}
#: what the evals of results.json also depend on: evals of other settings are not merged
EVAL_SETTINGS = ("task", "cf_coef", "cf_objective", "payload_dim", "encoder_lr", "inbox", "hold_threshold", "steps", "radius", "num_envs", "policy_reads", "eval_envs", "eval_episodes")


def rollout_steps(steps: int, num_envs: int) -> int:
    """The env steps a budget of ``steps`` trains: whole rollouts of ``num_envs`` x 25 steps."""
    per = num_envs * 25
    return -(-steps // per) * per


#: the encoder's params (--cf-coef, --cf-objective) and their defaults (the generator's): recorded and compared only
#: for the variants with a learned payload (the raw ones have no encoder, so these params change nothing there)
ENCODER_DEFAULTS = {"cf_coef": 0.1, "cf_objective": "value", "payload_dim": 8, "encoder_lr": None}
#: --inbox and its default: recorded and compared only for the variants with DDACOM's sender (with the ideal
#: broadcast every copy arrives every step, so holding the last one changes nothing there)
INBOX_DEFAULT = {"inbox": "step", "hold_threshold": 1e-6}
#: what --inbox hold gives DDACOM's sender: a copy goes out only when it differs from what its receiver holds (by more
#: than --hold-threshold, the Euclidean distance between payloads: the sender's ``min_deviation_m``), and the copies
#: of a step reported lossy are resent
HOLD_SENDER = {"min_deviation_m": INBOX_DEFAULT["hold_threshold"], "resend_lost": True}


def ddacom_sent(variant: str) -> bool:
    """Whether ``variant``'s copies are picked by DDACOM's sender."""
    comm = VARIANTS[variant.split("/")[0]][0]
    return comm is not None and comm["sender"] == "ddacom"


def learned(variant: str) -> bool:
    """Whether ``variant``'s messages come from the encoder."""
    comm = VARIANTS[variant.split("/")[0]][0]
    return comm is not None and comm["payload"] == "learned"


def run_settings(a: argparse.Namespace, variant: str | None = None) -> dict[str, Any]:
    """The training settings of this invocation for ``variant``, as :data:`SETTINGS_NAME` records them (the encoder's
    params only for a learned-payload variant)."""
    out = {"task": a.task, "radius": a.radius, "num_envs": a.num_envs, "policy_reads": a.policy_reads,
           "num_agents": 3 if a.task == "spread" else 2, "steps": a.steps}
    if variant is not None and learned(variant):
        out.update(cf_coef=a.cf_coef, cf_objective=a.cf_objective, payload_dim=a.payload_dim, encoder_lr=a.encoder_lr)
    if variant is not None and ddacom_sent(variant):
        out.update(inbox=a.inbox, hold_threshold=a.hold_threshold)
    return out


def _has_training(run_dir: Path) -> bool:
    return any((run_dir / f).is_file() for f in (CHECKPOINT_NAME, SUMMARY_NAME, POLICY_NAME))


def recorded_settings(run_dir: Path, out: Path) -> dict[str, Any]:
    """The settings ``run_dir`` (a run with training files) was trained with: its :data:`SETTINGS_NAME`; for a run
    trained before that file existed, the ``args`` of ``out/results.json`` when that file holds an eval of this very
    (variant, seed) (it was written by the invocation that trained it; a run copied in from another folder is not
    judged by this folder's args).

    Raises:
        ConfigError: the settings file is unreadable or not a JSON object (named), or it is missing and results.json
            does not speak for this run; the message says to restore it, remove the run folder or use another --out.
    """
    v, seed = run_dir.parent.name, run_dir.name.removeprefix("seed-")
    path = run_dir / SETTINGS_NAME
    if path.is_file():
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            d = exc
        if not isinstance(d, dict):
            why = f"unreadable ({d})" if isinstance(d, Exception) else "not a JSON object"
            raise ConfigError(f"{path}: {why}; it records what {run_dir} was trained with, so the run can be neither "
                              f"reused nor resumed: restore it, remove {run_dir} to train it again, or use another --out")
    else:
        try:
            res = json.loads((out / "results.json").read_text())
            d = res["args"] if seed in res["evals"][v] and isinstance(res["args"], dict) else None
        except (OSError, ValueError, KeyError, TypeError):
            d = None
        if d is None:
            raise ConfigError(f"{run_dir} has training files but no {SETTINGS_NAME} (written by every run since "
                              f"2026-12-06), and {out / 'results.json'} holds no eval of it, so what it was trained with "
                              f"is unknown (a run folder copied in from elsewhere?): copy its {SETTINGS_NAME} along, "
                              f"remove {run_dir} to train it again, or use another --out")
        d = {**d, "num_agents": 3 if d.get("task", "spread") == "spread" else 2}
    known = v in VARIANTS
    enc = {**(ENCODER_DEFAULTS if known and learned(v) else {}), **(INBOX_DEFAULT if known and ddacom_sent(v) else {})}
    keep = [k for k in (*TRAIN_SETTINGS, "steps") if k in d and (k not in ENCODER_DEFAULTS or k in enc)
            and (k not in INBOX_DEFAULT or k in enc)]
    return {"task": "spread", "policy_reads": "attention", "num_agents": 3, **enc, **{k: d[k] for k in keep}}


def settings_conflict(run_dir: Path, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """One line saying how ``new`` differs from the settings ``old`` that ``run_dir`` was trained with (a smaller
    ``--steps`` budget too), or None when the run may be reused or continued."""
    diffs = [f"{opt} {old[k]} (now {new.get(k)})" for k, opt in TRAIN_SETTINGS.items() if k in old and old[k] != new.get(k)]
    if old.get("task", "spread") != new.get("task", "spread"):  # the radius and agents follow from the task
        diffs = [f"--task {old.get('task', 'spread')} (now {new.get('task', 'spread')})"]
    if "steps" in old and "num_envs" in old and old["num_envs"] == new["num_envs"] and \
            rollout_steps(new["steps"], new["num_envs"]) < rollout_steps(old["steps"], old["num_envs"]):
        diffs.append(f"--steps {old['steps']} (now {new['steps']}, fewer; a larger --steps continues training)")
    if not diffs:
        return None
    what = "a finished run" if (run_dir / SUMMARY_NAME).is_file() else "the checkpoint of an unfinished run"
    return (f"{run_dir} ({what}) was trained with {', '.join(diffs)}; it does not fit this run's settings: use "
            f"another --out (or the same settings)")


def check_runs(out: Path, runs: list[tuple[str, int]], settings: Any) -> None:
    """Before any training: every (variant, seed) run of ``runs`` already in ``out`` (finished, or a checkpoint
    only) was trained with ``settings`` (:func:`settings_conflict`): a dict, or a function of the variant giving one.

    Raises:
        ConfigError: the first run that was not, naming its directory, the settings that differ (old and new) and
            "use another --out"; a file where a run folder goes; a run whose settings are unknown
            (:func:`recorded_settings`).
    """
    for v, seed in runs:
        run_dir = out / v / f"seed-{seed}"
        for p in (out / v, run_dir):
            if p.exists() and not p.is_dir():
                raise ConfigError(f"{p} is a file where this run keeps the folder {out / v / f'seed-{seed}'}/: move it "
                                  f"away or use another --out")
        if not _has_training(run_dir):
            continue
        why = settings_conflict(run_dir, recorded_settings(run_dir, out), settings(v) if callable(settings) else settings)
        if why:
            raise ConfigError(why)


def train_one(variant: str, seed: int, cfg: PPOTrainConfig, out: Path, radius: float | None,
              policy_reads: str = "attention", settings: dict[str, Any] | None = None,
              task: str = "spread", encoder: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train (or resume, or skip if finished) one (variant, seed); returns the train summary. ``settings``
    (:func:`run_settings`) are recorded beside the run (:data:`SETTINGS_NAME`) before it trains."""
    run_dir = out / variant / f"seed-{seed}"
    if (run_dir / SUMMARY_NAME).is_file():
        s = json.loads((run_dir / SUMMARY_NAME).read_text())
        if s["env_steps"] >= cfg.total_env_steps:
            print(f"{variant} seed {seed}: reusing the finished run {run_dir} ({s['env_steps']:,} env steps)", flush=True)
            return s
    if (run_dir / CHECKPOINT_NAME).is_file():
        from coopsim.platform.training import steps_done

        total = f"{rollout_steps(cfg.total_env_steps, cfg.num_envs):,} env steps"
        try:
            at = f"from {steps_done(run_dir):,} of {total}"
        except Exception:  # noqa: BLE001 - a damaged checkpoint: fit's resume names it
            at = f"from its last checkpoint (of a budget of {total})"
        print(f"{variant} seed {seed}: resuming {run_dir} {at}", flush=True)
    if settings is not None:  # before the first checkpoint: an interrupted run says what it was trained with
        old = recorded_settings(run_dir, out) if _has_training(run_dir) else None
        steps = max(settings["steps"], (old or {}).get("steps", 0))  # a continued run: its largest budget
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(run_dir / SETTINGS_NAME, {**settings, "steps": steps}, indent=1)
    torch.manual_seed(seed)
    agent = make_agent(variant, cfg.num_envs, radius, policy_reads=policy_reads, task=task, encoder=encoder)
    channel = make_channel(variant, agent)
    trainer = PPOTrainer(agent, cfg, seed, channel=channel if channel is not None else None)
    return fit(trainer, cfg, run_dir, resume=(run_dir / CHECKPOINT_NAME).is_file(), description=f"{variant} seed {seed}")


def eval_settings(args: dict[str, Any], variant: str) -> dict[str, Any]:
    """The settings ``variant``'s evals depend on, from an invocation's ``args`` (defaults filled in): the common ones of
    :data:`EVAL_SETTINGS`, the encoder's (--cf-coef, --cf-objective) only for a learned-payload variant and --inbox
    only for a DDACOM-sent one."""
    full = {"task": "spread", "policy_reads": "attention", **ENCODER_DEFAULTS, **INBOX_DEFAULT, **args}
    return {k: full.get(k) for k in EVAL_SETTINGS
            if (k not in ENCODER_DEFAULTS or learned(variant)) and (k not in INBOX_DEFAULT or ddacom_sent(variant))}


def earlier_evals(out: Path, a: argparse.Namespace, rerun: set[str] | None = None
                  ) -> tuple[dict[str, dict[int, dict]], dict[str, dict[int, float]], dict[str, dict[str, Any]]]:
    """The evals, train wall times and per-variant settings (:func:`eval_settings`) ``out/results.json`` holds that
    this run keeps: a variant's evals are kept when they were made with this run's common settings and, for a
    variant in ``rerun`` (this run's --variants), with its own settings too (a variant this run leaves alone keeps
    the encoder or inbox settings it was evaluated with: they change nothing for the others). A rerun with fewer
    seeds or variants therefore keeps them. Evals left out are named in a printed line with the settings that differ.

    Raises:
        ConfigError: ``out/results.json`` exists but is unreadable or not this command's (it is never replaced then).
    """
    path = out / "results.json"
    if not path.exists():
        return {}, {}, {}
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        d = exc
    if not (isinstance(d, dict) and isinstance(d.get("args"), dict) and isinstance(d.get("evals"), dict)):
        why = f"unreadable ({d})" if isinstance(d, Exception) else "not a results file of this command (no args and evals)"
        raise ConfigError(f"{path}: {why}; this command writes its table there and does not replace a file it cannot "
                          f"read: move it away (or delete it: the evals are made again from the runs) or use another "
                          f"--out")
    args, evals = d["args"], d["evals"]
    now = vars(a)
    stored = d.get("eval_settings") if isinstance(d.get("eval_settings"), dict) else {}
    wall_old = d.get("train_wall_s") if isinstance(d.get("train_wall_s"), dict) else {}
    got: dict[str, dict[int, dict]] = {}
    wall: dict[str, dict[int, float]] = {}
    settings: dict[str, dict[str, Any]] = {}
    dropped: list[str] = []
    for v, per in evals.items():
        base, _, chan = v.partition("/")
        if base not in VARIANTS or (chan and (chan not in EVAL_CHANNELS or not ddacom_sent(base))) \
                or not isinstance(per, dict):
            continue
        # a file written before a setting existed: that setting took its default
        old_s = {**eval_settings({}, v), **stored[v]} if isinstance(stored.get(v), dict) else eval_settings(args, v)
        new_s = eval_settings(now, v)
        keys = new_s if rerun is None or base in rerun else [k for k in new_s if k not in ENCODER_DEFAULTS
                                                          and k not in INBOX_DEFAULT]
        diff = [f"--{k.replace('_', '-')} {old_s.get(k)} (now {new_s[k]})" for k in keys if old_s.get(k) != new_s[k]]
        if diff:
            dropped.append(f"{v} (made with {', '.join(diff)})")
            continue
        got[v], settings[v] = {int(s): e for s, e in per.items()}, old_s
        w = wall_old.get(v)
        if isinstance(w, dict):  # {seed: s}; a list (older files) is left out
            wall[v] = {int(s): x for s, x in w.items()}
    if dropped:
        print(f"{out / 'results.json'}: not kept, the evals of {'; '.join(dropped)}", flush=True)
    return got, wall, settings


_PROGRESS: dict[str, Any] = {}  # what an interrupt keeps: --out and the (variant, seed) run being trained


def kept_on_interrupt() -> str:
    """What an interrupted :func:`main` keeps (``run_script``'s ``kept``): the run being trained and the env steps
    its checkpoint holds, the evals in results.json, and that the same command resumes."""
    from coopsim.platform.training import steps_done

    out = _PROGRESS.get("out")
    if out is None:
        return ""  # interrupted before the arguments were read: run_script's default
    parts = []
    if _PROGRESS.get("run") is not None:
        run_dir = out / _PROGRESS["run"][0] / f"seed-{_PROGRESS['run'][1]}"
        try:
            steps = steps_done(run_dir)
        except Exception:  # noqa: BLE001 - a damaged checkpoint: the rerun's resume names it
            steps = None
        parts.append(f"{run_dir} with a checkpoint at {steps:,} env steps" if steps else
                     f"{run_dir} without a checkpoint yet (it starts over)")
    try:
        n = sum(len(per) for per in json.loads((out / "results.json").read_text())["evals"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        n = 0
    parts.append(f"{out / 'results.json'} with {n} eval(s)" if n else "no results.json yet")
    return f"{'; '.join(parts)}; the same command resumes (finished runs are reused)"


#: what results.json's top-level ``args`` are (a file pools the evals of several invocations with one --out)
ARGS_NOTE = ("args: the command-line settings of the latest invocation that wrote this file; the evals it pools may "
             "come from earlier ones: eval_settings has the settings of each eval, invocations every invocation's args")


def past_invocations(out: Path) -> list[dict]:
    """The ``invocations`` list of ``out/results.json`` (each earlier invocation's args and start time, oldest
    first); a file written before the list existed gives its one ``args`` as the only entry, no file an empty
    list. Raises nothing: :func:`earlier_evals` has already refused a file that is not this command's."""
    try:
        d = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(d, dict):
        return []
    if isinstance(d.get("invocations"), list):
        return [x for x in d["invocations"] if isinstance(x, dict)]
    return [{"args": d["args"]}] if isinstance(d.get("args"), dict) else []


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m coopsim.agents.ddacom.train", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int_in_range(1, 1000), default=5,
                    help="number of seeds S, 1-1000: seeds F..F+S-1 from the first seed F (default 5)")
    ap.add_argument("--first-seed", type=int_in_range(0, 9999), default=0,
                    help="first seed F, 0-9999 (default 0); two processes on two --out folders can train seeds 0-2 "
                         "and 3-4 at once, and a rerun over one folder holding every seed's run dir reuses them all")
    ap.add_argument("--steps", type=int_at_least(1), default=60000,
                    help="env steps per (variant, seed), >= 1, rounded up to whole rollouts of num_envs x 25 steps "
                         "(default 60000; e.g. --steps 200 with 16 envs trains 400); a larger value continues the "
                         "finished runs in --out")
    ap.add_argument("--num-envs", type=int_at_least(1), default=16,
                    help="envs stepped together in training, >= 1 (default 16)")
    ap.add_argument("--task", choices=list(TASKS), default="spread",
                    help="spread: partial-observation simple_spread, N = 3; speaker_listener: simple_speaker_listener "
                         "whose own words reach nobody, so the goal colour reaches the listener only through the "
                         "messages (default spread)")
    ap.add_argument("--radius", type=RADIUS_TYPE, default=None,
                    help=RADIUS_HELP.replace("(default 0.5)", f"(default {DEFAULT_RADIUS}; --task spread only)"))
    ap.add_argument("--eval-envs", type=int_in_range(1, 4096), default=32,
                    help="envs of each trained policy's greedy evaluation, 1-4096 (default 32)")
    ap.add_argument("--eval-episodes", type=int_in_range(1, 10000), default=10,
                    help="consecutive 25-step episodes of the evaluation over one channel, 1-10000 (default 10)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated variants to train, each once, of {', '.join(VARIANTS)} (default "
                         f"{','.join(VARIANTS)}); the normalized return needs no_comm and broadcast_ideal")
    ap.add_argument("--policy-reads", choices=["attention", "slots"], default="attention",
                    help="what the policy reads of the inbox: the receiver's attention summary, or every sender "
                         "slot's payload (the generator's policy_reads; default attention)")
    ap.add_argument("--cf-coef", type=float_at_least(0), default=ENCODER_DEFAULTS["cf_coef"],
                    help="weight of the counterfactual marginal value in the encoder's loss, >= 0 (default "
                         f"{ENCODER_DEFAULTS['cf_coef']}; learned-payload variants only)")
    ap.add_argument("--cf-objective", choices=["value", "error"], default=ENCODER_DEFAULTS["cf_objective"],
                    help="what a copy's marginal value measures: value = the change in the receiver's value "
                         "estimate, error = the reduction of its squared value error (default "
                         f"{ENCODER_DEFAULTS['cf_objective']}; learned-payload variants only)")
    ap.add_argument("--payload-dim", type=int_in_range(1, 256), default=ENCODER_DEFAULTS["payload_dim"],
                    help="floats per learned message, 1-256: a copy is 28 + 4 x this many bytes (default "
                         f"{ENCODER_DEFAULTS['payload_dim']}: 60 B copies, which the Markov channel's lowest level, "
                         "3840 bit/s = 48 B per 0.1 s step, cannot carry within the one-step latency bound; 5 or "
                         "fewer fit it; learned-payload variants only)")
    ap.add_argument("--encoder-lr", type=float_at_least(0, exclusive=True), default=None,
                    help="Adam learning rate of the encoder, in (0, 1] (default: the generator's lr, 1e-4, shared "
                         "with the receiver; learned-payload variants only)")
    ap.add_argument("--inbox", choices=["step", "hold"], default=INBOX_DEFAULT["inbox"],
                    help="what a receiver reads of DDACOM-sent copies: step = the copies delivered this step; hold = "
                         "each sender's last copy of the episode, and DDACOM's sender sends a copy only when it "
                         "differs from what its receiver holds (resending after lossy reports) (default "
                         f"{INBOX_DEFAULT['inbox']}; learned_ddacom and raw_ddacom only)")
    ap.add_argument("--hold-threshold", type=float_at_least(0, exclusive=True), default=INBOX_DEFAULT["hold_threshold"],
                    help="with --inbox hold: the change of a payload (Euclidean distance to the copy its receiver "
                         "holds, in payload units: metres for raw spread payloads) above which DDACOM's sender sends "
                         "it again, > 0 (default 1e-06: any change; a copy a receiver does not hold yet always goes)")
    ap.add_argument("--eval-channels", default=TRAIN_CHANNEL,
                    help=f"comma-separated channels of configs/mpe/channels.yaml to evaluate the DDACOM-sent variants "
                         f"under, of {', '.join(EVAL_CHANNELS)} (default {TRAIN_CHANNEL}, their training channel; the "
                         f"evals on another channel c are the results' variant <variant>/c; the anchors' channels "
                         f"are none and ideal whatever this says)")
    ap.add_argument("--out", default="runs/ddacom_gen",
                    help="results folder: <variant>/seed-<s>/ training runs and results.json; a rerun with the same "
                         "settings reuses or resumes its runs (default runs/ddacom_gen)")
    a = ap.parse_args(argv)
    if a.task != "spread" and a.radius is not None:
        ap.error(f"argument --radius: the {a.task} task has no observation radius (its listener sees every landmark; "
                 f"what it lacks is the goal colour, which only the messages carry); leave --radius out")
    if a.encoder_lr is not None and a.encoder_lr > 1:
        ap.error(f"argument --encoder-lr: invalid value {a.encoder_lr:g}: a learning rate in (0, 1] is required")
    if a.inbox != "hold" and a.hold_threshold != INBOX_DEFAULT["hold_threshold"]:
        ap.error(f"argument --hold-threshold: {a.hold_threshold} is read only with --inbox hold (with --inbox "
                 f"{a.inbox} the sender fills its budget with the top-ranked copies); add --inbox hold or leave "
                 f"--hold-threshold out")
    if a.task == "spread" and a.radius is None:
        a.radius = DEFAULT_RADIUS
    variants = [v.strip() for v in a.variants.split(",")]
    bad = [v for v in variants if v not in VARIANTS]
    if bad or not variants:
        ap.error(f"argument --variants: unknown variant(s) {', '.join(map(repr, bad))}; valid: {', '.join(VARIANTS)}")
    twice = next((v for i, v in enumerate(variants) if v in variants[:i]), None)
    if twice is not None:
        ap.error(f"argument --variants: variant {twice!r} given twice; give each variant once")
    channels = [c.strip() for c in a.eval_channels.split(",")]
    bad = [c for c in channels if c not in EVAL_CHANNELS]
    if bad or not channels or len(set(channels)) != len(channels):
        ap.error(f"argument --eval-channels: {a.eval_channels!r}: give each channel once, of "
                 f"{', '.join(EVAL_CHANNELS)} (configs/mpe/channels.yaml)")
    check_writable("--out", a.out, folder=True)  # before any training, not at the first seed's mkdir
    torch.set_num_threads(1)
    out = Path(a.out)
    try:
        cfg = PPOTrainConfig(total_env_steps=a.steps, num_envs=a.num_envs, rollout_steps=25, lr=7e-4, epochs=4,
                             minibatches=2, checkpoint_every=10 * 25 * a.num_envs, tensorboard=False, progress=False)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, PPOTrainConfig, file=None, key_prefix="train.") from None
    out.mkdir(parents=True, exist_ok=True)
    with run_dir_lock(out, who="python -m coopsim.agents.ddacom.train"):  # one process per --out at a time
        encoder = {"cf_coef": a.cf_coef, "cf_objective": a.cf_objective, "payload_dim": a.payload_dim,
                   "encoder_lr": a.encoder_lr, "inbox": a.inbox,
                   "hold_threshold": a.hold_threshold}
        settings = lambda v: run_settings(a, v)  # noqa: E731 - per variant: the encoder's params for learned ones
        _PROGRESS.clear()
        _PROGRESS.update(out=out, run=None)
        seeds = range(a.first_seed, a.first_seed + a.seeds)
        check_runs(out, [(v, s) for s in seeds for v in variants], settings)  # before any training
        old_evals, old_wall, old_settings = earlier_evals(out, a, set(variants))
        invocations = past_invocations(out) + [{"args": vars(a), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                         time.gmtime())}]
        eval_sets = {**old_settings, **{v: eval_settings(vars(a), v) for v in variants}}
        keys = eval_keys(variants, channels)
        eval_sets.update({k: eval_settings(vars(a), k) for k in keys})
        evals: dict[str, dict[int, dict[str, float]]] = {
            k: {} for k in eval_keys(list(VARIANTS), list(EVAL_CHANNELS)) if k in keys or k in old_evals}
        wall: dict[str, dict[int, float]] = {v: {} for v in evals}
        for v, per in old_evals.items():  # kept unless rerun below
            evals[v].update(per)
            wall[v].update(old_wall.get(v, {}))
        rerun = {(k, s) for s in seeds for k in keys}
        kept = sorted((v, s) for v, per in old_evals.items() for s in per if (v, s) not in rerun)
        if kept:
            print(f"{out / 'results.json'}: keeping its evals of {len(kept)} run(s) of the same settings that this run "
                  f"does not redo ({', '.join(f'{v}/seed-{s}' for v, s in kept)})", flush=True)
        t0 = time.time()
        result: dict[str, Any] = {}
        for seed in seeds:  # seeds outermost: an interrupted sweep still has complete seeds
            for v in variants:
                _PROGRESS["run"] = (v, seed)
                s = train_one(v, seed, cfg, out, a.radius, a.policy_reads, settings(v), a.task, encoder)
                for k in [k for k in keys if k.partition("/")[0] == v]:
                    wall[k][seed] = s["wall_time_s"]
                    evals[k][seed] = evaluate_policy(v, out / v / f"seed-{seed}" / POLICY_NAME, 10_000 + seed,
                                                     a.radius, a.eval_envs, a.eval_episodes, a.policy_reads, a.task,
                                                     encoder, channel=k.partition("/")[2] or None)
                    print(f"seed {seed} {k}: {evals[k][seed]} (train {s['wall_time_s']:.0f} s over all sessions; "
                          f"this invocation {time.time() - t0:.0f} s)", flush=True)
            done = len(set.intersection(*(set(per) for per in evals.values())))  # seeds with an eval of every variant
            result = {"args": vars(a), "args_note": ARGS_NOTE, "invocations": invocations,
                      "eval_settings": {v: eval_sets[v] for v in evals}, "train_config": cfg.model_dump(),
                      "seeds_done": done,
                      "train_wall_s": {v: {str(k): w for k, w in sorted(d.items())} for v, d in wall.items()},
                      "evals": {v: {str(k): e for k, e in sorted(d.items())} for v, d in evals.items()}}
            if "no_comm" in evals and "broadcast_ideal" in evals:
                result["summary"] = summarize(evals)
            atomic_write_json(out / "results.json", result, indent=1)
        summary = result.get("summary")
        if summary is None:
            print(dumps_json(result["evals"], indent=1))
            missing = [v for v in ("no_comm", "broadcast_ideal") if v not in evals]
            print(f"no normalized return: it needs both anchor variants, no_comm (R_no_comm) and broadcast_ideal "
                  f"(R_broadcast_ideal); {' and '.join(missing)} not in --variants nor in {out / 'results.json'} "
                  f"(the evals above are the raw returns)")
            return
        print(dumps_json(summary, indent=1))
        if set(summary["seeds"]) != set(seeds):
            print(f"the table above pools seeds {', '.join(map(str, summary['seeds']))}: {out / 'results.json'} holds "
                  f"evals of the same settings for seeds this run did not ask for (it asked for "
                  f"{a.first_seed}..{a.first_seed + a.seeds - 1}); for a table of those alone use another --out")
        where = {"radius": a.radius} if a.task == "spread" else {}  # the speaker-listener task has no radius to blame
        warning = anchor_warning(summary["anchor_check"], **where, what="the normalized_return above",
                                 advice="give more --seeds (the CI is over training seeds) or a larger --steps")
        if warning:
            print(warning)


if __name__ == "__main__":
    run_script(main, kept=kept_on_interrupt)
