"""The graph KaMinPar reads: ParHIP's binary graph format, written by all ranks at once.

Layout (KaMinPar's docs/graph_file_format.md, KaGen's `parhip.h`): a 24-byte header of three
little-endian uint64 (version, n, m), then n + 1 offsets, m neighbour IDs, n node weights if
present, m edge weights if present. m counts adjacency entries (both directions of every
undirected edge). Offset v is the BYTE address, from the start of the file, of v's first
neighbour, so offset n is where the adjacency section ends. The version word is a bit field,
least significant bit first: edge weights absent, node weights absent, 32-bit edge IDs
(offsets), 32-bit node IDs, 32-bit node weights, 32-bit edge weights.

This module owns the layout (pure functions: version word, section positions, the widths
chosen for a graph) and `write_parhip`, where each rank writes its own rows' offsets,
neighbours and weights at their byte positions with MPI-IO. distpart never writes edge
weights (its graph is simple and unweighted).

Widths: kaminpar 3.7.3's Python wheel (built with 64-bit IDs and weights) reads every
combination of 32- and 64-bit offsets, node IDs and node weights (checked against
`kaminpar.load_graph` in tests/test_parhip.py). `choose_widths` takes 32 bits wherever the
values stay below 2**31 (signed, in case a reader is), which halves the adjacency section
of any graph under 2**31 vertices.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..errors import OutputError
from ..mpi.files import WRITE_PIECE, open_for_writing

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm
    from .adjacency import DistributedCSR

HEADER_BYTES = 24
_LIMIT32 = 2**31  # a value must stay below this to be stored in 32 bits


def version_word(node_weights: bool, edge_weights: bool = False, eid_bytes: int = 8, vid_bytes: int = 8,
                 vwgt_bytes: int = 8, ewgt_bytes: int = 8) -> int:
    """The header's version bit field (3 = ParHIP's original: no weights, 64-bit everything)."""
    for width in (eid_bytes, vid_bytes, vwgt_bytes, ewgt_bytes):
        if width not in (4, 8):
            raise ValueError(f"ParHIP widths are 4 or 8 bytes, got {width}")
    return (int(not edge_weights) | int(not node_weights) << 1 | int(eid_bytes == 4) << 2
            | int(vid_bytes == 4) << 3 | int(vwgt_bytes == 4) << 4 | int(ewgt_bytes == 4) << 5)


@dataclass(frozen=True)
class ParhipLayout:
    """Where every section of a ParHIP file of n vertices and m adjacency entries lies."""

    n: int
    m: int
    node_weights: bool = False
    eid_bytes: int = 8    # width of an offset
    vid_bytes: int = 8    # width of a neighbour ID
    vwgt_bytes: int = 8   # width of a node weight

    @property
    def version(self) -> int:
        return version_word(self.node_weights, False, self.eid_bytes, self.vid_bytes, self.vwgt_bytes)

    @property
    def offsets_at(self) -> int:
        return HEADER_BYTES

    @property
    def adjacency_at(self) -> int:
        return HEADER_BYTES + (self.n + 1) * self.eid_bytes

    @property
    def node_weights_at(self) -> int:
        return self.adjacency_at + self.m * self.vid_bytes

    @property
    def size(self) -> int:
        """The file's length in bytes."""
        return self.node_weights_at + (self.n * self.vwgt_bytes if self.node_weights else 0)

    def header(self) -> np.ndarray:
        return np.array([self.version, self.n, self.m], dtype="<u8")

    def offset_values(self, entry: np.ndarray) -> np.ndarray:
        """Offsets (byte addresses) of adjacency entries `entry` (global entry numbers, int64)."""
        return self.adjacency_at + np.asarray(entry, dtype=np.int64) * self.vid_bytes

    @property
    def offset_dtype(self) -> np.dtype:
        return np.dtype(f"<u{self.eid_bytes}")

    @property
    def id_dtype(self) -> np.dtype:
        return np.dtype(f"<u{self.vid_bytes}")

    @property
    def weight_dtype(self) -> np.dtype:
        return np.dtype(f"<i{self.vwgt_bytes}")  # weights are signed in KaMinPar


