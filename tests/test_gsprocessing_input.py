"""The chunked input as GraphStorm's Spark preprocessing (GSProcessing) writes it (issue 20,
item 2): its metadata dialect, its Parquet files, and the counts read from the files when the
metadata leaves them out. The pipeline on it, on 1, 2 and 4 ranks: mpi_tests/test_gsprocessing.py."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable, Dict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distpart.chunked.counts import count_rows
from distpart.chunked.ids import IdConverter
from distpart.chunked.metadata import load_metadata, parse_metadata
from distpart.chunked.readers import FeatureSource, Piece, edge_file_sizes, read_edge_piece
from distpart.errors import InputError
from distpart.synthetic.gsprocessing import GSPROCESSING_METADATA, write_gsprocessing_graph

BUYS, BUYS_REV = "user:buys:item", "item:buys-rev:user"


@pytest.fixture(scope="module")
def gsp(tmp_path_factory) -> Dict[str, Any]:
    return write_gsprocessing_graph(tmp_path_factory.mktemp("gsp") / "g")


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Dict[str, Any]:
    """The same graph without any row_counts (only num_*_per_type): counts come from the files."""
    return write_gsprocessing_graph(tmp_path_factory.mktemp("bare") / "g", row_counts=False,
                                    metadata_name="meta.json")


def raw_of(graph: Dict[str, Any]) -> Dict[str, Any]:
    return json.loads(graph["metadata"].read_text())


def changed(graph: Dict[str, Any], tmp_path: Path, change: Callable[[Dict[str, Any]], None]) -> Path:
    """A metadata file beside the graph's (same data files), with `change` applied."""
    raw = copy.deepcopy(raw_of(graph))
    change(raw)
    path = graph["metadata"].parent / f"changed-{tmp_path.name}.json"
    path.write_text(json.dumps(raw))
    return path


def read_all_edges(files) -> tuple:
    sizes = edge_file_sizes(files)
    parts = [read_edge_piece(files, Piece(i, 0, n)) for i, n in enumerate(sizes) if n]
    return np.concatenate([s for s, _ in parts]), np.concatenate([d for _, d in parts])


# ---------------------------------------------------------------- the generator


def test_generator_writes_what_gsprocessing_writes(gsp):
    raw = raw_of(gsp)
    assert gsp["metadata"].name == GSPROCESSING_METADATA
    assert not (gsp["metadata"].parent / "metadata.json").exists()
    assert "num_nodes_per_chunk" not in raw and "num_edges_per_chunk" not in raw
    assert raw["num_nodes_per_type"] == [200, 300] and raw["node_type"] == ["item", "user"]
    assert {"raw_id_mappings", "graph_info"} <= set(raw)
    assert raw["edge_type"] == ["user:follows:user", "user:follows-rev:user", BUYS, BUYS_REV]
    root = gsp["metadata"].parent
    assert (root / "edge_data" / f"{BUYS}-rating").is_dir()           # ':' in a folder name
    for etype, columns in ((BUYS, ["src_int_id", "dst_int_id"]), (BUYS_REV, ["dst_int_id", "src_int_id"])):
        first = root / raw["edges"][etype]["data"][0]
        assert first.name.startswith("part-00000-") and first.name.endswith("-c000.snappy.parquet")
        assert pq.read_schema(first).names == columns
    feat = pq.read_schema(root / raw["node_data"]["user"]["feat"]["data"][0]).field("feat").type
    assert pa.types.is_list(feat) and feat.value_type == pa.float32()
    rating = raw["edge_data"][BUYS]["rating"]
    assert rating["row_counts"] != raw["edges"][BUYS]["row_counts"]   # not aligned with the structure
    assert 0 in raw["node_data"]["item"]["label"]["row_counts"]       # an empty Spark part file
    assert raw["edge_data"][BUYS_REV]["rating"]["data"] == rating["data"]
    assert all(Path(f).is_file() for f in gsp["files"])


# ---------------------------------------------------------------- reading it


def test_metadata_as_gsprocessing_writes_it(gsp):
    raw, meta = raw_of(gsp), load_metadata(gsp["metadata"])
    assert meta.counted and count_rows(meta) is meta
    assert meta.node_counts == [200, 300] and meta.node_chunk_counts == ((200,), (300,))
    for e in meta.edge_types:
        assert e.chunk_counts == tuple(raw["edges"][e.name]["row_counts"]) and e.counts_key == "row_counts"
        assert e.declared_total == len(gsp["edges"][e.name][0])
    assert meta.etype(BUYS_REV).rel == "buys-rev"
    assert meta.node_count_files == {}         # raw_id_mappings are ignored when the counts are given


