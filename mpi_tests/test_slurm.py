"""distpart under a real one-machine SLURM (Debian's slurmctld, slurmd and munge; mpi_tests/slurm.py):
hostfiles/slurm.sbatch through sbatch with both launchers it offers (and MPICH's mpiexec), a
direct `srun --mpi=pmix`, and the srun launches that Debian's Open MPI cannot serve (plain srun,
--mpi=pmi2, --mpi=none).

What these tests establish (and hostfiles/slurm.sbatch says):
  * `mpiexec` inside the allocation (Open MPI's or MPICH's) and `srun --mpi=pmix` run the
    pipeline on all tasks, and partition as the plain command does (test_templates.py);
  * plain `srun` works only where the site's MpiDefault is pmix;
  * `srun --mpi=pmi2|none` (and plain srun with MpiDefault=none) stop every task in MPI_Init
    with Open MPI's "OMPI was not built with SLURM's PMI support", before distpart reads or
    writes anything, and leave no job behind.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from harness import distpart, find_mpich, mpich_variables
from reference import assert_same_assignment, assignment_files
from slurm import slurm_cluster

MPICH_MISSING = find_mpich()[2]

REPO = Path(__file__).resolve().parent.parent
SBATCH = REPO / "hostfiles" / "slurm.sbatch"
VENV = Path(sys.executable).parent.parent        # .venv (sys.executable is .venv/bin/python)
PYTHON = VENV / "bin" / "python"
NO_PMI = "OMPI was not built with SLURM's PMI support"
PMIX_LIB = Path("/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so")

# Parallel runs (scripts/test.sh, pytest-xdist) keep the daemon tests on one worker, one at a time.
pytestmark = pytest.mark.xdist_group("serial")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as c:
        yield c


def _start_line(text: str, job: str, mpi: str = r"Open MPI v[\d.]+") -> None:
    """distpart's start line names 2 ranks on this one host, the MPI and the SLURM job."""
    assert re.search(rf"pipeline: 2 ranks on 1 host \(\S+ x2\); {mpi}; SLURM job {job}\b", text), text


def _pmix_hint(output: str) -> str:
    if "can not load PMIx library" in output and not PMIX_LIB.exists():
        return (f"\n(SLURM's mpi_pmix plugin dlopens {PMIX_LIB}, which only Debian's libpmix-dev "
                f"provides: install it)")
    return ""


@pytest.mark.parametrize("launcher, mpi", [("mpiexec", "openmpi"), ("srun", "openmpi"), ("mpiexec", "mpich")],
                         ids=["mpiexec", "srun", "mpiexec-mpich"])
def test_slurm_sbatch_script(cluster, example_dir, tmp_path, launcher, mpi, plain):
    """hostfiles/slurm.sbatch as written, 1 node x 2 tasks (the #SBATCH lines overridden on the
    command line), mpiexec inside the allocation (Open MPI's or MPICH's) or srun --mpi=pmix;
    then verified, and its assignment compared with the plain command's (no method given:
    DISTPART_ARGS holds options that do not change the result)."""
    if mpi == "mpich" and MPICH_MISSING:
        pytest.skip(MPICH_MISSING)
    out, log = tmp_path / "out", tmp_path / "job.out"
    extra = "".join(f",{k}={v}" for k, v in (mpich_variables(tmp_path) if mpi == "mpich" else {}).items())
    job = cluster.sbatch(SBATCH, "-N", "1", "-n", "2", "--ntasks-per-node=2", "--time=10", "-o", log,
                         f"--export=ALL,DISTPART_VENV={VENV},IN_DIR={example_dir},OUT_DIR={out},NUM_PARTS=4,"
                         f"DISTPART_LAUNCHER={launcher},DISTPART_ARGS=--max-message-mb 64 --progress-every 5{extra}",
                         timeout=150)
    text = log.read_text() if log.exists() else "(no job output)"
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), f"job {job.id}: {job.info}\n{text}{_pmix_hint(text)}"
    launch = "mpiexec -n 2" if launcher == "mpiexec" else "srun --mpi=pmix -n 2"
    assert f"slurm.sbatch: job {job.id}, 2 tasks on 1 node(s)" in text and launch in text, text
    assert "--num-parts 4 --max-message-mb 64 --progress-every 5" in text, text
    _start_line(text, job.id, r"MPICH Version:\s+[\d.]+" if mpi == "mpich" else r"Open MPI v[\d.]+")
    assert "verify: OK (4 partitions" in text, text
    assert (out / "metadata.json").exists()
    assert_same_assignment(assignment_files(out), plain, f"slurm.sbatch ({launcher}, {mpi})")
    distpart(2, "verify", example_dir, out / "assignment", out)


