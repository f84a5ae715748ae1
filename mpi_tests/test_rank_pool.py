"""The standing MPI jobs of the test harness (rank_pool.py): a command run there gives what
its own `mpiexec` gives (files, output, exit status), and nothing of one command reaches the
next (warnings, argv, peak memory); a bug that aborts the job ends only that job.
"""
from __future__ import annotations

import re

import pytest

import rank_pool
from harness import DRIVERS, distpart, mpi_command, mpi_env, mpirun, run_bounded
from reference import assignment_files

pytestmark = pytest.mark.skipif(not rank_pool.enabled(), reason="DISTPART_TEST_POOL=0: no pools")
PROBE = DRIVERS / "pool_probe.py"


def test_a_pooled_command_gives_what_its_own_mpiexec_gives(example_dir, tmp_path):
    argv = ["pipeline", example_dir, None, "--num-parts", 4, "--method", "random", "--seed", 3]
    own = run_bounded(mpi_command(2, [tmp_path / "own" if a is None else a for a in argv]), mpi_env())
    pooled = distpart(2, *[tmp_path / "pooled" if a is None else a for a in argv])
    assert own.returncode == 0, own.output
    assert assignment_files(tmp_path / "pooled") == assignment_files(tmp_path / "own")
    assert "verify: OK" in pooled.stdout and "stage verify started" in pooled.stderr
    assert 2 in rank_pool._pools and rank_pool._pools[2].alive


def test_a_refusal_is_exit_2_with_its_one_error_line(tmp_path):
    run = distpart(2, "assign", tmp_path / "nowhere", tmp_path / "a", "--num-parts", 2, ok=False)
    assert run.returncode == 2, run.output
    assert run.stderr.count("distpart assign: error:") == 1, run.stderr
    assert not (tmp_path / "a").exists()


def test_each_command_starts_as_a_new_process_would(tmp_path):
    first = mpirun(2, ["grow"], script=PROBE)
    second = mpirun(2, ["again"], script=PROBE)
    for run, word in ((first, "grow"), (second, "again")):
        assert run.returncode == 0, run.output
        assert run.stderr.count("UserWarning: pool probe warning") == 2, run.stderr   # once per rank, each time
        assert sorted(re.findall(rf"rank (\d) argv \['{word}'\]", run.stdout)) == ["0", "1"], run.stdout
    peaks = [int(p) for p in re.findall(r"peak (\d+)", second.stdout)]
    assert peaks and max(peaks) < 200, f"the 200 MiB of the first command count in the second: {peaks}"


def test_a_bug_ends_its_pool_and_the_next_command_gets_a_new_one(tmp_path):
    run = mpirun(2, ["bug"], script=PROBE)
    assert run.returncode == 1, run.output     # MPI_Abort's error code, as mpiexec reports it
    # (mpiexec's own MPI_ABORT notice is not asserted: under load its show_help may fail instead)
    assert "RuntimeError: a bug on rank 1" in run.stderr, run.output
    assert not rank_pool._pools[2].alive
    after = mpirun(2, ["after"], script=PROBE)
    assert after.returncode == 0 and after.stdout.count("argv ['after']") == 2, after.output
