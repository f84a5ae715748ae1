"""distpart.partitions.loader on a small hand-built 2-partition heterogeneous output.

`build_partitions` writes that output with distpart's own writers, following
shared/spec/dgl-partition-format.md; test_dgl_interop.py loads the same output in DGL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distpart import load_orig_ids, load_partition, load_partition_book, load_partition_feats
from distpart.errors import OutputError
from graphs import ETYPES, NODE_COUNTS, NTYPES, NUM_PARTS, SourceGraph, build_partitions, make_source_graph

@pytest.fixture
def source() -> SourceGraph:
    return make_source_graph()


@pytest.fixture
def config(tmp_path: Path, source: SourceGraph) -> Path:
    return build_partitions(tmp_path / "out", source)


def test_load_partition_structure(config: Path) -> None:
    for p in range(NUM_PARTS):
        graph, node_feats, edge_feats, gpb, name, ntypes, etypes = load_partition(config, p)
        assert (name, ntypes) == ("toy", NTYPES)
        assert etypes == [tuple(e.split(":")) for e in ETYPES]   # DGL 2.x returns tuples
        assert gpb.partid == p and gpb.num_partitions() == NUM_PARTS
        nid, inner = graph.ndata["_ID"], graph.ndata["inner_node"].astype(bool)
        assert (
            graph.ndata["_TYPE"].dtype == np.int32 and graph.ndata["inner_node"].dtype == np.uint8
        )
        # Inner nodes first, ascending, exactly the partition's range; halos owned elsewhere.
        np.testing.assert_array_equal(nid[inner], gpb.partid2nids(p))
        assert not inner[inner.sum() :].any()
        assert (gpb.nid2partid(nid[~inner]) != p).all()
        type_ids, _ = gpb.map_to_per_ntype(nid)
        np.testing.assert_array_equal(type_ids, graph.ndata["_TYPE"])
        # Every edge is an in-edge of an own node, in new edge-ID order.
        assert inner[graph.dst].all()
        np.testing.assert_array_equal(graph.edata["_ID"], gpb.partid2eids(p))
        np.testing.assert_array_equal(
            gpb.map_to_per_etype(graph.edata["_ID"])[0], graph.edata["_TYPE"]
        )
        assert set(node_feats) == {
            "author/feat",
            "paper/label",
            "paper/train_mask",
            "paper/emb",
            "venue/year",
        }
        assert node_feats["paper/train_mask"].dtype == np.uint8
        assert edge_feats["paper:cites:paper/count"].dtype == np.int32  # widened uint16


def test_features_and_orig_ids_match_source(config: Path, source: SourceGraph) -> None:
    for p in range(NUM_PARTS):
        orig_nids, orig_eids = load_orig_ids(config, p)
        node_feats, edge_feats = load_partition_feats(config, p)
        assert node_feats is not None and edge_feats is not None
        for key, full in {**source.node_feats, **source.edge_feats}.items():
            kind_type = key.rsplit("/", 1)[0]
            rows = orig_nids[kind_type] if key in source.node_feats else orig_eids[kind_type]
            feats = node_feats if key in source.node_feats else edge_feats
            np.testing.assert_array_equal(feats[key], full[rows])
    for ntype, n in NODE_COUNTS.items():
        ids = np.concatenate([load_orig_ids(config, p)[0][ntype] for p in range(NUM_PARTS)])
        np.testing.assert_array_equal(np.sort(ids), np.arange(n))


def test_edges_map_back_to_original_edges(config: Path, source: SourceGraph) -> None:
    """Local edges -> new global IDs -> original (type, ID): the original edge list."""
    orig_of_new = np.empty(sum(NODE_COUNTS.values()), np.int64)
    for p in range(NUM_PARTS):
        gpb = load_partition_book(config, p)[0]
        orig_nids = load_orig_ids(config, p)[0]
        for ntype in NTYPES:
            new = gpb.map_to_homo_nid(gpb.partid2nids(p, ntype), ntype)
            orig_of_new[new] = orig_nids[ntype]
    for p in range(NUM_PARTS):
        graph, _, _, gpb, *_ = load_partition(config, p, load_feats=False)
        orig_eids = load_orig_ids(config, p)[1]
        etype_ids, _ = gpb.map_to_per_etype(graph.edata["_ID"])
        for t, etype in enumerate(ETYPES):
            mine = etype_ids == t
            src = orig_of_new[graph.ndata["_ID"][graph.src[mine]]]
            dst = orig_of_new[graph.ndata["_ID"][graph.dst[mine]]]
            want_src, want_dst = source.edges[etype]
            np.testing.assert_array_equal(src, want_src[orig_eids[etype]])
            np.testing.assert_array_equal(dst, want_dst[orig_eids[etype]])


def test_load_partition_book_and_flags(config: Path) -> None:
    gpb, name, ntypes, etypes = load_partition_book(config, 1)
    assert name == "toy" and gpb.partid == 1
    assert ntypes == {t: i for i, t in enumerate(NTYPES)}
    assert etypes == {tuple(t.split(":")): i for i, t in enumerate(ETYPES)}
    graph, node_feats, edge_feats, *_ = load_partition(config, 0, load_feats=False)
    assert node_feats == {} and edge_feats == {} and graph.num_edges > 0
    node_feats, edge_feats = load_partition_feats(config, 0, load_nodes=False)
    assert node_feats is None and edge_feats is not None
    node_feats, edge_feats = load_partition_feats(config, 0, load_edges=False)
    assert node_feats is not None and edge_feats is None


def test_absolute_paths_in_config(config: Path, tmp_path: Path) -> None:
    cfg = json.loads(config.read_text())
    for p in range(NUM_PARTS):
        cfg[f"part-{p}"] = {k: str(config.parent / v) for k, v in cfg[f"part-{p}"].items()}
    moved = tmp_path / "elsewhere" / "config.json"
    moved.parent.mkdir()
    moved.write_text(json.dumps(cfg))
    graph = load_partition(moved, 1)[0]
    assert graph.num_nodes == load_partition(config, 1)[0].num_nodes
    assert set(load_orig_ids(moved, 1)[0]) == set(NTYPES)


def test_missing_files_name_the_file(config: Path) -> None:
    (config.parent / "part1" / "edge_feat.dgl").unlink()
    with pytest.raises(OutputError, match="part1/edge_feat.dgl: cannot open"):
        load_partition(config, 1)
    (config.parent / "part0" / "orig_eids.dgl").unlink()
    with pytest.raises(OutputError, match="part0/orig_eids.dgl"):
        load_orig_ids(config, 0)
    with pytest.raises(OutputError, match="nope.json: file does not exist"):
        load_partition_book(config.parent / "nope.json", 0)


def test_bad_configs(config: Path) -> None:
    cfg = json.loads(config.read_text())
    broken = config.parent / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(OutputError, match="broken.json: malformed JSON at line 1"):
        load_partition(broken, 0)
    del cfg["part-1"]["node_feats"]
    broken.write_text(json.dumps(cfg))
    with pytest.raises(OutputError, match=r"broken.json: part-1: no 'node_feats' file"):
        load_partition_feats(broken, 1)
    with pytest.raises(OutputError, match=r"broken.json: part-5: no such partition"):
        load_partition(broken, 5)
    del cfg["graph_name"]
    broken.write_text(json.dumps(cfg))
    with pytest.raises(OutputError, match="broken.json: graph_name"):
        load_partition_book(broken, 0)


def test_import_pulls_in_no_heavy_modules() -> None:
    code = (
        "import sys, distpart, distpart.partitions.loader\n"
        "distpart.load_partition\n"
        "bad = {'torch', 'mpi4py', 'pyarrow'} & set(sys.modules)\n"
        "assert not bad, bad\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_unknown_attribute() -> None:
    import distpart

    with pytest.raises(AttributeError):
        distpart.no_such_thing  # noqa: B018
