"""Capacity traces: per-sender link capacity (bit/s) over time, for the bandwidth channel.

A trace is a pydantic schema (``kind`` selects it) whose :meth:`sample` returns the capacity of every
sender at every step, float64 ``[T, E, N]`` (bit/s), piecewise constant over each step of ``dt_s``.
Values are multiplied by ``scale_bps`` so a trace can be written as fractions of a reference rate
(e.g. the full-broadcast demand). Random traces (Markov-modulated) draw from the generator they are
given, one independent chain per (env, sender).

Kinds:
    ``constant``: ``rate`` at all times.
    ``step``: ``high`` until ``drop_at_s``, ``low`` until ``recover_at_s``, then ``high`` again.
    ``sinusoid``: ``mean + amplitude * sin(2 pi t / period_s + phase_rad)``, clipped at 0.
    ``markov``: a Markov chain over ``levels`` with per-step switching probability ``switch_prob``
        (a switch moves to one of the other levels uniformly), started at a uniform level
        (or ``start_level``); the Markov-modulated capacity of trace-driven network emulation.
    ``csv``: a UTF-8 file (a byte-order mark, as Excel writes, is allowed) with header ``time_s,rate`` (one rate
        for all senders) or ``time_s,rate_0,...,rate_{N-1}`` (one per sender, named so and in this order: another
        header is refused, as columns are taken by position); the rate at time t is the last row
        with ``time_s <= t`` (and the first row before it). Times must be finite and increasing.

Every rate (a trace's own values, ``scale_bps``, every CSV value, and each value times ``scale_bps``) must be a
finite number in ``[0, MAX_RATE_BPS]`` (1e12 bit/s = 1 Tbit/s): the bandwidth channel serves
``rate * dt`` bit-microseconds per step in int64 arithmetic (at most about 9.2e18), which 1e12 bit/s keeps
exact for steps of up to 4.6 s with a factor-2 margin.
"""
from __future__ import annotations

from abc import abstractmethod

import codecs
import csv
import io
import math
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Optional, Union

import numpy as np
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, WrapValidator, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from coopsim.errors import ConfigError

#: largest capacity (bit/s) a trace may give, after ``scale_bps``: 1 Tbit/s (see the module docstring)
MAX_RATE_BPS = 1e12
#: what a valid rate is, for error messages
VALID_RATE = "a finite number of bit/s in [0, 1e12] (1 Tbit/s, the most the bandwidth channel's int64 arithmetic takes)"


def _check_rate(v: float, what: str = "rate") -> float:
    """``v`` if it is a valid rate (finite, in ``[0, MAX_RATE_BPS]``); otherwise a ValueError saying what is valid."""
    if not (math.isfinite(v) and 0 <= v <= MAX_RATE_BPS):
        raise ValueError(f"{what} must be {VALID_RATE}")
    return v


def _check_finite(v: float, what: str) -> float:
    if not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number (not nan or inf)")
    return v


