"""``ns3-v0``: every message crosses a real ns-3 (802.11 ad-hoc) packet-level simulation, in lockstep.

Model (ns-3, Debian's 3.37, run by the child process ``coopsim-ns3-bridge``):

* Each coopsim env is its own isolated ad-hoc Wi-Fi network (one ``YansWifiChannel``): one ns-3 node
  per agent slot, plus ``2 * background_pairs`` background nodes. The 802.11 standard is set
  explicitly (``802.11a`` by default, IEEE 802.11-2016 clause 17 OFDM PHY, DCF MAC,
  ``AdhocWifiMac``); the rate manager is ``ConstantRateWifiManager`` (``data_mode`` for unicast and
  broadcast, reproducible) or Minstrel.
* Propagation: ``LogDistancePropagationLossModel`` (exponent, reference distance and loss), followed by
  ``NakagamiPropagationLossModel`` fading (Nakagami 1960; m per distance band) so that loss grows
  gradually with distance; ``ConstantSpeedPropagationDelayModel``.
* Node positions come from the scenario's ``positions()`` (float64 ``[E, N, 3]``, metres) at every
  :meth:`send`; a scenario without positions gets agents on a line ``fallback_spacing_m`` apart.
* Each message is one UDP datagram whose IP packet is ``size_bytes`` long (payload +
  ``header_bytes``; UDP payload = size - 28), sent to ``255.255.255.255`` (broadcast) or to the
  receiver's address (unicast, MAC-acknowledged with retries). Static ARP entries, so no ARP traffic.
* Time: a message sent at step ``t`` leaves at ``t * dt_s`` plus a per-sender jitter drawn uniformly in
  ``[0, send_jitter_s]`` (all of one sender's messages of a step leave together, in batch order);
  :meth:`send` asks ns-3 to advance from ``t * dt_s`` to ``(t + 1) * dt_s`` (``Simulator::Stop`` +
  ``Run``) and returns at once: ns-3 runs in its process while the caller steps its scenario, and the
  next call (``deliver``, ``feedback``, ``stats``...) waits for it (up to ``step_timeout_s``).
  A copy received in that window is returned by ``deliver(t + 1)`` (and any later ``deliver`` until
  taken); its ``t_sent_s`` is ``t * dt_s`` and its latency (``comm/latency_*_s``) is the ns-3 one.
* Background traffic: each background pair sends unicast UDP packets of ``background_packet_bytes``
  (IP) at ``background_rate_bps`` (or the piecewise-constant ``background_schedule``), Poisson or
  periodic, so the bandwidth left to the agents varies.

Loss accounting (application level, as ns-3's FlowMonitor does not see broadcast flows): every
(env, sender, receiver) copy carries a per-receiver sequence number; when a receiver gets copy
``k`` from a sender, the earlier copies of that pair still missing are lost (cause ``seq_gap``: a
sender's packets leave its single DCF queue in order), and a copy not received ``loss_timeout_s``
after sending is lost (cause ``timeout``; ns-3 drops MAC-queued packets after 0.5 s); with
``latency_bound_s`` set, a copy not received within the bound after its step began is lost (cause
``late``, as in ``bandwidth-v0``; decided when the bound passes, so its sender hears of it one step later
when the bound is one step; if ns-3 delivers it afterwards it counts in ``comm/ns3/late_arrivals``).
Invariant, in
copies and bytes, at every call: ``offered = delivered + lost + queued`` (queued = in flight in ns-3,
or received but not yet returned by ``deliver``).

Determinism: ns-3's ``RngSeed``/``RngRun`` come from the episode seed (``RngSeed = 1 + seed // 2**32``,
``RngRun = seed % 2**32``) and every random stream is numbered explicitly, so the same seed gives the
same deliveries, in a new process or after any number of resets of the same one.

Robustness: the child is started on the first :meth:`reset` and kept across episodes (a reset rebuilds
the ns-3 networks in it, ``Simulator::Destroy``); every reply has a deadline (``step_timeout_s``,
5 s by default): a stuck or crashed ns-3 raises :class:`coopsim.errors.ChannelError`. The child talks
over pipes only and binds no socket; :meth:`close` (or garbage collection) ends it.

Version history: v0 (this one).
"""
from __future__ import annotations

import struct
import warnings
from typing import Any, Literal, Optional

import numpy as np
from pydantic import ConfigDict, Field, field_validator

from coopsim.comm.ns3.build import INSTALL_HINT, ensure_bridge
from coopsim.comm.ns3.process import BridgeProcess
from coopsim.errors import ChannelError, ConfigError, DependencyNotInstalled
from coopsim.comm.accounting import flat_stats, per_copy_view, pop_feedback, scatter_add
from coopsim.platform.comm import BROADCAST, HEADER_BYTES_MAX, Channel, ChannelParams, Feedback, MessageBatch, concat

CAUSES = ("seq_gap", "timeout", "late")
UDP_IP_HEADER_BYTES = 28
#: the largest IP packet a message may make (payload + ``header_bytes``): IPv4's 16-bit total length; ns-3 drops a
#: larger one without a trace, so :meth:`Ns3Channel.send` refuses it
IP_PACKET_MAX_BYTES = HEADER_BYTES_MAX
#: the most ns-3 nodes of one env (``num_agents + 2 * background_pairs``): each env is one /16 IPv4 subnet
NODES_PER_ENV_MAX = 60000

