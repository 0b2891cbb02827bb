"""The pass-through shield: certifies nothing, changes nothing (the default when no shield is configured)."""
from __future__ import annotations

from typing import Any

import numpy as np

from coopsim.platform.shield import Certificate, Shield


class PassThroughShield(Shield):
    """Returns a copy of the proposed joint action; ``certified`` is False (nothing was checked).

    The joint action is checked as the other shields and the batched cores check it
    (:func:`~coopsim.platform.scenario.discrete_joint_actions`): shape ``[E, N]``, an integer dtype (bools and floats
    are refused, never cast) and, once the range is known, actions in ``0..A-1``. The shape and ``A`` come from the
    safety state when one is given, else from the scenario of the last :meth:`reset`; before any reset and without
    a state, only the dtype, a 2-D shape and ``>= 0`` are checked.
    """

    needs_state = False

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._space: tuple[tuple[int, int], int] | None = None  # ((E, N), A) of the last reset's scenario

    def reset(self, seed: int | None, scenario: Any) -> None:
        n = int(getattr(getattr(scenario, "action_space", None), "n", 0) or 0)
        try:
            self._space = ((int(scenario.num_envs), int(scenario.num_agents)), n) if n else None
        except (AttributeError, TypeError):
            self._space = None

    def filter(self, safety_state, joint_action):
        """The proposed joint action as a new int64 ``[E, N]`` array, and a certificate certifying nothing.

        Raises:
            ValueError: the joint action's shape is not ``[E, N]``, its dtype is not an integer one, or an action is
                out of ``0..A-1`` (:func:`~coopsim.platform.scenario.discrete_joint_actions`).
        """
        from coopsim.platform.scenario import discrete_joint_actions
        from coopsim.safety.state import SafetyState

        a = joint_action if type(joint_action) is np.ndarray else np.asarray(joint_action)
        if isinstance(safety_state, SafetyState):
            shape, n, valid = (safety_state.num_envs, safety_state.num_agents), int(safety_state.num_actions), None
        elif self._space is not None:
            (shape, n), valid = self._space, None
        else:  # neither a state nor a reset: the range is unknown
            if a.ndim != 2:
                raise ValueError(f"actions must have shape (num_envs, num_agents); got shape {a.shape}")
            shape, n, valid = a.shape, np.iinfo(np.int64).max, "0..A-1 (A: the scenario's actions, known after reset)"
        out = discrete_joint_actions(a, shape, n, valid)
        out = out.copy() if out is a else out  # a new array: the input is never shared
        return out, Certificate(certified=np.zeros(out.shape[0], bool), changed=np.zeros(out.shape, bool))
