"""distpart.chunked.readers: block cutting, byte-range CSV reading, edge pieces and feature sources."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import List, Sequence, Tuple

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import distpart.chunked.readers as readers
import distpart.chunked.readers.csv as readers_csv
import distpart.chunked.readers.features as readers_features
import distpart.chunked.readers.opening as opening
import distpart.chunked.readers.parquet as readers_parquet
from distpart.errors import InputError
from distpart.chunked.metadata import ChunkFiles, FileFormat, parse_metadata
from distpart.chunked.readers import (
    FeatureSource,
    Piece,
    block_bounds,
    edge_file_sizes,
    pieces_of_block,
    read_csv_ints,
    read_edge_piece,
)

# ---------------------------------------------------------------- block_bounds / pieces_of_block


@pytest.mark.parametrize("total", [0, 1, 2, 7, 100, 101, 2**40 + 3])
@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 7, 16, 200])
def test_block_bounds(total: int, nranks: int) -> None:
    b = block_bounds(total, nranks)
    assert b.dtype == np.int64
    assert len(b) == nranks + 1
    assert b[0] == 0 and b[-1] == total
    sizes = np.diff(b)
    assert (sizes >= 0).all()
    assert sizes.max() - sizes.min() <= 1
    assert sizes.sum() == total


def check_cover(sizes: Sequence[int], nranks: int) -> None:
    """Every unit of every file is in exactly one piece, and ranks take consecutive blocks."""
    seen = [np.zeros(s, dtype=np.int64) for s in sizes]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bounds = block_bounds(int(offsets[-1]), nranks)
    for rank in range(nranks):
        pieces = pieces_of_block(sizes, rank, nranks)
        globals_ = []
        for pc in pieces:
            assert isinstance(pc, Piece)
            assert 0 <= pc.start < pc.stop <= sizes[pc.file], pc  # never empty, inside the file
            seen[pc.file][pc.start:pc.stop] += 1
            globals_.append((offsets[pc.file] + pc.start, offsets[pc.file] + pc.stop))
        # Pieces are in file order and tile exactly this rank's block.
        assert [pc.file for pc in pieces] == sorted({pc.file for pc in pieces})
        if globals_:
            assert globals_[0][0] == bounds[rank] and globals_[-1][1] == bounds[rank + 1]
            assert all(globals_[i][1] == globals_[i + 1][0] for i in range(len(globals_) - 1))
        else:
            assert bounds[rank] == bounds[rank + 1]
    for s in seen:
        assert (s == 1).all()


def test_pieces_of_block_random() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        nfiles = int(rng.integers(0, 8))
        sizes = [int(x) for x in rng.integers(0, 40, nfiles) * (rng.random(nfiles) < 0.7)]
        check_cover(sizes, int(rng.integers(1, 12)))


@pytest.mark.parametrize("sizes", [[], [0], [0, 0, 0], [5], [1, 0, 1], [0, 10, 0], [3, 3, 3]])
@pytest.mark.parametrize("nranks", [1, 2, 3, 5, 13])
def test_pieces_of_block_edge_cases(sizes: List[int], nranks: int) -> None:
    check_cover(sizes, nranks)


def test_pieces_of_block_example() -> None:
    assert pieces_of_block([4, 0, 6], 0, 2) == [Piece(0, 0, 4), Piece(2, 0, 1)]
    assert pieces_of_block([4, 0, 6], 1, 2) == [Piece(2, 1, 6)]
    assert pieces_of_block([2**40, 2**40], 1, 2) == [Piece(1, 0, 2**40)]


# ---------------------------------------------------------------- CSV


def write_csv(path: Path, rows: np.ndarray, delim: str = " ", newline: str = "\n",
              trailing: bool = True, blank_every: int = 0) -> bytes:
    lines = []
    for i, row in enumerate(rows):
        lines.append(delim.join(str(int(v)) for v in row))
        if blank_every and i % blank_every == blank_every - 1:
            lines.append("")
    text = newline.join(lines) + (newline if trailing and lines else "")
    data = text.encode()
    path.write_bytes(data)
    return data


def row_line_starts(data: bytes) -> np.ndarray:
    """Byte offset of every non-empty line."""
    starts, pos = [], 0
    for line in data.split(b"\n"):
        if line.strip(b"\r"):
            starts.append(pos)
        pos += len(line) + 1
    return np.array(starts, dtype=np.int64)


def random_rows(rng: np.random.Generator, n: int, ncols: int) -> np.ndarray:
    small = rng.integers(-5, 1000, (n, ncols))
    big = rng.integers(-2**62, 2**62, (n, ncols))
    return np.where(rng.random((n, ncols)) < 0.2, big, small).astype(np.int64)


CSV_VARIANTS = [
    # (delimiter, newline, trailing newline, blank line every k rows)
    (" ", "\n", True, 0),
    (" ", "\n", False, 0),
    (" ", "\r\n", True, 0),
    (" ", "\r\n", False, 0),
    (",", "\n", True, 0),
    ("\t", "\r\n", True, 0),
    (";", "\n", False, 0),
    ("|", "\n", True, 5),
    (" ", "\n", True, 1),
]


@pytest.mark.parametrize("delim,newline,trailing,blank", CSV_VARIANTS)
def test_csv_pieces_concatenate_to_whole_file(tmp_path: Path, delim: str, newline: str,
                                              trailing: bool, blank: int) -> None:
    """The key property: for any cut points, the pieces' rows concatenate to the whole file."""
    rng = np.random.default_rng(zlib.crc32(repr((delim, newline, trailing, blank)).encode()))
    for trial in range(8):
        n = int(rng.choice([0, 1, 2, 3, 17, 250]))
        ncols = int(rng.integers(1, 4))
        rows = random_rows(rng, n, ncols)
        path = tmp_path / f"e{trial}.csv"
        data = write_csv(path, rows, delim, newline, trailing, blank)
        size = len(data)
        whole = read_csv_ints(path, 0, size, ncols, delim)
        assert whole.dtype == np.int64 and whole.shape == (n, ncols)
        np.testing.assert_array_equal(whole, rows)

        starts = row_line_starts(data)
        assert len(starts) == n
        cut_sets = [block_bounds(size, r) for r in (1, 2, 3, 4, 7, 16)]
        for _ in range(6):
            k = int(rng.integers(0, 12))
            inner = np.sort(rng.integers(0, size + 1, k)) if size else np.zeros(0, np.int64)
            cut_sets.append(np.concatenate([[0], inner, [size]]))
        for cuts in cut_sets:
            got = []
            for a, b in zip(cuts[:-1], cuts[1:]):
                part = read_csv_ints(path, int(a), int(b), ncols, delim)
                assert part.dtype == np.int64 and part.shape[1] == ncols
                # Exactly the rows whose line starts inside [a, b).
                np.testing.assert_array_equal(part, rows[(starts >= a) & (starts < b)])
                got.append(part)
            np.testing.assert_array_equal(np.concatenate(got), rows)


def test_csv_stop_beyond_end_and_start_at_end(tmp_path: Path) -> None:
    rows = np.arange(20).reshape(10, 2)
    path = tmp_path / "e.csv"
    size = len(write_csv(path, rows, trailing=False))
    np.testing.assert_array_equal(read_csv_ints(path, 0, size + 100, 2), rows)
    assert read_csv_ints(path, size, size + 5, 2).shape == (0, 2)
    np.testing.assert_array_equal(read_csv_ints(path, 1, size, 2), rows[1:])


