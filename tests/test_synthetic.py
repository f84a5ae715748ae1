"""Tests of distpart.synthetic: the generated inputs are valid chunked graphs, readable with
the plain libraries, deterministic, and agree with the reference reader."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any, Dict

import h5py
import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from distpart.chunked.write import chunk_sizes
from distpart.synthetic import (
    EdgeTypeSpec,
    FeatureSpec,
    NodeTypeSpec,
    example_graph,
    example_graph_specs,
    feature_values,
    homogeneous_graph,
    read_whole_graph,
    write_chunked_graph,
)
from distpart.synthetic.__main__ import main

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return example_graph(tmp_path_factory.mktemp("example"), seed=7)


def _meta(path: pathlib.Path) -> Dict[str, Any]:
    return json.loads(path.read_text())


def _resolve(meta_path: pathlib.Path, p: str) -> pathlib.Path:
    q = pathlib.Path(p)
    return q if q.is_absolute() else meta_path.parent / q


def _file_rows(path: pathlib.Path, fmt: Dict[str, Any]) -> int:
    """Row count of one data file, read with the plain library only."""
    if fmt["name"] == "numpy":
        return int(np.load(path, mmap_mode="r").shape[0])
    if fmt["name"] == "parquet":
        return pq.read_metadata(path).num_rows
    if fmt["name"] == "hdf5":
        with h5py.File(path, "r") as f:
            return int(f[fmt["dataset"]].shape[0])
    if fmt["name"] == "csv":
        text = path.read_text()
        return len(text.splitlines())
    raise AssertionError(fmt)


# ----------------------------------------------------------------------------- chunk sizes


@pytest.mark.parametrize("total,parts", [(0, 4), (3, 4), (10, 4), (8, 8), (1_000_003, 7)])
def test_chunk_sizes_near_equal(total: int, parts: int) -> None:
    sizes = chunk_sizes(total, parts)
    assert len(sizes) == parts and sum(sizes) == total
    assert max(sizes) - min(sizes) <= 1 and all(s >= 0 for s in sizes)


# ----------------------------------------------------------------------------- example graph


def test_example_schema(example: pathlib.Path) -> None:
    meta = _meta(example)
    assert meta["graph_name"] == "example"
    assert meta["node_type"] == ["author", "paper", "institution"]
    assert meta["edge_type"] == [
        "author:writes:paper",
        "paper:cites:paper",
        "author:affiliated_with:institution",
        "paper:written_by:author",
    ]
    assert meta["num_nodes_per_chunk"][2] == [1, 1, 1, 0]  # an empty node chunk on purpose
    assert meta["edges"]["author:writes:paper"]["format"] == {"name": "csv", "delimiter": " "}
    assert meta["edges"]["paper:written_by:author"]["format"] == {"name": "csv", "delimiter": ","}
    assert meta["edges"]["paper:cites:paper"]["format"] == {"name": "numpy"}
    assert meta["edges"]["author:affiliated_with:institution"]["format"] == {"name": "parquet"}
    assert set(meta["node_data"]) == {"paper", "author"}  # institution has no features
    assert set(meta["node_data"]["paper"]) == {"feat", "label", "train_mask"}
    assert set(meta["node_data"]["author"]) == {"emb", "age"}
    assert meta["node_data"]["paper"]["train_mask"]["format"] == {"name": "hdf5", "dataset": "train_mask"}
    assert len(meta["node_data"]["paper"]["feat"]["data"]) == 3
    assert len(meta["node_data"]["author"]["emb"]["data"]) == 2
    assert set(meta["edge_data"]) == {"author:writes:paper", "paper:cites:paper"}
    assert sum(sum(c) for c in meta["num_edges_per_chunk"]) == 10_000


def test_metadata_consistent_with_files(example: pathlib.Path) -> None:
    meta = _meta(example)
    num_nodes = {t: sum(c) for t, c in zip(meta["node_type"], meta["num_nodes_per_chunk"])}
    assert num_nodes == {"author": 1000, "paper": 2000, "institution": 3}
    num_edges = {}
    for etype, per_chunk in zip(meta["edge_type"], meta["num_edges_per_chunk"]):
        spec = meta["edges"][etype]
        assert len(spec["data"]) == len(per_chunk)
        for p, expected in zip(spec["data"], per_chunk):
            path = _resolve(example, p)
            assert path.is_file()
            assert _file_rows(path, spec["format"]) == expected
        num_edges[etype] = sum(per_chunk)
    for section, counts in (("node_data", num_nodes), ("edge_data", num_edges)):
        for owner, feats in meta[section].items():
            for name, spec in feats.items():
                rows = [_file_rows(_resolve(example, p), spec["format"]) for p in spec["data"]]
                assert sum(rows) == counts[owner], (owner, name)


def test_edge_endpoints_in_range(example: pathlib.Path) -> None:
    g = read_whole_graph(example)
    for etype, (src, dst) in g["edges"].items():
        s, _, d = etype.split(":")
        assert src.dtype == np.int64 and dst.dtype == np.int64
        assert src.min() >= 0 and src.max() < g["num_nodes"][s]
        assert dst.min() >= 0 and dst.max() < g["num_nodes"][d]


def test_each_format_readable_with_plain_libraries(example: pathlib.Path) -> None:
    meta = _meta(example)
    base = example.parent
    cites = np.load(base / meta["edges"]["paper:cites:paper"]["data"][0])
    assert cites.dtype == np.int64 and cites.ndim == 2 and cites.shape[1] == 2

    affil = pq.read_table(base / meta["edges"]["author:affiliated_with:institution"]["data"][0])
    assert affil.column_names == ["src", "dst"]

    feat = np.load(base / meta["node_data"]["paper"]["feat"]["data"][0])
    assert feat.dtype == np.float32 and feat.shape[1:] == (8,)

    with h5py.File(base / meta["node_data"]["author"]["emb"]["data"][1], "r") as f:
        assert f["emb"].dtype == np.float16 and f["emb"].shape == (500, 4)

    label = pq.read_table(base / meta["node_data"]["paper"]["label"]["data"][0])
    assert label.column_names == ["0"] and label.schema.metadata[b"shape"] == b"(500,)"
    weight = pq.read_table(base / meta["edge_data"]["paper:cites:paper"]["weight"]["data"][0])
    assert weight.column_names == ["0", "1"] and weight.schema.metadata[b"shape"] == b"(600, 2)"


@pytest.mark.parametrize("etype,delimiter", [("author:writes:paper", " "), ("paper:written_by:author", ",")])
def test_csv_delimiter_honoured(example: pathlib.Path, etype: str, delimiter: str) -> None:
    path = example.parent / _meta(example)["edges"][etype]["data"][0]
    lines = path.read_text().splitlines()
    assert all(len(line.split(delimiter)) == 2 for line in lines)  # no header, two columns
    other = "," if delimiter == " " else " "
    assert not any(other in line for line in lines)
    table = pacsv.read_csv(
        path,
        read_options=pacsv.ReadOptions(autogenerate_column_names=True),
        parse_options=pacsv.ParseOptions(delimiter=delimiter),
    )
    assert table.num_columns == 2 and table.num_rows == len(lines)


def test_feature_values_match_disk(example: pathlib.Path) -> None:
    g = read_whole_graph(example)
    _, _, feats = example_graph_specs()
    for spec in feats:
        table = g["node_feats"] if ":" not in spec.owner else g["edge_feats"]
        on_disk = table[(spec.owner, spec.name)]
        expected = feature_values(spec, np.arange(len(on_disk)), seed=7)
        assert on_disk.dtype == np.dtype(spec.dtype)
        assert on_disk.shape == (len(on_disk),) + spec.tail_shape
        np.testing.assert_array_equal(on_disk, expected)
        # Any subset of rows can be recomputed on its own.
        rows = np.array([len(on_disk) - 1, 0, 3])
        np.testing.assert_array_equal(feature_values(spec, rows, seed=7), on_disk[rows])


def test_feature_value_ranges() -> None:
    rows = np.arange(1000)
    mask = feature_values(FeatureSpec("n", "m", "bool"), rows)
    assert mask.any() and not mask.all()
    for dt in ("float16", "float32", "float64"):
        v = feature_values(FeatureSpec("n", "f", dt, (3,)), rows)
        assert v.dtype == np.dtype(dt) and np.any(v != np.round(v))
    for dt in ("int8", "int16", "int32", "int64"):
        v = feature_values(FeatureSpec("n", "i", dt), rows)
        assert v.dtype == np.dtype(dt) and (v < 0).any() and (v > 0).any()
    u = feature_values(FeatureSpec("n", "u", "uint16"), rows)
    assert u.dtype == np.uint16 and len(np.unique(u)) > 900
    # Different seeds, owners and names give different values.
    base = feature_values(FeatureSpec("n", "f", "float64"), rows, seed=0)
    assert not np.array_equal(base, feature_values(FeatureSpec("n", "f", "float64"), rows, seed=1))
    assert not np.array_equal(base, feature_values(FeatureSpec("m", "f", "float64"), rows, seed=0))
    assert not np.array_equal(base, feature_values(FeatureSpec("n", "g", "float64"), rows, seed=0))


def test_deterministic_bytes(tmp_path: pathlib.Path) -> None:
    a = example_graph(tmp_path / "a", seed=3)
    b = example_graph(tmp_path / "b", seed=3)
    c = example_graph(tmp_path / "c", seed=4)
    files_a = sorted(p.relative_to(a.parent) for p in a.parent.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b.parent) for p in b.parent.rglob("*") if p.is_file())
    assert files_a == files_b and len(files_a) > 20
    for rel in files_a:
        assert (a.parent / rel).read_bytes() == (b.parent / rel).read_bytes(), rel
    edges_a = read_whole_graph(a)["edges"]["paper:cites:paper"][0]
    edges_c = read_whole_graph(c)["edges"]["paper:cites:paper"][0]
    assert not np.array_equal(edges_a, edges_c)


def test_edge_types_independent_of_each_other(tmp_path: pathlib.Path) -> None:
    # A type's edges depend only on (seed, type, chunk), not on which other types exist.
    nodes = [NodeTypeSpec("a", 50), NodeTypeSpec("b", 70)]
    one = write_chunked_graph(tmp_path / "1", nodes, [EdgeTypeSpec("a:r:b", 300)], seed=5)
    two = write_chunked_graph(
        tmp_path / "2", nodes, [EdgeTypeSpec("b:s:a", 100), EdgeTypeSpec("a:r:b", 300)], seed=5
    )
    e1 = read_whole_graph(one)["edges"]["a:r:b"]
    e2 = read_whole_graph(two)["edges"]["a:r:b"]
    np.testing.assert_array_equal(e1[0], e2[0])
    np.testing.assert_array_equal(e1[1], e2[1])


# ----------------------------------------------------------------------------- general writer


def test_round_trip_all_formats_with_empty_chunks(tmp_path: pathlib.Path) -> None:
    nodes = [NodeTypeSpec("a", 2), NodeTypeSpec("b", 40)]  # 2 nodes in 5 chunks: empty chunks
    edges = [
        EdgeTypeSpec("a:x:b", 3, fmt="csv", delimiter="\t"),  # 3 edges in 5 files
        EdgeTypeSpec("b:y:a", 3, fmt="numpy"),
        EdgeTypeSpec("b:z:b", 3, fmt="parquet"),
    ]
    feats = [
        FeatureSpec("a", "h", "float32", (2, 3), fmt="hdf5", num_chunks=3),
        FeatureSpec("a", "p", "int32", (), fmt="parquet"),
        FeatureSpec("b", "p", "int8", (2, 3), fmt="parquet", num_chunks=7),
        FeatureSpec("b:z:b", "w", "bool", (), fmt="numpy", num_chunks=1),
        FeatureSpec("a:x:b", "w", "float64", (4,), fmt="parquet"),
    ]
    meta_path = write_chunked_graph(tmp_path, nodes, edges, feats, num_chunks=5, seed=11,
                                    absolute_paths=True)
    meta = _meta(meta_path)
    assert meta["num_nodes_per_chunk"] == [[1, 1, 0, 0, 0], [8] * 5]
    assert meta["num_edges_per_chunk"] == [[1, 1, 1, 0, 0]] * 3
    assert all(pathlib.Path(p).is_absolute() for p in meta["edges"]["a:x:b"]["data"])
    assert meta["edges"]["a:x:b"]["format"] == {"name": "csv", "delimiter": "\t"}

    g = read_whole_graph(meta_path)
    assert g["num_nodes"] == {"a": 2, "b": 40}
    for et in edges:
        src, dst = g["edges"][et.canonical]
        assert len(src) == len(dst) == 3
    for spec in feats:
        table = g["edge_feats"] if ":" in spec.owner else g["node_feats"]
        value = table[(spec.owner, spec.name)]
        n = 3 if ":" in spec.owner else {"a": 2, "b": 40}[spec.owner]
        np.testing.assert_array_equal(value, feature_values(spec, np.arange(n), seed=11))
        assert value.dtype == np.dtype(spec.dtype) and value.shape == (n,) + spec.tail_shape


def test_relative_paths_by_default(example: pathlib.Path) -> None:
    meta = _meta(example)
    paths = [p for spec in meta["edges"].values() for p in spec["data"]]
    assert paths and all(not pathlib.Path(p).is_absolute() for p in paths)


@pytest.mark.parametrize(
    "nodes,edges,feats",
    [
        ([NodeTypeSpec("a", 5)], [EdgeTypeSpec("a:r:c", 3)], []),  # unknown node type
        ([NodeTypeSpec("a", 5)], [EdgeTypeSpec("a:r:a", 3, fmt="tsv")], []),  # bad format
        ([NodeTypeSpec("a", 5)], [EdgeTypeSpec("a:r:a", 3, delimiter="::")], []),
        ([NodeTypeSpec("a", 0)], [EdgeTypeSpec("a:r:a", 3)], []),  # edges without nodes
        ([NodeTypeSpec("a", 5)], [], [FeatureSpec("b", "f", "float32")]),  # unknown owner
        ([NodeTypeSpec("a", 5)], [], [FeatureSpec("a", "f", "float32", fmt="csv")]),
    ],
)
def test_bad_specs_rejected(tmp_path: pathlib.Path, nodes, edges, feats) -> None:
    with pytest.raises(ValueError):
        write_chunked_graph(tmp_path, nodes, edges, feats)


# ----------------------------------------------------------------------------- homogeneous


@pytest.mark.parametrize("fmt", ["numpy", "csv", "parquet"])
def test_homogeneous_graph(tmp_path: pathlib.Path, fmt: str) -> None:
    meta_path = homogeneous_graph(tmp_path, 20_000, 100_000, num_chunks=6, fmt=fmt, feat_dim=5)
    meta = _meta(meta_path)
    assert meta["node_type"] == ["_N"] and meta["edge_type"] == ["_N:_E:_N"]
    assert meta["edges"]["_N:_E:_N"]["format"]["name"] == fmt
    assert len(meta["edges"]["_N:_E:_N"]["data"]) == 6
    g = read_whole_graph(meta_path)
    src, dst = g["edges"]["_N:_E:_N"]
    assert len(src) == 100_000 and 0 <= src.min() and max(src.max(), dst.max()) < 20_000
    feat = g["node_feats"][("_N", "feat")]
    assert feat.shape == (20_000, 5) and feat.dtype == np.float32


def _intra_fraction(meta_path: pathlib.Path, k: int) -> float:
    g = read_whole_graph(meta_path)
    n = g["num_nodes"]["_N"]
    src, dst = g["edges"]["_N:_E:_N"]
    return float(np.mean(src * k // n == dst * k // n))


def test_community_raises_intra_community_edges(tmp_path: pathlib.Path) -> None:
    k = 16
    plain = homogeneous_graph(tmp_path / "plain", 10_000, 50_000, feat_dim=0)
    clustered = homogeneous_graph(tmp_path / "comm", 10_000, 50_000, feat_dim=0, community=k)
    assert _intra_fraction(plain, k) < 0.1
    assert _intra_fraction(clustered, k) > 0.85


def test_community_across_types_and_tiny_types(tmp_path: pathlib.Path) -> None:
    # Destination type smaller than the number of communities: still valid IDs.
    nodes = [NodeTypeSpec("big", 1000), NodeTypeSpec("tiny", 3)]
    edges = [EdgeTypeSpec("big:r:tiny", 500), EdgeTypeSpec("tiny:s:big", 500)]
    meta_path = write_chunked_graph(tmp_path, nodes, edges, community=10)
    g = read_whole_graph(meta_path)
    for etype, (src, dst) in g["edges"].items():
        s, _, d = etype.split(":")
        assert src.max() < g["num_nodes"][s] and dst.max() < g["num_nodes"][d]
    src, dst = g["edges"]["tiny:s:big"]
    assert np.mean(src * 10 // 3 == dst * 10 // 1000) > 0.85


# ----------------------------------------------------------------------------- command line


def test_cli_main(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["homogeneous", str(tmp_path / "h"), "--num-nodes", "100", "--num-edges", "500",
                 "--num-chunks", "3", "--format", "csv", "--community", "4"]) == 0
    printed = pathlib.Path(capsys.readouterr().out.strip())
    assert printed == tmp_path / "h" / "metadata.json" and printed.is_file()
    assert _meta(printed)["edges"]["_N:_E:_N"]["format"] == {"name": "csv", "delimiter": " "}


def test_cli_module_entry(tmp_path: pathlib.Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "distpart.synthetic", "example", str(tmp_path / "ex"), "--seed", "7"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )
    printed = pathlib.Path(out.stdout.strip())
    assert printed.is_file()
    assert read_whole_graph(printed)["num_nodes"] == {"author": 1000, "paper": 2000, "institution": 3}


def test_cli_rejects_bad_input(tmp_path: pathlib.Path) -> None:
    with pytest.raises(SystemExit) as err:
        main(["homogeneous", str(tmp_path), "--num-nodes", "0", "--num-edges", "5"])
    assert err.value.code == 2
