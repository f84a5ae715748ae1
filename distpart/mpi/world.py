"""The MPI world a run actually got, checked against what the launcher meant to start.

When mpi4py loads a different MPI than the launcher speaks (an Open MPI build under
MPICH's `mpiexec`, the mpich wheel under `srun --mpi=none`), every process silently comes
up as its own one-rank job and each runs the whole pipeline into the same folders. The
launcher's environment still says how many processes it started, so a size-1 world under
a launcher that started more is refused before anything is read or written.

Also here: the facts printed at start (ranks, hosts, MPI library, batch job ID).
"""
from __future__ import annotations

from collections import Counter
from typing import List, Mapping, Optional, Sequence, Tuple

from ..errors import InputError

# (variable, who sets it). MPI launchers' own variables come first: they count ranks. SLURM's
# step size is last because under `mpiexec` inside an allocation it counts daemons, not ranks.
LAUNCHER_SIZE_VARS: Tuple[Tuple[str, str], ...] = (
    ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpiexec"),
    ("PMI_SIZE", "a PMI launcher (MPICH/Hydra mpiexec or srun --mpi=pmi2)"),
    ("PMIX_SIZE", "a PMIx launcher"),
    ("MPI_LOCALNRANKS", "MPICH's Hydra"),
    ("SLURM_STEP_NUM_TASKS", "srun"),
)

# The process's rank as its launcher numbered it, whatever MPI itself says.
LAUNCHER_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")

JOB_ID_VARS: Tuple[Tuple[str, str], ...] = (("SLURM_JOB_ID", "SLURM job"), ("PBS_JOBID", "PBS job"),
                                            ("LSB_JOBID", "LSF job"), ("JOB_ID", "SGE job"))


def launcher_size(env: Mapping[str, str]) -> Optional[Tuple[int, str, str]]:
    """(processes the launcher started, variable, who sets it), from the first variable set."""
    for var, who in LAUNCHER_SIZE_VARS:
        value = env.get(var, "").strip()
        if value.isdigit():
            return int(value), var, who
    return None


def launcher_rank(env: Mapping[str, str]) -> Optional[int]:
    """This process's rank according to the launcher, when it says."""
    for var in LAUNCHER_RANK_VARS:
        value = env.get(var, "").strip()
        if value.isdigit():
            return int(value)
    return None


def check_world(world_size: int, env: Mapping[str, str], library: str) -> None:
    """Refuse a one-rank world under a launcher that started several processes."""
    found = launcher_size(env)
    if found is None or world_size != 1 or found[0] <= 1:
        return
    n, var, who = found
    raise InputError(None, (
        f"the launcher started {n} processes ({var}={n}, set by {who}) but MPI sees only 1 rank: "
        f"mpi4py loaded {library}, which is not the MPI of that launcher, so every process would run "
        f"the whole job alone into the same folders. Start distpart with the mpiexec of the MPI "
        f"mpi4py loads (or `srun --mpi=pmix` for Debian's Open MPI), or point mpi4py at the "
        f"launcher's library with MPI4PY_LIBMPI"))


def library_name(version_string: str) -> str:
    """First line of MPI_Get_library_version, e.g. 'Open MPI v4.1.4' or 'MPICH Version: 4.0.2'."""
    first = version_string.split("\0", 1)[0].strip().splitlines()
    if not first:
        return "an unknown MPI library"
    return first[0].split(",")[0].strip()


def host_summary(hosts: Sequence[str]) -> str:
    """'node-a x2, node-b x2' in first-seen order."""
    counts = Counter(hosts)
    seen: List[str] = []
    for h in hosts:
        if h not in seen:
            seen.append(h)
    return ", ".join(f"{h} x{counts[h]}" for h in seen)


def job_ids(env: Mapping[str, str]) -> List[str]:
    return [f"{what} {env[var]}" for var, what in JOB_ID_VARS if env.get(var)]


def banner(command: str, hosts: Sequence[str], library: str, env: Mapping[str, str]) -> str:
    """The line printed at start: what ran where, on which MPI, in which batch job."""
    distinct = len(set(hosts))
    text = (f"{command}: {len(hosts)} rank{'s' if len(hosts) != 1 else ''} on {distinct} "
            f"host{'s' if distinct != 1 else ''} ({host_summary(hosts)}); {library}")
    ids = job_ids(env)
    return text + (f"; {', '.join(ids)}" if ids else "")
