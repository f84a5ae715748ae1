#!/usr/bin/env bash
# What the test suite needs beyond scripts/setup.sh, installed idempotently: the daemons the
# cluster tests start themselves (sshd for the multi-host netns tests, SLURM and munge for the
# SLURM tests), iproute2 for network namespaces, and MPICH for the second-MPI tests.
# None of these daemons is started here or left running: the tests start and stop their own
# (one netns pair with sshd for the whole test session, SLURM clusters per module or test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
for pkg_cmd in iproute2:/usr/sbin/ip openssh-server:/usr/sbin/sshd openssh-client:/usr/bin/ssh \
               munge:/usr/sbin/munged slurmctld:/usr/sbin/slurmctld slurmd:/usr/sbin/slurmd \
               slurm-client:/usr/bin/sbatch mpich:/usr/bin/mpiexec.mpich; do
  [ -x "${pkg_cmd#*:}" ] || need_apt+=("${pkg_cmd%%:*}")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup-test: installing system packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  # Package scripts must not start the daemons: the tests run their own, in temp dirs.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
    "${need_apt[@]}" >/dev/null
fi
