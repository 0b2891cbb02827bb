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


def _system_available() -> int | None:
    """psutil's ``available`` if installed, else ``MemAvailable`` of /proc/meminfo, else free pages."""
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


def _address_space_left() -> int | None:
    """What the process's soft address-space limit (``ulimit -v``, RLIMIT_AS) leaves beyond its current virtual
    size (``VmSize`` of /proc/self/status); None without a limit or where it cannot be read."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY or soft < 0:
            return None
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return max(0, soft - int(line.split()[1]) * 1024)
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return None


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def _cgroup_left() -> int | None:
    """What the cgroup's memory limit leaves (cgroup v2 ``memory.max - memory.current``, or v1
    ``memory.limit_in_bytes - memory.usage_in_bytes``) for the cgroup this process is in; None without a limit."""
    base = "/sys/fs/cgroup"
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.strip().split(":", 2)
                if len(parts) == 3 and parts[0] == "0" and parts[1] == "":  # v2: 0::/path
                    d = base + parts[2].rstrip("/")
                    lim, cur = _read_int(d + "/memory.max"), _read_int(d + "/memory.current")
                    if lim is not None and cur is not None:
                        return max(0, lim - cur)
    except OSError:
        pass
    lim, cur = _read_int(base + "/memory/memory.limit_in_bytes"), _read_int(base + "/memory/memory.usage_in_bytes")
    if lim is not None and cur is not None and lim < 2**60:  # v1 reports 'no limit' as a huge number
        return max(0, lim - cur)
    return None


def available_memory_bytes() -> int | None:
    """Memory available to a new allocation (bytes): the smallest of the machine's available memory (psutil's
    ``available``, else ``MemAvailable`` of /proc/meminfo, else free pages), what the process's address-space
    limit (``ulimit -v``) leaves, and what its cgroup's memory limit leaves (containers, batch schedulers); None
    when none of them is known."""
    known = [v for v in (_system_available(), _address_space_left(), _cgroup_left()) if v is not None]
    return min(known) if known else None


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
