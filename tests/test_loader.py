"""distpart.partitions.loader on a small hand-built 2-partition heterogeneous output.

`build_partitions` writes that output with distpart's own writers, following
shared/spec/dgl-partition-format.md; test_dgl_interop.py loads the same output in DGL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from distpart import load_orig_ids, load_partition, load_partition_book, load_partition_feats
from distpart.partitions.dglformat import write_graph, write_tensor_dict
from distpart.errors import OutputError
from distpart.partitions.partbook import ranges_from_counts

NUM_PARTS = 2
NTYPES = ["author", "paper", "venue"]
ETYPES = ["author:writes:paper", "paper:cites:paper", "paper:published_in:venue"]
NODE_COUNTS = {"author": 6, "paper": 9, "venue": 1}  # venue: fewer nodes than partitions
EDGE_COUNTS = {"author:writes:paper": 10, "paper:cites:paper": 12, "paper:published_in:venue": 5}


@dataclass
class SourceGraph:
    """The original graph: per-type edges, node assignment, features (original IDs)."""

    edges: dict[str, tuple[np.ndarray, np.ndarray]]
    assign: dict[str, np.ndarray]
    node_feats: dict[str, np.ndarray]
    edge_feats: dict[str, np.ndarray]


def make_source_graph(seed: int = 0) -> SourceGraph:
    rng = np.random.default_rng(seed)
    edges = {}
    for etype, m in EDGE_COUNTS.items():
        src_type, _, dst_type = etype.split(":")
        edges[etype] = (
            rng.integers(0, NODE_COUNTS[src_type], m),
            rng.integers(0, NODE_COUNTS[dst_type], m),
        )
    assign = {ntype: rng.integers(0, NUM_PARTS, n) for ntype, n in NODE_COUNTS.items()}
    assign["author"][:2] = [0, 1]  # both partitions own authors and papers
    assign["paper"][:2] = [0, 1]
    node_feats = {
        "author/feat": rng.standard_normal((6, 4)).astype(np.float32),
        "paper/label": rng.integers(0, 5, 9),
        "paper/train_mask": rng.random(9) < 0.5,
        "paper/emb": rng.standard_normal((9, 2, 3)).astype(np.float16),
        "venue/year": np.array([2020], dtype=np.int16),
    }
    edge_feats = {
        "author:writes:paper/weight": rng.standard_normal(10),
        "paper:cites:paper/flag": rng.random(12) < 0.5,
        "paper:cites:paper/count": rng.integers(0, 100, 12).astype(np.uint16),
    }
    return SourceGraph(edges, assign, node_feats, edge_feats)


def to_local(local_nodes: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Positions of global node IDs `ids` in the partition's node order `local_nodes`."""
    order = np.argsort(local_nodes)
    return order[np.searchsorted(local_nodes[order], ids)]


def build_partitions(out: Path, source: SourceGraph) -> Path:
    """Partition `source` into `out` (edges owned by their destination's partition)."""
    node_counts = np.array(
        [[np.sum(source.assign[t] == p) for t in NTYPES] for p in range(NUM_PARTS)]
    )
    node_map = ranges_from_counts(node_counts, NTYPES)
    edge_owner = {et: source.assign[et.split(":")[2]][dst] for et, (_, dst) in source.edges.items()}
    edge_counts = np.array(
        [[np.sum(edge_owner[et] == p) for et in ETYPES] for p in range(NUM_PARTS)]
    )
    edge_map = ranges_from_counts(edge_counts, ETYPES)

    # New IDs: partition by partition, type by type, ascending original ID inside.
    def new_ids(owner: np.ndarray, ranges: list[list[int]]) -> np.ndarray:
        ids = np.empty(len(owner), np.int64)
        for p in range(NUM_PARTS):
            members = np.flatnonzero(owner == p)
            ids[members] = ranges[p][0] + np.arange(len(members))
        return ids

    new_nid = {t: new_ids(source.assign[t], node_map[t]) for t in NTYPES}
    num_nodes = int(node_counts.sum())
    node_type = np.empty(num_nodes, np.int32)
    for t, ntype in enumerate(NTYPES):
        node_type[new_nid[ntype]] = t

    # All edges in new-ID order: global src/dst, type.
    num_edges = int(edge_counts.sum())
    g_src, g_dst = np.empty(num_edges, np.int64), np.empty(num_edges, np.int64)
    edge_type = np.empty(num_edges, np.int32)
    for t, etype in enumerate(ETYPES):
        src_type, _, dst_type = etype.split(":")
        eids = new_ids(edge_owner[etype], edge_map[etype])
        g_src[eids] = new_nid[src_type][source.edges[etype][0]]
        g_dst[eids] = new_nid[dst_type][source.edges[etype][1]]
        edge_type[eids] = t

    cfg = {
        "graph_name": "toy",
        "part_method": "random",
        "num_parts": NUM_PARTS,
        "halo_hops": 1,
        "num_nodes": num_nodes,
        "num_edges": num_edges,
        "ntypes": {t: i for i, t in enumerate(NTYPES)},
        "etypes": {t: i for i, t in enumerate(ETYPES)},
        "node_map": node_map,
        "edge_map": edge_map,
    }
    for p in range(NUM_PARTS):
        folder = out / f"part{p}"
        folder.mkdir(parents=True)
        inner = np.arange(node_map[NTYPES[0]][p][0], node_map[NTYPES[-1]][p][1])
        own_edges = np.arange(edge_map[ETYPES[0]][p][0], edge_map[ETYPES[-1]][p][1])
        halo = np.setdiff1d(g_src[own_edges], inner)
        local_nodes = np.concatenate([inner, halo])

        ndata = {
            "_ID": local_nodes,
            "_TYPE": node_type[local_nodes],
            "inner_node": (np.arange(len(local_nodes)) < len(inner)).astype(np.uint8),
        }
        edata = {
            "_ID": own_edges,
            "_TYPE": edge_type[own_edges],
            "inner_edge": np.ones(len(own_edges), np.uint8),
        }
        write_graph(
            folder / "graph.dgl",
            len(local_nodes),
            to_local(local_nodes, g_src[own_edges]),
            to_local(local_nodes, g_dst[own_edges]),
            ndata,
            edata,
        )
        orig_nids = {t: np.flatnonzero(source.assign[t] == p) for t in NTYPES}
        orig_eids = {et: np.flatnonzero(edge_owner[et] == p) for et in ETYPES}
        write_tensor_dict(
            folder / "node_feat.dgl",
            {k: v[orig_nids[k.split("/")[0]]] for k, v in source.node_feats.items()},
        )
        write_tensor_dict(
            folder / "edge_feat.dgl",
            {k: v[orig_eids[k.split("/")[0]]] for k, v in source.edge_feats.items()},
        )
        write_tensor_dict(folder / "orig_nids.dgl", orig_nids)
        write_tensor_dict(folder / "orig_eids.dgl", orig_eids)
        cfg[f"part-{p}"] = {
            "node_feats": f"part{p}/node_feat.dgl",
            "edge_feats": f"part{p}/edge_feat.dgl",
            "part_graph": f"part{p}/graph.dgl",
        }
    config = out / "metadata.json"
    config.write_text(json.dumps(cfg, indent=1))
    return config


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
