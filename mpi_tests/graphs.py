"""The graphs the tests build, in one place: DGL-style in-memory descriptions (`shop_graph`,
`GRAPHS`), grids as edge lists, a one-rank `LevelGraph`, the cut and block weights of a
partition counted directly from the edges (the tests' independent reference), a small
partitioned graph written file by file (`build_partitions`) and partition-book configs.

Imports no pytest: the MPI worker scripts import it too.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from distpart.partitions.dglformat import write_graph, write_tensor_dict
from distpart.partitions.partbook import ranges_from_counts


def grid_edges(nx: int, ny: int) -> np.ndarray:
    """The undirected edges (m, 2) of an nx x ny grid, vertex y * nx + x: rows, then columns."""
    ids = np.arange(nx * ny).reshape(ny, nx)
    return np.concatenate([np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], 1),
                           np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], 1)])


def cut_of(edges: np.ndarray, parts: np.ndarray, w: Optional[np.ndarray] = None) -> int:
    """The edges (or their weights w) of an undirected edge list whose ends lie in two blocks."""
    cut = parts[edges[:, 0]] != parts[edges[:, 1]]
    return int(cut.sum() if w is None else np.asarray(w)[cut].sum())


def csr_cut(xadj: np.ndarray, adjncy: np.ndarray, parts: np.ndarray, adjwgt: Optional[np.ndarray] = None) -> int:
    """cut_of for a symmetric CSR graph (every edge stored both ways, adjwgt per stored arc)."""
    rows = np.repeat(np.arange(len(xadj) - 1), np.diff(xadj))
    return cut_of(np.stack([rows, adjncy], 1), parts, adjwgt) // 2


def weights_of(parts: np.ndarray, vwgt: np.ndarray, k: int) -> np.ndarray:
    """(k, ncon): each block's weight in each constraint."""
    return np.stack([np.bincount(parts, weights=vwgt[:, c], minlength=k) for c in range(vwgt.shape[1])], 1)


def level_graph(n: int, edges: Any, vwgt: Any = None, adjwgt: Any = None) -> Tuple[Any, Any]:
    """(LevelGraph, Halo) of an undirected edge list (weights per edge) on one rank (COMM_SELF)."""
    from mpi4py import MPI

    from distpart.assign.multilevel.graph import Halo, LevelGraph
    comm = MPI.COMM_SELF
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    w = np.ones(len(edges), dtype=np.int64) if adjwgt is None else np.asarray(adjwgt, dtype=np.int64)
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    ww = np.concatenate([w, w])
    order = np.lexsort((dst, src))
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=xadj[1:])
    vwgt = np.ones((n, 1), dtype=np.int64) if vwgt is None else np.asarray(vwgt, dtype=np.int64)
    g = LevelGraph(np.array([0, n], dtype=np.int64), xadj, dst[order], ww[order], vwgt).with_totals(comm)
    return g, Halo.build(comm, g)


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


def homogeneous_graph() -> Dict[str, Any]:
    rng = np.random.default_rng(11)
    n, m = 600, 4000
    return {"num_nodes": n, "edges": (rng.integers(0, n, m), rng.integers(0, n, m)),
            "node_data": {"feat": rng.random((n, 3)).astype(np.float32), "train_mask": rng.random(n) < 0.3},
            "edge_data": {"_N:_E:_N": {"w": rng.random(m)}}}


GRAPHS = {"shop": shop_graph, "homo": homogeneous_graph}   # by name, for a user's script (test_partition_graph.py)


# ---------------------------------------------------------------- partitions written by hand

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
    def new_ids(owner: np.ndarray, ranges: List[List[int]]) -> np.ndarray:
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


def make_config(
    node_counts: np.ndarray, edge_counts: np.ndarray, ntypes: List[str], etypes: List[str]
) -> Dict[str, Any]:
    return {
        "graph_name": "g",
        "num_parts": len(node_counts),
        "num_nodes": int(node_counts.sum()),
        "num_edges": int(edge_counts.sum()),
        "ntypes": {t: i for i, t in enumerate(ntypes)},
        "etypes": {t: i for i, t in enumerate(etypes)},
        "node_map": ranges_from_counts(node_counts, ntypes),
        "edge_map": ranges_from_counts(edge_counts, etypes),
    }


def random_config(seed: int) -> Dict[str, Any]:
    """A random heterogeneous config with many empty (partition, type) ranges."""
    rng = np.random.default_rng(seed)
    num_parts = int(rng.integers(1, 6))
    ntypes = [f"n{i}" for i in range(int(rng.integers(1, 4)))]
    etypes = [
        f"{rng.choice(ntypes)}:r{i}:{rng.choice(ntypes)}" for i in range(int(rng.integers(1, 4)))
    ]

    def counts(num_types: int) -> np.ndarray:
        c = rng.integers(0, 6, (num_parts, num_types)) * (rng.random((num_parts, num_types)) < 0.7)
        if num_parts > 1:
            c[rng.integers(num_parts)] = 0  # one partition owns nothing of this kind
        return c

    return make_config(counts(len(ntypes)), counts(len(etypes)), ntypes, etypes)
