"""The ns-3 child process: framed requests over pipes, a deadline on every reply, clean shutdown.

The bridge (``native/bridge.cc``) reads requests on its stdin and answers on its stdout; it opens no
operating-system socket, so nothing listens on any interface. Every request has a deadline: a reply
that does not come in time (a stuck ns-3) or a child that dies (a crashed ns-3) kills the child and
raises :class:`coopsim.errors.ChannelError` with the end of its stderr. The child also dies with its
parent (``PR_SET_PDEATHSIG``) and on EOF of its stdin, so it never outlives the Python process.
"""
from __future__ import annotations

import os
import selectors
import struct
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

from coopsim.errors import ChannelError

#: the longest single wait on the pipes (s); a longer deadline (``step_timeout_s=1e9``) is waited in such slices, as
#: ``select`` refuses a timeout past about 2.1e6 s (epoll's int milliseconds) with an OverflowError
_WAIT_SLICE_S = 3600.0


def _terminate(proc: subprocess.Popen, stderr_file) -> None:
    """Stop ``proc`` (polite quit already tried or impossible): SIGKILL, reap, close our ends."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - the kernel reaps SIGKILLed children
        pass
    for f in (proc.stdin, proc.stdout):
        try:
            if f is not None:
                f.close()
        except OSError:
            pass
    try:
        stderr_file.close()
    except OSError:
        pass


class BridgeProcess:
    """One running ``coopsim-ns3-bridge``.

    Args:
        binary: path of the bridge executable.

    Raises:
        ChannelError: the binary cannot be started.
    """

    def __init__(self, binary: Path):
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                close_fds=True, start_new_session=True, bufsize=0,
                env={k: v for k, v in os.environ.items() if k != "NS_LOG"},
            )
        except OSError as exc:
            self._stderr.close()
            raise ChannelError(f"cannot start the ns-3 bridge {binary}: {exc}") from exc
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._finalizer = weakref.finalize(self, _terminate, self.proc, self._stderr)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def _fail(self, what: str) -> ChannelError:
        alive = self.proc.poll() is None
        if alive:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        tail = self.stderr_tail()  # before the finalizer closes the file
        self._finalizer()  # reap and close our ends
        code = self.proc.returncode
        status = "was killed" if alive else f"exited with code {code}"
        msg = f"ns-3 bridge (pid {self.proc.pid}) {what}; it {status}"
        if tail:
            msg += f"; its stderr ends with:\n{tail}"
        return ChannelError(msg)

    def request(self, data: bytes, timeout_s: float) -> bytes:
        """Send one framed request and return the payload of its ``'K'`` reply (:meth:`submit` + :meth:`collect`).

        Raises:
            ChannelError: no reply within ``timeout_s`` (the child is killed), the child died, or it
                answered with an error frame.
        """
        self.submit(data, timeout_s)
        return self.collect(timeout_s)

    def submit(self, data: bytes, timeout_s: float) -> None:
        """Write one framed request without waiting for its reply (ns-3 works while the caller goes on)."""
        if not self.alive and self._finalizer.alive:
            raise self._fail("is not running")
        if not self._finalizer.alive:
            raise ChannelError("the ns-3 bridge was closed; reset the channel to start a new one")
        self._write_all(data, time.monotonic() + timeout_s, timeout_s)

    def collect(self, timeout_s: float) -> bytes:
        """Wait up to ``timeout_s`` for the reply of the oldest submitted request; returns its payload."""
        if not self._finalizer.alive:
            raise ChannelError("the ns-3 bridge was closed; reset the channel to start a new one")
        deadline = time.monotonic() + timeout_s
        head = self._read_exact(5, deadline, timeout_s)
        tag, n = head[:1], struct.unpack("<I", head[1:])[0]
        payload = self._read_exact(n, deadline, timeout_s) if n else b""
        if tag == b"E":
            raise ChannelError(f"ns-3 bridge error: {payload.decode(errors='replace')}")
        if tag != b"K":
            raise self._fail(f"sent an unknown reply frame {tag!r}")
        return payload

    def _write_all(self, data: bytes, deadline: float, timeout_s: float) -> None:
        view = memoryview(data)
        with selectors.DefaultSelector() as sel:
            sel.register(self._in, selectors.EVENT_WRITE)
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._fail(f"did not accept a request within {timeout_s:g} s (channel.params.step_timeout_s: "
                                     f"stuck, or a limit too small for this network; the default is 5 s)")
                if not sel.select(min(left, _WAIT_SLICE_S)):
                    continue  # a slice of a long deadline passed, or the deadline: the check above says which
                try:
                    k = os.write(self._in, view)
                except BrokenPipeError:
                    raise self._fail("closed its input (crashed)") from None
                except BlockingIOError:
                    continue
                view = view[k:]

    def _read_exact(self, n: int, deadline: float, timeout_s: float) -> bytes:
        chunks, got = [], 0
        with selectors.DefaultSelector() as sel:
            sel.register(self._out, selectors.EVENT_READ)
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._fail(f"did not answer within {timeout_s:g} s (channel.params.step_timeout_s: stuck, or a "
                                     f"limit too small for this network; the default is 5 s)")
                if not sel.select(min(left, _WAIT_SLICE_S)):
                    continue  # a slice of a long deadline passed, or the deadline: the check above says which
                chunk = os.read(self._out, n - got)
                if not chunk:
                    raise self._fail("closed its output (crashed)")
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def close(self, timeout_s: float = 2.0) -> None:
        """Ask the child to quit, wait up to ``timeout_s``, then kill it; idempotent."""
        if not self._finalizer.alive:
            return
        if self.proc.poll() is None:
            try:
                self.request(b"Q", timeout_s)
                self.proc.wait(timeout=timeout_s)
            except (ChannelError, subprocess.TimeoutExpired, OSError):
                pass
        self._finalizer()
