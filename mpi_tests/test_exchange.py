"""exchange() and lookup() under MPI on 1, 2 and 4 ranks, with bounded and unbounded messages."""
import pytest

from harness import RANKS, run_driver


@pytest.mark.parametrize("nranks", RANKS)
def test_exchange_and_lookup(nranks):
    run_driver("exchange_driver", nranks)