def test_features_and_edges_read_as_dgl_reads_them(gsp):
    """list<float> columns 2-D, scalar columns (N, 1), 1-D where the files' `shape` says so;
    feature files cut unlike the structure files read by global row ranges; edge columns by
    position (the reverse type's files name their first column dst_int_id)."""
    meta = load_metadata(gsp["metadata"])
    rng = np.random.default_rng(0)
    for group, feats in ((meta.node_data, gsp["node_feats"]), (meta.edge_data, gsp["edge_feats"])):
        for owner, named in group.items():
            for name, files in named.items():
                want = feats[(owner, name)]
                source = FeatureSource(files)
                whole = source.read(0, source.rows)
                assert whole.shape == want.shape and whole.dtype == want.dtype, (owner, name)
                np.testing.assert_array_equal(whole, want)
                for _ in range(5):    # ranges across file boundaries (and the empty file)
                    a, b = sorted(rng.integers(0, source.rows + 1, 2))
                    np.testing.assert_array_equal(source.read(a, b), want[a:b])
    for e in meta.edge_types:
        src, dst = read_all_edges(e.files)
        np.testing.assert_array_equal(src, gsp["edges"][e.name][0])
        np.testing.assert_array_equal(dst, gsp["edges"][e.name][1])


def test_counts_read_from_the_files_when_the_metadata_has_none(bare):
    meta = load_metadata(bare["metadata"])
    assert not meta.counted and all(e.chunk_counts is None for e in meta.edge_types)
    with pytest.raises(RuntimeError, match="not known yet"):
        meta.etype(BUYS).count
    counted = count_rows(meta)
    assert counted.counted and counted.node_counts == [200, 300]
    for e in counted.edge_types:
        assert sum(e.chunk_counts) == len(bare["edges"][e.name][0]) and len(e.chunk_counts) == 3
    ids = IdConverter.from_metadata(bare["metadata"])             # a path: counted from the files too
    assert ids.total_edges == sum(len(s) for s, _ in bare["edges"].values())


def test_node_counts_from_raw_id_mappings(gsp, tmp_path):
    """Without num_nodes_per_type: raw_id_mappings' row_counts (checked against the files),
    else their Parquet footers."""
    path = changed(gsp, tmp_path, lambda r: r.pop("num_nodes_per_type"))
    meta = load_metadata(path)
    assert set(meta.node_count_files) == {"item", "user"}
    assert count_rows(meta).node_counts == [200, 300]

    def no_counts(r):
        r.pop("num_nodes_per_type")
        for entry in r["raw_id_mappings"].values():
            entry.pop("row_counts")
    meta = load_metadata(changed(gsp, tmp_path, no_counts))
    assert not meta.counted and count_rows(meta).node_counts == [200, 300]

    def wrong(r):
        r.pop("num_nodes_per_type")
        r["raw_id_mappings"]["user"]["row_counts"][0] += 1
    raw = raw_of(gsp)
    with pytest.raises(InputError) as e:
        count_rows(load_metadata(changed(gsp, tmp_path, wrong)))
    assert Path(e.value.where).name == Path(raw["raw_id_mappings"]["user"]["data"][0]).name
    assert "row_counts of raw_id_mappings.user says" in e.value.problem


def test_num_edges_per_type_against_the_counted_files(bare, tmp_path):
    path = changed(bare, tmp_path, lambda r: r["num_edges_per_type"].__setitem__(2, 5))
    with pytest.raises(InputError) as e:
        count_rows(load_metadata(path))
    assert str(e.value) == f"{path}: num_edges_per_type: says 5 edges of type '{BUYS}' but its 3 files hold 900"


def test_declared_feature_row_counts_are_checked(gsp, tmp_path):
    raw = raw_of(gsp)
    path = changed(gsp, tmp_path, lambda r: r["node_data"]["user"]["feat"]["row_counts"].reverse())
    files = load_metadata(path).node_data["user"]["feat"]
    with pytest.raises(InputError) as e:
        FeatureSource(files)
    found, declared = raw["node_data"]["user"]["feat"]["row_counts"]
    assert Path(e.value.where).name == Path(raw["node_data"]["user"]["feat"]["data"][0]).name
    assert e.value.problem == f"has {found} rows but row_counts says {declared} (in {path}: node_data.user.feat)"


