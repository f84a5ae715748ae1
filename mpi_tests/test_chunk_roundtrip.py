"""Round trips through `distpart chunk`: chunk, pipeline (MPI), load gives back the original graph.

For each of chunk's three inputs (an in-memory description, OGB's raw layout, one large
edge list per relation) a graph is written, partitioned by `distpart pipeline` on 2 ranks,
and rebuilt from the partitions with the public loader alone (`restore_graph`): the same
nodes, the same edges in the same edge-ID order, the same features. One output is also
loaded by real DGL (skipped, as the other DGL tests, when no DGL Python is found).
"""
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
import pytest

from conftest import distpart, mpi_env, run_bounded
from distpart import load_orig_ids, load_partition
from distpart.chunked.write import describe_graph, write_graph
from distpart.synthetic import read_whole_graph
from reference import storable

REPO = Path(__file__).resolve().parents[1]
DUMP = Path(__file__).parent / "drivers" / "dgl_dump.py"


def restore_graph(out_dir: Path) -> Dict[str, Any]:
    """The original graph, rebuilt from a partition output through distpart's loader only:
    {"num_nodes": {ntype: n}, "edges": {etype: (src, dst)}, "node_feats": {(ntype, name): a},
    "edge_feats": {(etype, name): a}} in original IDs (edges in original edge-ID order)."""
    config_path = Path(out_dir) / "metadata.json"
    config = json.loads(config_path.read_text())
    num_parts = config["num_parts"]
    ntypes = sorted(config["ntypes"], key=config["ntypes"].get)
    etypes = sorted(config["etypes"], key=config["etypes"].get)
    parts = [load_partition(str(config_path), p) for p in range(num_parts)]
    ids = [load_orig_ids(str(config_path), p) for p in range(num_parts)]
    empty = np.empty(0, np.int64)
    # New per-type IDs run over the partitions in order: orig IDs concatenated are the maps.
    orig_nid = {t: np.concatenate([i[0].get(t, empty) for i in ids]) for t in ntypes}
    orig_eid = {e: np.concatenate([i[1].get(e, empty) for i in ids]) for e in etypes}

    def restored(shuffled: np.ndarray, orig: np.ndarray) -> np.ndarray:
        out = np.empty_like(shuffled)
        out[orig] = shuffled
        return out

    node_feats, edge_feats = {}, {}
    for key in parts[0][1]:
        t, name = key.split("/", 1)
        node_feats[(t, name)] = restored(np.concatenate([p[1][key] for p in parts]), orig_nid[t])
    for key in parts[0][2]:
        e, name = key.split("/", 1)
        edge_feats[(e, name)] = restored(np.concatenate([p[2][key] for p in parts]), orig_eid[e])
    edges = {e: (np.full(len(orig_eid[e]), -1, np.int64), np.full(len(orig_eid[e]), -1, np.int64)) for e in etypes}
    for g, _, _, gpb, _, _, _ in parts:
        nid = g.ndata["_ID"]
        src_t, src_new = gpb.map_to_per_ntype(nid[g.src])
        dst_t, dst_new = gpb.map_to_per_ntype(nid[g.dst])
        e_t, e_new = gpb.map_to_per_etype(g.edata["_ID"])
        for ei, e in enumerate(etypes):
            sel = e_t == ei
            s, _, d = e.split(":")
            assert (src_t[sel] == ntypes.index(s)).all() and (dst_t[sel] == ntypes.index(d)).all()
            orig = orig_eid[e][e_new[sel]]
            assert (edges[e][0][orig] == -1).all(), f"an edge of {e} is stored twice"
            edges[e][0][orig] = orig_nid[s][src_new[sel]]
            edges[e][1][orig] = orig_nid[d][dst_new[sel]]
    for e in etypes:
        assert (edges[e][0] >= 0).all(), f"an edge of {e} is missing"
    return {"num_nodes": {t: len(orig_nid[t]) for t in ntypes}, "edges": edges,
            "node_feats": node_feats, "edge_feats": edge_feats}


