#!/usr/bin/env bash
# Installs ns-3 for the ns3-v0 channel (coopsim/comm/ns3) on Debian 12, then builds its bridge.
#
#   bash .ci/install-ns3.sh        (as root, or a user with sudo; idempotent: a second run only checks)
#
# Route (see docs/ns3.md for why): Debian's ns-3 3.37 development package, and our C++ bridge
# (coopsim/comm/ns3/native/bridge.cc) built with CMake find_package(ns3) into build/ns3/ (gitignored).
# Measured on this project's machines: ~25 s for apt-get update + install, ~15 s of CPU (~40 s wall)
# for the build; the packages take ~70 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(libns3-dev ns3 libgsl-dev libxml2-dev libsqlite3-dev cmake pkg-config g++)
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  echo "install-ns3: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q "${missing[@]}"
else
  echo "install-ns3: ns-3 packages already installed"
fi

# Build the bridge (skipped when the binary for the current sources exists). build.py needs only
# the standard library and coopsim.errors, so this works before the project's venv exists.
PY=python3
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PY" coopsim/comm/ns3/build.py
