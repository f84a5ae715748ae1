"""The pure ID helpers (distpart.arrays, dispatch.relabel, partbook, exchange.concat_ranges), against brute-force Python."""
from __future__ import annotations

from typing import List

import numpy as np
import pytest

from distpart.arrays import exclusive_cumsum, group_by_owner, new_node_ids, rank_within_group, sorted_unique
from distpart.dispatch.relabel import local_graph
from distpart.mpi.exchange import _forms_key, concat_ranges
from distpart.partitions.partbook import range_starts, type_of

SEEDS = range(25)


def random_counts(rng: np.random.Generator, zero_rate: float = 0.3) -> np.ndarray:
    P, T = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    counts = rng.integers(0, 9, (P, T)) * (rng.random((P, T)) > zero_rate)
    return counts.astype(np.int64)


def random_split(rng: np.random.Generator, n: int, nblocks: int) -> List[int]:
    """Block boundaries of [0, n) into nblocks (possibly empty) contiguous blocks."""
    inner = np.sort(rng.integers(0, n + 1, nblocks - 1))
    return [0, *map(int, inner), n]


# ---------------------------------------------------------------- exchange helpers

@pytest.mark.parametrize("seed", SEEDS)
def test_group_by_owner(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nranks = int(rng.choice([1, 2, 3, 7, 255, 256, 257, 70000]))
    owner = rng.integers(0, nranks, int(rng.integers(0, 300))).astype(np.int64)
    order, counts = group_by_owner(owner, nranks)
    assert counts.dtype == np.int64 and len(counts) == nranks
    expected_counts = [0] * nranks
    for r in owner.tolist():
        expected_counts[r] += 1
    assert counts.tolist() == expected_counts
    assert sorted(order.tolist()) == list(range(len(owner)))
    expected = [i for r in sorted(set(owner.tolist())) for i in range(len(owner)) if owner[i] == r]
    assert order.tolist() == expected  # grouped by owner, original order inside a group


def test_group_by_owner_empty() -> None:
    order, counts = group_by_owner(np.empty(0, np.int64), 4)
    assert len(order) == 0 and counts.tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("seed", SEEDS)
def test_concat_ranges(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(0, 10))
    starts = rng.integers(-50, 10**12, k)
    lengths = rng.integers(0, 6, k) * (rng.random(k) < 0.7)
    got = concat_ranges(starts, lengths)
    expected = [s + j for s, n in zip(starts.tolist(), lengths.tolist()) for j in range(n)]
    assert got.dtype == np.int64
    assert got.tolist() == expected


def test_forms_key_tells_column_forms_apart() -> None:
    """The exchange's one reduction compares this key (max == min) instead of gathering forms."""
    a = [np.zeros(3, np.int64), np.zeros((3, 2), np.float32)]
    key = _forms_key(a)
    assert key == _forms_key([np.ones(0, np.int64), np.ones((5, 2), np.float32)])  # rows do not count
    assert 0 <= key < 2**56   # key and -key fit int64
    others = [[np.zeros(3, np.int32), a[1]], [a[0], np.zeros((3, 2), np.float64)],
              [a[0], np.zeros((3, 3), np.float32)], [a[0]], [a[1], a[0]]]
    assert len({key, *(_forms_key(o) for o in others)}) == 1 + len(others)


def test_concat_ranges_all_empty() -> None:
    assert concat_ranges(np.array([5, 9]), np.array([0, 0])).tolist() == []
    assert concat_ranges(np.empty(0, np.int64), np.empty(0, np.int64)).dtype == np.int64


@pytest.mark.parametrize("values", [[], [7], [3, 0, 4], [2**40, 2**40, 1], list(range(100))])
def test_exclusive_cumsum(values: List[int]) -> None:
    got = exclusive_cumsum(np.array(values, dtype=np.int64))
    assert got.dtype == np.int64
    assert got.tolist() == [sum(values[:i]) for i in range(len(values))]


# ---------------------------------------------------------------- relabel

@pytest.mark.parametrize("seed", SEEDS)
def test_range_starts(seed: int) -> None:
    counts = random_counts(np.random.default_rng(seed))
    starts = range_starts(counts)
    P, T = counts.shape
    assert starts.shape == (P, T) and starts.dtype == np.int64
    flat = counts.reshape(-1).tolist()
    for p in range(P):
        for t in range(T):
            assert starts[p, t] == sum(flat[: p * T + t])


def test_range_starts_small() -> None:
    assert range_starts(np.array([[1, 2], [3, 4]])).tolist() == [[0, 1], [3, 6]]
    assert range_starts(np.zeros((2, 0), np.int64)).shape == (2, 0)


@pytest.mark.parametrize("seed", SEEDS)
def test_rank_within_group(seed: int) -> None:
    rng = np.random.default_rng(seed)
    num_groups = int(rng.integers(1, 9))
    groups = rng.integers(0, num_groups, int(rng.integers(0, 200)))
    got = rank_within_group(groups, num_groups)
    expected = [int((groups[:i] == g).sum()) for i, g in enumerate(groups)]
    assert got.dtype == np.int64 and got.tolist() == expected


def brute_new_ids(parts: np.ndarray, start_col: np.ndarray) -> List[int]:
    seen = [0] * len(start_col)
    out = []
    for p in parts.tolist():
        out.append(int(start_col[p]) + seen[p])
        seen[p] += 1
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_new_node_ids_one_block(seed: int) -> None:
    rng = np.random.default_rng(seed)
    P = int(rng.integers(1, 7))
    parts = rng.integers(0, P, int(rng.integers(0, 150)))
    base = rng.integers(0, 10**9, P)
    got = new_node_ids(parts, base)
    assert got.dtype == np.int64
    assert got.tolist() == brute_new_ids(parts, base)


@pytest.mark.parametrize("seed", SEEDS)
def test_new_node_ids_rank_count_independent(seed: int) -> None:
    """Any split of a type's nodes into blocks, with base = range start + counts per partition
    in lower blocks (as dispatch computes it), gives the same IDs as one block."""
    rng = np.random.default_rng(seed)
    P, T = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    sizes = rng.integers(0, 60, T) * (rng.random(T) < 0.85)
    parts = [rng.integers(0, P, int(n)) for n in sizes]
    counts = np.stack([np.bincount(pt, minlength=P) for pt in parts], axis=1).astype(np.int64)
    starts = range_starts(counts)

    all_ids = []
    for t in range(T):
        whole = new_node_ids(parts[t], starts[:, t])
        assert whole.tolist() == brute_new_ids(parts[t], starts[:, t])
        # Each node lands inside its (partition, type) range.
        for i, p in enumerate(parts[t].tolist()):
            assert starts[p, t] <= whole[i] < starts[p, t] + counts[p, t]
        all_ids.append(whole)
        for nblocks in (1, 2, 3, 5, int(rng.integers(1, 12))):
            bounds = random_split(rng, len(parts[t]), nblocks)
            below = np.zeros(P, dtype=np.int64)
            pieces = []
            for r in range(nblocks):
                block = parts[t][bounds[r]:bounds[r + 1]]
                pieces.append(new_node_ids(block, starts[:, t] + below))
                below += np.bincount(block, minlength=P)
            np.testing.assert_array_equal(np.concatenate(pieces), whole)
    # Together the types' new IDs are exactly [0, N), and type_of recovers each type.
    joined = np.concatenate(all_ids) if all_ids else np.empty(0, np.int64)
    assert sorted(joined.tolist()) == list(range(int(counts.sum())))
    for t in range(T):
        assert (type_of(all_ids[t], counts) == t).all()


def brute_type_of(ids: np.ndarray, counts: np.ndarray) -> List[int]:
    P, T = counts.shape
    owner = []
    for i in ids.tolist():
        pos = 0
        for p in range(P):
            for t in range(T):
                if pos <= i < pos + counts[p, t]:
                    owner.append(t)
                pos += int(counts[p, t])
    return owner


@pytest.mark.parametrize("seed", SEEDS)
def test_type_of_with_empty_ranges(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = random_counts(rng, zero_rate=0.5)
    total = int(counts.sum())
    ids = rng.permutation(total)
    got = type_of(ids, counts)
    assert got.tolist() == brute_type_of(ids, counts)


@pytest.mark.parametrize("counts", [
    [[0, 3], [0, 0], [2, 0]],
    [[0, 0, 4]],
    [[4, 0, 0], [0, 0, 0], [0, 0, 1]],
    [[0], [0], [5]],
    [[1, 1, 1]],
])
def test_type_of_examples(counts: List[List[int]]) -> None:
    c = np.array(counts, dtype=np.int64)
    ids = np.arange(int(c.sum()))
    assert type_of(ids, c).tolist() == brute_type_of(ids, c)
    assert type_of(np.empty(0, np.int64), c).tolist() == []


@pytest.mark.parametrize("seed", SEEDS)
def test_sorted_unique(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(-20, int(rng.integers(1, 50)), int(rng.integers(0, 100)))
    got = sorted_unique(values)
    assert got.dtype == values.dtype
    assert got.tolist() == sorted(set(values.tolist()))


def test_sorted_unique_empty_is_a_copy() -> None:
    v = np.empty(0, np.int64)
    out = sorted_unique(v)
    assert out.dtype == np.int64 and len(out) == 0 and out is not v


@pytest.mark.parametrize("seed", SEEDS)
def test_local_graph(seed: int) -> None:
    rng = np.random.default_rng(seed)
    total = int(rng.integers(1, 100))
    first = int(rng.integers(0, total))
    stop = int(rng.integers(first + 1, total + 1))
    m = int(rng.integers(0, 200))
    src = rng.integers(0, total, m)
    dst = rng.integers(first, stop, m)
    halo, lsrc, ldst = local_graph(first, stop, src, dst)

    outside = sorted({s for s in src.tolist() if not first <= s < stop})
    assert halo.tolist() == outside  # ascending, unique, exactly the non-owned sources
    assert lsrc.dtype == np.int64 and ldst.dtype == np.int64
    assert len(lsrc) == len(ldst) == m
    # Local IDs: owned nodes first, in new-ID order, then the halo.
    node_ids = np.concatenate([np.arange(first, stop), halo])
    np.testing.assert_array_equal(node_ids[lsrc], src)
    np.testing.assert_array_equal(node_ids[ldst], dst)
    n_owned = stop - first
    assert ((ldst >= 0) & (ldst < n_owned)).all()  # every destination is owned
    assert ((lsrc >= 0) & (lsrc < n_owned + len(halo))).all()
    inner = (src >= first) & (src < stop)
    np.testing.assert_array_equal(lsrc[inner], src[inner] - first)
    assert (lsrc[~inner] >= n_owned).all()


def test_local_graph_example() -> None:
    halo, lsrc, ldst = local_graph(10, 13, np.array([20, 11, 3, 20, 12]), np.array([10, 12, 11, 11, 10]))
    assert halo.tolist() == [3, 20]
    assert lsrc.tolist() == [4, 1, 3, 4, 2]
    assert ldst.tolist() == [0, 2, 1, 1, 0]


def test_local_graph_no_edges() -> None:
    halo, lsrc, ldst = local_graph(5, 9, np.empty(0, np.int64), np.empty(0, np.int64))
    assert len(halo) == len(lsrc) == len(ldst) == 0


@pytest.mark.parametrize("nparts", [1, 2, 5, 128])
def test_by_partition_is_a_stable_grouping(nparts: int) -> None:
    """One counting sort gives each own partition's rows in arrival order, as a scan per
    partition did (issue 11 item 7: that scan cost O(P/R x N))."""
    from distpart.dispatch.relabel import by_partition, node_groups
    rng = np.random.default_rng(nparts)
    part = rng.integers(0, nparts, 10_000)
    groups = by_partition(part, nparts)
    assert len(groups) == nparts
    for i, rows in enumerate(groups):
        np.testing.assert_array_equal(rows, np.flatnonzero(part == i))
    starts = np.arange(nparts) * 1000
    new_ids = np.sort(rng.integers(0, nparts * 1000, 5000))
    for i, rows in enumerate(node_groups(new_ids, starts)):
        np.testing.assert_array_equal(rows, np.flatnonzero((new_ids >= starts[i]) & (new_ids < starts[i] + 1000)))


def test_id_dtype_boundary() -> None:
    """int32 exactly while every ID of [0, count) fits: 2**31 IDs do, one more does not."""
    from distpart.arrays import id_dtype
    assert id_dtype(0) == np.int32 and id_dtype(2**31) == np.int32
    assert id_dtype(2**31 + 1) == np.int64 and id_dtype(2**40) == np.int64


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_to_local_in_pieces_matches_local_graph(dtype) -> None:
    """Pieces converted in place give local_graph's IDs, whatever the held dtype."""
    from distpart.dispatch.relabel import to_local
    rng = np.random.default_rng(5)
    first, stop = 40, 90
    srcs = [rng.integers(0, 200, n).astype(dtype) for n in (0, 7, 300)]
    dsts = [rng.integers(first, stop, len(s)).astype(dtype) for s in srcs]
    want = local_graph(first, stop, np.concatenate(srcs), np.concatenate(dsts))
    halo = to_local(first, stop, srcs, dsts)
    assert halo.tolist() == want[0].tolist()
    assert np.concatenate(srcs).tolist() == want[1].tolist()
    assert np.concatenate(dsts).tolist() == want[2].tolist()
    assert all(s.dtype == dtype for s in srcs + dsts)