def assert_restores(out_dir: Path, graph: Any) -> None:
    """The partitions in `out_dir` hold exactly `graph` (a description; see chunk.describe_graph)."""
    want = describe_graph(graph)
    got = restore_graph(out_dir)
    assert got["num_nodes"] == want.num_nodes
    assert set(got["edges"]) == set(want.edges)
    for e, (src, dst) in want.edges.items():
        np.testing.assert_array_equal(got["edges"][e][0], src)
        np.testing.assert_array_equal(got["edges"][e][1], dst)
    want_nf = {(t, n): v for t, f in want.node_data.items() for n, v in f.items()}
    want_ef = {(e, n): v for e, f in want.edge_data.items() for n, v in f.items()}
    assert set(got["node_feats"]) == set(want_nf) and set(got["edge_feats"]) == set(want_ef)
    for ours, theirs in ((got["node_feats"], want_nf), (got["edge_feats"], want_ef)):
        for key, values in theirs.items():
            np.testing.assert_array_equal(ours[key], storable(values), err_msg=str(key))
            assert ours[key].dtype == storable(values).dtype


def shop_graph(seed: int = 0) -> Dict[str, Any]:
    """A heterogeneous graph: a relation with edge features, one without edge data, an edge
    type without edges, features of several dtypes (bool is widened on output)."""
    rng = np.random.default_rng(seed)
    nu, ni, ns = 400, 250, 6
    return {
        "num_nodes": {"user": nu, "item": ni, "shop": ns},
        "edges": {
            ("user", "buys", "item"): (rng.integers(0, nu, 1800), rng.integers(0, ni, 1800)),
            ("user", "follows", "user"): (rng.integers(0, nu, 1200), rng.integers(0, nu, 1200)),
            ("item", "sold_by", "shop"): (np.arange(ni), np.arange(ni) % ns),   # item i: shop i % ns
            ("shop", "closed", "shop"): (np.empty(0, np.int64), np.empty(0, np.int64)),
        },
        "node_data": {"user": {"feat": rng.random((nu, 4)).astype(np.float32),
                               "train_mask": rng.random(nu) < 0.25},
                      "item": {"price": rng.random(ni), "stock": rng.integers(0, 100, ni).astype(np.int32)}},
        "edge_data": {("user", "buys", "item"): {"qty": rng.integers(1, 9, 1800).astype(np.int16),
                                                 "w": rng.random((1800, 2))}},
    }


