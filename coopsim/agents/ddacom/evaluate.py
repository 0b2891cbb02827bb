"""Evaluate message senders on simple_spread under partial observation, through coopsim channels.

One run = ``num_envs`` envs stepped together for ``episodes`` consecutive 25-step episodes over ONE
channel that is not reset between episodes (the network's state and the sender's rate estimate
carry over, as in a long deployment); messages sent in an earlier episode are discarded on arrival.
The loop is the runner's plus the feedback path: after ``deliver(t + 1)`` the channel's
``feedback(t + 1)`` is passed to the team's ``on_feedback``.

Metrics per run: mean team return per episode, copies offered / delivered / lost, messages as a
fraction of full broadcast (copies offered / (valid candidates x teammates), counted in the same run),
and for bandwidth channels the safe-rate utilization (oracle of :mod:`coopsim.comm.oracle`). The
normalized return is (R - R_no_comm) / (R_broadcast_ideal - R_no_comm), anchors over the ideal channel; the
table warns in one line when that anchor gap is not larger than three 95% CI half-widths (docs/comm.md's
radius check, :func:`anchor_check`), where the ratio is noise.

A rerun into the same ``--out`` reuses the finished seeds the file holds when every setting (seeds aside) is
the same, and computes only the missing ones; a file of the same settings is never replaced by fewer seeds, and a
file of other settings is kept until this run has finished more seeds than it holds, then deleted and replaced by
this run's result, whatever settings it had (the rule of ``coopsim.comm.ns3.experiment``; a note at the start says
so, naming the settings that differ and the seed at which it happens): until then the new result goes to
``<out>.partial-<settings hash>.json`` beside it (a rerun of the same command resumes from there too), and the output
says where each result is. Give each setting its own ``--out`` to keep them apart. An existing ``--out`` that is not a results file
of this tool (say ``--out README.md``, or a results file of ``coopsim.comm.ns3.experiment``) is refused, not replaced
(:func:`results_writer` tells the two tools' files apart).

Usage::

    .venv/bin/python -m coopsim.agents.ddacom.evaluate --out runs/ddacom_eval.json [--seeds 5]
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from coopsim.agents.comm_baselines.team import (COPY_BYTES, SpreadCommTeam, check_sender_params, check_senders,
                                                sender_class)
from coopsim.comm.oracle import safe_rate_oracle, utilization
from coopsim.comm.probe import yaml_text
from coopsim.errors import ConfigError, float_at_least, int_at_least, int_in_range, run_script
from coopsim.platform.recorder import atomic_write_json, check_writable, dumps_json
from coopsim.platform.stats import t_half_width
from coopsim.platform.registry import make_component, make_scenario
from coopsim.scenarios.mpe.tasks import SimpleSpreadParams

CONFIG_DIR = Path(__file__).resolve().parents[3] / "configs" / "mpe"
_ORACLE_CACHE: dict[str, np.ndarray] = {}  # the oracle depends on the channel and its seed only

#: the ``--radius`` option's argparse type (also ``ddacom.train``'s): a finite number > 0
RADIUS_TYPE = float_at_least(0, exclusive=True)
#: the --radius help of the DDACOM scripts (evaluate, train)
RADIUS_HELP = "partial-observation radius in metres, a number > 0: farther landmarks and agents are hidden (default 0.5)"
#: the diagonal of simple_spread's spawn square [-1, 1]^2 (2 sqrt 2 m): a radius at least this long hides nothing
ARENA_DIAGONAL_M = 2 * math.sqrt(2)


#: the source (under coopsim/) that the runs' results depend on: the scenario, the teams and senders, the channels
#: (ns-3's bridge too) and the run loop. A resumed --out and the cached anchors must come from the same code.
_CODE = ("agents/comm_baselines", "agents/ddacom", "comm", "scenarios/mpe", "platform/comm.py",
         "platform/scenario.py")
_CODE_SUFFIXES = (".py", ".cc", ".h", ".txt")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash (sha1 hex, 16 digits) of the source files of :data:`_CODE` and numpy's version: equal hashes, equal
    code (a resumed ``--out`` of this script or of the ns-3 experiment, or a cached anchor run, would otherwise mix
    results of other code). Read once per process, at the first call (before any run), so an edit while the
    experiment runs does not change it."""
    import coopsim

    root = Path(coopsim.__file__).resolve().parent
    h = hashlib.sha1(np.__version__.encode())
    for part in _CODE:
        p = root / part
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.suffix in _CODE_SUFFIXES and "__pycache__" not in f.parts and f.is_file():
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def radius_sees_all(radius: float | None) -> bool:
    """True when the partial-observation radius hides nothing (no radius, or one at least the arena's diagonal):
    every agent then sees every landmark and teammate, so a message tells nothing new and R_broadcast_ideal =
    R_no_comm whatever the size of the run."""
    return radius is None or radius >= ARENA_DIAGONAL_M


