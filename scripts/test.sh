#!/usr/bin/env bash
# Set up, then run the whole test suite: unit tests, then the MPI tests (1, 2 and 4 ranks).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-test.sh
source scripts/mpienv.sh
python -m pytest tests mpi_tests -q -rs "$@"