def choose_widths(n: int, m: int, max_node_weight: Optional[int] = None) -> ParhipLayout:
    """The narrowest layout whose values all fit: 32-bit node IDs below 2**31 vertices,
    32-bit offsets when the adjacency section ends below byte 2**31, 32-bit weights when the
    largest is below 2**31."""
    vid = 4 if n < _LIMIT32 else 8
    eid = 4 if ParhipLayout(n, m, False, 4, vid).node_weights_at < _LIMIT32 else 8
    weighted = max_node_weight is not None
    vwgt = 4 if weighted and max_node_weight < _LIMIT32 else 8
    return ParhipLayout(n, m, weighted, eid, vid, vwgt)


def _pieces(length: int, itemsize: int) -> range:
    return range(0, length, max(1, WRITE_PIECE // itemsize))


def write_parhip(comm: Intracomm, path: "str | Path", csr: DistributedCSR,
                 node_weights: Optional[np.ndarray] = None, layout: Optional[ParhipLayout] = None) -> ParhipLayout:
    """Write the distributed CSR (and this rank's rows' node weights, if given) as one ParHIP
    file. Collective; every rank writes only its own rows, in pieces of at most 1 GiB, cast
    to the file's widths piece by piece whatever the CSR's integer types. Returns the layout
    (`layout` forces one, for tests; else `choose_widths`)."""
    from mpi4py import MPI
    from ..mpi.collective import agreed
    from ..mpi.exchange import allreduce_max, allreduce_sum, exscan_sum

    rank, size = comm.Get_rank(), comm.Get_size()
    nlocal = len(csr.xadj) - 1
    lo = int(csr.vtxdist[rank])
    x0 = int(csr.xadj[0])
    mlocal = int(csr.xadj[-1]) - x0
    weighted = node_weights is not None
    if weighted and len(node_weights) != nlocal:
        raise ValueError(f"{len(node_weights)} node weights for {nlocal} rows")
    top = int(np.max(node_weights)) if weighted and nlocal else 0
    m = int(allreduce_sum(comm, np.array([mlocal]))[0])
    max_weight = allreduce_max(comm, np.array([top]))
    first = int(exscan_sum(comm, np.array([mlocal]))[0])  # global number of this rank's first entry
    n = int(csr.vtxdist[-1])
    if layout is None:
        layout = choose_widths(n, m, int(max_weight[0]) if weighted else None)
    elif (layout.n, layout.m, layout.node_weights) != (n, m, weighted):
        raise ValueError(f"layout {layout} does not describe this graph (n={n}, m={m}, weights={weighted})")

    path = str(path)
    with open_for_writing(comm, path, OutputError) as fh:
        with agreed(comm):
            try:
                if rank == 0:
                    fh.Write_at(0, layout.header())
                # Offset n (the end of the adjacency) belongs to the last rank, whose block ends at n.
                count = nlocal + (1 if rank == size - 1 else 0)
                odt = layout.offset_dtype
                for a in _pieces(count, odt.itemsize):
                    b = min(count, a + WRITE_PIECE // odt.itemsize)
                    entries = np.asarray(csr.xadj[a:b], dtype=np.int64) - x0 + first
                    fh.Write_at(layout.offsets_at + (lo + a) * odt.itemsize,
                                layout.offset_values(entries).astype(odt))
                vdt = layout.id_dtype
                for a in _pieces(mlocal, vdt.itemsize):
                    b = min(mlocal, a + WRITE_PIECE // vdt.itemsize)
                    fh.Write_at(layout.adjacency_at + (first + a) * vdt.itemsize,
                                np.asarray(csr.adjncy[x0 + a:x0 + b]).astype(vdt))
                if weighted:
                    wdt = layout.weight_dtype
                    for a in _pieces(nlocal, wdt.itemsize):
                        b = min(nlocal, a + WRITE_PIECE // wdt.itemsize)
                        fh.Write_at(layout.node_weights_at + (lo + a) * wdt.itemsize,
                                    np.asarray(node_weights[a:b]).astype(wdt))
            except MPI.Exception as e:
                raise OutputError(path, f"cannot write the KaMinPar input: {e.Get_error_string()}") from None
    comm.Barrier()  # every rank's bytes are in place before anyone reads the file
    return layout
