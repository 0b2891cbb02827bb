"""Memory pre-checks: refuse, before allocating, an array set larger than a share of the available memory.

Used where a config value sizes a large allocation (MAPF distance maps, PPO rollout buffers, the QMIX replay
buffer), so the user gets a ConfigError naming the key and what fits instead of numpy's ``MemoryError`` from deep
inside.
"""
from __future__ import annotations

#: allocations smaller than this are never refused (a busy machine's free memory is no reason to refuse 64 MiB)
MEMORY_CHECK_MIN_BYTES = 256 * 2**20
#: fraction of the available memory one checked allocation may take
MEMORY_FRACTION = 0.5


def available_memory_bytes() -> int | None:
    """Memory available to a new allocation (bytes): psutil's ``available`` if installed, else ``MemAvailable``
    of /proc/meminfo, else free pages (``os.sysconf('SC_AVPHYS_PAGES')``); None when none of them is known."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - not installed or not supported here
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os

        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def over_limit(need: int) -> tuple[int, int] | None:
    """``(limit, available)`` in bytes when ``need`` bytes exceed :data:`MEMORY_FRACTION` of the available
    memory (and :data:`MEMORY_CHECK_MIN_BYTES`); None when the allocation may go ahead or the available memory is
    unknown. The caller raises its ConfigError with the key that sized the allocation."""
    if need <= MEMORY_CHECK_MIN_BYTES:
        return None
    avail = available_memory_bytes()
    if avail is None:
        return None
    limit = int(avail * MEMORY_FRACTION)
    return None if need <= limit else (limit, avail)


def gib(b: float) -> str:
    """``b`` bytes as ``'1.5 GiB'``, or ``'64 MiB'`` below 1 GiB."""
    return f"{b / 2**30:.1f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"
