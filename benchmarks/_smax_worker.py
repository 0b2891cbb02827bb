"""Worker run inside ``bench-venvs/jaxmarl`` by ``benchmarks/smac_speed.py`` (never imported by coopsim).

Measures JaxMARL 0.2 SMAX (``HeuristicEnemySMAX``, the heuristic enemy) and prints one JSON line:

* ``speed``: env steps/s with uniformly random valid actions, auto-resets included, either as one jitted
  ``lax.scan`` over ``vmap``-ed steps (``scan``) or one jitted step call at a time from Python with actions
  sampled in numpy from the available-action masks (``call``, what a PettingZoo-style user does);
  compile time reported apart.
* ``winrate``: win rate of random valid play or of scripted focus fire over ``episodes`` episodes with
  the map's SMAC episode limit; a win is "every enemy dead and an ally alive" when the episode ends.

JAX's persistent compilation cache is on (``bench-venvs/jax-cache`` beside the venv, every entry kept whatever
its compile time or size), so a rerun loads SMAX's compiled programs instead of recompiling them (44-350 s per
cell). Each speed result reports its compile time apart and whether it was a cache hit (``cache_hits`` /
``cache_misses``: JAX's persistent-cache events counted during that compile).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jaxmarl import make
from jaxmarl.environments.smax import map_name_to_scenario

CACHE_DIR = Path(__file__).resolve().parents[1] / "bench-venvs" / "jax-cache"
jax.config.update("jax_compilation_cache_dir", str(CACHE_DIR))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
_EVENTS = {"hits": 0, "misses": 0}


def _on_event(event: str, **_kw) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _EVENTS["hits"] += 1
    elif event == "/jax/compilation_cache/cache_misses":
        _EVENTS["misses"] += 1


jax.monitoring.register_event_listener(_on_event)


def _cache_counts(before: dict) -> dict:
    """Persistent-cache hits and misses since ``before`` (a copy of ``_EVENTS``)."""
    return {"cache_hits": _EVENTS["hits"] - before["hits"], "cache_misses": _EVENTS["misses"] - before["misses"]}


def build(map_name: str, limit: int):
    return make("HeuristicEnemySMAX", scenario=map_name_to_scenario(map_name), max_steps=limit)


def random_actions(env, key, avail):
    """avail: dict agent -> [B, A] (0/1) -> dict agent -> [B] uniform among available."""
    keys = jax.random.split(key, len(env.agents))
    out = {}
    for k, a in zip(keys, env.agents):
        logits = jnp.where(avail[a] > 0, 0.0, -1e9)
        out[a] = jax.random.categorical(k, logits, axis=-1)
    return out


def focus_fire_actions(env, state):
    """Scripted focus fire on SMAX's state (same rule as coopsim's smac/focus-fire-v0). Batched state."""
    s = state.state
    na = env.num_allies
    pos, alive, hp, typ = s.unit_positions, s.unit_alive, s.unit_health, s.unit_types
    frac = hp / env.unit_type_health[typ]
    pa, pe = pos[:, :na], pos[:, na:]
    d = jnp.linalg.norm(pa[:, :, None, :] - pe[:, None, :, :], axis=-1)  # [B, na, ne]
    rng_ = env.unit_type_attack_ranges[typ[:, :na]][..., None]
    sight = env.unit_type_sight_ranges[typ[:, :na]][..., None]
    e_alive = alive[:, None, na:]
    can = (d < rng_) & e_alive
    score = jnp.where(can, frac[:, None, na:], jnp.inf)
    target = jnp.argmin(score, -1)
    has = jnp.isfinite(jnp.min(score, -1))
    vis = (d < sight) & e_alive
    closest = jnp.argmin(jnp.where(vis, d, jnp.inf), -1)
    rel = jnp.take_along_axis(pe, closest[..., None].repeat(2, -1), 1) - pa
    dirs = jnp.array([[0, 1], [1, 0], [0, -1], [-1, 0]], jnp.float32)  # SMAX 0 N, 1 E, 2 S, 3 W
    move = jnp.argmax(rel @ dirs.T, -1)
    fallback = jnp.full_like(move, 1)  # east
    act = jnp.where(has, env.num_movement_actions + target, jnp.where(vis.any(-1), move, fallback))
    act = jnp.where(alive[:, :na], act, env.num_movement_actions - 1)
    return {a: act[:, i] for i, a in enumerate(env.agents)}


def speed_scan(env, batch: int, steps: int, seed: int):
    v_reset = jax.vmap(env.reset)
    v_step = jax.vmap(env.step)
    v_avail = jax.vmap(env.get_avail_actions)

    def body(carry, _):
        key, state = carry
        key, ka, ks = jax.random.split(key, 3)
        acts = random_actions(env, ka, v_avail(state))
        _, state, _, _, _ = v_step(jax.random.split(ks, batch), state, acts)
        return (key, state), None

    @jax.jit
    def run(key):
        key, kr = jax.random.split(key)
        _, state = v_reset(jax.random.split(kr, batch))
        (key, state), _ = jax.lax.scan(body, (key, state), None, length=steps)
        return state.state.unit_health.sum()

    ev = dict(_EVENTS)
    t0 = time.perf_counter()
    jax.block_until_ready(run(jax.random.PRNGKey(seed)))  # compile (or load from the persistent cache) + first run
    compile_s = time.perf_counter() - t0
    cache = _cache_counts(ev)
    t0, c0 = time.perf_counter(), time.process_time()
    jax.block_until_ready(run(jax.random.PRNGKey(seed + 1)))
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    return {"steps_per_s": batch * steps / dt, "steps_per_cpu_s": batch * steps / dc, "compile_s": compile_s, "steps": steps,
            **cache}


def speed_call(env, batch: int, seconds: float, seed: int):
    v_reset = jax.jit(jax.vmap(env.reset))
    v_step = jax.jit(jax.vmap(env.step))
    v_avail = jax.jit(jax.vmap(env.get_avail_actions))
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    ev = dict(_EVENTS)
    t0 = time.perf_counter()
    _, state = v_reset(jax.random.split(key, batch))

    def sample(av):
        out = {}
        for a in env.agents:
            m = np.asarray(av[a])
            out[a] = (rng.random(m.shape) * m).argmax(-1).astype(np.int32)
        return out

    for _ in range(3):  # compile and warm with the exact input types of the timed loop
        key, ks = jax.random.split(key)
        _, state, _, _, _ = v_step(jax.random.split(ks, batch), state, sample(v_avail(state)))
    jax.block_until_ready(state.state.unit_health)
    compile_s = time.perf_counter() - t0
    cache = _cache_counts(ev)
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        acts = sample(v_avail(state))
        key, ks = jax.random.split(key)
        _, state, _, _, _ = v_step(jax.random.split(ks, batch), state, acts)
        n += 1
        if time.perf_counter() - t0 > seconds and n >= 8:
            break
    jax.block_until_ready(state.state.unit_health)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    return {"steps_per_s": batch * n / dt, "steps_per_cpu_s": batch * n / dc, "compile_s": compile_s, "steps": n,
            **cache}


def winrate(env, policy: str, episodes: int, limit: int, seed: int):
    v_reset = jax.vmap(env.reset)
    v_step = jax.vmap(env.step_env)
    v_avail = jax.vmap(env.get_avail_actions)
    na = env.num_allies

    def body(carry, _):
        key, state, done, won = carry
        key, ka, ks = jax.random.split(key, 3)
        if policy == "random":
            acts = random_actions(env, ka, v_avail(state))
        else:
            acts = focus_fire_actions(env, state)
        _, state, _, dones, _ = v_step(jax.random.split(ks, episodes), state, acts)
        alive = state.state.unit_alive
        end = dones["__all__"] & ~done
        w = end & ~alive[:, na:].any(-1) & alive[:, :na].any(-1)
        return (key, state, done | dones["__all__"], won | w), None

    @jax.jit
    def run(key):
        key, kr = jax.random.split(key)
        _, state = v_reset(jax.random.split(kr, episodes))
        z = jnp.zeros(episodes, bool)
        (key, state, done, won), _ = jax.lax.scan(body, (key, state, z, z), None, length=limit)
        return won, done

    won, done = run(jax.random.PRNGKey(seed))
    won = np.asarray(won)
    return {"win_rate": float(won.mean()), "episodes": episodes, "ended": float(np.asarray(done).mean())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=["scan", "call", "speed", "winrate"], required=True)
    ap.add_argument("--map", required=True)
    ap.add_argument("--limit", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--policy", default="random")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    env = build(a.map, a.limit)
    if a.task == "scan":
        out = speed_scan(env, a.batch, a.steps, a.seed)
    elif a.task == "call":
        out = speed_call(env, a.batch, a.seconds, a.seed)
    elif a.task == "speed":
        out = {"scan": speed_scan(env, a.batch, a.steps, a.seed), "call": speed_call(env, a.batch, a.seconds, a.seed)}
    else:
        out = winrate(env, a.policy, a.episodes, a.limit, a.seed)
    out["jax"] = jax.__version__
    print(json.dumps(out))


if __name__ == "__main__":  # runs in the jaxmarl venv (no coopsim): Ctrl-C gives one line, not a traceback
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; kept: nothing (the worker prints its JSON result when it finishes)", file=__import__("sys").stderr)
        raise SystemExit(130) from None