def test_csv_pieces_long_lines(tmp_path: Path) -> None:
    """Lines longer than the 64 KiB probe window of the line-start search."""
    rng = np.random.default_rng(3)
    ncols = 7000
    rows = rng.integers(-10**12, 10**12, (4, ncols))
    path = tmp_path / "wide.csv"
    data = write_csv(path, rows, ",")
    starts = row_line_starts(data)
    for cuts in ([0, 70000, 140000, len(data)], [0, starts[1] - 1, starts[1], starts[1] + 1, len(data)]):
        got = [read_csv_ints(path, a, b, ncols, ",") for a, b in zip(cuts[:-1], cuts[1:])]
        np.testing.assert_array_equal(np.concatenate(got), rows)


@pytest.mark.parametrize("content", [b"", b"\n", b"\n\n\r\n"])
def test_csv_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(content)
    for a, b in [(0, 0), (0, len(content)), (0, 100), (1, 5)]:
        out = read_csv_ints(path, a, b, 2)
        assert out.shape == (0, 2) and out.dtype == np.int64


def test_csv_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_csv_ints(tmp_path / "nope.csv", 0, 10, 2)
    assert str(tmp_path / "nope.csv") in str(info.value)


def bad_csv(tmp_path: Path, bad: str, line_index: int = 1500, n: int = 2000,
            newline: str = "\n", delim: str = " ") -> Tuple[Path, int]:
    lines = [f"{i}{delim}{i + 1}" for i in range(n)]
    lines[line_index] = bad
    path = tmp_path / "bad.csv"
    path.write_text(newline.join(lines) + newline, newline="")
    return path, path.stat().st_size


@pytest.mark.parametrize("bad", ["1 x", "x 1", "1 1.5", "1 -", "abc def", "1 2e3", "1 1_000"])
def test_csv_non_integer_names_file_and_line(tmp_path: Path, bad: str) -> None:
    path, size = bad_csv(tmp_path, bad)
    # Whole file, and a piece that starts far into the file: the line is the file's line.
    for start in (0, 5000, 12000):
        with pytest.raises(InputError) as info:
            read_csv_ints(path, start, size, 2)
        msg = str(info.value)
        assert str(path) in msg and info.value.where == str(path)
        assert "line 1501" in msg, msg
    # A piece that does not contain the bad line reads fine.
    assert len(read_csv_ints(path, 0, 12000, 2)) > 0


def test_csv_non_integer_line_with_crlf(tmp_path: Path) -> None:
    path, size = bad_csv(tmp_path, "7 seven", line_index=30, n=50, newline="\r\n")
    with pytest.raises(InputError) as info:
        read_csv_ints(path, 0, size, 2)
    assert "line 31" in str(info.value)


def test_csv_non_integer_custom_delimiter(tmp_path: Path) -> None:
    path, size = bad_csv(tmp_path, "4,four", line_index=0, n=5, delim=",")
    with pytest.raises(InputError) as info:
        read_csv_ints(path, 0, size, 2, ",")
    assert str(path) in str(info.value) and "line 1" in str(info.value)


@pytest.mark.parametrize("bad", ["1", "1 2 3", "1 2 3 4"])
def test_csv_wrong_column_count(tmp_path: Path, bad: str) -> None:
    path, size = bad_csv(tmp_path, bad)
    for start in (0, 5000):
        with pytest.raises(InputError) as info:
            read_csv_ints(path, start, size, 2)
        assert str(path) in str(info.value) and "line 1501" in str(info.value)


