"""IDs, counts and offsets past 2**31 (issue 31, item 4), built from metadata and counts alone.

No array here has more than a few thousand elements: the counts are billions, the data is
not. Each test runs one piece of arithmetic that sums counts or offsets (type offsets, chunk
row offsets, partition book ranges, new IDs, the even split, Alltoallv rounds) on counts
whose totals pass 2**31 (and 2**32), and checks it against Python's arbitrary-precision ints.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distpart.arrays import exclusive_cumsum, new_node_ids, offsets
from distpart.check.report import even_split_offsets, moved_seeds
from distpart.chunked.ids import IdConverter
from distpart.chunked.metadata import load_metadata
from distpart.chunked.readers.pieces import Piece, block_bounds, pieces_of_block
from distpart.dispatch.relabel import local_graph, node_groups
from distpart.mpi import exchange as ex
from distpart.partitions.graphbolt import _INDEX_DTYPES, minimum_dtype
from distpart.partitions.partbook import PartitionBook, range_starts, ranges_from_counts, type_of

B = 10**9
INT32_MAX = 2**31 - 1
# Per-chunk counts of a metadata.json whose every type passes 2**31 on its own.
NODE_CHUNKS = {"user": [3 * B, 3 * B], "item": [5 * B], "tag": [7, 2**31 + 1]}
EDGE_CHUNKS = {"user:buys:item": [4 * B, 4 * B, 1], "item:tagged:tag": [2**32 + 5]}


def write_metadata(folder: Path) -> Path:
    """A chunked graph's metadata.json with billions of nodes and edges (its files never read)."""
    folder.mkdir(parents=True, exist_ok=True)
    edges = {e: {"format": {"name": "numpy"},
                 "data": [f"edges/{e}-{i}.npy" for i in range(len(c))]} for e, c in EDGE_CHUNKS.items()}
    meta = {"graph_name": "huge", "node_type": list(NODE_CHUNKS), "edge_type": list(EDGE_CHUNKS),
            "num_nodes_per_chunk": list(NODE_CHUNKS.values()),
            "num_edges_per_chunk": list(EDGE_CHUNKS.values()), "edges": edges,
            "node_data": {}, "edge_data": {}}
    path = folder / "metadata.json"
    path.write_text(json.dumps(meta))
    return path


def py_offsets(counts):
    out = [0]
    for c in counts:
        out.append(out[-1] + c)
    return out


NODE_TOTALS = [sum(c) for c in NODE_CHUNKS.values()]
EDGE_TOTALS = [sum(c) for c in EDGE_CHUNKS.values()]


# ---------------------------------------------------------------- metadata and type offsets

def test_metadata_counts_and_type_offsets(tmp_path: Path) -> None:
    meta = load_metadata(write_metadata(tmp_path))
    assert meta.node_counts == NODE_TOTALS and meta.edge_counts == EDGE_TOTALS
    assert [meta.num_nodes(t) for t in NODE_CHUNKS] == NODE_TOTALS
    got = offsets(meta.node_counts)
    assert got.dtype == np.int64 and got.tolist() == py_offsets(NODE_TOTALS)
    assert got[-1] == 6 * B + 5 * B + 7 + 2**31 + 1


@pytest.mark.parametrize("form", ["path", "folder", "raw", "meta"])
def test_id_converter_from_metadata_past_2_31(tmp_path: Path, form: str) -> None:
    path = write_metadata(tmp_path)
    source = {"path": path, "folder": path.parent, "raw": json.loads(path.read_text()),
              "meta": load_metadata(path)}[form]
    conv = IdConverter.from_metadata(source)
    assert conv.nid_offset.tolist() == py_offsets(NODE_TOTALS)
    assert conv.eid_offset.tolist() == py_offsets(EDGE_TOTALS)
    # IDs at the int32 / uint32 boundaries of each type and of the whole graph.
    per_type = np.array([0, INT32_MAX, 2**31, 2**32 - 1, 2**32, 6 * B - 1])
    hom = conv.nid_het2hom("user", per_type)
    assert hom.dtype == np.int64 and hom.tolist() == per_type.tolist()
    hom = conv.nid_het2hom("item", per_type[:-1])
    assert hom.tolist() == [6 * B + int(i) for i in per_type[:-1]]
    last = conv.total_nodes - 1
    types, ids = conv.nid_hom2het([last, 11 * B, 11 * B - 1, INT32_MAX, 2**32 + 3])
    assert types.tolist() == [2, 2, 1, 0, 0]
    assert ids.tolist() == [2**31 + 7, 0, 5 * B - 1, INT32_MAX, 2**32 + 3]
    assert conv.nid_het2hom(types, ids).tolist() == [last, 11 * B, 11 * B - 1, INT32_MAX, 2**32 + 3]
    etypes, eids = conv.eid_hom2het([8 * B, 8 * B + 1, conv.total_edges - 1])
    assert etypes.tolist() == [0, 1, 1] and eids.tolist() == [8 * B, 0, 2**32 + 4]
    with pytest.raises(ValueError, match=rf"outside \[0, {conv.total_nodes}\)"):
        conv.nid_hom2het(conv.total_nodes)