def dgl_dump(python: str, out_dir: Path, dump_dir: Path) -> Dict[int, Any]:
    """What real DGL's load_partition reads from each partition (mpi_tests/drivers/dgl_dump.py)."""
    run = subprocess.run([python, str(DUMP), str(out_dir / "metadata.json"), str(dump_dir)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    num_parts = json.loads((out_dir / "metadata.json").read_text())["num_parts"]
    return {p: np.load(dump_dir / f"part{p}.npz") for p in range(num_parts)}


def chunk_cli(*argv: Any) -> str:
    """`distpart chunk ...` as a user runs it (serial: no launcher)."""
    run = run_bounded([sys.executable, "-m", "distpart", "chunk", *map(str, argv)], mpi_env(), timeout=120,
                      cwd=REPO)
    assert run.returncode == 0, run.output
    return run.output


# ----------------------------------------------------------------------------- (a) in memory


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_in_memory_graph_chunk_pipeline_load(tmp_path: Path, fmt: str) -> None:
    graph = shop_graph()
    write_graph(graph, tmp_path / "in", num_chunks=3, edge_format=fmt, graph_name="shop")
    distpart(2, "pipeline", tmp_path / "in", tmp_path / "out", "--num-parts", 4)
    assert_restores(tmp_path / "out", graph)


def test_in_memory_graph_loads_in_dgl(dgl_python: str, tmp_path: Path) -> None:
    graph = shop_graph(1)
    write_graph(graph, tmp_path / "in", num_chunks=2, edge_format="numpy", graph_name="shop")
    distpart(2, "pipeline", tmp_path / "in", tmp_path / "out", "--num-parts", 2, "--method", "random")
    dumps = dgl_dump(dgl_python, tmp_path / "out", tmp_path / "dump")
    desc = describe_graph(graph)
    config = str(tmp_path / "out" / "metadata.json")
    for p, theirs in dumps.items():
        orig_nids, orig_eids = load_orig_ids(config, p)
        # What DGL loads is the original rows of the partition's own nodes and edges.
        for t, feats in desc.node_data.items():
            for name, values in feats.items():
                np.testing.assert_array_equal(theirs[f"nfeat:{t}/{name}"], storable(values[orig_nids[t]]))
        for e, feats in desc.edge_data.items():
            for name, values in feats.items():
                np.testing.assert_array_equal(theirs[f"efeat:{e}/{name}"], storable(values[orig_eids[e]]))
        assert list(theirs["meta:ntypes"]) == list(desc.num_nodes)
        assert list(theirs["meta:etypes"]) == list(desc.edges)


# ----------------------------------------------------------------------------- (b) OGB


def test_ogb_layout_chunk_pipeline_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    na, npap, ni = 120, 200, 7
    edges = {"author:affiliated_with:institution": (rng.integers(0, na, 90), rng.integers(0, ni, 90)),
             "author:writes:paper": (rng.integers(0, na, 500), rng.integers(0, npap, 500)),
             "paper:cites:paper": (rng.integers(0, npap, 700), rng.integers(0, npap, 700))}
    paper = {"feat": rng.random((npap, 8)).astype(np.float16), "label": rng.integers(0, 5, npap),
             "year": rng.integers(2000, 2020, npap)}
    processed = tmp_path / "mag240m_kddcup2021" / "processed"
    for e, (src, dst) in edges.items():
        (processed / e.replace(":", "___")).mkdir(parents=True)
        np.save(processed / e.replace(":", "___") / "edge_index.npy", np.stack([src, dst]))
    (processed / "paper").mkdir()
    for name, values in paper.items():
        np.save(processed / "paper" / f"node_{name}.npy", values)
    chunk_cli(tmp_path / "in", "--ogb", tmp_path / "mag240m_kddcup2021", "--num-nodes", f"author={na}",
              "--num-nodes", f"institution={ni}", "--num-chunks", 3)
    meta = json.loads((tmp_path / "in" / "metadata.json").read_text())
    assert meta["graph_name"] == "mag240m_kddcup2021"
    distpart(2, "pipeline", tmp_path / "in", tmp_path / "out", "--num-parts", 2, "--method", "random")
    assert_restores(tmp_path / "out", {"num_nodes": {"author": na, "institution": ni, "paper": npap},
                                       "edges": edges, "node_data": {"paper": paper}})


# ----------------------------------------------------------------------------- (c) edge lists


def test_edge_lists_chunk_pipeline_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    nu, ni = 300, 90
    follows = (rng.integers(0, nu, 1500), rng.integers(0, nu, 1500))
    rates = (rng.integers(0, nu, 800), rng.integers(0, ni, 800))
    stars, when = rng.integers(1, 6, 800), rng.random(800)
    user_feat = rng.random((nu, 3)).astype(np.float32)
    # A CSV without header and without edge data; a Parquet file whose extra columns are edge data.
    pacsv.write_csv(pa.table({"s": follows[0], "d": follows[1]}), tmp_path / "follows.csv",
                    pacsv.WriteOptions(include_header=False))
    pq.write_table(pa.table({"src": rates[0], "dst": rates[1], "stars": stars, "when": when}),
                   tmp_path / "rates.parquet", row_group_size=100)
    np.save(tmp_path / "user_feat.npy", user_feat)
    chunk_cli(tmp_path / "in", "--edges", f"user:follows:user={tmp_path / 'follows.csv'}",
              "--edges", f"user:rates:item={tmp_path / 'rates.parquet'}", "--num-nodes", f"item={ni}",
              "--node-feat", f"user/feat={tmp_path / 'user_feat.npy'}", "--edge-format", "numpy")
    distpart(2, "pipeline", tmp_path / "in", tmp_path / "out", "--num-parts", 4)
    assert_restores(tmp_path / "out", {"num_nodes": {"user": nu, "item": ni},
                                       "edges": {"user:follows:user": follows, "user:rates:item": rates},
                                       "node_data": {"user": {"feat": user_feat}},
                                       "edge_data": {"user:rates:item": {"stars": stars, "when": when}}})


def test_one_edge_list_one_edge_type(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 500, 3000), rng.integers(0, 500, 3000)
    weight = rng.random(3000)
    lines = "\n".join(f"{s}\t{d}\t{float(w)!r}" for s, d, w in zip(src, dst, weight)) + "\n"
    (tmp_path / "edges.tsv").write_text("src\tdst\tweight\n" + lines)
    chunk_cli(tmp_path / "in", "--edges", f"node:links:node={tmp_path / 'edges.tsv'}", "--delimiter", "\t",
              "--header", "--num-nodes", "node=500", "--num-chunks", 5)
    # The chunked copy reads back exactly, as the reference reader sees it.
    ref = read_whole_graph(tmp_path / "in" / "metadata.json")
    np.testing.assert_array_equal(ref["edge_feats"][("node:links:node", "weight")], weight)
    distpart(2, "pipeline", tmp_path / "in", tmp_path / "out", "--num-parts", 2)
    assert_restores(tmp_path / "out", {"num_nodes": {"node": 500}, "edges": {"node:links:node": (src, dst)},
                                       "edge_data": {"node:links:node": {"weight": weight}}})
