"""DDACOM and the comm baselines on simple_spread over ``ns3-v0`` (configs/ns3/*.yaml).

For each seed: the normalization anchors (no communication and full broadcast over ``ideal-v0``), then
every sender of the config over the config's ns-3 channel, with :func:`coopsim.agents.ddacom.evaluate.run`
(the runner loop plus channel feedback to the senders). Reported per sender, mean and 95% CI over seeds:
normalized return ``(R - R_none) / (R_broadcast,ideal - R_none)``, loss (lost / offered copies),
messages as a fraction of full broadcast, and ``goodput_vs_broadcast``: copies delivered divided by those
the saturating broadcast sender got through the same ns-3 channel and seed (ns-3 has no closed-form
safe rate, so the issue's utilization oracle of ``bandwidth-v0`` does not apply; this is the
empirical stand-in).

    .venv/bin/python -m coopsim.comm.ns3.experiment configs/ns3/ddacom-spread.yaml --out runs/ns3-ddacom.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from coopsim.agents.ddacom.evaluate import ci95, print_table, run, summarize
from coopsim.errors import ConfigError

_KEYS = {"scenario", "senders", "sender_params", "num_envs", "episodes", "seeds", "channel"}


def load(path: str) -> dict:
    """Read and check an experiment config; raises ConfigError naming the file and the bad key."""
    cfg = yaml.safe_load(Path(path).read_text())
    if not isinstance(cfg, dict):
        raise ConfigError("expected a mapping at the top level", file=path)
    extra = set(cfg) - _KEYS
    if extra:
        raise ConfigError(f"unknown keys {sorted(extra)}; valid: {sorted(_KEYS)}", file=path, key=sorted(extra)[0])
    if cfg.get("channel", {}).get("id") != "ns3-v0":
        raise ConfigError("channel.id must be ns3-v0", file=path, key="channel.id", value=cfg.get("channel"))
    return cfg


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--out", default="runs/ns3-experiment.json")
    a = ap.parse_args(argv)
    cfg = load(a.config)
    sc = cfg.get("scenario", {})
    kw = dict(num_agents=int(sc.get("num_agents", 6)), obs_radius_m=sc.get("obs_radius_m", 0.5),
              num_envs=int(cfg.get("num_envs", 2)), episodes=int(cfg.get("episodes", 4)))
    cid, cparams = cfg["channel"]["id"], cfg["channel"].get("params", {})
    results, t0 = [], time.time()
    for seed in range(int(cfg.get("seeds", 2))):
        for snd in ("none", "broadcast"):
            r = run(snd, "ideal-v0", {}, seed=seed, oracle=False, **kw)
            r["channel_name"] = "ideal"
            results.append(r)
        ns3_runs = {}
        for snd in cfg["senders"]:
            sp = cfg.get("sender_params", {}).get(snd, {})
            r = run(snd, cid, cparams, sender_params=sp, seed=seed, oracle=False, **kw)
            r["channel_name"] = "ns3"
            ns3_runs[snd] = r
            results.append(r)
            print(f"seed {seed} {snd}: return {r['return']:.2f} loss {r['loss']:.3f} "
                  f"msgs/bcast {r['messages_vs_broadcast']:.3f} ({time.time() - t0:.0f} s)", flush=True)
        if "broadcast" in ns3_runs:
            ref = max(ns3_runs["broadcast"]["copies_delivered"], 1.0)
            for r in ns3_runs.values():
                r["goodput_vs_broadcast"] = r["copies_delivered"] / ref
    summary = summarize(results)
    for key, row in summary["rows"].items():
        rs = [r for r in results if f"{r['channel_name']}/{r['sender']}" == key and "goodput_vs_broadcast" in r]
        if rs:
            row["goodput_vs_broadcast"] = ci95([r["goodput_vs_broadcast"] for r in rs])
    print_table(summary)
    for key, row in summary["rows"].items():
        if "goodput_vs_broadcast" in row:
            m, h = row["goodput_vs_broadcast"]
            print(f"{key:<24} goodput vs broadcast {m:.3f} +- {h:.3f}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"config": cfg, "summary": summary, "runs": [
        {k: v for k, v in r.items() if k != "return_per_env_episode"} for r in results]}, indent=1))
    return summary


if __name__ == "__main__":
    main()