def test_feature_rows_differ_from_the_node_count(gsp, tmp_path):
    def drop_last_file(r):
        for key in ("data", "row_counts"):
            r["node_data"]["user"]["feat"][key].pop()
    path = changed(gsp, tmp_path, drop_last_file)
    kept = raw_of(gsp)["node_data"]["user"]["feat"]["row_counts"][0]
    with pytest.raises(InputError) as e:
        FeatureSource.expecting(load_metadata(path).node_data["user"]["feat"], 300, "node type 'user'")
    assert str(e.value) == (f"{path}: node_data.user.feat: feature has {kept} rows in its files but "
                            f"node type 'user' has 300 items")


def test_shape_metadata_must_give_the_files_rows(tmp_path):
    """DGL's reader reshapes each file to its own `shape`; one that disagrees is refused."""
    table = pa.table({"train_mask": np.ones(4, np.int8)}).replace_schema_metadata({b"shape": b"(5,)"})
    pq.write_table(table, tmp_path / "m.parquet")
    files = parse_metadata(_tiny({"m": {"format": {"name": "parquet"}, "data": ["m.parquet"]}}),
                           tmp_path / "meta.json").node_data["a"]["m"]
    with pytest.raises(InputError, match=r"'shape' metadata \(5,\) says 5 rows but the file has 4"):
        FeatureSource(files)


def test_colon_in_folder_names_relative_to_the_working_directory(tmp_path, monkeypatch):
    """pyarrow takes a path string whose first part holds ':' for a URI when it resolves a
    file system; distpart's readers open such files as plain local files."""
    folder = tmp_path / "a:r:a-f" / "parquet"
    folder.mkdir(parents=True)
    with open(folder / "part-0.parquet", "wb") as f:
        pq.write_table(pa.table({"f": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32()))}), f)
    with open(folder / "edges.parquet", "wb") as f:
        pq.write_table(pa.table({"src_int_id": [0, 1], "dst_int_id": [1, 0]}), f)
    monkeypatch.chdir(tmp_path)
    raw = _tiny({"f": {"format": {"name": "parquet"}, "data": ["a:r:a-f/parquet/part-0.parquet"]}})
    raw["edges"]["a:r:a"]["data"] = ["a:r:a-f/parquet/edges.parquet"]
    raw.pop("num_edges_per_chunk")
    meta = count_rows(parse_metadata(raw, Path("meta.json")))
    assert str(meta.node_data["a"]["f"].paths[0]) == "a:r:a-f/parquet/part-0.parquet"
    np.testing.assert_array_equal(FeatureSource(meta.node_data["a"]["f"]).read(0, 2), [[1, 2], [3, 4]])
    assert meta.etype("a:r:a").chunk_counts == (2,)
    assert [list(x) for x in read_all_edges(meta.etype("a:r:a").files)] == [[0, 1], [1, 0]]


def test_csv_edges_without_counts_are_counted_by_reading_them(tmp_path):
    (tmp_path / "e0.csv").write_text("0 1\n1 0\n1 1\n")
    (tmp_path / "e1.csv").write_text("")
    (tmp_path / "e2.csv").write_text("1 0")                 # no final newline
    raw = _tiny({})
    raw.pop("num_edges_per_chunk")
    raw["edges"]["a:r:a"] = {"format": {"name": "csv", "delimiter": " "}, "data": ["e0.csv", "e1.csv", "e2.csv"]}
    assert count_rows(parse_metadata(raw, tmp_path / "meta.json")).etype("a:r:a").chunk_counts == (3, 0, 1)
    (tmp_path / "e1.csv").write_text("0 x\n")
    with pytest.raises(InputError) as e:
        count_rows(parse_metadata(raw, tmp_path / "meta.json"))
    assert Path(e.value.where) == tmp_path / "e1.csv" and "line 1" in e.value.problem


def test_a_folder_without_metadata_json_points_to_the_file(gsp):
    with pytest.raises(InputError) as e:
        load_metadata(gsp["metadata"].parent)
    assert e.value.where == str(gsp["metadata"].parent / "metadata.json")
    assert e.value.problem.startswith("file does not exist; a metadata file of another name")
    assert "is given by its path" in e.value.problem


