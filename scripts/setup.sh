#!/usr/bin/env bash
# Install everything distpart needs on a Debian/Ubuntu machine, idempotently:
# Open MPI from apt, then a virtualenv in .venv with distpart and its Python dependencies.
# Safe to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v mpiexec >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import distpart, mpi4py, pyarrow, h5py, pytest, psutil" >/dev/null 2>&1; then
  echo "setup: installing distpart and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[test]"
fi
echo "setup: ready ($(.venv/bin/python -c 'import mpi4py.MPI as M; print(M.Get_library_version().splitlines()[0].strip())'))"
