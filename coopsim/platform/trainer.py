"""The ``Trainer`` protocol every learner implements, and what all of them share: the training loop
driver (:func:`fit`), atomic checkpoints with exact resume, and the CSV + TensorBoard logger.

A learner (PPO, QMIX, tabular...) implements :class:`Trainer`: one ``train_iteration`` (collect and
update), ``state_dict``/``load_state_dict`` holding *everything* a resumed run needs to continue
exactly (parameters, optimizer, RNG states, the scenario core with its generators, counters), and
``save_policy`` writing the file its agent plugin's ``load`` reads. :func:`fit` runs iterations until
the step budget is spent, logs every iteration, checkpoints every ``checkpoint_every`` env steps, and
on ``resume`` restores the newest checkpoint and truncates the logs to it, so a killed-and-resumed run
writes the same metrics rows as an uninterrupted one (with the same budget: a schedule linear over
``total_env_steps``, e.g. an annealed lr, follows the new budget after a resume that changes it).

An agent plugin class that can be trained provides ``TrainConfig`` (a :class:`TrainSchedule` subclass,
the schema of the run config's ``train:`` section) and a classmethod
``make_trainer(cfg: RunConfig, train: TrainConfig, seed: int, *, file=None) -> Trainer``.
"""
from __future__ import annotations

import csv
import io
import math
import os
import shlex
import time
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict, Field

from coopsim.errors import ConfigError, TrainingDiverged
from coopsim.platform.recorder import atomic_write_json, atomic_write_text

CHECKPOINT_NAME = "checkpoint.pt"
POLICY_NAME = "policy.pt"
METRICS_CSV = "metrics.csv"
SUMMARY_NAME = "train_summary.json"
#: columns that depend on the machine, not on the run; excluded when comparing runs
WALL_COLUMNS = ("time/wall_s", "time/env_steps_per_s", "time/rollout_s", "time/update_s")


#: largest step budget ``train.total_env_steps`` of every learner's ``train:`` section: 10**12, weeks of training at a
#: million env steps per second (a larger one overflowed the progress display's ETA)
TOTAL_ENV_STEPS_MAX = 10**12


class TrainSchedule(BaseModel):
    """Keys of the ``train:`` section shared by every learner (subclasses add their algorithm's keys)."""

    model_config = ConfigDict(extra="forbid")
    total_env_steps: int = Field(..., ge=1, le=TOTAL_ENV_STEPS_MAX,
                                 description="step budget: environment steps (one per env per vector step), "
                                             "1 .. 10**12")
    torch_threads: int = Field(1, ge=1, le=256, description="torch.set_num_threads; 1 is fastest on busy shared cores")
    checkpoint_every: int = Field(0, ge=0, description="env steps between checkpoints; 0 = only at the end")
    tensorboard: bool = Field(True, description="also write TensorBoard event files under <run>/tb")
    progress: bool = Field(True, description="show a rich progress bar")
    init_policy: str | None = Field(
        None, json_schema_extra={"file": True},
        description="warm start (fine-tuning): a policy.pt, training checkpoint.pt or seed-<s> directory of an earlier "
                    "run of the same agent with the same architecture and sizes; every seed starts from its weights "
                    "(a PPO policy also brings its value normalisation) with a fresh optimizer and schedule. A resume "
                    "continues from its own checkpoint and does not read it again. None: random initial weights")

    def inert_keys(self) -> list[str]:
        """One line per key the ``train:`` section gives that has no effect with the other keys' values (e.g. an
        annealing fraction of an option that is off); empty by default. Subclasses add their algorithm's pairs."""
        return []


@runtime_checkable
class Trainer(Protocol):
    """What :func:`fit` drives. ``env_steps`` and ``iteration`` count what has been done so far."""

    env_steps: int
    iteration: int

    def train_iteration(self) -> dict[str, float]:
        """Collect experience and update once; advance ``env_steps`` and ``iteration``; return metrics."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (picklable)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ...

    def save_policy(self, path: str | Path) -> None:
        """Write the file the agent plugin's ``load`` reads."""
        ...


