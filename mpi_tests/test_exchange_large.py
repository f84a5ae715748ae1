"""exchange() and lookup() split into many Alltoallv rounds by a lowered MPI count limit
(standing in for 2**31 - 1 bytes), on 2 and 4 ranks: the data arrive exactly."""
import pytest

from harness import run_driver


@pytest.mark.parametrize("nranks", (2, 4))
def test_exchange_split_by_mpi_count_limit(nranks):
    run = run_driver("exchange_large_driver", nranks)
    assert "Alltoallv calls" in run.stdout
