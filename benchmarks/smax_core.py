"""JaxMARL's SMAX as a coopsim scenario core, so that coopsim's own trainers train on SMAX itself (a benchmark aid).

Why: coopsim's SMAC-like core follows SMAX's unit stats, timing and heuristic enemy, and the calibration of
``smac_speed.py`` compares random and focus-fire play; on 5m_vs_6m both win 0 % in either simulator, so that check
says nothing about whether the map is as hard to *learn* here as in SMAX. Training coopsim's MAPPO on SMAX itself,
with the same trainer and schedule, answers that: the learner is held fixed and only the simulator changes.

:class:`SMAXCore` runs ``E`` SMAX games in a child process of the peer venv ``bench-venvs/jaxmarl`` (JaxMARL 0.2.0,
jitted and ``vmap``-ed over the batch; ``_smax_core_worker.py``) and exchanges numpy arrays with it over pipes. It
presents SMAX's own observation (``unit_list``, own cooldown and the enemies' last actions included), actions (0-3
move, 4 stop, 5.. attack enemy j; a dead unit may only stop), ``world_state`` as ``state()`` and SMAX's team reward
(enemy health lost, as a fraction divided by the enemy count, plus 1 for a win: at most 2 per episode, not SMAC's
20). ``episode_metrics()`` gives SMAC's ``win`` (every enemy dead, an ally alive), ``timeout``, units left.

:func:`register` adds the ids ``smac/smax-<map>-v0`` to coopsim's registry in this process (the ``smac/`` prefix lets
``smac_time_to_win.py`` measure them); ``benchmarks/mappo_on_smax.py`` is the command that uses it.
"""
from __future__ import annotations

import subprocess
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import ClassVar

import gymnasium
import numpy as np

import smac_speed  # the peer venv (built on first use, as smac_speed.py builds it) and the maps SMAX shares
from _npz_frames import read_frame, write_frame
from coopsim.platform import registry
from coopsim.platform.scenario import ScenarioCore, ScenarioParams, StepResult, check_num_envs, reset_ids
from coopsim.scenarios.smac.maps import MAPS as SMAC_MAPS

HERE = Path(__file__).resolve().parent
WORKER = HERE / "_smax_core_worker.py"
#: the maps this module registers (those of both coopsim and SMAX 0.2) and their SMAC episode limits (agent steps)
MAPS = {m: SMAC_MAPS[m].limit for m in smac_speed.SHARED_MAPS}


class SMAXParams(ScenarioParams):
    map_name: str = "5m_vs_6m"
    max_steps: int = 70


