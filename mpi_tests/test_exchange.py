"""exchange() and lookup() under MPI on 1, 2 and 4 ranks, with bounded and unbounded messages."""
from pathlib import Path

import pytest

from conftest import RANKS, mpirun

DRIVER = Path(__file__).parent / "drivers" / "exchange_driver.py"


@pytest.mark.parametrize("nranks", RANKS)
def test_exchange_and_lookup(nranks):
    run = mpirun(nranks, [], timeout=120, script=DRIVER)
    assert run.returncode == 0, run.output
    assert "exchange checks: passed" in run.stdout
