"""The ParHIP writer against KaMinPar's own reader (one rank, MPI_COMM_SELF; no mpiexec)."""
from __future__ import annotations

import numpy as np
import pytest

from distpart.assign.adjacency import DistributedCSR
from distpart.assign.parhip import HEADER_BYTES, ParhipLayout, choose_widths, version_word, write_parhip

kaminpar = pytest.importorskip("kaminpar", reason="pip install 'distpart[kaminpar]'")


def test_version_word_bits():
    assert version_word(node_weights=False) == 3             # ParHIP's original: no weights, 64-bit
    assert version_word(node_weights=True) == 1              # node weights present
    assert version_word(node_weights=False, edge_weights=True) == 2
    assert version_word(False, False, 4, 8, 8, 8) == 3 | 4   # 32-bit offsets
    assert version_word(False, False, 8, 4, 8, 8) == 3 | 8   # 32-bit node IDs
    assert version_word(True, False, 8, 8, 4, 8) == 1 | 16   # 32-bit node weights
    assert version_word(False, True, 8, 8, 8, 4) == 2 | 32   # 32-bit edge weights
    assert version_word(False, False, 4, 4, 4, 4) == 63
    with pytest.raises(ValueError):
        version_word(False, eid_bytes=2)


def test_section_positions():
    lay = ParhipLayout(n=4, m=8)
    assert (lay.offsets_at, lay.adjacency_at, lay.node_weights_at, lay.size) == (24, 24 + 5 * 8, 64 + 64, 128)
    lay = ParhipLayout(n=4, m=8, node_weights=True, eid_bytes=4, vid_bytes=4, vwgt_bytes=4)
    assert (lay.adjacency_at, lay.node_weights_at, lay.size) == (24 + 5 * 4, 44 + 32, 76 + 16)
    assert lay.version == 1 | 4 | 8 | 16
    # Offset v is the byte address of v's first neighbour, so offset n is the adjacency's end.
    assert list(lay.offset_values(np.array([0, 3, 8]))) == [44, 44 + 12, 76]
    assert lay.header().tobytes() == np.array([lay.version, 4, 8], dtype="<u8").tobytes()


def test_choose_widths_takes_32_bits_only_where_values_fit():
    small = choose_widths(1000, 10_000)
    assert (small.eid_bytes, small.vid_bytes, small.node_weights) == (4, 4, False)
    assert choose_widths(1000, 10_000, max_node_weight=2**31 - 1).vwgt_bytes == 4
    assert choose_widths(1000, 10_000, max_node_weight=2**31).vwgt_bytes == 8
    assert choose_widths(2**31, 10).vid_bytes == 8
    # 32-bit IDs, but the adjacency section ends past byte 2**31: 64-bit offsets.
    big = choose_widths(1000, 2**29)
    assert (big.vid_bytes, big.eid_bytes) == (4, 8)
    assert choose_widths(1000, 2**29 - 2000).eid_bytes == 4   # ends at 2**31 - 3972


def _graph(n: int = 60, edges: int = 200, seed: int = 1):
    """A simple symmetric graph with isolated vertices: (xadj, adjncy, neighbour sets)."""
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n - 5, edges), rng.integers(0, n - 5, edges)   # the last 5 are isolated
    keep = u != v
    rows, cols = np.concatenate([u[keep], v[keep]]), np.concatenate([v[keep], u[keep]])
    key = np.unique(rows * n + cols)
    rows, cols = key // n, key % n
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=xadj[1:])
    return xadj, cols.astype(np.int64), [set(cols[xadj[i]:xadj[i + 1]].tolist()) for i in range(n)]


def _layouts(n: int, m: int, weighted: bool):
    yield None  # choose_widths: 32 bits here
    for eid in (4, 8):
        for vid in (4, 8):
            for vwgt in ((4, 8) if weighted else (8,)):
                yield ParhipLayout(n, m, weighted, eid, vid, vwgt)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_round_trip_through_kaminpar(tmp_path, weighted, index_dtype):
    """Every width combination reads back in KaMinPar as the same graph (n, m, degrees,
    neighbour sets, node weights), whatever the CSR's integer type."""
    from mpi4py import MPI
    xadj, adjncy, neighbours = _graph()
    n, m = len(xadj) - 1, len(adjncy)
    weights = np.diff(xadj) * 3 + 1 if weighted else None
    csr = DistributedCSR(np.array([0, n]), xadj.astype(index_dtype), adjncy.astype(index_dtype),
                         np.zeros(n, dtype=np.int64))
    for i, layout in enumerate(_layouts(n, m, weighted)):
        path = tmp_path / f"g{i}.parhip"
        used = write_parhip(MPI.COMM_SELF, path, csr, weights, layout)
        assert path.stat().st_size == used.size
        raw = path.read_bytes()
        assert np.frombuffer(raw[:HEADER_BYTES], dtype="<u8").tolist() == [used.version, n, m]
        offsets = np.frombuffer(raw[HEADER_BYTES:used.adjacency_at], dtype=used.offset_dtype)
        assert offsets[0] == used.adjacency_at and offsets[-1] == used.node_weights_at
        g = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, compress=False)
        assert (g.n(), g.m()) == (n, m), used
        assert g.is_node_weighted() == weighted
        for u in range(n):
            assert g.degree(u) == len(neighbours[u])
            assert {v for v, _ in g.neighbors(u)} == neighbours[u], (used, u)
            if weighted:
                assert g.node_weight(u) == weights[u]


def test_rewriting_a_longer_file_leaves_no_stale_tail(tmp_path):
    from mpi4py import MPI
    path = tmp_path / "g.parhip"
    path.write_bytes(b"\xff" * 100_000)
    xadj, adjncy, _ = _graph(n=10, edges=20)
    csr = DistributedCSR(np.array([0, 10]), xadj, adjncy, np.zeros(10, dtype=np.int64))
    layout = write_parhip(MPI.COMM_SELF, path, csr)
    assert path.stat().st_size == layout.size
    assert kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP).m() == len(adjncy)
