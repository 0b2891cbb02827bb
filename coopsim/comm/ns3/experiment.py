"""DDACOM and the comm baselines on simple_spread over ``ns3-v0`` (configs/ns3/*.yaml), with the issue-6 metrics.

First the normalization anchors, no communication and full broadcast over ``ideal-v0``, for ``anchor_seeds``
seeds 0..K-1 (default: ``seeds``; they need no ns-3, so many seeds are cheap), each with the same envs,
episodes and reset seeds as an ns-3 run of that seed, so the two anchors and every sender of a seed start
from the same initial states. Then for each of the ``seeds`` seeds: every sender of the config over the
config's ns-3 channel (one ns-3 child reused, reset with the seed before each
run; with ``--jobs N``, N seeds at a time in worker processes, one ns-3 child each, with the same results), with :func:`coopsim.agents.ddacom.evaluate.run` (the runner loop plus channel feedback to the
senders); then the safe-rate oracle of that channel and seed, :func:`coopsim.comm.oracle.safe_rate_sweep`
(one run per constant rate of a grid, every sender at that rate, the same seed, so the same background
traffic; agents stand at their positions of the first episode's start). Reported per sender, mean and 95%
CI over seeds: normalized return ``(R - R_none) / (R_broadcast,ideal - R_none)`` (:func:`normalized_return`: a
ratio estimator over the ns-3 seeds, paired with their anchors; the anchor gap, over all K anchor seeds by
:func:`anchor_gap` and over the ns-3 seeds, is *judged* when it exceeds three of its CI half-widths, issue 6),
safe-rate utilization
``sum delivered bits / sum N min(safe rate_t, demand) dt``, loss (lost / offered copies), messages as a
fraction of full broadcast; and the same against time (1 s bins; normalized return per episode), printed
and plotted with ``--plot``.

    .venv/bin/python -m coopsim.comm.ns3.experiment configs/ns3/ddacom-spread.yaml --out runs/ns3-ddacom.json \
        --plot docs/ns3_ddacom.png

The oracle's sweep is most of the wall time and does not depend on the senders, so it is cached on disk
(``--oracle-cache``, default ``runs/ns3-oracle-cache``; one JSON file per seed, keyed by a hash of everything it
depends on: channel id and params, oracle grid, scenario, envs, steps, seed); ``--senders ddacom`` and
``--sender-param ddacom.target_utilization=0.6`` rerun some senders with other params against the cached oracle;
``--cached-oracle-only`` fails instead of running a sweep that is not cached. The anchors are cached in the same
folder (``anchors-<hash>.json``, one file per scenario, envs and episodes, with the seeds computed so far; the hash
also covers the source of the code they run, so an edit of the scenario, the teams or the channels recomputes
them), so a rerun with other senders or sender params runs only its ns-3 seeds.

``--out`` is rewritten after the first ns-3 seed, then at most every 30 s, after the last and on an interrupt
or error (so it holds every seed finished in order; a second Ctrl-C during that save is ignored; kill -9 loses the
seeds of up to 30 s). ns-3 or a ``--jobs`` worker that fails (crashed, killed) is one line ``error: seed N ...;
kept: ...`` and exit code 1. A rerun into a ``--out`` that holds a result with the same settings
(senders and their params, channel, scenario, envs, episodes, oracle, and the same code) resumes: it reuses the
finished seeds there and runs the rest. A result with other settings is kept until the new run has finished more
seeds than it holds (until then the new result goes to a partial file beside it). An existing ``--out`` that is not a results file of this command (the experiment
file itself, a text file, another tool's JSON, a results file of ``ddacom.evaluate``) is refused, not replaced, as
``ddacom.evaluate`` refuses it (:func:`check_out`); with ``--calibrate`` too. Each tool's results file names it in its
``writer`` field (files written before that field are told by their keys:
:func:`coopsim.agents.ddacom.evaluate.results_writer`). ``--plot`` may not be the ``--out`` file or the experiment
file (:func:`check_plot`).

``--calibrate 0,1e6,2e6`` instead measures, for each constant background load per pair (bit/s), the rate
each agent gets through when all of them offer the full-broadcast demand, without the latency bound (the
saturation throughput, an upper bound of the safe rate), as a fraction of the demand: the calibration of
the background schedule.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import difflib
import hashlib
import json
import math
import multiprocessing
import os
import shlex
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from coopsim.agents.comm_baselines.team import SENDER_NAMES, check_senders, sender_class
from coopsim.agents.ddacom.evaluate import (NS3_EXPERIMENT_WRITER, check_config_sender_params,
                                            check_sender_param_repeats, code_fingerprint, parse_sender_params,
                                            ci95, foreign_note, partial_path, results_writer, run, summarize)
from coopsim.agents.ppo.curves import check_image_path
from coopsim.comm.oracle import _CBR, safe_rate_sweep, window_safe_rate
from coopsim.errors import ChannelError, ConfigError, CoopsimError, int_in_range, run_script
from coopsim.platform.comm import DEFAULT_HEADER_BYTES
from coopsim.platform.recorder import atomic_savefig, atomic_write_json, check_writable
from coopsim.platform.registry import make_component, make_scenario

_KEYS = {"scenario", "senders", "sender_params", "num_envs", "episodes", "seeds", "anchor_seeds", "channel", "oracle"}
#: what this script reads, for its messages
_WHAT = "an ns-3 experiment file (YAML), e.g. configs/ns3/ddacom-spread.yaml"
BIN_STEPS = 10  # time-series bins of 1 s at dt_s = 0.1 s
DT_S = 0.1  # simple_spread's step (s)
DEFAULT_OUT = "runs/ns3-experiment.json"
#: the most ns-3 seeds (``seeds``, ``--seeds``) and anchor seeds an experiment takes (each costs minutes of ns-3)
SEEDS_MAX = 10_000
#: --out is written at most this often (s) between its first and last seed (and on an interrupt or error)
WRITE_EVERY_S = 30.0
#: a results file of more runs than this is written without indentation (the C encoder: 20x faster on large files)
_INDENT_MAX_RUNS = 600


class ScenarioSection(BaseModel):
    """``scenario:`` of an experiment file: ``mpe/simple_spread-v0`` and the teams' message width (the ranges are
    the scenario's and the team's own, checked by :func:`load`)."""

    model_config = ConfigDict(extra="forbid")
    num_agents: int = Field(6, description="agents and landmarks N of mpe/simple_spread-v0")
    obs_radius_m: Optional[float] = Field(0.5, allow_inf_nan=False, description="partial-observation radius (m), "
                                          "> 0; null = full observation")
    payload_floats: int = Field(3, description="message width (float32 values), 3..368")


class OracleSection(BaseModel):
    """``oracle:`` of an experiment file: the safe-rate oracle's grid of constant rates."""

    model_config = ConfigDict(extra="forbid")
    rates: int = Field(21, ge=1, le=1000, description="rates in the grid (one ns-3 run each), 1..1000")
    min_frac: float = Field(0.1, gt=0, allow_inf_nan=False,
                            description="lowest rate of the grid as a fraction of the full-broadcast demand, > 0")
    max_frac: float = Field(0.6, gt=0, allow_inf_nan=False,
                            description="highest rate of the grid as a fraction of the full-broadcast demand, "
                                        ">= min_frac")
    drain_steps: int = Field(12, ge=0, le=1000, description="steps without sending after each run, so every copy's "
                                                            "fate is decided, 0..1000")
    estimator: Literal["max", "isotonic"] = Field(
        "max", description="how the safe rate is read from the grid's runs (coopsim.comm.oracle.window_safe_rate): "
        "max, the highest rate whose own window loss is at most 0.3 %; isotonic, the highest rate whose window loss, "
        "fitted non-decreasing in the rate over the grid, is at most 0.3 % (converges as the grid is refined; "
        "docs/ns3.md, \"The oracle's grid and estimator\")")

    @field_validator("max_frac")
    @classmethod
    def _max_frac(cls, v, info):
        lo = info.data.get("min_frac")
        if lo is not None and v < lo:
            raise ValueError(f"must be >= min_frac ({lo:g}): the grid runs from min_frac up to max_frac")
        return v


class TopLevel(BaseModel):
    """The scalar keys of an experiment file."""

    model_config = ConfigDict(extra="ignore")
    num_envs: int = Field(2, ge=1, le=256, description="envs stepped together per run (one ns-3 network each), "
                                                       "1..256")
    episodes: int = Field(4, ge=1, le=10_000, description="consecutive 25-step episodes per run, 1..10000")
    seeds: int = Field(2, ge=1, le=SEEDS_MAX, description=f"ns-3 seeds 0..seeds-1, 1..{SEEDS_MAX}")
    anchor_seeds: Optional[int] = Field(None, ge=1, le=SEEDS_MAX,
                                        description=f"seeds of the normalization anchors, >= seeds, 1..{SEEDS_MAX} "
                                                    "(default: seeds)")


def _secs(x: float) -> str:
    """``x`` seconds as ``"0.012 s"``, or ``"-"`` when undefined (NaN: nothing was delivered, so no latency)."""
    return f"{x:.3f} s" if np.isfinite(x) else "-"


def _validate(model: type[BaseModel], data: dict, path: str, prefix: str) -> BaseModel:
    """``model(**data)`` after the run config's checks (a boolean, a quoted or YAML 1.1 number for a number); a
    refusal is a one-line ConfigError naming the file, ``prefix`` + the key and the value."""
    from coopsim.platform.config import reject_bools
    from coopsim.platform.registry import pydantic_to_config_error

    reject_bools(data, model, file=path, key_prefix=prefix)
    try:
        return model(**data)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, model, file=path, key_prefix=prefix) from None


def _mapping(cfg: dict, key: str, path: str, example: str) -> dict:
    """``cfg[key]`` as a mapping (absent or empty: ``{}``); anything else is a ConfigError."""
    v = cfg.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ConfigError(f"invalid value {v!r}: must be a mapping, e.g. {example}", file=path, key=key, value=v)
    return v


