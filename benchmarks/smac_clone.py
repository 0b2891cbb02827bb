"""Behaviour cloning on a SMAC map: copy a trained teacher policy (QMIX, or any learner) into a PPO actor by DAgger.

On 5m_vs_6m, QMIX finds a policy that wins about 95 % (retreat first, then fight the strung-out enemy in pieces)
while MAPPO from scratch stays at 45 % (docs/smac_training.md). This script separates the two questions that gap
leaves open: can MAPPO's decentralised feed-forward actor *represent* such a policy, and does PPO *keep* it once it
starts there? It trains the student actor of ``STUDENT_CONFIG`` (a PPO run config, e.g.
``configs/smac/5m_vs_6m-mappo.yaml``) to pick the teacher's greedy action from the student's own observation, by
DAgger (Ross, Gordon & Bagnell, "A Reduction of Imitation Learning and Structured Prediction to No-Regret Online
Learning", AISTATS 2011): round 1 plays ``--games`` games with the teacher, every later round with the current
student (greedy), and every living agent-step of every round is labelled with the teacher's greedy action there and
added to one growing dataset; after each round the actor is fitted to the whole dataset by cross-entropy, starting
from the previous round's weights (the critic is left untrained; PPO fits it in the first updates of a fine-tune).

The teacher and the student may observe differently (e.g. the MAPPO configs observe their own weapon cooldown, the
QMIX configs do not): each plays its own core of the same map, both cores are reset with the same seed and stepped
with the same joint action, and the script checks after every step that the two cores hold the same game
(``SMACCore.game_state``; scenario params that change the game itself are refused with the step where the games
parted). A recurrent teacher keeps its memory along the played trajectory (QMIX's last-action input is set to the
joint action actually played).

After each round the student's greedy win rate is measured on ``--eval-episodes`` fixed starts (``--eval-seed``,
never a training start), with a Wilson 95 % interval, and the student is written as
``<out>/round-<i>/seed-0/policy.pt`` with the student's run config beside it (``<out>/round-<i>/config.yaml``), so
every SMAC benchmark and ``coopsim eval`` read it; ``summary.json`` is rewritten atomically after each round. An
interrupt (or a failure) keeps the finished rounds, removes the unfinished one, and prints the fine-tune command of
the last finished round; with no round finished it leaves nothing. There is no resume: a round takes seconds to a
minute. Every input that can be refused (paths, configs, the teacher's policy file, game-changing student params)
is checked before ``--out`` is made. The last round's policy is the warm start of a PPO fine-tune (printed at the
end)::

    .venv/bin/python benchmarks/smac_time_to_win.py configs/smac/5m_vs_6m-mappo.yaml \\
        train.init_policy=<out>/round-5/seed-0 train.total_env_steps=1000000 train.ent_coef=0.0 \\
        train.ent_coef_end=0.0 train.lr=0.0003 --seeds 0 --eval-every 250000

Usage::

    .venv/bin/python benchmarks/smac_clone.py runs/<qmix run>/seed-0 configs/smac/5m_vs_6m-mappo.yaml \\
        --out runs/clone-5m --rounds 5 --games 512
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smac_best_of_k import load_policy, seed_arg, seed_dir_config  # noqa: E402
from smac_expert_iteration import ci, fit_actor, fmt, greedy_wins  # noqa: E402
from smac_rollout_ceiling import memoryless_policy  # noqa: E402
from smac_time_to_win import EVAL_EPISODES_MAX, greedy_params  # noqa: E402

from coopsim.agents.ppo.networks import flatten_obs  # noqa: E402
from coopsim.errors import ConfigError, int_in_range, run_script  # noqa: E402
from coopsim.platform import registry  # noqa: E402
from coopsim.platform.config import dump_config, load_config  # noqa: E402
from coopsim.platform.recorder import atomic_write_json, atomic_write_text, check_writable  # noqa: E402
from coopsim.platform.runner import seeded_torch  # noqa: E402

#: what this script does, the start of its refusals
CLONES = "behaviour cloning copies a policy on a SMAC map"


def check_teacher(seed_dir: Path):
    """The run config of the teacher's seed directory: ``policy.pt`` and ``../config.yaml``, a ``smac/`` map, and a
    learner that can act greedily (PPO or QMIX).

    Raises:
        ConfigError: key ``teacher``, ``scenario.id`` or ``agents.id``, saying what is wrong.
    """
    cfg_path = seed_dir.parent / "config.yaml"
    cfg = seed_dir_config(seed_dir, key="teacher")
    if not cfg.scenario.id.startswith("smac/"):
        raise ConfigError(f"{CLONES}; the teacher trained {cfg.scenario.id}", key="scenario.id", value=cfg.scenario.id,
                          file=str(cfg_path))
    try:
        greedy_params(registry.spec("agent", cfg.agents.id).load(), cfg.agents.id)
    except ConfigError:
        raise ConfigError(f"the teacher must be a learner that acts greedily (PPO: ppo/mappo-v0, ppo/ippo-v0; QMIX: "
                          f"qmix/qmix-v0); {cfg.agents.id} is not", key="agents.id", value=cfg.agents.id,
                          file=str(cfg_path)) from None
    return cfg


def check_student(path: Path, teacher_cfg):
    """The student's run config: a PPO learner (it has ``deterministic``) with a memoryless actor, on the teacher's
    map.

    Raises:
        ConfigError: otherwise (the file, key and value named).
    """
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise ConfigError(f"student config {path} {what}; give a PPO run config such as "
                          "configs/smac/5m_vs_6m-mappo.yaml", key="student_config", value=str(path))
    cfg = load_config(path)
    agent_cls = registry.spec("agent", cfg.agents.id).load()
    if "deterministic" not in agent_cls.Params.model_fields:
        raise ConfigError(f"{CLONES} into a PPO actor; the student config's learner {cfg.agents.id} is not PPO "
                          "(ppo/mappo-v0, ppo/ippo-v0)", key="agents.id", value=cfg.agents.id, file=str(path))
    try:
        memoryless_policy(cfg, agent_cls, "behaviour cloning")
    except ConfigError as exc:  # the planner's reason does not apply here: say cloning's own
        raise ConfigError(f"behaviour cloning fits a memoryless actor (feed-forward, one frame, no messages): its "
                          f"dataset holds one step's inputs per row; drop {exc.key} from the student config",
                          key=exc.key, value=exc.value, file=str(path)) from None
    if cfg.scenario.id != teacher_cfg.scenario.id:
        raise ConfigError(f"the student config plays {cfg.scenario.id} but the teacher played {teacher_cfg.scenario.id}"
                          "; give a student config of the teacher's map", key="scenario.id", value=cfg.scenario.id,
                          file=str(path))
    t, st = game_params(teacher_cfg), game_params(cfg)
    differ = sorted(k for k in set(t) | set(st) if t.get(k) != st.get(k))
    if differ:
        raise ConfigError(f"the student config's scenario params change the game, not only what is observed or "
                          f"rewarded: {', '.join(f'{k}: {st.get(k)!r} (teacher: {t.get(k)!r})' for k in differ)}; "
                          "give the student the teacher's game (obs_*, state_* and reward_* params may differ)",
                          key=f"scenario.params.{differ[0]}", value=st.get(differ[0]), file=str(path))
    return cfg


#: scenario params that change what an agent observes or is rewarded, never the game: teacher and student may differ
OBSERVATION_PARAMS = ("obs_", "state_", "reward_", "record_replay")


def game_params(cfg) -> dict:
    """The SMAC scenario params of ``cfg`` (defaults filled in) that decide the game itself: all but
    :data:`OBSERVATION_PARAMS`."""
    core = registry.make_scenario(cfg.scenario.id, num_envs=1, **cfg.scenario_params())
    return {k: v for k, v in core.params.model_dump().items() if not k.startswith(OBSERVATION_PARAMS)}


class Dataset:
    """Living agents' student actor inputs (float32 ``[M, D]``), action masks (bool ``[M, A]``) and teacher actions
    (int64 ``[M]``)."""

    def __init__(self) -> None:
        self.x: list[np.ndarray] = []
        self.mask: list[np.ndarray] = []
        self.y: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(v) for v in self.y)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(torch.as_tensor(np.concatenate(v)) for v in (self.x, self.mask, self.y))


def make_teacher(cfg, seed_dir: Path, core):
    agent_cls = registry.spec("agent", cfg.agents.id).load()
    return load_policy(cfg, core, seed_dir / "policy.pt", greedy_params(agent_cls, cfg.agents.id))


def make_student(cfg, core, policy: Path | None, init_seed: int):
    with seeded_torch(init_seed):
        s = registry.make_component("agent", cfg.agents.id, core, **{**cfg.agents.params, "deterministic": True})
    if policy is not None:
        s.load(str(policy))
    return s


def _same_game(tc, sc, t: int, tcfg, scfg) -> None:
    """Raise ConfigError (key ``scenario.params``) unless the teacher's and the student's cores hold the same game
    state (``SMACCore.game_state``) after step ``t``."""
    a, b = tc.game_state(), sc.game_state()
    parted = [k for k in a if a[k].shape != b[k].shape or not np.array_equal(a[k], b[k])]
    if parted:
        raise ConfigError(f"the teacher's and the student's games parted at step {t} ({', '.join(parted)}): the "
                          f"student config's scenario params {scfg.scenario_params()} change the game itself, not "
                          f"only what is observed (the teacher's: {tcfg.scenario_params()}); give the student the "
                          "teacher's game params (obs_* and state_* params may differ)", key="scenario.params",
                          value=str(scfg.scenario_params()))


def play(tcfg, teacher_dir: Path, scfg, student_policy: Path | None, games: int, seed: int, teacher_plays: bool,
         data: Dataset, init_seed: int = 0) -> dict:
    """Play ``games`` games in one batched core pair and add every living agent-step, labelled with the teacher's
    greedy action, to ``data``. The teacher acts when ``teacher_plays``, else the student (greedy).

    Returns:
        ``{"win_rate", "agreement"}``: the played games' win rate and the fraction of labelled agent-steps where the
        student's greedy action equals the teacher's.

    Raises:
        ConfigError: the two cores' games part (the student's scenario params change the game, not only what is
            observed).
    """
    tc = registry.make_scenario(tcfg.scenario.id, num_envs=games, **tcfg.scenario_params())
    sc = registry.make_scenario(scfg.scenario.id, num_envs=games, **scfg.scenario_params())
    teacher = make_teacher(tcfg, teacher_dir, tc)
    student = make_student(scfg, sc, student_policy, init_seed)
    o_t, o_s = tc.reset(seed=seed), sc.reset(seed=seed)
    teacher.reset(seed)
    student.reset(seed)
    agree = labelled = 0
    t = 0
    _same_game(tc, sc, 0, tcfg, scfg)
    while not sc.done.all():
        a_t, _ = teacher.act(o_t)
        a_s, _ = student.act(o_s)
        live = np.asarray(sc.alive) & ~np.asarray(sc.done)[:, None]
        x = student.actor_input(flatten_obs(o_s, student.obs_space), None).numpy()
        data.x.append(x[live].astype(np.float32))
        data.mask.append(np.asarray(sc.action_masks())[live].astype(bool))
        data.y.append(np.asarray(a_t)[live].astype(np.int64))
        agree += int((np.asarray(a_s)[live] == np.asarray(a_t)[live]).sum())
        labelled += int(live.sum())
        joint = np.asarray(a_t if teacher_plays else a_s, np.int64)
        if hasattr(teacher, "last_action"):  # QMIX's input: the action the agent actually played
            teacher.last_action = joint.copy()
        o_t, o_s = tc.step(joint).obs, sc.step(joint).obs
        t += 1
        _same_game(tc, sc, t, tcfg, scfg)
    wins = np.array([m["win"] for m in sc.episode_metrics()], dtype=float)
    return {"win_rate": float(wins.mean()), "agreement": agree / max(labelled, 1)}


def fit(scfg, policy_in: Path | None, data: Dataset, out: Path, epochs: int, lr: float, batch: int, seed: int,
        init_seed: int = 0) -> dict:
    """Fit the student's actor (not the critic) to ``data`` by cross-entropy (``smac_expert_iteration.fit_actor``,
    no entropy bonus), from ``policy_in`` (None: fresh weights of ``init_seed``), and save it to ``out``. Returns
    the last epoch's mean loss, accuracy and entropy."""
    core = registry.make_scenario(scfg.scenario.id, num_envs=1, **scfg.scenario_params())
    student = make_student(scfg, core, policy_in, init_seed)
    stats = fit_actor(student, *data.tensors(), epochs, lr, batch, 0.0, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    student.save(out)
    return stats


#: the largest --games and --eval-episodes (one batched core each, as smac_time_to_win's --eval-episodes)
GAMES_MAX = EVAL_EPISODES_MAX
#: the largest --rounds and --seed: the game seeds 100000 * (seed + 1) + round stay below 2**31
ROUNDS_MAX = 1000
SEED_MAX = 20000


def game_seed(seed: int, rnd: int) -> int:
    """The reset seed of round ``rnd``'s games for ``--seed`` ``seed``."""
    return 100_000 * (seed + 1) + rnd


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("teacher", help="the teacher's seed directory (runs/<run>/seed-<s>: policy.pt, ../config.yaml)")
    ap.add_argument("student_config", help="the student's PPO run config, e.g. configs/smac/5m_vs_6m-mappo.yaml")
    ap.add_argument("--out", required=True, help="a new folder for the rounds' policies and summary.json")
    ap.add_argument("--rounds", type=int_in_range(1, ROUNDS_MAX), default=5,
                    help=f"DAgger rounds, 1..{ROUNDS_MAX} (5); round 1 is the teacher's")
    ap.add_argument("--games", type=int_in_range(1, GAMES_MAX), default=512,
                    help=f"games played per round, one batched core, 1..{GAMES_MAX} (512)")
    ap.add_argument("--epochs", type=int_in_range(1, 1000), default=8, help="passes over the dataset per round, 1..1000 (8)")
    ap.add_argument("--lr", type=float, default=5e-4, help="Adam learning rate of the fit (5e-4)")
    ap.add_argument("--batch", type=int_in_range(1, 2**20), default=1024,
                    help=f"agent-steps per gradient step, 1..{2**20} (1024)")
    ap.add_argument("--seed", type=int_in_range(0, SEED_MAX), default=0,
                    help=f"the student's initial weights and the rounds' game seeds, 0..{SEED_MAX} (0)")
    ap.add_argument("--eval-episodes", type=int_in_range(1, GAMES_MAX), default=512,
                    help=f"greedy evaluation games after each round, 1..{GAMES_MAX} (512)")
    ap.add_argument("--eval-seed", type=seed_arg, default=10000, help="reset seed of the evaluation (10000)")
    return ap


def fine_tune_command(student_config: str, policy_dir: Path, seed: int) -> str:
    """The PPO fine-tune of a clone (``policy_dir``: a round's ``seed-0``), as this script prints it."""
    return (f".venv/bin/python benchmarks/smac_time_to_win.py {student_config} train.init_policy={policy_dir} "
            f"train.ent_coef=0.0 train.ent_coef_end=0.0 train.lr=0.0003 train.total_env_steps=1000000 --seeds {seed} "
            "--eval-every 250000")


def main(argv: list[str] | None = None) -> None:
    a = _parser().parse_args(argv)
    if not np.isfinite(a.lr) or a.lr <= 0:
        raise ConfigError(f"--lr {a.lr}: give a finite number > 0", key="--lr", value=a.lr)
    torch.set_num_threads(1)
    teacher_dir, out = Path(a.teacher), Path(a.out)
    # everything that can be refused is checked before --out is made: a refusal leaves nothing behind
    tcfg = check_teacher(teacher_dir)
    scfg = check_student(Path(a.student_config), tcfg)
    starts = [registry.make_scenario(c.scenario.id, num_envs=2, **c.scenario_params()) for c in (tcfg, scfg)]
    for core in starts:
        core.reset(seed=game_seed(a.seed, 1))
    _same_game(*starts, 0, tcfg, scfg)
    make_teacher(tcfg, teacher_dir, starts[0])  # the teacher's policy file loads into its learner
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists{' and is not empty' if out.is_dir() else ' as a file'}; give a new "
                          "folder", key="--out", value=str(out))
    check_writable("--out", out, folder=True)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    summary = {"args": {**vars(a)}, "teacher_config": tcfg.name, "student_config": scfg.name, "rounds": []}
    atomic_write_json(out / "summary.json", summary, indent=1)
    data = Dataset()
    policy: Path | None = None
    cfg_text = dump_config(scfg)
    try:
        for rnd in range(1, a.rounds + 1):
            t0 = time.time()
            played = play(tcfg, teacher_dir, scfg, policy, a.games, game_seed(a.seed, rnd), rnd == 1, data,
                          init_seed=a.seed)
            new = out / f"round-{rnd}" / "seed-0" / "policy.pt"
            new.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out / f"round-{rnd}" / "config.yaml", cfg_text)  # the round reads as a training run
            stats = fit(scfg, policy, data, new, a.epochs, a.lr, a.batch, seed=a.seed * 1000 + rnd,
                        init_seed=a.seed)
            w = greedy_wins(new.parent, a.eval_episodes, a.eval_seed)
            row = {"round": rnd, "played_by": "teacher" if rnd == 1 else "student",
                   "played_win_rate": played["win_rate"], "student_agreement": played["agreement"],
                   "rows": len(data), "fit": stats, "win_rate": float(w.mean()), "ci95": ci(w),
                   "wall_s": round(time.time() - t0, 1)}
            summary["rounds"].append(row)
            atomic_write_json(out / "summary.json", summary, indent=1)
            print(f"round {rnd}: {row['played_by']} played {played['win_rate']:.3f} (student agreed on "
                  f"{played['agreement']:.3f} of agent-steps), {len(data)} rows, fit acc {stats['accuracy']:.3f}; "
                  f"student greedy {w.mean():.3f} {fmt(row['ci95'])} over {len(w)} games ({row['wall_s']:.0f} s)",
                  flush=True)
            policy = new
    except BaseException as exc:  # an interrupt or a failure: keep only whole rounds
        done = len(summary["rounds"])
        shutil.rmtree(out / f"round-{done + 1}", ignore_errors=True)  # the round that did not finish
        if done == 0:
            (out / "summary.json").unlink(missing_ok=True)
            if made:
                shutil.rmtree(out, ignore_errors=True)
            what = f"nothing (no round finished; {out} is removed)" if made else "nothing (no round finished)"
        else:
            last = out / f"round-{done}" / "seed-0"
            what = (f"rounds 1-{done} in {out} (summary.json); the last, round {done}, is fine-tuned with: "
                    f"{fine_tune_command(a.student_config, last, a.seed)}")
        if isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt(what) from None
        print(f"kept: {what}", file=sys.stderr, flush=True)
        raise
    print(f"fine-tune it with PPO: {fine_tune_command(a.student_config, policy.parent, a.seed)}", flush=True)


def _kept_on_interrupt() -> str:
    exc = sys.exc_info()[1]
    return str(exc.args[0]) if isinstance(exc, KeyboardInterrupt) and exc.args else ""


if __name__ == "__main__":
    run_script(main, kept=_kept_on_interrupt)
