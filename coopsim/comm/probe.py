"""Online safe-rate estimation from delivery feedback only (stepped probing with hysteresis).

Each sender (an ``[E, N]`` array of them) keeps a *probing rate* on a geometric ladder and a *safe-rate
estimate*: the highest rate at which it recently offered traffic and saw a loss fraction at most
``loss_threshold``. Per feedback report with traffic:

* loss above the threshold while probing above the estimate: the probe failed; the probing rate
  falls back to the estimate, which stays (or, when ``dt_s`` is given, rises to the rate delivered in
  that report: the probe saturated the link, so what got through is a capacity measurement);
* loss above the threshold at or below the estimate: capacity fell; the estimate (and the probing
  rate) step down by ``down_factor``, and, when ``dt_s`` is given, to at most the rate actually
  delivered in that report (a delivery-rate bound in the manner of BBR, so one report suffices
  after a deep drop);
* after a loss the sender holds for ``hold_steps`` reports (no step up: the hysteresis that keeps it
  from oscillating at the edge); each further failed probe doubles the hold, up to
  ``max_hold_steps``, until a probe is confirmed at or above the lowest failed rate (``ceiling_bps``,
  also set by a capacity fall), which resets it;
* loss within the threshold, not holding: after ``up_after`` consecutive such reports the probing rate
  is confirmed (``estimate = max(estimate, rate)``) and the next probe is ``estimate * step``, where
  ``step`` starts at ``up_factor`` and is multiplied by ``up_factor`` after every confirmed probe up to
  ``max_up_factor`` (fast recovery after capacity returns); any loss resets it to ``up_factor``.

Reports without traffic change nothing. Rates stay in ``[min_rate_bps, max_rate_bps]``.
The estimate is what a sender should use; the probing rate is what it may offer to learn more.
This is the additive-confirmation / multiplicative-backoff probing of rate-adaptation schemes such as
TCP-friendly rate control (RFC 5348) reduced to what per-copy delivered/lost counts can tell.
"""
from __future__ import annotations

import numpy as np
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from coopsim.platform.comm import Feedback


class SafeRateProbeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    initial_rate_bps: float = Field(..., gt=0, description="starting probing rate and estimate (bit/s), > 0")
    min_rate_bps: float = Field(..., gt=0, description="lowest rate (bit/s), > 0")
    max_rate_bps: float = Field(..., gt=0, description="highest rate (bit/s), e.g. the full-broadcast demand")
    up_factor: float = Field(1.05, gt=1, description="probing step up (ratio), > 1")
    max_up_factor: float = Field(1.05, gt=1, description="step up after consecutive confirmed probes grows "
                                 "geometrically (x up_factor each time) up to this ratio (>= up_factor)")
    down_factor: float = Field(0.85, gt=0, lt=1, description="step down after loss (ratio), in (0, 1)")
    loss_threshold: float = Field(0.003, ge=0, lt=1, description="largest loss fraction counted safe, in [0, 1)")
    up_after: int = Field(3, ge=1, description="consecutive safe reports before stepping up, >= 1")
    hold_steps: int = Field(5, ge=0, description="reports without stepping up after a loss, >= 0")
    max_hold_steps: int = Field(5, ge=0, description="hold after repeated failed probes doubles up to this (>= hold_steps)")
    dt_s: Optional[float] = Field(None, gt=0, description="step length (s); if set, a capacity fall sets the estimate "
                                  "to at most the delivered rate of the lossy report (bytes * 8 / dt_s)")


