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

Delay-based mode (``delay_based=True``, for channels whose :class:`~coopsim.platform.comm.Feedback` carries
``latency_max_s``): the queueing delay rises before anything is lost, so the probe reads the link's rate
from it instead of from losses, as delay-based congestion control does (TCP Vegas, Brakmo & Peterson 1995;
BBR's delivery-rate sample, Cardwell et al. 2016). The copies a sender offers in one step leave together,
so the last one delivered arrives after all of them were served: ``capacity = delivered bits /
(latency_max_s - base_delay_s)`` (packet-train dispersion). On a shared medium one report's dispersion scatters
(where a sender's last copy lands among the others' frames is random); ``capacity_window`` > 1 averages the time
per bit over about that many reports (an EWMA, i.e. a harmonic mean of the capacities), restarted from the
report's own measurement after a report with loss above the threshold. The estimate is ``target_utilization`` times
that capacity, lowered to the linear extrapolation ``2 c_t - c_{t-1}`` when the capacity is falling gradually
(by at most ``max_trend * c_t`` per report: a gradual fall continues, a jump does not); with ``curvature``
the prediction is second order, ``min(c_t, c_t + 2 d_t - d_(t-1))`` with ``d_t = c_t - c_(t-1)`` when both
changes are gradual, so a rise that slows (the top of a smooth swell) lowers the estimate before the fall; and,
in a report with loss above the threshold, to at most the rate delivered in it. A loss the measured
capacity does not explain (the offered bits fit within one step of it: queue overflow, collision, burst
loss) sets a *loss ceiling* at the delivered rate; ``max_growth`` caps the estimate at that multiple of
the rate offered in the report plus one copy (on a shared medium a few copies pass quickly without showing what a
sustained rate would meet); ``startup_growth`` raises that cap for a sender's first reports, until one whose estimate
the measured capacity set, or one with loss (a startup phase, as TCP slow start, RFC 5681, and BBR's STARTUP: the
initial rate is a guess, and growing from it 1.25x per step wastes the first steps); with ``app_limited_hold`` a
report from a sender that had less to send than its allowance (``update``'s ``active`` False) does not pull the
estimate below its previous value through these caps (RFC 7661: a window is not reduced for not being used);
probed upward by the stepped rules above (hold, then
``up_factor`` per safe report, the hold doubling after each repeated failure until a report is safe at an
offered rate above the failed one; with ``ceiling_limited_only`` only safe reports in which the ceiling limited the
sender count for the hold and the raises, so a ceiling is not forgotten while capacity is below it). The probing rate equals
the estimate (no probe above it is needed: the dispersion measures capacity even when the sender sends
less). Reports with no delivered copy, or from a channel without latency (``latency_max_s is None``),
fall back to the loss-based rules above.

Reports without traffic change nothing. Rates stay in ``[min_rate_bps, max_rate_bps]``.
The estimate is what a sender should use; the probing rate is what it may offer to learn more.
This is the additive-confirmation / multiplicative-backoff probing of rate-adaptation schemes such as
TCP-friendly rate control (RFC 5348) reduced to what per-copy delivered/lost counts can tell.
"""
from __future__ import annotations

import numpy as np
from typing import Annotated, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coopsim.comm.traces import MAX_RATE_BPS
from coopsim.errors import CrossKeyError
from coopsim.platform.comm import Feedback

# The cross-traffic margin's options, declared once: SafeRateProbeParams and DDACOMSenderParams (which passes
# them on to its probe) both take them under these names, with these defaults, bounds and descriptions.
XTrafficGain = Annotated[Optional[float], Field(
    None, gt=0, description="delay-based cross-traffic margin: the target utilization is target_utilization - "
    "xtraffic_gain * sqrt(x), x = max(0, 1 - smoothed capacity / its decaying maximum), the share of the sender's "
    "clean capacity that cross traffic takes; null (None in Python) = off (fixed target_utilization)")]
XTrafficWindow = Annotated[float, Field(5.0, ge=1, description="cross-traffic margin: EWMA horizon of the capacity "
                                        "(reports)")]
XTrafficRefWindow = Annotated[float, Field(100.0, ge=1, description="cross-traffic margin: the reference is the "
                                           "running maximum of the smoothed capacity, decaying by "
                                           "1/xtraffic_ref_window per report")]
XTrafficMinUtilization = Annotated[float, Field(0.3, gt=0, le=1, description="cross-traffic margin: lowest target")]
XTRAFFIC_KEYS = ("xtraffic_gain", "xtraffic_window", "xtraffic_ref_window", "xtraffic_min_utilization")

#: the longest hold (``hold_steps``, ``max_hold_steps``; reports) the probe and DDACOM take: 10**9 reports, 3 years of
#: 0.1 s steps. The hold is an int64 array doubled up to ``max_hold_steps``: 2**63 or more could not be stored in it
MAX_HOLD_STEPS = 10**9


def num_text(x) -> str:
    """``x`` as written back exactly: an int as an int (2, not 2.0), a float in its shortest form that reads back as
    ``x`` (1.0000004, not :g's 1)."""
    return f"{x:g}" if isinstance(x, float) and float(f"{x:g}") == x else repr(x)


def yaml_text(x) -> str:
    """``x`` as a config or an option writes it: null, true / false, a number as :func:`num_text` writes it, another
    value (a string) as its repr."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    return num_text(x) if isinstance(x, (int, float)) else repr(x)


def check_growth_option(name: str, v, data: dict, needs_dt: bool = True):
    """The cross-checks of ``startup_growth`` and ``app_limited_hold`` (SafeRateProbeParams, DDACOMSenderParams):
    both act on the delay-based growth cap, so they need ``delay_based`` (and the probe's ``dt_s``); the startup
    phase raises ``max_growth``'s cap, so it needs ``max_growth`` set and below it; ``app_limited_hold`` needs
    ``max_growth`` too (the cap whose floor it keeps). :class:`~coopsim.errors.CrossKeyError` (a ValueError: pydantic
    names the key; its ``also`` the other key that is the reason) otherwise; ``v`` is returned."""
    if v is None or v is False:
        return v
    num = num_text
    what = f"{name} {num(v)}" if name == "startup_growth" else name
    if data.get("delay_based") is False:
        raise CrossKeyError(f"{what} acts on the delay-based probe's growth cap: it needs delay_based: true",
                            ("delay_based",))
    if needs_dt and "dt_s" in data and data.get("dt_s") is None:
        raise CrossKeyError(f"{what} acts on the delay-based growth cap, which needs dt_s (the step length, s)",
                            ("dt_s",))
    mg = data.get("max_growth")
    if name == "startup_growth":
        if mg is None:
            example = 1.25 if v > 1.25 else (1 + v) / 2
            raise CrossKeyError(f"must come with max_growth (the cap it raises in the first reports; without "
                                f"max_growth the estimate is not capped at all); give max_growth in (1, {num(v)}), "
                                f"e.g. {num(example)}", ("max_growth",))
        if v <= mg:
            raise CrossKeyError(f"must be > max_growth ({num(mg)}): the startup phase raises the growth cap",
                                ("max_growth",))
    elif mg is None:  # (startup_growth, which raises max_growth's cap, is refused without it too)
        raise CrossKeyError("needs max_growth (the growth cap whose floor it keeps; startup_growth only raises that "
                            "cap in the first reports), e.g. max_growth 1.25", ("max_growth",))
    return v


# SafeRateProbeParams' pairs of keys whose first must be at least its second
_AT_LEAST = {"max_up_factor": "up_factor", "max_hold_steps": "hold_steps"}


class SafeRateProbeParams(BaseModel):
    """The probe's parameters; every number finite (no nan or inf), the cross-constraints below checked.

    Raises (through :func:`~coopsim.platform.registry.checked_params`, as :class:`SafeRateProbe` builds them):
        ConfigError: a value out of its range, nan or inf; ``min_rate_bps <= initial_rate_bps <= max_rate_bps``,
            ``max_up_factor >= up_factor`` or ``max_hold_steps >= hold_steps`` not met (naming the key), also when
            the max is left at its default (``up_factor=1.2`` alone is refused: the default ``max_up_factor`` is 1.05).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # (min and max first: initial_rate_bps's check names them)
    min_rate_bps: float = Field(..., gt=0, le=MAX_RATE_BPS, description="lowest rate (bit/s), in (0, 1e12]")
    max_rate_bps: float = Field(..., gt=0, le=MAX_RATE_BPS, description="highest rate (bit/s), in [min_rate_bps, "
                                "1e12] (1 Tbit/s, the traces' and token buckets' bound), e.g. the full-broadcast demand")
    initial_rate_bps: float = Field(..., gt=0, le=MAX_RATE_BPS, description="starting probing rate and estimate "
                                    "(bit/s), in [min_rate_bps, max_rate_bps]")
    up_factor: float = Field(1.05, gt=1, description="probing step up (ratio), > 1")
    max_up_factor: float = Field(1.05, gt=1, validate_default=True,
                                 description="step up after consecutive confirmed probes grows geometrically (x "
                                 "up_factor each time) up to this ratio (>= up_factor, also at its default)")
    down_factor: float = Field(0.85, gt=0, lt=1, description="step down after loss (ratio), in (0, 1)")
    loss_threshold: float = Field(0.003, ge=0, lt=1, description="largest loss fraction counted safe, in [0, 1)")
    up_after: int = Field(3, ge=1, description="consecutive safe reports before stepping up, >= 1")
    hold_steps: int = Field(5, ge=0, le=MAX_HOLD_STEPS, description="reports without stepping up after a loss, in "
                            "0..1000000000")
    max_hold_steps: int = Field(5, ge=0, le=MAX_HOLD_STEPS, validate_default=True,
                                description="hold after repeated failed probes doubles up to this (>= hold_steps, also "
                                "at its default; at most 1000000000)")
    dt_s: Optional[float] = Field(None, gt=0, description="step length (s); if set, a capacity fall sets the estimate "
                                  "to at most the delivered rate of the lossy report (bytes * 8 / dt_s)")
    delay_based: bool = Field(False, description="read the link rate from feedback latency (see module docstring); "
                              "uses Feedback.latency_max_s where the channel reports it")
    target_utilization: float = Field(1.0, gt=0, le=1, description="delay-based: fraction of the measured capacity "
                                      "taken as the estimate, in (0, 1]")
    base_delay_s: float = Field(0.0, ge=0, description="delay-based: fixed delay (s) not due to queueing or "
                                "transmission, subtracted from the latency, >= 0")
    extrapolate: bool = Field(True, description="delay-based: when capacity falls, use 2 c_t - c_(t-1)")
    curvature: bool = Field(False, description="delay-based, with extrapolate: continue a gradual change with its "
                            "curvature too, predicting min(c_t, c_t + 2 d_t - d_(t-1)) with d_t = c_t - c_(t-1), so "
                            "a rise that slows down (a smooth maximum) is taken as the turn it announces; a "
                            "steady fall predicts c_t + d_t as without it")
    max_growth: Optional[float] = Field(None, gt=1, description="delay-based: the estimate is at most this times the "
                                        "rate offered in the report, plus one copy (> 1); null (None in Python) = no cap. "
                                        "On a shared medium (Wi-Fi) a few copies can pass quickly without showing what "
                                        "a sustained rate would meet")
    startup_growth: Optional[float] = Field(None, gt=1, description="delay-based, with dt_s: a startup phase in "
                                            "which the estimate may grow to this times the rate offered in the report "
                                            "(plus one copy) instead of max_growth, until the first report in which the "
                                            "measured capacity, not this cap, set the estimate (or this cap reached "
                                            "max_rate_bps), or one with loss above the threshold; once per sender, as TCP slow start (RFC 5681) and BBR's "
                                            "STARTUP; null (None in Python) = no startup phase")
    app_limited_hold: bool = Field(False, description="delay-based, with max_growth: in a report "
                                   "from a sender that was not rate-limited (update's active False: it offered less "
                                   "than its allowance) the growth cap is at least the previous estimate, so a step "
                                   "with little to send does not pull the estimate down to growth x what it offered "
                                   "(a window is not reduced for not being used, RFC 7661; BBR keeps app-limited "
                                   "samples from lowering its bandwidth estimate)")
    ceiling_limited_only: bool = Field(False, description="delay-based: the loss ceiling's hold counts, and its "
                                       "raises happen in, only safe reports whose offered rate was limited by it "
                                       "(one more copy would have exceeded it), so a sender that stayed below the "
                                       "ceiling (capacity lower for a while) does not forget it, as a congestion "
                                       "window is not grown while application-limited (RFC 7661)")
    max_trend: float = Field(0.1, ge=0, lt=1, description="delay-based: only a fall of at most this fraction of the "
                             "capacity per report is extrapolated (a step drop is not)")
    capacity_window: float = Field(1.0, ge=1, le=1000, description="delay-based: EWMA horizon (reports) of the capacity the "
                                   "estimate is taken from, averaged as time per bit (a harmonic mean of the dispersion "
                                   "capacities); a report with loss above the threshold restarts it from that report's "
                                   "measurement; 1 = the last report alone; at most 1000")
    xtraffic_gain: XTrafficGain
    xtraffic_window: XTrafficWindow
    xtraffic_ref_window: XTrafficRefWindow
    xtraffic_min_utilization: XTrafficMinUtilization

    # cross-constraints, each on the later field so the message names its key (the earlier one is in info.data
    # when it was valid itself)
    @field_validator("max_rate_bps")
    @classmethod
    def _max_ge_min(cls, v, info):
        lo = info.data.get("min_rate_bps")
        if lo is not None and v < lo:
            raise ValueError(f"must be >= min_rate_bps ({lo:g})")
        return v

    @field_validator("initial_rate_bps")
    @classmethod
    def _initial_in_range(cls, v, info):
        lo, hi = info.data.get("min_rate_bps"), info.data.get("max_rate_bps")
        if lo is not None and hi is not None and not lo <= v <= hi:
            raise ValueError(f"must be in [min_rate_bps, max_rate_bps] = [{lo:g}, {hi:g}]")
        return v

    @field_validator("startup_growth", "app_limited_hold")
    @classmethod
    def _growth_options(cls, v, info):
        return check_growth_option(info.field_name, v, info.data)

    @field_validator(*_AT_LEAST)
    @classmethod
    def _max_ge_pair(cls, v, info):
        lower = _AT_LEAST[info.field_name]
        lo = info.data.get(lower)
        if lo is not None and v < lo:
            num = num_text
            raise ValueError(f"must be >= {lower} ({num(lo)}); when not given it is its default, "
                             f"{num(cls.model_fields[info.field_name].default)}: give {info.field_name} >= {num(lo)} "
                             "with it")
        return v


class SafeRateProbe:
    """Vectorized safe-rate prober (see module docstring).

    Args:
        shape: sender array shape, e.g. ``(num_envs, num_agents)``.
        **params: :class:`SafeRateProbeParams`.

    Raises:
        ConfigError: a bad parameter (see :class:`SafeRateProbeParams`), naming the key and what is valid.

    Attributes:
        rate_bps: float64 ``shape``: current probing rate (bit/s).
        estimate_bps: float64 ``shape``: safe-rate estimate (bit/s).
    """

    Params = SafeRateProbeParams

    def __init__(self, shape: tuple[int, ...], **params):
        from coopsim.platform.registry import checked_params
        self.params = checked_params(SafeRateProbeParams, params, "SafeRateProbe")  # ConfigError, not pydantic's
        p = self.params
        self.shape = tuple(shape)
        self.rate_bps = np.full(self.shape, p.initial_rate_bps)
        self.estimate_bps = np.full(self.shape, p.initial_rate_bps)
        self._good = np.zeros(self.shape, np.int64)
        self._hold = np.zeros(self.shape, np.int64)
        self._hold_len = np.full(self.shape, p.hold_steps, np.int64)
        self._step = np.full(self.shape, p.up_factor)
        self.ceiling_bps = np.full(self.shape, np.inf)  # lowest recently failed probing rate
        self.capacity_bps = np.full(self.shape, np.nan)  # delay-based: measured capacity (bit/s; smoothed: capacity_window)
        self._capacity_prev_bps = np.full(self.shape, np.nan)  # delay-based: the measurement before it
        self.loss_ceiling_bps = np.full(self.shape, np.inf)  # delay-based: cap after losses delay did not explain
        self._ceil_hold = np.zeros(self.shape, np.int64)
        self._ceil_hold_len = np.full(self.shape, p.hold_steps, np.int64)
        self._ceil_fail_bps = np.full(self.shape, np.inf)  # offered rate of the last unexplained loss
        self.target_utilization = np.full(self.shape, p.target_utilization)  # delay-based: the target in use
        self.in_startup = np.full(self.shape, p.startup_growth is not None)  # delay-based: startup phase (startup_growth)
        self.capacity_smooth_bps = np.full(self.shape, np.nan)  # cross-traffic margin: EWMA of the capacity
        self.capacity_ref_bps = np.full(self.shape, np.nan)  # cross-traffic margin: its decaying maximum

    def _check_feedback(self, fb) -> Feedback:
        """``fb`` with numpy arrays of the probe's ``shape`` (lists converted), or a ValueError naming the field: each
        count a finite number >= 0; ``latency_max_s`` (read in delay-based mode only) too, or None. Vectorized: one
        mask per field."""
        if not isinstance(fb, Feedback):
            what = ("None: the channel gives no feedback (Channel.feedback returned None), which the probe needs"
                    if fb is None else f"a {type(fb).__name__}")
            raise ValueError(f"SafeRateProbe.update(fb): fb must be a coopsim.platform.comm.Feedback; got {what}")
        names = ("delivered_bytes", "lost_bytes", "delivered_copies", "lost_copies")
        if self.params.delay_based and fb.latency_max_s is not None:
            names += ("latency_max_s",)
        arrays = {}
        for name in names:
            a = np.asarray(getattr(fb, name))
            if a.shape != self.shape:
                raise ValueError(f"SafeRateProbe.update(fb): fb.{name} has shape {a.shape}, the probe's senders "
                                 f"{self.shape}")
            what = "seconds" if name == "latency_max_s" else f"{'byte' if name.endswith('bytes') else 'copy'} counts"
            if a.dtype.kind not in "iuf":
                raise ValueError(f"SafeRateProbe.update(fb): fb.{name} must hold numbers >= 0 ({what}); got dtype "
                                 f"{a.dtype}")
            ok = (a >= 0) if a.dtype.kind != "f" else (a >= 0) & (a < np.inf)  # nan fails both
            if not ok.all():
                raise ValueError(f"SafeRateProbe.update(fb): fb.{name} must be finite and >= 0 ({what}); got "
                                 f"{a[~ok].flat[0].item()!r}")
            arrays[name] = a
        if all(arrays[k] is getattr(fb, k) for k in arrays):
            return fb  # the usual case: the channel's own arrays, nothing converted
        return Feedback(**{k: arrays.get(k, getattr(fb, k)) for k in (*names[:4], "latency_max_s")})

    def update(self, fb: Feedback, active: np.ndarray | None = None) -> np.ndarray:
        """Fold one feedback report in; returns the new estimate (bit/s).

        Args:
            fb: the channel's feedback (``[E, N]`` per-sender byte counts are used).
            active: bool ``shape``: senders whose offered load was limited by the probing rate
                (an application-limited sender learns nothing about higher rates); None = all.

        Raises:
            ValueError: ``fb`` is None (a channel without feedback) or not a Feedback; its arrays (lists are
                converted) not of the probe's ``shape``, or its counts (and, delay-based, ``latency_max_s``) negative,
                nan or inf; ``active`` not broadcastable to ``shape``. Nothing is changed then.
        """
        fb = self._check_feedback(fb)
        if active is not None:
            act = np.asarray(active, bool)
            if act.shape != self.shape:
                try:
                    act = np.broadcast_to(act, self.shape)
                except ValueError:
                    raise ValueError(f"SafeRateProbe.update(fb, active): active has shape {act.shape}, the probe's "
                                     f"senders {self.shape}") from None
            active = act
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
        if p.delay_based:
            self._delay_update(fb, bad, active)
        return self.estimate_bps

    def _xtraffic_update(self, meas: np.ndarray, cap: np.ndarray) -> None:
        """Cross-traffic margin, for senders with a capacity measurement in this report.

        ``s <- s + (c - s) / xtraffic_window`` (the first measurement sets it), ``ref <- max(s, ref * (1 - 1 /
        xtraffic_ref_window))`` (a running maximum that forgets slowly, as BBR's windowed max bandwidth), ``x = max(0,
        1 - s / ref)`` the share of the sender's clean capacity now taken by traffic it does not see, and ``target =
        max(target_utilization - xtraffic_gain * sqrt(x), xtraffic_min_utilization)``: cross traffic made of
        independent frames (Poisson) varies the time left in a step by about the square root of its load, so the aim
        stays further below the bound the more of the medium others take, before any copy is lost.
        """
        p = self.params
        s, ref = self.capacity_smooth_bps, self.capacity_ref_bps
        c = np.where(meas, cap, 0.0)
        s = np.where(meas, np.where(np.isfinite(s), s + (c - np.nan_to_num(s)) / p.xtraffic_window, c), s)
        ref = np.where(meas, np.where(np.isfinite(ref), np.maximum(s, ref * (1 - 1 / p.xtraffic_ref_window)), s), ref)
        self.capacity_smooth_bps, self.capacity_ref_bps = s, ref
        ok = np.isfinite(ref) & (ref > 0)
        x = np.where(ok, np.maximum(0.0, 1 - np.nan_to_num(s) / np.where(ok, ref, 1.0)), 0.0)
        self.target_utilization = np.maximum(p.target_utilization - p.xtraffic_gain * np.sqrt(x),
                                             min(p.xtraffic_min_utilization, p.target_utilization))

    def _delay_update(self, fb: Feedback, bad: np.ndarray, active: np.ndarray | None = None) -> None:
        """Delay-based estimate for senders whose report has delivered copies with a latency."""
        p = self.params
        if fb.latency_max_s is None:  # the channel does not measure latency: loss-based rules only
            return
        busy = np.asarray(fb.latency_max_s, np.float64) - p.base_delay_s
        meas = (fb.delivered_bytes > 0) & (busy > 0)
        cap = np.where(meas, fb.delivered_bytes * 8 / np.where(meas, busy, 1.0), np.nan)
        if p.capacity_window > 1:  # smooth the time per bit over reports; a lossy report restarts from itself
            prev = self.capacity_bps
            keep = meas & np.isfinite(prev) & ~bad
            pace = np.where(keep, 1 / np.where(keep, prev, 1.0), 0.0)
            pace = pace + (1 / np.where(meas, cap, 1.0) - pace) / p.capacity_window
            cap = np.where(keep, 1 / pace, cap)
        pred = cap
        if p.extrapolate:
            prev = self.capacity_bps
            fall = prev - cap  # a gradual fall continues; a jump (more than max_trend * cap) does not
            gradual = np.isfinite(prev) & (fall > 0) & (fall <= p.max_trend * cap)
            pred = np.where(gradual, cap - np.where(gradual, fall, 0.0), cap)
            if p.curvature:
                # second order: with d_t = c_t - c_(t-1), the next change is about 2 d_t - d_(t-1) when both
                # changes are gradual (at most max_trend * c_t); only a predicted fall is used (pred <= c_t already)
                d = cap - prev
                d_prev = prev - self._capacity_prev_bps
                smooth = (np.isfinite(d) & np.isfinite(d_prev) & (np.abs(d) <= p.max_trend * cap)
                          & (np.abs(d_prev) <= p.max_trend * cap))
                pred = np.where(smooth, np.minimum(cap + 2 * d - d_prev, pred), pred)
        if p.xtraffic_gain is not None:
            self._xtraffic_update(meas, cap)
        est = self.target_utilization * pred
        if p.dt_s is not None:
            # a loss the measured capacity does not explain (the offered bits fit in one step of it: a queue
            # overflow, a collision, a burst loss) sets a ceiling at the delivered rate; it is held, then
            # raised by up_factor per safe report (stepped probing with hysteresis, the hold doubling after
            # each repeated failure until a report is safe above the failed offered rate)
            delivered_bps = fb.delivered_bytes * 8 / p.dt_s
            offered_bits = (fb.delivered_bytes + fb.lost_bytes) * 8
            unexplained = bad & meas & (offered_bits <= cap * p.dt_s * (1 + 1e-9))
            repeat = unexplained & np.isfinite(self.loss_ceiling_bps)
            hold_max = max(p.max_hold_steps, p.hold_steps)
            self._ceil_hold_len = np.where(repeat, np.minimum(self._ceil_hold_len * 2, hold_max), self._ceil_hold_len)
            self.loss_ceiling_bps = np.where(unexplained, np.maximum(delivered_bps, p.min_rate_bps), self.loss_ceiling_bps)
            safe = (fb.delivered_bytes + fb.lost_bytes > 0) & ~bad
            offered_bps = offered_bits / p.dt_s
            copy_bits = offered_bits / np.maximum(fb.delivered_copies + fb.lost_copies, 1)
            if p.ceiling_limited_only:  # only reports pressing against the ceiling test it
                safe = safe & ((offered_bits + copy_bits) > self.loss_ceiling_bps * p.dt_s)
            self._ceil_hold = np.where(unexplained, self._ceil_hold_len, np.maximum(self._ceil_hold - safe, 0))
            self._ceil_fail_bps = np.where(unexplained, offered_bps, self._ceil_fail_bps)
            raise_ = safe & (self._ceil_hold == 0) & np.isfinite(self.loss_ceiling_bps)
            self.loss_ceiling_bps = np.where(raise_, self.loss_ceiling_bps * p.up_factor, self.loss_ceiling_bps)
            # safe at an offered rate above the last failure: the obstacle is gone, the hold restarts short
            beyond = safe & (offered_bps > self._ceil_fail_bps)
            self._ceil_hold_len = np.where(beyond, p.hold_steps, self._ceil_hold_len)
            self._ceil_fail_bps = np.where(beyond, np.inf, self._ceil_fail_bps)
            if p.max_growth is not None or p.startup_growth is not None:
                # ... but always room for one more copy (of the report's mean size); in the startup phase the cap is
                # startup_growth, left at the first report the capacity (not the cap) limited, or with loss
                growth = np.full(self.shape, np.inf if p.max_growth is None else p.max_growth)
                if p.startup_growth is not None:
                    growth = np.where(self.in_startup, p.startup_growth, growth)
                grown = (growth * offered_bits + copy_bits) / p.dt_s
                if p.app_limited_hold and active is not None:  # an unused allowance is not a lower rate
                    grown = np.where(active, grown, np.maximum(grown, self.estimate_bps))
                reported = meas & (offered_bits > 0)
                # over when the capacity, not the cap, set the estimate (or the cap reaches max_rate_bps, where
                # it can no longer limit), or with loss above the threshold (fresh37b N6)
                capped = (est <= grown) | (grown >= p.max_rate_bps)
                self.in_startup &= ~((reported & capped) | (bad & (offered_bits > 0)))
                est = np.where(offered_bits > 0, np.minimum(est, grown), est)
            est = np.where(bad, np.minimum(est, delivered_bps), est)
            est = np.minimum(est, self.loss_ceiling_bps)
        est = np.clip(est, p.min_rate_bps, p.max_rate_bps)
        self._capacity_prev_bps = np.where(meas, self.capacity_bps, self._capacity_prev_bps)
        self.capacity_bps = np.where(meas, cap, self.capacity_bps)
        self.estimate_bps = np.where(meas, est, self.estimate_bps)
        self.rate_bps = np.where(meas, est, self.rate_bps)
