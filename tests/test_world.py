"""The launcher/library mismatch guard and the start banner (pure functions, no MPI)."""
import pytest

from distpart.errors import InputError
from distpart.mpi.world import banner, check_world, host_summary, launcher_size, library_name


@pytest.mark.parametrize("env, expected", [
    ({}, None),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, (4, "OMPI_COMM_WORLD_SIZE")),
    ({"PMI_SIZE": "2"}, (2, "PMI_SIZE")),
    ({"SLURM_STEP_NUM_TASKS": "3"}, (3, "SLURM_STEP_NUM_TASKS")),
    # Under mpiexec inside an allocation SLURM's step counts daemons; the MPI variable wins.
    ({"SLURM_STEP_NUM_TASKS": "2", "OMPI_COMM_WORLD_SIZE": "8"}, (8, "OMPI_COMM_WORLD_SIZE")),
    ({"PMI_SIZE": "junk"}, None),
])
def test_launcher_size(env, expected):
    found = launcher_size(env)
    assert (found[:2] if found else None) == expected


def test_one_rank_world_under_a_many_process_launcher_is_refused():
    with pytest.raises(InputError) as e:
        check_world(1, {"PMI_SIZE": "2"}, "Open MPI v4.1.4")
    text = str(e.value)
    assert "the launcher started 2 processes (PMI_SIZE=2" in text
    assert "MPI sees only 1 rank" in text and "Open MPI v4.1.4" in text


@pytest.mark.parametrize("size, env", [(1, {}), (1, {"OMPI_COMM_WORLD_SIZE": "1"}),
                                       (4, {"OMPI_COMM_WORLD_SIZE": "4"}),
                                       (2, {"SLURM_STEP_NUM_TASKS": "1", "OMPI_COMM_WORLD_SIZE": "2"})])
def test_consistent_worlds_pass(size, env):
    check_world(size, env, "Open MPI v4.1.4")


def test_library_name_and_banner():
    assert library_name("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4\0junk") == "Open MPI v4.1.4"
    assert library_name("MPICH Version:      4.0.2\nMPICH Release date: ...") == "MPICH Version:      4.0.2"
    assert library_name("") == "an unknown MPI library"
    assert host_summary(["b", "a", "b", "a", "c"]) == "b x2, a x2, c x1"
    text = banner("pipeline", ["n1", "n1", "n2", "n2"], "Open MPI v4.1.4",
                  {"SLURM_JOB_ID": "42", "PBS_JOBID": ""})
    assert text == "pipeline: 4 ranks on 2 hosts (n1 x2, n2 x2); Open MPI v4.1.4; SLURM job 42"
    assert banner("assign", ["n1"], "MPICH", {"PBS_JOBID": "7.pbs"}) == \
        "assign: 1 rank on 1 host (n1 x1); MPICH; PBS job 7.pbs"


def test_launcher_rank():
    from distpart.mpi.world import launcher_rank
    assert launcher_rank({}) is None
    assert launcher_rank({"PMI_RANK": "3"}) == 3
    assert launcher_rank({"OMPI_COMM_WORLD_RANK": "0", "SLURM_PROCID": "5"}) == 0
