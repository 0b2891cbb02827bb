"""DDACOM message sending: deviation ranking + a dynamic token bucket that follows a probed safe rate.

After the sending half of DDACOM (dual-decoupled adaptive communication, see
``/work/shared/facts/methods.md``): sending is decided apart from the action policy.

Ranking. For sender ``i``, entity ``k`` and teammate ``r``::

    team_dev = | v_ik - info_irk |      info_irk: what r is believed to hold about k -- the more recent of
                                         what i last sent r (its sending history towards r) and what r last
                                         told i (inf if neither); 0 where r is believed to see k itself
                                         (``receiver_view``, from :meth:`observe_receivers`)
    hist_dev = | v_ik - last_ik |        last_ik: the value i last sent of k to anyone (inf if never)
    score    = min(team_dev, cap) + hist_weight * min(hist_dev, cap)

Equal scores go in entity order, so a sender's own position (entity ``i``, agents first) leads the landmarks: no
teammate but ``i`` can tell it, while a landmark may reach ``r`` from anyone who knows it. ``hist_weight``
defaults to 0: the sending history enters per receiver through ``info``; a positive weight also ranks an entity
already sent to one teammate below never-sent ones for the others, which spreads a new episode's first copies over
entities instead of giving every teammate the sender's position first, and costs return when capacity is scarce
(``docs/comm.md``, 2026-12-05).

With ``min_deviation_m`` set, copies with ``team_dev <= min_deviation_m`` are never sent; by default
(None) the budget is filled with the top-ranked copies.

Budget. A token bucket per sender (rate in bit/s, depth one step of tokens) is refilled
every step at ``margin * r``, where ``r`` is the :class:`~coopsim.comm.probe.SafeRateProbe`'s probing
rate -- its safe-rate estimate, or a rate one probing step above it while it probes. The number of
copies the bucket allows go out, highest scores first. The probe learns from the channel's
per-sender feedback only (:meth:`on_feedback`); a sender whose demand was below its allowance is
application-limited and does not probe higher.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from pydantic import Field, field_validator

from coopsim.agents.comm_baselines.senders import Sender, SenderParams
from coopsim.comm.probe import (MAX_HOLD_STEPS, XTRAFFIC_KEYS, SafeRateProbe, XTrafficGain, XTrafficMinUtilization,
                                XTrafficRefWindow, XTrafficWindow, check_growth_option, num_text, yaml_text)
from coopsim.comm.token_bucket import TokenBucket
from coopsim.errors import CrossKeyError


_num = num_text  # numbers in messages as written

#: DDACOMSenderParams' keys that only the delay-based probe reads (SafeRateProbe._delay_update): given with
#: ``delay_based: false`` and a value other than their default they would be ignored, so they are refused then (left
#: out or at their defaults, e.g. ``startup_growth: null``, they ask for nothing and are taken)
DELAY_BASED_KEYS = ("target_utilization", "base_delay_s", "curvature", "ceiling_limited_only", "max_growth",
                    "startup_growth", "app_limited_hold", "capacity_window", *XTRAFFIC_KEYS)


def delay_based_default(key: str):
    """The default of DDACOM's delay-based key ``key`` (:data:`DELAY_BASED_KEYS`), the value it may have beside
    ``delay_based: false``."""
    return DDACOMSenderParams.model_fields[key].default


def delay_based_conflicts(params: dict) -> dict:
    """The keys of DDACOM's ``params`` (as given) that its params refuse beside ``delay_based: false``: those of
    :data:`DELAY_BASED_KEYS` given with another value than their default, in that order, with their values; ``{}``
    when ``params`` has no ``delay_based: false``."""
    if params.get("delay_based") is not False:
        return {}
    return {k: params[k] for k in DELAY_BASED_KEYS if k in params and params[k] != delay_based_default(k)}


def delay_based_refusal(keys: dict, advice: str | None = None) -> str:
    """The refusal of the delay-based keys ``keys`` (key -> value, in :data:`DELAY_BASED_KEYS`' order) beside
    ``delay_based: false``, all in one message, values written as YAML writes them; ``advice`` replaces the last
    part (what to do; by default: remove them, or give each its default, or delay_based: false)."""
    items = [f"{k} {yaml_text(v)}" for k, v in keys.items()]
    one = len(items) == 1
    listed = items[0] if one else f"{', '.join(items[:-1])} and {items[-1]}"
    if advice is None and one:
        key = next(iter(keys))
        advice = f"remove {key} (or give it its default, {yaml_text(delay_based_default(key))}) or delay_based: false"
    elif advice is None:
        defaults = ", ".join(f"{k} {yaml_text(delay_based_default(k))}" for k in keys)
        advice = f"remove these {len(keys)} keys (or give each its default: {defaults}) or delay_based: false"
    return (f"{listed} {'is' if one else 'are'} read by the delay-based probe only (with delay_based false "
            f"{'it' if one else 'they'} would be ignored): {'it needs' if one else 'they need'} delay_based: true "
            f"(DDACOM's default); {advice}")


class DelayBasedOnlyError(CrossKeyError):
    """A delay-based key (:data:`DELAY_BASED_KEYS`) given beside ``delay_based: false`` with another value than its
    default: its message names it; :meth:`join` names it with the other keys refused so
    (:func:`~coopsim.platform.registry.pydantic_to_config_error` reports them in one message)."""

    def __init__(self, key: str, value):
        self.key, self.value = key, value
        super().__init__(delay_based_refusal({key: value}), ("delay_based",))

    def join(self, later: list) -> str:
        return delay_based_refusal({self.key: self.value, **{e.key: e.value for e in later}})


class DDACOMSenderParams(SenderParams):
    hist_weight: float = Field(0.0, ge=0, description="weight of the deviation from what the sender last sent of the "
                               "entity to anyone, >= 0 (0: the sending history counts per receiver only; module "
                               "docstring)")
    min_deviation_m: Optional[float] = Field(None, ge=0, description="copies deviating at most this from the teammate's "
                                             "info (m) are never sent; null (None in Python) = fill the budget with the "
                                             "top-ranked")
    cap_m: float = Field(4.0, gt=0, description="deviation given to unknown info (m), > 0")
    initial_rate_frac: float = Field(0.2, gt=0, le=1, description="start rate as a fraction of full-broadcast demand")
    min_rate_frac: float = Field(0.02, gt=0, le=1, validate_default=True,
                                 description="lowest rate, fraction of demand, <= initial_rate_frac")
    margin: float = Field(1.0, gt=0, le=1, description="fraction of the probed rate actually used, in (0, 1]")
    up_factor: float = Field(1.05, gt=1, description="probe step up (ratio)")
    max_up_factor: float = Field(1.3, gt=1, validate_default=True, description="largest probe step after consecutive "
                                 "confirmed probes (ratio), >= up_factor")
    down_factor: float = Field(0.8, gt=0, lt=1, description="step down when loss hits at the estimate (ratio)")
    loss_threshold: float = Field(0.003, ge=0, lt=1, description="loss fraction counted safe")
    up_after: int = Field(3, ge=1, description="safe reports before probing higher")
    hold_steps: int = Field(20, ge=0, le=MAX_HOLD_STEPS, description="reports without probing after a loss, at most "
                            "1000000000")
    max_hold_steps: int = Field(200, ge=0, le=MAX_HOLD_STEPS, validate_default=True, description="hold after repeated "
                                "failed probes doubles up to this, >= hold_steps, at most 1000000000")
    delay_based: bool = Field(True, description="probe reads the link rate from feedback latency (queueing delay, "
                              "before loss); falls back to loss-based probing where no latency is reported")
    target_utilization: float = Field(1.0, gt=0, le=1, description="delay-based: fraction of the measured capacity used")
    base_delay_s: float = Field(0.0, ge=0, description="delay-based: the channel's fixed delay (s)")
    curvature: bool = Field(True, description="delay-based: second-order prediction of a gradual capacity change "
                            "(a slowing rise announces a maximum; see SafeRateProbeParams.curvature)")
    ceiling_limited_only: bool = Field(True, description="delay-based: the probe's loss ceiling (a queue limit the "
                                       "delay cannot show) is re-probed only while the sender is limited by it")
    resend_lost: bool = Field(False, description="after a report of lost copies, the copies sent in the last two "
                              "steps count as not held by their receivers (each sender's reports are counts, not "
                              "which copy), so the ranking sends them again; without it a lost copy of a landmark is "
                              "believed held and never resent")
    receiver_view: bool = Field(True, description="a copy of an entity the receiver is believed to observe itself "
                                "(within its observation radius, by the sender's belief of where it is) counts as "
                                "held exactly (deviation 0), so the budget goes to what receivers cannot see")
    max_growth: Optional[float] = Field(None, gt=1, description="delay-based: estimate at most this times the rate "
                                        "offered in the report; null (None in Python) = no cap")
    startup_growth: Optional[float] = Field(None, gt=1, description="delay-based: in the startup phase (until the "
                                            "measured capacity first limits the estimate, or a loss) the estimate may "
                                            "grow to this times the offered rate instead of max_growth, as TCP slow "
                                            "start; null (None in Python) = no startup phase (SafeRateProbeParams)")
    app_limited_hold: bool = Field(False, description="delay-based: a step in which the sender had less to send than "
                                   "its allowance does not lower the estimate through the growth cap (RFC 7661; "
                                   "SafeRateProbeParams)")
    capacity_window: float = Field(1.0, ge=1, le=1000, description="delay-based: EWMA horizon (reports) of the measured "
                                   "capacity, averaged as time per bit; 1 = the last report, at most 1000 (SafeRateProbeParams)")
    # the probe's cross-traffic margin, passed on to it (declared once, in coopsim.comm.probe)
    xtraffic_gain: XTrafficGain
    xtraffic_window: XTrafficWindow
    xtraffic_ref_window: XTrafficRefWindow
    xtraffic_min_utilization: XTrafficMinUtilization

    # the probe's cross-checks (SafeRateProbeParams), with this sender's defaults and keys, so that a refused value
    # is named when the params are read, not when the probe is built at the run's start
    @field_validator("min_rate_frac")
    @classmethod
    def _min_le_initial(cls, v, info):
        hi = info.data.get("initial_rate_frac")
        if hi is not None and v > hi:
            raise CrossKeyError(f"must be <= initial_rate_frac ({_num(hi)}; min_rate_frac is "
                                f"{_num(cls.model_fields['min_rate_frac'].default)} unless given): give min_rate_frac "
                                f"<= {_num(hi)} with it, or a larger initial_rate_frac", ("initial_rate_frac",))
        return v

    @field_validator("max_up_factor", "max_hold_steps")
    @classmethod
    def _max_ge_pair(cls, v, info):
        name = info.field_name
        lower = {"max_up_factor": "up_factor", "max_hold_steps": "hold_steps"}[name]
        lo = info.data.get(lower)
        if lo is not None and v < lo:
            raise CrossKeyError(f"must be >= {lower} ({_num(lo)}; {name} is {_num(cls.model_fields[name].default)} "
                                f"unless given): give {name} >= {_num(lo)} with it", (lower,))
        return v

    @field_validator(*DELAY_BASED_KEYS)
    @classmethod
    def _delay_based_only(cls, v, info):
        # run for the keys given only (none validates its default): a key left out is not read, and not refused;
        # nor is one given at its default (startup_growth: null, app_limited_hold: false), which asks for nothing
        name = info.field_name
        if info.data.get("delay_based") is False:
            if v == cls.model_fields[name].default:
                return v
            raise DelayBasedOnlyError(name, v)
        if name in ("startup_growth", "app_limited_hold"):
            return check_growth_option(name, v, info.data, needs_dt=False)  # dt_s: the scenario's
        return v


class DDACOMSender(Sender):
    """DDACOM's sender (see module docstring). Attributes ``probe`` and ``bucket`` are ``[E, N]`` arrays."""

    Params = DDACOMSenderParams
    uses_feedback = True

    def reset(self, num_envs, num_agents, num_entities, dt_s, copy_bytes, demand_bps):
        super().reset(num_envs, num_agents, num_entities, dt_s, copy_bytes, demand_bps)
        p = self.params
        shape = (num_envs, num_agents)
        self.probe = SafeRateProbe(shape, initial_rate_bps=p.initial_rate_frac * demand_bps,
                                   min_rate_bps=p.min_rate_frac * demand_bps, max_rate_bps=demand_bps,
                                   up_factor=p.up_factor, max_up_factor=p.max_up_factor, down_factor=p.down_factor, loss_threshold=p.loss_threshold,
                                   up_after=p.up_after, hold_steps=p.hold_steps, max_hold_steps=p.max_hold_steps,
                                   dt_s=dt_s, delay_based=p.delay_based, target_utilization=p.target_utilization,
                                   base_delay_s=p.base_delay_s, max_growth=p.max_growth,
                                   startup_growth=p.startup_growth, app_limited_hold=p.app_limited_hold,
                                   capacity_window=p.capacity_window,
                                   curvature=p.curvature, ceiling_limited_only=p.ceiling_limited_only,
                                   **{k: getattr(p, k) for k in XTRAFFIC_KEYS})
        self.bucket = TokenBucket(0, 0, shape=shape, full=False)
        self._info = np.zeros((num_envs, num_agents, num_agents, num_entities, 2))
        self._limited = np.ones(shape, bool)
        self._t = 0
        self._doubt = np.zeros((num_envs, num_agents, num_agents, num_entities), bool)  # [E, me, R, K]
        self._sees: np.ndarray | None = None  # [E, me, K, R], from observe_receivers
        self._recent: list[np.ndarray] = []  # the last two commits' masks, [E, me, R, K]

    def new_episode(self, env_ids: np.ndarray | None = None) -> None:
        super().new_episode(env_ids)
        ids = slice(None) if env_ids is None else env_ids
        self._doubt[ids] = False
        for m in self._recent:
            m[ids] = False

    def score(self, values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(score, team_dev), both float64 ``[E, N, K, R]``."""
        p = self.params
        sent = np.moveaxis(self.has_sent, 2, 3)
        heard = np.moveaxis(self.has_heard, 2, 3)  # [E, me, K, teammate]
        info = np.moveaxis(self.info, 2, 3)  # [E, N, K, R, 2]
        known = (sent | heard) & ~np.moveaxis(self._doubt, 2, 3)
        team = np.where(known, np.linalg.norm(values[..., None, :] - info, axis=-1), np.inf)
        if p.receiver_view and self._sees is not None:
            team = np.where(self._sees, 0.0, team)
        hist = np.where(self.has_any, np.linalg.norm(values - self.last_any, axis=-1), np.inf)[..., None]
        score = np.minimum(team, p.cap_m) + p.hist_weight * np.minimum(hist, p.cap_m)
        return np.where(self._all(valid), score, -np.inf), np.where(self._all(valid), team, -np.inf)

    @property
    def info(self) -> np.ndarray:
        """``[E, N, R, K, 2]``: what teammate r is believed to hold about each entity."""
        return self._info

    def select(self, t, values, valid):
        p = self.params
        score, team = self.score(values, valid)
        want = team > (-1.0 if p.min_deviation_m is None else p.min_deviation_m)  # [E, N, K, R]
        demand = want.reshape(self.E, self.N, -1).sum(axis=2)
        rate = self.probe.rate_bps * p.margin
        self.bucket.set_rate(rate)
        # one step deep (never two steps' worth at once), but at least one copy: at a rate below one copy
        # per step the sender still sends one now and then, so the delay-based probe keeps measuring
        self.bucket.set_burst(np.maximum(np.floor(rate * self.dt_s / 8), self.copy_bytes))
        self.bucket.refill(self.dt_s)
        allowed = self.bucket.consume_up_to(demand, self.copy_bytes)  # tokens taken only for what is sent
        self._limited = demand > allowed  # rate-limited: the probe may step up
        flat = np.where(want, score, -np.inf).reshape(self.E, self.N, -1)
        order = np.argsort(-flat, axis=2, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(flat.shape[2])[None, None, :], axis=2)
        mask = (rank < allowed[..., None]).reshape(want.shape) & want
        return mask

    def observe_receivers(self, sees):
        self._sees = np.asarray(sees, bool)

    def commit(self, mask, values):
        super().commit(mask, values)
        m = np.moveaxis(mask, 3, 2)
        self._info = np.where(m[..., None], values[:, :, None], self._info)
        if self.params.resend_lost:
            self._doubt &= ~m
            self._recent = [*self._recent[-1:], m.copy()]

    def on_receive(self, inbox):
        super().on_receive(inbox)
        if inbox is None or len(inbox) == 0:
            return
        k = inbox.payload[:, 0].astype(np.int64)
        # the teammate told me this value, so it holds it (the latest of what it told and what I sent)
        self._info[inbox.env, inbox.dst, inbox.src, k] = inbox.payload[:, 1:3]
        self._doubt[inbox.env, inbox.dst, inbox.src, k] = False

    def on_feedback(self, fb):
        if fb is not None:
            self.probe.update(fb, active=self._limited)
            if self.params.resend_lost and self._recent:
                lost = np.asarray(fb.lost_copies) > 0  # [E, N] senders told of a loss
                self._doubt |= np.logical_or.reduce(self._recent) & lost[:, :, None, None]
