"""Conformance checks for scenarios, as library code (after PettingZoo's ``test/`` and Gymnasium's env checker).

:func:`check_scenario` runs, on a scenario given by registry id or factory:

1. PettingZoo's ``parallel_api_test`` on the ``ParallelEnv`` view;
2. the batched-core contract: shapes and dtypes of observations, rewards, flags, alive masks, action
   masks and state; observations inside the observation space; reward 0 and no-op available for
   slots that are not alive; a slot may join mid-episode (alive from a step on) but never comes back after it left;
3. seeded determinism: two instances reset with the same seed and stepped with the same actions side
   by side produce identical arrays at every step;
4. the batched core against the view: env 0 of a 2-env batch equals a single env with the same seed,
   step for step; ``reset(env_ids=[1])`` leaves env 0 untouched;
5. PettingZoo's AEC ``api_test`` on ``parallel_to_aec(view)`` (it samples actions with
   ``infos[agent]["action_mask"]``, which must be int8 0/1 as Gymnasium's ``Discrete.sample(mask=...)`` requires);
   last, so that a broken core is named by the checks above, whose messages are more precise.

Every failure raises :class:`coopsim.errors.ScenarioCheckError` with a message naming the check, the
step and the array that differed.
"""
from __future__ import annotations

from typing import Any, Callable, Union

import gymnasium
import numpy as np

from coopsim.errors import ScenarioCheckError
from coopsim.platform.scenario import ScenarioCore, ScenarioEnv

Factory = Callable[[int], ScenarioCore]


def _factory(scenario: Union[str, Factory, ScenarioEnv, ScenarioCore], params: dict | None) -> Factory:
    if isinstance(scenario, str):
        from coopsim.platform.registry import make_scenario

        return lambda n: make_scenario(scenario, num_envs=n, **(params or {}))
    if isinstance(scenario, ScenarioEnv):
        scenario = scenario.core
    if isinstance(scenario, ScenarioCore):
        core = scenario
        if not hasattr(core, "params"):
            raise ScenarioCheckError("check_scenario needs a registry id, a factory num_envs -> core, or a core with a `params` attribute")
        p = core.params.model_dump() if hasattr(core.params, "model_dump") else dict(core.params)
        return lambda n: type(core)(num_envs=n, **p)
    if callable(scenario):
        return scenario
    raise ScenarioCheckError(f"check_scenario: cannot build a scenario from {scenario!r}")


def _flat(obs) -> dict[str, np.ndarray]:
    return dict(obs) if isinstance(obs, dict) else {"obs": obs}


