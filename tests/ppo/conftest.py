import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every tests/ppo test with one torch thread (tests/conftest.py's ``one_torch_thread``)."""
