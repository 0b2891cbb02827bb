"""One error hierarchy for coopsim (after Gymnasium's ``error.py``).

Every error a user can cause by input (a config, a map file, a registry id, a missing optional
dependency) is a :class:`CoopsimError`; the CLI prints its message and exits with code 2, never a
traceback. Messages name the file, the key or line, the bad value, and what would be valid.
"""
from __future__ import annotations

import contextlib


class CoopsimError(Exception):
    """Base class of every error coopsim raises on purpose."""


def short_repr(value: object, limit: int = 200) -> str:
    """``repr(value)`` cut to about ``limit`` characters for an error message (a long list given where a number goes
    is shown by its start, its length and its type), without building the full repr of a huge value."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 8, 8, 8, 8
    r.maxstring, r.maxlong, r.maxother = limit, 60, limit
    text = r.repr(value)
    if len(text) > limit:
        text = text[:limit] + "..."
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 8:
        text += f" ({type(value).__name__} of {len(value):,})"
    return text


def value_text(value: object, limit: int = 200) -> str:
    """``value`` for an error message as a config (YAML) writes it: ``null``, ``true`` / ``false`` (not Python's
    None, True, False), a short list of such scalars as ``[true, 32]``; anything else as :func:`short_repr` (``0.5``,
    ``'abc'``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if (isinstance(value, list) and len(value) <= 8
            and all(x is None or isinstance(x, (bool, int, float, str)) for x in value)):
        text = "[" + ", ".join(value_text(x, limit) for x in value) + "]"
        if len(text) <= limit:
            return text
    return short_repr(value, limit)


class ConfigError(CoopsimError, ValueError):
    """A run configuration (YAML file or override) is invalid.

    Args:
        message: what is wrong and what would be valid.
        file: the config file, if any.
        key: dotted key path, e.g. ``scenario.params.num_agents``.
        value: the offending value.
        also: other keys the error involves (a check across keys, e.g. ``agents.params.recurrent`` beside
            ``agents.params.actor``), so the command-line override that set one of them can be blamed.
    """

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None, value: object = None,
                 also: tuple[str, ...] = ()):
        self.file, self.key, self.value, self.message, self.also = file, key, value, message, tuple(also)
        where = []
        if file:
            where.append(str(file))
        if key:
            where.append(f"key '{key}'")
        prefix = (": ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class CrossKeyError(ValueError):
    """A refusal by a check across keys, raised in a pydantic validator: ``also`` names the other keys of the same
    params that it involves (``max_growth`` for ``startup_growth``), which
    :func:`~coopsim.platform.registry.pydantic_to_config_error` passes on as :attr:`ConfigError.also`, so that the
    command-line override that set one of them is named (``coopsim validate``, ``coopsim run``)."""

    def __init__(self, message: str, also: tuple[str, ...]):
        super().__init__(message)
        self.also = tuple(also)

    def join(self, later: list["CrossKeyError"]) -> str | None:
        """One message for this refusal and ``later``, the refusals of later keys of the same params by the same
        check (of this class, in pydantic's order), so that they are named at once rather than one per attempt;
        None (the default) names this key alone."""
        return None


def in_file(exc: ConfigError, file: str | None) -> ConfigError:
    """``exc`` with ``file`` named when it names no file yet (an error raised while a component was built from
    a config, where the component knows the key but not the file), of ``exc``'s own class; ``exc`` itself
    otherwise."""
    if exc.file or not file:
        return exc
    return type(exc)(exc.message, file=file, key=exc.key, value=exc.value, also=getattr(exc, "also", ()))


class MapFormatError(CoopsimError, ValueError):
    """A MovingAI ``.map`` or ``.scen`` file is malformed; the message names the file and line."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None):
        self.file, self.line = file, line
        where = str(file) if file else "<input>"
        if line is not None:
            where += f", line {line}"
        super().__init__(f"{where}: {message}")


class RegistryError(CoopsimError, KeyError):
    """An id is not in the registry; the message lists the registered ids."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DependencyNotInstalled(CoopsimError, ImportError):
    """An optional dependency is missing; the message says how to install it."""


class ScenarioCheckError(CoopsimError, AssertionError):
    """Raised by :func:`coopsim.testing.check_scenario` when a scenario breaks its contract."""


class TrainingDiverged(CoopsimError, FloatingPointError):
    """Training met a nan or inf: a hook's bonus or loss, the PPO loss, or its gradient. The trainer stops before the
    value reaches the weights, so the run's last checkpoint holds the last finite state and no policy file is written.

    Args:
        message: what was not finite, where (the hook's config key, e.g. ``train.intrinsic``, or "the PPO loss") and
            in which iteration.
        key: the hook's config key (None for the PPO loss itself).
        iteration: the training iteration (1-based) that met it.
    """

    def __init__(self, message: str, *, key: str | None = None, iteration: int | None = None):
        self.message, self.key, self.iteration = message, key, iteration
        super().__init__(message)


class ChannelError(CoopsimError, RuntimeError):
    """A channel backend failed (e.g. the ns-3 child process died or timed out)."""


def whole_number(text: str) -> int | None:
    """The integer ``text`` writes, as an integer (``"2000000"``) or in scientific notation with a whole value
    (``"2e6"``, ``"1.5e3"``, as ``train.total_env_steps=2e6`` is read); None for anything else (``"1.5"``, ``"abc"``,
    ``"nan"``, ``"inf"``). Raises nothing."""
    try:
        return int(text)
    except ValueError:
        pass
    t = text.strip().lower()
    if "e" not in t:
        return None
    try:
        x = float(t)
    except ValueError:
        return None
    return int(x) if x == x and abs(x) < 2**63 and x.is_integer() else None


def int_at_least(minimum: int):
    """An ``argparse`` ``type=`` that accepts integers >= ``minimum`` (``2e6`` too: :func:`whole_number`) and
    otherwise makes argparse print
    ``argument --x: invalid value '-1': an integer >= 1 is required`` and exit 2."""
    import argparse

    def parse(text: str) -> int:
        v = whole_number(text)  # 2e6 as train.total_env_steps=2e6 reads it
        if v is None or v < minimum:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: an integer >= {minimum} is required")
        return v

    parse.__name__ = f"integer >= {minimum}"
    return parse


def int_in_range(low: int, high: int):
    """An ``argparse`` ``type=`` that accepts integers in ``low..high`` and otherwise makes argparse print
    ``argument --x: invalid value '0': an integer in 1..65536 is required`` and exit 2 (for counts that size an
    allocation, or seeds that must fit a 32-bit generator)."""
    import argparse

    def parse(text: str) -> int:
        v = whole_number(text)
        if v is None or not low <= v <= high:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: an integer in {low}..{high} is required")
        return v

    parse.__name__ = f"integer in {low}..{high}"
    return parse


def float_at_least(minimum: float, *, exclusive: bool = False):
    """An ``argparse`` ``type=`` that accepts finite numbers >= ``minimum`` (> ``minimum`` with ``exclusive``, e.g.
    ``float_at_least(0, exclusive=True)`` for a positive duration) and otherwise makes argparse print ``argument
    --x: invalid value '0': a number > 0 is required`` and exit 2 (``nan`` and ``inf`` are refused too)."""
    import argparse
    import math

    need = f"a number {'>' if exclusive else '>='} {minimum:g}"

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {need} is required") from None
        if not math.isfinite(v) or v < minimum or (exclusive and v == minimum):
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {need} is required")
        return v

    parse.__name__ = need
    return parse


#: what an interrupted script keeps, unless it says more (``run_script(kept=...)``): the writers of
#: :mod:`coopsim.platform.recorder` write every file whole or not at all
KEPT_DEFAULT = "what it printed and the files it had written (each whole: none is left half-written)"


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a job scheduler) raised where Ctrl-C would be, so a command keeps what it finished
    the same way (:func:`sigterm_as_interrupt`)."""


class HungUp(Terminated):
    """SIGHUP (the terminal closed, an ssh session dropped) raised where Ctrl-C would be (:func:`sigterm_as_interrupt`):
    a command keeps what it finished, and exits with 129 (the shell's 128 + 1)."""


@contextlib.contextmanager
def sigterm_as_interrupt(on_term=None):
    """Within the block, the first SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) where it lands, after
    calling ``on_term()`` if given; later ones are ignored so the summary write finishes. SIGHUP the same
    (:class:`HungUp`), unless it was ignored when the block began (``nohup``: it stays ignored). Outside the main thread
    (a test runner's worker) both are left alone. The ``coopsim`` CLI and :func:`run_script` use it."""
    import signal

    def handler(signum, frame):
        if on_term is not None:
            on_term()
        for sig in sigs:
            signal.signal(sig, signal.SIG_IGN)
        raise HungUp() if signum == signal.SIGHUP else Terminated()

    sigs = [signal.SIGTERM]
    try:
        old = {signal.SIGTERM: signal.signal(signal.SIGTERM, handler)}
        if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
            sigs.append(signal.SIGHUP)
            old[signal.SIGHUP] = signal.signal(signal.SIGHUP, handler)
    except ValueError:  # not the main thread: leave SIGTERM and SIGHUP alone
        yield
        return
    try:
        yield
    finally:
        for sig, handler_ in old.items():
            signal.signal(sig, handler_)


def run_script(main, argv=None, *, kept=None):
    """Run a module's ``main(argv)`` (or ``main()``, if it takes no argument) as the CLI does: a :class:`CoopsimError`
    prints its message to stderr and exits with code 2 (no traceback), as does a pydantic ``ValidationError`` of a
    component's parameters (one line per error, naming the key); Ctrl-C prints one line, ``interrupted; kept:
    <kept>``, and exits with 130; SIGTERM the same (``terminated; kept: <kept>``, exit 143: the shell's 128 + 15), and
    SIGHUP (``hung up; kept: <kept>``, exit 129) unless it was ignored (``nohup``). For
    ``python -m coopsim.<...>`` and benchmark scripts.

    Args:
        kept: what the script has written when it is interrupted (a string, or a function returning one, called
            then); default :data:`KEPT_DEFAULT`.
    """
    import inspect
    import sys

    from pydantic import ValidationError

    import signal

    try:
        try:
            takes_args = bool(inspect.signature(main).parameters)
        except (TypeError, ValueError):  # a builtin or C callable: give it argv
            takes_args = True
        with sigterm_as_interrupt():
            return main(argv) if takes_args or argv is not None else main()
    except CoopsimError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except ValidationError as e:  # parameters of a component built directly by the script
        for err in e.errors():
            key = ".".join(str(x) for x in err.get("loc", ()))
            print(f"error: {e.title}: key {key!r}: {err.get('msg')}", file=sys.stderr)
        raise SystemExit(2) from None
    except BrokenPipeError:  # stdout piped into a reader that stopped (e.g. `| head`): not an error of the script
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes stdout
        raise SystemExit(141) from None  # the shell's 128 + SIGPIPE
    except KeyboardInterrupt as e:
        term = isinstance(e, Terminated)
        if term:
            try:  # a second signal now must not swallow the line below
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            except ValueError:  # not the main thread
                pass
        what = kept() if callable(kept) else kept
        hup = isinstance(e, HungUp)
        print(f"{'hung up' if hup else 'terminated' if term else 'interrupted'}; kept: {what or KEPT_DEFAULT}",
              file=sys.stderr)
        raise SystemExit(129 if hup else 143 if term else 130) from None
