"""A communicating team for ``mpe/simple_spread``: a belief-and-assignment policy plus a pluggable sender.

The action policy and the message sender are decoupled (the DDACOM premise): the same policy runs
with every sender, so return differences come from what the messages carried.

Policy (per agent, vectorized over envs and agents). Each agent keeps a belief of every entity's
position (agents ``0..N-1``, landmarks ``N..2N-1``): from its own observation (itself, landmarks and
agents within ``obs_radius_m``) and from messages (payload ``[entity_id, x_m, y_m]``, float32).
It solves the agent-to-landmark assignment that minimizes the summed believed distances (all ``N!``
permutations; unknown pairs cost ``unknown_cost_m``), and drives to its landmark with a bang-bang
velocity controller. If its landmark is still unknown it explores: it keeps a grid of cells it knows
to be searched (within ``obs_radius_m`` of its own or a teammate's position of this step, the latter
known by sight or message) and heads to the nearest unsearched cell, preferring cells far from
teammates.

Messages: each agent's candidates are its own position and every landmark it believes in; a message is
``[entity_id, x_m, y_m]`` zero-padded to ``payload_floats`` float32 values (the task's one payload size,
3 by default: a copy is ``3 * 4 + 28 = 40`` bytes). Full-broadcast demand per sender: ``(1 + N)(N - 1)``
copies per step.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from pydantic import Field

from coopsim.agents.comm_baselines.senders import (BroadcastSender, NoCommSender, NoveltySender, PeriodicSender,
                                                   Sender)
from coopsim.errors import ConfigError
from coopsim.platform.agent import AgentParams, AgentPlugin
from coopsim.platform.comm import DEFAULT_HEADER_BYTES, Feedback, MessageBatch

PAYLOAD = 3  # entity_id, x_m, y_m
COPY_BYTES = PAYLOAD * 4 + DEFAULT_HEADER_BYTES

SENDERS: dict[str, type[Sender]] = {"none": NoCommSender, "broadcast": BroadcastSender,
                                    "periodic": PeriodicSender, "novelty": NoveltySender}
#: every sender name :func:`sender_class` takes
SENDER_NAMES = ("ddacom", *SENDERS)


def sender_class(name: str) -> type[Sender]:
    """The sender class of a sender name (``ddacom`` or a baseline of :data:`SENDERS`).

    Raises:
        ConfigError: key ``sender``; an unknown name (lists the valid ones).
    """
    if name == "ddacom":
        from coopsim.agents.ddacom.sender import DDACOMSender

        return DDACOMSender
    if name not in SENDERS:
        raise ConfigError(f"unknown sender {name!r}; valid: ddacom, {', '.join(SENDERS)}", key="sender", value=name)
    return SENDERS[name]


def check_senders(senders: Any, *, file: str | None, key: str, given: str | None = None) -> list[str]:
    """``senders`` as a list of distinct known sender names, at least one.

    Raises:
        ConfigError: ``key``; a string or another non-list, an empty list, an unknown or repeated name.
    """
    eg = "e.g. [ddacom] or [none, broadcast, periodic, novelty, ddacom]"
    if not isinstance(senders, (list, tuple)):
        raise ConfigError(f"invalid value {senders!r}: must be a list of senders, {eg}", file=file, key=key,
                          value=senders)
    if not senders:
        shown = repr(given if given is not None else senders)
        raise ConfigError(f"no sender given ({shown}): the run would compute the "
                          f"anchors and report nothing; name at least one of {', '.join(SENDER_NAMES)}", file=file,
                          key=key, value=given if given is not None else senders)
    for snd in senders:
        if not isinstance(snd, str):
            raise ConfigError(f"invalid sender {snd!r} in {senders!r}: each sender is a name, one of "
                              f"{', '.join(SENDER_NAMES)}", file=file, key=key, value=snd)
        try:
            sender_class(snd)
        except ConfigError as exc:
            raise ConfigError(exc.message, file=file, key=key, value=snd) from None
    dup = sorted({s for s in senders if list(senders).count(s) > 1})
    if dup:
        raise ConfigError(f"sender {dup[0]!r} given twice; give each sender once (listed twice in {list(senders)}: a "
                          "repeat would count the same runs as a second sample)", file=file, key=key, value=dup[0])
    return list(senders)


def check_sender_params(name: str, params: dict[str, Any], *, key: str = "sender_params",
                        file: str | None = None) -> None:
    """Build sender ``name``'s params from ``params`` once, to fail early.

    Raises:
        ConfigError: ``key``.``<name>``.``<param>``: an unknown param (the valid ones listed) or a refused value.
    """
    sep = " " if key.startswith("--") else "."  # '--sender-param ddacom.x' (an option), 'sender_params.ddacom.x'
    _sender_params(name, params, key_prefix=f"{key}{sep}{name}.", file=file)


def _sender_params(name: str, params: dict[str, Any], *, key_prefix: str, file: str | None = None):
    """Sender ``name``'s params model built from ``params``: a number YAML 1.1 reads from other than a plain decimal
    (``010``, ``1_0`` in a run config's ``agents.params.sender_params``, which takes any mapping:
    :func:`~coopsim.platform.config.reject_yaml11_numbers`), ``true`` for a number or ``1`` for a boolean refused
    (:func:`~coopsim.platform.registry.reject_bools`), then the schema.

    Raises:
        ConfigError: key ``<key_prefix><param>``: an unknown param (the valid ones listed) or a refused value.
    """
    from pydantic import ValidationError

    from coopsim.platform.config import reject_yaml11_numbers
    from coopsim.platform.registry import pydantic_to_config_error, reject_bools

    cls = sender_class(name)
    reject_yaml11_numbers(params, cls.Params, file=file, key_prefix=key_prefix)
    reject_bools(params, cls.Params, file=file, key_prefix=key_prefix)
    try:
        return cls.Params(**params)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, cls.Params, file=file, key_prefix=key_prefix) from None


class SpreadTeamParams(AgentParams):
    sender: str = Field("broadcast", description="ddacom, none, broadcast, periodic or novelty")
    sender_params: dict[str, Any] = Field(default_factory=dict, description="the sender's params")
    unknown_cost_m: float = Field(3.0, gt=0, description="assignment cost of an unknown agent/landmark pair (m)")
    gain_per_s: float = Field(2.5, gt=0, description="desired speed per metre of distance to target (1/s)")
    max_speed_mps: float = Field(1.5, gt=0, description="cap on the desired speed (m/s)")
    deadband_mps: float = Field(0.25, ge=0, description="velocity error below which the agent does not push (m/s)")
    explore_cells: int = Field(8, ge=2, le=64, description="exploration grid cells per axis over [-1, 1] m")
    spread_weight: float = Field(0.7, ge=0, description="preference for exploring cells far from teammates (m/m)")
    view_margin: float = Field(0.8, gt=0, le=1, description="receiver_sees: fraction of the observation radius "
                               "within which a teammate is believed to see an entity (its position is a belief)")
    payload_floats: int = Field(PAYLOAD, ge=PAYLOAD, le=368, description="message payload width (float32 values), "
                                "[entity_id, x_m, y_m] then zeros; >= 3, <= 368 (a 1500 B IP packet)")


class SpreadCommTeam(AgentPlugin):
    """Belief/assignment team for simple_spread with a pluggable sender (see module docstring).

    ``on_feedback(fb)`` passes channel feedback to the sender (rate-adaptive senders need it; the
    runner calls it when it supports channel feedback, :func:`coopsim.agents.ddacom.evaluate.run` does).
    """

    Params = SpreadTeamParams

    @staticmethod
    def _make_sender(name: str, params: dict[str, Any]):
        """The sender ``name`` built with ``params`` (``agents.params.sender_params`` of a run config).

        Raises:
            ConfigError: key ``agents.params.sender_params.<param>``: an unknown param or a refused value.
        """
        _sender_params(name, params, key_prefix="agents.params.sender_params.")
        return sender_class(name)(**params)

    def __init__(self, scenario, **params):
        super().__init__(scenario, **params)
        p = self.params
        sp = getattr(scenario, "params", None)
        if sp is None or not hasattr(sp, "num_agents") or not hasattr(sp, "obs_radius_m"):
            from coopsim.platform.trainer import scenario_identity

            sid = scenario_identity(scenario)["id"] or type(scenario).__name__
            raise ConfigError(f"this agent (SpreadCommTeam: the spread teams of ddacom/* and comm/*) cannot act on "
                              f"scenario '{sid}': it needs an mpe/simple_spread scenario (e.g. mpe/simple_spread-v0)",
                              key="agents.id", also=("scenario.id",))
        self.N = scenario.num_agents
        self.E = scenario.num_envs
        self.radius = sp.obs_radius_m
        self.dt_s = scenario.dt_s
        self.sender = self._make_sender(p.sender, p.sender_params)
        self.copy_bytes = p.payload_floats * 4 + DEFAULT_HEADER_BYTES
        self.demand_bps = (1 + self.N) * (self.N - 1) * self.copy_bytes * 8 / self.dt_s
        self.sender.reset(self.E, self.N, 2 * self.N, self.dt_s, self.copy_bytes, self.demand_bps)
        self.perms = np.array(list(itertools.permutations(range(self.N))), np.int64)  # [P, N]
        self._others = np.array([[j for j in range(self.N) if j != i] for i in range(self.N)])
        self.candidates_offered = 0  # full-broadcast equivalent copies (valid candidates x teammates)
        self.candidates_per_env = np.zeros(self.E, np.int64)  # the same per env
        self.clock = 0  # steps since construction (send times are on this clock; `t` restarts each episode)
        self._reset_beliefs()

    def _reset_beliefs(self):
        E, N = self.E, self.N
        self.belief = np.zeros((E, N, 2 * N, 2))
        self.known = np.zeros((E, N, 2 * N), bool)
        self.fresh = np.zeros((E, N, N), bool)
        G = self.params.explore_cells
        c = (np.arange(G) + 0.5) / G * 2 - 1
        self.cells = np.stack(np.meshgrid(c, c, indexing="ij"), -1).reshape(-1, 2)  # [C, 2]
        self.searched = np.zeros((E, N, G * G), bool)
        self.t = 0

    def reset(self, seed=None):
        self._reset_beliefs()
        self.sender.new_episode()

    # ------------------------------------------------------------------ beliefs
    def _update(self, obs: np.ndarray, inbox: MessageBatch | None) -> None:
        E, N = self.E, self.N
        self.fresh[:] = False
        if inbox is not None and len(inbox):
            k = inbox.payload[:, 0].astype(np.int64)
            ag = k < N
            self.fresh[inbox.env[ag], inbox.dst[ag], k[ag]] = True
            self.belief[inbox.env, inbox.dst, k] = inbox.payload[:, 1:3]
            self.known[inbox.env, inbox.dst, k] = True
            self.sender.on_receive(inbox)
        pos = obs[..., 2:4].astype(np.float64)
        rel_l = obs[..., 4:4 + 2 * N].reshape(E, N, N, 2).astype(np.float64)
        rel_o = obs[..., 4 + 2 * N:2 + 4 * N].reshape(E, N, N - 1, 2).astype(np.float64)
        if self.radius is None:
            see_l = np.ones((E, N, N), bool)
            see_o = np.ones((E, N, N - 1), bool)
        else:
            flags = obs[..., 6 * N:]
            see_l, see_o = flags[..., :N] > 0.5, flags[..., N:] > 0.5
        ar = np.arange(N)
        self.belief[:, ar, ar] = pos
        self.known[:, ar, ar] = True
        lm = pos[:, :, None, :] + rel_l
        self.belief[:, :, N:] = np.where(see_l[..., None], lm, self.belief[:, :, N:])
        self.known[:, :, N:] |= see_l
        oth = pos[:, :, None, :] + rel_o  # [E, N, N-1, 2]
        idx = self._others  # [N, N-1]
        cur = self.belief[:, ar[:, None], idx]  # [E, N, N-1, 2]
        self.belief[:, ar[:, None], idx] = np.where(see_o[..., None], oth, cur)
        self.known[:, ar[:, None], idx] |= see_o
        self.fresh[:, ar, ar] = True
        self.fresh[:, ar[:, None], idx] |= see_o
        if self.radius is not None:
            d = np.linalg.norm(self.belief[:, :, :N, None, :] - self.cells[None, None, None], axis=-1)  # [E, i, j, C]
            self.searched |= ((d <= self.radius) & self.fresh[..., None]).any(axis=2)

    # ------------------------------------------------------------------ policy
    def _targets(self, obs: np.ndarray) -> np.ndarray:
        N, p = self.N, self.params
        A, L = self.belief[:, :, :N], self.belief[:, :, N:]
        kA, kL = self.known[:, :, :N], self.known[:, :, N:]
        d = np.linalg.norm(A[:, :, :, None, :] - L[:, :, None, :, :], axis=-1)  # [E, viewer, a, l]
        ok = kA[:, :, :, None] & kL[:, :, None, :]
        cost = np.where(ok, d, p.unknown_cost_m)
        pc = cost[:, :, np.arange(N)[None, :], self.perms].sum(axis=-1)  # [E, viewer, P]
        best = np.argmin(pc, axis=-1)
        mine = self.perms[best, np.arange(N)[None, :]]  # [E, viewer]
        tgt = np.take_along_axis(L, mine[..., None, None], axis=2)[:, :, 0]
        tknown = np.take_along_axis(kL, mine[..., None], axis=2)[..., 0]
        way = self._explore()
        return np.where(tknown[..., None], tgt, way)

    def _explore(self) -> np.ndarray:
        """float64 ``[E, N, 2]``: nearest unsearched cell, preferring cells far from known teammates."""
        N = self.N
        ar = np.arange(N)
        me = self.belief[:, ar, ar]  # [E, N, 2]
        d_me = np.linalg.norm(me[:, :, None, :] - self.cells[None, None], axis=-1)  # [E, N, C]
        d_tm = np.linalg.norm(self.belief[:, :, :N, None, :] - self.cells[None, None, None], axis=-1)  # [E, i, j, C]
        tm_known = self.known[:, :, :N] & ~np.eye(N, dtype=bool)[None]
        d_near = np.where(tm_known[..., None], d_tm, 3.0).min(axis=2)  # [E, N, C]
        cost = d_me - self.params.spread_weight * np.minimum(d_near, 1.0)
        cost = np.where(self.searched, np.inf, cost)
        best = np.argmin(cost, axis=-1)
        way = self.cells[best]
        return np.where(np.isinf(cost).all(axis=-1)[..., None], 0.0, way)

    def _control(self, obs: np.ndarray, target: np.ndarray) -> np.ndarray:
        p = self.params
        vel, pos = obs[..., 0:2].astype(np.float64), obs[..., 2:4].astype(np.float64)
        err = target - pos
        vd = err * p.gain_per_s
        sp = np.linalg.norm(vd, axis=-1, keepdims=True)
        vd = np.where(sp > p.max_speed_mps, vd / np.maximum(sp, 1e-9) * p.max_speed_mps, vd)
        ve = vd - vel
        ax = np.argmax(np.abs(ve), axis=-1)
        comp = np.take_along_axis(ve, ax[..., None], -1)[..., 0]
        act = np.where(ax == 0, np.where(comp < 0, 1, 2), np.where(comp < 0, 3, 4))
        return np.where(np.abs(comp) > p.deadband_mps, act, 0).astype(np.int64)

    # ------------------------------------------------------------------ AgentPlugin
    def candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """(values float64 ``[E, N, K, 2]`` (m), valid bool ``[E, N, K]``): own position and believed landmarks."""
        valid = np.zeros_like(self.known)
        ar = np.arange(self.N)
        valid[:, ar, ar] = True
        valid[:, :, self.N:] = self.known[:, :, self.N:]
        return self.belief.copy(), valid

    def receiver_sees(self) -> np.ndarray:
        """bool ``[E, N, K, R]``: sender ``i`` believes receiver ``r`` observes entity ``k`` itself now: ``i`` knows
        where ``r`` is and ``k`` lies within ``view_margin`` x the observation radius of it (never the diagonal)."""
        N = self.N
        ar = np.arange(N)
        rpos = self.belief[:, :, :N]  # [E, i, r, 2]: where i believes each teammate is
        d = np.linalg.norm(self.belief[:, :, :, None, :] - rpos[:, :, None, :, :], axis=-1)  # [E, i, k, r]
        sees = (d <= self.params.view_margin * self.radius) & self.known[:, :, None, :N]
        sees[:, ar, :, ar] = False
        return sees

    def act(self, obs, inbox=None):
        self._update(np.asarray(obs), inbox)
        values, valid = self.candidates()
        self.candidates_offered += int(valid.sum()) * (self.N - 1)
        self.candidates_per_env += valid.sum(axis=(1, 2)) * (self.N - 1)
        if self.radius is not None:
            self.sender.observe_receivers(self.receiver_sees())
        mask = self.sender.select(self.t, values, valid)
        self.sender.commit(mask, values)
        env, src, ent, dst = np.nonzero(mask)
        m = len(env)
        payload = np.zeros((m, self.params.payload_floats), np.float32)
        payload[:, 0] = ent
        payload[:, 1:PAYLOAD] = values[env, src, ent]
        out = MessageBatch(env.astype(np.int32), src.astype(np.int32), dst.astype(np.int32), payload,
                           np.full(m, self.clock * self.dt_s))
        actions = self._control(obs, self._targets(obs))
        self.t += 1
        self.clock += 1
        return actions, out

    def on_feedback(self, fb: Feedback | None) -> None:
        self.sender.on_feedback(fb)