# --- checkpoints --------------------------------------------------------------------------------

def annealed_lr(cfg: Any, env_steps: int) -> float:
    """Learning rate of the update after ``env_steps``: ``cfg.lr``, or with ``cfg.anneal_lr`` linear from ``lr`` at 0
    to 0 at ``cfg.total_env_steps`` (held at 0 after it). ``cfg`` is any train config with those fields."""
    if not cfg.anneal_lr:
        return float(cfg.lr)
    return float(cfg.lr * max(1.0 - env_steps / cfg.total_env_steps, 0.0))


def entropy_coef(cfg: Any, env_steps: int) -> float:
    """Entropy coefficient of the update after ``env_steps``: ``cfg.ent_coef``, or with ``cfg.ent_coef_end``
    set, linear from ``ent_coef`` at 0 to ``ent_coef_end`` at ``total_env_steps`` (held there after it)."""
    if cfg.ent_coef_end is None:
        return float(cfg.ent_coef)
    frac = min(max(env_steps / cfg.total_env_steps, 0.0), 1.0)
    return float(cfg.ent_coef + (cfg.ent_coef_end - cfg.ent_coef) * frac)


def atomic_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` to ``path`` atomically: serialised in memory, then written through a temporary file, fsync
    and ``os.replace`` (:func:`~coopsim.platform.recorder.atomic_write_bytes`; a checkpoint is a few MB).

    Raises:
        WriteError: the file could not be written (a full disk, a read-only folder); no temporary file is left.
    """
    from coopsim.platform.recorder import atomic_write_bytes

    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(Path(path), buf.getvalue())


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`atomic_save` (our own files: full unpickling).

    Raises:
        ConfigError: the file is missing or not a coopsim checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "not found"
        raise ConfigError(f"checkpoint {what} (give policy.pt, checkpoint.pt or a training run's seed-<s> directory)",
                          file=str(path))
    size = path.stat().st_size
    bad = _zip_crc_failure(path)
    if bad is not None:
        raise ConfigError(f"damaged checkpoint: its entry {bad!r} fails its CRC-32 check (the file, {size:,} bytes, "
                          f"was changed after it was written); use another checkpoint of the run "
                          f"(seed-<s>/policy.pt or checkpoint.pt), or train again", file=str(path))
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        head = path.read_bytes()[:60]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text and all(c.isprintable() or c in "\r\n\t" for c in text):  # e.g. metrics.csv given by mistake
            first = text.splitlines()[0][:40] if text.strip() else ""
            raise ConfigError(f"not a checkpoint: a text file ({size:,} bytes, starting {first!r}); give policy.pt, "
                              f"checkpoint.pt or a training run's seed-<s> directory", file=str(path)) from None
        said = str(exc).split(". ")[0].strip().rstrip(".")  # torch's first sentence, not its paragraph of advice
        raise ConfigError(f"not a readable checkpoint: the file ({size:,} bytes) is damaged, truncated or not a torch "
                          f"file written by coopsim (the reader said: {type(exc).__name__}: {said}); use another "
                          f"checkpoint of the run (seed-<s>/policy.pt or checkpoint.pt), or train again",
                          file=str(path)) from None


def _zip_crc_failure(path: Path) -> str | None:
    """The first entry of a zip-format torch file whose stored CRC-32 does not match its bytes (torch's reader
    does not check them, so flipped bytes inside a tensor would load silently), or None when every entry matches
    or the file is not a readable zip (torch.load then says what is wrong)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return z.testzip()
    except zipfile.BadZipFile as exc:
        return None if "CRC" not in str(exc) else str(exc)
    except (OSError, EOFError, ValueError):  # truncated or not a zip: left to torch.load's message
        return None


def training_seed_dirs(run_dir: str | Path, holding: tuple[str, ...] = (CHECKPOINT_NAME, METRICS_CSV)) -> list[Path]:
    """The ``seed-<s>/`` directories of a training run that hold at least one of the files ``holding``, in seed
    order (``seed-2`` before ``seed-10``); empty for any other directory."""
    dirs = [d for d in Path(run_dir).glob("seed-*") if d.is_dir() and any((d / f).is_file() for f in holding)]
    return sorted(dirs, key=lambda d: (len(d.name), d.name))


def resolve_policy_path(path: str | Path) -> Path:
    """The file ``coopsim eval --checkpoint`` means by ``path``: a seed directory (``seed-<s>/``) gives its
    ``policy.pt``, or its ``checkpoint.pt`` when training has not finished; a file is itself."""
    path = Path(path)
    if path.is_dir():
        if not (path / POLICY_NAME).is_file() and not (path / CHECKPOINT_NAME).is_file():
            seeds = training_seed_dirs(path, (POLICY_NAME, CHECKPOINT_NAME))
            if seeds:
                raise ConfigError(f"a training run directory: its checkpoints are in {', '.join(d.name + '/' for d in seeds)}; "
                                  f"pass one, e.g. --checkpoint {shlex.quote(str(seeds[0]))}", file=str(path))
        path = path / POLICY_NAME if (path / POLICY_NAME).is_file() else path / CHECKPOINT_NAME
    return path


#: the learner whose config loads a policy file of each format (for the message when the wrong one is given)
POLICY_LEARNERS = {"coopsim.ppo/1": "ppo/mappo-v0 or ppo/ippo-v0", "coopsim.qmix/1": "qmix/qmix-v0",
                   "coopsim.immp/1": "mapf/immp-v0 (or mapf/dppo-v0)"}


def wrong_policy_message(ck, expected: str, learner: str) -> str:
    """"not a <learner> policy file", saying what the file is instead and which config would load it."""
    fmt = ck.get("format") if isinstance(ck, dict) else None
    if fmt in POLICY_LEARNERS:
        return (f"not a {learner} policy file: it is a {fmt} policy, which a config with agents.id "
                f"{POLICY_LEARNERS[fmt]} loads (e.g. its training run's config.yaml); expected {expected}")
    return f"not a {learner} policy file (format {fmt!r}, expected {expected!r})"


def open_policy(path: str | Path, fmt: str, learner: str, keys: dict[str, type | tuple[type, ...]]) -> tuple[dict, Path]:
    """:func:`load_policy`, then the checks every learner's ``load`` needs before it reads the file's fields: the
    format tag is ``fmt`` (else :func:`wrong_policy_message`) and each of ``keys`` is present with a value of its
    type (:func:`require_policy_keys`).

    Returns:
        ``(policy, file)`` as :func:`load_policy`.

    Raises:
        ConfigError: the file is missing or unreadable, another format, or lacks a key (names the file and key).
    """
    ck, path = load_policy(path)
    if not isinstance(ck, dict) or ck.get("format") != fmt:
        raise ConfigError(wrong_policy_message(ck, fmt, learner), file=str(path))
    require_policy_keys(ck, keys, path, learner)
    return ck, path


def require_policy_keys(ck: dict, keys: dict[str, type | tuple[type, ...]], path: str | Path, learner: str) -> None:
    """Refuse a policy file with the right format tag whose fields are missing or of the wrong type (a file from
    another coopsim version, or a hand-edited one), naming the first such key, instead of a KeyError later.

    ``keys`` maps each required key to the type (or types) its value must have; ``bool`` never passes for ``int``.

    Raises:
        ConfigError: with ``file=path``.
    """
    for k, typ in keys.items():
        if k not in ck:
            raise ConfigError(f"{learner} policy file lacks key {k!r} (it has {', '.join(map(repr, ck)) or 'no keys'}); "
                              f"the file is damaged, hand-edited or from another coopsim version: use another "
                              f"checkpoint of the run (seed-<s>/policy.pt or checkpoint.pt), or train again",
                              file=str(path))
        v = ck[k]
        types = typ if isinstance(typ, tuple) else (typ,)
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            want = " or ".join(t.__name__ for t in types)
            raise ConfigError(f"{learner} policy file's key {k!r} holds a {type(v).__name__}, expected {want}; the "
                              f"file is damaged, hand-edited or from another coopsim version: use another checkpoint "
                              f"of the run (seed-<s>/policy.pt or checkpoint.pt), or train again", file=str(path))


def scenario_identity(scenario: Any) -> dict[str, Any]:
    """``{"id", "params"}`` of the scenario a policy is trained on, for its checkpoint: the registered id (the
    scenario's ``registry_id`` attribute if it has one, else the registry entry of its class, in its own package,
    whose fixed params it has: ``coop_game/Grid4x4-v0`` rather than the general id; None when none is found) and its
    params as JSON values (empty without a ``params`` model)."""
    p = getattr(scenario, "params", None)
    try:
        params = p.model_dump(mode="json") if hasattr(p, "model_dump") else {}
    except Exception:  # noqa: BLE001 - a param that JSON cannot hold: the id is what is compared
        params = {}
    sid = getattr(scenario, "registry_id", None)
    if not isinstance(sid, str):
        sid = _registered_id(type(scenario), p)
    return {"id": sid, "params": params}


def _registered_id(cls: type, params: Any) -> str | None:
    from coopsim.platform import registry
    from coopsim.platform.registry import Variant

    best: tuple[int, str] | None = None
    for s in registry.specs("scenario"):
        mod = s.entry_point.split(":")[0]
        if not (cls.__module__ == mod or cls.__module__.startswith(mod + ".")):
            continue
        try:
            f = s.load()
        except Exception:  # noqa: BLE001 - an optional scenario that cannot load is not this one
            continue
        if f is cls:
            score = 0
        elif isinstance(f, Variant) and f.cls is cls and all(
                getattr(params, k, None) == f.defaults.get(k) for k in f.fixed):
            score = len(f.fixed)
        else:
            continue
        if best is None or score > best[0]:
            best = (score, s.id)
    return best[1] if best else None


#: what each size a policy file records means, for :func:`policy_size_mismatch`
POLICY_SIZES = {"obs_dim": "observation width per agent", "in_dim": "agent network input width",
                "num_agents": "agents", "n_agents": "agents", "num_actions": "actions per agent",
                "n_actions": "actions per agent", "state_dim": "global state width",
                "q_shape": "Q table shape (horizon + 1, agents, cells, actions)",
                "model_shape": "count table shape (cells, actions, outcomes)"}


def warn_other_scenario(path: Any, trained_on: Any, this_run: dict | None) -> None:
    """Print a warning (stderr) when a policy file that fits this run's sizes was trained on another scenario id
    (``trained_on``: the file's ``scenario`` record as stored, ``{"id", "params"}``, anything else or None for an
    older file, which loads silently; ``this_run``: :meth:`~coopsim.platform.agent.AgentPlugin.trained_on`)."""
    import sys

    theirs = trained_on.get("id") if isinstance(trained_on, dict) else None
    ours = (this_run or {}).get("id")
    if theirs and ours and theirs != ours:
        print(f"warning: {path}: the policy was trained on scenario {theirs!r}; this run's scenario is {ours!r} "
              f"(same observation and action sizes, so it loads, but it need not do well here)", file=sys.stderr)


def policy_size_mismatch(size: str, theirs: Any, ours: Any, trained_on: dict | None, this_run: dict | None, *,
                         file: str | None = None) -> ConfigError:
    """The error for a policy file whose network sizes do not fit this run's scenario: names the size (what it
    means), the scenario id and the scenario params the policy was trained with where they differ from this run's,
    and the fix (evaluate with the training run's config.yaml, or train for this scenario).

    Args:
        size: the recorded size that differs (``obs_dim``, ``num_agents``, ...).
        theirs, ours: its value in the file and in this run.
        trained_on, this_run: ``{"id", "params"}`` of the two scenarios (the file's may be None: older files).

    Returns:
        a :class:`ConfigError` keyed ``scenario.id`` when the ids differ, ``scenario.params.<k>`` when one param
        differs, else the size's name.
    """
    what = POLICY_SIZES.get(size, size)
    msg = f"the policy does not fit this scenario: its {what} ({size}) is {theirs}, this run's is {ours}"
    key = size
    t, o = trained_on or {}, this_run or {}
    if t.get("id"):
        tp, op = t.get("params") or {}, o.get("params") or {}
        diff = [k for k in tp if k in op and tp[k] != op[k]]
        msg += f"; it was trained on {t['id']}"
        if diff:
            msg += " with " + ", ".join(f"scenario.params.{k}={tp[k]!r} (this run: {op[k]!r})" for k in diff[:6])
        if o.get("id") and o["id"] != t["id"]:
            msg += f", and this run's scenario is {o['id']}"
            key = "scenario.id"
        elif len(diff) == 1:
            key = f"scenario.params.{diff[0]}"
    msg += ("; use it with its training run's config.yaml (the same scenario id and params), or train a policy "
            "for this scenario")
    return ConfigError(msg, file=file, key=key)


def load_policy(path: str | Path) -> tuple[Any, Path]:
    """Read the policy an agent plugin's ``load`` restores from a ``policy.pt``, a training ``checkpoint.pt``
    (its ``"trainer"`` part's ``"policy"``) or a seed directory (see :func:`resolve_policy_path`).

    Returns:
        ``(policy, file)``: the saved policy object (the plugin checks its format) and the file read.

    Raises:
        ConfigError: the file is missing, unreadable, or a training checkpoint without a policy part.
    """
    path = resolve_policy_path(path)
    ck = load_checkpoint(path)
    if isinstance(ck, dict) and "trainer" in ck:  # a training checkpoint: its policy part
        trainer = ck["trainer"]
        if not isinstance(trainer, dict) or "policy" not in trainer:
            raise ConfigError(f"training checkpoint holds no policy (give the run's {POLICY_NAME})", file=str(path))
        ck = trainer["policy"]
    return ck, path


def capture_torch_rng() -> dict[str, Any]:
    return {"torch": torch.get_rng_state()}


def restore_torch_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])


# --- logging ------------------------------------------------------------------------------------

class MetricsLogger:
    """One row per iteration to ``metrics.csv`` (and TensorBoard scalars under ``tb/``).

    A metric first seen in a later row (e.g. episode metrics once the first episode ends) adds a column:
    the file is rewritten with the union of columns, earlier rows blank there. On resume, rows after
    ``resume_iteration`` are removed and TensorBoard purges events after it.
    """

    def __init__(self, run_dir: Path, *, tensorboard: bool = True, resume_iteration: int | None = None):
        self.path = run_dir / METRICS_CSV
        self.columns: list[str] | None = None
        if resume_iteration is not None and self.path.is_file():
            with open(self.path, newline="") as f:
                rows = list(csv.DictReader(f))
            keep = [r for r in rows if _int_or_none(r.get("iteration")) is not None
                    and int(r["iteration"]) <= resume_iteration]
            have = {int(r["iteration"]) for r in keep}
            lost = resume_iteration - len(have & set(range(1, resume_iteration + 1)))
            if lost > 0:  # the checkpoint is ahead of the log: say so, the earlier rows cannot be recovered
                import sys

                sys.stderr.write(f"warning: {self.path} holds {len(have)} of the {resume_iteration} iterations the "
                                 f"checkpoint has trained ({lost} rows missing or damaged); the resumed run's "
                                 f"curves will have that gap\n")
            if rows:
                self.columns = list(rows[0].keys())
                buf = io.StringIO()
                w = csv.DictWriter(buf, fieldnames=self.columns)
                w.writeheader()
                w.writerows(keep)
                atomic_write_text(self.path, buf.getvalue())
        elif resume_iteration:  # resumed, but the log is gone
            import sys

            sys.stderr.write(f"warning: {self.path} is missing: the {resume_iteration} iterations the checkpoint "
                             f"has trained have no rows; the resumed run's curves start at iteration "
                             f"{resume_iteration + 1}\n")
        elif self.path.exists():
            self.path.unlink()
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if resume_iteration is None else resume_iteration + 1
            self.tb = SummaryWriter(str(run_dir / "tb"), purge_step=purge)

    def log(self, iteration: int, env_steps: int, metrics: dict[str, float]) -> None:
        row = {"iteration": iteration, "env_steps": env_steps, **{k: float(v) for k, v in metrics.items()}}
        new = self.columns is None
        if new:
            self.columns = list(row.keys())
        extra = [k for k in row if k not in self.columns]
        if extra:  # rewrite with the new columns (rare: once per new metric name)
            with open(self.path, newline="") as f:
                old = list(csv.DictReader(f))
            self.columns += extra
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=self.columns, restval="")
            w.writeheader()
            w.writerows(old)
            atomic_write_text(self.path, buf.getvalue())
        with open(self.path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.columns, restval="")
            if new:
                w.writeheader()
            w.writerow(row)
        if self.tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(float(v)):
                    self.tb.add_scalar(k, float(v), global_step=env_steps)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.flush()
            self.tb.close()


def _int_or_none(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read_metrics(run_dir: str | Path, *, drop_wall: bool = True) -> list[dict[str, str]]:
    """Rows of ``metrics.csv`` (wall-clock columns removed unless ``drop_wall`` is False)."""
    with open(Path(run_dir) / METRICS_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    if drop_wall:
        for r in rows:
            for c in WALL_COLUMNS:
                r.pop(c, None)
    return rows


# --- the driver ---------------------------------------------------------------------------------

#: episode metrics the progress display averages over the finished episodes
PROGRESS_EPISODE_KEYS = ("episode/win", "episode/success", "episode/return")


def progress_info(metrics: dict[str, float], means: dict[str, list[float]], *, since_resume: bool = False) -> str:
    """The progress display's text after an iteration: running means of :data:`PROGRESS_EPISODE_KEYS` over the
    episodes finished so far (``means`` accumulates ``[weighted sum, episodes]`` per key; an iteration's value is
    its episodes' mean, weighted by its ``episodes`` metric, else 1), and the last policy loss, e.g.
    ``mean win=0.63 return=12.4 over 230 episodes, policy loss=-0.012`` (``since_resume``: "... episodes since the
    resume", for a resumed run whose earlier episodes are not in ``means``)."""
    w = float(metrics.get("episodes", 1.0))
    for k in PROGRESS_EPISODE_KEYS:
        v = metrics.get(k)
        if w > 0 and isinstance(v, (int, float)) and math.isfinite(float(v)):
            acc = means.setdefault(k, [0.0, 0.0])
            acc[0] += w * float(v)
            acc[1] += w
    parts = []
    if means:
        n = max(c for _, c in means.values())
        parts.append("mean " + " ".join(f"{k.split('/')[-1]}={s / c:.3g}" for k, (s, c) in means.items() if c)
                     + f" over {n:,.0f} episodes" + (" since the resume" if since_resume else ""))
    if isinstance(metrics.get("loss/policy"), (int, float)):
        parts.append(f"policy loss={metrics['loss/policy']:.3g}")
    return ", ".join(parts)


class _HeldSignals:
    """SIGINT and SIGTERM while :func:`fit` runs (main thread only): the first one is held until the running
    iteration ends, so the state at an iteration's end can be checkpointed; then it is delivered as it would have
    been (the handler installed before, e.g. Ctrl-C's ``KeyboardInterrupt``). A second one while an iteration runs
    (``urgent``) is delivered at once. A signal that was ignored stays ignored."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self) -> None:
        self.old: dict[int, Any] = {}
        self.pending: tuple[int, Any] | None = None
        self.urgent = False

    def __enter__(self) -> "_HeldSignals":
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self
        for name in self.SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            old = signal.getsignal(sig)
            if old is signal.SIG_IGN or old is None:
                continue
            self.old[sig] = old
            signal.signal(sig, self._hold)
        return self

    def _hold(self, signum: int, frame: Any) -> None:
        if self.pending is None:
            self.pending = (signum, frame)
            if self.urgent:
                os.write(2, b"\nstopping after this iteration to checkpoint it (a second Ctrl-C or SIGTERM stops now)\n")
            return
        if self.urgent:
            self.deliver()

    def restore(self) -> None:
        import signal

        for sig, old in self.old.items():
            signal.signal(sig, old)
        self.old = {}

    def deliver(self) -> None:
        """Restore the handlers and deliver the held signal (raises, e.g. ``KeyboardInterrupt``); no-op if none."""
        import signal

        old = dict(self.old)
        self.restore()
        if self.pending is None:
            return
        signum, frame = self.pending
        self.pending = None
        handler = old.get(signum, signal.SIG_DFL)
        if callable(handler):
            handler(signum, frame)
        else:  # SIG_DFL: the default action (e.g. SIGTERM ends the process) now that the checkpoint is written
            os.kill(os.getpid(), signum)

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.deliver()  # a signal held during the final writes: deliver it now that they are done
        else:
            self.restore()


def fit(
    trainer: Trainer,
    schedule: TrainSchedule,
    run_dir: str | Path,
    *,
    resume: bool = False,
    description: str = "train",
    on_iteration: Callable[[Trainer, dict[str, float]], bool] | None = None,
) -> dict[str, Any]:
    """Run ``trainer`` until ``schedule.total_env_steps``; log, checkpoint, and write the summary.

    Args:
        trainer: the learner.
        schedule: budget, checkpoint interval, threads, logging switches.
        run_dir: directory of this training (created); holds ``metrics.csv``, ``tb/``,
            ``checkpoint.pt`` (latest, atomic), ``policy.pt`` (final policy) and ``train_summary.json``.
        resume: continue from ``run_dir/checkpoint.pt`` (exactly: the trainer restores its state and the
            logs are truncated to the checkpoint's iteration).
        on_iteration: called after each logged iteration; returning True stops training early (the
            summary then says ``stopped_early``).

    Returns:
        The summary dict written to ``train_summary.json`` (budget, steps done, wall time, last metrics).

    Raises:
        ConfigError: ``resume`` but no checkpoint in ``run_dir``.
        TrainingDiverged: the trainer met a nan or inf (its message, plus the checkpoint kept: the last one written,
            whose state is finite; no policy file is written).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with _HeldSignals() as held:
        return _fit(trainer, schedule, run_dir, held, resume=resume, description=description, on_iteration=on_iteration)


def _fit(trainer: Trainer, schedule: TrainSchedule, run_dir: Path, held: _HeldSignals, *, resume: bool,
         description: str, on_iteration: Callable[[Trainer, dict[str, float]], bool] | None) -> dict[str, Any]:
    torch.set_num_threads(schedule.torch_threads)
    ckpt_path = run_dir / CHECKPOINT_NAME
    wall_before = 0.0
    resume_iteration = None
    if resume:
        ckpt = load_checkpoint(ckpt_path)
        trainer.load_state_dict(ckpt["trainer"])
        restore_torch_rng(ckpt["rng"])
        wall_before = float(ckpt.get("wall_s", 0.0))
        resume_iteration = trainer.iteration
    logger = MetricsLogger(run_dir, tensorboard=schedule.tensorboard, resume_iteration=resume_iteration)
    t0 = time.perf_counter()
    last_ckpt_steps = trainer.env_steps
    metrics: dict[str, float] = {}
    stopped_early = False

    def state() -> dict[str, Any]:
        return {"trainer": trainer.state_dict(), "rng": capture_torch_rng(),
                "wall_s": wall_before + time.perf_counter() - t0, "env_steps": int(trainer.env_steps)}

    saved_steps = int(trainer.env_steps)  # the env steps ckpt_path holds

    def checkpoint() -> None:
        nonlocal saved_steps
        atomic_save(state(), ckpt_path)
        saved_steps = int(trainer.env_steps)

    if not resume:  # what an interrupt keeps when a second Ctrl-C stops the first iteration: the state before it
        checkpoint()  # (a resumed run has its checkpoint on disk already)

    def stop_if_signalled() -> None:
        """A held SIGINT/SIGTERM: checkpoint the state at the end of the last completed iteration (what the periodic
        checkpoint holds, so --resume continues exactly), then deliver the signal (raises)."""
        if held.pending is not None:
            checkpoint()
            held.deliver()

    progress = None
    episode_means: dict[str, list[float]] = {}  # running means of the progress display (this session's episodes)
    if schedule.progress:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

        from coopsim.platform.progress import make_progress

        # plain lines instead of a bar when stdout is not a terminal (a log file, a pipe)
        progress = make_progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), TextColumn("{task.fields[info]}"), unit="env steps",
                                 info_field="info")
        resumed_at = trainer.env_steps
        task = progress.add_task(description, total=schedule.total_env_steps, completed=trainer.env_steps, info="")
        progress.start()
    try:
        stop_if_signalled()
        while trainer.env_steps < schedule.total_env_steps:
            it_t0 = time.perf_counter()
            steps0 = trainer.env_steps
            held.urgent = True  # a second signal while the iteration runs stops it at once
            metrics = dict(trainer.train_iteration())
            held.urgent = False
            dt = time.perf_counter() - it_t0
            metrics["time/wall_s"] = wall_before + time.perf_counter() - t0
            metrics["time/env_steps_per_s"] = (trainer.env_steps - steps0) / max(dt, 1e-9)
            logger.log(trainer.iteration, trainer.env_steps, metrics)
            if progress is not None:
                # the last iteration may overshoot the budget (whole iterations): the bar then shows the steps
                # actually trained, e.g. 512/512 for a budget of 1, never 1/1 or 512/1
                progress.update(task, total=max(schedule.total_env_steps, trainer.env_steps),
                                completed=trainer.env_steps,
                                info=progress_info(metrics, episode_means, since_resume=resumed_at > 0))
            if on_iteration is not None:
                held.urgent = True
                stop = on_iteration(trainer, metrics)
                held.urgent = False
                if stop:
                    stopped_early = True
                    break
            stop_if_signalled()
            if schedule.checkpoint_every and trainer.env_steps - last_ckpt_steps >= schedule.checkpoint_every:
                checkpoint()
                last_ckpt_steps = trainer.env_steps
        checkpoint()
        trainer.save_policy(run_dir / POLICY_NAME)
    except TrainingDiverged as exc:  # a nan or inf stopped the iteration before its optimizer step: say what is kept
        raise TrainingDiverged(f"{exc.message}; kept: {ckpt_path} at {saved_steps:,} env steps (the last finite "
                               f"state); no {POLICY_NAME} was written by this training", key=exc.key,
                               iteration=exc.iteration) from None
    except KeyboardInterrupt as exc:
        # what the interrupt kept, for the caller's message: (checkpoint file, its env steps); a second signal that
        # stops an iteration at once keeps the last checkpoint, at worst the one written before the first iteration
        exc.checkpoint = (ckpt_path, saved_steps)
        raise
    finally:
        held.urgent = False
        if progress is not None:
            progress.stop()
        logger.close()
    summary = {
        "total_env_steps_budget": schedule.total_env_steps,
        "env_steps": trainer.env_steps,
        "iterations": trainer.iteration,
        "wall_time_s": wall_before + time.perf_counter() - t0,
        "torch_threads": schedule.torch_threads,
        "stopped_early": stopped_early,
        "resumed": bool(resume),
        "final_metrics": {k: v for k, v in metrics.items() if k not in WALL_COLUMNS},
        "policy": str(run_dir / POLICY_NAME),
    }
    atomic_write_json(run_dir / SUMMARY_NAME, summary, indent=2, sort_keys=True)
    return summary