def test_csv_wrong_column_count_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "three.csv"
    path.write_text("1 2 3\n4 5 6\n")
    with pytest.raises(InputError) as info:
        read_csv_ints(path, 0, 100, 2)
    assert str(path) in str(info.value) and "line 1" in str(info.value)
    np.testing.assert_array_equal(read_csv_ints(path, 0, 100, 3), [[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize("bad", ["1 2 ", " 1 2", "1 ", "1 99999999999999999999"])
def test_csv_bad_field_names_the_line(tmp_path: Path, bad: str) -> None:
    path, size = bad_csv(tmp_path, bad)
    with pytest.raises(InputError) as info:
        read_csv_ints(path, 5000, size, 2)
    assert str(path) in str(info.value)
    assert "line 1501" in str(info.value), str(info.value)


def test_csv_bad_field_is_still_an_input_error(tmp_path: Path) -> None:
    """Whatever the message, these inputs are rejected with an InputError naming the file."""
    for bad in ["1 2 ", " 1 2", "1 ", "1 99999999999999999999", ""]:
        path, size = bad_csv(tmp_path, bad)
        if bad == "":
            np.testing.assert_array_equal(read_csv_ints(path, 0, size, 2)[1500], [1501, 1502])
            continue
        with pytest.raises(InputError) as info:
            read_csv_ints(path, 0, size, 2)
        assert str(path) in str(info.value)


# ---------------------------------------------------------------- edges


def chunk_files(fmt: str, paths: Sequence[Path], delimiter: str = " ") -> ChunkFiles:
    return ChunkFiles(FileFormat(fmt, delimiter), tuple(paths), f"metadata.json: edges.{fmt}")


def write_edges(tmp_path: Path, fmt: str, chunks: List[np.ndarray], delim: str = " ") -> ChunkFiles:
    paths = []
    for i, arr in enumerate(chunks):
        if fmt == "csv":
            p = tmp_path / f"e{i}.csv"
            write_csv(p, arr, delim, trailing=bool(i % 2))
        elif fmt == "numpy":
            p = tmp_path / f"e{i}.npy"
            np.save(p, arr.astype(np.int32 if i % 2 else np.int64))
        else:
            p = tmp_path / f"e{i}.parquet"
            table = pa.table({"src": pa.array(arr[:, 0], pa.int64()),
                              "dst": pa.array(arr[:, 1], pa.uint32() if i % 2 else pa.int64())})
            pq.write_table(table, p, row_group_size=3)
        paths.append(p)
    return chunk_files(fmt, paths, delim)


@pytest.mark.parametrize("fmt,delim", [("csv", " "), ("csv", ","), ("numpy", " "), ("parquet", " ")])
def test_read_edge_pieces(tmp_path: Path, fmt: str, delim: str, parquet_mode: str) -> None:
    rng = np.random.default_rng(7)
    chunks = [rng.integers(0, 1000, (n, 2)) for n in (11, 0, 25, 1, 8)]
    files = write_edges(tmp_path, fmt, chunks, delim)
    whole = np.concatenate(chunks)
    sizes = edge_file_sizes(files)
    if fmt == "csv":
        assert sizes == [p.stat().st_size for p in files.paths]
    else:
        assert sizes == [len(c) for c in chunks]
    for nranks in (1, 2, 3, 5, 8, 50):
        src, dst = [], []
        for rank in range(nranks):
            for piece in pieces_of_block(sizes, rank, nranks):
                s, d = read_edge_piece(files, piece)
                assert s.dtype == np.int64 and d.dtype == np.int64 and len(s) == len(d)
                src.append(s)
                dst.append(d)
        np.testing.assert_array_equal(np.concatenate(src), whole[:, 0])
        np.testing.assert_array_equal(np.concatenate(dst), whole[:, 1])


def test_read_edge_piece_exact_rows(tmp_path: Path) -> None:
    arr = np.arange(40).reshape(20, 2)
    for fmt in ("numpy", "parquet"):
        files = write_edges(tmp_path, fmt, [arr])
        s, d = read_edge_piece(files, Piece(0, 4, 11))
        np.testing.assert_array_equal(s, arr[4:11, 0])
        np.testing.assert_array_equal(d, arr[4:11, 1])


def test_edge_file_sizes_rejects_bad_files(tmp_path: Path) -> None:
    np.save(tmp_path / "three.npy", np.zeros((4, 3), np.int64))
    np.save(tmp_path / "float.npy", np.zeros((4, 2), np.float32))
    pq.write_table(pa.table({"a": [1], "b": [2], "c": [3]}), tmp_path / "three.parquet")
    pq.write_table(pa.table({"a": [1], "b": [2.0]}), tmp_path / "float.parquet")
    for fmt, name, words in [("numpy", "three.npy", "shape"), ("numpy", "float.npy", "integers"),
                             ("parquet", "three.parquet", "2 columns"), ("parquet", "float.parquet", "'b'"),
                             ("csv", "missing.csv", "does not exist")]:
        with pytest.raises(InputError) as info:
            edge_file_sizes(chunk_files(fmt, [tmp_path / name]))
        assert str(tmp_path / name) in str(info.value) and words in str(info.value)


# ---------------------------------------------------------------- features

ROWS = [5, 0, 13, 1, 7, 0, 9]


def feature_files(fmt: str, paths: Sequence[Path], dataset: str = "grp/feat") -> ChunkFiles:
    return ChunkFiles(FileFormat(fmt, " ", dataset if fmt == "hdf5" else None), tuple(paths),
                      f"metadata.json: node_data.n.{fmt}")


def sample(rng: np.random.Generator, n: int, tail: Tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random((n, *tail)) < 0.5
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((n, *tail)).astype(dtype)
    return rng.integers(-100, 100, (n, *tail)).astype(dtype)


def write_parquet_feature(path: Path, arr: np.ndarray, with_shape: bool, row_group_size: int = 3) -> None:
    flat = arr.reshape(len(arr), int(np.prod(arr.shape[1:], dtype=np.int64)))
    table = pa.table({f"col{i}": flat[:, i] for i in range(flat.shape[1])})
    if with_shape:  # what DGL's ParquetArrayParser.write stores
        table = table.replace_schema_metadata({"shape": str(arr.shape)})
    pq.write_table(table, path, row_group_size=row_group_size)


def write_feature(tmp_path: Path, fmt: str, chunks: List[np.ndarray], with_shape: bool = True,
                  name: str = "f") -> ChunkFiles:
    paths = []
    for i, arr in enumerate(chunks):
        if fmt == "numpy":
            p = tmp_path / f"{name}{i}.npy"
            np.save(p, arr)
        elif fmt == "hdf5":
            p = tmp_path / f"{name}{i}.h5"
            with h5py.File(p, "w") as f:
                f.create_dataset("grp/feat", data=arr, chunks=True if arr.size else None)
                f.create_dataset("other", data=np.zeros(3))
        else:
            p = tmp_path / f"{name}{i}.parquet"
            write_parquet_feature(p, arr, with_shape)
        paths.append(p)
    return feature_files(fmt, paths)


def check_source(src: FeatureSource, whole: np.ndarray, rng: np.random.Generator) -> None:
    assert src.rows == len(whole)
    assert src.dtype == whole.dtype
    assert src.tail_shape == whole.shape[1:]
    assert src.row_bytes == whole.dtype.itemsize * int(np.prod(whole.shape[1:], dtype=np.int64))
    ranges = [(0, len(whole)), (0, 0), (len(whole), len(whole)), (4, 6), (5, 18), (18, 19)]
    ranges += [tuple(sorted(rng.integers(0, len(whole) + 1, 2))) for _ in range(40)]
    for a, b in ranges:
        got = src.read(int(a), int(b))
        assert got.flags["C_CONTIGUOUS"]
        assert got.dtype == whole.dtype and got.shape == (b - a, *whole.shape[1:])
        np.testing.assert_array_equal(got, whole[a:b])


FEATURE_CASES = [
    ("float32", (3,)), ("int64", ()), ("float64", (2, 3)), ("int8", (1,)), ("bool", ()), ("bool", (4,)),
    ("float16", (2,)), ("uint8", (5,)),
]


@pytest.mark.parametrize("fmt", ["numpy", "hdf5", "parquet"])
@pytest.mark.parametrize("dtype,tail", FEATURE_CASES)
def test_feature_source_reads_ranges(tmp_path: Path, fmt: str, dtype: str, tail: Tuple[int, ...],
                                     parquet_mode: str) -> None:
    rng = np.random.default_rng(len(dtype) + len(tail))
    chunks = [sample(rng, n, tail, dtype) for n in ROWS]
    src = FeatureSource(write_feature(tmp_path, fmt, chunks))
    check_source(src, np.concatenate(chunks), rng)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_parquet_without_shape_metadata_is_2d(tmp_path: Path, dtype: str) -> None:
    """Without b"shape" a Parquet feature is read as a 2-D array, as DGL's reader does."""
    rng = np.random.default_rng(11)
    chunks2d = [sample(rng, n, (3,), dtype) for n in ROWS]
    src = FeatureSource(write_feature(tmp_path, "parquet", chunks2d, with_shape=False, name="two"))
    check_source(src, np.concatenate(chunks2d), rng)

    chunks1d = [sample(rng, n, (), dtype) for n in ROWS]
    src = FeatureSource(write_feature(tmp_path, "parquet", chunks1d, with_shape=False, name="one"))
    assert src.tail_shape == (1,)
    check_source(src, np.concatenate(chunks1d)[:, None], rng)


@pytest.fixture(params=["whole", "streamed"])
def parquet_mode(request, monkeypatch) -> str:
    """Row groups read whole (small ones, the default here) or streamed in record batches
    (large ones; forced here with tiny batches so that reads cross many of them)."""
    if request.param == "streamed":
        monkeypatch.setattr(readers_parquet, "PARQUET_WHOLE_GROUP_BYTES", 0)
        monkeypatch.setattr(readers_parquet, "PARQUET_BATCH_BYTES", 100)
    return request.param


def test_parquet_many_row_groups(tmp_path: Path, parquet_mode: str) -> None:
    rng = np.random.default_rng(5)
    arr = sample(rng, 300, (2,), "float64")
    for rgs in (1, 7, 64, 300):
        p = tmp_path / f"rg{rgs}.parquet"
        write_parquet_feature(p, arr, True, row_group_size=rgs)
        assert pq.ParquetFile(p).metadata.num_row_groups == -(-300 // rgs)
        src = FeatureSource(feature_files("parquet", [p, p]))
        check_source(src, np.concatenate([arr, arr]), rng)


def test_parquet_dgl_written_file(tmp_path: Path) -> None:
    """DGL's writer layout: columns col0.. of the flattened rows, schema metadata {"shape": str(shape)}
    (the whole file's shape), row groups of the writer's choosing; other metadata keys are ignored."""
    arr = np.arange(60, dtype=np.float32).reshape(10, 2, 3)
    table = pa.table({f"col{i}": arr.reshape(10, -1)[:, i] for i in range(6)})
    table = table.replace_schema_metadata({"shape": str(arr.shape), "pandas": "{}"})
    pq.write_table(table, tmp_path / "dgl.parquet", row_group_size=4)
    src = FeatureSource(feature_files("parquet", [tmp_path / "dgl.parquet"]))
    assert src.tail_shape == (2, 3)
    np.testing.assert_array_equal(src.read(3, 9), arr[3:9])


@pytest.mark.parametrize("fmt", ["numpy", "hdf5", "parquet"])
def test_mismatched_dtype_between_chunks(tmp_path: Path, fmt: str) -> None:
    chunks = [np.zeros((3, 2), np.float32), np.zeros((4, 2), np.float32), np.zeros((2, 2), np.float64)]
    files = write_feature(tmp_path, fmt, chunks)
    with pytest.raises(InputError) as info:
        FeatureSource(files)
    assert info.value.where == str(files.paths[2])
    assert "float64" in str(info.value) and "float32" in str(info.value)


@pytest.mark.parametrize("fmt", ["numpy", "hdf5", "parquet"])
def test_mismatched_row_shape_between_chunks(tmp_path: Path, fmt: str) -> None:
    chunks = [np.zeros((3, 2), np.int64), np.zeros((4, 3), np.int64)]
    files = write_feature(tmp_path, fmt, chunks)
    with pytest.raises(InputError) as info:
        FeatureSource(files)
    assert info.value.where == str(files.paths[1])


def test_missing_hdf5_dataset(tmp_path: Path) -> None:
    files = write_feature(tmp_path, "hdf5", [np.zeros((3, 2))])
    bad = feature_files("hdf5", files.paths, dataset="grp/nope")
    with pytest.raises(InputError) as info:
        FeatureSource(bad)
    assert info.value.where == str(files.paths[0]) and "'grp/nope'" in str(info.value)


@pytest.mark.parametrize("fmt", ["numpy", "hdf5", "parquet"])
def test_missing_feature_file(tmp_path: Path, fmt: str) -> None:
    files = write_feature(tmp_path, fmt, [np.zeros((3, 2))])
    files = feature_files(fmt, [files.paths[0], tmp_path / "gone.bin"])
    with pytest.raises(InputError) as info:
        FeatureSource(files)
    assert info.value.where == str(tmp_path / "gone.bin")


def test_feature_without_files() -> None:
    with pytest.raises(InputError) as info:
        FeatureSource(feature_files("numpy", []))
    assert "node_data.n.numpy" in str(info.value)


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_npy(tmp_path: Path, keep: float) -> None:
    files = write_feature(tmp_path, "numpy", [np.ones((10, 4)), np.ones((100, 4))])
    data = files.paths[1].read_bytes()
    files.paths[1].write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(InputError) as info:
        FeatureSource(files)
    assert info.value.where == str(files.paths[1])


def test_npy_header_only_garbage(tmp_path: Path) -> None:
    p = tmp_path / "junk.npy"
    p.write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(InputError) as info:
        FeatureSource(feature_files("numpy", [p]))
    assert info.value.where == str(p)


@pytest.mark.parametrize("keep", [0.3, 0.8, 0.99])
def test_truncated_parquet(tmp_path: Path, keep: float) -> None:
    files = write_feature(tmp_path, "parquet", [np.ones((10, 4)), np.ones((100, 4))])
    data = files.paths[1].read_bytes()
    files.paths[1].write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(InputError) as info:
        FeatureSource(files)
    assert info.value.where == str(files.paths[1])


def test_truncated_hdf5(tmp_path: Path) -> None:
    files = write_feature(tmp_path, "hdf5", [np.ones((10, 4))])
    data = files.paths[0].read_bytes()
    files.paths[0].write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError) as info:
        FeatureSource(files)
    assert info.value.where == str(files.paths[0])


def test_parquet_null_values(tmp_path: Path, parquet_mode: str) -> None:
    p = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"a": pa.array([1.0, None, 3.0]), "b": pa.array([1.0, 2.0, 3.0])}), p)
    src = FeatureSource(feature_files("parquet", [p]))
    np.testing.assert_array_equal(src.read(2, 3), [[3.0, 3.0]])
    with pytest.raises(InputError) as info:
        src.read(0, 3)
    assert info.value.where == str(p) and "'a'" in str(info.value)


def test_parquet_mixed_or_non_numeric_columns(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int32()), "b": pa.array([1, 2], pa.int64())}),
                   tmp_path / "mixed.parquet")
    pq.write_table(pa.table({"a": pa.array(["x", "y"])}), tmp_path / "str.parquet")
    for name in ("mixed.parquet", "str.parquet"):
        with pytest.raises(InputError) as info:
            FeatureSource(feature_files("parquet", [tmp_path / name]))
        assert info.value.where == str(tmp_path / name)