def check_channel_params(params: dict, path: str | None) -> None:
    """The ``channel.params`` of an experiment file as ``coopsim validate`` checks a run config's (a boolean, a
    quoted or YAML 1.1 number, nan or inf for a number, then the ``ns3-v0`` schema), plus what a reset would refuse
    only later (``send_jitter_s`` must stay below the 0.1 s step).

    Raises:
        ConfigError: the file and the key ``channel.params.<key>``, with the value.
    """
    from coopsim.platform.config import check_component_params, whole_floats_to_ints

    prefix = "channel.params."
    model = check_component_params("channel", "ns3-v0", params, file=path, key_prefix=prefix)
    whole_floats_to_ints(params, model)  # 1.5e3 for an int param: that int, as a run config stores it
    p = model(**params)
    if p.send_jitter_s >= DT_S:
        raise ConfigError(f"invalid value {p.send_jitter_s!r}: must be < the step of {DT_S} s (each sender's messages "
                          "leave within their step)", file=path, key=f"{prefix}send_jitter_s", value=p.send_jitter_s)


def load(path: str) -> dict:
    """Read and check an experiment config, before any work: every section's keys (an unknown key is named, with
    the valid ones and the closest), types and ranges, the channel's params as ``ns3-v0`` takes them; raises a
    one-line ConfigError naming the file, the key and the value.

    Returns the config with the defaults filled in: ``scenario`` and ``oracle`` complete, ``num_envs``,
    ``episodes``, ``seeds`` and ``anchor_seeds`` set, ``sender_params`` a mapping, ``channel.params`` as given (a
    whole float for an integer param made that integer)."""
    from coopsim.agents.comm_baselines.team import SpreadTeamParams
    from coopsim.platform.config import UniqueKeyLoader, read_yaml_text
    from coopsim.platform.registry import pydantic_to_config_error, validate_params

    if Path(path).exists() and not Path(path).is_file():
        raise ConfigError(f"{'is a directory' if Path(path).is_dir() else 'not a regular file'} (give {_WHAT})",
                          file=path)
    try:  # the run configs' loader: a repeated key is refused, 1e5 is a number (YAML 1.2), 064 is not 52
        cfg = yaml.load(read_yaml_text(Path(path), path, _WHAT), Loader=UniqueKeyLoader)  # noqa: S506 - safe
    except yaml.YAMLError as e:  # unreadable or not UTF-8: read_yaml_text's ConfigError
        if hasattr(e, "key") and hasattr(e, "line"):  # the loader's repeated key
            raise ConfigError(f"duplicate key {e.key!r} at line {e.line} (each key may appear once in a mapping; "
                              "remove one)", file=path, key=str(e.key)) from None
        from coopsim.platform.config import _yaml_error

        raise _yaml_error(path, e) from None  # "not valid YAML at line L, column C: <problem>", one line
    if not isinstance(cfg, dict):
        raise ConfigError(f"expected a mapping at the top level ({_WHAT})", file=path)
    if {"name", "agents"} <= set(cfg):
        raise ConfigError("this is a coopsim run config, not an ns-3 experiment file: run it with `coopsim run "
                          f"{shlex.quote(str(path))}`; this script takes {_WHAT}", file=path)
    extra = sorted(set(cfg) - _KEYS, key=str)
    if extra:
        close = difflib.get_close_matches(str(extra[0]), sorted(_KEYS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown keys {extra}{hint}; valid: {sorted(_KEYS)}", file=path, key=str(extra[0]),
                          value=cfg[extra[0]])
    ch = cfg.get("channel")
    if not isinstance(ch, dict):
        if ch is None:
            raise ConfigError("channel.id must be ns3-v0 (no channel given: add channel: {id: ns3-v0, params: {...}})",
                              file=path, key="channel.id")
        raise ConfigError(f"invalid value {ch!r}: must be a mapping {{id: ns3-v0, params: {{...}}}}, e.g. "
                          "{id: ns3-v0}", file=path, key="channel", value=ch)
    if ch.get("id") != "ns3-v0":
        raise ConfigError("channel.id must be ns3-v0", file=path, key="channel.id", value=cfg.get("channel"))
    bad = sorted(set(ch) - {"id", "params"}, key=str)
    if bad:
        raise ConfigError(f"unknown key {bad[0]!r} in channel; valid: id, params", file=path, key=f"channel.{bad[0]}",
                          value=ch[bad[0]])
    params = ch.get("params")
    if params is None:
        params = ch["params"] = {}
    if not isinstance(params, dict):
        raise ConfigError(f"invalid value {params!r}: must be a mapping of ns3-v0 params, e.g. {{background_pairs: "
                          "3}", file=path, key="channel.params", value=params)
    check_channel_params(params, path)

    scenario = _validate(ScenarioSection, _mapping(cfg, "scenario", path, "{num_agents: 6, obs_radius_m: 0.5}"),
                         path, "scenario.")
    # the ranges are the scenario's and the team's own
    validate_params("scenario", "mpe/simple_spread-v0", {"num_agents": scenario.num_agents,
                                                          "obs_radius_m": scenario.obs_radius_m},
                    file=path, key_prefix="scenario.")
    try:
        SpreadTeamParams(payload_floats=scenario.payload_floats)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, SpreadTeamParams, file=path, key_prefix="scenario.") from None
    cfg["scenario"] = scenario.model_dump()
    cfg["oracle"] = _validate(OracleSection, _mapping(cfg, "oracle", path, "{rates: 23, min_frac: 0.05}"), path,
                              "oracle.").model_dump()
    top = _validate(TopLevel, cfg, path, "")
    cfg.update(num_envs=top.num_envs, episodes=top.episodes, seeds=top.seeds,
               anchor_seeds=top.anchor_seeds if top.anchor_seeds is not None else top.seeds)
    if cfg["anchor_seeds"] < cfg["seeds"]:
        raise ConfigError(f"anchor_seeds ({cfg['anchor_seeds']}) must be >= seeds ({cfg['seeds']}): every ns-3 seed "
                          "needs its anchors", file=path, key="anchor_seeds", value=cfg["anchor_seeds"])
    sp = _mapping(cfg, "sender_params", path, "{ddacom: {target_utilization: 0.7}}")
    for snd, v in sp.items():
        if v is not None and not isinstance(v, dict):
            raise ConfigError(f"invalid value {v!r}: must be a mapping of {snd}'s params, e.g. {{period_steps: 4}}",
                              file=path, key=f"sender_params.{snd}", value=v)
    cfg["sender_params"] = {snd: dict(v or {}) for snd, v in sp.items()}
    if "senders" in cfg:
        cfg["senders"] = check_senders(cfg["senders"], file=path, key="senders")
    return cfg


GAP_CI_METHOD = ("anchor gap R_broadcast,ideal - R_none: mean over the K anchor seeds of each seed's paired gap "
                 "(both anchors from the same initial states), 95% Student-t CI over seeds (K - 1 dof)")
NR_CI_METHOD = ("normalized return: ratio estimator over the S ns-3 seeds, sum of (R - R_none) / sum of (R_broadcast,"
                "ideal - R_none), the three runs of a seed paired (same initial states); 95% CI over seeds by the "
                "delta method (residuals d - NR g), Student-t with S - 1 dof")


def _half_width(x: np.ndarray) -> float:
    """95% Student-t half-width of the mean of ``x`` (:func:`coopsim.platform.stats.t_interval`); nan below 2."""
    from coopsim.platform.stats import t_interval

    _, lo, hi = t_interval(x)
    return float((hi - lo) / 2)


def anchor_gap(r_none: dict[int, float], r_bcast: dict[int, float]) -> dict:
    """The normalization gap ``R_broadcast,ideal - R_none`` over anchor seeds, with its 95% CI over seeds.

    ``r_none`` / ``r_bcast``: seed -> mean return of that seed's run (the same seeds in both). Each seed's gap is
    the paired difference (same initial states), so the CI is that of the paired differences' mean (Student t,
    K - 1 dof). ``judged``: the gap exceeds three CI half-widths (issue 6's condition for measuring normalized
    return).
    """
    seeds = sorted(r_none)
    if sorted(r_bcast) != seeds:
        raise ValueError("the two anchors need the same seeds")
    g = np.array([r_bcast[s] - r_none[s] for s in seeds], float)
    K = len(g)
    hw = _half_width(g)
    return {"mean": float(g.mean()), "half_width": float(hw), "seeds": K, "sd_over_seeds": float(g.std(ddof=1))
            if K >= 2 else float("nan"), "judged": bool(K >= 2 and g.mean() > 3 * hw), "ci_method": GAP_CI_METHOD}


def normalized_return(r_sender: dict[int, float], r_none: dict[int, float], r_bcast: dict[int, float]) -> tuple[
        float, float]:
    """Normalized return ``(R - R_none) / (R_broadcast,ideal - R_none)`` and its 95% CI half-width.

    ``r_sender``: ns-3 seed -> the sender's mean return (S seeds); ``r_none`` / ``r_bcast``: anchor seed -> mean
    return, including every seed of ``r_sender``. Ratio estimator over the sender's seeds, paired (the same
    initial states in the three runs of a seed): ``NR = sum_j d_j / sum_j g_j`` with ``d_j = R_j - R_none,j`` and
    ``g_j = R_bcast,j - R_none,j``. Its CI by the delta method, over seeds: half-width ``t(0.975, S - 1) sd(e) /
    (sqrt(S) mean(g))`` with the residuals ``e_j = d_j - NR g_j``. So a seed whose initial states happen to give a
    large gap to both anchors moves numerator and denominator together, and a sender that recovers the same share
    ``a`` of every seed's gap (``d_j = a g_j``) gets ``a`` with half-width 0. (Dividing the S-seed numerator by the
    gap of many more anchor seeds is also consistent but keeps the seeds' gap luck in the numerator only.)
    """
    js = sorted(r_sender)
    if not set(js) <= set(r_none) or not set(js) <= set(r_bcast):
        raise ValueError("every sender seed needs both anchors")
    d = np.array([r_sender[j] - r_none[j] for j in js], float)
    g = np.array([r_bcast[j] - r_none[j] for j in js], float)
    S = len(d)
    nr = d.sum() / g.sum()
    if S < 2:
        return float(nr), float("nan")
    e = d - nr * g
    return float(nr), _half_width(e) / float(abs(g.mean()))


def _scenario_kw(cfg: dict) -> dict:
    """The keyword arguments of :func:`coopsim.agents.ddacom.evaluate.run` a config (of :func:`load`) sets."""
    sc = cfg["scenario"]
    return dict(num_agents=sc["num_agents"], obs_radius_m=sc["obs_radius_m"], num_envs=cfg["num_envs"],
                episodes=cfg["episodes"], payload_floats=sc["payload_floats"])


def _demand(kw: dict) -> tuple[int, float]:
    n = kw["num_agents"]
    copy_bytes = kw["payload_floats"] * 4 + DEFAULT_HEADER_BYTES
    return copy_bytes, (1 + n) * (n - 1) * copy_bytes * 8 / 0.1