def test_slurm_sbatch_script_without_venv_says_so(cluster, example_dir, tmp_path):
    """A wrong DISTPART_VENV fails the job at once with a message naming it."""
    out, log = tmp_path / "out", tmp_path / "job.out"
    job = cluster.sbatch(SBATCH, "-N", "1", "-n", "2", "--ntasks-per-node=2", "-o", log,
                         f"--export=ALL,DISTPART_VENV={tmp_path / 'novenv'},IN_DIR={example_dir},OUT_DIR={out}",
                         timeout=60)
    text = log.read_text() if log.exists() else ""
    assert job.state == "FAILED" and job.exit_code == "2:0", f"{job.info}\n{text}"
    assert f"no virtualenv at DISTPART_VENV={tmp_path / 'novenv'}" in text, text
    assert not out.exists()


def test_slurm_srun_pmix_direct(cluster, example_dir, tmp_path):
    """srun --mpi=pmix -n 2 <venv python> -m distpart pipeline ..., outside any allocation."""
    out = tmp_path / "out"
    run = cluster.run(["srun", "--mpi=pmix", "-N", "1", "-n", "2", PYTHON, "-m", "distpart", "pipeline",
                       example_dir, out, "--num-parts", "2", "--method", "random"], timeout=120)
    assert run.returncode == 0, run.output + _pmix_hint(run.output)
    assert "verify: OK (2 partitions" in run.stdout, run.output
    job = re.search(r"SLURM job (\d+)", run.stderr)
    assert job, run.stderr
    _start_line(run.stderr, job.group(1))
    distpart(2, "verify", example_dir, out / "assignment", out)


def exited_tasks(stderr: str) -> set:
    """The tasks srun reports as exited with code 1. srun joins tasks that end together
    ("tasks 0-1: Exited ...") and reports the others one line each ("task 0: Exited ..."),
    which depends on timing."""
    tasks = set()
    for spec in re.findall(r"^srun: error: \S+: tasks? ([\d,-]+): Exited with exit code 1$", stderr, re.M):
        for part in spec.split(","):
            lo, _, hi = part.partition("-")
            tasks.update(range(int(lo), int(hi or lo) + 1))
    return tasks


@pytest.mark.parametrize("mpi", [None, "pmi2", "none"], ids=["plain", "pmi2", "none"])
def test_slurm_srun_without_pmix_fails_cleanly(cluster, example_dir, tmp_path, mpi):
    """Debian's Open MPI has no SLURM PMI-1/PMI-2: every task stops in MPI_Init with Open MPI's
    message (plain srun uses MpiDefault=none here), nothing is written, no job is left."""
    out = tmp_path / "out"
    opts = [f"--mpi={mpi}"] if mpi else []
    run = cluster.run(["srun", *opts, "-N", "1", "-n", "2", PYTHON, "-m", "distpart", "pipeline",
                       example_dir, out, "--num-parts", "2", "--method", "random"], timeout=60)
    assert run.returncode != 0, run.output
    assert NO_PMI in run.output, run.output
    assert exited_tasks(run.stderr) == {0, 1}, run.stderr
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    assert "verify: OK" not in run.stdout


def test_slurm_plain_srun_with_site_mpidefault_pmix(tmp_path_factory, tmp_path, example_dir):
    """Where the site sets MpiDefault=pmix, plain srun is srun --mpi=pmix. (The cluster's
    folder is a short one: see slurm_cluster on the PMIx socket path.)"""
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), extra_conf=["MpiDefault=pmix"]) as c:
        out = tmp_path / "out"
        run = c.run(["srun", "-n", "2", PYTHON, "-m", "distpart", "pipeline", example_dir, out,
                     "--num-parts", "2", "--method", "random"], timeout=120)
    assert run.returncode == 0, run.output + _pmix_hint(run.output)
    assert "verify: OK (2 partitions" in run.stdout, run.output
    assert re.search(r"pipeline: 2 ranks on 1 host", run.stderr), run.stderr


def test_slurm_runs_in_a_network_namespace_of_its_own(cluster):
    """The daemons and every client (through `cluster.run`) share one network namespace that is
    not the test's: SLURM's ports cannot meet any other test's, and its traffic stays inside."""
    ours = os.readlink("/proc/self/ns/net")
    run = cluster.run(["readlink", "/proc/self/ns/net"], timeout=30)
    assert run.returncode == 0, run.output
    theirs = run.stdout.strip()
    assert theirs.startswith("net:[") and theirs != ours
    for name, pid in cluster.daemons.items():
        assert os.readlink(f"/proc/{pid}/ns/net") == theirs, name
    links = cluster.run(["ip", "-o", "link"], timeout=30).stdout
    assert "dp0" in links and "eth0" not in links, links