@pytest.mark.parametrize("shape", [b"(5, 3)", b"(5,)", b"nonsense", b"[]"])
def test_parquet_shape_metadata_mismatch(tmp_path: Path, shape: bytes) -> None:
    p = tmp_path / "shape.parquet"
    table = pa.table({"a": [1.0, 2.0], "b": [3.0, 4.0]}).replace_schema_metadata({b"shape": shape})
    pq.write_table(table, p)
    with pytest.raises(InputError) as info:
        FeatureSource(feature_files("parquet", [p]))
    assert info.value.where == str(p) and "shape" in str(info.value)


# ---------------------------------------------------------------- Parquet written by pandas

def pandas_table(columns: dict, index: Sequence[int] = None, index_name: str = None,
                 range_index: bool = False) -> pa.Table:
    """What `pa.Table.from_pandas(pd.DataFrame(columns, index=index))` writes, without pandas:
    the index as a column (`__index_level_0__`, or its name) listed in b"pandas"
    "index_columns", or, for a RangeIndex, only a {"kind": "range"} entry."""
    table = pa.table(columns) if columns else pa.table({"_": pa.array(index)}).drop_columns(["_"])
    names = list(columns)
    entries = [{"name": n, "field_name": n, "pandas_type": "float64", "numpy_type": "float64",
                "metadata": None} for n in names]
    if range_index:
        n = table.num_rows
        index_columns = [{"kind": "range", "name": None, "start": 0, "stop": n, "step": 1}]
    else:
        field = index_name or "__index_level_0__"
        table = table.append_column(field, pa.array(index, pa.int64()))
        index_columns = [field]
        entries.append({"name": index_name, "field_name": field, "pandas_type": "int64",
                        "numpy_type": "int64", "metadata": None})
    meta = {"index_columns": index_columns,
            "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode",
                                "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
            "columns": entries, "attributes": {},
            "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.3"}
    return table.replace_schema_metadata({b"pandas": json.dumps(meta).encode()})