def calibrate(cfg: dict, levels_bps: list[float], steps: int = 30, warmup: int = 5, seed: int = 0) -> list[dict]:
    """Saturation goodput per agent (fraction of the full-broadcast demand) at each constant background load."""
    kw = _scenario_kw(cfg)
    N = kw["num_agents"]
    copy_bytes, demand = _demand(kw)
    core = make_scenario("mpe/simple_spread-v0", num_envs=1, num_agents=N, obs_radius_m=kw["obs_radius_m"])
    core.reset(seed=seed)
    # throughput, not timeliness: without the latency bound (a saturated FIFO makes every copy late)
    params = {k: v for k, v in cfg["channel"].get("params", {}).items() if k not in (
        "background_schedule", "background_period_s", "latency_bound_s")}
    out = []
    for level in levels_bps:
        ch = make_component("channel", "ns3-v0", **{**params, "background_rate_bps": float(level)})
        t0 = time.time()
        ch.reset(seed, num_envs=1, num_agents=N, dt_s=0.1, scenario=core)
        cbr = _CBR(np.full(1, demand), N, 0.1, copy_bytes, ch.params.header_bytes)
        got = 0
        lat = []
        for t in range(steps):
            ch.send(t, cbr.batch(t))
            inbox = ch.deliver(t + 1)
            if t >= warmup:
                got += len(inbox)
                lat.append(ch.last_latencies_s)
        s = ch.stats()
        ch.close()
        frac = got * copy_bytes * 8 / ((steps - warmup) * 0.1) / N / demand
        lat = np.concatenate(lat) if lat else np.zeros(1)
        row = {"background_bps_per_pair": level, "goodput_frac_of_demand": frac,
               "loss": s["comm/lost_copies"] / max(s["comm/offered_copies"], 1), "latency_p50_s": float(np.median(lat)),
               "wall_s": time.time() - t0}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def _bins(x: np.ndarray) -> np.ndarray:
    """Sum ``[T, ...]`` over bins of BIN_STEPS steps -> ``[T // BIN_STEPS, ...]``."""
    T = x.shape[0] // BIN_STEPS * BIN_STEPS
    return x[:T].reshape(T // BIN_STEPS, BIN_STEPS, *x.shape[1:]).sum(axis=1)


def time_series(results: list[dict], safe: dict[int, np.ndarray], N: int, demand: float) -> dict:
    """Per sender: 1 s bins of utilization, loss, messages / broadcast (pooled over seeds and envs), the safe
    rate as a fraction of demand, and the normalized return per episode (at each episode index, the paired ratio
    of :func:`normalized_return` over seeds and envs: sum of ``R - R_none`` / sum of ``R_broadcast,ideal - R_none``)."""
    anchors = {(r["seed"], r["sender"]): np.asarray(r["series"]["return_per_episode"]).mean(axis=1)
               for r in results if r["channel_name"] == "ideal" and "series" in r}
    out: dict = {}
    for snd in sorted({r["sender"] for r in results if r["channel_name"] == "ns3"}):
        rs = [r for r in results if r["channel_name"] == "ns3" and r["sender"] == snd]
        d = sum(_bins(np.asarray(r["series"]["delivered_bits"])).sum(1) for r in rs)
        den = sum(_bins(N * np.minimum(safe[r["seed"]], demand) * 0.1).sum(1) for r in rs)
        off = sum(_bins(np.asarray(r["series"]["offered_copies"])).sum(1) for r in rs)
        lost = sum(_bins(np.asarray(r["series"]["lost_copies"])).sum(1) for r in rs)
        bc = sum(_bins(np.asarray(r["series"]["broadcast_copies"])).sum(1) for r in rs)
        nr_num = sum(np.asarray(r["series"]["return_per_episode"]).mean(axis=1) - anchors[(r["seed"], "none")]
                     for r in rs)
        nr_den = sum(anchors[(r["seed"], "broadcast")] - anchors[(r["seed"], "none")] for r in rs)
        out[snd] = {"utilization": (d / np.maximum(den, 1e-9)).tolist(), "loss": (lost / np.maximum(off, 1)).tolist(),
                    "messages_vs_broadcast": (off / np.maximum(bc, 1)).tolist(),
                    "normalized_return_per_episode": (nr_num / nr_den).tolist()}
    out["safe_rate_frac"] = (np.mean([_bins(safe[s]).mean(1) / BIN_STEPS for s in safe], axis=0) / demand).tolist()
    return out


def plot(ts: dict, path: str, episode_s: float = 2.5, seeds: int | None = None, envs: int | None = None) -> None:
    """The time-series figure of :func:`time_series`'s ``ts``: utilization (with the oracle's safe rate and a
    utilization = 1 reference), loss %, messages / broadcast per 1 s bin, and the normalized return per episode,
    one line per sender; a title and a subtitle say what a point is (pooled over ``seeds`` x ``envs``, when
    given, else over every seed and env of the run)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(4, 1, figsize=(7, 9.6), sharex=True)
    senders = [s for s in ts if s != "safe_rate_frac"]
    tb = (np.arange(len(ts["safe_rate_frac"])) + 0.5) * BIN_STEPS * 0.1
    for s in senders:
        if s == "none":
            continue
        ax[0].plot(tb, ts[s]["utilization"], marker=".", label=s)
        ax[1].plot(tb, np.asarray(ts[s]["loss"]) * 100, marker=".", label=s)
        ax[2].plot(tb, ts[s]["messages_vs_broadcast"], marker=".", label=s)
        te = (np.arange(len(ts[s]["normalized_return_per_episode"])) + 0.5) * episode_s
        ax[3].plot(te, ts[s]["normalized_return_per_episode"], marker="o", label=s)
    ax[0].axhline(1.0, color="0.4", lw=0.8, ls=":")
    ax[0].text(0.01, 1.0, " utilization 1 (the safe rate)", transform=ax[0].get_yaxis_transform(), va="bottom",
               fontsize=7, color="0.3")
    ax0b = ax[0].twinx()
    ax0b.step(tb, ts["safe_rate_frac"], where="mid", color="k", ls="--", alpha=0.5)
    ax0b.set_ylabel("oracle safe rate / demand (--)")
    ax[0].set_ylabel("utilization")
    ax[1].set_ylabel("loss %")
    ax[1].set_yscale("symlog", linthresh=0.3)
    ax[1].set_ylim(bottom=0)  # a loss is never negative: no ticks below 0
    ax[1].axhline(0.3, color="k", lw=0.5)
    ax[1].text(0.01, 0.3, " 0.3 % (target)", transform=ax[1].get_yaxis_transform(), va="bottom", fontsize=7)
    ax[2].set_ylabel("messages / broadcast")
    ax[3].set_ylabel("normalized return")
    ax[3].set_xlabel("time (s); normalized return per 2.5 s episode")
    # the legend above the panels, outside the data (it covered the oracle's dashed line)
    ax[0].legend(fontsize=7, ncol=4, loc="lower left", bbox_to_anchor=(0.0, 1.0), frameon=False)
    over = (f"{seeds} seed{'' if seeds == 1 else 's'} x {envs} env{'' if envs == 1 else 's'}"
            if seeds and envs else "every seed x env of the run")
    fig.suptitle("ns-3 senders against time", fontsize=11)
    fig.text(0.5, 0.96, f"each point: pooled over {over}, 1 s bins (sums over the runs, then the ratio);\n"
             "normalized return: per 2.5 s episode, the paired ratio over the same runs", ha="center", va="top",
             fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    atomic_savefig(fig, path, dpi=80)
    plt.close(fig)


#: 2 (2026-12-06): the channel params and the oracle grid as their schemas read them (so 1.0e+5, 100000.0 and 1e5,
#: or a default written out or left out, give one key); 1: the config's text as PyYAML read it
ORACLE_CACHE_VERSION = 2
ANCHOR_CACHE_VERSION = 1


def canonical_channel(channel: dict) -> dict:
    """``{id, params}`` with the params as ``ns3-v0`` reads them and its defaults left out: the same for ``1.0e+5``,
    ``100000.0`` and ``1e5``, and for a default written out or left out."""
    from coopsim.comm.ns3.channel import Ns3Params

    params = Ns3Params(**(channel.get("params") or {})).model_dump(mode="json", exclude_defaults=True)
    return {"id": channel.get("id"), "params": params}


def _canonical_oracle(oracle: dict | None) -> dict:
    return OracleSection(**(oracle or {})).model_dump()


def _sweep_setting(oracle: dict | None) -> dict:
    """The oracle's settings the sweep's ns-3 runs depend on (the cache key's): all but the ``estimator``, which
    only reads the cached runs, so that one sweep serves both estimators (and caches written before the estimator
    existed keep their key)."""
    return {k: v for k, v in _canonical_oracle(oracle).items() if k != "estimator"}


def oracle_cache_key(cfg: dict, kw: dict, seed: int, rates: np.ndarray, num_steps: int) -> str:
    """Hash (sha1 hex) of everything the oracle's sweep for one seed depends on; never of the senders."""
    what = {"v": ORACLE_CACHE_VERSION, "channel": canonical_channel(cfg["channel"]),
            "oracle": _sweep_setting(cfg.get("oracle")),
            "scenario": {k: kw[k] for k in ("num_agents", "obs_radius_m", "num_envs", "payload_floats")},
            "steps": int(num_steps), "seed": int(seed), "rates_bps": [float(r) for r in rates]}
    return hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _anchor_setting(kw: dict) -> dict:
    return {"v": ANCHOR_CACHE_VERSION, "scenario": {k: kw[k] for k in (
        "num_agents", "obs_radius_m", "num_envs", "payload_floats", "episodes")}, "code": code_fingerprint()}


def check_cache_folder(folder: str) -> None:
    """Refuse an ``--oracle-cache`` that is a file, or lies under one: no cache file could be written there (the
    anchors' would only be noted as not cached, and recomputed every run). A folder that does not exist yet is
    fine (it is made when the first cache file is written); whether it can be written is checked when a write is due.

    Raises:
        ConfigError: key ``--oracle-cache``; names the file.
    """
    p = Path(folder)
    base = p
    while not (base.exists() or base.is_symlink()) and base != base.parent:
        base = base.parent
    if base.exists() and not base.is_dir():
        where = "is a file" if base == p else f"is under the file {base}"
        raise ConfigError(f"{folder} {where}, not a folder; give --oracle-cache a folder for the cached oracle "
                          "sweeps and anchors, or --oracle-cache '' to run without the cache", key="--oracle-cache",
                          value=folder)


def anchor_cache_path(folder: str | None, kw: dict) -> Path | None:
    """The anchors' cache file in ``folder`` (None: no cache): one per scenario, envs and episodes and code (the
    anchors run over ideal-v0, so no channel param changes them), holding every seed computed so far."""
    if not folder:
        return None
    key = hashlib.sha1(json.dumps(_anchor_setting(kw), sort_keys=True).encode()).hexdigest()[:16]
    return Path(folder) / f"anchors-{key}.json"


def _nan_for_null(r: dict) -> dict:
    """A run read back from JSON, where a nan number was written as null."""
    return {k: (math.nan if v is None else v) for k, v in r.items()}


def run_anchors(kw: dict, num_seeds: int, series_seeds: int, cache: Path | None) -> tuple[list[dict], int]:
    """The normalization anchors, no communication and full broadcast over ``ideal-v0``, on seeds
    ``0..num_seeds-1`` (their ``series`` kept for the first ``series_seeds``); seeds already in ``cache`` are read
    from it, the others run and are added to it (best effort: a cache that cannot be written is said and skipped).

    Returns:
        ``(runs, seeds read from the cache)``.
    """
    done: dict[int, dict] = {}
    try:
        if cache is not None and cache.is_file():
            data = json.loads(cache.read_text())
            if data.get("setting") == json.loads(json.dumps(_anchor_setting(kw))):
                done = {int(k): v for k, v in data["runs"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        done = {}  # unreadable: recompute (and overwrite it)
    results, new, saved = [], 0, 0

    def save() -> None:
        nonlocal cache
        try:
            atomic_write_json(cache, {"setting": _anchor_setting(kw), "runs": {str(k): done[k] for k in sorted(done)}})
        except (OSError, CoopsimError) as exc:
            print(f"note: the anchors are not cached ({' '.join(str(exc).split())})", flush=True)
            cache = None  # said once; the run goes on without the cache

    try:
        for seed in range(num_seeds):
            pair = done.get(seed)
            if not (isinstance(pair, dict) and all(isinstance(pair.get(s), dict) and "series" in pair[s]
                                                   for s in ("none", "broadcast"))):
                pair = {}
                for snd in ("none", "broadcast"):
                    r = run(snd, "ideal-v0", {}, seed=seed, oracle=False, record_series=True, **kw)
                    r["channel_name"] = "ideal"
                    pair[snd] = r
                done[seed] = pair
                new += 1
                if cache is not None and new - saved >= 50:  # an interrupted run keeps most of its anchors
                    save()
                    saved = new
            for snd in ("none", "broadcast"):
                r = _nan_for_null(pair[snd])
                if seed >= series_seeds:
                    r.pop("series", None)
                results.append(r)
    except KeyboardInterrupt:  # the anchors that finished are kept in the cache (whole pairs only)
        if new > saved and cache is not None:
            save()
        raise
    if new > saved and cache is not None:
        save()
    return results, num_seeds - new


def settings(cfg: dict, oracle: bool) -> dict:
    """What the ns-3 rows of a result depend on, besides the seed: senders and their params (as their schemas
    read them), the channel, the scenario, envs, episodes, the oracle's grid (when it runs) and the code."""
    sp = cfg.get("sender_params") or {}
    return json.loads(json.dumps({
        "senders": list(cfg["senders"]),
        "sender_params": {s: sender_class(s).Params(**(sp.get(s) or {})).model_dump(mode="json")
                          for s in cfg["senders"]},
        "channel": canonical_channel(cfg["channel"]), "scenario": cfg["scenario"], "num_envs": cfg["num_envs"],
        "episodes": cfg["episodes"], "oracle": _canonical_oracle(cfg["oracle"]) if oracle else None,
        "code": code_fingerprint()}, sort_keys=True))


def previous_result(out: str | Path) -> dict | None:
    """The result JSON in ``out`` (a finished or interrupted run of this script, :func:`results_writer` says so: its
    ``writer`` field, or for a file written before that field its keys), or None (absent, unreadable, or something
    else: a ``--calibrate`` output, a results file of ``ddacom.evaluate``)."""
    try:
        d = json.loads(Path(out).read_text())
    except (OSError, ValueError):
        return None
    ok = results_writer(d) == NS3_EXPERIMENT_WRITER and d["seeds_done"] >= 1
    return d if ok else None


def _calibration_output(out: str | Path) -> bool:
    """Whether ``out`` holds a ``--calibrate`` output of this script (``{"config": ..., "calibration": [...]}``)."""
    try:
        d = json.loads(Path(out).read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(d, dict) and isinstance(d.get("config"), dict) and isinstance(d.get("calibration"), list)
            and d.get("writer", NS3_EXPERIMENT_WRITER) == NS3_EXPERIMENT_WRITER)


def check_out(out: str, config: str) -> None:
    """Refuse an ``--out`` this script would replace although it is not one of its results: the experiment file
    ``config`` itself, or any existing file that is neither a result (:func:`previous_result`) nor a ``--calibrate``
    output of this script (a text file, another tool's JSON, a results file of ``ddacom.evaluate``); as
    ``ddacom.evaluate`` refuses it. An empty file holds
    nothing to lose and is taken; a result of this script keeps its rules (resumed, or kept while it holds more seeds
    or other settings).

    Raises:
        ConfigError: key ``--out``; names the file.
    """
    p = Path(out)
    if _same_path(p, config):
        raise ConfigError(f"{out} is the experiment file this command reads; give --out another file (the results "
                          "JSON)", key="--out", value=out)
    if not (p.exists() or p.is_symlink()):
        return
    if p.is_file() and p.stat().st_size == 0:
        return
    prev = previous_result(p)
    if prev is None and not _calibration_output(p):
        raise ConfigError(f"{out} exists and is not a results file of coopsim.comm.ns3.experiment{foreign_note(p)}; "
                          "give another --out or remove it", key="--out", value=out)
    if prev is not None and compact_copy(prev):
        raise ConfigError(f"{out} is a compact copy of a results file (summary and per-seed figures, no settings or "
                          f"time series, as committed under benchmarks/results/): a run can neither resume from it nor "
                          f"should replace it; give another --out (e.g. runs/...json)", key="--out", value=out)


def compact_copy(d: dict) -> bool:
    """Whether the result ``d`` is a compact copy (``note`` "compact copy ...": the committed
    ``benchmarks/results/ns3_*.json``), which keeps the summary and per-seed figures but no settings."""
    return isinstance(d.get("note"), str) and d["note"].startswith("compact copy") and "settings" not in d


def _same_path(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same file when both exist (a hard or symbolic link too), else the
    same path once resolved (a file not written yet, through a symlinked folder too)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        pass
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):  # a symlink loop: not one of ours
        return False


def check_plot(plot: str, out: str, config: str) -> None:
    """Refuse a ``--plot`` that names the ``--out`` file (the figure, written last, would replace the results JSON)
    or the experiment file ``config``, before any work; compared as files (:func:`_same_path`), so another spelling
    of the same path, a symlink or a hard link is refused too.

    Raises:
        ConfigError: key ``--plot``; names both files.
    """
    if _same_path(plot, out):
        raise ConfigError(f"{plot} is the --out file {out}: the figure would be written over the results JSON; give "
                          "--plot another file", key="--plot", value=plot)
    if _same_path(plot, config):
        raise ConfigError(f"{plot} is the experiment file {config} this command reads; give --plot another file",
                          key="--plot", value=plot)


def reusable_seeds(prev: dict, cur: dict, seeds: int, T: int, E: int) -> tuple[list[dict], dict[int, np.ndarray],
                                                                                list[str]]:
    """The ns-3 runs (and safe rates) of ``prev`` (:func:`previous_result`) a run with settings ``cur``
    (:func:`settings`) and ``seeds`` seeds can reuse: seeds ``0..min(seeds_done, seeds)-1`` when the settings are
    the same.

    Returns:
        ``(runs, safe rates per seed, the settings that differ)``: no runs when any differs (or the file lacks a
        part it needs, named among them).
    """
    old = prev.get("settings")
    if not isinstance(old, dict):
        return [], {}, ["settings (the file has none: written before resuming existed)"]
    diff = sorted(k for k in set(old) | set(cur) if old.get(k) != cur.get(k))
    if diff:
        return [], {}, diff
    n = min(prev["seeds_done"], seeds)
    senders = cur["senders"]
    runs = [_nan_for_null(r) for r in prev["runs"] if isinstance(r, dict) and r.get("channel_name") == "ns3"
            and isinstance(r.get("seed"), int) and r["seed"] < n]
    if [(r["seed"], r.get("sender")) for r in runs] != [(s, x) for s in range(n) for x in senders] or not all(
            "series" in r and "return" in r for r in runs):
        return [], {}, ["runs (incomplete)"]
    safe: dict[int, np.ndarray] = {}
    if cur["oracle"] is not None:
        try:
            safe = {s: np.asarray(prev["safe_bps"][str(s)], np.float64) for s in range(n)}
        except (KeyError, TypeError, ValueError):
            return [], {}, ["safe_bps (incomplete)"]
        if any(v.shape != (T, E) for v in safe.values()):
            return [], {}, ["safe_bps (incomplete)"]
    return runs, safe, []


def _read_cached_oracle(path: Path, estimator: str = "max", rates: np.ndarray | None = None) -> np.ndarray | None:
    """The safe rates ``[T, E]`` (bit/s) of a cached sweep, read with ``estimator``: from the grid's per-rate runs
    (``offered_bytes`` / ``lost_bytes`` ``[R, T, E]``, kept since 2026-12-07) when the file has them; a file with
    the ``max`` safe rates only serves ``max``. None: absent, unreadable or lacking what ``estimator`` needs (the
    sweep then runs again and the file is rewritten with its runs). ``rates``: the run's grid (bit/s); a file of
    another grid (edited by hand: the key covers the grid) is not used either."""
    try:
        d = json.loads(path.read_text())
        if rates is not None and not np.allclose(np.asarray(d["rates_bps"], np.float64), rates, rtol=1e-12, atol=0):
            return None
        if "offered_bytes" in d and "lost_bytes" in d:
            off = np.asarray(d["offered_bytes"], np.float64)
            lost = np.asarray(d["lost_bytes"], np.float64)
            rates = np.asarray(d["rates_bps"], np.float64)
            if off.ndim != 3 or off.shape != lost.shape or off.shape[0] != len(rates):
                return None
            return window_safe_rate(off.transpose(1, 0, 2), lost.transpose(1, 0, 2), rates, estimator=estimator)
        if estimator != "max":
            return None
        return np.asarray(d["safe_bps"], np.float64)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable: recompute (and overwrite it)


def _usable_cache(path: Path | None, T: int, E: int, estimator: str = "max", rates: np.ndarray | None = None) -> bool:
    """Whether ``path`` holds a cached oracle sweep the run would use (else it computes and writes one)."""
    return cache_problem(path, T, E, estimator, rates) is None


def cache_problem(path: Path | None, T: int, E: int, estimator: str = "max",
                  rates: np.ndarray | None = None) -> str | None:
    """Why the cached oracle sweep ``path`` cannot serve a run (None: it can): absent, unreadable, of another size or
    grid, or (``isotonic``) holding the ``max`` safe rates only, not the grid's runs."""
    try:
        if path is None or not path.is_file():
            return "no such file"
    except OSError:  # a folder we may not look into: check_writable says so
        return "cannot be read"
    cached = _read_cached_oracle(path, estimator, rates)
    if cached is not None and cached.shape == (T, E):
        return None
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return "unreadable (not JSON)"
    if not isinstance(d, dict):
        return "unreadable (not an oracle cache)"
    if estimator != "max" and "safe_bps" in d and "offered_bytes" not in d:
        return ("it holds the max estimator's safe rates only (written before 2026-12-07), not the grid's runs the "
                f"{estimator} estimator reads")
    return "unreadable or of another run size or grid"


def _summary(results: list[dict], gap: dict, anchors: dict[str, dict[int, float]]) -> dict:
    """:func:`coopsim.agents.ddacom.evaluate.summarize`, with the anchor gap over all anchor seeds and over the
    ns-3 seeds (the denominator of the ratio) and each ns-3 row's normalized return by :func:`normalized_return`
    (``summarize`` averages per-seed ratios, each with one seed's 8-episode gap as denominator)."""
    out = summarize(results)
    out["ideal_gap"] = (gap["mean"], gap["half_width"])
    out["anchor_gap"] = gap
    ns3_seeds = sorted({r["seed"] for r in results if r["channel_name"] == "ns3"})
    out["anchor_gap_ns3_seeds"] = {**anchor_gap({k: anchors["none"][k] for k in ns3_seeds},
                                                {k: anchors["broadcast"][k] for k in ns3_seeds}),
                                   "seed_list": ns3_seeds}
    out["normalized_return_ci_method"] = NR_CI_METHOD
    for key, row in out["rows"].items():
        cname, snd = key.split("/", 1)
        if cname == "ns3":
            mine = [r for r in results if r["channel_name"] == "ns3" and r["sender"] == snd and "utilization" in r]
            if mine and all("utilization_fb_demand" in r for r in mine):  # (runs resumed from an older file lack it)
                row["utilization_fb_demand"] = ci95([r["utilization_fb_demand"] for r in mine])
            rs = {r["seed"]: r["return"] for r in results if r["channel_name"] == "ns3" and r["sender"] == snd}
            row["normalized_return"] = normalized_return(rs, anchors["none"], anchors["broadcast"])
            row["normalized_return_judged"] = out["anchor_gap_ns3_seeds"]["judged"]  # its denominator's check
        elif snd in ("none", "broadcast"):
            row["normalized_return"] = (0.0, 0.0) if snd == "none" else (1.0, 0.0)  # the anchors, by definition
    return out


def _gap_problem(g: dict, what: str) -> str | None:
    """Why the anchor gap ``g`` (:func:`anchor_gap`) over ``what`` is not judged, or None when it is."""
    if g.get("judged"):
        return None
    mean, hw = g["mean"], g["half_width"]
    if hw is None or not math.isfinite(hw):
        return f"the anchor gap R_broadcast,ideal - R_none over {what} = {mean:.2f} has no 95% CI half-width (1 seed)"
    return (f"the anchor gap R_broadcast,ideal - R_none over {what} = {mean:.2f} is not larger than 3 x its 95% CI "
            f"half-width {hw:.2f} (= {3 * hw:.2f})")


def anchor_warnings(summary: dict) -> list[str]:
    """One warning line per failed check of the normalized return's anchor gap (issue 6: the gap must exceed three
    of its 95% CI half-widths), as :func:`coopsim.agents.ddacom.evaluate.anchor_warning` warns: over all anchor
    seeds, and over the ns-3 seeds, the denominator of the ns-3 rows' ratio (those values are marked * in the
    table)."""
    out = []
    g = summary.get("anchor_gap")
    why = _gap_problem(g, f"the {g['seeds']} anchor seed(s)") if g else None
    if why:
        out.append(f"warning: the normalized return column is not meaningful at this size: {why}; give more "
                   "anchor_seeds in the config")
    g6 = summary.get("anchor_gap_ns3_seeds")
    why = _gap_problem(g6, f"the {g6['seeds']} ns-3 seed(s)") if g6 else None
    if why:
        out.append(f"warning: the normalized return of the ns-3 rows (marked *) is not judged: its denominator, {why}; "
                   "give more --seeds (docs/ns3.md, 'Normalized return judged')")
    return out


def print_results(summary: dict) -> None:
    """The table of :func:`coopsim.agents.ddacom.evaluate.print_table` (mean +- 95% CI half-width over seeds), with
    :func:`anchor_warnings` above it and a footnote mark on each normalized return that is not judged."""
    def has_ci(m) -> bool:
        return m[1] is not None and math.isfinite(m[1])

    g = summary["ideal_gap"]
    k = (summary.get("anchor_gap") or {}).get("seeds")
    if has_ci(g):
        print(f"R_broadcast_ideal - R_no_comm = {g[0]:.2f} +- {g[1]:.2f} (95% CI half-width"
              f"{f', over {k} anchor seeds' if k else ''})")
    else:
        print(f"R_broadcast_ideal - R_no_comm = {g[0]:.2f} (1 seed, no CI)")
    for line in anchor_warnings(summary):
        print(line)
    if summary.get("zero_gap_seeds"):
        print(f"normalized return leaves out seeds {summary['zero_gap_seeds']}: R_broadcast_ideal = R_no_comm there "
              f"(no gain to share; give more envs or episodes)")
    cells = [m for row in summary["rows"].values() for key, m in row.items() if isinstance(m, (list, tuple))]
    if not all(has_ci(m) for m in cells):
        print("values without +-: 1 seed, no CI (give --seeds 2 or more for 95% intervals)")
    print(f"{'channel/sender':<24} {'norm. return':>17} {'utilization':>16} {'loss %':>14} {'msgs/bcast':>14}")

    def f(m, s=1.0):
        return f"{m[0] * s:7.3f}+-{m[1] * s:5.3f}" if has_ci(m) else f"{m[0] * s:7.3f}"

    marked = False
    for key, row in summary["rows"].items():
        u = f(row["utilization"]) if "utilization" in row else "-"
        nr = f(row["normalized_return"]) + ("*" if row.get("normalized_return_judged") is False else " ")
        marked |= nr.endswith("*")
        print(f"{key:<24} {nr:>17} {u:>16} {f(row['loss'], 100):>14} {f(row['messages_vs_broadcast']):>14}")
    fbd = {k: row["utilization_fb_demand"] for k, row in summary["rows"].items() if "utilization_fb_demand" in row}
    if fbd:
        print("utilization against the per-step full-broadcast demand (bits full broadcast offers at each step over "
              "ideal-v0; docs/ns3.md, 'The oracle's grid and estimator'): "
              + ", ".join(f"{k} {f(m).strip()}" for k, m in fbd.items()))
    if marked:
        print("* not judged: the anchor gap over the ns-3 seeds (this ratio's denominator) does not exceed 3 of its "
              "95% CI half-widths (the warning above)")


def parse_loads(text: str, flag: str = "--calibrate") -> list[float]:
    """The comma-separated background loads per pair (bit/s) of ``--calibrate``: finite numbers >= 0, at least one.

    Raises:
        ConfigError: key ``flag``; names the bad entry and what is valid.
    """
    need = "give comma-separated constant background loads per pair in bit/s, each a finite number >= 0, e.g. 0,1e6,2e6"
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise ConfigError(f"no load given; {need}", key=flag, value=text)
    out = []
    for x in items:
        if not x:
            raise ConfigError(f"an empty entry in {text!r}; {need}", key=flag, value=text)
        try:
            v = float(x)
        except ValueError:
            raise ConfigError(f"{x!r} is not a number; {need}", key=flag, value=text) from None
        if not math.isfinite(v) or v < 0:
            raise ConfigError(f"{x!r} is not a load (must be finite and >= 0); {need}", key=flag, value=text)
        out.append(v)
    return out


def latency_text(key: str, results: list[dict]) -> str:
    """The p95 latency cell of row ``key`` (``channel/sender``) of the run dicts ``results``: the mean over its runs
    of ``latency_p95_s``, or why there is none: ``- (not measured: ideal channel)`` for the anchors (ideal-v0 records
    no latency), ``- (nothing sent)`` when its runs offered no copy (the ``none`` sender), ``- (nothing delivered)``
    when they offered copies and none arrived."""
    rows = [r for r in results if f"{r['channel_name']}/{r['sender']}" == key]
    if key.split("/", 1)[0] == "ideal":
        return "- (not measured: ideal channel)"
    lat = [r["latency_p95_s"] for r in rows if "latency_p95_s" in r and np.isfinite(r["latency_p95_s"])]
    if lat:
        return _secs(float(np.mean(lat)))
    sent = [r["copies_offered"] for r in rows if isinstance(r.get("copies_offered"), (int, float))]
    if sent and not any(sent):
        return "- (nothing sent)"
    return "- (nothing delivered)"


#: progress of :func:`main`, for the message of an interrupted run (:func:`kept_on_interrupt`)
_PROGRESS: dict[str, Any] = {}


@contextlib.contextmanager
def signals_held():
    """SIGINT, SIGTERM and SIGHUP ignored within the block, then their handlers restored: the save of an interrupt or an
    error is not cut short by a second Ctrl-C (a file of thousands of seeds takes seconds to write). A signal that
    arrives meanwhile is dropped. Outside the main thread (a test runner's worker) nothing changes."""
    old = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            old[sig] = signal.signal(sig, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            if handler is not None:  # None: a handler set outside Python, which cannot be put back
                signal.signal(sig, handler)


def kept_text() -> str:
    """What :func:`main` has kept so far: the ``--out`` file and how many seeds it holds (or that an earlier file was
    kept as it was); "" before the arguments were read."""
    out = _PROGRESS.get("out")
    if out is None:
        return ""
    total, written = _PROGRESS.get("seeds", 0), _PROGRESS.get("written", 0)
    prev_n, same = _PROGRESS.get("prev_seeds", 0), _PROGRESS.get("same_settings", False)
    ahead = _PROGRESS.get("ahead", 0)
    ahead_note = (f"; {ahead} later seed(s) that had finished before an earlier one (--jobs) are not in it and run "
                  "again" if ahead else "")
    to = _PROGRESS.get("written_to", out)
    if written:
        aside = f"; {out} kept as it was, with its {prev_n} seed(s) of other settings" if to != out else ""
        return (f"{to} with {written} of {total} seed(s) (seeds 0..{written - 1}), a valid JSON file; the same "
                f"command resumes from them{ahead_note}{aside}")
    if prev_n:
        settings_ = "the same settings: the same command resumes from them" if same else "other settings"
        return f"{out} as it was, with its {prev_n} seed(s) of {settings_}{ahead_note}"
    return f"nothing: no ns-3 seed had finished, so {out} was not written{ahead_note}"


def kept_on_interrupt() -> str:
    """What an interrupted :func:`main` keeps (``run_script``'s ``kept``): prints the table of the finished seeds,
    then returns :func:`kept_text`; a second Ctrl-C meanwhile is ignored (the file is already saved)."""
    with signals_held():
        finished = _PROGRESS.get("finished", 0)
        if _PROGRESS.get("out") is not None and finished and _PROGRESS.get("summary") is not None:
            print(f"table of the {finished} finished ns-3 seed(s):", flush=True)
            print_results(_PROGRESS["summary"])
        return kept_text()


class SeedsFailed(ChannelError):
    """ns-3 or a ``--jobs`` worker process failed while the seeds ran (a crash, a kill, the out-of-memory killer):
    not an error of the input, so the command exits with 1, not 2 (:func:`cli`). The message names the seed and
    what ``--out`` keeps."""


#: the ns-3 channel of a worker process of ``--jobs`` (:func:`_worker_init`), reused for every seed it runs
_WORKER_CHANNEL: Any = None


def seed_runs(seed: int, *, cfg: dict, kw: dict, rates: np.ndarray, demand: float, copy_bytes: int, no_oracle: bool,
              cached_only: bool, t0: float, ch: Any, cache: Path | None, fb: list | None) -> tuple[
                  np.ndarray | None, list[dict]]:
    """One ns-3 seed of :func:`main`: the oracle's safe rates (read from ``cache`` or swept, and then written there;
    none with ``no_oracle``), then every sender of ``cfg`` over the channel ``ch`` (reset with the seed), with its
    utilization against the safe rates; prints a line per step of the work.

    Args:
        fb: full broadcast's copies per step over ideal-v0 for this seed (the anchors' series), or None.

    Returns:
        ``(safe rates [T, E] in bit/s or None, one result dict per sender)``.

    Raises:
        ConfigError: ``cached_only`` and no usable cache for the seed (key ``--oracle-cache``).
    """
    orc = cfg["oracle"]
    N, E, T = kw["num_agents"], kw["num_envs"], kw["episodes"] * 25
    safe = None
    if not no_oracle:  # --no-oracle: return, loss and messages only (no sweep, no safe rate)
        cached = (_read_cached_oracle(cache, orc["estimator"], rates) if cache is not None and cache.exists()
                  else None)
        if cached is not None and cached.shape == (T, E):
            safe = cached
            print(f"seed {seed} oracle: cached {cache}", flush=True)
        elif cached_only:
            why = (" (it holds the max estimator's safe rates only, not the grid's runs the isotonic "
                   "estimator reads)" if cache is not None and cache.exists() else "")
            raise ConfigError(f"seed {seed}: no cached oracle {cache}{why} (--cached-oracle-only)",
                              key="--oracle-cache")
        else:
            core = make_scenario("mpe/simple_spread-v0", num_envs=E, num_agents=N,
                                 obs_radius_m=kw["obs_radius_m"])
            core.reset(seed=seed * 100_003)  # the agents' start positions of the first episode, kept still
            orc_out = safe_rate_sweep(ch, seed=seed, num_envs=E, num_agents=N, dt_s=DT_S, num_steps=T,
                                      copy_bytes=copy_bytes, rates_bps=rates, scenario=core,
                                      drain_steps=orc["drain_steps"], estimator=orc["estimator"])
            safe = orc_out["safe_bps"]
            if cache is not None:  # the grid's runs too (whole bytes), so either estimator reads the file
                max_safe = window_safe_rate(orc_out["offered_bytes"].transpose(1, 0, 2),
                                            orc_out["lost_bytes"].transpose(1, 0, 2), rates)
                atomic_write_json(cache, {"channel": cfg["channel"], "seed": seed, "rates_bps": rates.tolist(),
                                          "safe_bps": max_safe.tolist(),
                                          "offered_bytes": np.rint(orc_out["offered_bytes"]).astype(
                                              np.int64).tolist(),
                                          "lost_bytes": np.rint(orc_out["lost_bytes"]).astype(
                                              np.int64).tolist()})
        sf = np.minimum(safe, demand) / demand
        print(f"seed {seed} oracle: safe rate / demand min {sf.min():.3f} mean {sf.mean():.3f} max "
              f"{sf.max():.3f} ({time.time() - t0:.0f} s)", flush=True)
        top = int(np.sum(safe >= rates[-1]))
        if top and rates[-1] < demand:  # the true safe rate may be higher: utilization is overstated there
            print(f"note: seed {seed}: the safe rate is the grid's highest rate ({orc['max_frac']:g} x demand) "
                  f"at {top} of {safe.size} steps x envs, so it may be higher there and utilization "
                  "is overstated; raise oracle.max_frac", flush=True)
    out = []
    cid, cparams = cfg["channel"]["id"], cfg["channel"]["params"]
    for snd in cfg["senders"]:
        sp = cfg["sender_params"].get(snd, {})
        r = run(snd, cid, cparams, sender_params=sp, seed=seed, oracle=False, record_series=True, channel=ch,
                **kw)
        r["channel_name"] = "ns3"
        if not no_oracle:
            delivered = np.asarray(r["series"]["delivered_bits"])
            r["utilization"] = float(delivered.sum() / np.sum(N * np.minimum(safe, demand) * 0.1))
            if fb is not None and np.shape(fb) == delivered.shape:  # the same initial states
                den = np.minimum(N * safe * 0.1, np.asarray(fb, np.float64) * copy_bytes * 8)
                r["utilization_fb_demand"] = float(delivered.sum() / den.sum()) if den.sum() > 0 else math.nan
        r["latency_p95_s"] = ch.stats().get("comm/latency_p95_s", float("nan"))
        out.append(r)
        util = f"util {r['utilization']:.3f}" if "utilization" in r else "util - (no oracle)"
        print(f"seed {seed} {snd}: return {r['return']:.2f} {util} loss {r['loss']:.4f} "
              f"msgs/bcast {r['messages_vs_broadcast']:.3f} p95 latency {_secs(r['latency_p95_s'])} "
              f"({time.time() - t0:.0f} s)", flush=True)
    return safe, out


def _die_with_parent() -> None:
    """This process gets SIGKILL when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``, as the ns-3 bridge does), so
    a parent killed with kill -9 leaves no ``--jobs`` worker behind; nothing elsewhere. A parent that died before the
    call (its pid is no longer ours') ends the process at once."""
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's shutdown ends the workers as before
        return
    if os.getppid() != parent or parent == 1:
        os._exit(1)


def _worker_init(cid: str, cparams: dict) -> None:
    """A ``--jobs`` worker's start: one ns-3 channel for the seeds it runs (its child dies with the worker: the
    bridge's PR_SET_PDEATHSIG and stdin EOF); Ctrl-C is left to the parent, which ends the workers. The worker was
    started with SIGINT blocked (:class:`SeedPool`), so a Ctrl-C during its imports is never seen here: it is
    ignored from now on, then unblocked."""
    global _WORKER_CHANNEL
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which keeps what finished and ends us
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending one is dropped: it is ignored
    _WORKER_CHANNEL = make_component("channel", cid, **cparams)
    atexit.register(_WORKER_CHANNEL.close)


def _worker_seed(arg: tuple) -> tuple[np.ndarray | None, list[dict]]:
    """:func:`seed_runs` in a ``--jobs`` worker, over its channel."""
    seed, cache, fb, job = arg
    return seed_runs(seed, ch=_WORKER_CHANNEL, cache=cache, fb=fb, **job)


class SeedPool:
    """``--jobs``: seeds run in ``jobs`` worker processes (spawned, one ns-3 child each), at most ``2 * jobs`` of them
    submitted at a time, and their results taken in seed order (:meth:`result`), so what the parent has taken is
    always seeds ``todo[0]..`` without a gap.

    A worker that dies (kill -9, the out-of-memory killer) breaks the pool: :meth:`result` raises
    :class:`SeedsFailed` naming the seed, instead of waiting forever. The workers start with SIGINT blocked (a
    Ctrl-C during their imports would print their traceback); :func:`_worker_init` ignores it, then unblocks it.

    Args:
        args_of: a seed's argument tuple for :func:`_worker_seed`.
    """

    def __init__(self, jobs: int, cid: str, cparams: dict, todo, args_of):
        self.jobs, self.cid, self.cparams = jobs, cid, cparams
        self.todo, self.args_of, self.window = list(todo), args_of, 2 * jobs
        self.futures: dict[int, Any] = {}
        self.next = 0
        self.ex: ProcessPoolExecutor | None = None
        self.procs: list = []

    def start(self) -> None:
        """Start the workers and submit the first seeds. A Ctrl-C meanwhile is raised when this returns (the pool
        exists then, so :meth:`kill` ends it)."""
        from multiprocessing import resource_tracker

        ctx = multiprocessing.get_context("spawn")  # not fork: the parent may hold threads (torch, BLAS)
        # the pool's locks start multiprocessing's resource tracker, whose start unblocks SIGINT in this process
        # (it blocks, spawns, then unblocks rather than restoring the mask): started before the mask, it leaves it be
        resource_tracker.ensure_running()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # the workers inherit the blocked mask
        try:
            self.ex = ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_worker_init,
                                          initargs=(self.cid, self.cparams))
            try:
                self._fill()  # starts the workers (one per submit, up to jobs)
            finally:
                self.procs = list(self.ex._processes.values())
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a Ctrl-C held meanwhile is raised now

    def _fill(self) -> None:
        while self.next < len(self.todo) and len(self.futures) < self.window:
            seed = self.todo[self.next]
            self.futures[seed] = self.ex.submit(_worker_seed, self.args_of(seed))
            self.next += 1

    def result(self, seed: int) -> tuple[np.ndarray | None, list[dict]]:
        """Seed ``seed``'s result (the seeds before it were taken already), then the next seed submitted.

        Raises:
            SeedsFailed: a worker process died (the message without what --out keeps: :func:`main` adds it).
            Exception: the seed's own error (a ChannelError of its ns-3 child, ...), as it was raised in the worker.
        """
        try:
            out = self.futures[seed].result()
        except BrokenProcessPool:
            raise SeedsFailed(f"seed {seed} did not finish: {self.dead_worker()}") from None
        del self.futures[seed]
        self._fill()
        return out

    def dead_worker(self) -> str:
        """Which worker process ended, and how, for the message of a broken pool."""
        for p in self.procs:
            p.join(timeout=1)  # the pool ends the others (SIGTERM) once it is broken
        dead = [p for p in self.procs if p.exitcode not in (None, 0, -signal.SIGTERM)] or [
            p for p in self.procs if p.exitcode not in (None, 0)]
        if not dead:
            return "a --jobs worker process ended abruptly (which ends the others too)"
        p = dead[0]
        if p.exitcode < 0:
            name = signal.Signals(-p.exitcode).name
            how = f"was killed by {name}" + (" (kill -9, or the out-of-memory killer)" if name == "SIGKILL" else "")
        else:
            how = f"exited with code {p.exitcode}"
        return f"a --jobs worker process (pid {p.pid}) {how}, which ends the others too"

    def ahead(self) -> int:
        """Seeds that finished after one before them that is not taken: kept nowhere, they run again."""
        return sum(1 for f in self.futures.values() if f.done() and not f.cancelled() and f.exception() is None)

    def close(self) -> None:
        """Every seed taken: the workers end (and close their ns-3 children)."""
        self.ex.shutdown(wait=True)

    def kill(self) -> None:
        """An interrupt or an error: the workers are ended now (SIGTERM, then SIGKILL after 5 s), their ns-3 children
        with them (PR_SET_PDEATHSIG), and the pool's threads are given 5 s to finish."""
        if self.ex is None:
            return
        if self.ex._processes:  # started after the list was taken (not expected)
            self.procs += [p for p in self.ex._processes.values() if p not in self.procs]
        thread = getattr(self.ex, "_executor_manager_thread", None)  # shutdown() forgets it
        for p in self.procs:
            if p.exitcode is None:
                p.terminate()
        self.ex.shutdown(wait=False, cancel_futures=True)
        for p in self.procs:
            p.join(timeout=5)
            if p.exitcode is None:
                p.kill()
                p.join(timeout=5)
        if thread is not None:
            thread.join(timeout=5)


def main(argv: list[str] | None = None) -> dict:
    _PROGRESS.clear()  # nothing from an earlier call in this process
    ap = argparse.ArgumentParser(prog="python -m coopsim.comm.ns3.experiment", description=__doc__.splitlines()[0])
    ap.add_argument("config", help="the experiment file (YAML), e.g. configs/ns3/ddacom-spread.yaml (its keys: "
                                   "docs/ns3.md, 'Experiments')")
    ap.add_argument("--out", default=DEFAULT_OUT,
                    help="the results JSON, rewritten as seeds finish (at most every 30 s, and on an interrupt); when it holds a result with the same "
                         "settings, the run resumes from its finished seeds, and a result with other settings is kept "
                         f"until this run has finished more seeds than it holds (meanwhile this run writes a partial "
                         f"file beside it); an existing file that is not a results "
                         f"file of this command is refused (default {DEFAULT_OUT})")
    ap.add_argument("--plot", default=None,
                    help="write the time-series figure here, an image file whose suffix names its format (.png, "
                         ".pdf, .svg, ...); not the --out file nor the experiment file")
    ap.add_argument("--calibrate", default=None, help="comma-separated constant background loads per pair (bit/s)")
    ap.add_argument("--oracle-cache", default="runs/ns3-oracle-cache",
                    help="folder of cached oracle sweeps (one JSON per seed and setting) and normalization anchors "
                         "(one JSON per scenario, envs and episodes); '' turns caching off (default "
                         "runs/ns3-oracle-cache)")
    ap.add_argument("--cached-oracle-only", action="store_true",
                    help="stop with an error naming the seed instead of running the oracle's sweep for a seed that is not cached")
    ap.add_argument("--senders", default=None, help="comma-separated senders to run instead of the config's")
    ap.add_argument("--seeds", type=int_in_range(1, SEEDS_MAX), default=None,
                    help=f"ns-3 seeds 0..N-1 instead of the config's 'seeds', 1-{SEEDS_MAX} (the anchors cover at "
                         "least these)")
    ap.add_argument("--no-oracle", action="store_true",
                    help="skip the safe-rate oracle (most of the wall time): normalized return, loss and messages "
                         "only, no utilization and no --plot; for tighter return intervals over many seeds")
    ap.add_argument("--sender-param", action="append", default=[], metavar="SENDER.KEY=VALUE",
                    help="override a sender param of the config (repeatable), e.g. ddacom.target_utilization=0.6")
    ap.add_argument("--jobs", type=int_in_range(0, 256), default=1, metavar="N",
                    help="ns-3 seeds run at a time, 0..256, each in a process of its own with its own ns-3 child (0: "
                         "one per CPU core; at most the number of seeds to run); the results are the same as with 1, "
                         "seed for seed, and --out still holds seeds 0..done-1 after each write; it helps only with "
                         "idle cores (each process takes about 4 s to start); not used by --calibrate (default 1)")
    a = ap.parse_args(argv)
    if a.no_oracle and (a.plot or a.cached_oracle_only):
        ap.error(f"--no-oracle runs no oracle, so {'--plot (the safe rate over time)' if a.plot else '--cached-oracle-only'}"
                 " has nothing to use; drop one of them")
    loads = parse_loads(a.calibrate) if a.calibrate is not None else None  # before any ns-3 run
    if loads is not None and a.jobs != 1:
        print(f"note: --jobs {a.jobs} is ignored with --calibrate (its loads run one after another in one ns-3 child)",
              flush=True)
    cores = os.cpu_count() or 1
    check_writable("--out", a.out)  # before minutes of ns-3 runs, not at the first seed's write
    check_out(a.out, a.config)  # never over the config itself or a file that is not ours
    if a.plot:
        check_plot(a.plot, a.out, a.config)  # the figure is written last: never over the results or the config
        check_writable("--plot", a.plot)
        check_image_path(a.plot, "--plot", suffix_required=True)  # not matplotlib's traceback after the whole run
    if a.oracle_cache:  # a file there would make every cache write fail, with a note about something else
        check_cache_folder(a.oracle_cache)
    cfg = load(a.config)
    if a.seeds is not None:
        cfg["seeds"] = a.seeds
    if a.senders is not None:
        names = [x.strip() for x in a.senders.split(",")]
        if any(names) and not all(names):  # 'ddacom,' or 'ddacom,,none': as ddacom.evaluate refuses it
            raise ConfigError(f"an empty sender name in {a.senders!r}; give comma-separated names, e.g. ddacom,none",
                              key="--senders", value=a.senders)
        cfg["senders"] = check_senders([x for x in names if x], file=None, key="--senders", given=a.senders)
    elif "senders" not in cfg:
        raise ConfigError(f"no senders: give senders: [...] (of {', '.join(SENDER_NAMES)}) or --senders",
                          file=a.config, key="senders")
    check_sender_param_repeats(a.sender_param)  # the last of two values would win silently
    cli_params = parse_sender_params(a.sender_param, list(cfg["senders"]), check=False)  # checked below
    # every sender's params, those of senders this run leaves out too (a typo there is a typo), before the anchors:
    # the file's with the options over them (an option may need a key of the file), as the sender (and DDACOM's
    # probe) will take them
    for snd in list(cfg["senders"]) + [x for x in cfg["sender_params"] if x not in cfg["senders"]]:
        try:
            sender_class(snd)
        except ConfigError as exc:
            raise ConfigError(exc.message, file=a.config, key=f"sender_params.{snd}", value=snd) from None
        check_config_sender_params(snd, cfg["sender_params"].get(snd) or {}, cli_params.get(snd, {}), file=a.config)
    for snd, params in cli_params.items():
        cfg["sender_params"].setdefault(snd, {}).update(params)
    if loads is not None:
        held = previous_result(a.out)
        if held is not None:  # a calibration is another kind of output: never over an experiment's seeds
            raise ConfigError(f"{a.out} holds an experiment result ({held['seeds_done']} seed(s)) that --calibrate "
                              "would replace; give --calibrate another --out", key="--out", value=a.out)
        rows = calibrate(cfg, loads)
        atomic_write_json(Path(a.out), {"writer": NS3_EXPERIMENT_WRITER, "config": cfg, "calibration": rows}, indent=1)
        return {"calibration": rows}
    kw = _scenario_kw(cfg)
    N, E, T = kw["num_agents"], kw["num_envs"], kw["episodes"] * 25
    copy_bytes, demand = _demand(kw)
    orc = cfg["oracle"]
    rates = np.linspace(orc["min_frac"], orc["max_frac"], orc["rates"]) * demand
    cid, cparams = cfg["channel"]["id"], cfg["channel"]["params"]
    S = cfg["seeds"]
    K = max(cfg["anchor_seeds"], S)  # every ns-3 seed is paired with its anchors

    # --out: resume from a result with the same settings; keep one with other settings until this run has more
    cur = settings(cfg, oracle=not a.no_oracle)
    prev = previous_result(a.out)
    reused, safe, diff = reusable_seeds(prev, cur, S, T, E) if prev is not None else ([], {}, [])
    prev_n = prev["seeds_done"] if prev is not None else 0
    # a result of this run's settings that --out (other settings, more seeds) could not take yet waits beside it
    partial = partial_path(Path(a.out), cur)
    source = a.out
    if diff:
        aside = previous_result(partial)
        r2, s2, d2 = reusable_seeds(aside, cur, S, T, E) if aside is not None else ([], {}, ["-"])
        if not d2 and r2:
            reused, safe, source = r2, s2, str(partial)
    start = len(reused) // len(cfg["senders"])  # ns-3 seeds 0..start-1 come from --out (or the partial file)
    if start or (prev is not None and not diff):
        print(f"reusing {start} finished seed(s) from {source} (the same settings)" + (
            f"; running seeds {start}..{S - 1}" if start < S else
            f"; nothing to run in ns-3, and {source} is left as it is"), flush=True)
    if prev is not None and diff:
        print(f"note: {a.out} holds a result of {prev_n} seed(s) with other settings (differs in: {', '.join(diff)}); "
              f"it is replaced only when this run has finished more seeds than that; until then this run's result "
              f"goes to {partial} (give another --out to keep both apart)", flush=True)
    _PROGRESS.update(out=a.out, seeds=S, prev_seeds=prev_n, same_settings=prev is not None and not diff,
                     partial=str(partial))

    def target(done: int) -> Path | None:
        """Where the result of ``done`` seeds is written: --out unless that would replace a result of more seeds
        (or as many, of other settings), then the partial file beside it; None when nothing new is there to write."""
        if prev is None or done > prev_n:
            return Path(a.out)
        return partial if diff else None

    def cache_path(seed: int) -> Path | None:
        return (Path(a.oracle_cache) / f"oracle-seed{seed}-{oracle_cache_key(cfg, kw, seed, rates, T)}.json"
                if a.oracle_cache else None)

    todo = range(start, S)  # the ns-3 seeds this run computes
    if a.cached_oracle_only and not a.no_oracle:   # checked before the anchors' runs, so a missing cache fails at once
        why = {s: cache_problem(cache_path(s), T, E, orc["estimator"], rates) for s in todo}
        missing = [str(cache_path(s)) for s in todo if why[s] is not None]
        if missing:
            first = next(why[s] for s in todo if why[s] is not None)
            raise ConfigError(f"no cached oracle for {len(missing)} of {len(todo)} seeds (--cached-oracle-only): "
                              f"{missing[0]} ({first}){' ...' if len(missing) > 1 else ''}; run once without "
                              f"--cached-oracle-only to fill the cache ({orc['rates']} ns-3 runs per seed: about "
                              f"{max(1, round(orc['rates'] * 6 / 60))} min, several times that on a heavily loaded "
                              "machine)",
                              key="--oracle-cache", value=a.oracle_cache)
    if not a.no_oracle and not a.cached_oracle_only and a.oracle_cache and not all(
            _usable_cache(cache_path(s), T, E, orc["estimator"], rates) for s in todo):
        # a seed's sweep (minutes) is written there when it ends: a folder that cannot take it fails now, not then
        try:
            check_writable("--oracle-cache", a.oracle_cache, folder=True)
        except ConfigError as exc:
            raise ConfigError(f"{exc.message}, or --oracle-cache '' to run without the cache", key="--oracle-cache",
                              value=a.oracle_cache) from None
    t0 = time.time()
    anchor_cache = anchor_cache_path(a.oracle_cache, kw)
    results, from_cache = run_anchors(kw, K, S, anchor_cache)  # no ns-3, cheap; the series for the ns-3 seeds
    anchors = {snd: {r["seed"]: r["return"] for r in results if r["sender"] == snd} for snd in ("none", "broadcast")}
    gap = anchor_gap(anchors["none"], anchors["broadcast"])
    gap["obs_radius_m"] = kw["obs_radius_m"]
    ratio = gap["mean"] / gap["half_width"] if gap["half_width"] > 0 else float("nan")
    cached_note = (f"; {from_cache} seed(s) read from {anchor_cache}" if from_cache else "")
    print(f"anchors: {K} seeds x {E} envs x {kw['episodes']} episodes over ideal-v0, obs radius "
          f"{kw['obs_radius_m']} m: R_none {np.mean(list(anchors['none'].values())):.2f}, R_broadcast,ideal "
          f"{np.mean(list(anchors['broadcast'].values())):.2f}, gap {gap['mean']:.2f} +- {gap['half_width']:.2f} "
          f"({'judged' if gap['judged'] else 'NOT judged'}: gap / half-width {ratio:.1f}, needs > 3) "
          f"({time.time() - t0:.0f} s{cached_note})", flush=True)
    results += reused
    written = 0
    fb_offered = {r["seed"]: r["series"]["offered_copies"] for r in results if r.get("channel_name") == "ideal"
                  and r["sender"] == "broadcast" and "series" in r}

    last_write = [-math.inf]  # time.monotonic() of the last write

    def record(done: int, force: bool = False) -> dict:
        """The summary of the seeds done so far, written where :func:`target` says (--out or the partial file): at
        the first and the last seed, when ``force`` (an interrupt or an error keeps what finished), and otherwise at
        most every :data:`WRITE_EVERY_S` s, since a file of thousands of seeds takes seconds to write."""
        nonlocal written
        summary = _summary(results, gap, anchors)
        _PROGRESS.update(summary=summary, finished=done)
        where = target(done)
        due = force or done == S or written == 0 or time.monotonic() - last_write[0] >= WRITE_EVERY_S
        if where is not None and due and done > written:
            ts = time_series(results, safe, N, demand) if not a.no_oracle else None
            def slim(r: dict) -> dict:  # without the oracle nothing reads the anchors' per-step series: left out
                return {k: v for k, v in r.items() if k != "return_per_env_episode" and not (
                    a.no_oracle and k == "series" and r.get("channel_name") == "ideal")}

            atomic_write_json(where, {
                "writer": NS3_EXPERIMENT_WRITER, "config": cfg, "settings": cur, "seeds_done": done,
                "oracle": not a.no_oracle, "demand_bps": demand,
                "copy_bytes": copy_bytes,
                "oracle_rates_bps": rates.tolist(), "safe_bps": {s: v.tolist() for s, v in safe.items()},
                "summary": summary, "time_series": ts, "wall_s": time.time() - t0,
                "runs": [slim(r) for r in results]}, indent=1 if len(results) <= _INDENT_MAX_RUNS else None)
            written = done
            last_write[0] = time.monotonic()
            _PROGRESS.update(written=done, written_to=str(where))  # after the write: never claims more than it has
            if where == Path(a.out) and partial.exists():  # --out holds this run's settings now
                partial.unlink()
        return summary

    if start:
        _PROGRESS.update(summary=_summary(results, gap, anchors), finished=start)
    job = dict(cfg=cfg, kw=kw, rates=rates, demand=demand, copy_bytes=copy_bytes, no_oracle=a.no_oracle,
               cached_only=a.cached_oracle_only, t0=t0)

    def take(seed: int, out: tuple[np.ndarray | None, list[dict]]) -> None:
        if out[0] is not None:
            safe[seed] = out[0]
        results.extend(out[1])
        record(seed + 1)

    pool = None
    seed = start  # the seed running (with --jobs: the first one not taken yet)
    try:
        jobs = max(1, min(a.jobs or cores, len(todo)))
        if jobs == 1:  # one ns-3 child, reused for every seed (reset with the seed before each run)
            ch = make_component("channel", cid, **cparams) if todo else None
            try:
                for seed in todo:
                    take(seed, seed_runs(seed, ch=ch, cache=cache_path(seed), fb=fb_offered.get(seed), **job))
            finally:
                if ch is not None:
                    ch.close()
        else:  # one ns-3 child per worker process; seeds are taken in order, so --out always holds seeds 0..done-1
            capped = f" (--jobs {a.jobs}, at most one per seed to run)" if a.jobs > jobs else ""
            print(f"running seeds {start}..{S - 1} in {jobs} processes{capped}", flush=True)
            if jobs > cores:
                print(f"note: {jobs} processes on {cores} CPU core(s): they share the cores (and each runs an ns-3 "
                      f"child), so this is likely slower than --jobs {cores}", flush=True)
            pool = SeedPool(jobs, cid, cparams, todo,
                            lambda s: (s, cache_path(s), fb_offered.get(s), job))
            pool.start()
            for seed in todo:
                take(seed, pool.result(seed))
            pool.close()
    except BaseException as exc:  # an interrupt, or an error in a seed: the finished seeds not written yet go to the file
        with signals_held():  # a second Ctrl-C (or SIGTERM) must not cut this short
            if pool is not None:
                _PROGRESS["ahead"] = pool.ahead()
                pool.kill()
            if _PROGRESS.get("finished", 0) > written:
                record(_PROGRESS["finished"], force=True)
        if isinstance(exc, ChannelError):  # ns-3 or a worker failed: not the input's fault (exit 1, not 2)
            what = str(exc) if isinstance(exc, SeedsFailed) else f"seed {seed} failed: {exc}"
            raise SeedsFailed(f"{what}; kept: {kept_text()}") from None
        raise
    summary = _PROGRESS["summary"]  # of every seed: the last record(), or the reused seeds alone
    ts = time_series(results, safe, N, demand) if not a.no_oracle else None
    print_results(summary)
    print(f"{GAP_CI_METHOD}; judged (gap > 3 half-widths): {gap['judged']}; obs radius {kw['obs_radius_m']} m")
    g6 = summary["anchor_gap_ns3_seeds"]
    hw = f" +- {g6['half_width']:.2f}" if np.isfinite(g6["half_width"]) else " (1 seed: no CI)"
    print(f"anchor gap on the {g6['seeds']} ns-3 seeds (the ratio's denominator): {g6['mean']:.2f}{hw}, "
          f"judged: {g6['judged']}")
    print(NR_CI_METHOD)
    for k, row in summary["rows"].items():
        print(f"{k:<24} latency p95 {latency_text(k, results)}")
    if a.plot:
        plot(ts, a.plot, seeds=len({r["seed"] for r in results if r.get("channel_name") == "ns3"}), envs=E)
    if written:
        print(f"wrote {_PROGRESS.get('written_to', a.out)} ({written} seed(s))"
              + (f"; {a.out} kept as it was ({prev_n} seed(s), other settings)"
                 if _PROGRESS.get("written_to") == str(partial) else ""))
    elif prev is not None:
        print(f"{a.out} left as it was ({prev_n} seed(s){'' if not diff else ', other settings'})")
    print(f"wall {time.time() - t0:.0f} s")
    return summary


def cli(argv: list[str] | None = None) -> dict:
    """:func:`main` for the command line: a :class:`SeedsFailed` (ns-3 or a worker process failed) is one line
    ``error: ...`` with what --out keeps, and exit code 1 (a failure of the run; 2 is for the input's errors, which
    ``run_script`` prints)."""
    try:
        return main(argv)
    except SeedsFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    run_script(cli, kept=kept_on_interrupt)