_OFDM = tuple(f"OfdmRate{r}Mbps" for r in (6, 9, 12, 18, 24, 36, 48, 54))
_DSSS = tuple(f"DsssRate{r}Mbps" for r in ("1", "2", "5_5", "11"))
#: the ns-3 WifiModes of data frames each standard takes (the constant rate manager's data_mode)
_MODES: dict[str, tuple[str, ...]] = {
    "802.11a": _OFDM,
    "802.11b": _DSSS,
    "802.11g": tuple(f"ErpOfdmRate{r}Mbps" for r in (6, 9, 12, 18, 24, 36, 48, 54)) + _DSSS,
    "802.11n": tuple(f"HtMcs{i}" for i in range(8)) + _OFDM,
}
_BASIC_MODE = {"802.11a": "OfdmRate6Mbps", "802.11b": "DsssRate1Mbps", "802.11g": "ErpOfdmRate6Mbps",
               "802.11n": "OfdmRate6Mbps"}
_DEFAULT_MODE = {"802.11a": "OfdmRate6Mbps", "802.11b": "DsssRate1Mbps", "802.11g": "ErpOfdmRate6Mbps",
                 "802.11n": "HtMcs0"}
# Friis free-space loss at 1 m, 20 log10(4 pi f / c): 5.15 GHz (ns-3's default) and 2.412 GHz (channel 1)
_FREE_SPACE_1M_DB = {"802.11a": 46.6777, "802.11n": 46.6777, "802.11b": 40.0953, "802.11g": 40.0953}
_WIRE = np.dtype([("env", "<u4"), ("src", "<u4"), ("dst", "<i4"), ("size", "<u4"), ("id", "<u4")])
_RX = np.dtype([("id", "<u4"), ("rx", "<u4"), ("t", "<f8")])