class SafeRateProbe:
    """Vectorized safe-rate prober (see module docstring).

    Args:
        shape: sender array shape, e.g. ``(num_envs, num_agents)``.
        **params: :class:`SafeRateProbeParams`.

    Attributes:
        rate_bps: float64 ``shape``: current probing rate (bit/s).
        estimate_bps: float64 ``shape``: safe-rate estimate (bit/s).
    """

    Params = SafeRateProbeParams

    def __init__(self, shape: tuple[int, ...], **params):
        self.params = SafeRateProbeParams(**params)
        p = self.params
        if not p.min_rate_bps <= p.initial_rate_bps <= p.max_rate_bps:
            raise ValueError(f"need min_rate_bps <= initial_rate_bps <= max_rate_bps; got {p.min_rate_bps}, "
                             f"{p.initial_rate_bps}, {p.max_rate_bps}")
        self.shape = tuple(shape)
        self.rate_bps = np.full(self.shape, p.initial_rate_bps)
        self.estimate_bps = np.full(self.shape, p.initial_rate_bps)
        self._good = np.zeros(self.shape, np.int64)
        self._hold = np.zeros(self.shape, np.int64)
        self._hold_len = np.full(self.shape, p.hold_steps, np.int64)
        self._step = np.full(self.shape, p.up_factor)
        self.ceiling_bps = np.full(self.shape, np.inf)  # lowest recently failed probing rate

    def update(self, fb: Feedback, active: np.ndarray | None = None) -> np.ndarray:
        """Fold one feedback report in; returns the new estimate (bit/s).

        Args:
            fb: the channel's feedback (``[E, N]`` per-sender byte counts are used).
            active: bool ``shape``: senders whose offered load was limited by the probing rate
                (an application-limited sender learns nothing about higher rates); None = all.
        """
        p = self.params
        total = fb.delivered_bytes + fb.lost_bytes
        has = total > 0
        loss = np.where(has, fb.lost_bytes / np.maximum(total, 1), 0.0)
        bad = has & (loss > p.loss_threshold)
        good = has & ~bad
        probing = self.rate_bps > self.estimate_bps
        self.rate_before = self.rate_bps.copy()
        # loss while probing above the estimate: the probe failed, fall back to the estimate
        # loss at or below the estimate: capacity fell, step the estimate down
        fell = bad & ~probing
        failed = bad & probing
        new_est = self.estimate_bps * p.down_factor
        if p.dt_s is not None:
            new_est = np.minimum(new_est, fb.delivered_bytes * 8 / p.dt_s)
        self.estimate_bps = np.where(fell, np.maximum(new_est, p.min_rate_bps), self.estimate_bps)
        if p.dt_s is not None:  # a failed probe saturated the link: what got through is safe
            self.estimate_bps = np.where(failed, np.maximum(self.estimate_bps, fb.delivered_bytes * 8 / p.dt_s),
                                         self.estimate_bps)
        self.rate_bps = np.where(bad, self.estimate_bps, self.rate_bps)
        hold_max = max(p.max_hold_steps, p.hold_steps)
        self._hold = np.where(bad, self._hold_len, np.maximum(self._hold - has, 0))
        self._hold_len = np.where(failed, np.minimum(self._hold_len * 2, hold_max), self._hold_len)
        self.ceiling_bps = np.where(failed, np.minimum(self.ceiling_bps, self.rate_before), self.ceiling_bps)
        self.ceiling_bps = np.where(fell, self.rate_before, self.ceiling_bps)
        self._good = np.where(bad, 0, self._good)
        # safe: count, confirm, step up
        limited = np.ones(self.shape, bool) if active is None else np.asarray(active, bool)
        self._good = np.where(good, self._good + 1, self._good)
        up = good & (self._good >= p.up_after) & (self._hold == 0)
        beyond = up & probing & (self.rate_bps >= self.ceiling_bps)  # confirmed above the last failure
        self._hold_len = np.where(beyond, p.hold_steps, self._hold_len)
        self.ceiling_bps = np.where(beyond, np.inf, self.ceiling_bps)
        self._step = np.where(bad, p.up_factor, self._step)
        self._step = np.where(up & probing, np.minimum(self._step * p.up_factor, max(p.max_up_factor, p.up_factor)),
                              self._step)
        self.estimate_bps = np.where(up, np.maximum(self.estimate_bps, self.rate_bps), self.estimate_bps)
        self.rate_bps = np.where(up & limited, np.minimum(self.estimate_bps * self._step, p.max_rate_bps),
                                 self.rate_bps)
        self._good = np.where(up, 0, self._good)
        return self.estimate_bps