def run(sender: str, channel_id: str, channel_params: dict[str, Any] | None = None, *, sender_params: dict | None = None,
        num_agents: int = 3, obs_radius_m: float | None = 0.5, num_envs: int = 32, episodes: int = 10, seed: int = 0,
        oracle: bool = True, payload_floats: int = 3, record_series: bool = False, channel=None) -> dict[str, Any]:
    """Run one (sender, channel, seed) evaluation; returns its metrics (see module docstring).

    ``payload_floats`` is the task's message width (float32 values, >= 3). ``record_series`` adds ``series``:
    per step and env, ``delivered_bits`` (arrived during the step), ``offered_copies``, ``broadcast_copies``
    (the full-broadcast equivalent) and ``lost_copies`` (of the copies sent at that step), lists ``[T][E]``.
    ``channel``: an already built channel object to reuse (e.g. one ns-3 child for many runs), reset here.
    """
    core = make_scenario("mpe/simple_spread-v0", num_envs=num_envs, num_agents=num_agents, obs_radius_m=obs_radius_m)
    team = SpreadCommTeam(core, sender=sender, sender_params=sender_params or {}, payload_floats=payload_floats)
    ch = channel if channel is not None else make_component("channel", channel_id, **(channel_params or {}))
    ch.reset(seed, num_envs=num_envs, num_agents=num_agents, dt_s=core.dt_s, scenario=core)
    T = episodes * core.params.max_steps
    delivered_bits = np.zeros((T, num_envs))
    offered = np.zeros((T, num_envs))
    bcast = np.zeros((T, num_envs))
    lost = np.zeros((T, num_envs))
    returns = np.zeros((episodes, num_envs))
    t = 0
    inbox = None
    for ep in range(episodes):
        obs = core.reset(seed=seed * 100_003 + ep)
        team.reset(seed)
        start = t
        while not core.done.all():
            if inbox is not None and len(inbox):
                inbox = inbox.select(np.round(inbox.t_sent_s / core.dt_s).astype(np.int64) >= start)
            before = team.candidates_per_env.copy()
            actions, out = team.act(obs, inbox)
            bcast[t] = team.candidates_per_env - before
            offered[t] = np.bincount(out.env, minlength=num_envs)
            ch.send(t, out)
            res = core.step(actions)
            inbox = ch.deliver(t + 1)
            team.on_feedback(ch.feedback(t + 1))
            delivered_bits[t] = np.bincount(inbox.env, minlength=num_envs) * team.copy_bytes * 8
            if hasattr(ch, "last_step"):  # bandwidth-v0: a copy's fate is decided by the next step
                ls = ch.last_step
                lost[t] = (ls["lost_copies"] if "lost_copies" in ls else
                           sum(v for k, v in ls.items() if k.startswith("lost/") and k.endswith("_copies"))).sum(axis=(1, 2))
            returns[ep] += res.reward.sum(axis=1)
            obs = res.obs
            t += 1
    if hasattr(ch, "lost_bytes_by_send_step"):  # ns3-v0: losses are decided up to loss_timeout_s later
        lost = ch.lost_bytes_by_send_step(T) / team.copy_bytes
    s = ch.stats()
    out: dict[str, Any] = {
        "sender": sender, "channel": channel_id, "seed": seed,
        "return": float(returns.mean()), "return_per_env_episode": returns.reshape(-1).tolist(),
        "copies_offered": s.get("comm/offered_copies", 0.0),
        "copies_delivered": s.get("comm/delivered_copies", 0.0),
        "copies_lost": s.get("comm/lost_copies", 0.0),
        "broadcast_equivalent_copies": float(team.candidates_offered),
    }
    out["loss"] = out["copies_lost"] / out["copies_offered"] if out["copies_offered"] else 0.0
    out["messages_vs_broadcast"] = out["copies_offered"] / max(out["broadcast_equivalent_copies"], 1.0)
    if oracle and hasattr(ch, "capacity"):
        demand = team.demand_bps
        grid = np.linspace(0.01, 1.0, 100) * demand
        key = json.dumps([channel_id, channel_params, seed, num_envs, num_agents, T], sort_keys=True, default=str)
        if key not in _ORACLE_CACHE:
            _ORACLE_CACHE[key] = safe_rate_oracle(ch, T, team.copy_bytes, grid)
        safe = _ORACLE_CACHE[key]
        out["utilization"] = utilization(delivered_bits, safe, demand, num_agents, core.dt_s)
        out["mean_safe_rate_frac"] = float(np.minimum(safe, demand).mean() / demand)
    if hasattr(team.sender, "probe"):
        out["mean_estimate_frac"] = float(team.sender.probe.estimate_bps.mean() / team.demand_bps)
    out["demand_bps"] = team.demand_bps
    out["copy_bytes"] = team.copy_bytes
    if record_series:
        out["series"] = {"delivered_bits": delivered_bits.tolist(), "offered_copies": offered.tolist(),
                         "broadcast_copies": bcast.tolist(), "lost_copies": lost.tolist(),
                         "return_per_episode": returns.tolist()}
    return out


def load_channels(num_agents: int) -> dict[str, tuple[str, dict]]:
    """The channel configs of ``configs/mpe/channels.yaml``, traces scaled to the full-broadcast demand."""
    cfg = yaml.safe_load((CONFIG_DIR / "channels.yaml").read_text())
    demand = (1 + num_agents) * (num_agents - 1) * COPY_BYTES * 8 / 0.1
    out = {}
    for name, c in cfg["channels"].items():
        params = dict(c.get("params", {}))
        if "trace" in params:
            params["trace"] = {**params["trace"], "scale_bps": demand}
        out[name] = (c["id"], params)
    return out


def ci95(x: list[float]) -> tuple[float, float]:
    """Mean and Student-t 95% half-width of ``x``: :func:`coopsim.platform.stats.t_interval` as mean and half-width
    (:func:`coopsim.platform.stats.t_half_width`); the half-width is nan below two values (one seed has no
    interval: :func:`print_table` says so)."""
    return t_half_width(x)


