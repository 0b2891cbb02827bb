"""Find ns-3 and build ``coopsim-ns3-bridge``, the child process of the ``ns3-v0`` channel.

The bridge is one C++ file (``native/bridge.cc``) built with CMake against an installed ns-3
(``find_package(ns3)``; Debian 12's ``libns3-dev`` 3.37 is the tested one). It is built on first use,
or ahead of time by ``.ci/install-ns3.sh`` / ``python -m coopsim.comm.ns3.build``, into a build directory
outside the source tree:

* ``$COOPSIM_NS3_BUILD_DIR`` if set;
* else ``<checkout>/build/ns3`` when coopsim runs from a source checkout (gitignored);
* else ``~/.cache/coopsim/ns3``.

A build is keyed by a hash of the sources, so an edited ``bridge.cc`` is rebuilt; a file lock keeps
concurrent processes from building at the same time.

Errors: :class:`coopsim.errors.DependencyNotInstalled` (ns-3, CMake or a compiler missing, or the
build failed), with the command that installs what is missing; :class:`coopsim.errors.ConfigError` when the build
directory cannot be made or written (naming ``COOPSIM_NS3_BUILD_DIR`` and the path).
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from coopsim.errors import ConfigError, CoopsimError, DependencyNotInstalled

#: the environment variable that names the build directory
BUILD_DIR_VAR = "COOPSIM_NS3_BUILD_DIR"

NATIVE_DIR = Path(__file__).resolve().parent / "native"
SOURCES = ("CMakeLists.txt", "bridge.cc")
BINARY_NAME = "coopsim-ns3-bridge"

INSTALL_HINT = (
    "ns-3 is not installed. On Debian/Ubuntu (as root): `bash .ci/install-ns3.sh` from a coopsim checkout, "
    "or `apt-get update && apt-get install -y libns3-dev ns3 libgsl-dev libxml2-dev libsqlite3-dev cmake "
    "pkg-config g++` and then `python -m coopsim.comm.ns3.build` (see docs/ns3.md)"
)

_CMAKE_CONFIG_GLOBS = (
    "/usr/lib/*/cmake/ns3/ns3Config.cmake",
    "/usr/lib/cmake/ns3/ns3Config.cmake",
    "/usr/local/lib*/cmake/ns3/ns3Config.cmake",
    "/usr/local/lib/*/cmake/ns3/ns3Config.cmake",
)


def find_ns3_config() -> Path | None:
    """The ``ns3Config.cmake`` of an installed ns-3 (``$ns3_DIR`` first, then standard prefixes), or None."""
    env_dir = os.environ.get("ns3_DIR")
    if env_dir and (Path(env_dir) / "ns3Config.cmake").is_file():
        return Path(env_dir) / "ns3Config.cmake"
    for pattern in _CMAKE_CONFIG_GLOBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return Path(hits[0])
    return None


def missing_requirements() -> list[str]:
    """What is missing to build the bridge (empty when ns-3, CMake and a C++ compiler are present)."""
    missing = []
    if find_ns3_config() is None:
        missing.append("ns-3 development files (ns3Config.cmake; Debian: libns3-dev)")
    if shutil.which("cmake") is None:
        missing.append("cmake")
    if shutil.which("c++") is None and shutil.which("g++") is None:
        missing.append("a C++ compiler (g++)")
    return missing


def source_hash() -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode())
        h.update((NATIVE_DIR / name).read_bytes())
    return h.hexdigest()[:16]


def build_dir() -> Path:
    """Where builds go (see the module docstring)."""
    env = os.environ.get(BUILD_DIR_VAR)
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and os.access(checkout, os.W_OK):
        return checkout / "build" / "ns3"
    return Path.home() / ".cache" / "coopsim" / "ns3"


def bridge_path() -> Path:
    """Path of the bridge binary for the current sources (it may not be built yet)."""
    return build_dir() / source_hash() / BINARY_NAME


def ensure_bridge(*, quiet: bool = True) -> Path:
    """Return the bridge binary, building it first if needed (about 15 s of CPU).

    Raises:
        DependencyNotInstalled: ns-3, CMake or a compiler is missing, or the build failed (the message
            holds the end of the build log and how to install ns-3).
        ConfigError: the build directory cannot be made or written (names ``$COOPSIM_NS3_BUILD_DIR`` and the path).
    """
    binary = bridge_path()
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    missing = missing_requirements()
    if missing:
        raise DependencyNotInstalled(f"the ns3-v0 channel needs {', '.join(missing)}. {INSTALL_HINT}")
    work = binary.parent
    try:
        return _build(binary, work, quiet)
    except OSError as exc:  # the build directory cannot be made or written (not the build itself: that is logged)
        raise build_dir_error(exc, work.parent) from None


def build_dir_error(exc: OSError, where: Path) -> ConfigError:
    """The error of a build directory ``where`` that cannot be made or written (``exc``): names the path and
    ``$COOPSIM_NS3_BUILD_DIR`` (whether it was set or not), and that a writable directory is needed."""
    why = exc.strerror or str(exc)
    failed = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(where) else ""
    env = os.environ.get(BUILD_DIR_VAR)
    if env:
        return ConfigError(f"{BUILD_DIR_VAR}={env}: cannot make or write that directory ({why}{failed}), where the "
                           f"ns-3 bridge is built; the variable must name a writable directory (one that exists, or "
                           f"can be made in a writable folder), or be unset to use the default", value=env)
    return ConfigError(f"cannot make or write {where} ({why}{failed}), where the ns-3 bridge is built; set "
                       f"{BUILD_DIR_VAR} to a writable directory", value=str(where))


def _build(binary: Path, work: Path, quiet: bool) -> Path:
    """Build ``binary`` in ``work`` under a lock (another process may have built it meanwhile)."""
    work.mkdir(parents=True, exist_ok=True)
    with open(work.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():  # another process built it while we waited
            return binary
        log_path = work / "build.log"
        cmds = [
            ["cmake", "-S", str(NATIVE_DIR), "-B", str(work / "cmake"), "-DCMAKE_BUILD_TYPE=Release"],
            ["cmake", "--build", str(work / "cmake"), "--parallel", "2"],
        ]
        with open(log_path, "w") as log:
            for cmd in cmds:
                if not quiet:
                    print("+", " ".join(cmd), file=sys.stderr)
                try:
                    res = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                except OSError as exc:  # cmake found but not runnable: not the build directory's fault
                    raise DependencyNotInstalled(f"cannot run `{' '.join(cmd)}`: {exc.strerror or exc}. "
                                                 f"{INSTALL_HINT}") from None
                if res.returncode != 0:
                    tail = log_path.read_text(errors="replace")[-3000:]
                    raise DependencyNotInstalled(
                        f"building the ns-3 bridge failed (`{' '.join(cmd)}` exited {res.returncode}); "
                        f"log {log_path}:\n{tail}\n{INSTALL_HINT}")
        built = work / "cmake" / BINARY_NAME
        if not built.is_file():
            raise DependencyNotInstalled(f"building the ns-3 bridge made no {built}; log {log_path}. {INSTALL_HINT}")
        tmp = work / (BINARY_NAME + ".tmp")
        shutil.copy2(built, tmp)
        os.replace(tmp, binary)
    return binary


def _parser():
    """The ``python -m coopsim.comm.ns3.build`` argument parser (only ``-h``: the build takes no options)."""
    import argparse
    import textwrap

    try:
        where = str(build_dir())
    except Exception:  # noqa: BLE001 - the help must show even when the directory cannot be worked out
        where = f"${BUILD_DIR_VAR}, <checkout>/build/ns3 or ~/.cache/coopsim/ns3"
    width = max(min(shutil.get_terminal_size().columns, 100) - 2, 40)

    def para(text: str) -> str:  # wrapped here, never inside a path (argparse would break one at its hyphens)
        return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)

    return argparse.ArgumentParser(
        prog="python -m coopsim.comm.ns3.build", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=para(f"Build {BINARY_NAME}, the C++ child process of the ns3-v0 channel "
                         f"({NATIVE_DIR / 'bridge.cc'}), with CMake against an installed ns-3 (Debian 12: libns3-dev), "
                         f"and print the binary's path. An up-to-date build is reused (builds are keyed by a hash of "
                         f"the sources); the channel also builds it on first use, so running this ahead of time is "
                         f"optional."),
        epilog=para(f"Build directory: {where} (set {BUILD_DIR_VAR} to choose another; default <checkout>/build/ns3 "
                    f"in a source checkout, else ~/.cache/coopsim/ns3), one <source hash>/ folder per build with its "
                    f"build.log. Exit code 0: built (the path is printed); 2: ns-3, CMake or a compiler is missing, "
                    f"the build failed, or the build directory cannot be written (the message says which and how to "
                    f"fix it). See docs/ns3.md."))


def main(argv: "list[str] | tuple[str, ...]" = ()) -> int:
    """``python -m coopsim.comm.ns3.build``: build the bridge now and print its path (``-h``: what and where).
    ``argv`` are the command's arguments (none when called from Python, not the caller's ``sys.argv``)."""
    _parser().parse_args(list(argv))
    try:
        path = ensure_bridge(quiet=False)
    except CoopsimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
