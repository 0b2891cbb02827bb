"""Suite-wide setup.

A shell without job control starts background jobs (``cmd &``, ``nohup``) with SIGINT ignored, and a Python started
that way never raises KeyboardInterrupt: the Ctrl-C tests would then fail for a reason outside coopsim. The test
process takes Python's normal SIGINT handler back; its child processes then start with the default disposition
(an installed handler, unlike an ignored signal, is not inherited across exec)."""
import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_signal_handlers():
    """A command run in-process that was interrupted ignores SIGINT and SIGTERM from then on (``cli.py``'s
    ``_ignore_further_interrupts``: right for a process about to exit); put the test process's handlers back after
    every test, so later tests' child processes do not inherit an ignored SIGINT."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        if signal.getsignal(s) is not h and h is not None:
            signal.signal(s, h)


@pytest.fixture
def one_torch_thread():
    """One torch thread during the test (restored after): two threads on two busy shared cores run many times slower;
    the trainer's default is 1 too. Used by tests/ppo (autouse there) and by training tests elsewhere."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