#: progress of :func:`main`, for the message of an interrupted evaluation (:func:`kept_on_interrupt`)
_PROGRESS: dict[str, Any] = {}


def kept_on_interrupt() -> str:
    """What an interrupted ``main`` keeps (``run_script``'s ``kept``): the JSON file and how many seeds it holds;
    prints the table of the finished seeds first (the summary is already computed)."""
    out, done, total = _PROGRESS.get("out"), _PROGRESS.get("seeds_done", 0), _PROGRESS.get("seeds", 0)
    if out is None:
        return ""  # interrupted before the arguments were read: run_script's default
    protected = _PROGRESS.get("protected")  # (--out, its seeds) when this run's result went to a partial file
    also = f"; {protected[0]} kept as it was, with its {protected[1]} finished seed(s)" if protected else ""
    if not done:
        return f"nothing: no seed had finished, so {out} was not written{also}"
    summary = _PROGRESS.get("summary")
    if summary is not None:
        print(f"table of the {done} finished seed(s):", flush=True)
        print_table(summary)
    first = _PROGRESS.get("first_seed", 0)
    return f"{out} with {done} of {total} seed(s) (seeds {first}..{first + done - 1}), a valid JSON file{also}"


def check_sender_param_repeats(items: list[str]) -> None:
    """Refuse a ``--sender-param SENDER.KEY`` given twice (the last value would win silently).

    Raises:
        ConfigError: key ``--sender-param``, naming the param and both values.
    """
    first: dict[str, str] = {}
    for item in items:
        head, eq, value = item.partition("=")
        if not eq:
            continue  # parse_sender_params says what is wrong with it
        head = head.strip()
        if head in first:
            raise ConfigError(f"{head} given twice ({first[head]} and {value.strip()}); give each sender param once",
                              key="--sender-param", value=item)
        first[head] = value.strip()


