"""`distpart chunk` with unsigned 64-bit endpoint IDs (issue 18 item 12): an ID above int64's
range is refused with its value as the file holds it and its row, before anything is
written, not cast to int64 first and reported as a negative number; unsigned IDs that fit
are read as they are."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distpart.chunked.write import chunk_edge_lists, chunk_ogb
from distpart.errors import InputError
from distpart.synthetic import read_whole_graph

BIG = 2**63 + 5                   # a plain int64 cast makes it -9223372036854775803


def _ogb(root: Path, edges: np.ndarray) -> Path:
    rel = root / "processed" / "paper___cites___paper"
    rel.mkdir(parents=True)
    np.save(rel / "edge_index.npy", edges)
    return rel / "edge_index.npy"


def _no_output(out: Path) -> None:
    assert not out.exists(), sorted(p.name for p in out.iterdir())


@pytest.mark.parametrize("layout", ["(2, E)", "(E, 2)"])
@pytest.mark.parametrize("end", ["source", "destination"])
def test_ogb_uint64_endpoint_above_int64_is_reported_as_given(tmp_path, layout, end):
    src = np.array([0, 1, 2, 3], dtype=np.uint64)
    dst = np.array([1, 2, 3, 0], dtype=np.uint64)
    (src if end == "source" else dst)[2] = BIG
    pairs = np.stack([src, dst])
    path = _ogb(tmp_path / "ogb", pairs if layout == "(2, E)" else np.ascontiguousarray(pairs.T))
    with pytest.raises(InputError) as e:
        chunk_ogb(tmp_path / "ogb", tmp_path / "out", num_nodes={"paper": 4}, notes=lambda _: None)
    assert str(e.value) == (f"{path}: {end} ID {BIG} at row 2 of edge type 'paper:cites:paper' is above "
                            f"{2**63 - 1}, the largest node ID (node IDs are int64)")
    _no_output(tmp_path / "out")


def test_parquet_uint64_endpoint_above_int64_is_reported_as_given(tmp_path):
    f = tmp_path / "cites.parquet"
    pq.write_table(pa.table({"src": pa.array([0, 1, 2**64 - 1], pa.uint64()), "dst": pa.array([1, 2, 0], pa.uint64()),
                             "w": pa.array([0.5, 1.5, 2.5])}), f)
    with pytest.raises(InputError, match=rf"^{f}: source ID {2**64 - 1} at row 2 of edge type 'p:cites:p' is above"):
        chunk_edge_lists({"p:cites:p": f}, tmp_path / "out", notes=lambda _: None)
    _no_output(tmp_path / "out")


def test_csv_endpoint_above_int64_names_the_value_as_written(tmp_path):
    f = tmp_path / "cites.csv"
    f.write_text(f"0,1\n1,2\n{BIG},0\n")
    with pytest.raises(InputError, match=rf"invalid value '{BIG}'"):
        chunk_edge_lists({"p:cites:p": f}, tmp_path / "out", notes=lambda _: None)
    _no_output(tmp_path / "out")


def test_the_command_exits_2_with_the_value(tmp_path):
    path = _ogb(tmp_path / "ogb", np.array([[0, BIG], [1, 0]], dtype=np.uint64))
    run = subprocess.run([sys.executable, "-m", "distpart", "chunk", "--ogb", str(tmp_path / "ogb"),
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        f"distpart chunk: error: {path}: source ID {BIG} at row 1 of edge type 'paper:cites:paper' is above "
        f"{2**63 - 1}, the largest node ID (node IDs are int64)")
    assert "-9223372036854775803" not in run.stderr
    _no_output(tmp_path / "out")


def test_uint64_ids_that_fit_are_read_as_they_are(tmp_path):
    edges = np.array([[0, 1, 2, 70001], [1, 2, 0, 3]], dtype=np.uint64)
    _ogb(tmp_path / "ogb", edges)
    meta = chunk_ogb(tmp_path / "ogb", tmp_path / "out", num_chunks=2, notes=lambda _: None)
    g = read_whole_graph(meta)
    src, dst = g["edges"]["paper:cites:paper"]
    assert src.dtype == np.int64 and src.tolist() == [0, 1, 2, 70001] and dst.tolist() == [1, 2, 0, 3]
    assert g["num_nodes"]["paper"] == 70002
