"""distpart.assign.assignment, pure parts: the keyed permutation, random partitions, file helpers."""
from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from distpart.arrays import keyed_permutation
from distpart.assign.assignment import META_FILE, format_lines, random_parts, read_partition_meta
from distpart.errors import InputError
from distpart.chunked.readers import block_bounds, read_csv_ints

SIZES = [0, 1, 2, 3, 5, 7, 13, 97, 101, 1009, 4, 8, 16, 64, 256, 1024, 4096, 4**7, 2**20 // 8,
         4**5 + 1, 10**5 + 3]
KEYS = [0, 1, 2, 7919, 123456789, 2**31 - 1]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("key", KEYS)
def test_keyed_permutation_is_a_bijection(n: int, key: int) -> None:
    perm = keyed_permutation(np.arange(n, dtype=np.int64), n, key)
    assert perm.dtype == np.int64 and perm.shape == (n,)
    assert ((perm >= 0) & (perm < n)).all()
    assert np.array_equal(np.sort(perm), np.arange(n))


@pytest.mark.parametrize("n", [3, 97, 1024, 10**5 + 3])
def test_keyed_permutation_is_pointwise(n: int) -> None:
    """perm(i) depends on i only, not on which other IDs are asked at the same time."""
    rng = np.random.default_rng(n)
    full = keyed_permutation(np.arange(n), n, 42)
    ids = rng.integers(0, n, 500)
    np.testing.assert_array_equal(keyed_permutation(ids, n, 42), full[ids])
    np.testing.assert_array_equal(keyed_permutation(np.empty(0, np.int64), n, 42), [])


@pytest.mark.parametrize("n", [64, 101, 1000, 4096, 10**5 + 3])
def test_different_keys_give_different_permutations(n: int) -> None:
    perms = [keyed_permutation(np.arange(n), n, k) for k in range(12)]
    for i in range(len(perms)):
        for j in range(i + 1, len(perms)):
            assert not np.array_equal(perms[i], perms[j]), (i, j)
    # And none of them is the identity.
    assert all(not np.array_equal(p, np.arange(n)) for p in perms)


def test_keyed_permutation_is_deterministic() -> None:
    a = keyed_permutation(np.arange(1000), 1000, 5)
    b = keyed_permutation(np.arange(1000), 1000, 5)
    np.testing.assert_array_equal(a, b)


def part_sizes(parts: np.ndarray, P: int) -> np.ndarray:
    return np.bincount(parts, minlength=P)


@pytest.mark.parametrize("P", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("n_of", ["zero", "less", "equal", "more", "much_more"])
@pytest.mark.parametrize("seed", [0, 1, 99])
def test_random_parts_balanced(P: int, n_of: str, seed: int) -> None:
    n = {"zero": 0, "less": max(P - 1, 0), "equal": P, "more": 3 * P + 1, "much_more": 10007 * P + 5}[n_of]
    for type_index in (0, 3):
        parts = random_parts(np.arange(n, dtype=np.int64), n, P, seed, type_index)
        assert parts.dtype == np.int64 and len(parts) == n
        assert ((parts >= 0) & (parts < P)).all()
        sizes = part_sizes(parts, P)
        assert len(sizes) == P
        assert sizes.max() - sizes.min() <= 1
        assert sizes.sum() == n


def test_random_parts_n_equal_p_gives_every_partition_one_node() -> None:
    for P in (2, 5, 64):
        parts = random_parts(np.arange(P), P, P, 3, 1)
        assert sorted(parts.tolist()) == list(range(P))


@pytest.mark.parametrize("n,P", [(1, 1), (5, 2), (1000, 3), (10**5 + 3, 8), (17, 32)])
def test_random_parts_rank_independent(n: int, P: int) -> None:
    """Any split of [0, n) into contiguous blocks (any rank count) gives the same assignment."""
    whole = random_parts(np.arange(n, dtype=np.int64), n, P, 11, 2)
    rng = np.random.default_rng(n)
    for nranks in (1, 2, 3, 4, 7, 64):
        bounds = block_bounds(n, nranks)
        pieces = [random_parts(np.arange(bounds[r], bounds[r + 1], dtype=np.int64), n, P, 11, 2)
                  for r in range(nranks)]
        np.testing.assert_array_equal(np.concatenate(pieces), whole)
    cuts = np.concatenate([[0], np.sort(rng.integers(0, n + 1, 5)), [n]])
    pieces = [random_parts(np.arange(a, b), n, P, 11, 2) for a, b in zip(cuts[:-1], cuts[1:])]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)


