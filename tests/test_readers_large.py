"""Reading and writing at rows and bytes past 2**31 (issue 31, item 4): sparse .npy chunks of
billions of rows (only the touched pages exist on disk), and MPI-IO writes at offsets past 2**32."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distpart.chunked.metadata import load_metadata
from distpart.chunked.readers.pieces import Piece, pieces_of_block

B = 10**9
INT32_MAX = 2**31 - 1


# ---------------------------------------------------------------- readers: sparse files of billions of rows

def sparse_npy(path: Path, dtype, shape, values: dict) -> None:
    """A .npy of `shape` whose bytes are never written but at `values` (a sparse file: the
    file system stores only the touched pages, so 3e9 rows cost a few kilobytes)."""
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    for row, value in values.items():
        arr[row] = value
    arr.flush()
    del arr


def test_readers_address_rows_past_2_31(tmp_path: Path) -> None:
    from distpart.chunked.readers import FeatureSource, edge_file_sizes, read_edge_piece

    (tmp_path / "f").mkdir()
    # A node feature in two chunks of 3e9 and 2**31 + 5 int8 rows; an edge chunk of 2**31 + 10
    # int32 rows (read back as int64).
    sparse_npy(tmp_path / "f" / "x0.npy", np.int8, (3 * B,), {0: 1, 2**31 + 3: 2, 3 * B - 1: 3})
    sparse_npy(tmp_path / "f" / "x1.npy", np.int8, (2**31 + 5,), {0: 4, 2**31 + 4: 5})
    sparse_npy(tmp_path / "f" / "e0.npy", np.int32, (2**31 + 10, 2),
               {2**31 + 1: [INT32_MAX, 2**31 - 2], 2**31 + 9: [1, 2]})
    meta = {"graph_name": "sparse", "node_type": ["u"], "edge_type": ["u:r:u"],
            "num_nodes_per_chunk": [[3 * B + 2**31 + 5]], "num_edges_per_chunk": [[2**31 + 10]],
            "edges": {"u:r:u": {"format": {"name": "numpy"}, "data": ["f/e0.npy"]}},
            "node_data": {"u": {"x": {"format": {"name": "numpy"}, "data": ["f/x0.npy", "f/x1.npy"]}}},
            "edge_data": {}}
    (tmp_path / "metadata.json").write_text(json.dumps(meta))
    gm = load_metadata(tmp_path / "metadata.json")
    source = FeatureSource.expecting(gm.node_features("u")["x"], gm.num_nodes("u"), "node type 'u'")
    assert source.offsets.tolist() == [0, 3 * B, 3 * B + 2**31 + 5]
    assert source.read(0, 1).tolist() == [1]
    assert source.read(2**31 + 2, 2**31 + 5).tolist() == [0, 2, 0]
    assert source.read(3 * B - 1, 3 * B + 1).tolist() == [3, 4]      # across the chunk boundary
    assert source.read(3 * B + 2**31 + 3, 3 * B + 2**31 + 5).tolist() == [0, 5]

    files = gm.edge_types[0].files
    sizes = edge_file_sizes(files)
    assert sizes == [2**31 + 10]
    pieces = pieces_of_block(sizes, 1, 2)
    assert pieces == [Piece(0, (2**31 + 10) // 2, 2**31 + 10)]
    src, dst = read_edge_piece(files, Piece(0, 2**31, 2**31 + 10))
    assert src.dtype == dst.dtype == np.int64
    assert src.tolist() == [0, INT32_MAX] + [0] * 7 + [1]
    assert dst.tolist() == [0, 2**31 - 2] + [0] * 7 + [2]


# ---------------------------------------------------------------- MPI-IO: writes at byte offsets past 2**32

def test_write_at_offsets_past_2_32_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    from distpart.mpi import files

    class Recorder:
        def __init__(self) -> None:
            self.calls = []

        def Write_at(self, offset, buf) -> None:
            self.calls.append((offset, bytes(buf)))

    monkeypatch.setattr(files, "WRITE_PIECE", 4)   # stands in for 1 GiB, so 10 bytes take 3 calls
    fh = Recorder()
    at = 5 * B + 2**32
    files.write_at(fh, at, np.arange(10, dtype=np.uint8))
    assert fh.calls == [(at, bytes([0, 1, 2, 3])), (at + 4, bytes([4, 5, 6, 7])), (at + 8, bytes([8, 9]))]
    assert all(type(offset) is int for offset, _ in fh.calls)
