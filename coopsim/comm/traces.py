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
    ``csv``: a file with header ``time_s,rate`` (one rate for all senders) or ``time_s,rate_0,...,rate_{N-1}``
        (one per sender); the rate at time t is the last row with ``time_s <= t`` (and the first row before it).
"""
from __future__ import annotations

from abc import abstractmethod

import csv
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from coopsim.errors import ConfigError


class _Trace(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale_bps: float = Field(1.0, gt=0, description="multiplier applied to every value (bit/s per unit), > 0")

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
    rate: float = Field(..., ge=0, description="capacity (bit/s before scale_bps), >= 0")

    def _values(self, t_s, e, n, rng):
        return np.full((len(t_s), 1, 1), self.rate)


class StepTrace(_Trace):
    kind: Literal["step"] = "step"
    high: float = Field(..., ge=0, description="capacity before the drop and after recovery (bit/s before scale)")
    low: float = Field(..., ge=0, description="capacity during the drop (bit/s before scale)")
    drop_at_s: float = Field(..., ge=0, description="time the drop starts (s)")
    recover_at_s: float = Field(float("inf"), description="time capacity recovers (s), > drop_at_s; inf = never")

    @model_validator(mode="after")
    def _order(self):
        if self.recover_at_s <= self.drop_at_s:
            raise ValueError(f"recover_at_s ({self.recover_at_s}) must be > drop_at_s ({self.drop_at_s})")
        return self

    def _values(self, t_s, e, n, rng):
        eps = 1e-9
        low = (t_s + eps >= self.drop_at_s) & (t_s + eps < self.recover_at_s)
        return np.where(low, self.low, self.high)[:, None, None]


class SinusoidTrace(_Trace):
    kind: Literal["sinusoid"] = "sinusoid"
    mean: float = Field(..., ge=0, description="mean capacity (bit/s before scale)")
    amplitude: float = Field(..., ge=0, description="amplitude (bit/s before scale); values are clipped at 0")
    period_s: float = Field(..., gt=0, description="period (s) > 0")
    phase_rad: float = Field(0.0, description="phase (rad)")

    def _values(self, t_s, e, n, rng):
        return (self.mean + self.amplitude * np.sin(2 * np.pi * t_s / self.period_s + self.phase_rad))[:, None, None]


class MarkovTrace(_Trace):
    kind: Literal["markov"] = "markov"
    levels: list[float] = Field(..., min_length=2, description="capacity levels (bit/s before scale), >= 0, at least 2")
    switch_prob: float = Field(..., ge=0, le=1, description="per-step probability of leaving the current level, in [0, 1]")
    start_level: Optional[int] = Field(None, ge=0, description="index of the start level (None: uniform random)")
    shared: bool = Field(False, description="one chain per env shared by all its senders (True) or one per sender")

    @field_validator("levels")
    @classmethod
    def _nonneg(cls, v):
        if min(v) < 0:
            raise ValueError(f"levels must be >= 0 bit/s; got {v}")
        return v

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
    path: str = Field(..., description="CSV file with header time_s,rate or time_s,rate_0,...,rate_{N-1}")

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        """Return (time_s float64 [R], rates float64 [R, C]).

        Raises:
            ConfigError: missing file, bad header, non-numeric or negative values, times not increasing.
        """
        p = Path(self.path)
        if not p.is_file():
            raise ConfigError(f"capacity trace file not found: {p}", file=str(p), key="trace.path", value=self.path)
        with p.open(newline="") as fh:
            rows = list(csv.reader(fh))
        if not rows or len(rows[0]) < 2 or rows[0][0].strip() != "time_s":
            raise ConfigError("line 1: header must be 'time_s,rate' or 'time_s,rate_0,...'", file=str(p))
        times, rates = [], []
        for lineno, row in enumerate(rows[1:], start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(rows[0]):
                raise ConfigError(f"line {lineno}: expected {len(rows[0])} columns, got {len(row)}", file=str(p))
            try:
                vals = [float(c) for c in row]
            except ValueError:
                raise ConfigError(f"line {lineno}: non-numeric value in {row!r}", file=str(p)) from None
            if min(vals[1:]) < 0:
                raise ConfigError(f"line {lineno}: rates must be >= 0, got {row!r}", file=str(p))
            if times and vals[0] <= times[-1]:
                raise ConfigError(f"line {lineno}: time_s {vals[0]} not after the previous {times[-1]}", file=str(p))
            times.append(vals[0])
            rates.append(vals[1:])
        if not times:
            raise ConfigError("no data rows", file=str(p))
        return np.asarray(times), np.asarray(rates)

    def _values(self, t_s, e, n, rng):
        times, rates = self.load()
        if rates.shape[1] not in (1, n):
            raise ConfigError(f"{rates.shape[1]} rate columns; need 1 or num_agents={n}", file=self.path)
        idx = np.clip(np.searchsorted(times, t_s + 1e-9, side="right") - 1, 0, len(times) - 1)
        return rates[idx][:, None, :]


Trace = Annotated[Union[ConstantTrace, StepTrace, SinusoidTrace, MarkovTrace, CsvTrace], Field(discriminator="kind")]
