"""Is a trained SMAC policy at the game's ceiling? Greedy, sampled and best-of-K win rates from fixed starts.

A batched core of ``--starts`` envs is reset with the same ``--reset-seed`` before every pass, so every pass sees
the same start positions and the same environment random streams (the built-in enemy's target pick and cooldown
jitter are drawn from them); only the policy's actions differ between passes. Pass 0 plays the policy greedily
(PPO argmax / QMIX epsilon 0), passes 1..K sample its actions with K different seeds. A start from which some
sampled pass wins is winnable by this policy's own behaviour; if the best of K wins from (nearly) every start while
the greedy policy loses some, the policy is under-trained rather than facing unwinnable starts.

Usage::

    .venv/bin/python benchmarks/smac_best_of_k.py runs/<training run>/seed-10 --starts 256 -k 16

The training run's ``config.yaml`` (the seed directory's parent) names the map, scenario params and agent.
Prints one line; ``--out F.json`` also writes per-start wins (strict JSON, atomic; a .json file in an existing
writable folder, an existing file is overwritten).

The policy may have memory (``agents.params.recurrent``, ``stack_frames`` > 1): every pass is a whole game from the
reset, and the agent is reset with the core before it (GRU state zero, frame history restarted), as in training.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smac_time_to_win import greedy_params  # noqa: E402  (the greedy switch of each learner, defined once there)

from coopsim.errors import ConfigError, run_script  # noqa: E402
from coopsim.platform import registry  # noqa: E402
from coopsim.platform.config import SEED_MAX, load_config  # noqa: E402
from coopsim.platform.recorder import atomic_write_json, check_writable  # noqa: E402
from coopsim.platform.runner import play_episodes, seeded_torch  # noqa: E402

#: the acting param that makes a learner sample its actions (PPO); QMIX samples with epsilon > 0 instead
SAMPLED_PARAMS = {"deterministic": False}
#: most fixed starts (envs of the one batched core), as smac_rollout_ceiling.py caps its rollout envs
MAX_STARTS = 1 << 20
#: most entries of the sampled-wins table [-k, --starts] (float64: 512 MB)
MAX_SAMPLED = 1 << 26


def seed_arg(text: str) -> int:
    """argparse type: an integer seed in 0..2**31-1 (as run configs' seeds)."""
    try:
        v = int(text)
    except ValueError:
        v = -1
    if not 0 <= v <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a seed in 0..{SEED_MAX} is required")
    return v


def seed_dir_config(seed_dir: Path, key: str = "seed_dir"):
    """The run config of a training run's seed directory (``runs/<run>/seed-<s>``: ``policy.pt``, and the run's
    ``config.yaml`` one level up), as every SMAC diagnostic reads its policy.

    Raises:
        ConfigError: key ``key``; ``seed_dir`` does not exist, or lacks ``policy.pt`` or ``../config.yaml`` (a run
            directory given instead names its seed directories: "did you mean .../seed-0?").
    """
    cfg_path = seed_dir.parent / "config.yaml"
    if not seed_dir.exists():
        raise ConfigError(f"{seed_dir} does not exist; give a training run's seed directory (runs/<run>/seed-<s>)",
                          key=key, value=str(seed_dir))
    if not (seed_dir / "policy.pt").is_file() or not cfg_path.is_file():
        seeds = sorted(p.name for p in seed_dir.glob("seed-*") if (p / "policy.pt").is_file()) \
            if (seed_dir / "config.yaml").is_file() else []
        hint = f"; did you mean {seed_dir / seeds[0]}?" if len(seeds) == 1 else (
            f"; give one of its seed directories: {', '.join(seeds)}" if seeds else "")
        raise ConfigError(f"{seed_dir} is not a training run's seed directory (needs policy.pt and ../config.yaml)"
                          f"{hint}", key=key, value=str(seed_dir))
    return load_config(cfg_path)


def load_policy(cfg, core, policy: str | Path, params: dict | None = None):
    """The learner ``cfg.agents`` built on ``core`` with ``params`` over the config's own (e.g.
    :func:`~smac_time_to_win.greedy_params`, :data:`SAMPLED_PARAMS`), weights loaded from ``policy`` (a
    ``policy.pt``). Built under torch seed 0, so a learner's non-weight random state starts the same in every script.

    Raises:
        ConfigError / CoopsimError: the learner cannot be built from ``cfg`` or ``policy`` does not fit it.
    """
    with seeded_torch(0):
        a = registry.make_component("agent", cfg.agents.id, core, **{**cfg.agents.params, **(params or {})})
    a.load(str(policy))
    return a


def sampling_run(seed_dir: Path, why: str) -> tuple:
    """The run config and agent class of a training run's ``seed_dir`` whose learner can sample its actions (PPO).

    Raises:
        ConfigError: ``seed_dir`` is not a seed directory (:func:`seed_dir_config`); or the learner has no
            ``deterministic`` param (the message starts with ``why``).
    """
    cfg = seed_dir_config(seed_dir)
    agent_cls = registry.spec("agent", cfg.agents.id).load()
    if "deterministic" not in agent_cls.Params.model_fields:
        raise ConfigError(f"{why} (param 'deterministic'); {cfg.agents.id} has none", key="agents.id",
                          value=cfg.agents.id)
    return cfg, agent_cls


def smac_sampling_run(seed_dir: Path, why: str, counts: str) -> tuple:
    """:func:`sampling_run` of a run that trained on a SMAC map (wins are SMAC's ``win`` metric).

    Args:
        why: as in :func:`sampling_run`.
        counts: what the caller does, the start of the non-SMAC message (e.g. ``"best-of-K counts wins on SMAC
            maps"``), so that each script refuses in its own words.

    Raises:
        ConfigError: as :func:`sampling_run`; key ``scenario.id``: not a ``smac/`` scenario.
    """
    cfg, agent_cls = sampling_run(seed_dir, why)
    if not cfg.scenario.id.startswith("smac/"):  # wins are SMAC's; any other scenario has no 'win' metric
        raise ConfigError(f"{counts}; the run trained {cfg.scenario.id} (give the seed directory of a PPO training "
                          f"run on a smac/ scenario)", key="scenario.id", value=cfg.scenario.id)
    return cfg, agent_cls


def check_json_out(path: str | Path, flag: str = "--out") -> None:
    """The ``--out`` rule of the SMAC diagnostics (this script, ``smac_rollout_ceiling.py``): a ``.json`` file in an
    existing writable folder; an existing file is overwritten. Checked before any game.

    Raises:
        ConfigError: key ``flag``; a folder, another suffix, a missing folder, or a folder that cannot be written.
    """
    p = Path(path)
    if p.is_dir():
        check_writable(flag, p)  # "<path> is a folder; give the file to write"
    rule = "give a .json file in an existing writable folder"
    if p.suffix.lower() != ".json":
        raise ConfigError(f"{path} is not a .json file; {rule}", key=flag, value=str(path))
    if not p.parent.is_dir():
        raise ConfigError(f"the folder {p.parent} does not exist; {rule}", key=flag, value=str(path))
    check_writable(flag, p)


def wins_from_fixed_starts(seed_dir: str | Path, starts: int, k: int, reset_seed: int = 12345, *,
                           counts: str = "best-of-K counts wins on SMAC maps") -> dict:
    """Greedy wins ``[starts]`` and sampled wins ``[k, starts]`` (float 0/1) of the policy in ``seed_dir``.

    ``counts`` starts the message that refuses a non-SMAC run (:func:`smac_sampling_run`), in the caller's words.

    Raises:
        ConfigError: ``seed_dir`` has no ``policy.pt`` / parent ``config.yaml``, the learner cannot be made
            greedy and sampled (PPO only for the sampled passes), or the run did not train on a SMAC map.
    """
    seed_dir = Path(seed_dir)
    cfg, agent_cls = smac_sampling_run(seed_dir, "sampled passes need a PPO learner", counts)
    core = registry.make_scenario(cfg.scenario.id, num_envs=starts, **cfg.scenario_params())

    def agent(params: dict):
        return load_policy(cfg, core, seed_dir / "policy.pt", params)

    greedy = agent(greedy_params(agent_cls, cfg.agents.id))
    # play_episodes resets the core and the agent with one seed: pass the reset seed for the core's streams; the
    # sampled agent's own generator is reseeded per pass right after (agent.reset(seed) would otherwise repeat it)
    g = np.array([m["win"] for m in play_episodes(core, greedy, reset_seed)], dtype=float)
    sampler = agent(SAMPLED_PARAMS)
    s = np.zeros((k, starts))
    for i in range(k):
        obs = core.reset(seed=reset_seed)
        sampler.reset(reset_seed * 1000 + 1 + i)
        while not core.done.all():
            actions, _ = sampler.act(obs)
            obs = core.step(actions).obs
        s[i] = [m["win"] for m in core.episode_metrics()]
    return {"greedy": g, "sampled": s}


def spread_line(s: np.ndarray) -> str:
    """How the sampled wins ``s [K, starts]`` (0/1) spread over starts: the share of starts whose per-start win
    fraction over the K passes is 0, in (0, 0.5), in [0.5, 1) and 1, and the best-of-K that K independent passes
    at the mean win rate p would give everywhere (``1 - (1 - p)^K``). A best-of-K near that figure means the starts
    are alike and each game is close to a coin flip for this policy; it shows the starts are winnable, not how high
    a better policy could go."""
    k = s.shape[0]
    f = s.mean(0)
    p = float(s.mean())
    return (f"per-start sampled win fraction over {k} passes: 0 at {np.mean(f == 0):.3f} of starts, (0, 0.5) at "
            f"{np.mean((f > 0) & (f < 0.5)):.3f}, [0.5, 1) at {np.mean((f >= 0.5) & (f < 1)):.3f}, 1 at "
            f"{np.mean(f == 1):.3f}; independent passes at p = {p:.3f} would give best of {k} "
            f"{1 - (1 - p) ** k:.3f}")


def main(argv: list[str] | None = None) -> None:
    # smac_rollout_ceiling.py defines the seed type and imports this module: imported here, not at the top (a cycle)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seed_dir", help="a training run's seed-<s> directory (policy.pt; the run's config.yaml above it)")
    ap.add_argument("--starts", type=int, default=256, help="fixed starts, one batched core (default 256)")
    ap.add_argument("-k", type=int, default=16, help="sampled passes (default 16)")
    ap.add_argument("--reset-seed", type=seed_arg, default=12345, help="seed of the starts, 0..2**31-1 (12345)")
    ap.add_argument("--out", help="write per-start wins as JSON to this .json file in an existing writable folder "
                                  "(an existing file is overwritten)")
    a = ap.parse_args(argv)
    if a.starts < 1 or a.k < 1:
        raise ConfigError("--starts and -k must be >= 1", key="--starts/-k", value=f"{a.starts}/{a.k}")
    if a.starts > MAX_STARTS:
        raise ConfigError(f"{a.starts} fixed starts (envs of one batched core) are too many; give at most "
                          f"{MAX_STARTS:,}", key="--starts", value=a.starts)
    if a.k * a.starts > MAX_SAMPLED:
        raise ConfigError(f"-k x --starts = {a.k * a.starts} sampled games; keep it at most {MAX_SAMPLED:,}",
                          key="-k/--starts", value=f"{a.k}/{a.starts}")
    if a.out is not None:  # before the games, not after them
        check_json_out(a.out)
    torch.set_num_threads(1)
    r = wins_from_fixed_starts(a.seed_dir, a.starts, a.k, a.reset_seed)
    g, s = r["greedy"], r["sampled"]
    best = s.max(0)
    print(f"{a.seed_dir}: {a.starts} starts (reset seed {a.reset_seed}): greedy {g.mean():.3f}, one sampled pass "
          f"{s[0].mean():.3f}, mean of {a.k} sampled {s.mean():.3f}, best of {a.k} sampled {best.mean():.3f}; "
          f"greedy losses that some sampled pass wins: {int(((g == 0) & (best == 1)).sum())} of {int((g == 0).sum())}")
    print(spread_line(s))
    if a.out:
        atomic_write_json(Path(a.out), {"args": vars(a), "greedy": g, "sampled": s}, indent=1)


if __name__ == "__main__":
    run_script(main)