def _compare(tag: str, step: int, a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    if a.keys() != b.keys():
        raise ScenarioCheckError(f"{tag}: at step {step} the observation keys differ: {sorted(a)} vs {sorted(b)}")
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
            raise ScenarioCheckError(f"{tag}: at step {step} '{k}' differs")


def _random_actions(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """Uniform over available actions, int64 [E, N] (masks bool [E, N, A])."""
    u = rng.random(masks.shape) * masks
    return np.argmax(u + masks * 1e-9, axis=-1).astype(np.int64)


def _check_core_step(core: ScenarioCore, res, alive_before: np.ndarray, step: int,
                     ever_alive: np.ndarray | None = None) -> None:
    """The core contract of one step. ``ever_alive`` (bool ``[E, N]``): slots alive at some point of the episode
    before this step; a slot alive now that never was joins (allowed, with its env's reward), one that was comes
    back (refused). Without it every slot that was not alive before the step counts as coming back."""
    e, n = core.num_envs, core.num_agents
    for name, arr, dtype in (("reward", res.reward, np.floating), ("terminated", res.terminated, np.bool_),
                             ("truncated", res.truncated, np.bool_)):
        arr = np.asarray(arr)
        if arr.shape != (e, n):
            raise ScenarioCheckError(f"core contract: at step {step} '{name}' has shape {arr.shape}, expected ({e}, {n})")
        if not np.issubdtype(arr.dtype, dtype):
            raise ScenarioCheckError(f"core contract: at step {step} '{name}' has dtype {arr.dtype}, expected {dtype.__name__}")
    alive = np.asarray(core.alive)
    if alive.shape != (e, n) or alive.dtype != np.bool_:
        raise ScenarioCheckError(f"core contract: 'alive' must be bool ({e}, {n}); got {alive.dtype} {alive.shape}")
    joined = alive & ~alive_before & ~ever_alive if ever_alive is not None else np.zeros_like(alive)
    if np.any(res.reward[~alive_before & ~joined] != 0):
        raise ScenarioCheckError(f"core contract: at step {step} a slot that was not alive got a non-zero reward")
    if np.any(alive & ~alive_before & ~joined):
        raise ScenarioCheckError(f"core contract: at step {step} a slot came back alive within an episode")
    ended = res.terminated | res.truncated
    if np.any(alive & ended):
        raise ScenarioCheckError(f"core contract: at step {step} a slot is alive but terminated or truncated")
    _check_obs(core, res.obs, step)


def _check_obs(core: ScenarioCore, obs, step: int) -> None:
    e, n = core.num_envs, core.num_agents
    space = core.observation_space
    if isinstance(space, gymnasium.spaces.Dict):
        if not isinstance(obs, dict) or list(obs.keys()) != list(space.spaces.keys()):
            got = list(obs.keys()) if isinstance(obs, dict) else type(obs).__name__
            raise ScenarioCheckError(f"core contract: at step {step} observations must be a dict with keys {list(space.spaces)}; got {got}")
        parts = {k: (obs[k], space.spaces[k]) for k in space.spaces}
    else:
        parts = {"obs": (obs, space)}
    for k, (arr, sp) in parts.items():
        arr = np.asarray(arr)
        if arr.shape != (e, n, *sp.shape):
            raise ScenarioCheckError(f"core contract: at step {step} observation '{k}' has shape {arr.shape}, expected {(e, n, *sp.shape)}")
        if arr.dtype != sp.dtype:
            raise ScenarioCheckError(f"core contract: at step {step} observation '{k}' has dtype {arr.dtype}, space says {sp.dtype}")
        if isinstance(sp, gymnasium.spaces.Box):
            if np.any(arr < sp.low) or np.any(arr > sp.high):
                raise ScenarioCheckError(f"core contract: at step {step} observation '{k}' leaves its Box bounds")


def _aec_api_test(make: Factory, api_cycles: int) -> None:
    """PettingZoo's AEC ``api_test`` on ``parallel_to_aec`` of a fresh one-env view (its progress lines, printed
    to stdout, are dropped); a failure raises ScenarioCheckError."""
    import contextlib
    import io

    from pettingzoo.test import api_test
    from pettingzoo.utils import parallel_to_aec

    view = ScenarioEnv(make(1))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            api_test(parallel_to_aec(view), num_cycles=api_cycles)
    except AssertionError as exc:
        raise ScenarioCheckError(f"pettingzoo api_test (AEC, parallel_to_aec of the view) failed: {exc}") from exc
    finally:
        view.close()


def check_scenario(
    scenario: Union[str, Factory, ScenarioEnv, ScenarioCore],
    *,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    num_steps: int = 60,
    api_cycles: int = 40,
) -> None:
    """Run the conformance checks listed in the module docstring.

    Args:
        scenario: a registry id (with ``params``), a factory ``num_envs -> ScenarioCore``, or a core/view
            whose core has a ``params`` attribute (a pydantic model of its constructor arguments).
        seed: reset seed used by the determinism and batch checks.
        num_steps: steps of the side-by-side checks (envs that end are reset and continue).
        api_cycles: ``num_cycles`` of PettingZoo's ``parallel_api_test`` and AEC ``api_test``.

    Raises:
        ScenarioCheckError: the first broken rule, with the check, step and array named.
    """
    from pettingzoo.test import parallel_api_test

    make = _factory(scenario, params)

    # 1. PettingZoo's own API test on the view
    view = ScenarioEnv(make(1))
    try:
        parallel_api_test(view, num_cycles=api_cycles)
    except AssertionError as exc:
        raise ScenarioCheckError(f"pettingzoo parallel_api_test failed: {exc}") from exc
    if not (isinstance(view.dt_s, float) and view.dt_s > 0):
        raise ScenarioCheckError(f"core contract: dt_s must be a positive float (seconds per step); got {view.dt_s!r}")
    view.close()

    # 2 + 3. contract and determinism: two 2-env batches side by side
    a, b = make(2), make(2)
    rng = np.random.default_rng(12345)
    oa, ob = a.reset(seed=seed), b.reset(seed=seed)
    ever = np.array(a.alive, dtype=bool)  # slots alive at some point of each env's episode (joining is allowed once)
    _check_obs(a, oa, 0)
    _compare("determinism (two instances, same seed)", 0, _flat(oa), _flat(ob))
    for t in range(1, num_steps + 1):
        masks = a.action_masks()
        if masks.shape != (2, a.num_agents, int(a.action_space.n)) or masks.dtype != np.bool_:
            raise ScenarioCheckError(f"core contract: action_masks() must be bool (E, N, A); got {masks.dtype} {masks.shape}")
        dead = ~a.alive
        if np.any(~masks[dead][:, a.noop_action]):
            raise ScenarioCheckError("core contract: the no-op action must be available to slots that are not alive")
        if not np.all(masks.any(axis=-1)):
            raise ScenarioCheckError(f"core contract: at step {t} some agent has no available action")
        _compare("determinism (two instances, same seed)", t, {"action_masks": masks}, {"action_masks": b.action_masks()})
        acts = _random_actions(rng, masks)
        alive_before = a.alive.copy()
        ra, rb = a.step(acts), b.step(acts.copy())
        _check_core_step(a, ra, alive_before, t, ever)
        ever |= np.asarray(a.alive, dtype=bool)
        _compare("determinism (two instances, same seed)", t,
                 {**_flat(ra.obs), "reward": ra.reward, "terminated": ra.terminated, "truncated": ra.truncated, "state": a.state()},
                 {**_flat(rb.obs), "reward": rb.reward, "terminated": rb.terminated, "truncated": rb.truncated, "state": b.state()})
        st = a.state()
        if st.ndim != 2 or st.shape[0] != 2:
            raise ScenarioCheckError(f"core contract: state() must be [E, S]; got shape {st.shape}")
        done = a.done
        if done.any():
            ids = np.flatnonzero(done)
            oa, ob = a.reset(env_ids=ids), b.reset(env_ids=ids)
            ever[ids] = np.asarray(a.alive, dtype=bool)[ids]
            _compare("determinism (two instances, same seed)", t, _flat(oa), _flat(ob))

    # 4. batch env 0 against the single-env view
    batch, single = make(2), make(1)
    ob_, os_ = batch.reset(seed=seed), single.reset(seed=seed)
    _compare("batch vs single env (env 0, same seed)", 0, {k: v[:1] for k, v in _flat(ob_).items()}, _flat(os_))
    rng = np.random.default_rng(7)
    for t in range(1, num_steps + 1):
        if single.done[0]:
            break
        acts = _random_actions(rng, batch.action_masks())
        rb_, rs_ = batch.step(acts), single.step(acts[:1].copy())
        _compare("batch vs single env (env 0, same seed)", t,
                 {**{k: v[:1] for k, v in _flat(rb_.obs).items()}, "reward": rb_.reward[:1], "terminated": rb_.terminated[:1]},
                 {**_flat(rs_.obs), "reward": rs_.reward, "terminated": rs_.terminated})
        if batch.done[1]:
            batch.reset(env_ids=np.array([1]))
    # partial reset leaves env 0 untouched
    before = {k: v[:1].copy() for k, v in _flat(batch.reset(seed=seed)).items()}
    after = {k: v[:1] for k, v in _flat(batch.reset(env_ids=np.array([1]))).items()}
    _compare("reset(env_ids=[1]) must leave env 0 unchanged", 0, before, after)

    # 5. PettingZoo's AEC API test (masked sampling from infos) on a fresh view
    _aec_api_test(make, api_cycles)