def test_random_parts_depends_on_seed_and_type() -> None:
    n, P = 5000, 4
    ids = np.arange(n)
    base = random_parts(ids, n, P, 0, 0)
    assert not np.array_equal(base, random_parts(ids, n, P, 1, 0))
    assert not np.array_equal(base, random_parts(ids, n, P, 0, 1))
    # Not a trivial pattern such as i mod P.
    assert not np.array_equal(base, ids % P)


@pytest.mark.parametrize("seed", [-1, 2**32, 2**50])
def test_random_parts_any_integer_seed(seed: int) -> None:
    parts = random_parts(np.arange(100), 100, 4, seed, 0)
    assert part_sizes(parts, 4).tolist() == [25, 25, 25, 25]


# ---------------------------------------------------------------- files

@pytest.mark.parametrize("values", [[0], [3, 0, 12], list(range(1000)), [2**40, 0, 7]])
def test_format_lines_round_trip(tmp_path: Path, values: list) -> None:
    data = format_lines(np.array(values))
    assert isinstance(data, bytes)
    lines = data.decode().split("\n")
    assert lines[-1] == ""  # newline-terminated
    assert lines[:-1] == [str(v) for v in values]  # one integer per line, no header, no quotes
    back = np.loadtxt(io.BytesIO(data), dtype=np.int64, ndmin=1)
    assert back.tolist() == values
    path = tmp_path / "t.txt"
    path.write_bytes(data)
    assert read_csv_ints(path, 0, len(data), 1)[:, 0].tolist() == values


def test_format_lines_random_blocks_concatenate(tmp_path: Path) -> None:
    """Rank blocks written one after the other form one valid file (how write_assignment works)."""
    parts = random_parts(np.arange(777), 777, 5, 0, 0)
    bounds = block_bounds(777, 4)
    data = b"".join(format_lines(parts[bounds[r]:bounds[r + 1]]) for r in range(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = np.loadtxt(io.BytesIO(data), dtype=np.int64)
    np.testing.assert_array_equal(back, parts)


def test_format_lines_empty() -> None:
    assert format_lines(np.empty(0, np.int64)) == b""


def test_read_partition_meta_absent(tmp_path: Path) -> None:
    assert read_partition_meta(tmp_path) is None
    assert read_partition_meta(tmp_path / "no_such_dir") is None


def test_read_partition_meta_valid(tmp_path: Path) -> None:
    obj = {"algo_name": "metis", "num_parts": 4, "version": "1.0.0"}
    (tmp_path / META_FILE).write_text(json.dumps(obj))
    assert read_partition_meta(tmp_path) == obj
    assert META_FILE == "partition_meta.json"


def test_read_partition_meta_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / META_FILE
    path.write_text('{"algo_name": "random",\n "num_parts": 4,\n}')
    with pytest.raises(InputError) as info:
        read_partition_meta(tmp_path)
    msg = str(info.value)
    assert info.value.where == str(path)
    assert "malformed JSON" in msg and "line 3" in msg and "column" in msg


@pytest.mark.parametrize("text", ['{"algo_name": "random"}', '{"num_parts": 0}', '{"num_parts": -2}',
                                  '{"num_parts": "4"}', '{"num_parts": 4.0}', '{"num_parts": null}',
                                  '{"num_parts": false}', '[4]', '4', '"num_parts"'])
def test_read_partition_meta_bad_num_parts(tmp_path: Path, text: str) -> None:
    (tmp_path / META_FILE).write_text(text)
    with pytest.raises(InputError) as info:
        read_partition_meta(tmp_path)
    assert info.value.where == str(tmp_path / META_FILE)
    assert "num_parts" in str(info.value)


def test_read_partition_meta_bool_num_parts(tmp_path: Path) -> None:
    (tmp_path / META_FILE).write_text('{"algo_name": "random", "num_parts": true}')
    with pytest.raises(InputError):
        read_partition_meta(tmp_path)
