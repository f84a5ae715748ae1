#!/usr/bin/env bash
# Set up, then run the whole test suite: unit tests, then the MPI tests (1, 2 and 4 ranks).
# The tests run on several pytest-xdist workers at once (much of a test's time is a daemon's
# answer or a process start-up, not CPU). The tests on the session's two sshd hosts are marked
# xdist_group("netns_pair"), and those that start SLURM and munge, mount file systems or
# measure time or memory xdist_group("serial"): each group runs on one worker, one test after
# the other, beside the rest. DISTPART_TEST_WORKERS=N sets the number of workers (default 4,
# twice the 2 cores of the CI machine; 0 runs everything in this one process). Each worker
# runs distpart's commands in standing MPI jobs of 1, 2 and 4 ranks (mpi_tests/rank_pool.py);
# DISTPART_TEST_POOL=0 starts an mpiexec for every command instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-test.sh
source scripts/mpienv.sh
# Every Python the tests start (ranks, tools, doc blocks): no OpenBLAS thread pool (nothing
# here uses BLAS, and starting one costs CPU at each import), and bytecode cached outside
# the clone when the environment forbids writing it next to the sources (container images
# set PYTHONDONTWRITEBYTECODE; each process would otherwise recompile distpart).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX="${TMPDIR:-/tmp}/distpart-pycache-$(id -u)"
fi
workers="${DISTPART_TEST_WORKERS:-4}"
parallel=()
if [ "$workers" != 0 ]; then parallel=(-n "$workers" --dist loadgroup); fi
python -m pytest tests mpi_tests -q -rs "${parallel[@]}" "$@"
