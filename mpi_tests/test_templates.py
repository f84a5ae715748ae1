"""Every job template runs what the plain command runs (issue 28 item 10).

hostfiles/pbs.job (a fake PBS: a node file listing localhost once per slot, the variables
qsub sets) under Open MPI and under MPICH, and the launcher command of hostfiles/mpijob.yaml
(its argv as written, with the rank count, partition count and data paths of this test), each
partition the bundled example, and their assignment files must be byte for byte those of one
plain `mpiexec -n 2 distpart pipeline IN OUT --num-parts 4`. A template that picks a method
of its own (pbs.job's former `--method parmetis`) gives another partition, and under MPICH
fails on Debian's Open MPI-linked ParMETIS. hostfiles/slurm.sbatch is compared the same way
inside its SLURM cluster, in test_slurm.py.

Every run has a timeout and is killed as a process group if it overruns (harness.py).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List

import pytest

from harness import find_mpich, mpi_env, mpich_variables, run_bounded
from reference import assert_same_assignment, assignment_files

MPICH_MISSING = find_mpich()[2]

REPO = Path(__file__).resolve().parent.parent
HOSTFILES = REPO / "hostfiles"
VENV = Path(sys.executable).parent.parent        # .venv (sys.executable is .venv/bin/python)
RANKS, PARTS = 2, 4
TIMEOUT = 120  # seconds per run; each takes 3-10 s


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_pbs_job_partitions_like_the_plain_command(mpi, plain, example_dir, tmp_path):
    """The documented `qsub -v DISTPART_VENV=...,IN_DIR=...,OUT_DIR=...,NUM_PARTS=N
    hostfiles/pbs.job`, run by bash with what PBS sets (no METHOD: the template's default)."""
    if mpi == "mpich" and MPICH_MISSING:
        pytest.skip(MPICH_MISSING)
    nodefile = tmp_path / "aux" / "77.pbs-server"
    nodefile.parent.mkdir()
    nodefile.write_text("localhost\n" * RANKS)     # PBS lists a node once per slot
    out = tmp_path / "out"
    env = dict(mpi_env(), PBS_NODEFILE=str(nodefile), PBS_JOBID="77.pbs-server", PBS_O_WORKDIR=str(tmp_path),
               DISTPART_VENV=str(VENV), IN_DIR=str(example_dir), OUT_DIR=str(out), NUM_PARTS=str(PARTS),
               PATH="/usr/bin:/bin")   # the job script itself puts the venv on PATH
    for name in ("METHOD", "DISTPART_ARGS", "RANKS_PER_NODE", "VIRTUAL_ENV"):
        env.pop(name, None)
    if mpi == "mpich":
        env.update(mpich_variables(tmp_path))
    run = run_bounded(["bash", HOSTFILES / "pbs.job"], env, TIMEOUT, cwd=tmp_path)
    assert run.returncode == 0, run.output
    assert "verify: OK (4 partitions" in run.stdout, run.output
    assert ("MPICH Version" if mpi == "mpich" else "Open MPI v") in run.stderr, run.output
    assert_same_assignment(assignment_files(out), plain, f"pbs.job under {mpi}")


def mpijob_launcher_argv() -> List[str]:
    """The launcher container's command + args in hostfiles/mpijob.yaml, as written."""
    yaml = pytest.importorskip("yaml", reason="pyyaml is not installed (pip install pyyaml)")
    job = yaml.safe_load((HOSTFILES / "mpijob.yaml").read_text())
    container = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    return [str(a) for a in list(container.get("command", [])) + list(container.get("args", []))]


def test_mpijob_command_partitions_like_the_plain_command(plain, example_dir, tmp_path):
    """mpijob.yaml's `mpirun ... distpart pipeline IN OUT --num-parts N`, every option kept;
    only the rank count, the partition count and the two data paths are this test's."""
    argv = mpijob_launcher_argv()
    out = tmp_path / "out"
    i = argv.index("pipeline")
    argv[i + 1:i + 3] = [str(example_dir), str(out)]
    for flag, value in (("-n", RANKS), ("--num-parts", PARTS)):
        assert argv.count(flag) == 1, argv
        argv[argv.index(flag) + 1] = str(value)
    env = mpi_env()
    env["PATH"] = os.pathsep.join([str(VENV / "bin"), env.get("PATH", "/usr/bin:/bin")])  # the image's PATH
    run = run_bounded(argv, env, TIMEOUT, cwd=tmp_path)
    assert run.returncode == 0, run.output
    assert "verify: OK (4 partitions" in run.stdout, run.output
    assert_same_assignment(assignment_files(out), plain, "mpijob.yaml's launcher command")
