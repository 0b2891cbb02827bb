"""Fine-tune IMMP's neighbour-intent module on rollouts of IMMP's own CS-PIBT low level (issue 4).

The intent module of the shipped policy was trained with PPO rollouts in which agents acted on their own
samples (many waits); under the CS-PIBT low level neighbours wait far less, so its predictions are stale.
This script, on the *training* distribution only (generated random maps, 17-32 cells a side, 20 % obstacles,
3 goals; MovingAI maps stay unseen), alternates a few times (DAgger style, since the module's predictions
feed the policy, the behaviour moves with it):

1. roll out IMMP (CS-PIBT, current intent module) and record every agent's actor input and the labels of its
   neighbours' actual next moves, read from its own two consecutive windows
   (:func:`coopsim.agents.immp.intent.move_labels`, no privileged information);
2. train the intent module only (cross-entropy, Adam) on everything collected so far; the encoder, actor,
   gains and critic are frozen.

It writes a policy file with the new intent module (every other tensor unchanged) and prints the budget.

    .venv/bin/python benchmarks/immp_intent_finetune.py --rounds 6 --episodes 16 --epochs 10 \
        --out coopsim/agents/immp/checkpoints/immp-v0.pt      # the shipped file (from checkpoint shipped-ppo)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by a test rather than run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_venv import check_writable  # noqa: E402

from coopsim.agents.immp.intent import IGNORE, move_labels, own_displacement, split_obs  # noqa: E402
from coopsim.agents.ppo.networks import flatten_obs  # noqa: E402
from coopsim.errors import ConfigError, float_at_least, int_at_least, run_script  # noqa: E402
from coopsim.platform import registry  # noqa: E402
from coopsim.scenarios.mapf import MGMAPFCore  # noqa: E402


def collect(agent_params: dict, state: dict | None, episodes: int, seed0: int, agents: tuple[int, ...], k: int,
            intent: tuple[int, bool, int] | None = None, densities: tuple[float, ...] = (0.2,),
            styles: tuple[str, ...] = ("cells",)):
    xs, labs = [], []
    for ep in range(episodes):
        n = agents[ep % len(agents)]
        density = densities[(ep // len(agents)) % len(densities)]
        style = styles[(ep // len(agents)) % len(styles)]
        core = MGMAPFCore(1, map="random", random_size=[17, 32], random_density=density, random_style=style,
                          num_agents=n, num_goals=k,
                          goal_order="free", conflicts="block", obs_radius=3, max_steps=128)
        # with a state to load, the checkpoint file is not read again for every episode
        params = {k: v for k, v in agent_params.items() if k != "checkpoint"} if state is not None else agent_params
        agent = registry.make_component("agent", "mapf/immp-v0", core, **params)
        if intent is not None:
            agent.replace_intent(*intent)
        if state is not None:
            agent.net.load_state_dict(state)
        obs = core.reset(seed=seed0 + ep)
        agent.reset(seed0 + ep)
        s = agent.s
        while not core.done.all():
            flat = flatten_obs(obs, agent.obs_space)
            x = agent.actor_input(flat)
            act = agent.decide(x)
            res = core.step(act)
            o0 = torch.as_tensor(flat).reshape(-1, flat.shape[-1])
            o1 = torch.as_tensor(flatten_obs(res.obs, agent.obs_space)).reshape(-1, flat.shape[-1])
            d, valid = own_displacement(o0, o1, k, s)
            lab = move_labels(split_obs(o0, k, s)[2][:, 1], split_obs(o1, k, s)[2][:, 1], d, valid)
            keep = (lab != IGNORE).flatten(1).any(1)
            xs.append(x.reshape(-1, x.shape[-1])[keep].clone())
            labs.append(lab[keep].clone())
            obs = res.obs
    return torch.cat(xs), torch.cat(labs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--checkpoint", default="shipped-ppo", help="policy to start from: 'shipped-ppo' = IMMP's PPO-trained shipped one, 'shipped', a "
                         "policy file or a training run's seed directory")
    ap.add_argument("--out", required=True, default=argparse.SUPPRESS, help="policy file to write (required)")
    ap.add_argument("--rounds", type=int_at_least(1), default=3, help="DAgger rounds: rollouts, then training (>= 1)")
    ap.add_argument("--episodes", type=int_at_least(1), default=12, help="rollout episodes per round")
    ap.add_argument("--epochs", type=int_at_least(1), default=6, help="passes over the labelled data per round (>= 1)")
    ap.add_argument("--lr", type=float_at_least(0, exclusive=True), default=2e-3, help="Adam step size (> 0)")
    ap.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the rollouts, the maps and the training (>= 0)")
    ap.add_argument("--last-move", action="store_true",
                    help="give the intent module each neighbour's last move as input (intent_last_move; the new "
                         "input weights start at zero, so round 0 starts from the checkpoint's predictions)")
    ap.add_argument("--agents", type=int_at_least(1), nargs="+", default=[24, 48],
                    help="team sizes of the rollout episodes, cycled over episodes (the PPO training config's is 24)")
    ap.add_argument("--densities", type=float, nargs="+", default=[0.2],
                    help="obstacle fractions of the generated maps (0.1..0.3), cycled after each pass over --agents")
    ap.add_argument("--styles", nargs="+", choices=["cells", "bars"], default=["cells"],
                    help="generated map styles (scenario random_style: scattered cells, or straight bars that leave "
                         "corridors), cycled after each pass over --agents")
    ap.add_argument("--depth", type=int_at_least(0), default=0,
                    help="3x3 conv layers of the intent module (0: the checkpoint's); another depth than the "
                         "checkpoint's starts a fresh module")
    ap.add_argument("--channels", type=int_at_least(0), default=0,
                    help="conv width of the intent module (0: the checkpoint's); another width than the "
                         "checkpoint's starts a fresh module")
    a = ap.parse_args(argv)
    if not 0.1 <= min(a.densities) <= max(a.densities) <= 0.3:
        ap.error(f"--densities {a.densities}: obstacle fractions must be in [0.1, 0.3]")
    if a.checkpoint not in ("shipped", "shipped-ppo") and not Path(a.checkpoint).exists():
        raise ConfigError(f"checkpoint {a.checkpoint!r} not found: give 'shipped' (IMMP's shipped policy), "
                          "'shipped-ppo', a policy file, or a training run's seed directory", key="--checkpoint",
                          value=a.checkpoint)
    check_writable("--out", a.out)  # before the rollouts and the training (minutes), not after them
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    t0, c0 = time.time(), time.process_time()
    params = dict(checkpoint=a.checkpoint)
    probe = registry.make_component("agent", "mapf/immp-v0", MGMAPFCore(1, map="random", random_size=[17, 32],
                                    num_agents=8, num_goals=3, obs_radius=3), **params)
    fresh = ((bool(a.channels) and a.channels != probe.net.intent.body[0].out_channels)
             or (bool(a.depth) and a.depth != probe.net.intent.depth))
    if a.last_move or a.channels or a.depth:
        probe.replace_intent(a.channels or probe.params.intent_channels, a.last_move, a.depth or None)
    net = probe.net
    opt = torch.optim.Adam(net.intent.parameters(), lr=a.lr)
    X, Y = [], []
    for r in range(a.rounds):
        # a fresh (untrained) module of another width would steer round 0's rollouts at random: that round
        # rolls out with the checkpoint's own module
        state, arch = (None, None) if (r == 0 and fresh) else (net.state_dict(), (probe.params.intent_channels, a.last_move,
                                                                             probe.params.intent_depth))
        x, y = collect(params, state, a.episodes, 10_000 * (a.seed + 1) + 100 * r, tuple(a.agents), 3, arch, tuple(a.densities),
                       tuple(a.styles))
        X.append(x)
        Y.append(y)
        xa, ya = torch.cat(X), torch.cat(Y)
        with torch.no_grad():
            pred = net.intent_logits(x).argmax(1)
        known = y != IGNORE
        acc_before = float(((pred == y) & known).sum() / known.sum())
        g = torch.Generator().manual_seed(a.seed * 100 + r)
        for _ in range(a.epochs):
            perm = torch.randperm(len(xa), generator=g)
            for i in range(0, len(xa), 256):
                b = perm[i:i + 256]
                lg = net.intent_logits(xa[b])
                loss = F.cross_entropy(lg, ya[b], ignore_index=IGNORE)
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            pred = net.intent_logits(x).argmax(1)
        acc_after = float(((pred == y) & known).sum() / known.sum())
        print(f"round {r}: {len(x)} samples, {int(known.sum())} labelled neighbour moves (total {int((ya != IGNORE).sum())}); "
              f"accuracy on this round's rollouts {acc_before:.3f} -> {acc_after:.3f} (train); "
              f"{time.process_time() - c0:.0f} CPU s", flush=True)
    ck = probe.checkpoint()
    ck["intent_finetune"] = {"from": str(a.checkpoint), "rounds": a.rounds, "episodes_per_round": a.episodes,
                             "epochs": a.epochs, "lr": a.lr, "seed": a.seed, "last_move": a.last_move, "channels": probe.params.intent_channels,
                             "depth": probe.params.intent_depth, "cpu_s": time.process_time() - c0,
                             "maps": f"generated random 17-32, style {'/'.join(a.styles)}, density {'/'.join(map(str, a.densities))}, {'/'.join(map(str, a.agents))} agents, 3 goals, 128 steps"}
    from coopsim.platform.trainer import atomic_save

    atomic_save(ck, a.out)
    print(f"wrote {a.out}; budget {time.process_time() - c0:.0f} CPU s, {time.time() - t0:.0f} s wall")


if __name__ == "__main__":
    run_script(main)