class TypedParams(dict):
    """One sender's ``--sender-param`` values (key -> value as read) with the text each was typed as
    (:attr:`typed`: ``{"max_growth": "null"}``), so that a message names an option as given, not as Python prints
    its value (``None``, ``False``)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.typed: dict[str, str] = {}


def _typed(params: dict[str, Any], key: str) -> str:
    """The value of ``params[key]`` as typed (:class:`TypedParams`), or as YAML writes it: null, true, 0.5."""
    typed = getattr(params, "typed", {})
    return typed[key] if key in typed else yaml_text(params[key])


def parse_sender_params(items: list[str], senders: list[str], *, check: bool = True) -> dict[str, dict]:
    """``["ddacom.target_utilization=0.6", ...]`` -> ``{"ddacom": {"target_utilization": 0.6}}``: the
    ``--sender-param`` options of this command and of ``python -m coopsim.comm.ns3.experiment``, checked before any
    run as the sender will use them.

    Each item is ``SENDER.KEY=VALUE`` for a sender the run includes, each value read as a ``coopsim run`` override's (:func:`coopsim.platform.config.parse_override`:
    ``1e3`` is a number, ``'"1.75"'`` a string, refused where a number is taken); an empty value is refused (YAML
    would read it as null and switch an option off unseen), and ``None`` for an option that takes null says to write
    ``null``. With ``check``, each sender's params are then checked as the sender will use them
    (:func:`check_sender_params`, :func:`check_sender_build`); without it the caller checks them with the rest of the
    sender's params (:func:`check_config_sender_params`: an option may need a key of the file, e.g. ``hold_steps``
    the file's ``max_hold_steps``).

    Each sender's params are a :class:`TypedParams` (a dict that also keeps each value's text as typed).

    Raises:
        ConfigError: key ``--sender-param`` (a malformed item or a sender not run) or ``--sender-param
            SENDER.KEY`` (a refused key or value), naming the value and what is valid.
    """
    import typing

    from coopsim.platform.config import parse_override, reject_yaml11_numbers

    out: dict[str, dict] = {}
    for item in items:
        head, eq, value = item.partition("=")
        snd, dot, key = head.partition(".")
        if not (eq and dot and snd and key):
            raise ConfigError("expected SENDER.KEY=VALUE", key="--sender-param", value=item)
        if snd not in senders:
            raise ConfigError(f"sender {snd!r} is not run; run senders: {senders}", key="--sender-param", value=item)
        where = f"--sender-param {snd}.{key}"
        f = sender_class(snd).Params.model_fields.get(key)
        takes_null = f is not None and type(None) in typing.get_args(f.annotation)
        if not value.strip():
            off = f", or write null to switch the option off ({snd}.{key}=null)" if takes_null else ""
            raise ConfigError(f"invalid value {value!r}: the value is empty (nothing after '='); give a value{off}",
                              key=where, value=value)
        if value.strip() == "None" and takes_null:
            raise ConfigError(f"invalid value 'None': write null for no value (None in Python), {snd}.{key}=null",
                              key=where, value=value)
        given = out.setdefault(snd, TypedParams())
        given[key] = parse_override(f"v={value}")[1]
        given.typed[key] = value.strip()
    for snd, params in (out.items() if check else ()):
        reject_yaml11_numbers(params, sender_class(snd).Params, key_prefix=f"--sender-param {snd}.")
        check_sender_params(snd, params, key="--sender-param")
        check_sender_build(snd, params, key_prefix=f"--sender-param {snd}.")
    return out


#: the dimensions :func:`check_sender_build` resets a sender with: small, but enough to build its probe and buckets
CHECK_DIMS = dict(num_envs=1, num_agents=2, num_entities=4, dt_s=0.1, copy_bytes=100, demand_bps=1e5)
#: the probe's keys that DDACOM derives from its own (rates are fractions of the demand)
_PROBE_KEYS = {"initial_rate_bps": "initial_rate_frac", "min_rate_bps": "min_rate_frac",
               "max_rate_bps": "initial_rate_frac"}


def check_sender_build(name: str, params: dict[str, Any], *, key_prefix: str, file: str | None = None) -> None:
    """Build sender ``name`` with ``params`` and reset it with small dimensions (:data:`CHECK_DIMS`), so that what
    only the sender's parts check (DDACOM's probe: the cross-constraints of
    :class:`~coopsim.comm.probe.SafeRateProbeParams`) is refused before any anchor, oracle or ns-3 run, under the
    key the user gave (``key_prefix`` + the sender's param) rather than the part's own.

    Raises:
        ConfigError: key ``<key_prefix><param>`` (``file`` named when given), with the value and what is valid.
    """
    cls = sender_class(name)
    try:
        cls(**params).reset(**CHECK_DIMS)
    except ValueError as exc:  # a ConfigError too (the probe names its own key)
        part = getattr(exc, "key", None)
        k = part if part in cls.Params.model_fields else _PROBE_KEYS.get(part)
        msg = getattr(exc, "message", str(exc))
        if k is None:
            raise ConfigError(f"refused when the sender is built: {msg}", file=file,
                              key=key_prefix.rstrip(". "), value=params) from None
        raise ConfigError(msg, file=file, key=f"{key_prefix}{k}", value=params.get(k, getattr(exc, "value", None))) \
            from None


def check_config_sender_params(name: str, config_params: dict[str, Any], cli_params: dict[str, Any], *,
                               file: str | None) -> None:
    """Sender ``name``'s params of an experiment file (``sender_params.<name>`` in ``file``) with the
    ``--sender-param`` values ``cli_params`` over them, checked as the sender will use them
    (:func:`check_sender_params`, then :func:`check_sender_build`). A refusal names the option
    ``--sender-param <name>.<key>`` when the refused key came from it (or is at its default while options are given:
    ``hold_steps=300`` refuses the default ``max_hold_steps``, as without a file), with the file's key that is the
    reason for it when there is one (``capacity_window=4`` beside the file's ``delay_based: false``); else the file and
    ``sender_params.<name>.<key>``, with the options given beside it as typed (``ddacom.max_growth=null``, not
    ``None``): those that the check across keys involves (``hold_steps=300`` refuses the file's
    ``max_hold_steps: 250``), or every option given when none is.

    Raises:
        ConfigError: as said, with the value and what is valid.
    """
    from coopsim.platform.config import reject_yaml11_numbers

    prefix = f"sender_params.{name}."
    merged = {**config_params, **cli_params}
    try:
        reject_yaml11_numbers(merged, sender_class(name).Params, file=file, key_prefix=prefix)
        check_sender_params(name, merged, key="sender_params", file=file)
        check_sender_build(name, merged, key_prefix=prefix, file=file)
    except ConfigError as exc:
        k = (exc.key or "").removeprefix(prefix)
        also = [a.removeprefix(prefix) for a in exc.also if a.startswith(prefix)]  # a check across keys: the others
        if k in cli_params or (cli_params and k not in config_params):  # the option's, or at its default beside it
            in_file = [a for a in also if a in config_params and a not in cli_params]  # the file's key, the reason
            why = f" ({file} sets {prefix}{in_file[0]}: {_typed(config_params, in_file[0])})" if file and in_file else ""
            raise ConfigError(f"{exc.message}{why}", key=f"--sender-param {name}.{k}", value=exc.value,
                              also=exc.also) from None
        if cli_params:
            loss_based = _loss_based_recipe(name, merged, cli_params, k, exc, file=file)
            if loss_based is not None:
                raise loss_based from None
            cause = [c for c in cli_params if c in also] or list(cli_params)
            given = ", ".join(f"{name}.{c}={_typed(cli_params, c)}" for c in cause)
            raise ConfigError(f"{exc.message} (with --sender-param {given})", file=exc.file, key=exc.key,
                              value=exc.value, also=exc.also) from None
        raise


def _loss_based_recipe(name: str, merged: dict[str, Any], cli_params: dict[str, Any], key: str, exc: ConfigError, *,
                       file: str | None) -> ConfigError | None:
    """The refusal ``exc`` of the file's delay-based keys beside ``--sender-param ddacom.delay_based=false`` (the
    loss-based ablation of a delay-based file: ``exc`` names every such key of the file at once), told how to run
    it: a copy of the file without those keys, or each of them given its default as an option (paste-able); None
    for any other refusal (one of those keys given as an option too: the generic advice stands)."""
    from coopsim.agents.ddacom.sender import delay_based_conflicts, delay_based_default, delay_based_refusal

    conflicts = delay_based_conflicts(merged) if name == "ddacom" else {}
    if not (file and key in conflicts and f"sender_params.{name}.delay_based" in exc.also
            and "delay_based" in cli_params and not any(c in cli_params for c in conflicts)):
        return None
    these, each = (f"these {len(conflicts)} keys", "each") if len(conflicts) > 1 else (key, "it")
    options = " ".join(f"--sender-param {name}.{c}={yaml_text(delay_based_default(c))}" for c in conflicts)
    msg = delay_based_refusal(conflicts, advice=f"for the loss-based probe run a copy of {file} without {these}, or "
                                                f"give {each} its default with --sender-param too: {options}")
    return ConfigError(f"{msg} (with --sender-param {name}.delay_based={_typed(cli_params, 'delay_based')})",
                       file=exc.file, key=exc.key, value=exc.value, also=exc.also)


#: the ``writer`` field of the results files this module writes (its ``--out``)
WRITER = "coopsim.agents.ddacom.evaluate"
#: the ``writer`` field of the results files of ``python -m coopsim.comm.ns3.experiment`` (its ``--out``)
NS3_EXPERIMENT_WRITER = "coopsim.comm.ns3.experiment"


def results_writer(d: Any) -> str | None:
    """The command that wrote results file ``d`` (a parsed JSON): :data:`WRITER` (this module) or
    :data:`NS3_EXPERIMENT_WRITER`, so neither takes the other's file for its own (and replaces it). A file with a
    ``writer`` field names it (any other string is returned as it is); one written before that field existed is told
    by its keys: ``args`` (a dict) and no ``oracle`` is this module's, ``oracle`` (true or false) and no ``args`` the
    ns-3 experiment's (its files in benchmarks/results/ have ``command``, ``note``, ``oracle``; newer ones ``config``,
    ``settings``, ``oracle``). None when ``d`` is not a results file of either: not a dict with an integer
    ``seeds_done`` and a ``runs`` list (e.g. ``{"seeds_done": 1, "runs": []}``), or keys of neither."""
    if not (isinstance(d, dict) and isinstance(d.get("runs"), list) and isinstance(d.get("seeds_done"), int)
            and not isinstance(d["seeds_done"], bool)):
        return None
    if "writer" in d:
        return d["writer"] if isinstance(d["writer"], str) else None
    if isinstance(d.get("args"), dict) and "oracle" not in d:
        return WRITER
    if isinstance(d.get("oracle"), bool) and "args" not in d:
        return NS3_EXPERIMENT_WRITER
    return None


def _read_json(path: Path) -> Any:
    """The parsed JSON at ``path``, or None (no such file, unreadable, or not JSON)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def foreign_note(path: Path) -> str:
    """`` (it is a results file of python -m <tool>)`` when ``path`` holds a results file of the other tool
    (:func:`results_writer`), for the refusal of an ``--out`` that is not this command's; else ``""``."""
    w = results_writer(_read_json(path))
    return f" (it is a results file of python -m {w})" if w in (WRITER, NS3_EXPERIMENT_WRITER) else ""


