"""Tests of distpart.chunked.write (no MPI): the chunked format written from an in-memory graph, from
OGB's raw layout and from large edge lists reads back, with the independent reference
reader, as exactly the graph that went in; memory stays bounded by a batch."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import reference
import pytest
from harness import start_early

from distpart.chunked.write import (chunk_edge_lists, chunk_ogb, chunk_sizes, describe_graph, write_graph)
from distpart.cli import main as cli_main
from distpart.errors import InputError
from distpart.chunked.metadata import load_metadata
from distpart.synthetic import read_whole_graph

REPO = Path(__file__).resolve().parents[1]
DGL_KEYS = {"graph_name", "node_type", "num_nodes_per_chunk", "edge_type", "num_edges_per_chunk",
            "edges", "node_data", "edge_data"}


def hetero_graph(seed: int = 0) -> Dict[str, Any]:
    """Three node types (one without nodes), three edge types: one with features, one
    without edge data, one with no edges."""
    rng = np.random.default_rng(seed)
    nu, ni = 500, 300
    return {
        "num_nodes": {"user": nu, "item": ni, "shop": 0},
        "edges": {
            ("user", "buys", "item"): (rng.integers(0, nu, 2000), rng.integers(0, ni, 2000).astype(np.int32)),
            "user:follows:user": (rng.integers(0, nu, 1500), rng.integers(0, nu, 1500)),
            ("item", "sold_by", "shop"): (np.empty(0, np.int64), np.empty(0, np.int64)),
        },
        "node_data": {"user": {"feat": rng.random((nu, 3, 2)).astype(np.float32),
                               "mask": rng.random(nu) < 0.3},
                      "item": {"price": rng.random(ni)}},
        "edge_data": {("user", "buys", "item"): {"qty": rng.integers(-5, 5, 2000).astype(np.int16),
                                                 "w": rng.random((2000, 4))}},
    }


def assert_same_graph(got: Dict[str, Any], want: Dict[str, Any]) -> None:
    """`got` (read_whole_graph's form) equals `want` (a description dict), dtypes as given."""
    reference.assert_same_graph(got, want, stored=False)


@pytest.mark.parametrize("fmt", ["csv", "numpy", "parquet"])
def test_in_memory_graph_round_trip(tmp_path: Path, fmt: str) -> None:
    g = hetero_graph()
    # A tiny batch: rows arrive in many batches that straddle the chunk boundaries.
    meta_path = write_graph(g, tmp_path / "g", num_chunks=3, edge_format=fmt, graph_name="shop",
                            batch_bytes=1000)
    meta = json.loads(meta_path.read_text())
    assert DGL_KEYS <= set(meta) and meta["graph_name"] == "shop"
    assert meta["node_type"] == ["user", "item", "shop"]
    assert meta["edge_type"] == ["user:buys:item", "user:follows:user", "item:sold_by:shop"]
    assert meta["num_nodes_per_chunk"] == [[167, 167, 166], [100, 100, 100], [0, 0, 0]]
    assert meta["num_edges_per_chunk"][1] == chunk_sizes(1500, 3)
    assert meta["edges"]["user:buys:item"]["format"] == (
        {"name": "csv", "delimiter": " "} if fmt == "csv" else {"name": fmt})
    assert "user:follows:user" not in meta["edge_data"]           # the relation without edge data
    assert all(not Path(p).is_absolute() for p in meta["edges"]["user:buys:item"]["data"])
    load_metadata(meta_path)                                        # distpart's own parser accepts it
    assert_same_graph(read_whole_graph(meta_path), g)


def test_one_edge_type_and_shorthands(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 50, 120), rng.integers(0, 50, 120)
    feat = rng.random((50, 5)).astype(np.float32)
    meta_path = write_graph({"num_nodes": 50, "edges": (src, dst), "node_data": {"feat": feat}},
                            tmp_path / "g", num_chunks=2, edge_format="numpy")
    got = read_whole_graph(meta_path)
    assert got["num_nodes"] == {"_N": 50} and list(got["edges"]) == ["_N:_E:_N"]
    np.testing.assert_array_equal(got["edges"]["_N:_E:_N"][0], src)
    np.testing.assert_array_equal(got["node_feats"][("_N", "feat")], feat)
    # Written again from read_whole_graph's own (flat) form: the same graph.
    again = write_graph(got, tmp_path / "again", num_chunks=5)
    assert_same_graph(read_whole_graph(again), {"num_nodes": got["num_nodes"], "edges": got["edges"],
                                               "node_feats": got["node_feats"]})


def test_one_edge_type_between_two_node_types(tmp_path: Path) -> None:
    g = {"num_nodes": {"a": 3, "b": 4}, "edges": {"a:to:b": ([0, 1, 2, 2], [3, 0, 1, 3])}}
    meta_path = write_graph(g, tmp_path / "g", num_chunks=8, edge_format="csv")
    assert_same_graph(read_whole_graph(meta_path), {"num_nodes": g["num_nodes"],
                                                    "edges": {"a:to:b": (np.array([0, 1, 2, 2]),
                                                                         np.array([3, 0, 1, 3]))}})


@pytest.mark.parametrize("graph, message", [
    ({"num_nodes": {"a": 3}, "edges": {"a:r:a": ([0, 3], [1, 1])}},
     r"source ID 3 at row 1 is outside \[0, 3\) of node type 'a'"),
    ({"num_nodes": {"a": 3}, "edges": {"a:r:b": ([0], [1])}}, "names node type 'b'"),
    ({"num_nodes": {"a": 3}, "edges": {"a:r:a": ([0], [1, 2])}}, "1 source IDs but 2 destination"),
    ({"num_nodes": {"a": 3}, "edges": {"a:r:a": ([0.5], [1.0])}}, "integer array"),
    ({"num_nodes": {"a": 3}, "edges": {}, "node_data": {"a": {"x": np.zeros(2)}}}, "has 2 rows, expected 3"),
    ({"num_nodes": {"a/b": 3}, "edges": {}}, "must not contain '/'"),
    ({"num_nodes": {"a": 3}, "edges": {}, "node_data": {"a": {"x": np.array(["s"] * 3)}}}, "bool, integer or float"),
])
def test_bad_descriptions_are_refused(tmp_path: Path, graph: Dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        write_graph(graph, tmp_path / "g")
    assert not (tmp_path / "g" / "metadata.json").exists()


def test_output_folder_rules(tmp_path: Path) -> None:
    g = {"num_nodes": 4, "edges": ([0, 1], [2, 3])}
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="exists and is not empty"):
        write_graph(g, tmp_path / "foreign")
    write_graph(g, tmp_path / "g")
    with pytest.raises(InputError, match="pass --overwrite"):
        write_graph(g, tmp_path / "g")
    write_graph({"num_nodes": 5, "edges": ([4], [0])}, tmp_path / "g", overwrite=True, edge_format="parquet")
    got = read_whole_graph(tmp_path / "g" / "metadata.json")
    assert got["num_nodes"] == {"_N": 5} and got["edges"]["_N:_E:_N"][0].tolist() == [4]
    assert not list((tmp_path / "g" / "edges").glob("*.csv"))     # the previous files are gone


# ----------------------------------------------------------------------------- OGB's layout


def ogb_dataset(root: Path) -> Dict[str, Any]:
    """MAG240M's layout in miniature: meta.pt is absent (no torch here), author has no folder."""
    rng = np.random.default_rng(2)
    na, npap, ni = 40, 60, 5
    edges = {"author:writes:paper": (rng.integers(0, na, 150), rng.integers(0, npap, 150)),
             "paper:cites:paper": (rng.integers(0, npap, 200), rng.integers(0, npap, 200)),
             "author:affiliated_with:institution": (rng.integers(0, na - 1, 30), rng.integers(0, ni, 30))}
    edges["author:affiliated_with:institution"][1][-1] = ni - 1
    feats = {"feat": rng.random((npap, 6)).astype(np.float16), "label": rng.integers(0, 9, npap),
             "year": rng.integers(1990, 2020, npap).astype(np.int32)}
    year = rng.integers(0, 3, 150).astype(np.int8)
    processed = root / "processed"
    for etype, (src, dst) in edges.items():
        d = processed / etype.replace(":", "___")
        d.mkdir(parents=True)
        np.save(d / "edge_index.npy", np.stack([src, dst]))
    np.save(processed / "author___writes___paper" / "edge_year.npy", year)
    (processed / "paper").mkdir()
    for name, values in feats.items():
        np.save(processed / "paper" / f"node_{name}.npy", values)
    return {"num_nodes": {"author": na, "institution": ni, "paper": npap},
            "edges": {k: edges[k] for k in sorted(edges)},
            "node_data": {"paper": feats}, "edge_data": {"author:writes:paper": {"year": year}}}


def test_ogb_layout_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    want = ogb_dataset(tmp_path / "mag")
    out = tmp_path / "chunked"
    # author's count is given (its largest endpoint is 38, one short: an isolated node);
    # paper's comes from its features, institution's from the largest endpoint.
    assert cli_main(["chunk", str(out), "--ogb", str(tmp_path / "mag"), "--num-nodes", "author=40",
                     "--num-chunks", "3", "--edge-format", "numpy"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out / "metadata.json")
    assert "node type 'institution': 5 nodes (the largest endpoint + 1" in captured.err
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["graph_name"] == "mag" and meta["node_type"] == ["author", "institution", "paper"]
    assert_same_graph(read_whole_graph(out / "metadata.json"), want)


def test_ogb_layout_errors(tmp_path: Path) -> None:
    ogb_dataset(tmp_path / "mag")
    with pytest.raises(InputError, match=r"destination ID 4 at row \d+ is outside \[0, 4\) of node type 'institution'"):
        chunk_ogb(tmp_path / "mag", tmp_path / "o", num_nodes={"institution": 4}, notes=lambda s: None)
    with pytest.raises(InputError, match="not OGB's raw layout"):
        chunk_ogb(tmp_path / "mag" / "processed" / "paper", tmp_path / "o2")
    with pytest.raises(InputError, match="holds the input"):
        chunk_ogb(tmp_path / "mag", tmp_path / "mag", notes=lambda s: None)


# ----------------------------------------------------------------------------- edge lists


def write_csv(path: Path, columns: Dict[str, np.ndarray], header: bool, delimiter: str = ",") -> None:
    pacsv.write_csv(pa.table(columns), path, pacsv.WriteOptions(include_header=header, delimiter=delimiter))


def test_edge_lists_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n_user, n_item = 70, 40
    follows = (rng.integers(0, n_user, 900), rng.integers(0, n_user, 900))
    buys = (rng.integers(0, n_user, 700), rng.integers(0, n_item, 700))
    rates = (rng.integers(0, n_user, 500), rng.integers(0, n_item - 1, 500))
    score = rng.integers(1, 6, 700)
    rating = np.round(rng.random(500) * 10, 3)
    emb = rng.random((500, 3)).astype(np.float32)
    flag = rng.random(500) < 0.5
    user_feat = rng.random((n_user, 2))
    # Space-delimited, endpoints under other names, no edge data.
    write_csv(tmp_path / "follows.txt", {"a": follows[0], "b": follows[1]}, header=True, delimiter=" ")
    # A header naming the endpoint and feature columns.
    write_csv(tmp_path / "buys.csv", {"src": buys[0], "dst": buys[1], "score": score}, header=True, delimiter=" ")
    # Parquet: a scalar, a list (2-D) and a boolean feature; endpoints named, not first.
    pq.write_table(pa.table({"rating": rating, "dst": rates[1], "src": rates[0],
                             "emb": pa.array(list(emb), type=pa.list_(pa.float32())), "flag": flag}),
                   tmp_path / "rates.parquet", row_group_size=128)
    np.save(tmp_path / "user_feat.npy", user_feat)
    out = tmp_path / "chunked"
    path = chunk_edge_lists({"user:follows:user": tmp_path / "follows.txt", ("user", "buys", "item"): tmp_path / "buys.csv",
                             "user:rates:item": tmp_path / "rates.parquet"},
                            out, num_nodes={"item": n_item}, node_features={"user/feat": tmp_path / "user_feat.npy"},
                            delimiter=" ", header=True, num_chunks=4, edge_format="parquet", batch_bytes=2000,
                            notes=lambda s: None)
    meta = json.loads(path.read_text())
    assert meta["node_type"] == ["item", "user"]
    assert set(meta["edge_data"]) == {"user:buys:item", "user:rates:item"}
    got = read_whole_graph(path)
    assert_same_graph(got, {
        "num_nodes": {"item": n_item, "user": n_user},
        "edges": {"user:follows:user": follows, "user:buys:item": buys, "user:rates:item": rates},
        "node_data": {"user": {"feat": user_feat}},
        "edge_data": {"user:buys:item": {"score": score},
                      "user:rates:item": {"rating": rating, "emb": emb, "flag": flag}}})


def test_edge_list_without_header_through_the_cli(tmp_path: Path) -> None:
    src, dst, w = np.arange(10) % 7, np.arange(10)[::-1] % 7, np.linspace(0, 1, 10)
    write_csv(tmp_path / "e.csv", {"s": src, "d": dst, "w": w}, header=False)
    assert cli_main(["chunk", str(tmp_path / "out"), "--edges", f"n:link:n={tmp_path / 'e.csv'}",
                     "--num-nodes", "n=7", "--num-chunks", "2", "--graph-name", "tiny"]) == 0
    got = read_whole_graph(tmp_path / "out" / "metadata.json")
    assert got["num_nodes"] == {"n": 7}
    np.testing.assert_array_equal(got["edges"]["n:link:n"][0], src)
    np.testing.assert_array_equal(got["edge_feats"][("n:link:n", "f2")], w)   # pyarrow's name for column 2


def test_feature_column_that_turns_decimal_later_is_read_as_float(tmp_path: Path) -> None:
    n = 30000   # several 64 KiB blocks: the first holds only integers
    values = np.arange(n, dtype=np.float64)
    values[-1] = 0.5
    lines = [f"{i % 100},{(i * 7) % 100},{int(v) if v.is_integer() else v}" for i, v in enumerate(values)]
    (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
    path = chunk_edge_lists({"a:r:a": tmp_path / "e.csv"}, tmp_path / "out", batch_bytes=1 << 16,
                            notes=lambda s: None)
    got = read_whole_graph(path)
    assert got["edge_feats"][("a:r:a", "f2")].dtype == np.float64
    np.testing.assert_array_equal(got["edge_feats"][("a:r:a", "f2")], values)


@pytest.mark.parametrize("content, message", [
    ("0,1\n2,x\n", "not a valid edge list"),
    ("0,1\n-2,1\n", r"source ID -2 at row 1 of edge type 'a:r:a' is negative"),
    ("0,1\n2,9\n", r"destination ID 9 at row 1 is outside \[0, 5\) of node type 'a'"),
    ("0,1,2\n2,1\n", "not a valid edge list"),
    ("0\n1\n", "needs at least two columns"),
])
def test_bad_edge_lists_name_file_and_row(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "e.csv").write_text(content)
    with pytest.raises(InputError, match=message) as info:
        chunk_edge_lists({"a:r:a": tmp_path / "e.csv"}, tmp_path / "out", num_nodes={"a": 5})
    assert str(tmp_path / "e.csv") in str(info.value)
    assert not (tmp_path / "out" / "metadata.json").exists()


def test_cli_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli_main(["chunk", str(tmp_path / "o")]) == 2
    assert "give --ogb DIR, or one --edges" in capsys.readouterr().err
    assert cli_main(["chunk", str(tmp_path / "o"), "--edges", "a:r:a"]) == 2
    assert "takes KEY=VALUE" in capsys.readouterr().err


BOUNDED = r"""
import sys, tracemalloc
from pathlib import Path
import pyarrow as pa
from distpart.chunked.write import chunk_edge_lists
d = Path(sys.argv[1])
tracemalloc.start()
chunk_edge_lists({"n:a:n": d / "e.csv", "n:b:n": d / "e.parquet"}, d / "out", num_nodes={"n": 10**6},
                 num_chunks=3, edge_format="numpy", batch_bytes=1 << 20)
print(tracemalloc.get_traced_memory()[1], pa.default_memory_pool().max_memory())
"""


@start_early
# Not in the serial group: tracemalloc and Arrow's pool count this process's allocations only.
def test_edge_lists_stream_in_bounded_memory(tmp_path: Path) -> None:
    n = 1_500_000
    rng = np.random.default_rng(0)
    table = pa.table({"src": rng.integers(0, 10**6, n), "dst": rng.integers(0, 10**6, n), "w": rng.random(n)})
    pacsv.write_csv(table, tmp_path / "e.csv", pacsv.WriteOptions(include_header=False))
    pq.write_table(table, tmp_path / "e.parquet", row_group_size=1 << 18)
    del table
    assert (tmp_path / "e.csv").stat().st_size > 40 << 20
    # A fresh process: its numpy (tracemalloc) and Arrow (memory pool) peaks are the chunking's.
    run = subprocess.run([sys.executable, "-c", BOUNDED, str(tmp_path)], capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr
    numpy_peak, arrow_peak = (int(x) for x in run.stdout.split())
    # Each file holds 36 MB of values (src, dst, w: 1.5M rows of 3 x 8 bytes); a batch is 1 MiB
    # and a Parquet row group 6 MB decoded (measured: numpy 3 MB, Arrow 13 MB at the peak).
    assert numpy_peak < 8 << 20, numpy_peak
    assert arrow_peak < 20 << 20, arrow_peak
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert meta["num_edges_per_chunk"] == [[500_000] * 3] * 2
    first = np.load(tmp_path / "out" / meta["edges"]["n:b:n"]["data"][0], mmap_mode="r")
    ref = pq.ParquetFile(tmp_path / "e.parquet").read_row_group(0)
    np.testing.assert_array_equal(first[:100, 0], ref.column("src").to_numpy()[:100])