def test_id_converter_from_a_gsprocessing_metadata_object(gsp):
    raw = raw_of(gsp)
    ids = IdConverter.from_metadata(raw)
    assert list(ids.num_nodes) == [200, 300]
    assert list(ids.num_edges) == [1200, 1200, 900, 900]
    raw.pop("num_edges_per_type")                         # then the edges' row_counts
    assert list(IdConverter.from_metadata(raw).num_edges) == [1200, 1200, 900, 900]
    for e in raw["edges"].values():
        e.pop("row_counts")
    with pytest.raises(ValueError, match="neither 'num_edges_per_chunk' nor 'num_edges_per_type'"):
        IdConverter.from_metadata(raw)


# ---------------------------------------------------------------- the dialect's refusals


def _tiny(features: Dict[str, Any]) -> Dict[str, Any]:
    """One node type 'a' of 2 nodes (num_nodes_per_type), one edge type of 2 edges."""
    return {"graph_name": "g", "node_type": ["a"], "num_nodes_per_type": [2], "edge_type": ["a:r:a"],
            "num_edges_per_chunk": [[2]],
            "edges": {"a:r:a": {"format": {"name": "parquet", "delimiter": ""}, "data": ["e.parquet"]}},
            "node_data": {"a": features} if features else {}}


@pytest.mark.parametrize("change, key, problem", [
    (lambda r: r.update(num_nodes_per_chunk=[[1, 2]]), "num_nodes_per_type",
     "says 2 nodes of type 'a' but num_nodes_per_chunk adds up to 3"),
    (lambda r: r.update(num_nodes_per_type=[2, 3]), "num_nodes_per_type", "has 2 entries but there are 1 types"),
    (lambda r: r.update(num_nodes_per_type=[-1]), "num_nodes_per_type", "non-negative integer, found -1"),
    (lambda r: r.update(num_nodes_per_type=[True]), "num_nodes_per_type", "non-negative integer, found True"),
    (lambda r: r.update(num_nodes_per_type=2), "num_nodes_per_type", "must be a list"),
    (lambda r: r.update(num_edges_per_type=[3]), "num_edges_per_type",
     "says 3 edges of type 'a:r:a' but num_edges_per_chunk adds up to 2"),
    (lambda r: r["edges"]["a:r:a"].update(row_counts=[1]), "edges.a:r:a.row_counts",
     "[1] disagrees with num_edges_per_chunk's [2]"),
    (lambda r: r["edges"]["a:r:a"].update(row_counts=[1, 1]), "edges.a:r:a.row_counts",
     "has 2 entries but data names 1 files"),
    (lambda r: r["edges"]["a:r:a"].update(row_counts=[-2]), "edges.a:r:a.row_counts", "non-negative integers"),
    (lambda r: r["edges"]["a:r:a"].update(row_counts="2"), "edges.a:r:a.row_counts", "non-negative integers"),
    (lambda r: (r.pop("num_edges_per_chunk"), r["edges"]["a:r:a"].update(row_counts=[3]),
                r.update(num_edges_per_type=[2])), "num_edges_per_type",
     "says 2 edges of type 'a:r:a' but row_counts adds up to 3"),
    (lambda r: r.pop("num_nodes_per_type"), "num_nodes_per_chunk",
     "missing key: node counts come from num_nodes_per_chunk (DGL's guide), num_nodes_per_type"),
    (lambda r: (r.pop("num_nodes_per_type"), r.update(raw_id_mappings={})), "raw_id_mappings",
     "no entry for node type 'a'"),
    (lambda r: (r.pop("num_nodes_per_type"),
                r.update(raw_id_mappings={"a": {"format": {"name": "csv"}, "data": ["a.csv"]}})),
     "raw_id_mappings.a.format.name", "unknown format 'csv'; expected one of parquet"),
])
def test_dialect_refusals_name_the_key(tmp_path, change, key, problem):
    raw = _tiny({})
    change(raw)
    with pytest.raises(InputError) as e:
        parse_metadata(raw, tmp_path / "meta.json")
    assert e.value.where == f"{tmp_path / 'meta.json'}: {key}"
    assert problem in e.value.problem


def test_extra_keys_are_ignored(tmp_path):
    raw = _tiny({})
    raw.update(raw_id_mappings={"a": "anything"}, graph_info={"task_type": "x"}, version="1")
    raw["edges"]["a:r:a"]["row_counts"] = [2]
    meta = parse_metadata(raw, tmp_path / "meta.json")
    assert meta.node_counts == [2] and meta.etype("a:r:a").chunk_counts == (2,)
