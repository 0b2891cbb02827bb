"""Length-prefixed ``.npz`` frames over binary pipes: the wire format between ``smax_core.py`` (coopsim's venv) and
``_smax_core_worker.py`` (the JaxMARL venv). An 8-byte little-endian length, then an ``np.savez`` archive: portable
across numpy versions and free of pickle. Imports only numpy, so both venvs import it."""
from __future__ import annotations

import io
import struct

import numpy as np


def write_frame(f, arrays: dict) -> None:
    """Write ``arrays`` (name -> array) to the binary stream ``f`` as one frame and flush."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    b = buf.getvalue()
    f.write(struct.pack("<Q", len(b)) + b)
    f.flush()


def read_frame(f) -> dict[str, np.ndarray] | None:
    """The next frame of ``f`` as name -> array, or None at end of stream (the other side closed the pipe)."""
    head = f.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    with np.load(io.BytesIO(f.read(n))) as z:
        return {k: z[k] for k in z.files}
