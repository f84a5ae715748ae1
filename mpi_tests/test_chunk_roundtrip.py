"""Round trips through `distpart chunk`: chunk, pipeline (MPI), load gives back the original graph.

For each of chunk's three inputs (an in-memory description, OGB's raw layout, one large
edge list per relation) a graph is written, partitioned by `distpart pipeline` on 2 ranks,
and rebuilt from the partitions with the public loader alone (`restore_graph`): the same
nodes, the same edges in the same edge-ID order, the same features. One output is also
loaded by real DGL (skipped, as the other DGL tests, when no DGL Python is found).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from graphs import shop_graph
from harness import distpart, mpi_env, run_bounded
from distpart import load_orig_ids
from distpart.chunked.write import describe_graph, write_graph
from distpart.synthetic import read_whole_graph
from reference import assert_restores, dgl_dump, storable

REPO = Path(__file__).resolve().parents[1]


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