class Ns3Params(ChannelParams):
    """Parameters of ``ns3-v0`` (defaults: ns-3's own defaults for 802.11a at 5.15 GHz, 16 dBm).

    Every number must be finite (nan or +-inf is refused, the background schedule's times and rates and
    ``background_position_m`` too), built from Python as from a config file: ``Ns3Channel(background_rate_bps=inf)``
    raises the one-line :class:`coopsim.errors.ConfigError` (key ``background_rate_bps``) that
    ``channel.params.background_rate_bps: .inf`` in a run config gets.
    """

    # allow_inf_nan=False: the schema itself refuses nan/inf, so the Python route (Ns3Channel(...),
    # registry.make_component) refuses them as a config file does, not only platform/config.py's check
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    header_bytes: int = Field(UDP_IP_HEADER_BYTES, ge=UDP_IP_HEADER_BYTES, le=HEADER_BYTES_MAX,
                              description=f"bytes added to each payload (B), 28 (IPv4 + UDP headers) .. "
                                          f"{HEADER_BYTES_MAX} (an IP packet's size limit)")
    standard: Literal["802.11a", "802.11b", "802.11g", "802.11n"] = Field(
        "802.11a", description="802.11 PHY/MAC standard (802.11n on 5 GHz, 20 MHz)")
    rate_manager: Literal["constant", "minstrel"] = Field(
        "constant", description="constant: data_mode for every data frame; minstrel: Minstrel (HT for 802.11n)")
    data_mode: Optional[str] = Field(
        None, description="ns-3 WifiMode of data frames for the constant manager, e.g. OfdmRate6Mbps "
                          "(802.11a), DsssRate11Mbps (b), ErpOfdmRate54Mbps (g), HtMcs7 (n); None = the "
                          "standard's lowest rate")
    tx_power_dbm: float = Field(16.0206, ge=-30, le=40, description="transmit power (dBm), in [-30, 40]")
    log_distance_exponent: float = Field(3.0, ge=1.5, le=6, description="path-loss exponent, in [1.5, 6]")
    reference_distance_m: float = Field(1.0, gt=0, description="log-distance reference distance (m), > 0")
    reference_loss_db: Optional[float] = Field(
        None, ge=0, description="path loss at the reference distance (dB), >= 0; None = free space at 1 m in the "
                                "standard's band: 46.68 dB at 5.15 GHz (a, n), 40.10 dB at 2.412 GHz (b, g)")
    nakagami: bool = Field(True, description="add Nakagami-m fading after the log-distance loss")
    nakagami_m0: float = Field(1.5, gt=0, description="Nakagami m below nakagami_distance1_m, > 0")
    nakagami_m1: float = Field(0.75, gt=0, description="Nakagami m between distance1 and distance2, > 0")
    nakagami_m2: float = Field(0.75, gt=0, description="Nakagami m beyond nakagami_distance2_m, > 0")
    nakagami_distance1_m: float = Field(80.0, gt=0, description="first Nakagami band edge (m), > 0")
    nakagami_distance2_m: float = Field(200.0, gt=0, description="second Nakagami band edge (m), > distance1")
    send_jitter_s: float = Field(0.01, ge=0, description="per-sender uniform send jitter (s), >= 0, < dt_s")
    background_pairs: int = Field(0, ge=0, le=64, description="background node pairs per env, in [0, 64]")
    background_rate_bps: float = Field(0.0, ge=0, description="offered load of each background pair (bit/s of IP packets), >= 0")
    background_schedule: Optional[list[tuple[float, float]]] = Field(
        None, description="piecewise-constant [[t_s, rate_bps], ...] (t_s ascending, first 0) overriding "
                          "background_rate_bps; repeats every background_period_s if set (then every t_s < it)")
    background_period_s: Optional[float] = Field(None, gt=0, description="period of background_schedule (s), > 0 "
                                                 "and past its last time")
    background_packet_bytes: int = Field(1000, ge=UDP_IP_HEADER_BYTES, le=2000,
                                         description="background IP packet size (B), in [28, 2000]")
    background_poisson: bool = Field(True, description="Poisson background arrivals (else periodic)")
    background_position_m: tuple[float, float, float] = Field(
        (0.0, 0.0, 0.0), description="where the background pairs stand (m); pair k at (x + {0,1}, y + k, z)")
    fallback_spacing_m: float = Field(5.0, gt=0, description="agent spacing on a line when the scenario has no positions() (m)")
    loss_timeout_s: float = Field(1.0, ge=0.5, description="a copy not received this long after sending is lost (s), >= 0.5")
    mac_queue_max_delay_s: float = Field(0.5, gt=0, le=10, description="ns-3 WifiMacQueue MaxDelay: a frame queued "
                                         "longer is dropped by the MAC (s), in (0, 10]; ns-3's default 0.5")
    latency_bound_s: Optional[float] = Field(None, gt=0, description="a copy received later than this after its step "
                                             "began is discarded by its receiver and counts as lost (cause late), "
                                             "as in bandwidth-v0 (s), > 0; None = no bound")
    step_timeout_s: float = Field(5.0, gt=0, description="deadline for ns-3 to finish one step (s), > 0")
    reset_timeout_s: float = Field(60.0, gt=0, description="deadline for ns-3 to build the networks at reset (s), > 0")

    # field validators (not one model validator): an error names its key, channel.params.data_mode, not
    # channel.params. (standard and nakagami_distance1_m are declared first, so they are in info.data)
    @field_validator("data_mode")
    @classmethod
    def _data_mode(cls, v, info):
        std = info.data.get("standard")
        if v is not None and std in _MODES and v not in _MODES[std]:
            raise ValueError(f"{v!r} is not a mode of {std}; valid: {', '.join(_MODES[std])}")
        return v

    @field_validator("nakagami_distance2_m")
    @classmethod
    def _nakagami(cls, v, info):
        d1 = info.data.get("nakagami_distance1_m")
        if d1 is not None and v <= d1:
            raise ValueError(f"must be > nakagami_distance1_m ({d1})")
        return v

    @field_validator("background_schedule")
    @classmethod
    def _schedule(cls, v):
        if v is None:
            return v
        ts = [t for t, _ in v]
        if not v or ts[0] != 0 or any(b <= a for a, b in zip(ts, ts[1:])) or any(r < 0 for _, r in v):
            raise ValueError(f"background_schedule must be [[0, rate_bps], [t1, rate_bps], ...] with t ascending "
                             f"and rates >= 0 (bit/s); got {v}")
        return v

    @field_validator("background_period_s")
    @classmethod
    def _period(cls, v, info):
        # the schedule repeats every period (time modulo the period): an entry at or past it would never apply
        sched = info.data.get("background_schedule")
        if v is not None and sched:
            late = [t for t, _ in sched if t >= v]
            if late:
                raise ValueError(f"background_schedule has times {', '.join(f'{t:g}' for t in late)} s at or past "
                                 f"background_period_s ({v:g} s), which would never apply (the schedule repeats every "
                                 f"period): every time of the schedule must be in [0, background_period_s); give a "
                                 f"longer period or drop those entries")
        return v


def _integer(name: str, v: Any, lo: int, hi: int | None, what: str) -> int:
    """``v`` as an int if it is an integer (``int`` or numpy integer, not a bool, float or string) in ``[lo, hi]``.

    Raises:
        ValueError: names the argument, the value and its type, and the valid range.
    """
    rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"ns3-v0: {name} must be an integer {rng} ({what}); got {v!r} ({type(v).__name__})")
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"ns3-v0: {name} must be an integer {rng} ({what}); got {v!r}")
    return int(v)


def _step(call: str, t: Any) -> int:
    """The step ``t`` of ``send``/``deliver`` as an int (an integer >= 0).

    Raises:
        ValueError: ``t`` is negative, a float, a bool or a string.
    """
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or t < 0:
        raise ValueError(f"ns3-v0: {call}(t): t must be an integer >= 0 (the step); got {t!r}")
    return int(t)


