"""Suite-wide setup.

A shell without job control starts background jobs (``cmd &``, ``nohup``) with SIGINT ignored, and a Python started
that way never raises KeyboardInterrupt: the Ctrl-C tests would then fail for a reason outside coopsim. The test
process takes Python's normal SIGINT handler back; its child processes then start with the default disposition
(an installed handler, unlike an ignored signal, is not inherited across exec)."""
import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
