"""CS-PIBT preference-order settings of IMMP's low level on held-out scen files (issue 4).

Runs ``mapf/immp-v0`` (shipped checkpoint unless ``--checkpoint``) with CS-PIBT and each given order setting on
random-32-32-10, room-32-32-4 and warehouse-10-20-10-2-1 at 64 agents and 3 goals, scen files 11-20 by default
(``--first-seed 10``; the evaluation uses scen files 1-5), and prints the mean SoC/LB over the solved instances
(``soc_over_lb`` is defined on solved episodes only) and the solved count per map. Settings:

* ``sorted``: actions by decreasing policy probability (the published CS-PIBT order);
* ``sampled:T``: a sample without replacement from softmax(logits / T) for every agent, every step;
* ``adaptive:P:F:T``: sorted while an agent progresses, sampled at temperature T once it made no progress on
  its cost-to-go for P steps; finished agents ``F`` = sorted / sampled.

    .venv/bin/python benchmarks/immp_cs_pibt_sweep.py [--first-seed 10] [--instances 10] sorted sampled:1 adaptive:16:sorted:3
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mapf_args import check_maps  # noqa: E402
from coopsim.errors import ConfigError, RegistryError, int_at_least, run_script
from coopsim.platform import registry
from coopsim.platform.runner import play_episode
from coopsim.platform.stats import t_half_width
from coopsim.scenarios.mapf import MGMAPFCore

MAPS = ("random-32-32-10", "room-32-32-4", "warehouse-10-20-10-2-1")


SETTINGS = "sorted, sampled[:T] or adaptive:P:F[:T] (P an integer >= 1, F sorted or sampled, T a number > 0)"


def params_of(setting: str) -> dict:
    """The agent params of an order ``setting`` (see the module docstring).

    Raises:
        ValueError: not one of the settings; says which are.
    """
    f = setting.split(":")
    kw: dict = {"cs_pibt": True, "cs_order": f[0]}
    try:
        if f[0] == "sorted" and len(f) == 1:
            pass
        elif f[0] == "sampled" and len(f) <= 2:
            kw["cs_temperature"] = float(f[1]) if len(f) > 1 else 1.0
        elif f[0] == "adaptive" and 3 <= len(f) <= 4 and f[2] in ("sorted", "sampled"):
            kw.update(cs_patience=int(f[1]), cs_finished=f[2], cs_temperature=float(f[3]) if len(f) > 3 else 1.0)
        else:
            raise ValueError
    except ValueError:
        raise ValueError(f"unknown setting {setting!r}: give {SETTINGS}") from None
    return kw


def setting_arg(text: str) -> str:
    """An ``argparse`` ``type=`` for an order setting (its values are checked against the agent's params later)."""
    try:
        params_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: {exc}") from None
    return text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("settings", nargs="+", type=setting_arg, help=SETTINGS)
    ap.add_argument("--first-seed", type=int_at_least(0), default=10,
                    help="episode seed of the first instance (seed s reads scen file s+1); the default, 10 with 10 "
                         "instances, is scen files 11-20, held out from the evaluation (scen files 1-5)")
    ap.add_argument("--instances", type=int_at_least(1), default=10, help="instances (seeds) per map (>= 1)")
    ap.add_argument("--agents", type=int_at_least(1), default=64, help="agents per instance (>= 1)")
    ap.add_argument("--goals", type=int_at_least(1), default=3, help="goals per agent (>= 1)")
    ap.add_argument("--checkpoint", default="shipped",
                    help="policy: 'shipped' (IMMP's fine-tuned policy, training seed 0), 'shipped-ppo' (before the "
                         "intent fine-tune), a policy file or a training run's seed directory")
    ap.add_argument("--agent", default="mapf/immp-v0", help="registered agent id (an IMMP variant)")
    a = ap.parse_args(argv)
    # every setting's agent params, before the first episode (a bad one used to stop the sweep after the others)
    if a.checkpoint not in ("shipped", "shipped-ppo") and not Path(a.checkpoint).exists():
        raise ConfigError(f"checkpoint {a.checkpoint!r} not found: give 'shipped' (this variant's shipped policy), "
                          "'shipped-ppo', a policy file, or a training run's seed directory", key="--checkpoint",
                          value=a.checkpoint)
    try:  # an agent with a checkpoint and CS-PIBT (mapf/immp-v0 and its variants, mapf/dppo-v0)
        registry.validate_params("agent", a.agent, {"checkpoint": a.checkpoint, "cs_pibt": True})
    except (RegistryError, ConfigError) as exc:
        raise ConfigError(f"{exc} (give a learned MG-MAPF agent such as mapf/immp-v0)", key="--agent",
                          value=a.agent) from None
    for setting in a.settings:
        try:
            registry.validate_params("agent", a.agent, {"checkpoint": a.checkpoint, **params_of(setting)})
        except ConfigError as exc:
            raise ConfigError(f"setting {setting!r}: {exc}", key="settings", value=setting) from None
    check_maps(MAPS, a.agents, a.goals)
    torch.set_num_threads(1)
    seeds = range(a.first_seed, a.first_seed + a.instances)
    print(f"{a.agent} ({a.checkpoint}) with CS-PIBT, {a.agents} agents, {a.goals} goals, scen files {seeds.start + 1}-{seeds.stop}")
    for setting in a.settings:
        cells = []
        for mp in MAPS:
            r = []
            for seed in seeds:
                core = MGMAPFCore(1, map=mp, num_agents=a.agents, num_goals=a.goals, obs_radius=3, goal_order="free",
                                  conflicts="block", max_steps=768 if mp.startswith("warehouse") else 384)
                agent = registry.make_component("agent", a.agent, core, checkpoint=a.checkpoint, **params_of(setting))
                m = play_episode(core, agent, seed)
                r.append((m["soc_over_lb"], m["success"]))
            r = np.array(r)
            cells.append(f"{mp} {t_half_width(r[:, 0])[0]:.3f} ({int(r[:, 1].sum())}/{len(r)})")
        print(f"{setting:24s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    run_script(main)