class _Trace(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale_bps: float = Field(1.0, description="multiplier applied to every value (bit/s per unit), "
                                              "a finite number in (0, 1e12]")

    @field_validator("scale_bps")
    @classmethod
    def _scale_ok(cls, v):
        if not (math.isfinite(v) and 0 < v <= MAX_RATE_BPS):
            raise ValueError("scale_bps must be a finite number in (0, 1e12]; every rate times scale_bps must be "
                             "at most 1e12 bit/s")
        return v

    def _peak(self) -> tuple[float, str] | None:
        """The largest unscaled value the trace can give and the key(s) it comes from (None: known only on load)."""
        return None

    @model_validator(mode="after")
    def _scaled_peak_ok(self):
        peak = self._peak()
        if peak is not None and peak[0] * self.scale_bps > MAX_RATE_BPS:
            raise ValueError(f"{peak[1]} = {peak[0]:g} times scale_bps = {self.scale_bps:g} is "
                             f"{peak[0] * self.scale_bps:g} bit/s; every rate after scale_bps must be {VALID_RATE}")
        return self

    def check(self) -> None:
        """Check what the schema cannot (a CSV file's contents); raises :class:`ConfigError`. Nothing by default."""

    def sample(self, num_steps: int, num_envs: int, num_agents: int, dt_s: float,
               rng: np.random.Generator | None = None) -> np.ndarray:
        """float64 ``[num_steps, num_envs, num_agents]`` capacity (bit/s) at steps ``0..num_steps-1``."""
        t_s = np.arange(num_steps, dtype=np.float64) * dt_s
        base = self._values(t_s, num_envs, num_agents, rng)
        base = np.broadcast_to(base, (num_steps, num_envs, num_agents))
        return np.maximum(base * self.scale_bps, 0.0).astype(np.float64)

    @abstractmethod
    def _values(self, t_s, num_envs, num_agents, rng):
        """Unscaled capacity values broadcastable to ``[num_steps, num_envs, num_agents]``."""


class ConstantTrace(_Trace):
    kind: Literal["constant"] = "constant"
    rate: float = Field(..., description="capacity (bit/s before scale_bps), a finite number in [0, 1e12]")

    @field_validator("rate")
    @classmethod
    def _rate_ok(cls, v):
        return _check_rate(v, "rate")

    def _peak(self):
        return self.rate, "rate"

    def _values(self, t_s, e, n, rng):
        return np.full((len(t_s), 1, 1), self.rate)


class StepTrace(_Trace):
    kind: Literal["step"] = "step"
    high: float = Field(..., description="capacity before the drop and after recovery (bit/s before scale), in [0, 1e12]")
    low: float = Field(..., description="capacity during the drop (bit/s before scale), in [0, 1e12]")
    drop_at_s: float = Field(..., ge=0, description="time the drop starts (s), a finite number >= 0")
    recover_at_s: float = Field(float("inf"), description="time capacity recovers (s), > drop_at_s; inf = never")

    @field_validator("high", "low")
    @classmethod
    def _rates_ok(cls, v, info):
        return _check_rate(v, info.field_name)

    @field_validator("drop_at_s")
    @classmethod
    def _drop_ok(cls, v):
        return _check_finite(v, "drop_at_s")

    @field_validator("recover_at_s")
    @classmethod
    def _recover_ok(cls, v):
        if math.isnan(v):
            raise ValueError("recover_at_s must be a number of seconds > drop_at_s, or inf (never); not nan")
        return v

    @model_validator(mode="after")
    def _order(self):
        if self.recover_at_s <= self.drop_at_s:
            raise ValueError(f"recover_at_s ({self.recover_at_s}) must be > drop_at_s ({self.drop_at_s})")
        return self

    def _peak(self):
        return (self.high, "high") if self.high >= self.low else (self.low, "low")

    def _values(self, t_s, e, n, rng):
        eps = 1e-9
        low = (t_s + eps >= self.drop_at_s) & (t_s + eps < self.recover_at_s)
        return np.where(low, self.low, self.high)[:, None, None]


class SinusoidTrace(_Trace):
    kind: Literal["sinusoid"] = "sinusoid"
    mean: float = Field(..., description="mean capacity (bit/s before scale), in [0, 1e12]")
    amplitude: float = Field(..., description="amplitude (bit/s before scale), in [0, 1e12]; values are clipped at 0")
    period_s: float = Field(..., gt=0, description="period (s), a finite number > 0")
    phase_rad: float = Field(0.0, description="phase (rad), a finite number")

    @field_validator("mean", "amplitude")
    @classmethod
    def _rates_ok(cls, v, info):
        return _check_rate(v, info.field_name)

    @field_validator("period_s", "phase_rad")
    @classmethod
    def _finite(cls, v, info):
        return _check_finite(v, info.field_name)

    def _peak(self):
        return self.mean + self.amplitude, "mean + amplitude"

    def _values(self, t_s, e, n, rng):
        return (self.mean + self.amplitude * np.sin(2 * np.pi * t_s / self.period_s + self.phase_rad))[:, None, None]


class MarkovTrace(_Trace):
    kind: Literal["markov"] = "markov"
    levels: list[float] = Field(..., min_length=2, description="capacity levels (bit/s before scale), each in "
                                                               "[0, 1e12], at least 2")
    switch_prob: float = Field(..., ge=0, le=1, description="per-step probability of leaving the current level, in [0, 1]")
    start_level: Optional[int] = Field(None, ge=0, description="index of the start level (None: uniform random)")
    shared: bool = Field(False, description="one chain per env shared by all its senders (True) or one per sender")

    @field_validator("levels")
    @classmethod
    def _nonneg(cls, v):
        for i, x in enumerate(v):
            _check_rate(x, f"levels[{i}] ({x!r})")
        return v

    @model_validator(mode="after")
    def _start_in_range(self):
        if self.start_level is not None and self.start_level >= len(self.levels):
            raise ValueError(f"start_level {self.start_level} out of range [0, {len(self.levels) - 1}] "
                             f"(an index into the {len(self.levels)} levels)")
        return self

    def _peak(self):
        i = int(np.argmax(self.levels))
        return self.levels[i], f"levels[{i}]"

    def _values(self, t_s, e, n, rng):
        if rng is None:
            raise ValueError("a markov trace needs a random generator")
        k = len(self.levels)
        cols = 1 if self.shared else n
        T = len(t_s)
        state = np.empty((T, e, cols), np.int64)
        if self.start_level is not None:
            if self.start_level >= k:
                raise ValueError(f"start_level {self.start_level} out of range [0, {k - 1}]")
            state[0] = self.start_level
        else:
            state[0] = rng.integers(k, size=(e, cols))
        switch = rng.random((T, e, cols)) < self.switch_prob
        jump = rng.integers(1, k, size=(T, e, cols))  # move to one of the other k-1 levels
        # a switch moves by jump (1..k-1) modulo k, so the chain is the running sum of the moves
        moves = np.where(switch, jump, 0)
        moves[0] = 0
        state = (state[0][None] + np.cumsum(moves, axis=0)) % k
        return np.asarray(self.levels, np.float64)[state]


class CsvTrace(_Trace):
    kind: Literal["csv"] = "csv"
    path: str = Field(..., description="UTF-8 CSV file with header time_s,rate or time_s,rate_0,...,rate_{N-1}; "
                                       "times finite and increasing, rates in [0, 1e12] bit/s after scale_bps; "
                                       "a row's rate holds until the next row's time (the first row's also before "
                                       "its time, the last row's after it); "
                                       "in a run config a relative path is found in the working folder or beside "
                                       "the config", json_schema_extra={"file": True})

    def check(self) -> None:
        """Load the file once (as :meth:`load`), so a bad file fails when the channel is built, not at reset."""
        self.load()

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        """Return (time_s float64 [R], rates float64 [R, C]).

        Raises:
            ConfigError: missing or unreadable file, not UTF-8, bad header, non-numeric values, times not finite or
                not increasing, rates not finite, negative or above :data:`MAX_RATE_BPS` (after ``scale_bps``).
        """
        p = Path(self.path)
        f = str(p)
        if not p.is_file():
            rel = "" if p.is_absolute() else (f" (a relative path in a run config is looked for in the working directory "
                                              f"{Path.cwd()}, then beside the config)")
            what = ("is a directory, not a CSV file" if p.is_dir() else "is not a regular file" if p.exists()
                    else "not found")
            raise ConfigError(f"capacity trace file {what}: {p}{rel}", file=f, key="trace.path", value=self.path)
        try:
            data = p.read_bytes()
        except OSError as e:
            raise ConfigError(f"cannot read the capacity trace: {e.strerror or e}", file=f, key="trace.path",
                              value=self.path) from None
        if data.startswith(codecs.BOM_UTF8):  # Excel's "CSV UTF-8" starts with a byte-order mark
            data = data[len(codecs.BOM_UTF8):]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise ConfigError(f"line {line}: byte 0x{data[e.start]:02x} is not UTF-8 text; a capacity trace must be "
                              "a UTF-8 CSV file (header time_s,rate)", file=f, key="trace.path",
                              value=self.path) from None
        try:
            rows = list(csv.reader(io.StringIO(text, newline="")))
        except csv.Error as e:
            raise ConfigError(f"not a valid CSV file: {e}", file=f, key="trace.path", value=self.path) from None
        header = rows[0] if rows else []
        if len(header) < 2 or header[0].strip() != "time_s":
            raise ConfigError(f"line 1: header must be 'time_s,rate' or 'time_s,rate_0,...'; got {','.join(header)!r}",
                              file=f, key="trace.path")
        names = [c.strip() for c in header]
        want = [f"rate_{i}" for i in range(len(names) - 1)]
        if names[1:] == ["rate"]:  # one rate for all senders (a single rate_0 is taken as that too)
            want = ["rate"]
        if names[1:] != want:  # columns are taken by position: a reordered or misnamed one would feed the wrong sender
            bad = next(i for i, (g, w) in enumerate(zip(names[1:], want)) if g != w)
            raise ConfigError(f"line 1: rate column {bad + 2} is named {names[bad + 1]!r}, expected {want[bad]!r}: the "
                              f"header must be 'time_s,rate' (one rate for all senders) or 'time_s,rate_0,...,"
                              f"rate_{{N-1}}' in this order (sender i's rate in column rate_i); got {','.join(names)!r}",
                              file=f, key="trace.path")
        times, rates = [], []
        for lineno, row in enumerate(rows[1:], start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise ConfigError(f"line {lineno}: expected {len(header)} columns, got {len(row)}", file=f, key="trace.path")
            vals = []
            for name, cell in zip(names, row):
                try:
                    vals.append(float(cell))
                except ValueError:
                    raise ConfigError(f"line {lineno}: non-numeric value {cell.strip()!r} in column {name!r} "
                                      f"(row {row!r})", file=f, key="trace.path", value=cell) from None
            if not math.isfinite(vals[0]):
                raise ConfigError(f"line {lineno}: time_s {row[0].strip()!r} must be a finite number of seconds",
                                  file=f, key="trace.path", value=row[0])
            for name, cell, x in zip(names[1:], row[1:], vals[1:]):
                if not (math.isfinite(x) and 0 <= x <= MAX_RATE_BPS):
                    raise ConfigError(f"line {lineno}: column {name!r}: invalid rate {cell.strip()!r}: must be "
                                      f"{VALID_RATE}", file=f, key="trace.path", value=cell)
                if x * self.scale_bps > MAX_RATE_BPS:
                    raise ConfigError(f"line {lineno}: column {name!r}: rate {cell.strip()!r} times scale_bps "
                                      f"{self.scale_bps:g} is {x * self.scale_bps:g} bit/s; every rate after "
                                      f"scale_bps must be {VALID_RATE}", file=f, key="trace.path", value=cell)
            if times and vals[0] <= times[-1]:
                raise ConfigError(f"line {lineno}: time_s {vals[0]} not after the previous {times[-1]} "
                                  "(times must increase)", file=f, key="trace.path", value=row[0])
            times.append(vals[0])
            rates.append(vals[1:])
        if not times:
            raise ConfigError("no data rows (after the header time_s,rate)", file=f, key="trace.path")
        return np.asarray(times), np.asarray(rates)

    def _values(self, t_s, e, n, rng):
        times, rates = self.load()
        if rates.shape[1] not in (1, n):
            raise ConfigError(f"{rates.shape[1]} rate columns; need 1 or num_agents={n}", file=self.path,
                              key="trace.path")
        idx = np.clip(np.searchsorted(times, t_s + 1e-9, side="right") - 1, 0, len(times) - 1)
        return rates[idx][:, None, :]


_KINDS: dict[str, type[_Trace]] = {"constant": ConstantTrace, "step": StepTrace, "sinusoid": SinusoidTrace,
                                   "markov": MarkovTrace, "csv": CsvTrace}
#: the valid values of a trace's ``kind``, for error messages
KINDS_TEXT = ", ".join(_KINDS)


def _validate_trace(value: Any, handler) -> _Trace:
    """Validate a trace by its ``kind``, with error locations as in the YAML (``trace.rate``, not pydantic's
    ``trace.constant.rate``), and a message naming the valid kinds when ``kind`` is missing or unknown."""
    if isinstance(value, tuple(_KINDS.values())):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"a trace must be a mapping with a 'kind' ({KINDS_TEXT}), e.g. {{kind: constant, rate: 1e6}}")
    if "kind" not in value:
        raise ValueError(f"missing key 'kind': a trace needs kind: one of {KINDS_TEXT}")
    kind = value["kind"]
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown trace kind {kind!r}; valid kinds: {KINDS_TEXT}")
    try:
        return cls.model_validate(dict(value))
    except ValidationError as exc:
        errs = exc.errors()
        extra = [e for e in errs if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
        if not extra:
            raise
        # an unknown key first (a misspelled key is also a missing one), with the valid keys of this kind
        import difflib

        line_errors = []
        for e in extra:
            key = str(e["loc"][0])
            close = difflib.get_close_matches(key, list(cls.model_fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            line_errors.append({"type": PydanticCustomError(
                "unknown_trace_key", "unknown key {key} of a {kind} trace{hint}; valid keys: {valid}",
                {"key": repr(key), "kind": repr(kind), "hint": hint, "valid": ", ".join(cls.model_fields)}),
                "loc": e["loc"], "input": e["input"]})
        for e in errs:
            if e not in extra:
                line_errors.append({k: e[k] for k in ("type", "loc", "input", "ctx") if k in e})
        raise ValidationError.from_exception_data(exc.title, line_errors) from None


Trace = Annotated[Union[ConstantTrace, StepTrace, SinusoidTrace, MarkovTrace, CsvTrace], Field(discriminator="kind"),
                  WrapValidator(_validate_trace)]