def test_parquet_pandas_index_column_is_not_data(tmp_path: Path) -> None:
    """The issue's case: DataFrame({"0": [100, 102, 104]}, index=[0, 2, 4]); DGL reads [[100], [102], [104]]."""
    p = tmp_path / "pandas.parquet"
    pq.write_table(pandas_table({"0": pa.array([100, 102, 104], pa.int64())}, index=[0, 2, 4]), p)
    src = FeatureSource(feature_files("parquet", [p]))
    assert src.tail_shape == (1,) and src.dtype == np.int64
    np.testing.assert_array_equal(src.read(0, 3), [[100], [102], [104]])


def test_parquet_pandas_named_index_and_float_columns(tmp_path: Path, parquet_mode: str) -> None:
    """An int64 index beside float columns made the columns' types differ (refused before);
    a named index is stored under its name. With DGL's b"shape" metadata too."""
    rng = np.random.default_rng(21)
    arr = rng.standard_normal((40, 2, 3))
    flat = arr.reshape(40, 6)
    table = pandas_table({str(j): flat[:, j] for j in range(6)}, index=np.arange(40) * 7, index_name="node_id")
    meta = dict(table.schema.metadata)
    meta[b"shape"] = str(arr.shape).encode()
    p = tmp_path / "named.parquet"
    pq.write_table(table.replace_schema_metadata(meta), p, row_group_size=9)
    src = FeatureSource(feature_files("parquet", [p, p]))
    assert src.tail_shape == (2, 3) and src.dtype == np.float64
    check_source(src, np.concatenate([arr, arr]), rng)


def test_parquet_pandas_range_index_has_no_column(tmp_path: Path) -> None:
    p = tmp_path / "range.parquet"
    pq.write_table(pandas_table({"a": [1.0, 2.0], "b": [3.0, 4.0]}, range_index=True), p)
    np.testing.assert_array_equal(FeatureSource(feature_files("parquet", [p])).read(0, 2), [[1, 3], [2, 4]])


def test_parquet_only_index_columns_or_bad_pandas_metadata(tmp_path: Path) -> None:
    only = tmp_path / "only.parquet"
    pq.write_table(pandas_table({}, index=[1, 2]), only)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"a": [1.0]}).replace_schema_metadata({b"pandas": b"{not json"}), bad)
    for p, words in [(only, "no data columns"), (bad, "pandas")]:
        with pytest.raises(InputError) as info:
            FeatureSource(feature_files("parquet", [p]))
        assert info.value.where == str(p) and words in str(info.value)


# ---------------------------------------------------------------- Parquet vector rows (one list column)

def vector_table(arr2d: np.ndarray, kind: str) -> pa.Table:
    values = pa.array(arr2d.reshape(-1))
    width = arr2d.shape[1]
    if kind == "fixed":
        col = pa.FixedSizeListArray.from_arrays(values, width)
    else:
        offsets = np.arange(len(arr2d) + 1, dtype=np.int64 if kind == "large" else np.int32) * width
        cls = pa.LargeListArray if kind == "large" else pa.ListArray
        col = cls.from_arrays(pa.array(offsets), values)
    return pa.table({"vector": col})


@pytest.mark.parametrize("kind", ["list", "large", "fixed"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_parquet_vector_rows(tmp_path: Path, kind: str, dtype: str, parquet_mode: str) -> None:
    """DGL's ParquetArrayParser reads one list<...> column ("vector rows", as Spark ML writes)
    as a 2-D array of the lists; fixed_size_list is the same with the width in the type."""
    rng = np.random.default_rng(len(kind) * 10 + len(dtype))
    chunks = [sample(rng, n, (4,), dtype) for n in ROWS]
    paths = []
    for i, arr in enumerate(chunks):
        paths.append(tmp_path / f"v{i}.parquet")
        pq.write_table(vector_table(arr, kind), paths[-1], row_group_size=3)
    src = FeatureSource(feature_files("parquet", paths))
    assert src.tail_shape == (4,) and src.dtype == np.dtype(dtype)
    check_source(src, np.concatenate(chunks), rng)


def test_parquet_vector_rows_as_dgl_writes_them(tmp_path: Path) -> None:
    """DGL's writer with vector_rows=True: pa.table([pa.array(array.tolist())], names=["vector"])
    (a list<double> column, no metadata); with a b"shape" the rows are reshaped."""
    arr = np.arange(24, dtype=np.float64).reshape(4, 6)
    p = tmp_path / "dgl.parquet"
    pq.write_table(pa.table([pa.array(arr.tolist())], names=["vector"]), p)
    src = FeatureSource(feature_files("parquet", [p]))
    assert src.tail_shape == (6,) and src.dtype == np.float64
    np.testing.assert_array_equal(src.read(1, 4), arr[1:4])
    shaped = tmp_path / "shaped.parquet"
    table = pa.table([pa.array(arr.tolist())], names=["vector"]).replace_schema_metadata({b"shape": b"(4, 2, 3)"})
    pq.write_table(table, shaped)
    src = FeatureSource(feature_files("parquet", [shaped]))
    assert src.tail_shape == (2, 3)
    np.testing.assert_array_equal(src.read(0, 4), arr.reshape(4, 2, 3))


def test_parquet_vector_rows_empty_chunk(tmp_path: Path) -> None:
    """A chunk without rows cannot tell a list<...> column's width; the others do."""
    arr = np.arange(12, dtype=np.float32).reshape(4, 3)
    paths = [tmp_path / "empty.parquet", tmp_path / "full.parquet"]
    pq.write_table(vector_table(arr[:0], "list"), paths[0])
    pq.write_table(vector_table(arr, "list"), paths[1])
    src = FeatureSource(feature_files("parquet", paths))
    assert src.rows == 4 and src.tail_shape == (3,)
    np.testing.assert_array_equal(src.read(0, 4), arr)


@pytest.mark.parametrize("case,words", [
    ("ragged", "has 2 values in row 4"),
    ("null_row", "null in row 3"),
    ("null_value", "null value in row 5"),
    ("strings", "numbers or bools"),
    ("nested", "numbers or bools"),
    ("shape", "'shape' metadata"),
])
def test_parquet_vector_rows_refused(tmp_path: Path, case: str, words: str, parquet_mode: str) -> None:
    rows = [[float(i), float(i) + 0.5, 1.0] for i in range(8)]
    if case == "ragged":
        rows[4] = [1.0, 2.0]
        col = pa.array(rows)
    elif case == "null_row":
        rows[3] = None
        col = pa.array(rows)
    elif case == "null_value":
        rows[5][1] = None
        col = pa.array(rows)
    elif case == "strings":
        col = pa.array([["a", "b"]] * 8)
    elif case == "nested":
        col = pa.array([[[1.0]]] * 8)
    else:
        col = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(24)), 3)
    table = pa.table({"vector": col})
    if case == "shape":
        table = table.replace_schema_metadata({b"shape": b"(8, 4)"})
    p = tmp_path / f"{case}.parquet"
    pq.write_table(table, p, row_group_size=3)
    with pytest.raises(InputError) as info:
        FeatureSource(feature_files("parquet", [p])).read(0, 8)
    assert info.value.where == str(p) and words in str(info.value), str(info.value)


