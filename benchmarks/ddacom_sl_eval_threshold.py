"""Trained DDACOM policies evaluated with the sender's resend threshold changed (``docs/comm.md``, "Fewer messages").

DDACOM decouples sending from the policy, so a trained run can be evaluated with another resend threshold of its
sender (``--hold-threshold`` of ``python -m coopsim.agents.ddacom.train``: a held copy goes again only when its
payload moved by more than it). For each ``learned_ddacom/seed-<s>`` run of a train ``--out`` (trained with
``--inbox hold``) and each threshold, the evaluation of the train script (greedy, ``--eval-envs`` envs x
``--eval-episodes`` episodes on the Markov channel, seed 10000 + s) prints the team return and the messages as a
fraction of full broadcast. On the mute speaker-listener the listener's copies to the speaker cannot change the
return, which this shows: the same return at far fewer messages.

``--code-distances`` prints instead, per run, the Euclidean distances between the learned payloads of the three goal
colours (the speaker's observation for each; how far apart the listener must tell them).

    .venv/bin/python benchmarks/ddacom_sl_eval_threshold.py runs/ddacom_sl_p4 --thresholds 1e-6,0.1,0.3
    .venv/bin/python benchmarks/ddacom_sl_eval_threshold.py runs/ddacom_sl_p4 --code-distances
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from coopsim.agents.ddacom import train
from coopsim.errors import ConfigError, int_in_range, run_script


def thresholds(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: comma-separated numbers > 0 are required") from None
    if not out or any(not (x > 0) or x == float("inf") for x in out):
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: comma-separated finite numbers > 0 are required")
    return out


def code_distances(run: Path, s: dict, enc: dict) -> list[float]:
    """Distances between the learned payloads of the speaker's observation for goal colours 0, 1, 2: [d01, d02, d12]."""
    import numpy as np

    from coopsim.scenarios.mpe.tasks import LANDMARK_COLORS_SL

    if s.get("task") != "speaker_listener":
        raise ConfigError(f"{run} was trained on --task {s.get('task', 'spread')}: --code-distances reads the "
                          f"speaker-listener's goal colours")
    agent = train.make_agent("learned_ddacom", 1, None, policy_reads=s.get("policy_reads", "attention"),
                             task="speaker_listener", encoder=enc)
    agent.load(run / train.POLICY_NAME)
    obs = np.zeros((3, agent.obs_dim), np.float32)
    obs[:, :3] = LANDMARK_COLORS_SL  # the speaker's observation: its goal colour, zero-padded
    with torch.no_grad():
        p = agent.comm.encode(torch.as_tensor(obs)).numpy()
    return [float(np.linalg.norm(p[i] - p[j])) for i, j in ((0, 1), (0, 2), (1, 2))]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="benchmarks/ddacom_sl_eval_threshold.py", description=__doc__.splitlines()[0])
    ap.add_argument("out", help="a python -m coopsim.agents.ddacom.train --out holding learned_ddacom/seed-<s>/ runs")
    ap.add_argument("--thresholds", type=thresholds, default=[1e-6, 0.1, 0.3],
                    help="comma-separated resend thresholds to evaluate with, each > 0 (default 1e-6,0.1,0.3)")
    ap.add_argument("--eval-envs", type=int_in_range(1, 4096), default=32, help="envs, 1-4096 (default 32, as train)")
    ap.add_argument("--eval-episodes", type=int_in_range(1, 10000), default=10,
                    help="consecutive episodes, 1-10000 (default 10, as train)")
    ap.add_argument("--code-distances", action="store_true",
                    help="print the distances between the three goal colours' payloads per run instead (speaker-listener)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    runs = sorted(Path(a.out, "learned_ddacom").glob("seed-*"), key=lambda p: int(p.name.removeprefix("seed-"))
                  if p.name.removeprefix("seed-").isdigit() else -1)
    runs = [r for r in runs if (r / train.POLICY_NAME).is_file()]
    if not runs:
        raise ConfigError(f"no learned_ddacom/seed-<s>/{train.POLICY_NAME} under {a.out}: give the --out of a finished "
                          f"python -m coopsim.agents.ddacom.train run with learned_ddacom", key="OUT", value=a.out)
    if not a.code_distances:
        print(f"{'seed':>4} {'threshold':>10} {'return':>9} {'messages/bcast':>15}")
    for run in runs:
        try:
            s = json.loads((run / train.SETTINGS_NAME).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {run / train.SETTINGS_NAME} ({exc}): the run's settings are needed to "
                              f"rebuild its agent") from None
        if s.get("inbox") != "hold":
            raise ConfigError(f"{run} was trained with --inbox {s.get('inbox')}: the resend threshold is read with "
                              f"--inbox hold only")
        enc = {k: s[k] for k in (*train.ENCODER_DEFAULTS, "inbox", "hold_threshold") if k in s}
        seed = int(run.name.removeprefix("seed-"))
        if a.code_distances:
            print(f"{seed:>4} colour payload distances 0-1 / 0-2 / 1-2: "
                  f"{' / '.join(f'{d:.3f}' for d in code_distances(run, s, enc))}", flush=True)
            continue
        for th in a.thresholds:
            r = train.evaluate_policy("learned_ddacom", run / train.POLICY_NAME, 10_000 + seed, s.get("radius"),
                                      a.eval_envs, a.eval_episodes, s.get("policy_reads", "attention"),
                                      s.get("task", "spread"), enc, sender_threshold=th)
            print(f"{seed:>4} {th:>10g} {r['return']:>9.3f} {r['messages_vs_broadcast']:>15.4f}", flush=True)


if __name__ == "__main__":
    run_script(main)
