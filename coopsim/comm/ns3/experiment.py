"""DDACOM and the comm baselines on simple_spread over ``ns3-v0`` (configs/ns3/*.yaml), with the issue-6 metrics.

First the normalization anchors, no communication and full broadcast over ``ideal-v0``, for ``anchor_seeds``
seeds 0..K-1 (default: ``seeds``; they need no ns-3, so many seeds are cheap), each with the same envs,
episodes and reset seeds as an ns-3 run of that seed, so the two anchors and every sender of a seed start
from the same initial states. Then for each of the ``seeds`` seeds: every sender of the config over the
config's ns-3 channel (one ns-3 child reused, reset with the seed before each
run), with :func:`coopsim.agents.ddacom.evaluate.run` (the runner loop plus channel feedback to the
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
``--cached-oracle-only`` fails instead of running a sweep that is not cached.

``--calibrate 0,1e6,2e6`` instead measures, for each constant background load per pair (bit/s), the rate
each agent gets through when all of them offer the full-broadcast demand, without the latency bound (the
saturation throughput, an upper bound of the safe rate), as a fraction of the demand: the calibration of
the background schedule.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import time
from pathlib import Path

import numpy as np
import yaml

from coopsim.agents.comm_baselines.team import check_sender_params, parse_sender_params, sender_class
from coopsim.agents.ddacom.evaluate import print_table, run, summarize
from coopsim.comm.oracle import _CBR, safe_rate_sweep
from coopsim.errors import ConfigError, int_at_least, run_script
from coopsim.platform.comm import DEFAULT_HEADER_BYTES
from coopsim.platform.recorder import atomic_savefig, atomic_write_json, check_writable
from coopsim.platform.registry import make_component, make_scenario

_KEYS = {"scenario", "senders", "sender_params", "num_envs", "episodes", "seeds", "anchor_seeds", "channel", "oracle"}
#: what this script reads, for its messages
_WHAT = "an ns-3 experiment file (YAML), e.g. configs/ns3/ddacom-spread.yaml"
BIN_STEPS = 10  # time-series bins of 1 s at dt_s = 0.1 s


def load(path: str) -> dict:
    """Read and check an experiment config; raises ConfigError naming the file and the bad key."""
    from coopsim.platform.config import read_yaml_text

    if Path(path).exists() and not Path(path).is_file():
        raise ConfigError(f"{'is a directory' if Path(path).is_dir() else 'not a regular file'} (give {_WHAT})",
                          file=path)
    try:
        cfg = yaml.safe_load(read_yaml_text(Path(path), path, _WHAT))  # unreadable or not UTF-8: a ConfigError
    except yaml.YAMLError as e:
        raise ConfigError(f"not valid YAML: {e}", file=path) from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"expected a mapping at the top level ({_WHAT})", file=path)
    if {"name", "agents"} <= set(cfg):
        raise ConfigError("this is a coopsim run config, not an ns-3 experiment file: run it with `coopsim run "
                          f"{shlex.quote(str(path))}`; this script takes {_WHAT}", file=path)
    extra = set(cfg) - _KEYS
    if extra:
        raise ConfigError(f"unknown keys {sorted(extra)}; valid: {sorted(_KEYS)}", file=path, key=sorted(extra)[0])
    if cfg.get("channel", {}).get("id") != "ns3-v0":
        raise ConfigError("channel.id must be ns3-v0", file=path, key="channel.id", value=cfg.get("channel"))
    orc = cfg.get("oracle", {}) or {}
    bad = set(orc) - {"rates", "min_frac", "max_frac", "drain_steps"}
    if bad:
        raise ConfigError(f"unknown keys {sorted(bad)}; valid: drain_steps, max_frac, min_frac, rates", file=path,
                          key=f"oracle.{sorted(bad)[0]}")
    seeds = cfg.get("seeds", 2)
    anchor_seeds = cfg.get("anchor_seeds", seeds)
    for key, v in (("seeds", seeds), ("anchor_seeds", anchor_seeds)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError("expected an integer >= 1", file=path, key=key, value=v)
    if anchor_seeds < seeds:
        raise ConfigError(f"anchor_seeds ({anchor_seeds}) must be >= seeds ({seeds}): every ns-3 seed needs its "
                          "anchors", file=path, key="anchor_seeds", value=anchor_seeds)
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
    sc = cfg.get("scenario", {})
    return dict(num_agents=int(sc.get("num_agents", 6)), obs_radius_m=sc.get("obs_radius_m", 0.5),
                num_envs=int(cfg.get("num_envs", 2)), episodes=int(cfg.get("episodes", 4)),
                payload_floats=int(sc.get("payload_floats", 3)))


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


def plot(ts: dict, path: str, episode_s: float = 2.5) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(4, 1, figsize=(7, 9), sharex=True)
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
    ax0b = ax[0].twinx()
    ax0b.step(tb, ts["safe_rate_frac"], where="mid", color="k", ls="--", alpha=0.5)
    ax0b.set_ylabel("oracle safe rate / demand (--)")
    ax[0].set_ylabel("utilization")
    ax[1].set_ylabel("loss %")
    ax[1].set_yscale("symlog", linthresh=0.3)
    ax[1].axhline(0.3, color="k", lw=0.5)
    ax[2].set_ylabel("messages / broadcast")
    ax[3].set_ylabel("normalized return")
    ax[3].set_xlabel("time (s); normalized return per 2.5 s episode")
    ax[0].legend(fontsize=7, ncol=4)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=80)


ORACLE_CACHE_VERSION = 1


def oracle_cache_key(cfg: dict, kw: dict, seed: int, rates: np.ndarray, num_steps: int) -> str:
    """Hash (sha1 hex) of everything the oracle's sweep for one seed depends on; never of the senders."""
    what = {"v": ORACLE_CACHE_VERSION, "channel": cfg["channel"], "oracle": cfg.get("oracle", {}) or {},
            "scenario": {k: kw[k] for k in ("num_agents", "obs_radius_m", "num_envs", "payload_floats")},
            "steps": int(num_steps), "seed": int(seed), "rates_bps": [float(r) for r in rates]}
    return hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read_cached_oracle(path: Path) -> np.ndarray | None:
    try:
        return np.asarray(json.loads(path.read_text())["safe_bps"], np.float64)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable: recompute (and overwrite it)


