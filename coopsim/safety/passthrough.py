"""The pass-through shield: certifies nothing, changes nothing (the default when no shield is configured)."""
from __future__ import annotations

import numpy as np

from coopsim.platform.shield import Certificate, Shield


class PassThroughShield(Shield):
    """Returns a copy of the proposed joint action; ``certified`` is False (nothing was checked)."""

    needs_state = False

    def filter(self, safety_state, joint_action):
        out = np.array(joint_action, dtype=np.int64, copy=True)
        return out, Certificate(certified=np.zeros(out.shape[0], bool), changed=np.zeros(out.shape, bool))