def _read_results(path: Path) -> dict | None:
    """A results file of :func:`main` at ``path`` (its ``seeds_done`` and ``runs``; :func:`results_writer` says it is
    this module's), or None (no such file, or not one: another tool's results file too)."""
    d = _read_json(path)
    return d if results_writer(d) == WRITER else None


def _reusable_runs(d: dict | None, settings: dict, first: int, seeds: int, per_seed: int) -> list[dict]:
    """The runs of the finished seeds ``first..`` (at most ``seeds`` of them) of results file ``d`` when it was
    written with ``settings``; empty when it was not, or when a seed lacks some of its ``per_seed`` runs."""
    if d is None or d.get("settings") != settings:
        return []
    n = min(d["seeds_done"], seeds)
    want = range(first, first + n)
    runs = [r for r in d["runs"] if isinstance(r, dict) and r.get("seed") in want]
    if any(sum(r["seed"] == s for r in runs) != per_seed for s in want):
        return []
    return runs


def partial_path(out: Path, settings: dict) -> Path:
    """Where a result with fewer finished seeds than ``out`` holds (or of other settings) is written until it has
    as many: ``<out stem>.partial-<hash of the settings>.json``, beside ``out``."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    return out.with_name(f"{out.stem}.partial-{h}{out.suffix or '.json'}")


def main(argv: list[str] | None = None) -> None:
    _PROGRESS.clear()  # nothing from an earlier call in this process
    ap = argparse.ArgumentParser(prog="python -m coopsim.agents.ddacom.evaluate", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int_in_range(1, 1000), default=5,
                    help="number of seeds S, 1-1000: F..F+S-1 (default 5)")
    ap.add_argument("--first-seed", type=int_in_range(0, 9999), default=0,
                    help="F, the first seed, 0-9999 (default 0; the mechanisms were tuned on 100..104)")
    bounds = SimpleSpreadParams.model_fields["num_agents"].metadata  # the scenario's ge/le constraints
    n_max = next((m.le for m in bounds if getattr(m, "le", None) is not None), None)
    # both limits in the argument's type: N=1 and N=65 get the same message ("an integer in 2..64 is required")
    ap.add_argument("--num-agents", type=int_in_range(2, n_max) if n_max is not None else int_at_least(2), default=3,
                    help=f"agents and landmarks N, {f'2..{n_max}' if n_max else '>= 2'} (default 3)")
    ap.add_argument("--radius", type=RADIUS_TYPE, default=0.5, help=RADIUS_HELP)
    ap.add_argument("--num-envs", type=int_in_range(1, 4096), default=32,
                    help="envs stepped together per run, 1-4096 (default 32)")
    ap.add_argument("--episodes", type=int_in_range(1, 10000), default=10,
                    help="consecutive 25-step episodes per run over one channel, 1-10000 (default 10)")
    ap.add_argument("--senders", default="none,broadcast,periodic,novelty,ddacom",
                    help="comma-separated senders to compare on every channel, each once (default "
                         "none,broadcast,periodic,novelty,ddacom)")
    ap.add_argument("--out", default="runs/ddacom_eval.json",
                    help="the results JSON (default runs/ddacom_eval.json), rewritten after every seed; a rerun "
                         "with the same settings reuses its "
                         "finished seeds; a result of other settings there (another --num-agents, --senders, ...) is "
                         "DELETED, replaced by this run's, once this run has finished more seeds than it holds (the "
                         "rule of coopsim.comm.ns3.experiment; until then this run writes a partial file beside it): "
                         "give each setting its own --out to keep it; an existing file that is not a results file of "
                         "this command (e.g. an ns-3 experiment's) is refused")
    ap.add_argument("--sender-param", action="append", default=[], metavar="SENDER.KEY=VALUE",
                    help="a sender param (repeatable, each param once), e.g. ddacom.resend_lost=true or "
                         "novelty.threshold_m=0.2; periodic's period_steps is 4 unless given")
    a = ap.parse_args(argv)
    channels = load_channels(a.num_agents)
    senders = check_senders([s.strip() for s in a.senders.split(",")], file=None, key="--senders",
                            given=a.senders)  # "ddacom, none" as train's --variants reads it; each once
    check_sender_param_repeats(a.sender_param)
    overrides = parse_sender_params(a.sender_param, senders)
    check_writable("--out", a.out)
    out = Path(a.out)
    # every setting but --seeds and --out, as the file holds it (JSON values): what a rerun must match to reuse seeds
    settings = json.loads(dumps_json({
        "first_seed": a.first_seed, "num_agents": a.num_agents, "radius": a.radius, "num_envs": a.num_envs,
        "episodes": a.episodes, "senders": senders, "sender_params": overrides, "channels": channels,
        "code": code_fingerprint()}))  # seeds of other code are not reused (a changed sender gives other results)
    partial = partial_path(out, settings)
    per_seed = 2 + len(channels) * len(senders)
    previous = _read_results(out)
    if previous is None and (out.exists() or out.is_symlink()) and not (out.is_file() and out.stat().st_size == 0):
        # not ours (a typo such as --out README.md): never replaced; an empty file holds nothing to lose
        raise ConfigError(f"{out} exists and is not a results file of ddacom.evaluate{foreign_note(out)}; give "
                          "another --out or remove it", key="--out", value=a.out)
    prev_done = previous["seeds_done"] if previous is not None else 0  # never replaced by a result with fewer
    # a result of other settings is replaced only by one of more seeds (coopsim.comm.ns3.experiment's rule): it is
    # then deleted, whatever it held; the note says so up front, and when
    other = previous is not None and previous.get("settings") != settings
    results, source = [], out
    for path, d in ((out, previous), (partial, _read_results(partial))):
        runs = _reusable_runs(d, settings, a.first_seed, a.seeds, per_seed)
        if len(runs) > len(results):
            results, source = runs, path
    reused = len(results) // per_seed
    if other:
        old = previous.get("settings")
        diff = (", ".join(sorted(k for k in {*old, *settings} if old.get(k) != settings.get(k)))
                if isinstance(old, dict) else "its settings are not recorded")
        when = (f"this run asks for {a.seeds}, so --out is replaced when its seed {a.first_seed + max(prev_done, reused)} is "
                f"done"
                if a.seeds > max(prev_done, reused) else f"this run asks for {a.seeds}, so not in this run")
        print(f"note: {out} holds a result of {prev_done} seed(s) with other settings (differs in: {diff}); by the "
              f"rule of coopsim.comm.ns3.experiment that result is DELETED, replaced by this run's, once this run has "
              f"finished more seeds than it holds ({when}); until then this run's result goes to {partial}. Give "
              f"another --out to keep both", flush=True)
    _PROGRESS.update(out=str(source) if reused else a.out, seeds=a.seeds, first_seed=a.first_seed, seeds_done=reused)
    summary = None
    radius = a.radius
    if reused:
        print(f"reusing {reused} finished seed(s) from {source} (seeds {a.first_seed}..{a.first_seed + reused - 1}: "
              f"every setting is the same)", flush=True)
        summary = summarize(results, radius=radius)
        _PROGRESS.update(summary=summary)
    t0 = time.time()
    kw = dict(num_agents=a.num_agents, obs_radius_m=a.radius, num_envs=a.num_envs, episodes=a.episodes)
    told = replaced = False
    target = None
    for seed in range(a.first_seed + reused, a.first_seed + a.seeds):
        for snd in ("none", "broadcast"):  # the normalization anchors, over the ideal channel
            r = run(snd, "ideal-v0", {}, seed=seed, oracle=False, **kw)
            r["channel_name"] = "ideal"
            results.append(r)
        for cname, (cid, cparams) in channels.items():
            for snd in senders:
                sp = {**({"period_steps": 4} if snd == "periodic" else {}), **overrides.get(snd, {})}
                r = run(snd, cid, cparams, sender_params=sp, seed=seed, **kw)
                r["channel_name"] = cname
                results.append(r)
        summary = summarize(results, radius=radius)  # written after every seed: an interrupted sweep keeps its seeds
        done = seed - a.first_seed + 1
        # a file with more finished seeds is not replaced by fewer, nor one of other settings by as many
        target = out if done > prev_done or (done == prev_done and not other) else partial
        atomic_write_json(target, {"writer": WRITER, "args": vars(a), "settings": settings, "seeds_done": done,
                                   "summary": summary,
                                   "runs": [{k: v for k, v in r.items()
                                             # the anchors keep theirs: one seed's anchor check pairs the episodes
                                             if k != "return_per_env_episode" or r["channel_name"] == "ideal"}
                                            for r in results]}, indent=1)
        if target == partial and not told:
            if not other:  # (of other settings, the note at the start said where this run's result goes)
                print(f"{out} holds {prev_done} finished seed(s): it is kept until this run has as many; the partial "
                      f"result goes to {partial}", flush=True)
            told = True
        elif target == out and other and not replaced:
            print(f"{out} held {prev_done} seed(s) of other settings; deleted and replaced by this run's result "
                  f"({done} seed(s)), as the note at the start said", flush=True)
            replaced = True
        if target == out and partial.exists():
            partial.unlink()  # --out now holds at least as much
            if told or source == partial:
                print(f"{out} now holds {done} seed(s); removed the partial result {partial}", flush=True)
        _PROGRESS.update(out=str(target), seeds_done=done, summary=summary,  # after the write: never claims more
                         protected=(a.out, prev_done) if target == partial and previous is not None else None)
        print(f"seed {seed} done ({time.time() - t0:.0f} s)", flush=True)  # and in --out
    if reused == a.seeds and source == out and prev_done > a.seeds:
        print(f"{out} kept: it holds {prev_done} finished seeds with these settings, more than the {a.seeds} asked "
              f"for (the table is of seeds {a.first_seed}..{a.first_seed + a.seeds - 1})", flush=True)
    if target == partial or (target is None and source == partial):  # this run's result is not in --out
        print(f"this run's result ({a.seeds} seed(s)) is in {partial}; {out} kept as it was ({prev_done} seed(s)"
              f"{', other settings' if other else ''})", flush=True)
    print_table(summary)


_NO_RADIUS = object()


def summarize(results: list[dict], *, radius: Any = _NO_RADIUS) -> dict:
    """Mean and 95% CI over seeds of each (channel, sender) row, the anchor gap and its check (:func:`anchor_check`).
    ``radius``: the run's partial-observation radius (None: none), kept as ``radius_m`` for the table's hints."""
    by = {}
    for r in results:
        by.setdefault((r["channel_name"], r["sender"]), []).append(r)
    seeds = sorted({r["seed"] for r in results})
    anchor = {}  # (sender, seed) -> the first such anchor run's return; one pass, not one per seed (2000 seeds: 6.6 s)
    for r in results:
        if r["channel_name"] == "ideal" and r["sender"] in ("none", "broadcast"):
            anchor.setdefault((r["sender"], r["seed"]), r["return"])
    r0 = {s: anchor[("none", s)] for s in seeds}
    r1 = {s: anchor[("broadcast", s)] for s in seeds}
    gap = [r1[s] - r0[s] for s in seeds]
    out = {"ideal_gap": ci95(gap), "no_comm_return": ci95(list(r0.values())), "broadcast_ideal_return": ci95(list(r1.values()))}
    rows = {}
    for (cname, snd), rs in sorted(by.items()):
        row = {"return": ci95([r["return"] for r in rs]),
               # a seed whose anchors tie (zero gap, e.g. one short episode) has no ratio: left out, counted
               "normalized_return": ci95([(r["return"] - r0[r["seed"]]) / (r1[r["seed"]] - r0[r["seed"]]) for r in rs
                                          if r1[r["seed"]] != r0[r["seed"]]] or [math.nan]),
               "loss": ci95([r["loss"] for r in rs]),
               "messages_vs_broadcast": ci95([r["messages_vs_broadcast"] for r in rs])}
        if "utilization" in rs[0]:
            row["utilization"] = ci95([r["utilization"] for r in rs])
        rows[f"{cname}/{snd}"] = row
    out["rows"] = rows
    out["zero_gap_seeds"] = [s for s in seeds if r1[s] == r0[s]]
    out["anchor_check"] = anchor_check(results, seeds, out["ideal_gap"])
    if radius is not _NO_RADIUS:
        out["radius_m"] = radius
    return out


def anchor_check(results: list[dict], seeds: list[int], ideal_gap: tuple[float, float]) -> dict:
    """The radius check of docs/comm.md: is the anchor gap R_broadcast_ideal - R_no_comm larger than three 95% CI
    half-widths (``ideal_gap``: the summary's mean and Student-t half-width over seeds)? Only then is the
    normalized return, a ratio with that gap as denominator, a meaningful number.

    One seed has no half-width over seeds; the check then uses the half-width over that seed's env-episodes of the
    per-episode gap (the two anchors run the same episode starts, so the episodes pair up), when the results keep
    ``return_per_env_episode`` (as :func:`run`'s do) and there are two or more.

    Returns:
        ``{"gap", "half_width" (nan when there is none), "over": "seeds" | "env-episodes", "n",
        "meaningful": gap > 3 x half_width}``.
    """
    def anchor(snd: str, s: int) -> dict:
        return next(r for r in results if r["channel_name"] == "ideal" and r["sender"] == snd and r["seed"] == s)

    gap, half = ideal_gap  # over seeds (the summary's)
    over, n = "seeds", len(seeds)
    if len(seeds) == 1:
        e0, e1 = anchor("none", seeds[0]).get("return_per_env_episode"), anchor("broadcast", seeds[0]).get(
            "return_per_env_episode")
        if e0 is not None and e1 is not None and len(e0) == len(e1) >= 2:
            over, n = "env-episodes", len(e0)
            half = t_half_width([b - a for a, b in zip(e0, e1)])[1]
    gap = float(gap)
    ok = math.isfinite(half) and gap > 3 * half
    return {"gap": gap, "half_width": half, "over": over, "n": n, "meaningful": bool(ok)}


#: docs/comm.md's radius check at the default radius: a size at which the normalized return is meaningful
DOCS_ANCHOR = "--radius 0.5: --seeds 5 --num-envs 8 --episodes 10 give a gap of 5.24 +- 1.61 there"


def radius_hint(radius: Any = _NO_RADIUS, *, short: bool = False) -> str | None:
    """Why the anchor gap is about 0 when the radius is the cause (it hides nothing: :func:`radius_sees_all`), as
    the advice of a warning (``short``: a few words); None otherwise (also when the radius is not known)."""
    if radius is _NO_RADIUS or not radius_sees_all(radius):
        return None
    if short:
        return "the radius is the cause: it hides nothing; give a smaller --radius"
    r = ("no --radius" if radius is None else
         f"--radius {radius:g} is at least the arena's diagonal ({ARENA_DIAGONAL_M:.2f} m)")
    return (f"the radius is the cause, not the size of the run: {r}, so every agent sees every landmark and teammate "
            f"and a message tells it nothing new (R_broadcast_ideal = R_no_comm up to noise); give a smaller --radius "
            f"(docs/comm.md uses 0.5)")


def anchor_warning(check: dict | None, *, radius: Any = _NO_RADIUS,
                   what: str = "the normalized return column (norm. return)", advice: str | None = None) -> str | None:
    """One warning line when :func:`anchor_check` fails (None when it passes or the summary has no check).

    ``radius``: the run's radius; one that hides nothing (:func:`radius_hint`) is named as the cause. ``what``: the
    values the warning is about; ``advice``: what to give for a meaningful check (default: evaluate's options)."""
    if not check or check.get("meaningful", True):
        return None
    gap, half, n = check["gap"], check.get("half_width"), check.get("n", 0)
    over = "seed" if check.get("over", "seeds") == "seeds" else "env-episode"
    over = f"over {n} {over}s" + (" of 1 seed" if over == "env-episode" else "")
    if half is None or not math.isfinite(half):
        why = (f"the anchor gap R_broadcast_ideal - R_no_comm = {gap:.2f} has no 95% CI half-width (1 seed: a single "
               f"value)")
    else:
        why = (f"the anchor gap R_broadcast_ideal - R_no_comm = {gap:.2f} is not larger than 3 x its 95% CI "
               f"half-width {half:.2f} (= {3 * half:.2f}, {over})")
    if advice is None:
        advice = f"give more --seeds, --num-envs or --episodes, at the radius docs/comm.md reports ({DOCS_ANCHOR})"
    advice = radius_hint(radius) or advice
    return f"warning: {what} is not meaningful at this size: {why}; {advice}"


def _has_ci(m) -> bool:
    return m[1] is not None and math.isfinite(m[1])


def print_table(summary: dict) -> None:
    """The summary's rows, each value ``mean+-half-width`` (95% CI); a value without an interval (one seed)
    prints its mean alone, and the table says it has no CI."""
    g = summary["ideal_gap"]
    if _has_ci(g):
        print(f"R_broadcast_ideal - R_no_comm = {g[0]:.2f} +- {g[1]:.2f} (95% CI half-width)")
    else:
        print(f"R_broadcast_ideal - R_no_comm = {g[0]:.2f} (1 seed, no CI)")
    radius = summary.get("radius_m", _NO_RADIUS)  # a summary of an older file, or of the ns-3 experiment: unknown
    warning = anchor_warning(summary.get("anchor_check"), radius=radius)
    if warning:
        print(warning)
    if summary.get("zero_gap_seeds"):
        hint = radius_hint(radius, short=True) or "give more envs or episodes"
        print(f"normalized return leaves out seeds {summary['zero_gap_seeds']}: R_broadcast_ideal = R_no_comm there "
              f"(no gain to share; {hint})")
    cells = [m for row in summary["rows"].values() for m in row.values()]
    if not all(_has_ci(m) for m in cells):
        print("values without +-: 1 seed, no CI (give --seeds 2 or more for 95% intervals)")
    print(f"{'channel/sender':<24} {'norm. return':>16} {'utilization':>16} {'loss %':>14} {'msgs/bcast':>14}")

    def f(m, s=1.0):
        return f"{m[0] * s:7.3f}+-{m[1] * s:5.3f}" if _has_ci(m) else f"{m[0] * s:7.3f}"

    for k, row in summary["rows"].items():
        u = f(row["utilization"]) if "utilization" in row else "-"
        print(f"{k:<24} {f(row['normalized_return']):>16} {u:>16} {f(row['loss'], 100):>14} {f(row['messages_vs_broadcast']):>14}")


if __name__ == "__main__":
    run_script(main, kept=kept_on_interrupt)