def test_parquet_vector_width_differs_between_chunks(tmp_path: Path) -> None:
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(vector_table(np.zeros((3, 4)), "list"), paths[0])
    pq.write_table(vector_table(np.zeros((3, 5)), "list"), paths[1])
    with pytest.raises(InputError) as info:
        FeatureSource(feature_files("parquet", paths))
    assert info.value.where == str(paths[1]) and "(5,)" in str(info.value)


# ---------------------------------------------------------------- Parquet streaming

class CountingParquet:
    """A ParquetFile that records what its read methods decode."""

    def __init__(self, pf, log: dict) -> None:
        self._pf, self._log = pf, log

    def __getattr__(self, name):
        return getattr(self._pf, name)

    def _count(self, rows: int, groups, columns) -> None:
        self._log["decoded"] += rows
        self._log["columns"].add(tuple(columns) if columns is not None else None)

    def read_row_groups(self, groups, columns=None, **kw):
        table = self._pf.read_row_groups(groups, columns=columns, **kw)
        self._count(table.num_rows, groups, columns)
        return table

    def read_row_group(self, group, columns=None, **kw):
        table = self._pf.read_row_group(group, columns=columns, **kw)
        self._count(table.num_rows, [group], columns)
        return table

    def read(self, columns=None, **kw):
        table = self._pf.read(columns=columns, **kw)
        self._count(table.num_rows, None, columns)
        return table

    def iter_batches(self, batch_size=65536, row_groups=None, columns=None, **kw):
        for batch in self._pf.iter_batches(batch_size=batch_size, row_groups=row_groups, columns=columns, **kw):
            self._count(batch.num_rows, row_groups, columns)
            yield batch


@pytest.fixture
def parquet_log(monkeypatch):
    log = {"decoded": 0, "opened": 0, "columns": set()}
    real = opening.open_parquet

    def counting(path, **kw):
        log["opened"] += 1
        return CountingParquet(real(path, **kw), log)

    monkeypatch.setattr(opening, "open_parquet", counting)
    return log


def read_block_in_batches(src: FeatureSource, lo: int, hi: int, batch: int) -> np.ndarray:
    """As dispatch reads a rank's block: consecutive `batch`-row reads."""
    return np.concatenate([src.read(a, min(a + batch, hi)) for a in range(lo, hi, batch)])


@pytest.mark.parametrize("group_rows", [1000, 64])
def test_parquet_block_read_in_batches_decodes_each_row_group_once(tmp_path: Path, parquet_log: dict,
                                                                    group_rows: int, parquet_mode: str) -> None:
    """Each rank decodes only the row groups overlapping its rows, each once, whatever the
    batch size (before: the overlapping row groups were decoded again for every batch and
    the file reopened)."""
    arr = np.arange(1000 * 4, dtype=np.float32).reshape(1000, 4)
    p = tmp_path / "one.parquet"
    write_parquet_feature(p, arr, True, row_group_size=group_rows)
    for lo, hi in [(0, 500), (500, 1000)]:
        parquet_log.update(decoded=0, opened=0)
        src = FeatureSource(feature_files("parquet", [p]))
        np.testing.assert_array_equal(read_block_in_batches(src, lo, hi, 37), arr[lo:hi])
        first, last = lo // group_rows, (hi - 1) // group_rows
        overlapping = min(1000, (last + 1) * group_rows) - first * group_rows
        assert parquet_log["decoded"] <= overlapping, (lo, hi, parquet_log)
        assert parquet_log["opened"] <= 2   # the header, then one reader kept open


def test_headers_are_read_once_per_loaded_metadata(tmp_path: Path, parquet_log: dict) -> None:
    """The stages of one run open a feature several times on every rank: its files' headers
    are read by the first source of a ChunkFiles only; files named anew are read anew."""
    arr = np.arange(60, dtype=np.float32).reshape(20, 3)
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for p, part in zip(paths, (arr[:8], arr[8:])):
        write_parquet_feature(p, part, True)
    files = feature_files("parquet", paths)
    first = FeatureSource(files)
    assert parquet_log["opened"] == 2
    again = FeatureSource(files)
    assert parquet_log["opened"] == 2, parquet_log
    assert (again.rows, again.dtype, again.tail_shape) == (first.rows, first.dtype, first.tail_shape) == (20, arr.dtype, (3,))
    np.testing.assert_array_equal(again.read(5, 12), arr[5:12])
    opened = parquet_log["opened"]
    write_parquet_feature(paths[1], arr[8:].astype(np.float64), True)
    with pytest.raises(InputError, match="b.parquet: chunk has dtype float64"):
        FeatureSource(feature_files("parquet", paths))
    assert parquet_log["opened"] == opened + 2
    assert files == feature_files("parquet", paths)   # the headers read are not part of the value


