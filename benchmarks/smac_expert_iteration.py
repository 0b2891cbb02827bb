"""Expert iteration on a SMAC map: distil the rollout planner's joint actions into the decentralised PPO actor.

``smac_rollout_ceiling.py`` showed that a centralised rollout planner over a trained MAPPO policy's own candidate
joint actions wins far more often than the policy alone (84 % against 33 % on 5m_vs_6m), and that it differs from
the greedy policy on about 5 % of living agent-steps, mostly where a unit stands between shots. PPO does not
separate those actions from the greedy ones (docs/smac_training.md). This script asks whether supervised targets
from search do: each round plays ``--games`` games with the planner (Bertsekas' rollout algorithm over the current
policy), adds every living agent's (observation, planner action) pair to a growing dataset (DAgger-style
aggregation, Ross et al. 2011), and trains the actor on the whole dataset by cross-entropy, starting from the
current weights; the next round plans over the new policy. This is expert iteration (Anthony, Tian & Barber,
"Thinking Fast and Slow with Deep Learning and Tree Search", NeurIPS 2017) with one-step rollout lookahead as the
expert. The trained actor stays decentralised: it acts from its own observation (and agent id) only; only its
training targets come from a centralised search.

After each round the new policy's greedy win rate is measured on ``--eval-episodes`` fixed starts (the same
starts every round, never the planner's), with a Wilson 95 % interval, and the policy is written as
``<out>/round-<i>/policy.pt`` (with the run's ``config.yaml`` beside, so every other SMAC benchmark reads it).
``summary.json`` is rewritten atomically after each round, so an interrupted run keeps its finished rounds and
``--resume`` continues from the last one, exactly as if never stopped: the dataset is kept as ``data.npz`` (written
just before ``summary.json``), and a resume drops its rows of any round ``summary.json`` does not list (an interrupt
between the two writes, or an older version that wrote it before the distillation), so the interrupted round is
played again from the same seeds. A resume keeps the run's settings (``summary.json["args"]``): a flag left out
takes the run's value, a flag given with another value is refused; only ``--rounds`` may grow.

The policy must be memoryless (feed-forward, one frame: no ``agents.params.recurrent`` or ``stack_frames`` > 1), as
for the rollout planner (``smac_rollout_ceiling.memoryless_policy``); everything is checked before ``--out`` is made.

Usage::

    .venv/bin/python benchmarks/smac_expert_iteration.py runs/<training run>/seed-0 --out runs/exit-5m \\
        --rounds 3 --games 256 -k 8 -r 8
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smac_best_of_k import sampling_run, seed_arg, smac_sampling_run, wins_from_fixed_starts  # noqa: E402
from smac_rollout_ceiling import deviation_summary, memoryless_policy, rollout_games, wilson  # noqa: E402

from coopsim.agents.ppo.networks import flatten_obs  # noqa: E402
from coopsim.errors import ConfigError, int_at_least, run_script  # noqa: E402
from coopsim.platform import registry  # noqa: E402
from coopsim.platform.recorder import atomic_write_json, check_writable  # noqa: E402
from coopsim.platform.runner import seeded_torch  # noqa: E402


#: the start of the message that refuses a run not on a SMAC map
PLAYS = "expert iteration plays SMAC maps"


def check_run(seed_dir: Path):
    """The run config of ``seed_dir``, checked for everything expert iteration needs before any work: a PPO training
    run's seed directory (policy.pt, ../config.yaml) on a SMAC map, with a memoryless policy.

    Raises:
        ConfigError: otherwise (in this script's words).
    """
    cfg, agent_cls = smac_sampling_run(seed_dir, "expert iteration trains a PPO actor", PLAYS)
    memoryless_policy(cfg, agent_cls, "expert iteration")
    return cfg


def greedy_wins(seed_dir: Path, games: int, reset_seed: int) -> np.ndarray:
    """Wins (float 0/1 ``[games]``) of the policy in ``seed_dir`` played greedily from the starts of ``reset_seed``
    (:func:`smac_best_of_k.wins_from_fixed_starts`, no sampled passes)."""
    return wins_from_fixed_starts(seed_dir, games, 0, reset_seed, counts=PLAYS)["greedy"]


def ci(wins: np.ndarray) -> list[float]:
    """Wilson 95% interval of the win rate of ``wins`` (float 0/1 ``[n]``), as plain floats."""
    return [float(v) for v in wilson(float(wins.sum()), len(wins))]


def fmt(interval: list[float]) -> str:
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]"


class Dataset:
    """Living agents' actor inputs (float32 ``[M, D]``), action masks (bool ``[M, A]``) and planner actions
    (int64 ``[M]``), with the round each row came from (int16 ``[M]``)."""

    def __init__(self) -> None:
        self.x, self.mask, self.y, self.round = [], [], [], []

    def add(self, rnd: int):
        def record(agent, obs, played, live) -> None:
            flat = flatten_obs(obs, agent.obs_space)
            x = agent.actor_input(flat, None).numpy()
            m = np.asarray(agent.scenario.action_masks())
            self.x.append(x[live].astype(np.float32))
            self.mask.append(m[live].astype(bool))
            self.y.append(played[live].astype(np.int64))
            self.round.append(np.full(int(live.sum()), rnd, np.int16))
        return record

    def arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(np.concatenate(v) for v in (self.x, self.mask, self.y, self.round))

    def save(self, path: Path) -> None:
        x, m, y, r = self.arrays()
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, x=x, mask=m, y=y, round=r)
        tmp.replace(path)

    def load(self, path: Path, rounds: int | None = None) -> None:
        """Read ``path``; with ``rounds``, only the rows of rounds ``1..rounds`` (the rows of a round that was
        interrupted before ``summary.json`` recorded it are dropped)."""
        with np.load(path) as d:
            keep = slice(None) if rounds is None else d["round"] <= rounds
            self.x, self.mask, self.y, self.round = ([d[k][keep]] for k in ("x", "mask", "y", "round"))


def fit_actor(agent, x: torch.Tensor, mask: torch.Tensor, y: torch.Tensor, epochs: int, lr: float, batch: int,
              ent_coef: float, seed: int) -> dict:
    """Train ``agent``'s actor (every parameter but the critic's; Adam, gradient norm clipped at 0.5) in place by
    cross-entropy with the target actions ``y`` (int64 ``[M]``) from the actor inputs ``x`` (float32 ``[M, D]``)
    under the action masks ``mask`` (bool ``[M, A]``), minus ``ent_coef`` times the policy's entropy, for ``epochs``
    shuffled passes (``seed``) of ``batch`` rows. Returns the last epoch's mean loss (the cross-entropy) and entropy
    (each minibatch's before its step), and ``accuracy``: the fitted actor's argmax agreement with ``y`` on all ``M``
    rows after the last step. Used by :func:`distil` and ``smac_clone.py``."""
    net = agent.net
    opt = torch.optim.Adam([p for n, p in net.named_parameters() if not n.startswith("critic")], lr=lr, eps=1e-5)
    gen = torch.Generator().manual_seed(seed)
    stats = {}
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=gen)
        tot = {"loss": 0.0, "accuracy": 0.0, "entropy": 0.0}
        for i in range(0, len(y), batch):
            idx = perm[i:i + batch]
            feat, _ = net.features(x[idx], None)
            logits = net.logits(feat, mask[idx])
            logp = torch.log_softmax(logits, -1)
            ce = F.nll_loss(logp, y[idx])
            ent = -(logp.exp() * logp).sum(-1).mean()
            loss = ce - ent_coef * ent
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            opt.step()
            w = len(idx) / len(y)
            tot["loss"] += float(ce.detach()) * w
            tot["accuracy"] += float((logits.argmax(-1) == y[idx]).float().mean()) * w
            tot["entropy"] += float(ent.detach()) * w
        stats = tot
    with torch.no_grad():  # the fitted actor's accuracy (the epoch's running one lags its steps)
        hit = sum(int((net.logits(net.features(x[i:i + batch], None)[0], mask[i:i + batch]).argmax(-1)
                       == y[i:i + batch]).sum()) for i in range(0, len(y), batch))
    stats["accuracy"] = hit / max(len(y), 1)
    return stats


def distil(seed_dir: Path, policy: Path, data: Dataset, out: Path, epochs: int, lr: float, batch: int,
           ent_coef: float, seed: int) -> dict:
    """Train the actor of ``policy`` on ``data`` by cross-entropy with the planner's actions (plus ``ent_coef`` times
    the policy's entropy as a bonus, which keeps the candidate sampler of the next round from collapsing), and save
    it to ``out``. Returns the last epoch's mean loss, accuracy and entropy (:func:`fit_actor`)."""
    cfg, _ = sampling_run(seed_dir, "expert iteration trains a PPO actor")
    env = registry.make_scenario(cfg.scenario.id, num_envs=1, **cfg.scenario_params())
    with seeded_torch(0):
        a = registry.make_component("agent", cfg.agents.id, env, **cfg.agents.params)
    a.load(str(policy))
    x, m, y, _ = (torch.as_tensor(v) for v in data.arrays())
    stats = fit_actor(a, x, m, y, epochs, lr, batch, ent_coef, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    a.save(out)
    return stats


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seed_dir",
                    help="a PPO training run's seed-<s> directory on a SMAC map (policy.pt; config.yaml above)")
    ap.add_argument("--out", required=True, help="output folder (created; with --resume, an earlier run's folder)")
    ap.add_argument("--rounds", type=int_at_least(1), default=3, help="planner-then-distil rounds (default 3)")
    ap.add_argument("--games", type=int_at_least(1), default=256, help="planner games per round (default 256)")
    ap.add_argument("-k", type=int_at_least(1), default=8, help="candidate joint actions per step (default 8)")
    ap.add_argument("-r", type=int_at_least(1), default=8, help="rollouts per candidate (default 8)")
    ap.add_argument("--per-agent", type=int_at_least(0), default=0, metavar="M",
                    help="0: the joint planner's actions are the targets; M > 0: per-agent rollout (each agent's M "
                         "most probable other actions against its greedy one, the others greedy; -k ignored)")
    ap.add_argument("--margin", type=float, default=0.125,
                    help="per-agent rollout: the win-rate gain over the greedy action an alternative needs (0.125)")
    ap.add_argument("--epochs", type=int_at_least(1), default=10, help="passes over the dataset per round (10)")
    ap.add_argument("--lr", type=float, default=3e-4, help="Adam learning rate of the distillation (3e-4)")
    ap.add_argument("--batch", type=int_at_least(1), default=2048, help="rows per gradient step (2048)")
    ap.add_argument("--ent-coef", type=float, default=0.01, help="entropy bonus of the distillation (0.01)")
    ap.add_argument("--eval-episodes", type=int_at_least(1), default=256, help="greedy evaluation games (256)")
    ap.add_argument("--eval-seed", type=seed_arg, default=777, help="seed of the evaluation starts (777)")
    ap.add_argument("--resume", action="store_true",
                    help="continue the run in --out after its last finished round, with the run's settings (a flag "
                         "left out takes the run's value; one given must equal it; only --rounds may grow)")
    return ap


#: args that are not settings of the run: where it is, how far it goes, and the resume switch itself
NOT_SETTINGS = ("out", "rounds", "resume")


def _given(ap: argparse.ArgumentParser, argv: list[str] | None) -> set[str]:
    """The dests of the arguments given on the command line (not left at their defaults)."""
    saved = {act.dest: act.default for act in ap._actions}
    try:
        for act in ap._actions:
            act.default = argparse.SUPPRESS
        return set(vars(ap.parse_args(argv)))
    finally:
        for act in ap._actions:
            act.default = saved[act.dest]


def _same_setting(key: str, given, stored) -> bool:
    if key == "seed_dir":  # the same directory, however it was spelt
        return str(given) == str(stored) or Path(given).resolve() == Path(stored).resolve()
    return given == stored


def _resume_args(ap: argparse.ArgumentParser, a: argparse.Namespace, given: set[str], summary: dict,
                 summ_path: Path) -> argparse.Namespace:
    """``a`` with every setting the command line left out taken from the run's ``summary["args"]``.

    Raises:
        ConfigError: a setting given on the command line differs from the run's (every such flag named).
    """
    stored = summary.get("args") if isinstance(summary.get("args"), dict) else {}
    flag = {act.dest: (act.option_strings[-1] if act.option_strings else act.dest) for act in ap._actions}
    diffs, out = [], argparse.Namespace(**vars(a))
    for key in vars(a):
        if key in NOT_SETTINGS:
            continue
        run = stored.get(key, ap.get_default(key))  # a key an older version did not store had its default then
        if key in given:
            if not _same_setting(key, getattr(a, key), run):
                diffs.append(f"{flag[key]} {getattr(a, key)} (the run's: {run})")
        else:
            setattr(out, key, run)
    if diffs:
        raise ConfigError(f"--resume continues the run with the settings it was started with, but {len(diffs)} "
                          f"differ: {', '.join(diffs)}; leave them out (the run's values are used) or give the run's "
                          f"values, or start a new run in another --out (only --rounds may grow)", file=str(summ_path),
                          key="/".join(d.split(" ")[0] for d in diffs))
    return out


def _read_summary(out: Path, summ_path: Path) -> dict:
    """The ``summary.json`` of the run in ``out``.

    Raises:
        ConfigError: missing, unreadable or not an expert-iteration summary.
    """
    if not summ_path.is_file():
        raise ConfigError(f"--resume: {out} holds no summary.json of an expert-iteration run", key="--out",
                          value=str(out))
    try:
        summary = json.loads(summ_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        summary, why = None, f"cannot be read as JSON: {exc}"
    else:
        why = "no 'rounds' list"
    if not isinstance(summary, dict) or not isinstance(summary.get("rounds"), list):
        raise ConfigError(f"not a summary.json of smac_expert_iteration.py ({why}); restore it, or start a new run "
                          f"in another --out", file=str(summ_path))
    return summary


def _load_data(data: Dataset, data_path: Path, summary: dict) -> None:
    """The rows of the rounds ``summary`` lists, from ``data_path``.

    Raises:
        ConfigError: ``data.npz`` is missing or holds another number of rows for those rounds than the summary.
    """
    done = len(summary["rounds"])
    want = int(summary["rounds"][-1]["rows"])
    if not data_path.is_file():
        raise ConfigError(f"the run lists {done} finished round(s) ({want} rows) but has no data.npz; restore it, "
                          f"or start a new run in another --out", file=str(data_path))
    data.load(data_path, rounds=done)
    have = len(data.arrays()[2])
    if have != want:
        raise ConfigError(f"data.npz holds {have} rows of rounds 1..{done}, but summary.json lists {want}; restore "
                          f"the run's files, or start a new run in another --out", file=str(data_path))


def main(argv: list[str] | None = None) -> None:
    ap = _parser()
    a = ap.parse_args(argv)
    for name in ("lr", "ent_coef", "margin"):
        v = getattr(a, name)
        if not np.isfinite(v) or v < 0 or (name == "lr" and v == 0):
            raise ConfigError(f"--{name.replace('_', '-')} {v}: give a finite number "
                              f"{'> 0' if name == 'lr' else '>= 0'}", key=f"--{name.replace('_', '-')}", value=v)
    torch.set_num_threads(1)
    out = Path(a.out)
    summ_path, data_path = out / "summary.json", out / "data.npz"
    data = Dataset()
    if a.resume:
        summary = _read_summary(out, summ_path)
        a = _resume_args(ap, a, _given(ap, argv), summary, summ_path)
        seed_dir = Path(a.seed_dir)
        check_run(seed_dir)  # the run's seed directory is still there and fit
        done = len(summary["rounds"])
        if a.rounds <= done:
            print(f"{out}: already done: {done} round(s) finished, --rounds {a.rounds}; nothing to do (give --rounds "
                  f"N > {done} to continue)", flush=True)
            return
        if done:
            _load_data(data, data_path, summary)
        summary["args"] = {**summary.get("args", {}), "rounds": a.rounds}  # how far the run now goes
    else:
        seed_dir = Path(a.seed_dir)
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out} is a file; give a new folder", key="--out", value=str(out))
        if out.exists() and any(out.iterdir()):
            raise ConfigError(f"--out {out} exists and is not empty; give a new folder, or add --resume",
                              key="--out", value=str(out))
        check_run(seed_dir)  # before any work, and before --out is made
        check_writable("--out", out, folder=True)
        base = greedy_wins(seed_dir, a.eval_episodes, a.eval_seed)  # before --out exists: Ctrl-C leaves nothing
        out.mkdir(parents=True, exist_ok=True)
        summary = {"args": {**vars(a), "seed_dir": str(seed_dir)}, "base": {
            "win_rate": float(base.mean()), "ci95": ci(base)}, "rounds": []}
        print(f"round 0 (the PPO policy): greedy {base.mean():.3f} {fmt(ci(base))} over "
              f"{len(base)} games", flush=True)
        atomic_write_json(summ_path, summary, indent=1)
    cfg_src = seed_dir.parent / "config.yaml"
    for rnd in range(len(summary["rounds"]) + 1, a.rounds + 1):
        policy = seed_dir / "policy.pt" if rnd == 1 else out / f"round-{rnd - 1}" / "seed-0" / "policy.pt"
        t0 = time.time()
        played = rollout_games(seed_dir, a.games, a.k, a.r, reset_seed=100_000 + rnd, plan_seed=rnd,
                               progress=False, policy=policy, record=data.add(rnd),
                               per_agent=a.per_agent, margin=a.margin)
        t_plan = time.time() - t0
        new = out / f"round-{rnd}" / "seed-0" / "policy.pt"
        (out / f"round-{rnd}").mkdir(parents=True, exist_ok=True)
        shutil.copy(cfg_src, out / f"round-{rnd}" / "config.yaml")
        fit = distil(seed_dir, policy, data, new, a.epochs, a.lr, a.batch, a.ent_coef, seed=rnd)
        t_fit = time.time() - t0 - t_plan
        w = greedy_wins(new.parent, a.eval_episodes, a.eval_seed)
        row = {"round": rnd, "planner_win_rate": float(played["planner"].mean()),
               "planner_greedy_win_rate": float(played["greedy"].mean()), "rows": int(len(data.arrays()[2])),
               "deviation": deviation_summary(played["deviations"], played["agent_steps"]),
               "fit": fit, "win_rate": float(w.mean()), "ci95": ci(w),
               "plan_s": round(t_plan, 1), "fit_s": round(t_fit, 1)}
        summary["rounds"].append(row)
        # the data, then the summary that lists the round: a resume keeps only the rows of rounds the summary lists
        data.save(data_path)
        atomic_write_json(summ_path, summary, indent=1)
        print(f"round {rnd}: planner {row['planner_win_rate']:.3f} (its policy greedy "
              f"{row['planner_greedy_win_rate']:.3f}), {row['rows']} rows, fit acc {fit['accuracy']:.3f} "
              f"ent {fit['entropy']:.3f}; new policy greedy {w.mean():.3f} {fmt(row['ci95'])} "
              f"({t_plan:.0f} s planning, {t_fit:.0f} s fitting)\n  {row['deviation']}", flush=True)


if __name__ == "__main__":
    run_script(main)