# ---------------------------------------------------------------- chunk row offsets

def test_block_bounds_match_python_ints_near_int64() -> None:
    # i * total overflows int64 here; the boundaries must still be exactly i * total // n.
    for total in (3 * B, 2**40 + 3, 2**62 + 12345, 2**63 - 1):
        for nranks in (1, 2, 3, 4, 7, 1024):
            got = block_bounds(total, nranks)
            assert got.dtype == np.int64
            assert got.tolist() == [i * total // nranks for i in range(nranks + 1)]


def test_pieces_of_block_over_files_of_billions_of_rows() -> None:
    sizes = EDGE_CHUNKS["user:buys:item"] + EDGE_CHUNKS["item:tagged:tag"]  # 4e9, 4e9, 1, 2**32 + 5
    total = sum(sizes)
    starts = py_offsets(sizes)
    for nranks in (2, 3, 4):
        covered = []
        for rank in range(nranks):
            lo, hi = rank * total // nranks, (rank + 1) * total // nranks
            pieces = pieces_of_block(sizes, rank, nranks)
            # Each piece is a slice of one file, within that file, and together they are [lo, hi).
            at = lo
            for p in pieces:
                assert 0 <= p.start < p.stop <= sizes[p.file]
                assert starts[p.file] + p.start == at
                at = starts[p.file] + p.stop
            assert at == hi
            covered += pieces
        assert sum(p.stop - p.start for p in covered) == total
    assert pieces_of_block(sizes, 1, 2)[0] == Piece(1, total // 2 - 4 * B, 4 * B)


# ---------------------------------------------------------------- partition book (5e9 nodes)

COUNTS = np.array([[2 * B, 0, 1], [3 * B, 2**31, 0], [1, 2**32, 5]], dtype=np.int64)  # (P, T)
NTYPES = ["a", "b", "c"]


def config_of(counts: np.ndarray, ecounts: np.ndarray) -> dict:
    return {"num_parts": len(counts), "ntypes": {n: i for i, n in enumerate(NTYPES)},
            "etypes": {"a:r:b": 0}, "node_map": ranges_from_counts(counts, NTYPES),
            "edge_map": ranges_from_counts(ecounts, ["a:r:b"]),
            "num_nodes": int(counts.sum()), "num_edges": int(ecounts.sum())}


def test_ranges_from_counts_past_2_31() -> None:
    ranges = ranges_from_counts(COUNTS, NTYPES)
    flat = py_offsets(COUNTS.reshape(-1).tolist())
    for t, name in enumerate(NTYPES):
        for p in range(3):
            assert ranges[name][p] == [flat[p * 3 + t], flat[p * 3 + t + 1]]
            assert type(ranges[name][p][0]) is int  # JSON-ready
    assert ranges["c"][2][1] == int(COUNTS.sum()) == 5 * B + 2**31 + 2**32 + 7
    assert range_starts(COUNTS).reshape(-1).tolist() == flat[:-1]
    json.dumps(ranges)


def test_partition_book_queries_past_2_31() -> None:
    ecounts = np.array([[3 * B], [0], [2**32]], dtype=np.int64)
    book = PartitionBook.from_config(config_of(COUNTS, ecounts), 2)
    flat = py_offsets(COUNTS.reshape(-1).tolist())
    # Homogeneous IDs at every range boundary, and their owners, types and per-type IDs.
    ids, parts, types, per_type = [], [], [], []
    typed_before = np.zeros(3, dtype=object)
    for p in range(3):
        for t in range(3):
            s, e = flat[p * 3 + t], flat[p * 3 + t + 1]
            for i in sorted({s, e - 1, (s + e) // 2}) if e > s else []:
                ids.append(i)
                parts.append(p)
                types.append(t)
                per_type.append(int(typed_before[t]) + i - s)
            typed_before[t] += e - s
    assert book.nid2partid(ids).tolist() == parts
    got_t, got_i = book.map_to_per_ntype(ids)
    assert got_t.tolist() == types and got_i.tolist() == per_type
    for t, name in enumerate(NTYPES):
        sel = [k for k, x in enumerate(types) if x == t]
        back = book.map_to_homo_nid([per_type[k] for k in sel], name)
        assert back.tolist() == [ids[k] for k in sel]
        assert book.nid2partid([per_type[k] for k in sel], name).tolist() == [parts[k] for k in sel]
    assert book.metadata()[2] == {"machine_id": 2, "num_nodes": 1 + 2**32 + 5, "num_edges": 2**32}
    last = int(COUNTS.sum()) - 1
    assert book.nid2localnid([last], 2).tolist() == [last - flat[6]]
    assert book.eid2partid([3 * B - 1, 3 * B, 3 * B + 2**32 - 1]).tolist() == [0, 2, 2]
    ends = [3 * B - 1, 3 * B, 3 * B + 2**32 - 1]   # one edge type: per-type IDs are the homogeneous ones
    assert book.map_to_homo_eid(ends, "a:r:b").tolist() == ends
    assert book.map_to_per_etype(ends)[1].tolist() == ends
    with pytest.raises(ValueError, match=rf"outside \[0, {last + 1}\)"):
        book.nid2partid([last + 1])


# ---------------------------------------------------------------- dispatch: new IDs and local graphs

def test_new_ids_and_types_past_2_31() -> None:
    starts = range_starts(COUNTS)
    # A rank's block of type "b" (2**31 in partition 1, 2**32 in partition 2), with
    # 2**31 - 10 and 2**31 + 7 of them held by lower ranks.
    below = np.array([0, 2**31 - 10, 2**31 + 7], dtype=np.int64)
    parts = np.array([1, 2, 2, 1, 2])
    new = new_node_ids(parts, starts[:, 1] + below)
    flat = py_offsets(COUNTS.reshape(-1).tolist())
    want = [flat[4] + 2**31 - 10, flat[7] + 2**31 + 7, flat[7] + 2**31 + 8, flat[4] + 2**31 - 9,
            flat[7] + 2**31 + 9]
    assert new.dtype == np.int64 and new.tolist() == want
    assert type_of(new, COUNTS).tolist() == [1] * 5
    assert type_of(np.array([flat[8] + 4, flat[2]]), COUNTS).tolist() == [2, 2]
    groups = node_groups(new, starts[1:, 1])
    assert [g.tolist() for g in groups] == [[0, 3], [1, 2, 4]]


def test_local_graph_of_a_partition_past_2_31() -> None:
    first = 5 * B + 2**31 + 1           # partition 2's first new ID
    stop = first + 2**32 + 6
    src = np.array([first + 3, 2**31, first - 1, stop - 1, 2**31], dtype=np.int64)
    dst = np.array([first, first + 2**31, stop - 1, first + 1, first + 2**32], dtype=np.int64)
    halo, lsrc, ldst = local_graph(first, stop, src, dst)
    assert halo.tolist() == [2**31, first - 1]
    n_inner = stop - first
    assert lsrc.tolist() == [3, n_inner, n_inner + 1, n_inner - 1, n_inner]
    assert ldst.tolist() == [0, 2**31, n_inner - 1, 1, 2**32]


# ---------------------------------------------------------------- report: DGL's even split

def test_even_split_and_moved_seeds_past_2_31() -> None:
    total = 5 * B + 3
    got = even_split_offsets(total, 4)
    assert got.tolist() == [0, 1_250_000_001, 2_500_000_002, 3_750_000_003, total]
    train = [2**32, 3, 5 * B - 2**32]
    given = even_split_offsets(sum(train), 3).tolist()
    held = py_offsets(train)
    want = [c - max(0, min(held[p + 1], given[p + 1]) - max(held[p], given[p])) for p, c in enumerate(train)]
    assert moved_seeds(train).tolist() == want


# ---------------------------------------------------------------- GraphBolt index dtypes

def test_graphbolt_index_dtype_switches_at_2_31() -> None:
    assert minimum_dtype(INT32_MAX - 1, _INDEX_DTYPES) == np.int32
    assert minimum_dtype(INT32_MAX, _INDEX_DTYPES) == np.int64
    assert minimum_dtype(5 * B, _INDEX_DTYPES) == np.int64


# ---------------------------------------------------------------- Alltoallv rounds

def all_rounds(send_counts, recv_counts, row_bytes, max_bytes):
    rounds = ex.rounds_needed(np.array(send_counts), np.array(recv_counts), row_bytes, max_bytes)
    return rounds, [(ex.round_slice(np.array(send_counts), j, rounds), ex.round_slice(np.array(recv_counts), j, rounds))
                    for j in range(rounds)]


@pytest.mark.parametrize("seed", range(20))
def test_rounds_from_the_global_maxima_are_the_agreed_rounds(seed: int) -> None:
    """A halo refresh plans its rounds from two maxima over the ranks (`rounds_for`) instead of
    a reduction per call: that must be the maximum of every rank's `rounds_needed`."""
    rng = np.random.default_rng(seed)
    ranks = int(rng.integers(1, 9))
    matrix = rng.integers(0, 1000, size=(ranks, ranks)) * (rng.random((ranks, ranks)) < 0.7)
    for row_bytes in (1, 8, 24):
        for max_bytes in (1, row_bytes * ranks + 5, 4096, 1 << 20):
            agreed = max(ex.rounds_needed(matrix[r], matrix[:, r], row_bytes, max_bytes) for r in range(ranks))
            rows = max(max(matrix[r].sum(), matrix[:, r].sum()) for r in range(ranks))
            assert ex.rounds_for(int(rows), int(matrix.max(initial=0)), ranks, row_bytes, max_bytes) == agreed


def check_rounds(send_counts, recv_counts, column_bytes, max_bytes):
    """Every round's counts and displacements fit MPI's int, and the rounds tile the rows."""
    rounds, plan = all_rounds(send_counts, recv_counts, sum(column_bytes), max_bytes)
    for counts, side in ((send_counts, 0), (recv_counts, 1)):
        at = [0] * len(counts)
        for sides in plan:
            lo, hi = sides[side]
            assert lo.tolist() == at
            at = hi.tolist()
            for rb in column_bytes:
                sizes, displs = ex.mpi_counts((hi - lo) * rb)
                assert displs[-1] + sizes[-1] <= min(max_bytes, ex.MAX_MPI_COUNT)
        assert at == list(counts)
    return rounds


def test_alltoallv_rounds_keep_counts_below_2_31() -> None:
    # 3e9 and 5e9 rows of 8 + 4 + 1 bytes to four peers: 100 GB in and out of one rank.
    send, recv = [3 * B, 5 * B, 0, 7], [2**31, 1, 4 * B, 5 * B]
    rounds = check_rounds(send, recv, [8, 4, 1], ex.DEFAULT_MAX_BYTES)
    assert rounds == -(-(9 * B + 2**31 + 1) * 13 // (ex.DEFAULT_MAX_BYTES - 4 * 13))
    # No cap but MPI's own: still split, at 2**31 - 1 bytes per call.
    rounds = check_rounds(send, recv, [8, 4, 1], 2**40)
    assert rounds == -(-(9 * B + 2**31 + 1) * 13 // (INT32_MAX - 4 * 13))


def test_one_unsplit_alltoallv_would_overflow() -> None:
    with pytest.raises(ex.CountOverflow, match=rf"more than MPI's int count \({INT32_MAX}\)"):
        ex.mpi_counts(np.array([3 * B, 0]) * 8)
    with pytest.raises(ex.CountOverflow):   # each count fits; the last displacement + count does not
        ex.mpi_counts(np.array([2**30, 2**30]))
    assert ex.mpi_counts(np.array([2**30, 2**30 - 1])) == ([2**30, 2**30 - 1], [0, 2**30])


def test_lowered_limit_forces_the_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ex, "MAX_MPI_COUNT", 100)
    rounds = check_rounds([40, 0, 13], [5, 30, 30], [8, 2], ex.DEFAULT_MAX_BYTES)
    assert rounds == -(-65 * 10 // (100 - 3 * 10))
    # A cap below one row per peer: one row per peer per round, as many rounds as rows.
    assert check_rounds([40, 0, 13], [5, 30, 30], [8, 8, 8, 8], ex.DEFAULT_MAX_BYTES) == 40
    with pytest.raises(ex.CountOverflow, match=r"\(100\)"):
        ex.mpi_counts(np.array([60, 41]))


def test_round_slice_is_exact_when_c_times_j_passes_int64() -> None:
    counts = np.array([5 * B, 2**62, 0, 1])
    rounds = 3 * B
    for j in (0, 1, rounds // 2, rounds - 1):
        lo, hi = ex.round_slice(counts, j, rounds)
        assert lo.tolist() == [int(c) * j // rounds for c in counts]
        assert hi.tolist() == [int(c) * (j + 1) // rounds for c in counts]


def test_exclusive_cumsum_of_counts_past_2_31() -> None:
    counts = np.array([[3 * B, 2**31], [5 * B, 1]], dtype=np.int64)
    assert exclusive_cumsum(counts).tolist() == [[0, 3 * B], [3 * B + 2**31, 8 * B + 2**31]]
    # int32 counts (bincount of a narrow array, a reader's row counts) are summed in int64.
    narrow = np.array([INT32_MAX, INT32_MAX, 5], dtype=np.int32)
    assert exclusive_cumsum(narrow).tolist() == [0, INT32_MAX, 2 * INT32_MAX]
    assert offsets(narrow).tolist() == [0, INT32_MAX, 2 * INT32_MAX, 2 * INT32_MAX + 5]


# ---------------------------------------------------------------- dispatch: relabelling with 5e9 nodes on the other rank

def test_relabel_as_last_rank_after_billions(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from distpart.dispatch.dispatch import _relabel_nodes
    from large_comm import LastOfTwo

    # (P, T) nodes of each type in each partition held by the other rank: 5e9 + 2**31 + 6.
    before = np.array([[3 * B, 2**31], [B + 1, 5], [B, 0]], dtype=np.int64)
    parts = {"a": np.array([1, 0, 1, 2]), "b": np.array([0, 0, 1, 2, 2])}
    meta = SimpleNamespace(node_types=("a", "b"))
    assignment = SimpleNamespace(num_parts=3, blocks={t: SimpleNamespace(parts=p) for t, p in parts.items()})
    state = _relabel_nodes(LastOfTwo(before), meta, assignment)
    local = np.stack([np.bincount(parts[t], minlength=3) for t in ("a", "b")], axis=1)
    counts = (before + local).tolist()
    assert state.node_counts.tolist() == counts
    flat = py_offsets([c for row in counts for c in row])
    assert state.node_starts.reshape(-1).tolist() == flat[:-1]
    for t, name in enumerate(("a", "b")):
        seen = [0, 0, 0]
        want = []
        for p in parts[name].tolist():
            want.append(flat[p * 2 + t] + int(before[p, t]) + seen[p])
            seen[p] += 1
        assert state.new_ids[name].tolist() == want
    # Partition 0's "b" nodes come after its 3e9 + 1 "a" nodes and the other rank's 2**31 "b".
    assert state.new_ids["b"].tolist()[:2] == [3 * B + 1 + 2**31, 3 * B + 2 + 2**31]


def test_keyed_permutation_of_billions_stays_in_range() -> None:
    from distpart.arrays import keyed_permutation

    n = 2**33 + 7
    ids = np.concatenate([np.arange(1000, dtype=np.int64), n - 1 - np.arange(1000), [INT32_MAX, 2**31, 2**32]])
    out = keyed_permutation(ids, n, key=12345)
    assert out.dtype == np.int64 and out.min() >= 0 and out.max() < n
    assert len(np.unique(out)) == len(ids)                       # injective on the sample
    assert (out > 2**32).any()                                   # the image reaches past 2**32
    np.testing.assert_array_equal(keyed_permutation(ids, n, key=12345), out)
