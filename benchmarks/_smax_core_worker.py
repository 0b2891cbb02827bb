"""Worker run inside ``bench-venvs/jaxmarl`` by ``benchmarks/smax_core.py`` (never imported by coopsim).

Serves a batch of ``E`` JaxMARL 0.2 SMAX games (``HeuristicEnemySMAX``, SMAX's own heuristic enemy, observations,
actions and reward) over stdin/stdout, so that coopsim's trainer can train on SMAX itself. Each request and reply is
one frame of ``_npz_frames.py``.

Requests (``op`` array holds the name): ``reset`` with ``seed`` (all envs) or ``env_ids`` (those envs, from the
batch's own key stream); ``step`` with ``actions`` int ``[E, A]`` (SMAX's action indices: 0-3 move, 4 stop,
5.. attack enemy j). Every reply carries ``obs`` float32 ``[E, A, D]``, ``state`` float32 ``[E, S]`` (SMAX's
``world_state``), ``masks`` bool ``[E, A, 5 + n_enemies]``, ``alive`` bool ``[E, A]`` (unit alive and the episode
running), ``done`` bool ``[E]``, ``won`` bool ``[E]`` (every enemy dead, an ally alive), ``timeout`` bool ``[E]``,
``allies_left``, ``enemies_left`` int ``[E]``, ``step`` int ``[E]``; a ``step`` reply adds ``reward`` float32 ``[E]``
(SMAX's team reward: enemy health lost as a fraction, divided by the enemy count, plus 1 for a win).
Envs already over are not stepped (their state is kept until reset).
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
_FRAMES_OUT = os.fdopen(os.dup(1), "wb")  # frames go to the original stdout; anything printed goes to stderr
os.dup2(2, 1)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario  # noqa: E402

from _npz_frames import read_frame, write_frame  # noqa: E402  (this script's directory is on sys.path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", required=True)
    ap.add_argument("--num-envs", type=int, required=True)
    ap.add_argument("--max-steps", type=int, required=True)
    args = ap.parse_args()
    env = HeuristicEnemySMAX(scenario=map_name_to_scenario(args.map), max_steps=args.max_steps)
    A, E, ne = env.num_allies, args.num_envs, env.num_enemies
    agents = env.agents

    def pack(obs, state):
        s = state.state
        o = jnp.stack([obs[a] for a in agents], axis=1)                       # [E, A, D]
        av = jax.vmap(env.get_avail_actions)(state)
        m = jnp.stack([av[a] for a in agents], axis=1) > 0                    # [E, A, 5 + ne]
        ally, enemy = s.unit_alive[:, :A], s.unit_alive[:, A:]
        done = s.done
        won = done & ~enemy.any(-1) & ally.any(-1)
        timeout = done & enemy.any(-1) & ally.any(-1)
        return dict(obs=o.astype(jnp.float32), state=obs["world_state"].astype(jnp.float32), masks=m,
                    alive=ally & ~done[:, None], done=done, won=won, timeout=timeout,
                    allies_left=ally.sum(-1), enemies_left=enemy.sum(-1), step=s.step)

    v_reset = jax.vmap(env.reset)

    @jax.jit
    def reset_all(keys):
        obs, state = v_reset(keys)
        return state, obs, pack(obs, state)

    @jax.jit
    def reset_some(keys, state, obs, which):
        obs_n, state_n = v_reset(keys)
        sel = lambda new, old: jnp.where(which.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)  # noqa: E731
        state = jax.tree.map(sel, state_n, state)
        obs = jax.tree.map(sel, obs_n, obs)
        return state, obs, pack(obs, state)

    @jax.jit
    def step(keys, state, obs, actions):
        acts = {a: actions[:, i] for i, a in enumerate(agents)}
        obs_n, state_n, rew, _, _ = jax.vmap(env.step_env)(keys, state, acts)
        running = ~state.state.done
        sel = lambda new, old: jnp.where(running.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)  # noqa: E731
        state = jax.tree.map(sel, state_n, state)
        obs = jax.tree.map(sel, obs_n, obs)
        r = jnp.where(running, rew[agents[0]], 0.0).astype(jnp.float32)
        return state, obs, {**pack(obs, state), "reward": r}

    fin, fout = sys.stdin.buffer, _FRAMES_OUT
    key = jax.random.PRNGKey(0)
    state = obs = None
    while True:
        req = read_frame(fin)
        if req is None:
            return
        op = str(req["op"])
        if op == "reset" and "seed" in req:
            key = jax.random.PRNGKey(int(req["seed"]))
            key, sub = jax.random.split(key)
            state, obs, out = reset_all(jax.random.split(sub, E))
        elif op == "reset":
            which = np.zeros(E, bool)
            which[req["env_ids"]] = True
            key, sub = jax.random.split(key)
            state, obs, out = reset_some(jax.random.split(sub, E), state, obs, jnp.asarray(which))
        elif op == "step":
            key, sub = jax.random.split(key)
            state, obs, out = step(jax.random.split(sub, E), state, obs, jnp.asarray(req["actions"], jnp.int32))
        else:
            raise SystemExit(f"unknown op {op!r}")
        write_frame(fout, {k: np.asarray(v) for k, v in out.items()})


if __name__ == "__main__":  # runs in the jaxmarl venv (no coopsim): Ctrl-C gives one line, not a traceback
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; kept: nothing (the worker serves a training process, which keeps its own results)",
              file=sys.stderr)
        raise SystemExit(130) from None
