#!/usr/bin/env bash
# Install everything distpart needs on a Debian/Ubuntu machine, idempotently:
# Open MPI, ParMETIS and METIS from apt, then a virtualenv in .venv with distpart and its Python dependencies.
# Safe to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# ParMETIS's licence keeps it out of Debian main / Ubuntu universe: enable the component
# that carries libparmetis4.0 (Debian non-free, Ubuntu multiverse) in a file of our own.
enable_parmetis_component() {
  . /etc/os-release
  local list=/etc/apt/sources.list.d/distpart-parmetis.sources
  [ -f "$list" ] && return 0
  case "${ID:-}" in
    debian)
      echo "setup: enabling Debian's non-free component for libparmetis4.0 ($list)"
      printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$VERSION_CODENAME" | $SUDO tee "$list" >/dev/null ;;
    ubuntu)
      echo "setup: enabling Ubuntu's multiverse component for libparmetis4.0 ($list)"
      printf 'Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: %s\nComponents: multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n' \
        "$VERSION_CODENAME" | $SUDO tee "$list" >/dev/null ;;
    *)
      echo "setup: not Debian/Ubuntu: install ParMETIS yourself and set PARMETIS_LIB=/path/libparmetis.so" >&2
      return 1 ;;
  esac
}

need_apt=()
command -v mpiexec >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)
if [ -z "${PARMETIS_LIB:-}" ] && ! ldconfig -p | grep -q "libparmetis\.so"; then
  enable_parmetis_component && need_apt+=(libparmetis4.0)
fi
# Serial METIS 5 (Debian main / Ubuntu universe) partitions the multilevel method's coarsest graph.
if [ -z "${METIS_LIB:-}" ] && ! ldconfig -p | grep -q "libmetis\.so\.5"; then
  need_apt+=(libmetis5)
fi
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
# Reinstall when setup.py changed since the last install (a new dependency or extra), not
# only when an import fails: an older .venv would otherwise miss what was added since.
stamp=.venv/.distpart-setup.sha256
want="$(sha256sum setup.py | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || \
   ! .venv/bin/python -c "import distpart, mpi4py, pyarrow, h5py, pytest, psutil, yaml, kaminpar, matplotlib" >/dev/null 2>&1; then
  echo "setup: installing distpart and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi
echo "setup: ready ($(.venv/bin/python -c 'import mpi4py.MPI as M; print(M.Get_library_version().split(chr(0))[0].splitlines()[0].strip())'))"
