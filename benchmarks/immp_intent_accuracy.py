"""Next-move accuracy of IMMP's neighbour-intent module vs "the neighbour repeats its last move" (issue 4).

Runs IMMP (shipped checkpoint unless ``--checkpoint``) on a MovingAI map; at every step and for every agent,
the neighbours whose next move is identifiable from the agent's two consecutive windows
(:func:`coopsim.agents.immp.intent.move_labels`) *and* whose previous move was identifiable too are scored:

* ``intent``: argmax of the intent module's logits at the neighbour's cell;
* ``repeat last``: the neighbour's previous move (labelled the same way one step earlier);
* ``always wait``: move 0.

The agent acts with IMMP's low level (CS-PIBT on the policy's preferences; ``--no-cs-pibt``: the policy's
own samples, the second round's measurement).

    .venv/bin/python benchmarks/immp_intent_accuracy.py [--map random-32-32-10] [--agents 64] [--steps 150]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mapf_args import check_maps  # noqa: E402
from coopsim.agents.immp.intent import IGNORE, MOVES, move_labels, own_displacement, shift, shift_per_sample
from coopsim.agents.ppo.networks import flatten_obs
from coopsim.errors import ConfigError, int_at_least, run_script
from coopsim.platform import registry
from coopsim.scenarios.mapf import MGMAPFCore


def last_move_map(lab_prev: torch.Tensor, d_prev: torch.Tensor) -> torch.Tensor:
    """Previous moves ``[B, S, S]`` (frame t-1, at the cell the neighbour left) -> ``[B, S, S]`` in frame t,
    at the cell the neighbour is in now; IGNORE where unknown."""
    out = torch.full_like(lab_prev, IGNORE)
    for m, (dx, dy) in enumerate(MOVES):
        at = shift((lab_prev == m).float(), -dx, -dy)          # where it went, frame t-1
        now = shift_per_sample(at, d_prev) > 0.5               # frame t
        out[now] = m
    return out


def accuracy(a, checkpoint: str):
    """(counts per predictor, neighbour-steps scored, identifiable neighbour-steps, intent hits on those)."""
    tot = {"intent": 0, "repeat last": 0, "always wait": 0}
    n_all, n_int_all, hit_int_all = 0, 0, 0
    for seed in range(a.seed0, a.seed0 + a.seeds):
        core = MGMAPFCore(1, map=a.map, num_agents=a.agents, num_goals=a.goals, obs_radius=3, max_steps=a.steps)
        extra = {} if a.intent_adapt_lr is None else {"intent_adapt_lr": a.intent_adapt_lr}
        agent = registry.make_component("agent", "mapf/immp-v0", core, checkpoint=checkpoint, deterministic=False, **extra)
        obs = core.reset(seed=seed)
        agent.reset(seed)
        k, s = a.goals, agent.s
        prev_lab = prev_d = None
        while not core.done.all():
            flat = flatten_obs(obs, agent.obs_space)
            x = agent.actor_input(flat)
            if a.no_cs_pibt:   # the policy's own (seeded) samples; the module as trained (no online calibration)
                with torch.no_grad():
                    logits = agent.net.intent_logits(x.reshape(-1, x.shape[-1]))
                pol, _, _ = agent.masked_logits(x)
                act = torch.multinomial(torch.softmax(pol, -1), 1, generator=agent._gen).reshape(1, -1).numpy()
            else:
                act = agent.decide(x)                           # IMMP's low level: CS-PIBT on the same input
                logits = agent.last_intent_logits               # the predictions that decision used
            res = core.step(act)
            o0 = torch.as_tensor(flat).reshape(-1, flat.shape[-1])
            o1 = torch.as_tensor(flatten_obs(res.obs, agent.obs_space)).reshape(-1, flat.shape[-1])
            d, valid = own_displacement(o0, o1, k, s)
            w0 = o0[:, 4 * k:].reshape(-1, 3, s, s)[:, 1]
            w1 = o1[:, 4 * k:].reshape(-1, 3, s, s)[:, 1]
            lab = move_labels(w0, w1, d, valid)
            pred = logits.argmax(1)
            known = lab != IGNORE
            n_int_all += int(known.sum())
            hit_int_all += int(((pred == lab) & known).sum())
            if prev_lab is not None:
                last = last_move_map(prev_lab, prev_d)
                both = known & (last != IGNORE)
                n_all += int(both.sum())
                tot["intent"] += int(((pred == lab) & both).sum())
                tot["repeat last"] += int(((last == lab) & both).sum())
                tot["always wait"] += int(((lab == 0) & both).sum())
            prev_lab, prev_d = lab, d
            obs = res.obs
    return tot, n_all, n_int_all, hit_int_all


def agent_lr(a) -> float:
    from coopsim.agents.immp.agent import IMMPParams

    if a.no_cs_pibt:
        return 0.0
    return IMMPParams.model_fields["intent_adapt_lr"].default if a.intent_adapt_lr is None else a.intent_adapt_lr


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--map", nargs="+", default=["random-32-32-10"],
                    help="MovingAI map(s); with several, the accuracy over the maps follows (mean over maps per "
                         "policy, and pooled over every scored neighbour-step)")
    ap.add_argument("--agents", type=int_at_least(1), default=64, help="agents per episode (>= 1)")
    ap.add_argument("--goals", type=int_at_least(1), default=3, help="goals per agent (>= 1)")
    ap.add_argument("--steps", type=int_at_least(1), default=150, help="steps per episode at most (>= 1)")
    ap.add_argument("--seeds", type=int_at_least(1), default=2, help="episodes per map and policy (>= 1)")
    ap.add_argument("--checkpoint", nargs="+", default=["shipped"],
                    help="policy files (one per training seed); 'shipped' = training seed 0's")
    ap.add_argument("--no-cs-pibt", action="store_true", help="act on the policy's own samples (the ablation's low level)")
    ap.add_argument("--intent-adapt-lr", type=float, default=None,
                    help="agents.params.intent_adapt_lr (online inertia calibration; 0 = the module as trained; "
                         "unset: the agent's own default, 0)")
    ap.add_argument("--seed0", type=int_at_least(0), default=0, help="first episode seed (scen file seed0+1)")
    a = ap.parse_args(argv)
    # every map, policy and parameter before the first episode (a bad later one used to stop after the others)
    check_maps(a.map, a.agents, a.goals)
    for ck in a.checkpoint:
        if ck not in ("shipped", "shipped-ppo") and not Path(ck).exists():
            raise ConfigError(f"checkpoint {ck!r} not found: give 'shipped' (IMMP's shipped policy), 'shipped-ppo', "
                              "policy files, or training runs' seed directories", key="--checkpoint", value=ck)
    if a.intent_adapt_lr is not None:
        try:
            registry.validate_params("agent", "mapf/immp-v0", {"intent_adapt_lr": a.intent_adapt_lr})
        except ConfigError as exc:
            raise ConfigError(exc.message, key="--intent-adapt-lr", value=a.intent_adapt_lr) from None
    torch.set_num_threads(1)
    import copy

    import numpy as np

    from coopsim.platform.stats import t_interval

    def over_policies(diff: np.ndarray) -> str:
        _, lo, hi = t_interval(diff)
        return f"{diff.mean():+.4f} +- {(hi - lo) / 2:.4f} (95% CI, Student t over policies)"

    by_map = {}
    for m in a.map:
        am = copy.copy(a)
        am.map = m
        rows = []
        for ck in a.checkpoint:
            tot, n_all, n_int_all, hit_int_all = accuracy(am, ck)
            rows.append((ck, tot, n_all))
            print(f"map {m}, {a.agents} agents, {a.goals} goals, {a.seeds} episodes of <= {a.steps} steps, "
                  f"low level {'policy samples' if a.no_cs_pibt else 'CS-PIBT'}, checkpoint {ck}, "
                  f"intent_adapt_lr {agent_lr(a)}")
            print(f"neighbour next-move accuracy on {n_all} neighbour-steps whose last and next moves are both identifiable:")
            for kk, v in tot.items():
                print(f"  {kk:12s} {v / max(n_all, 1):.3f}")
            print(f"intent module on all {n_int_all} identifiable neighbour-steps: {hit_int_all / max(n_int_all, 1):.3f}")
            print(f"intent beats repeat-last: {'yes' if tot['intent'] > tot['repeat last'] else 'NO'}", flush=True)
        by_map[m] = rows
        if len(rows) > 1:
            diff = np.array([(t["intent"] - t["repeat last"]) / max(n, 1) for _, t, n in rows])
            print(f"over {len(rows)} policies: intent {np.mean([t['intent'] / max(n, 1) for _, t, n in rows]):.3f}, "
                  f"repeat last {np.mean([t['repeat last'] / max(n, 1) for _, t, n in rows]):.3f}; "
                  f"intent - repeat last = {over_policies(diff)}; per policy {' '.join(f'{d:+.4f}' for d in diff)}")
    if len(a.map) > 1:   # the accuracy over the maps: mean over maps per policy, then over policies; and pooled
        acc = {k: np.array([[t[k] / max(n, 1) for _, t, n in by_map[m]] for m in a.map]) for k in ("intent", "repeat last")}
        per_policy = acc["intent"].mean(0) - acc["repeat last"].mean(0)          # [policies]
        hits = {k: sum(t[k] for m in a.map for _, t, _ in by_map[m]) for k in ("intent", "repeat last")}
        n_tot = sum(n for m in a.map for _, _, n in by_map[m])
        print(f"over {len(a.map)} maps (mean over maps): intent {acc['intent'].mean():.3f}, repeat last "
              f"{acc['repeat last'].mean():.3f}; per policy {' '.join(f'{d:+.4f}' for d in per_policy)}"
              + (f"; intent - repeat last = {over_policies(per_policy)}" if len(per_policy) > 1 else ""))
        print(f"pooled over all {n_tot} scored neighbour-steps: intent {hits['intent'] / max(n_tot, 1):.3f}, "
              f"repeat last {hits['repeat last'] / max(n_tot, 1):.3f}")

if __name__ == "__main__":
    run_script(main)
