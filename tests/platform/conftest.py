"""Fixtures shared by the platform tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def second_episode_fails(monkeypatch):
    """Make the runner's second episode raise ``RuntimeError("boom in episode 2")`` (the first runs for real)."""
    from coopsim.platform import runner

    real, calls = runner.run_episode, []

    def second_fails(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom in episode 2")
        return real(*a, **k)

    monkeypatch.setattr(runner, "run_episode", second_fails)