def _usable_cache(path: Path | None, T: int, E: int) -> bool:
    """Whether ``path`` holds a cached oracle sweep the run would use (else it computes and writes one)."""
    try:
        if path is None or not path.is_file():
            return False
    except OSError:  # a folder we may not look into: check_writable says so
        return False
    cached = _read_cached_oracle(path)
    return cached is not None and cached.shape == (T, E)


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
            rs = {r["seed"]: r["return"] for r in results if r["channel_name"] == "ns3" and r["sender"] == snd}
            row["normalized_return"] = normalized_return(rs, anchors["none"], anchors["broadcast"])
        elif snd in ("none", "broadcast"):
            row["normalized_return"] = (0.0, 0.0) if snd == "none" else (1.0, 0.0)  # the anchors, by definition
    return out


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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--out", default="runs/ns3-experiment.json")
    ap.add_argument("--plot", default=None, help="write the time-series figure here (png)")
    ap.add_argument("--calibrate", default=None, help="comma-separated constant background loads per pair (bit/s)")
    ap.add_argument("--oracle-cache", default="runs/ns3-oracle-cache",
                    help="folder of cached oracle sweeps (one JSON per seed and setting); '' turns caching off")
    ap.add_argument("--cached-oracle-only", action="store_true",
                    help="fail (ConfigError) instead of running the oracle's sweep for a seed that is not cached")
    ap.add_argument("--senders", default=None, help="comma-separated senders to run instead of the config's")
    ap.add_argument("--seeds", type=int_at_least(1), default=None,
                    help="ns-3 seeds 0..N-1 instead of the config's 'seeds' (the anchors cover at least these)")
    ap.add_argument("--no-oracle", action="store_true",
                    help="skip the safe-rate oracle (most of the wall time): normalized return, loss and messages "
                         "only, no utilization and no --plot; for tighter return intervals over many seeds")
    ap.add_argument("--sender-param", action="append", default=[], metavar="SENDER.KEY=VALUE",
                    help="override a sender param of the config (repeatable), e.g. ddacom.target_utilization=0.6")
    a = ap.parse_args(argv)
    if a.no_oracle and (a.plot or a.cached_oracle_only):
        ap.error(f"--no-oracle runs no oracle, so {'--plot (the safe rate over time)' if a.plot else '--cached-oracle-only'}"
                 " has nothing to use; drop one of them")
    loads = parse_loads(a.calibrate) if a.calibrate is not None else None  # before any ns-3 run
    check_writable("--out", a.out)  # before minutes of ns-3 runs, not at the first seed's write
    if a.plot:
        check_writable("--plot", a.plot)
    cfg = load(a.config)
    if a.seeds is not None:
        cfg["seeds"] = a.seeds
    if a.senders:
        cfg["senders"] = [x.strip() for x in a.senders.split(",") if x.strip()]
    for snd in cfg["senders"]:  # names checked before the anchors and the oracle (minutes per seed) run
        try:
            sender_class(snd)
        except ConfigError as exc:
            raise ConfigError(exc.message, file=None if a.senders else a.config,
                              key="--senders" if a.senders else "senders", value=snd) from None
    for snd, params in parse_sender_params(a.sender_param, list(cfg["senders"])).items():
        cfg.setdefault("sender_params", {}).setdefault(snd, {}).update(params)
    for snd in cfg["senders"]:  # the config's params with the overrides, before minutes of anchors
        check_sender_params(snd, (cfg.get("sender_params") or {}).get(snd) or {}, key="sender_params",
                            file=a.config)
    if loads is not None:
        rows = calibrate(cfg, loads)
        atomic_write_json(Path(a.out), {"config": cfg, "calibration": rows}, indent=1)
        return {"calibration": rows}
    kw = _scenario_kw(cfg)
    N, E, T = kw["num_agents"], kw["num_envs"], kw["episodes"] * 25
    copy_bytes, demand = _demand(kw)
    orc = cfg.get("oracle", {}) or {}
    rates = np.linspace(float(orc.get("min_frac", 0.1)), float(orc.get("max_frac", 0.6)), int(orc.get("rates", 21))) * demand
    cid, cparams = cfg["channel"]["id"], cfg["channel"].get("params", {})
    S = int(cfg.get("seeds", 2))
    K = max(int(cfg.get("anchor_seeds", S)), S)  # every ns-3 seed is paired with its anchors
    def cache_path(seed: int) -> Path | None:
        return (Path(a.oracle_cache) / f"oracle-seed{seed}-{oracle_cache_key(cfg, kw, seed, rates, T)}.json"
                if a.oracle_cache else None)

    if a.cached_oracle_only and not a.no_oracle:   # checked before the anchors' runs, so a missing cache fails at once
        missing = [str(cache_path(s)) for s in range(S) if cache_path(s) is None or not cache_path(s).exists()]
        if missing:
            raise ConfigError(f"no cached oracle for {len(missing)} of {S} seeds (--cached-oracle-only): {missing[0]}"
                              f"{' ...' if len(missing) > 1 else ''}; run once without --cached-oracle-only to fill the "
                              "cache (about 5-15 min per seed)", key="--oracle-cache", value=a.oracle_cache)
    if not a.no_oracle and not a.cached_oracle_only and a.oracle_cache and not all(
            _usable_cache(cache_path(s), T, E) for s in range(S)):
        # a seed's sweep (minutes) is written there when it ends: a folder that cannot take it fails now, not then
        try:
            check_writable("--oracle-cache", a.oracle_cache, folder=True)
        except ConfigError as exc:
            raise ConfigError(f"{exc.message}, or --oracle-cache '' to run without the cache", key="--oracle-cache",
                              value=a.oracle_cache) from None
    results, safe, t0 = [], {}, time.time()
    for seed in range(K):  # the anchors: no ns-3, cheap; the series only for the seeds that run in ns-3
        for snd in ("none", "broadcast"):
            r = run(snd, "ideal-v0", {}, seed=seed, oracle=False, record_series=seed < S, **kw)
            r["channel_name"] = "ideal"
            results.append(r)
    anchors = {snd: {r["seed"]: r["return"] for r in results if r["sender"] == snd} for snd in ("none", "broadcast")}
    gap = anchor_gap(anchors["none"], anchors["broadcast"])
    gap["obs_radius_m"] = kw["obs_radius_m"]
    ratio = gap["mean"] / gap["half_width"] if gap["half_width"] > 0 else float("nan")
    print(f"anchors: {K} seeds x {E} envs x {kw['episodes']} episodes over ideal-v0, obs radius "
          f"{kw['obs_radius_m']} m: R_none {np.mean(list(anchors['none'].values())):.2f}, R_broadcast,ideal "
          f"{np.mean(list(anchors['broadcast'].values())):.2f}, gap {gap['mean']:.2f} +- {gap['half_width']:.2f} "
          f"({'judged' if gap['judged'] else 'NOT judged'}: gap / half-width {ratio:.1f}, needs > 3) "
          f"({time.time() - t0:.0f} s)", flush=True)
    ch = make_component("channel", cid, **cparams)
    try:
        for seed in range(S):
            if not a.no_oracle:  # --no-oracle: return, loss and messages only (no sweep, no safe rate)
                cache = cache_path(seed)
                cached = _read_cached_oracle(cache) if cache is not None and cache.exists() else None
                if cached is not None and cached.shape == (T, E):
                    safe[seed] = cached
                    print(f"seed {seed} oracle: cached {cache}", flush=True)
                elif a.cached_oracle_only:
                    raise ConfigError(f"seed {seed}: no cached oracle {cache} (--cached-oracle-only)",
                                      key="--oracle-cache")
                else:
                    core = make_scenario("mpe/simple_spread-v0", num_envs=E, num_agents=N,
                                         obs_radius_m=kw["obs_radius_m"])
                    core.reset(seed=seed * 100_003)  # the agents' start positions of the first episode, kept still
                    orc_out = safe_rate_sweep(ch, seed=seed, num_envs=E, num_agents=N, dt_s=0.1, num_steps=T,
                                              copy_bytes=copy_bytes, rates_bps=rates, scenario=core,
                                              drain_steps=int(orc.get("drain_steps", 12)))
                    safe[seed] = orc_out["safe_bps"]
                    if cache is not None:
                        atomic_write_json(cache, {"channel": cfg["channel"], "seed": seed, "rates_bps": rates.tolist(),
                                                  "safe_bps": safe[seed].tolist()})
                sf = np.minimum(safe[seed], demand) / demand
                print(f"seed {seed} oracle: safe rate / demand min {sf.min():.3f} mean {sf.mean():.3f} max "
                      f"{sf.max():.3f} ({time.time() - t0:.0f} s)", flush=True)
            for snd in cfg["senders"]:
                sp = cfg.get("sender_params", {}).get(snd, {})
                r = run(snd, cid, cparams, sender_params=sp, seed=seed, oracle=False, record_series=True, channel=ch,
                        **kw)
                r["channel_name"] = "ns3"
                if not a.no_oracle:
                    delivered = np.asarray(r["series"]["delivered_bits"])
                    r["utilization"] = float(delivered.sum() / np.sum(N * np.minimum(safe[seed], demand) * 0.1))
                r["latency_p95_s"] = ch.stats().get("comm/latency_p95_s", float("nan"))
                results.append(r)
                util = f"util {r['utilization']:.3f}" if "utilization" in r else "util - (no oracle)"
                print(f"seed {seed} {snd}: return {r['return']:.2f} {util} loss {r['loss']:.4f} "
                      f"msgs/bcast {r['messages_vs_broadcast']:.3f} p95 latency {r['latency_p95_s']:.3f} s "
                      f"({time.time() - t0:.0f} s)", flush=True)
            summary = _summary(results, gap, anchors)
            ts = time_series(results, safe, N, demand) if not a.no_oracle else None
            atomic_write_json(Path(a.out), {
                "config": cfg, "seeds_done": seed + 1, "oracle": not a.no_oracle, "demand_bps": demand,
                "copy_bytes": copy_bytes,
                "oracle_rates_bps": rates.tolist(), "safe_bps": {s: v.tolist() for s, v in safe.items()},
                "summary": summary, "time_series": ts, "wall_s": time.time() - t0,
                "runs": [{k: v for k, v in r.items() if k != "return_per_env_episode"} for r in results]}, indent=1)
    finally:
        ch.close()
    print_table(summary)
    print(f"{GAP_CI_METHOD}; judged (gap > 3 half-widths): {gap['judged']}; obs radius {kw['obs_radius_m']} m")
    g6 = summary["anchor_gap_ns3_seeds"]
    print(f"anchor gap on the {g6['seeds']} ns-3 seeds (the ratio's denominator): {g6['mean']:.2f} +- "
          f"{g6['half_width']:.2f}, judged: {g6['judged']}")
    print(NR_CI_METHOD)
    for k, row in summary["rows"].items():
        lat = [r["latency_p95_s"] for r in results if f"{r['channel_name']}/{r['sender']}" == k and "latency_p95_s" in r]
        if lat:
            print(f"{k:<24} latency p95 {np.mean(lat):.3f} s")
    if a.plot:
        plot(ts, a.plot)
    print(f"wall {time.time() - t0:.0f} s")
    return summary


if __name__ == "__main__":
    run_script(main)