class Ns3Channel(Channel):
    """Network-in-the-loop channel over a real ns-3 802.11 ad-hoc network (see the module docstring).

    ``stats()`` keys (run totals since ``reset``): ``comm/{offered,delivered,lost,queued}_{bytes,copies}``,
    ``comm/lost_{bytes,copies}/{seq_gap,timeout,late}``, ``comm/messages_sent``,
    ``comm/latency_{mean,p50,p95,max}_s``, ``comm/ns3/background_{tx,rx}_bytes``,
    ``comm/ns3/sim_time_s``. :meth:`per_copy` gives int64 ``[E, N, N]`` (env, sender, receiver) counters.

    A context manager: ``with Ns3Channel(...) as ch:`` closes the channel (ends the ns-3 child) on leaving the block.

    Raises:
        ConfigError: a bad param at construction (a value out of range, nan or inf, an unknown key), one line naming
            the key, as a config file's ``channel.params`` get; at :meth:`send` (:meth:`check_message_size`), key
            ``channel.params.header_bytes``: messages too wide for an IP packet with that header.
        DependencyNotInstalled: at the first ``reset`` when ns-3 is missing (says how to install it).
        ChannelError: ns-3 did not answer within ``step_timeout_s`` or crashed; any call but ``reset``/``close``
            before the first ``reset`` (``call reset() first``).
    """

    Params = Ns3Params

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._proc: BridgeProcess | None = None
        self._ready = False
        self._was_reset = False  # the accounting state exists (stats() stays readable after close or a failure)
        self._pending: int | None = None  # window submitted to ns-3 whose reply is not read yet

    def __enter__(self) -> "Ns3Channel":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ lifecycle
    def _config_text(self, seed: int) -> bytes:
        p = self.params
        cfg = dict(
            rng_seed=1 + (seed // 2**32) % (2**32 - 1), rng_run=seed % 2**32,
            num_envs=self.E, num_agents=self.N, standard=p.standard, rate_manager=p.rate_manager,
            data_mode=p.data_mode or _DEFAULT_MODE[p.standard], control_mode=_BASIC_MODE[p.standard],
            tx_power_dbm=repr(p.tx_power_dbm), log_distance_exponent=repr(p.log_distance_exponent),
            reference_distance_m=repr(p.reference_distance_m),
            reference_loss_db=repr(p.reference_loss_db if p.reference_loss_db is not None
                                   else _FREE_SPACE_1M_DB[p.standard]),
            nakagami=int(p.nakagami), nakagami_m0=repr(p.nakagami_m0), nakagami_m1=repr(p.nakagami_m1),
            nakagami_m2=repr(p.nakagami_m2), nakagami_distance1_m=repr(p.nakagami_distance1_m),
            nakagami_distance2_m=repr(p.nakagami_distance2_m), send_jitter_s=repr(p.send_jitter_s),
            background_pairs=p.background_pairs, background_packet_bytes=p.background_packet_bytes,
            background_poisson=int(p.background_poisson), background_x_m=repr(p.background_position_m[0]),
            background_y_m=repr(p.background_position_m[1]), background_z_m=repr(p.background_position_m[2]),
            mac_queue_max_delay_s=repr(p.mac_queue_max_delay_s),
        )
        return "".join(f"{k}={v}\n" for k, v in cfg.items()).encode()

    def reset(self, seed, *, num_envs, num_agents, dt_s, scenario=None):
        """Start an episode: (re)build the ns-3 networks in the child process (started on first use).

        Args:
            seed: episode seed (int >= 0; None draws one from the OS).
            num_envs, num_agents: ``E`` and ``N``; ``E <= 256``.
            dt_s: simulated seconds per step (> 0).
            scenario: anything with ``positions() -> float64 [E, N, 3]`` (m), or None.

        Raises:
            ValueError: ``seed``, ``num_envs`` or ``num_agents`` is not an integer in its range (a float, bool or
                string is refused, not truncated), more than 60000 ns-3 nodes per env (``num_agents + 2 *
                background_pairs``), ``dt_s`` not a finite number > 0, or ``send_jitter_s >= dt_s``.
            DependencyNotInstalled: no ns-3. ChannelError: ns-3 failed.
        """
        p = self.params
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % 2**63)
        seed = _integer("seed", seed, 0, None, "the episode seed, or None")
        num_envs = _integer("num_envs", num_envs, 1, 256, "envs, each its own ns-3 network")
        num_agents = _integer("num_agents", num_agents, 1, None, "agent slots per env")
        nodes = num_agents + 2 * p.background_pairs
        if nodes > NODES_PER_ENV_MAX:
            raise ValueError(f"ns3-v0: num_agents + 2 * background_pairs = {num_agents} + 2 * {p.background_pairs} "
                             f"= {nodes} ns-3 nodes per env, over the limit of {NODES_PER_ENV_MAX} nodes per env "
                             "(each env is one /16 IPv4 subnet)")
        if isinstance(dt_s, (bool, np.bool_)) or not isinstance(dt_s, (int, float, np.integer, np.floating)) or not (
                np.isfinite(dt_s) and dt_s > 0):
            raise ValueError(f"ns3-v0 needs dt_s a finite number > 0 (s), got {dt_s!r}")
        if p.send_jitter_s >= dt_s:
            raise ValueError(f"ns3-v0 send_jitter_s ({p.send_jitter_s} s) must be < dt_s ({dt_s} s)")
        self._was_reset = False  # the sizes change now: the old totals no longer fit until this reset is done
        self.E, self.N, self.dt_s = int(num_envs), int(num_agents), float(dt_s)
        self.scenario = scenario
        self._positions_fn = getattr(scenario, "positions", None) if scenario is not None else None
        if self._positions_fn is None:
            warnings.warn("ns3-v0: the scenario has no positions(); agents stand on a line "
                          f"{p.fallback_spacing_m} m apart", stacklevel=2)
        line = np.zeros((self.E, self.N, 3))
        line[:, :, 0] = np.arange(self.N) * p.fallback_spacing_m
        self._fallback = line
        if self._ready and getattr(self, "_pending", None) is not None:
            try:
                self._collect()  # keep the pipe in step: read the reply of the last submitted window
            except ChannelError:
                pass  # the child died; a new one starts below
        self._pending = None
        if self._proc is None or not self._proc.alive:
            self._proc = BridgeProcess(ensure_bridge())
        self._ready = False
        cfg = self._config_text(seed)
        try:
            self._proc.request(b"R" + struct.pack("<I", len(cfg)) + cfg, p.reset_timeout_s)
        except ChannelError as exc:
            if "error while loading shared libraries" in str(exc):  # ns-3 removed after the bridge was built
                raise DependencyNotInstalled(f"the ns-3 bridge cannot load ns-3: {exc}. {INSTALL_HINT}") from exc
            raise
        self._ready = self._was_reset = True
        # accounting state
        self._next_id = 0
        self._seq = np.zeros((self.E, self.N, self.N), np.int64)
        self._q = {k: np.zeros(0, np.int64) for k in ("key", "env", "src", "dst", "size", "seq", "t_sent_step")}
        self._q_payload = np.zeros((0, 0), np.float32)
        self._arrived: list[tuple] = []  # (arrival step, copies, sizes, latencies) received, not yet delivered
        self._served_to = 0  # windows [0, _served_to) have been simulated
        shape = (self.E, self.N, self.N)
        keys = ["offered", "delivered"] + [f"lost/{c}" for c in CAUSES]
        self.totals = {f"{k}_{u}": np.zeros(shape, np.int64) for k in keys for u in ("bytes", "copies")}
        self._messages = 0
        self._latencies: list[np.ndarray] = []
        self._fb: dict[int, Feedback] = {}
        self._bg = np.zeros(2, np.int64)
        self._late_arrivals = 0
        self._lost_log: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (send step, env, bytes) of lost copies
        self._sim_time_s = 0.0
        self._payload_dim = 0
        self.last_latencies_s = np.zeros(0)

    def close(self) -> None:
        """End the child process (idempotent); a later ``reset`` starts a new one."""
        if self._proc is not None:
            if self._pending is not None:
                try:
                    self._proc.collect(self.params.step_timeout_s)
                except ChannelError:
                    pass
            self._proc.close()
            self._proc = None
        self._ready = False
        self._pending = None

    def __del__(self):  # the BridgeProcess finalizer does the work; this only makes it prompt
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ helpers
    _NOT_READY = "ns3-v0: call reset() first (or again, after an ns-3 failure or close())"

    def _require_ready(self) -> None:
        if not self._ready:
            raise ChannelError(self._NOT_READY)

    def _require_reset(self) -> None:
        """The accounting readers (stats, per_copy, ...) need one reset; after close or an ns-3 failure they still
        read the totals so far."""
        if not self._was_reset:
            raise ChannelError(self._NOT_READY)

    def _positions(self) -> np.ndarray:
        if self._positions_fn is None:
            return self._fallback
        pos = np.asarray(self._positions_fn(), dtype=np.float64)
        if pos.shape != (self.E, self.N, 3):
            raise ValueError(f"ns3-v0: scenario.positions() must be float64 [E={self.E}, N={self.N}, 3] (m); "
                             f"got shape {pos.shape}")
        if not np.isfinite(pos).all():
            raise ValueError("ns3-v0: scenario.positions() contains NaN or inf")
        return pos

    def _bg_rate(self, k: int) -> float:
        p = self.params
        if p.background_pairs == 0:
            return 0.0
        if p.background_schedule is None:
            return float(p.background_rate_bps)
        t = k * self.dt_s
        if p.background_period_s is not None:
            t = t % p.background_period_s
        ts = [s for s, _ in p.background_schedule]
        i = int(np.searchsorted(ts, t + 1e-12, side="right")) - 1
        return float(p.background_schedule[max(i, 0)][1])

    def background_rate_bps(self, t: int) -> float:
        """Offered load of each background pair during step ``t`` (bit/s).

        Raises:
            ChannelError: before the first ``reset`` (the step length is not known yet).
        """
        self._require_reset()
        return self._bg_rate(t)

    def _count(self, key, env, src, dst, size):
        scatter_add(self.totals[f"{key}_bytes"], (env, src, dst), size)
        scatter_add(self.totals[f"{key}_copies"], (env, src, dst), None)

    def _fate(self, decided: int, env, src, size, delivered: bool, latency_s=None) -> None:
        fb = self._fb.setdefault(int(decided), Feedback.zeros(self.E, self.N))
        if delivered:
            scatter_add(fb.delivered_copies, (env, src), None)
            scatter_add(fb.delivered_bytes, (env, src), size)
            if latency_s is not None and len(latency_s):
                np.maximum.at(fb.latency_max_s, (np.asarray(env, np.int64), np.asarray(src, np.int64)), latency_s)
        else:
            scatter_add(fb.lost_copies, (env, src), None)
            scatter_add(fb.lost_bytes, (env, src), size)

    def _take(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Remove the in-flight copies under ``mask``; returns their fields (and ``payload``)."""
        q = self._q
        out = {k: v[mask] for k, v in q.items()}
        out["payload"] = self._q_payload[mask]
        self._q = {k: v[~mask] for k, v in q.items()}
        self._q_payload = self._q_payload[~mask]
        return out

    def _lose(self, mask: np.ndarray, cause: str, decided: int) -> None:
        if mask.any():
            c = self._take(mask)
            self._lost_log.append((c["t_sent_step"], c["env"], c["size"]))
            self._count(f"lost/{cause}", c["env"], c["src"], c["dst"], c["size"])
            self._fate(decided, c["env"], c["src"], c["size"], False)

    # ------------------------------------------------------------------ one ns-3 window
    def _submit(self, k: int, wire: np.ndarray) -> None:
        """Ask ns-3 to simulate ``[k dt, (k+1) dt)`` with the messages ``wire`` leaving at ``k dt``; the
        reply is read by :meth:`_collect`, so ns-3 runs while the caller steps its scenario."""
        head = struct.pack("<cIddd", b"S", len(wire), k * self.dt_s, (k + 1) * self.dt_s, self._bg_rate(k))
        pos = np.ascontiguousarray(self._positions(), dtype="<f8")
        try:
            self._proc.submit(head + pos.tobytes() + wire.tobytes(), self.params.step_timeout_s)
        except ChannelError:
            self._ready = False  # the child is gone: the next call must be reset()
            raise
        self._pending = k

    def _collect(self) -> None:
        """Read and account the reply of the window submitted last, if any."""
        if self._pending is None:
            return
        k, self._pending = self._pending, None
        try:
            reply = self._proc.collect(self.params.step_timeout_s)
        except ChannelError:
            self._ready = False
            raise
        n, now_s, bg_tx, bg_rx = struct.unpack_from("<IdQQ", reply)
        rx = np.frombuffer(reply, dtype=_RX, count=n, offset=28)
        self._sim_time_s, self._bg[:] = now_s, (bg_tx, bg_rx)
        arrival = k + 1
        if n:
            rkey = rx["id"].astype(np.int64) * self.N + rx["rx"].astype(np.int64)
            qkey = self._q["key"]
            idx = np.searchsorted(qkey, rkey)
            found = idx < len(qkey)
            found[found] = qkey[idx[found]] == rkey[found]
            self._late_arrivals += int((~found).sum())
            hit = np.zeros(len(qkey), bool)
            hit[idx[found]] = True
            t_rx = np.zeros(len(qkey))
            t_rx[idx[found]] = rx["t"][found]
            got_t = t_rx[hit]
            c = self._take(hit)
            if len(c["key"]) and self.params.latency_bound_s is not None:
                # arrived after the bound: the receiver discards it (application level), a loss decided now
                late = got_t - c["t_sent_step"] * self.dt_s > self.params.latency_bound_s + 1e-9
                if late.any():
                    self._lost_log.append((c["t_sent_step"][late], c["env"][late], c["size"][late]))
                    self._count("lost/late", c["env"][late], c["src"][late], c["dst"][late], c["size"][late])
                    self._fate(arrival, c["env"][late], c["src"][late], c["size"][late], False)
                    seq_late = c["seq"][late], c["env"][late], c["src"][late], c["dst"][late]
                    c = {k: v[~late] for k, v in c.items()}
                    got_t = got_t[~late]
                    # the late copies arrived: earlier missing copies of their pairs are lost too
                    last_late = np.full((self.E, self.N, self.N), -1, np.int64)
                    np.maximum.at(last_late, seq_late[1:], seq_late[0])
                    q = self._q
                    self._lose(q["seq"] < last_late[q["env"], q["src"], q["dst"]], "seq_gap", arrival)
            if len(c["key"]):
                batch = MessageBatch(c["env"].astype(np.int32), c["src"].astype(np.int32), c["dst"].astype(np.int32),
                                     c["payload"], c["t_sent_step"] * self.dt_s)
                self._arrived.append((arrival, batch, c["size"], got_t - c["t_sent_step"] * self.dt_s))
                # per-receiver sequence numbers: earlier copies of the same pair that are still missing are lost
                last = np.full((self.E, self.N, self.N), -1, np.int64)
                np.maximum.at(last, (c["env"], c["src"], c["dst"]), c["seq"])
                q = self._q
                self._lose(q["seq"] < last[q["env"], q["src"], q["dst"]], "seq_gap", arrival)
        q = self._q
        if self.params.latency_bound_s is not None:
            # not received within the bound: useless to its receiver, lost now (as bandwidth-v0 drops it), so
            # its sender hears of it one step later; if ns-3 still delivers it, it is a late arrival
            self._lose((arrival - q["t_sent_step"]) * self.dt_s >= self.params.latency_bound_s - 1e-9, "late", arrival)
            q = self._q
        timeout_steps = self.params.loss_timeout_s / self.dt_s
        self._lose((arrival - q["t_sent_step"]) >= timeout_steps - 1e-9, "timeout", arrival)

    def _window(self, k: int, wire: np.ndarray) -> None:
        """Simulate ``[k dt, (k+1) dt)`` now (submit and collect)."""
        self._submit(k, wire)
        self._collect()

    def _advance_to(self, k: int) -> None:
        empty = np.zeros(0, _WIRE)
        while self._served_to < k:
            self._window(self._served_to, empty)
            self._served_to += 1

    # ------------------------------------------------------------------ Channel API
    def check_message_size(self, batch: MessageBatch | None) -> None:
        """Refuse messages of ``batch``'s payload width whose IP packet (payload bytes + ``header_bytes``) would exceed
        65535 B, IPv4's limit (ns-3 would drop it unseen); by the width alone, so an empty batch of that width is
        refused too. Needs no ns-3 and no ``reset``: :meth:`send` calls it, and the runner calls it on an agent's
        first messages (``coopsim validate`` and ``coopsim run`` then fail before a run folder exists).

        Raises:
            ConfigError: key ``channel.params.header_bytes`` (a ``ValueError`` too), one line naming its value, the
                payload size and the limit, and the largest ``header_bytes`` and payload width that fit.
        """
        payload = getattr(batch, "payload", None)
        if payload is None or getattr(payload, "ndim", 0) != 2:
            return  # no messages, or not a MessageBatch (send's own checks say so)
        h = self.params.header_bytes
        width, item = int(payload.shape[1]), int(payload.dtype.itemsize)
        size = width * item
        packet = size + h
        if packet <= IP_PACKET_MAX_BYTES:
            return
        most = (IP_PACKET_MAX_BYTES - h) // item
        room = IP_PACKET_MAX_BYTES - size
        fixes = ([f"give channel.params.header_bytes at most {room} (its range {UDP_IP_HEADER_BYTES} .. "
                  f"{HEADER_BYTES_MAX})"] if room >= UDP_IP_HEADER_BYTES else [])
        fixes.append(f"send at most {most} payload values per message" if most else "send fewer payload values")
        raise ConfigError(f"ns3-v0: header_bytes {h} + a message payload of {width} values x {item} B = {size} B makes "
                          f"an IP packet of {packet} B, over the limit of {IP_PACKET_MAX_BYTES} B (IPv4's 16-bit "
                          f"total length; ns-3 would drop it unseen); {' or '.join(fixes)}",
                          key="channel.params.header_bytes", value=h)

    def send(self, t: int, batch: MessageBatch | None) -> None:
        """Offer the messages of step ``t``; ns-3 simulates ``[t dt, (t+1) dt)`` while the caller goes on.

        Raises:
            ValueError: ``t`` is not an integer >= 0, env/src/dst out of range, or step ``t`` already simulated.
            ConfigError: (a ``ValueError``) key ``channel.params.header_bytes``: a message whose IP packet (payload
                bytes + ``header_bytes``) would exceed 65535 B (IPv4's limit; nothing is sent;
                :meth:`check_message_size`).
            ChannelError: not reset; ns-3 did not finish within ``step_timeout_s`` or crashed.
        """
        self._require_ready()
        t = _step("send", t)
        if batch is not None and len(batch):  # checked before anything reaches ns-3 or the accounting
            if ((batch.src < 0) | (batch.src >= self.N) | (batch.env < 0) | (batch.env >= self.E)
                    | (batch.dst < BROADCAST) | (batch.dst >= self.N) | (batch.dst == batch.src)).any():
                raise ValueError(f"message batch has env/src/dst outside [0, {self.E}) x [0, {self.N}) "
                                 "(dst may be -1 for broadcast, never the sender itself)")
            self.check_message_size(batch)
        self._collect()
        self._advance_to(t)
        if self._served_to > t:
            raise ValueError(f"ns3-v0: send({t}) after the channel simulated step {self._served_to - 1}; "
                             "call send(t) before deliver(t + 1)")
        wire = np.zeros(0, _WIRE)
        if batch is not None and len(batch):
            m = len(batch)
            self._messages += m
            self._payload_dim = batch.payload.shape[1]
            ids = self._next_id + np.arange(m, dtype=np.int64)
            self._next_id += m
            size = batch.size_bytes(self.params.header_bytes)
            wire = np.empty(m, _WIRE)
            wire["env"], wire["src"], wire["dst"], wire["size"], wire["id"] = (
                batch.env, batch.src, batch.dst, size, ids % 2**32)
            # copies, in (message id, receiver) key order
            recv = np.arange(self.N, dtype=np.int64)
            bc = batch.dst == BROADCAST
            dst_mat = np.where(bc[:, None], recv[None, :], batch.dst.astype(np.int64)[:, None])
            valid = np.where(bc[:, None], recv[None, :] != batch.src[:, None], recv[None, :] == 0)
            mi, ri = np.nonzero(valid)
            cdst = dst_mat[mi, ri]
            env, src = batch.env[mi].astype(np.int64), batch.src[mi].astype(np.int64)
            csize = size[mi]
            # per-(env, sender, receiver) sequence numbers, in batch order
            pair = (env * self.N + src) * self.N + cdst
            order = np.argsort(pair, kind="stable")
            ps = pair[order]
            first = np.r_[True, ps[1:] != ps[:-1]]
            start = np.maximum.accumulate(np.where(first, np.arange(len(ps)), 0))
            rank = np.empty(len(ps), np.int64)
            rank[order] = np.arange(len(ps)) - start
            flat = self._seq.reshape(-1)
            seq = flat[pair] + rank
            flat += np.bincount(pair, minlength=flat.size)
            new = dict(key=ids[mi] * self.N + cdst, env=env, src=src, dst=cdst, size=csize, seq=seq,
                       t_sent_step=np.full(len(mi), t, np.int64))
            self._count("offered", env, src, cdst, csize)
            self._q = {k: np.concatenate([self._q[k], new[k]]) for k in self._q}
            pay = batch.payload[mi]
            self._q_payload = pay if len(self._q_payload) == 0 else np.concatenate([self._q_payload, pay])
        self._submit(t, wire)  # answered while the caller steps its scenario; read by the next call
        self._served_to = t + 1

    def deliver(self, t: int) -> MessageBatch:
        """Copies received by ``t * dt_s`` and not returned before (broadcasts expanded, ``dst`` = receiver).

        After the call, :attr:`last_latencies_s` (float64 ``[M]``, s) holds each returned copy's ns-3
        latency, from its send time ``t_sent_s`` to its reception, row-aligned with the returned batch.

        Raises:
            ValueError: ``t`` is not an integer >= 0.
            ChannelError: not reset; ns-3 did not finish within ``step_timeout_s`` or crashed.
        """
        self._require_ready()
        t = _step("deliver", t)
        self._collect()
        self._advance_to(t)
        ready = [a for a in self._arrived if a[0] <= t]
        self._arrived = [a for a in self._arrived if a[0] > t]
        if not ready:
            self.last_latencies_s = np.zeros(0)
            return MessageBatch.empty(self._payload_dim)
        for _, b, size, latency in ready:
            self._count("delivered", b.env, b.src, b.dst, size)
            self._fate(t, b.env, b.src, size, True, latency)
            self._latencies.append(latency)
        self.last_latencies_s = np.concatenate([lat for _, _, _, lat in ready])
        return concat([b for _, b, _, _ in ready])

    def feedback(self, t: int) -> Feedback:
        """Per-sender delivered/lost counts decided up to ``deliver(t)`` and not reported before.

        A copy is decided when ns-3 delivered it (step after it arrived), when a later copy of the same
        (sender, receiver) pair arrived without it, or ``loss_timeout_s`` after it was sent.
        """
        self._require_ready()
        self._collect()
        return pop_feedback(self._fb, t, self.E, self.N)

    # ------------------------------------------------------------------ accounting
    def queued(self) -> dict[str, np.ndarray]:
        """int64 ``[E, N, N]``: copies and bytes in flight in ns-3 or received and not yet delivered.

        Raises:
            ChannelError: before the first ``reset``; ns-3 failed while finishing the last step.
        """
        self._require_reset()
        if self._ready:
            self._collect()
        out = {"queued_bytes": np.zeros((self.E, self.N, self.N), np.int64)}
        out["queued_copies"] = np.zeros_like(out["queued_bytes"])
        q = self._q
        scatter_add(out["queued_bytes"], (q["env"], q["src"], q["dst"]), q["size"])
        scatter_add(out["queued_copies"], (q["env"], q["src"], q["dst"]), None)
        for _, b, size, _ in self._arrived:
            scatter_add(out["queued_bytes"], (b.env, b.src, b.dst), size)
            scatter_add(out["queued_copies"], (b.env, b.src, b.dst), None)
        return out

    def per_copy(self) -> dict[str, np.ndarray]:
        """Run totals per (env, sender, receiver): offered/delivered/lost-by-cause/queued, bytes and copies.

        Raises:
            ChannelError: before the first ``reset``; ns-3 failed while finishing the last step.
        """
        self._require_reset()
        if self._ready:
            self._collect()
        return per_copy_view(self.totals, self.queued(), CAUSES)

    def lost_bytes_by_send_step(self, num_steps: int) -> np.ndarray:
        """int64 ``[num_steps, E]``: bytes of the copies sent at each step (and env) that were declared lost so
        far (a copy's fate is decided up to ``loss_timeout_s`` after sending; for oracles).

        Raises:
            ChannelError: before the first ``reset``.
        """
        self._require_reset()
        out = np.zeros((num_steps, self.E), np.int64)
        for step, env, size in self._lost_log:
            ok = step < num_steps
            np.add.at(out, (step[ok], env[ok]), size[ok])
        return out

    def latencies_s(self) -> np.ndarray:
        """float64 ns-3 latencies (s) of every copy delivered since reset (send time to ns-3 reception).

        Raises:
            ChannelError: before the first ``reset``; ns-3 failed while finishing the last step.
        """
        self._require_reset()
        if self._ready:
            self._collect()
        return np.concatenate(self._latencies) if self._latencies else np.zeros(0)

    def stats(self) -> dict[str, float]:
        """Run totals since ``reset`` (the keys of the class docstring); still readable after ``close``.

        Raises:
            ChannelError: before the first ``reset`` (``call reset() first``, as :meth:`send`); ns-3 failed while
                finishing the last step.
        """
        self._require_reset()
        s = flat_stats(self.per_copy(), CAUSES, self._messages, self.latencies_s())
        s["comm/ns3/background_tx_bytes"] = float(self._bg[0])
        s["comm/ns3/background_rx_bytes"] = float(self._bg[1])
        s["comm/ns3/late_arrivals"] = float(self._late_arrivals)
        s["comm/ns3/sim_time_s"] = float(self._sim_time_s)
        return s