def test_parquet_reads_only_data_columns(tmp_path: Path, parquet_log: dict) -> None:
    p = tmp_path / "pandas.parquet"
    pq.write_table(pandas_table({"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]}, index=[7, 8, 9]), p)
    np.testing.assert_array_equal(FeatureSource(feature_files("parquet", [p])).read(1, 3), [[2, 5], [3, 6]])
    assert parquet_log["columns"] == {("a", "b")}


def test_parquet_edge_piece_decodes_its_rows_once(tmp_path: Path, parquet_log: dict, parquet_mode: str) -> None:
    arr = np.arange(2000).reshape(1000, 2)
    p = tmp_path / "e.parquet"
    pq.write_table(pa.table({"src": arr[:, 0], "dst": arr[:, 1]}), p, row_group_size=100)
    files = chunk_files("parquet", [p])
    s, d = read_edge_piece(files, Piece(0, 250, 730))
    np.testing.assert_array_equal(s, arr[250:730, 0])
    np.testing.assert_array_equal(d, arr[250:730, 1])
    assert parquet_log["decoded"] <= 800 - 200


def test_parquet_edge_nulls_are_an_input_error(tmp_path: Path, parquet_mode: str) -> None:
    p = tmp_path / "e.parquet"
    pq.write_table(pa.table({"src": pa.array([1, 2, 3]), "dst": pa.array([1, None, 3])}), p)
    with pytest.raises(InputError) as info:
        read_edge_piece(chunk_files("parquet", [p]), Piece(0, 0, 3))
    assert info.value.where == str(p) and "'dst'" in str(info.value) and "row 1" in str(info.value)


def test_parquet_reads_in_any_order(tmp_path: Path, parquet_mode: str) -> None:
    """Backwards and skipping reads restart the stream; results do not depend on the order."""
    rng = np.random.default_rng(9)
    arr = sample(rng, 500, (3,), "int32")
    p = tmp_path / "f.parquet"
    write_parquet_feature(p, arr, True, row_group_size=45)
    src = FeatureSource(feature_files("parquet", [p, p, p]))
    whole = np.concatenate([arr, arr, arr])
    for a, b in [(1400, 1500), (0, 10), (990, 1010), (5, 20), (400, 460), (20, 1490), (1499, 1500), (3, 4)]:
        np.testing.assert_array_equal(src.read(a, b), whole[a:b])


# ---------------------------------------------------------------- pyarrow's buffered reads

@pytest.mark.parametrize("version,safe", [("12.0.1", True), ("16.1.0", True), ("17.0.0", False), ("18.1.0", False),
                                          ("19.0.1", False), ("23.0.1", False), ("24.0.0", True), ("26.0.1", True),
                                          ("27.0.0.dev12", True)])
def test_buffered_reads_safe_by_version(version: str, safe: bool) -> None:
    assert readers_parquet.buffered_reads_safe(version) is safe


def write_many_page_vectors(path: Path, rows: int, page_bytes: int) -> np.ndarray:
    """A list<float> feature of `rows` x 2 in one row group: a column chunk above
    PARQUET_WHOLE_CHUNK_BYTES (the size distpart streams through a buffer where that is safe),
    a 1 MiB dictionary page, then data pages of about `page_bytes`. Pages this small are what
    pyarrow 17's buffered stream mishandles (see `buffered_reads_safe`); pyarrow 26 writes
    pages of at most 20000 rows by default, which is how GraphStorm's inputs met it."""
    values = np.random.default_rng(0).random((rows, 2), dtype=np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), 2).cast(pa.list_(pa.float32()))
    pq.write_table(pa.table({"v": column}), path, use_dictionary=True, data_page_size=page_bytes,
                   row_group_size=rows)
    md = pq.ParquetFile(path).metadata
    assert md.num_row_groups == 1 and md.row_group(0).column(0).has_dictionary_page
    assert md.row_group(0).total_byte_size > readers_parquet.PARQUET_WHOLE_CHUNK_BYTES
    return values


# Reads tfile.parquet through distpart's reader and checks it against tfile.npy, in a process
# whose Arrow memory pool checks every allocation's bounds (ARROW_DEBUG_MEMORY_POOL=abort,
# read when pyarrow starts): a write past a buffer aborts it.
_DEBUG_POOL_READ = """
import sys
from pathlib import Path
import numpy as np
from distpart.chunked.metadata import ChunkFiles, FileFormat
from distpart.chunked.readers import FeatureSource
folder = Path(sys.argv[1])
source = FeatureSource(ChunkFiles(FileFormat("parquet", " "), (folder / "f.parquet",), "test"))
got = source.read(0, source.rows)
print("equal" if np.array_equal(got, np.load(folder / "f.npy")) else "differ", source.rows)
"""


def test_parquet_column_chunks_with_many_small_pages_read_right(tmp_path: Path) -> None:
    """Regression (pyarrow 17.0.0, GraphStorm's environment): distpart's buffered reads
    returned a varying, too small row count, wrong values, or refused a valid file. Run in
    the DGL environment before the fix, this test fails at both reads below."""
    # 8 KiB pages: pyarrow 17's stream trips over its own state, on every read.
    path = tmp_path / "small_pages.parquet"
    values = write_many_page_vectors(path, 150_000, 8 << 10)
    for _ in range(2):
        source = FeatureSource(feature_files("parquet", [path]))
        np.testing.assert_array_equal(source.read(0, source.rows), values)
        np.testing.assert_array_equal(source.read(source.rows - 1000, source.rows), values[-1000:])
    # 16 KiB pages: the write past the buffer goes unnoticed unless Arrow checks its bounds.
    folder = tmp_path / "debug_pool"
    folder.mkdir()
    np.save(folder / "f.npy", write_many_page_vectors(folder / "f.parquet", 150_000, 16 << 10))
    env = {**os.environ, "ARROW_DEBUG_MEMORY_POOL": "abort",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(readers.__file__).parents[3]),
                                                       os.environ.get("PYTHONPATH")]))}
    # cwd: `python -c` imports from the working directory first, which need not be this clone.
    run = subprocess.run([sys.executable, "-c", _DEBUG_POOL_READ, str(folder)], env=env, cwd=folder,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.split() == ["equal", "150000"], run.stdout + run.stderr


# ---------------------------------------------------------------- data only one rank decodes

def test_corrupt_parquet_data_page_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """Headers and schema read fine; the damage shows only when the rows are decoded (in
    dispatch, by the one rank reading them), as one line naming the file."""
    arr = np.arange(4000 * 2, dtype=np.float64).reshape(4000, 2)
    path = tmp_path / "f.parquet"
    write_parquet_feature(path, arr, True, row_group_size=1000)
    column = pq.ParquetFile(path).metadata.row_group(3).column(0)
    with open(path, "r+b") as f:   # the last row group's first page header
        f.seek(column.dictionary_page_offset or column.data_page_offset)
        f.write(b"\xff" * 16)
    source = FeatureSource(feature_files("parquet", [path]))
    np.testing.assert_array_equal(source.read(0, 3000), arr[:3000])
    with pytest.raises(InputError) as info:
        source.read(3000, 4000)
    assert info.value.where == str(path) and "corrupt Parquet data" in str(info.value)
    assert "\n" not in str(info.value), str(info.value)


def test_corrupt_hdf5_chunk_is_an_input_error(tmp_path: Path) -> None:
    """A compressed chunk that does not decompress: an InputError naming the file (was
    h5py's OSError, a traceback that aborted the whole MPI job)."""
    arr = np.arange(1000 * 3, dtype=np.float32).reshape(1000, 3)
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("feat", data=arr, chunks=(250, 3), compression="gzip")
        last = ds.id.get_chunk_info(ds.id.get_num_chunks() - 1)
    with open(path, "r+b") as f:
        f.seek(last.byte_offset)
        f.write(b"\xff" * 16)
    source = FeatureSource(feature_files("hdf5", [path], dataset="feat"))
    np.testing.assert_array_equal(source.read(0, 750), arr[:750])
    with pytest.raises(InputError) as info:
        source.read(700, 1000)
    assert info.value.where == str(path) and "corrupt HDF5 data in rows [700, 1000)" in str(info.value)
    assert "\n" not in str(info.value), str(info.value)


# ---------------------------------------------------------------- CSV features

def csv_feature_files(paths: Sequence[Path], delimiter: str = ",") -> ChunkFiles:
    return ChunkFiles(FileFormat("csv", delimiter), tuple(paths), "metadata.json: node_data.n.csv")


def write_csv_feature(path: Path, arr: np.ndarray, delim: str = ",", newline: str = "\n",
                      blank_every: int = 0) -> None:
    lines = []
    for i, row in enumerate(arr):
        lines.append(delim.join(repr(float(v)) if arr.dtype.kind == "f" else str(int(v)) for v in row))
        if blank_every and i % blank_every == blank_every - 1:
            lines.append("")
    path.write_bytes((newline.join(lines) + (newline if lines else "")).encode())


@pytest.fixture(params=[None, 40], ids=["window-8MiB", "window-40B"])
def csv_window(request, monkeypatch):
    """The default window, and windows of a few lines so files span many of them."""
    if request.param:
        monkeypatch.setattr(readers_csv, "CSV_WINDOW_BYTES", request.param)
    return request.param


@pytest.mark.parametrize("delim,newline,blank", [(",", "\n", 0), (" ", "\r\n", 0), ("\t", "\n", 3), ("|", "\n", 1)])
@pytest.mark.parametrize("dtype,ncols", [("int64", 3), ("float64", 2), ("int64", 1)])
def test_csv_feature_reads_ranges(tmp_path: Path, csv_window, delim: str, newline: str, blank: int,
                                  dtype: str, ncols: int) -> None:
    rng = np.random.default_rng(len(delim) + ncols)
    chunks = [sample(rng, n, (ncols,), dtype) for n in ROWS]
    if dtype == "int64":
        chunks = [np.where(rng.random(c.shape) < 0.1, rng.integers(-2**62, 2**62, c.shape), c) for c in chunks]
    paths = []
    for i, arr in enumerate(chunks):
        paths.append(tmp_path / f"c{i}.csv")
        write_csv_feature(paths[-1], arr, delim, newline, blank)
    src = FeatureSource(csv_feature_files(paths, delim))
    check_source(src, np.concatenate(chunks), rng)


def test_csv_feature_as_dgl_writes_it(tmp_path: Path) -> None:
    """DGL's CSVArrayParser.write: pyarrow.csv.write_csv, no header, ',' by default."""
    import pyarrow.csv as pacsv
    arr = np.random.default_rng(4).standard_normal((50, 3))
    p = tmp_path / "dgl.csv"
    pacsv.write_csv(pa.table({str(j): arr[:, j] for j in range(3)}), p,
                    pacsv.WriteOptions(include_header=False, delimiter=","))
    src = FeatureSource(csv_feature_files([p]))
    assert src.dtype == np.float64 and src.tail_shape == (3,)
    np.testing.assert_array_equal(src.read(0, 50), arr)


def test_csv_feature_integers_and_floats_make_float64(tmp_path: Path, csv_window) -> None:
    """pyarrow infers int64 for a column of integers and double otherwise (as DGL reads);
    a float anywhere makes the whole feature float64, integral files included."""
    ints = np.arange(30).reshape(10, 3)
    paths = [tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"]
    write_csv_feature(paths[0], ints)
    paths[1].write_text("1,2,3.5\n4,5,6\n")
    paths[2].write_text("nan,inf,-inf\n-0.0,1e300,2\n")
    src = FeatureSource(csv_feature_files(paths))
    assert src.dtype == np.float64
    got = src.read(0, 14)
    np.testing.assert_array_equal(got[:10], ints)
    np.testing.assert_array_equal(got[10:12], [[1, 2, 3.5], [4, 5, 6]])
    assert np.isnan(got[12, 0]) and got[12, 1] == np.inf and got[12, 2] == -np.inf
    np.testing.assert_array_equal(got[13], [0.0, 1e300, 2])
    only_ints = FeatureSource(csv_feature_files(paths[:1]))
    assert only_ints.dtype == np.int64
    np.testing.assert_array_equal(only_ints.read(2, 9), ints[2:9])


@pytest.mark.parametrize("content", [b"", b"\n", b"\n\r\n\n"])
def test_csv_feature_empty_chunks(tmp_path: Path, csv_window, content: bytes) -> None:
    paths = [tmp_path / "empty0.csv", tmp_path / "full.csv", tmp_path / "empty1.csv"]
    paths[0].write_bytes(content)
    paths[2].write_bytes(content)
    write_csv_feature(paths[1], np.arange(8).reshape(4, 2))
    src = FeatureSource(csv_feature_files(paths))
    assert src.rows == 4 and src.tail_shape == (2,) and src.dtype == np.int64
    np.testing.assert_array_equal(src.read(0, 4), np.arange(8).reshape(4, 2))
    alone = FeatureSource(csv_feature_files(paths[:1]))
    assert alone.rows == 0 and alone.read(0, 0).shape[0] == 0


@pytest.mark.parametrize("bad,words", [
    ("1,x,3", "invalid value 'x'"),
    ("1,2", "Expected 3 columns, got 2"),
    ("1,2,3,4", "Expected 3 columns, got 4"),
    ("1,,3", "invalid value ''"),
    ("true,false,true", "invalid value 'true'"),
    ("2024-01-01,1,2", "invalid value '2024-01-01'"),
])
def test_csv_feature_bad_row_names_file_and_line(tmp_path: Path, csv_window, bad: str, words: str) -> None:
    lines = [f"{i},{i + 1},{i + 2}" for i in range(300)]
    lines[217] = bad
    p = tmp_path / "bad.csv"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        FeatureSource(csv_feature_files([p]))
    msg = str(info.value)
    assert info.value.where == str(p) and "line 218" in msg and words in msg, msg
    assert "Row #" not in msg   # pyarrow counts rows inside the parsed piece, not the file


def test_csv_feature_header_line_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "header.csv"
    p.write_text("a,b\n1,2\n3,4\n")
    with pytest.raises(InputError) as info:
        FeatureSource(csv_feature_files([p]))
    assert info.value.where == str(p) and "line 1" in str(info.value) and "no header" in str(info.value)


def test_csv_feature_width_differs_between_chunks(tmp_path: Path) -> None:
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    paths[0].write_text("1,2\n")
    paths[1].write_text("1,2,3\n")
    with pytest.raises(InputError) as info:
        FeatureSource(csv_feature_files(paths))
    assert info.value.where == str(paths[1]) and "(3,)" in str(info.value)


def test_csv_feature_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        FeatureSource(csv_feature_files([tmp_path / "gone.csv"]))
    assert info.value.where == str(tmp_path / "gone.csv") and "does not exist" in str(info.value)


def test_csv_feature_consecutive_reads_parse_each_window_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(readers_csv, "CSV_WINDOW_BYTES", 200)
    arr = np.arange(3000).reshape(1000, 3)
    p = tmp_path / "f.csv"
    write_csv_feature(p, arr)
    src = FeatureSource(csv_feature_files([p]))
    windows = len(readers.csv_feature_layout(p, ",").window_rows) - 1
    calls = []
    real = readers_features.read_csv_numbers
    monkeypatch.setattr(readers_features, "read_csv_numbers", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    np.testing.assert_array_equal(read_block_in_batches(src, 0, 1000, 7), arr)
    assert len(calls) == len(set(calls)) == windows


def test_csv_feature_metadata(tmp_path: Path) -> None:
    """metadata.json accepts {"name": "csv"} features; without a delimiter they use DGL's ','
    (edges keep the space)."""
    raw = {"graph_name": "g", "node_type": ["n"], "num_nodes_per_chunk": [[2]],
           "edge_type": ["n:r:n"], "num_edges_per_chunk": [[1]],
           "edges": {"n:r:n": {"format": {"name": "csv"}, "data": ["e.csv"]}},
           "node_data": {"n": {"x": {"format": {"name": "csv"}, "data": ["x.csv"]},
                               "y": {"format": {"name": "csv", "delimiter": " "}, "data": ["y.csv"]}}}}
    meta = parse_metadata(raw, tmp_path / "metadata.json")
    assert meta.etype("n:r:n").files.fmt.delimiter == " "
    assert meta.node_features("n")["x"].fmt.delimiter == ","
    assert meta.node_features("n")["y"].fmt.delimiter == " "
    (tmp_path / "x.csv").write_text("1.5,2\n3,4\n")
    (tmp_path / "y.csv").write_text("7 8 9\n10 11 12\n")
    np.testing.assert_array_equal(FeatureSource.expecting(meta.node_features("n")["x"], 2, "n").read(0, 2),
                                  [[1.5, 2], [3, 4]])
    np.testing.assert_array_equal(FeatureSource(meta.node_features("n")["y"]).read(1, 2), [[10, 11, 12]])
