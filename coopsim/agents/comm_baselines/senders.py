"""Message senders: which candidate messages go to which teammate each step (vectorized).

A *candidate* is one entity-level fact an agent can tell a teammate: entity ``k``'s position
(``values [E, N, K, 2]``, valid where ``valid [E, N, K]``). A sender returns a mask
``[E, N, K, N]`` (env, sender, entity, receiver) of the copies to send this step; the diagonal
(sender = receiver) is never set. Full broadcast sends every valid candidate to every teammate.

Senders here: :class:`NoCommSender`, :class:`BroadcastSender`, :class:`PeriodicSender`,
:class:`NoveltySender`. DDACOM's sender is :class:`coopsim.agents.ddacom.sender.DDACOMSender`.
Every sender keeps, per (sender, receiver, entity), the value last sent (``last_sent``) and, per
(receiver-of-this-agent, teammate, entity), the value last heard from that teammate (``heard``),
which rankers use.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from coopsim.platform.comm import Feedback, MessageBatch


class SenderParams(BaseModel):
    """Base of every sender's params (the subclasses inherit these rules): unknown keys refused; every number finite
    (``inf`` or ``nan`` refused, as :class:`~coopsim.comm.probe.SafeRateProbeParams` refuses them: ``cap_m=inf``
    would mute DDACOM); a quoted number or boolean (``"1.75"``, ``"true"``) refused where a number or a boolean is
    taken, with the probe's message ("remove the quotes"), instead of being read as the number; so is a number YAML
    1.1 reads from other than a plain decimal (``010``, ``1_0``, ``0x10`` in a config:
    :class:`~coopsim.platform.config.YamlNumberText`), which pydantic would read as 10, 10 and an error."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_quoted_scalars(cls, v, info):
        # the rule of coopsim.platform.config.reject_quoted_scalars (which SafeRateProbe applies to its params)
        from coopsim.platform.config import _number_text_at_number, _quoted_scalar_at, quoted_advice

        f = cls.model_fields.get(info.field_name)
        yaml11 = None if f is None else _number_text_at_number(v, f.annotation, [info.field_name])
        if yaml11 is not None:  # (reject_yaml11_numbers says it first where a config's sender params are checked)
            raise ValueError(yaml11[0].problem())
        found = None if f is None else _quoted_scalar_at(v, f.annotation, [info.field_name])
        if found is not None:
            text, kind, _, write = found
            inside = f" in {v!r}" if text is not v else ""
            required = {"int": "an integer", "float": "a number", "bool": "a boolean (true or false)"}[kind]
            raise ValueError(f"{required} is required, not a string{inside} ({quoted_advice(text, write)})")
        return v


class Sender(ABC):
    """Base sender: bookkeeping of what was sent and heard (see module docstring)."""

    Params = SenderParams
    uses_feedback = False

    def __init__(self, **params):
        """The sender with its :attr:`Params` ``params``.

        Raises:
            ConfigError: a refused param, in one line naming the key, the value and what is valid (as SafeRateProbe
                and a run config's params do; not pydantic's ValidationError).
        """
        from coopsim.platform.registry import checked_params

        self.params = checked_params(self.Params, params, type(self).__name__)

    def reset(self, num_envs: int, num_agents: int, num_entities: int, dt_s: float, copy_bytes: int,
              demand_bps: float) -> None:
        """Start a run: ``copy_bytes`` is one copy's size, ``demand_bps`` the full-broadcast demand per sender."""
        E, N, K = num_envs, num_agents, num_entities
        self.E, self.N, self.K, self.dt_s = E, N, K, dt_s
        self.copy_bytes, self.demand_bps = int(copy_bytes), float(demand_bps)
        self.last_sent = np.zeros((E, N, N, K, 2))  # [env, sender, receiver, entity]
        self.has_sent = np.zeros((E, N, N, K), bool)
        self.last_any = np.zeros((E, N, K, 2))  # sender's last sent value of each entity, any receiver
        self.has_any = np.zeros((E, N, K), bool)
        self.heard = np.zeros((E, N, N, K, 2))  # [env, me, teammate, entity]: what teammate told me
        self.has_heard = np.zeros((E, N, N, K), bool)
        self._offdiag = ~np.eye(N, dtype=bool)

    def new_episode(self, env_ids: np.ndarray | None = None) -> None:
        """Forget message history (beliefs restart) but keep network state (rates, buckets)."""
        ids = slice(None) if env_ids is None else env_ids
        for a in (self.has_sent, self.has_any, self.has_heard):
            a[ids] = False

    @abstractmethod
    def select(self, t: int, values: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """bool mask of the candidate copies to send at step ``t``."""

    def commit(self, mask: np.ndarray, values: np.ndarray) -> None:
        """Record the copies ``mask [E, N, K, R]`` as sent."""
        m = np.moveaxis(mask, 3, 2)  # [E, N, R, K]
        self.last_sent = np.where(m[..., None], values[:, :, None], self.last_sent)
        self.has_sent |= m
        anym = mask.any(axis=3)
        self.last_any = np.where(anym[..., None], values, self.last_any)
        self.has_any |= anym

    def on_receive(self, inbox: MessageBatch | None) -> None:
        """Record delivered copies (payload ``[entity_id, x_m, y_m]``)."""
        if inbox is None or len(inbox) == 0:
            return
        k = inbox.payload[:, 0].astype(np.int64)
        self.heard[inbox.env, inbox.dst, inbox.src, k] = inbox.payload[:, 1:3]
        self.has_heard[inbox.env, inbox.dst, inbox.src, k] = True

    def on_feedback(self, fb: Feedback | None) -> None:
        """Per-sender delivery feedback (only rate-adaptive senders use it)."""

    def observe_receivers(self, sees: np.ndarray) -> None:
        """Before :meth:`select`: bool ``[E, N, K, R]``, whether sender ``i`` believes receiver ``r`` observes entity
        ``k`` itself this step (so a copy would tell it nothing). Senders that model receivers use it; default:
        ignored."""

    def _all(self, valid: np.ndarray) -> np.ndarray:
        return valid[..., None] & self._offdiag[None, :, None, :]


class NoCommSender(Sender):
    """Sends nothing."""

    def select(self, t, values, valid):
        return np.zeros(valid.shape + (self.N,), bool)


class BroadcastSender(Sender):
    """Full broadcast: every valid candidate to every teammate, every step."""

    def select(self, t, values, valid):
        return self._all(valid)


class PeriodicParams(SenderParams):
    period_steps: int = Field(2, ge=1, description="full broadcast every this many steps, >= 1")


class PeriodicSender(Sender):
    """Full broadcast every ``period_steps`` steps (agent ``i`` at steps ``t = i mod period``): a fixed rate."""

    Params = PeriodicParams

    def select(self, t, values, valid):
        p = self.params.period_steps
        on = ((t - np.arange(self.N)) % p == 0)[None, :, None, None]
        return self._all(valid) & on


class NoveltyParams(SenderParams):
    threshold_m: float = Field(0.1, ge=0, description="send when the value moved more than this (m) since last sent to that teammate")


class NoveltySender(Sender):
    """Novelty threshold: send entity ``k`` to teammate ``r`` when it changed by more than ``threshold_m``
    since it was last sent to ``r`` (or was never sent). No rate control."""

    Params = NoveltyParams

    def select(self, t, values, valid):
        last = np.moveaxis(self.last_sent, 2, 3)  # [E, N, K, R]
        sent = np.moveaxis(self.has_sent, 2, 3)
        dev = np.linalg.norm(values[..., None, :] - last, axis=-1)
        return self._all(valid) & (~sent | (dev > self.params.threshold_m))
