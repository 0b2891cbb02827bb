"""Every registered smac/* id passes coopsim.testing.check_scenario."""
from __future__ import annotations

import pytest

from coopsim.platform.registry import list_ids
from coopsim.testing import check_scenario

SMAC_IDS = [i for i in list_ids("scenario") if i.startswith("smac/")]


def test_all_maps_registered():
    assert len(SMAC_IDS) == 27   # 26 maps and the generic smac/SMAC-v0 (any map_name)
    assert "smac/3m-v0" in SMAC_IDS and "smac/corridor-v0" in SMAC_IDS and "smac/zerg_10_vs_10-v0" in SMAC_IDS
    assert "smac/SMAC-v0" in SMAC_IDS


@pytest.mark.parametrize("scenario_id", SMAC_IDS)
def test_check_scenario(scenario_id):
    check_scenario(scenario_id, num_steps=40, api_cycles=20)
