"""ns-3 tests: skipped (with how to install ns-3) when ns-3 is missing, unless COOPSIM_REQUIRE_NS3=1."""
from __future__ import annotations

import os

import pytest

from coopsim.errors import DependencyNotInstalled


@pytest.fixture(scope="session")
def ns3_bridge():
    """Path of the built ns-3 bridge; skip (or fail under COOPSIM_REQUIRE_NS3=1) when ns-3 is absent."""
    from coopsim.comm.ns3.build import ensure_bridge

    try:
        return ensure_bridge()
    except DependencyNotInstalled as exc:
        if os.environ.get("COOPSIM_REQUIRE_NS3") == "1":
            pytest.fail(f"COOPSIM_REQUIRE_NS3=1 but ns-3 is unusable: {exc}")
        pytest.skip(f"ns-3 not available: {exc}")
