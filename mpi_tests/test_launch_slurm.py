"""distpart under a real (one-machine) SLURM: the project's batch script through sbatch,
and a direct srun launch with the MPI plugin Debian's Open MPI supports (PMIx)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import distpart
from slurm_cluster import slurm

REPO = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent.parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with slurm(tmp_path_factory.mktemp("slurm")) as s:
        yield s


def test_slurm_sbatch_script(cluster, example_dir, tmp_path):
    out, log = tmp_path / "out", tmp_path / "job.out"
    run = cluster.run(["sbatch", "--wait", "-N", "1", "-n", "2", "--ntasks-per-node", "2", "-o", str(log),
                       f"--export=ALL,DISTPART_VENV={VENV},IN_DIR={example_dir},OUT_DIR={out},NUM_PARTS=4",
                       str(REPO / "hostfiles" / "slurm.sbatch")])
    text = log.read_text() if log.exists() else ""
    assert run.returncode == 0, run.stdout + run.stderr + text
    job = re.search(r"Submitted batch job (\d+)", run.stdout).group(1)
    assert "verify: OK (4 partitions" in text, text
    assert re.search(rf"pipeline: 2 ranks on 1 host \(\S+ x2\); Open MPI v[\d.]+; SLURM job {job}", text), text
    distpart(2, "verify", example_dir, out / "assignment", out)


def test_slurm_srun_pmix(cluster, example_dir, tmp_path):
    out = tmp_path / "out"
    run = cluster.run(["srun", "--mpi=pmix", "-N", "1", "-n", "2", sys.executable, "-m", "distpart",
                       "pipeline", str(example_dir), str(out), "--num-parts", "2", "--method", "random"])
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verify: OK (2 partitions" in run.stdout
    assert re.search(r"pipeline: 2 ranks on 1 host .*; SLURM job \d+", run.stderr), run.stderr


@pytest.mark.parametrize("plugin", ["none", "pmi2"])
def test_slurm_srun_without_pmix_fails_cleanly(cluster, example_dir, tmp_path, plugin):
    """Debian's Open MPI has no SLURM PMI-1/2 support: it stops in MPI_Init, before distpart
    reads or writes anything (so the README says to use --mpi=pmix or mpiexec)."""
    out = tmp_path / "out"
    run = cluster.run(["srun", f"--mpi={plugin}", "-N", "1", "-n", "2", sys.executable, "-m", "distpart",
                       "pipeline", str(example_dir), str(out), "--num-parts", "2", "--method", "random"])
    assert run.returncode != 0, run.stdout + run.stderr
    assert "OMPI was not built with SLURM's PMI support" in run.stdout + run.stderr
    assert not out.exists() and "verify: OK" not in run.stdout