class SMAXCore(ScenarioCore):
    """JaxMARL 0.2 SMAX (``HeuristicEnemySMAX``) batched in a child process; see the module docstring."""

    Params = SMAXParams
    metadata = {"name": "smax_proxy", "render_modes": [], "is_parallelizable": True}
    noop_action: ClassVar[int] = 4  # SMAX's stop: the only action of a dead unit
    team_reward: ClassVar[bool] = True
    dt_s = 0.5

    def __init__(self, num_envs: int = 1, **params):
        p = SMAXParams(**params)
        self.params, self.num_envs = p, check_num_envs(num_envs)
        if p.map_name not in MAPS:
            raise ValueError(f"map_name {p.map_name!r}: valid here: {', '.join(MAPS)}")
        python = smac_speed.ensure_venv()
        self._proc = subprocess.Popen([str(python), str(WORKER), "--map", p.map_name, "--num-envs", str(self.num_envs),
                                       "--max-steps", str(p.max_steps)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._last = self._call(op=np.str_("reset"), seed=np.int64(0))
        A, D = self._last["obs"].shape[1:]
        self.agent_ids = tuple(f"ally_{i}" for i in range(A))
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (D,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(self._last["masks"].shape[-1])
        self.state_space = gymnasium.spaces.Box(-np.inf, np.inf, (self._last["state"].shape[1],), np.float32)

    # ---------------------------------------------------------------- the pipe
    def _call(self, **arrays) -> dict[str, np.ndarray]:
        write_frame(self._proc.stdin, arrays)
        reply = read_frame(self._proc.stdout)
        if reply is None:
            raise RuntimeError(f"the SMAX worker ({WORKER.name}) exited with code {self._proc.wait()}")
        return reply

    # ---------------------------------------------------------------- ScenarioCore
    def reset(self, seed: int | None = None, env_ids: np.ndarray | None = None):
        if env_ids is None:
            self._last = self._call(op=np.str_("reset"), seed=np.int64(0 if seed is None else seed))
        else:
            ids = reset_ids(env_ids, self.num_envs)
            self._last = self._call(op=np.str_("reset"), env_ids=ids.astype(np.int64))
        return self._last["obs"]

    def step(self, actions: np.ndarray) -> StepResult:
        acts = np.asarray(actions, dtype=np.int64)
        if acts.shape != (self.num_envs, self.num_agents):
            raise ValueError(f"actions must have shape {(self.num_envs, self.num_agents)}; got {acts.shape}")
        before = self._last["alive"]
        self._last = r = self._call(op=np.str_("step"), actions=acts)
        ended = r["done"][:, None] | ~r["alive"]
        reward = np.where(before, r["reward"][:, None], 0.0).astype(np.float32)
        term = before & ended & ~r["timeout"][:, None]
        trunc = before & r["timeout"][:, None]
        return StepResult(r["obs"], reward, term, trunc, {"team_reward": r["reward"].copy(),
                                                           "battle_won": r["won"].astype(np.float32)})

    @property
    def alive(self) -> np.ndarray:
        return self._last["alive"].copy()

    def state(self) -> np.ndarray:
        return self._last["state"]

    def action_masks(self) -> np.ndarray:
        return self._last["masks"]

    def episode_metrics(self) -> list[dict[str, float]]:
        r = self._last
        return [{"win": float(r["won"][e]), "timeout": float(r["timeout"][e]),
                 "allies_left": float(r["allies_left"][e]), "enemies_left": float(r["enemies_left"][e]),
                 "episode_steps": float(r["step"][e])} for e in range(self.num_envs)]

    def close(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __del__(self):
        self.close()

    # the trainer's checkpoint pickles the core: only its settings are kept, and an unpickled core starts a new
    # worker with fresh games (SMAX's state stays in the worker), so a resumed run is not bit for bit the same
    def __getstate__(self) -> dict:
        return {"num_envs": self.num_envs, "params": self.params.model_dump()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["num_envs"], **state["params"])


def _variant(map_name: str) -> registry.Variant:
    return registry.Variant(SMAXCore, {"map_name": map_name, "max_steps": MAPS[map_name]}, ("map_name",))


for _m in MAPS:
    globals()[f"smax_{_m}"] = _variant(_m)


def register() -> None:
    """Add ``smac/smax-<map>-v0`` for the maps of :data:`MAPS` to coopsim's registry, in this process only."""
    if getattr(registry, "_smax_registered", False):
        return
    extra = [EntryPoint(f"smac/smax-{m}-v0", f"smax_core:smax_{m}", registry.KINDS["scenario"]) for m in MAPS]
    orig = registry._eps

    def _eps(kind: str):
        eps = orig(kind)
        return (list(eps) + extra) if kind == "scenario" else eps

    registry._eps = _eps
    registry._smax_registered = True
    registry._smax_orig_eps = orig


def unregister() -> None:
    """Undo :func:`register` (a test's teardown: later tests in the process see coopsim's own registry)."""
    if getattr(registry, "_smax_registered", False):
        registry._eps = registry._smax_orig_eps
        registry._smax_registered = False


def main() -> None:
    """Run as a script (any arguments, --help too): say that this is a module and what to run instead."""
    print("benchmarks/smax_core.py is a module (JaxMARL's SMAX as a coopsim scenario core), not a script; run "
          "benchmarks/mappo_on_smax.py (its --help) to train on SMAX")


if __name__ == "__main__":  # a module, not a script
    from coopsim.errors import run_script

    run_script(main)
