"""distpart.partitions.dglformat: byte layout, dtype rules, round trips, corrupt files, DGL fixtures."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distpart.partitions.dglformat import (
    PartitionGraph,
    TensorDictWriter,
    graph_formats,
    read_array,
    read_graph,
    read_tensor_dict,
    to_storable,
    write_array,
    write_graph,
    write_tensor_dict,
)
from distpart.errors import InputError, OutputError
from reference import check_dgl_written_files

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Magic numbers as the spec gives them, independent of the module's constants.
NDARRAY_MAGIC = 0xDD5E40F096B4A13F
TENSOR_DICT_MAGIC = 0xDD5A9FBE3FA2443F
GRAPH_FILE_MAGIC = 0xDD2E4FF046B4A13F
HETEROGRAPH_MAGIC = 0xDD589FBE35224ABF

STORABLE = ["int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"]
SHAPES = [(5,), (3, 4), (2, 3, 4), (0,), (0, 3), (4, 0, 2)]


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


# ------------------------------------------------------------------ arrays and dicts


@pytest.mark.parametrize("dtype", STORABLE)
@pytest.mark.parametrize("shape", SHAPES)
def test_array_round_trip(dtype: str, shape: tuple[int, ...]) -> None:
    arr = sample(dtype, shape)
    buf = io.BytesIO()
    write_array(buf, arr)
    buf.seek(0)
    back = read_array(buf)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)
    assert buf.read() == b""


@pytest.mark.parametrize("mmap", [False, True])
def test_tensor_dict_round_trip_keeps_order(tmp_path: Path, mmap: bool) -> None:
    tensors = {
        f"{dtype}/{i}": sample(dtype, shape, i)
        for dtype in STORABLE
        for i, shape in enumerate(SHAPES)
    }
    tensors = dict(reversed(list(tensors.items())))  # not alphabetical
    path = tmp_path / "t.dgl"
    write_tensor_dict(path, tensors)
    back = read_tensor_dict(path, mmap=mmap)
    assert list(back) == list(tensors)
    for key, arr in tensors.items():
        assert back[key].dtype == arr.dtype and back[key].shape == arr.shape, key
        np.testing.assert_array_equal(back[key], arr)
        # numpy gives zero-size slices of a memmap as plain arrays: nothing to map.
        assert isinstance(back[key], np.memmap) == (mmap and arr.size > 0)
    assert read_tensor_dict(str(path)).keys() == tensors.keys()


def test_empty_tensor_dict(tmp_path: Path) -> None:
    write_tensor_dict(tmp_path / "e.dgl", {})
    assert (tmp_path / "e.dgl").read_bytes() == struct.pack("<QQQ", TENSOR_DICT_MAGIC, 0, 0)
    assert read_tensor_dict(tmp_path / "e.dgl") == {}


def test_array_header_bytes() -> None:
    buf = io.BytesIO()
    write_array(buf, np.array([1, -2, 3], dtype=np.int16))
    raw = buf.getvalue()
    assert struct.unpack_from("<Q", raw, 0)[0] == NDARRAY_MAGIC
    assert struct.unpack_from("<Q", raw, 8)[0] == 0  # reserved
    assert struct.unpack_from("<iii", raw, 16) == (1, 0, 1)  # CPU, device 0, ndim
    assert struct.unpack_from("<BBH", raw, 28) == (0, 16, 1)  # int, 16 bits, 1 lane
    assert struct.unpack_from("<q", raw, 32)[0] == 3  # shape[0]
    assert struct.unpack_from("<q", raw, 40)[0] == 6  # nbytes
    assert raw[48:] == np.array([1, -2, 3], dtype="<i2").tobytes()

    buf = io.BytesIO()
    write_array(buf, np.zeros((2, 5), dtype=np.float32))
    raw = buf.getvalue()
    assert struct.unpack_from("<iBBH", raw, 24) == (2, 2, 32, 1)  # ndim, float, 32 bits
    assert struct.unpack_from("<qqq", raw, 32) == (2, 5, 40)  # shape, nbytes
    assert len(raw) == 56 + 40


def test_tensor_dict_header_bytes(tmp_path: Path) -> None:
    write_tensor_dict(tmp_path / "t.dgl", {"ab": np.array([7], dtype=np.uint8)})
    raw = (tmp_path / "t.dgl").read_bytes()
    assert struct.unpack_from("<QQQQ", raw, 0) == (TENSOR_DICT_MAGIC, 1, 1, 2)
    assert raw[32:34] == b"ab"
    assert struct.unpack_from("<Q", raw, 34)[0] == NDARRAY_MAGIC
    assert struct.unpack_from("<BB", raw, 34 + 28) == (1, 8)  # uint, 8 bits
    assert raw[-1:] == b"\x07"


# ------------------------------------------------------------------ dtype rules


def test_to_storable_conversions() -> None:
    converted = to_storable(np.array([True, False]), "b")
    assert converted.dtype == np.uint8 and converted.tolist() == [1, 0]
    assert to_storable(np.array([65535], np.uint16), "u").dtype == np.int32
    assert to_storable(np.array([2**32 - 1], np.uint32), "u").tolist() == [2**32 - 1]
    assert to_storable(np.array([2**32 - 1], np.uint32), "u").dtype == np.int64
    big = np.array([0, 2**63 - 1], np.uint64)
    assert (
        to_storable(big, "u").dtype == np.int64 and to_storable(big, "u").tolist() == big.tolist()
    )
    assert to_storable(np.array([], np.uint64), "u").dtype == np.int64
    scalar = to_storable(np.float32(2.5), "s")
    assert scalar.shape == (1,) and scalar.tolist() == [2.5]


def test_to_storable_uint64_overflow_names_the_array() -> None:
    with pytest.raises(
        InputError,
        match=r"^paper/ids: uint64 values up to 18446744073709551615 do not fit in int64",
    ):
        to_storable(np.array([1, 2**64 - 1], np.uint64), "paper/ids")


@pytest.mark.parametrize(
    "arr",
    [
        np.array([1 + 2j]),
        np.array(["a"]),
        np.array([b"a"]),
        np.array([object()]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.zeros(1, dtype=[("a", "i4")]),
        np.zeros(1, dtype=np.longdouble)
        if np.dtype(np.longdouble).itemsize > 8
        else np.array([1j]),
    ],
)
def test_to_storable_rejects(arr: np.ndarray) -> None:
    with pytest.raises(InputError, match="^feat: dtype .* cannot be stored"):
        to_storable(arr, "feat")


def test_to_storable_layout() -> None:
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert to_storable(arr, "a") is arr or np.shares_memory(to_storable(arr, "a"), arr)
    transposed = to_storable(arr.T, "a")
    assert transposed.flags.c_contiguous and np.array_equal(transposed, arr.T)
    swapped = to_storable(arr.astype(">f4"), "a")
    assert swapped.dtype.byteorder in "<=" and np.array_equal(swapped, arr)
    buf = io.BytesIO()
    write_array(buf, np.arange(3, dtype=">i8"))
    assert buf.getvalue()[48:] == np.arange(3, dtype="<i8").tobytes()


def test_unsigned_widened_in_files(tmp_path: Path) -> None:
    write_tensor_dict(
        tmp_path / "t.dgl", {"u16": np.array([65535], np.uint16), "b": np.array([True])}
    )
    back = read_tensor_dict(tmp_path / "t.dgl")
    assert back["u16"].dtype == np.int32 and back["u16"].tolist() == [65535]
    assert back["b"].dtype == np.uint8


# ------------------------------------------------------------------ TensorDictWriter


def test_tensor_dict_writer_streams(tmp_path: Path) -> None:
    path = tmp_path / "t.dgl"
    with TensorDictWriter(path, 3) as writer:
        for i in range(3):
            writer.add(f"f{i}", np.full((2, i), i, dtype=np.int32))
    back = read_tensor_dict(path)
    assert list(back) == ["f0", "f1", "f2"] and back["f2"].shape == (2, 2)


def _stream(path: Path, announced: int, keys: list[str]) -> None:
    with TensorDictWriter(path, announced) as writer:
        for key in keys:
            writer.add(key, np.zeros(1))


def test_tensor_dict_writer_count_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "t.dgl"
    with pytest.raises(ValueError, match="1 tensors added, 2 announced"):
        _stream(path, 2, ["a"])
    assert not path.exists()
    with pytest.raises(ValueError, match="more than the 1 announced"):
        _stream(path, 1, ["a", "b"])
    assert not path.exists()
    with pytest.raises(ValueError, match="'a' added twice"):
        _stream(path, 2, ["a", "a"])
    assert not path.exists()
    with pytest.raises(InputError), TensorDictWriter(path, 1) as writer:
        writer.add("c", np.array([1j]))
    assert not path.exists()
    with pytest.raises(RuntimeError):
        TensorDictWriter(path, 1).add("a", np.zeros(1))


# ------------------------------------------------------------------ graphs


def write_sample_graph(path: Path) -> PartitionGraph:
    graph = PartitionGraph(
        num_nodes=6,  # node 5 is isolated
        src=np.array([3, 0, 1, 4, 2, 0], np.int64),
        dst=np.array([0, 1, 2, 0, 4, 3], np.int64),
        ndata={
            "_ID": np.arange(10, 16, dtype=np.int64),
            "inner_node": np.array([1, 1, 1, 0, 0, 1], np.uint8),
            "feat": sample("float16", (6, 2, 3)),
        },
        edata={"_ID": np.arange(6, dtype=np.int64), "w": sample("float64", (6, 4))},
    )
    write_graph(path, graph.num_nodes, graph.src, graph.dst, graph.ndata, graph.edata)
    return graph


def assert_same_graph(a: PartitionGraph, b: PartitionGraph) -> None:
    assert a.num_nodes == b.num_nodes and a.num_edges == b.num_edges
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.dst, b.dst)
    assert a.src.dtype == a.dst.dtype == np.int64
    for ours, theirs in ((a.ndata, b.ndata), (a.edata, b.edata)):
        assert list(ours) == list(theirs)
        for key in ours:
            assert ours[key].dtype == theirs[key].dtype, key
            np.testing.assert_array_equal(ours[key], theirs[key])


def test_graph_round_trip(tmp_path: Path) -> None:
    graph = write_sample_graph(tmp_path / "g.dgl")
    assert_same_graph(read_graph(tmp_path / "g.dgl"), graph)


def test_graph_without_edges_or_data(tmp_path: Path) -> None:
    empty = np.array([], np.int64)
    write_graph(tmp_path / "g.dgl", 3, empty, empty, {}, {})
    assert_same_graph(read_graph(tmp_path / "g.dgl"), PartitionGraph(3, empty, empty))
    write_graph(tmp_path / "g.dgl", 0, empty, empty, {}, {})
    assert read_graph(tmp_path / "g.dgl").num_nodes == 0


def test_graph_file_layout(tmp_path: Path) -> None:
    write_sample_graph(tmp_path / "g.dgl")
    raw = (tmp_path / "g.dgl").read_bytes()
    assert struct.unpack_from("<QQQQ", raw, 0) == (GRAPH_FILE_MAGIC, 2, 2, 1)
    assert raw[32:4096] == bytes(4096 - 32)
    record = 4096 + 16
    assert struct.unpack_from("<QQ", raw, 4096) == (record, 0)  # gdata_start_pos, no labels
    assert struct.unpack_from("<Q", raw, record)[0] == HETEROGRAPH_MAGIC
    # Trailer: blob [1 graph, its offset], length-prefixed, then the blob length again.
    assert struct.unpack_from("<QQQQ", raw, len(raw) - 32) == (16, 1, record, 16)
    unit_graph = raw.index(struct.pack("<Q", 0xDD2E60F0F6B4A127))
    assert struct.unpack_from("<qq", raw, unit_graph + 8) == (1 | 1 << 32, 7 | 1 << 32)


def test_graph_ignores_header_padding(tmp_path: Path) -> None:
    """DGL leaves the rest of the 4096-byte header block uninitialised."""
    graph = write_sample_graph(tmp_path / "g.dgl")
    raw = bytearray((tmp_path / "g.dgl").read_bytes())
    raw[32:4096] = np.random.default_rng(0).integers(0, 256, 4096 - 32, dtype=np.uint8).tobytes()
    (tmp_path / "g.dgl").write_bytes(bytes(raw))
    assert_same_graph(read_graph(tmp_path / "g.dgl"), graph)


@pytest.mark.parametrize("formats", [["csr"], ["csc"], ["csc", "coo"], ["csr", "csc", "coo"]])
def test_graph_round_trip_in_other_formats(tmp_path: Path, formats: list[str]) -> None:
    graph = write_sample_graph(tmp_path / "coo.dgl")
    path = tmp_path / "g.dgl"
    write_graph(path, graph.num_nodes, graph.src, graph.dst, graph.ndata, graph.edata, formats)
    assert_same_graph(read_graph(path), graph)
    raw = path.read_bytes()
    unit_graph = raw.index(struct.pack("<Q", 0xDD2E60F0F6B4A127))
    bits = sum({"coo": 1, "csr": 2, "csc": 4}[f] for f in formats)
    assert struct.unpack_from("<qq", raw, unit_graph + 8) == (bits | 1 << 32, 7 | 1 << 32)


def test_graph_formats_names() -> None:
    assert graph_formats(["CSC", " coo"]) == ("coo", "csc")  # DGL's saving order
    for bad in ([], ["coo", "dense"]):
        with pytest.raises(InputError, match="graph formats must be some of coo, csr, csc"):
            graph_formats(bad)


def test_formats_that_disagree_are_refused(tmp_path: Path) -> None:
    """A CSC matrix with other edges than the COO beside it: DGL would serve both."""
    src, dst = np.array([0, 1, 2]), np.array([1, 2, 0])
    good, bad = tmp_path / "good.dgl", tmp_path / "bad.dgl"
    write_graph(good, 3, src, dst, {}, {}, ["coo", "csc"])
    write_graph(bad, 3, src, np.array([2, 2, 0]), {}, {}, ["csc"])
    raw = good.read_bytes()
    csc_at = raw.index(struct.pack("<Q", 0xDD3C5FFE20046ABF), raw.index(struct.pack("<Q", 0xDD61FFD305DFF127)))
    bad_raw = bad.read_bytes()
    bad_csc_at = bad_raw.index(struct.pack("<Q", 0xDD3C5FFE20046ABF), bad_raw.index(struct.pack("<Q", 0xDD2E60F0F6B4A127)))
    tail = bad_raw[bad_csc_at:]
    good_tail = raw[csc_at:]
    assert len(tail) == len(good_tail)  # same shape: only the indices differ
    (tmp_path / "mixed.dgl").write_bytes(raw[:csc_at] + tail)
    with pytest.raises(OutputError, match="the CSC matrix holds other edges than the COO matrix"):
        read_graph(tmp_path / "mixed.dgl")


def test_write_graph_rejects_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "g.dgl"
    ids = np.array([0, 1])
    with pytest.raises(ValueError, match="outside"):
        write_graph(path, 2, ids, np.array([0, 2]), {}, {})
    with pytest.raises(ValueError, match="src has 2 edges, dst 1"):
        write_graph(path, 2, ids, ids[:1], {}, {})
    with pytest.raises(ValueError, match="1-D integer"):
        write_graph(path, 2, ids.astype(float), ids, {}, {})
    with pytest.raises(ValueError, match="node data 'x' has 3 rows, expected 2"):
        write_graph(path, 2, ids, ids, {"x": np.zeros(3)}, {})
    with pytest.raises(InputError, match="edge data 'c'"):
        write_graph(path, 2, ids, ids, {}, {"c": np.array([1j, 2j])})


# ------------------------------------------------------------------ corrupt files


def test_missing_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="nope.dgl: cannot open"):
        read_graph(tmp_path / "nope.dgl")
    write_tensor_dict(tmp_path / "t.dgl", {"a": np.zeros(2)})
    with pytest.raises(OutputError, match=r"t.dgl: not a DGL graph file"):
        read_graph(tmp_path / "t.dgl")
    write_sample_graph(tmp_path / "g.dgl")
    with pytest.raises(OutputError, match=r"g.dgl: not a DGL tensor dict"):
        read_tensor_dict(tmp_path / "g.dgl")
    (tmp_path / "empty.dgl").write_bytes(b"")
    with pytest.raises(OutputError, match="empty.dgl: file ends 8 bytes early"):
        read_tensor_dict(tmp_path / "empty.dgl", mmap=True)


@pytest.mark.parametrize("kind", ["graph", "tensors"])
def test_every_truncation_is_reported(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "f.dgl"
    if kind == "graph":
        write_sample_graph(path)
        reader: Any = read_graph
        cuts = [0, 7, 100, 4095, *range(4096, path.stat().st_size)]
    else:
        write_tensor_dict(path, {"a": sample("int32", (3, 2)), "bb": sample("float16", (4,))})
        reader = read_tensor_dict
        cuts = list(range(path.stat().st_size))
    raw = path.read_bytes()
    for cut in cuts:
        path.write_bytes(raw[:cut])
        with pytest.raises(OutputError, match=r"f\.dgl: ") as err:
            reader(path)
        assert "corrupt or truncated" in str(err.value) or "ends" in str(err.value), cut


@pytest.mark.parametrize("kind", ["graph", "tensors"])
def test_corrupted_bytes_raise_output_error_only(tmp_path: Path, kind: str) -> None:
    """Any byte overwritten anywhere: the read succeeds or raises OutputError, nothing else."""
    path = tmp_path / "f.dgl"
    if kind == "graph":
        write_sample_graph(path)
        reader: Any = read_graph
        start = 4096
    else:
        write_tensor_dict(path, {"a": sample("int32", (3, 2)), "bb": sample("float16", (4,))})
        reader = read_tensor_dict
        start = 0
    raw = path.read_bytes()
    failures = 0
    for pos in range(start, len(raw)):
        for value in (0x00, 0x07, 0xFF):
            if raw[pos] == value:
                continue
            path.write_bytes(raw[:pos] + bytes([value]) + raw[pos + 1 :])
            try:
                reader(path)
            except OutputError as e:
                assert str(e).startswith(str(path)), e
                failures += 1
    assert failures > 0


def test_heterogeneous_graph_rejected(tmp_path: Path) -> None:
    write_sample_graph(tmp_path / "g.dgl")
    raw = bytearray((tmp_path / "g.dgl").read_bytes())
    # The graph record's metagraph CSR: magic, magic, num_cols, num_rows (= node types).
    num_types_at = 4096 + 16 + 8 + 8 + 8 + 8
    assert struct.unpack_from("<q", raw, num_types_at)[0] == 1
    struct.pack_into("<q", raw, num_types_at, 3)
    (tmp_path / "g.dgl").write_bytes(bytes(raw))
    with pytest.raises(OutputError, match="heterogeneous graph"):
        read_graph(tmp_path / "g.dgl")


# ------------------------------------------------------------------ files written by DGL


def test_committed_dgl_fixtures(tmp_path: Path) -> None:
    """Files written by real DGL 2.1.0 (tests/dgl_check.py --save-fixtures tests/fixtures)."""
    check_dgl_written_files(FIXTURES, tmp_path)


def test_pieces_write_the_same_bytes_as_whole_arrays(tmp_path: Path, monkeypatch) -> None:
    """A graph and a tensor dict written from int32 Pieces (converted a few rows at a time)
    equal those written from whole int64 arrays."""
    from distpart.partitions.dglformat import Pieces
    from distpart.partitions.dglformat import records
    monkeypatch.setattr(records, "_WRITE_ROWS", 3)
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 9, 20), rng.integers(0, 9, 20)
    eid = np.arange(100, 120, dtype=np.int64)
    whole, pieces = tmp_path / "whole.dgl", tmp_path / "pieces.dgl"
    write_graph(whole, 9, src, dst, {}, {"_ID": eid})
    write_graph(pieces, 9, Pieces.of([src[:7].astype(np.int32), src[7:].astype(np.int32)], "<i8"),
                Pieces.of([dst.astype(np.int32)], "<i8"), {},
                {"_ID": Pieces(np.dtype("<i8"), (20,), lambda: iter([eid[:5], eid[5:]]))})
    assert whole.read_bytes() == pieces.read_bytes()
    write_tensor_dict(tmp_path / "a.dgl", {"x": eid})
    write_tensor_dict(tmp_path / "b.dgl", {"x": Pieces.of([eid.astype(np.int32)], "<i8")})
    assert (tmp_path / "a.dgl").read_bytes() == (tmp_path / "b.dgl").read_bytes()
    with pytest.raises(ValueError, match="outside"):
        write_graph(pieces, 9, Pieces.of([np.array([9], np.int32)], "<i8"), np.array([0]), {}, {})
