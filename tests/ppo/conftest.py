import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Two threads on two busy shared cores run many times slower; the trainer's default is 1 too."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
