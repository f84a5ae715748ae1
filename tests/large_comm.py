"""A stand-in communicator for tests of arithmetic past 2**31 without data of that size:
this process is the last of two ranks, and the other one (never started) holds `before`."""
from __future__ import annotations

import numpy as np
from mpi4py import MPI


class LastOfTwo:
    """Rank 1 of 2; rank 0's contribution to every sum, prefix sum and gather is `before`."""

    def __init__(self, before: np.ndarray) -> None:
        self.before = before

    def Get_rank(self) -> int:
        return 1

    def Get_size(self) -> int:
        return 2

    def allgather(self, obj):
        return [None, obj]          # the other rank's verdicts: no error

    def Allreduce(self, send, recv, op) -> None:
        assert op == MPI.SUM, "only sums are stood in for"
        if send is MPI.IN_PLACE:    # `agreed`'s count of failed ranks: the other rank adds none
            return
        recv[...] = self._other(send) + send

    def Exscan(self, send, recv, op) -> None:
        recv[...] = self._other(send)

    def Allgather(self, send, recv) -> None:
        recv[0], recv[1] = 0, send  # rank_bounds: rank 0's block of each type starts at 0

    def _other(self, send: np.ndarray) -> np.ndarray:
        assert send.shape == self.before.shape
        return self.before
