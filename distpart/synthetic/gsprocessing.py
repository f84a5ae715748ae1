"""A small graph in the chunked layout GraphStorm's Spark preprocessing (GSProcessing) writes.

GSProcessing (graphstorm-processing, `graph_loaders/dist_heterogeneous_loader.py` and
`repartition_files.py`) differs from the layout of DGL's guide, and `write_gsprocessing_graph`
reproduces each difference so that tests can feed it to distpart, and to GraphStorm itself:

* the metadata file is `updated_row_counts_metadata.json` (what its repartition step writes),
  not `metadata.json`; there is no `num_nodes_per_chunk` / `num_edges_per_chunk`, but
  `num_nodes_per_type`, `num_edges_per_type` and a `row_counts` list beside every file list,
  and keys DGL's format does not have (`raw_id_mappings`, `graph_info`);
* node types sorted by name; every edge type followed by its reverse, `dst:rel-rev:src`;
* every file is Parquet, written as Spark names them (`<prefix>/parquet/part-00000-<uuid>-c000.snappy.parquet`);
  edge files have two named columns, `src_int_id` and `dst_int_id`, in that order, and the
  reverse type's files hold `dst_int_id` then `src_int_id` (the reversed edge's source first);
* a vector feature is one `list<float>` column; a scalar feature is one scalar column, read
  `(N, 1)` by DGL's reader unless its file carries DGL's `shape` schema metadata, which the
  repartition step writes as `(rows,)` on train/val/test masks (read `(N,)`);
* feature files are cut independently of the structure files of their type (their number and
  per-file rows differ; Spark may also write empty part files); a reverse edge type shares its
  forward type's feature files, as GSProcessing's edge labels do;
* older GSProcessing versions named edge feature folders by the raw edge type, `:` included
  (`edge_data/user:buys:item-rating/`).
"""
from __future__ import annotations

import json
import pathlib
import uuid
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .writer import PathLike

__all__ = ["write_gsprocessing_graph", "GSPROCESSING_METADATA"]

GSPROCESSING_METADATA = "updated_row_counts_metadata.json"


class _Writer:
    """Writes Spark-named Parquet part files under one output folder and records them."""

    def __init__(self, root: pathlib.Path, rng: np.random.Generator) -> None:
        self.root = root
        self.rng = rng
        self.files: List[pathlib.Path] = []

    def parts(self, prefix: str, table: pa.Table, sizes: Sequence[int],
              shape_metadata: bool = False) -> Tuple[List[str], List[int]]:
        """`table` cut into files of `sizes` rows under `prefix/parquet/`; (relative paths, rows)."""
        run = uuid.UUID(int=int(self.rng.integers(0, 2**63)) << 64 | int(self.rng.integers(0, 2**63)))
        folder = self.root / prefix / "parquet"
        folder.mkdir(parents=True, exist_ok=True)
        paths, start = [], 0
        for k, n in enumerate(sizes):
            part = table.slice(start, n)
            if shape_metadata:
                part = part.replace_schema_metadata({b"shape": f"({n},)".encode()})
            name = f"part-{k:05d}-{run}-c000.snappy.parquet"
            # An open file, not a path: pyarrow takes a path with ':' for a URI.
            with open(folder / name, "wb") as f:
                pq.write_table(part, f, compression="snappy")
            self.files.append(folder / name)
            paths.append(f"{prefix}/parquet/{name}")
            start += n
        return paths, list(sizes)


def _cut(n: int, k: int, rng: np.random.Generator, empty: bool = False) -> List[int]:
    """n rows in k files of uneven sizes (one of them empty if `empty`, as Spark may write)."""
    cuts = np.sort(rng.integers(0, n + 1, size=k - 1))
    sizes = np.diff(np.concatenate([[0], cuts, [n]])).tolist()
    if empty:
        sizes[k // 2] = 0
        sizes[-1] = n - sum(sizes[:-1])
    return [int(s) for s in sizes]


def _entry(paths: List[str], rows: List[int]) -> Dict[str, Any]:
    return {"format": {"name": "parquet", "delimiter": ""}, "data": paths, "row_counts": rows}


def write_gsprocessing_graph(folder: PathLike, *, seed: int = 0, num_users: int = 300, num_items: int = 200,
                             num_follows: int = 1200, num_buys: int = 900, feat_dim: int = 8,
                             metadata_name: str = GSPROCESSING_METADATA, row_counts: bool = True,
                             graph_name: str = "gsp") -> Dict[str, Any]:
    """Write a GSProcessing-style graph under `folder` (see the module docstring); return what it wrote.

    Node types `item`, `user`; edge types `user:follows:user`, `user:follows-rev:user`,
    `user:buys:item`, `item:buys-rev:user`; features `user/feat` (list<float> of `feat_dim`),
    `item/label` (int64 scalar column), `item/train_mask` (int8 with `shape` metadata),
    `user:follows:user/weight` (list<float> of 2), `user:buys:item/rating` and
    `item:buys-rev:user/rating` (float32 scalar column, shared files). `row_counts=False`
    leaves the per-file counts out (and `num_edges_per_type` in), as a hand-made file might.

    Returns ``{"metadata": path of the metadata file, "graph_name", "num_nodes": {ntype: n},
    "edges": {etype: (src, dst)} (int64, in edge-ID order), "node_feats": {(ntype, name): array},
    "edge_feats": {(etype, name): array}, "files": [every Parquet file written]}``, the same
    shape as `read_whole_graph`'s answer; feature arrays are as DGL 2.1's Parquet reader
    returns them (`(N, 1)` for a scalar column without `shape` metadata).
    """
    root = pathlib.Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = _Writer(root, rng)
    num_nodes = {"item": num_items, "user": num_users}
    node_types = sorted(num_nodes)                       # GSProcessing sorts them

    # Node ID maps: the original string ID of each new integer ID, Spark-cut into 2 files.
    raw_id_mappings = {}
    for ntype in node_types:
        n = num_nodes[ntype]
        table = pa.table({"orig": [f"{ntype}-{i}" for i in range(n)], "new": pa.array(np.arange(n), pa.int64())})
        raw_id_mappings[ntype] = _entry(*out.parts(f"raw_id_mappings/{ntype}", table, _cut(n, 2, rng)))

    edges: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
    edge_entries: Dict[str, Dict[str, Any]] = {}
    edge_type_names: List[str] = []
    for src, rel, dst, count in (("user", "follows", "user", num_follows), ("user", "buys", "item", num_buys)):
        name, rev = f"{src}:{rel}:{dst}", f"{dst}:{rel}-rev:{src}"
        s = rng.integers(0, num_nodes[src], count, dtype=np.int64)
        d = rng.integers(0, num_nodes[dst], count, dtype=np.int64)
        sizes = _cut(count, 3, rng)
        forward = pa.table({"src_int_id": s, "dst_int_id": d})
        backward = pa.table({"dst_int_id": d, "src_int_id": s})   # the reversed edge's source first
        edge_entries[name] = _entry(*out.parts(f"edges/{name.replace(':', '_')}", forward, sizes))
        edge_entries[rev] = _entry(*out.parts(f"edges/{rev.replace(':', '_')}", backward, sizes))
        edges[name], edges[rev] = (s, d), (d, s)
        edge_type_names += [name, rev]

    node_feats: Dict[Tuple[str, str], np.ndarray] = {}
    node_data: Dict[str, Dict[str, Any]] = {"item": {}, "user": {}}
    feat = rng.standard_normal((num_users, feat_dim)).astype(np.float32)
    vectors = pa.table({"feat": pa.array(list(feat), pa.list_(pa.field("element", pa.float32())))})
    node_data["user"]["feat"] = _entry(*out.parts("node_data/user-feat", vectors, _cut(num_users, 2, rng)))
    node_feats[("user", "feat")] = feat
    label = rng.integers(0, 5, num_items, dtype=np.int64)
    node_data["item"]["label"] = _entry(*out.parts(
        "node_data/item-label", pa.table({"label": label}), _cut(num_items, 3, rng, empty=True)))
    node_feats[("item", "label")] = label[:, None]              # (N, 1): no "shape", as DGL reads it
    mask = (rng.random(num_items) < 0.3).astype(np.int8)
    node_data["item"]["train_mask"] = _entry(*out.parts(
        "node_data/item-train_mask", pa.table({"train_mask": mask}), _cut(num_items, 4, rng), shape_metadata=True))
    node_feats[("item", "train_mask")] = mask                   # 1-D: its files carry "shape"

    edge_feats: Dict[Tuple[str, str], np.ndarray] = {}
    edge_data: Dict[str, Dict[str, Any]] = {}
    weight = rng.random((num_follows, 2)).astype(np.float32)
    table = pa.table({"weight": pa.array(list(weight), pa.list_(pa.field("element", pa.float32())))})
    edge_data["user:follows:user"] = {"weight": _entry(*out.parts(
        "edge_data/user:follows:user-weight", table, _cut(num_follows, 4, rng)))}
    edge_feats[("user:follows:user", "weight")] = weight
    rating = rng.random(num_buys).astype(np.float32)
    rating_entry = _entry(*out.parts("edge_data/user:buys:item-rating", pa.table({"rating": rating}),
                                     _cut(num_buys, 2, rng)))
    edge_data["user:buys:item"] = {"rating": rating_entry}
    edge_data["item:buys-rev:user"] = {"rating": json.loads(json.dumps(rating_entry))}
    edge_feats[("user:buys:item", "rating")] = edge_feats[("item:buys-rev:user", "rating")] = rating[:, None]

    if not row_counts:
        for entry in _entries(raw_id_mappings, edge_entries, node_data, edge_data):
            del entry["row_counts"]
    num_edges = [len(edges[e][0]) for e in edge_type_names]
    metadata = {
        "edge_type": edge_type_names,
        "node_type": node_types,
        "graph_name": graph_name,
        "node_data": node_data,
        "edge_data": edge_data,
        "edges": edge_entries,
        "raw_id_mappings": raw_id_mappings,
        "num_nodes_per_type": [num_nodes[t] for t in node_types],
        "num_edges_per_type": num_edges,
        "graph_info": {
            "task_type": "node_class", "graph_type": "heterogeneous",
            "num_nodes": sum(num_nodes.values()), "num_edges": sum(num_edges),
            "num_ntype": len(node_types), "num_rels": len(edge_type_names),
            "num_nodes_ntype": dict(num_nodes), "num_edges_etype": dict(zip(edge_type_names, num_edges)),
            "nfeat_size": {"user": {"feat": feat_dim}}, "efeat_size": {"user:follows:user": {"weight": 2}},
            "ntype_label": ["item"], "ntype_label_property": ["label"],
            "etype_label": [], "etype_label_property": [],
            "ntype_to_label_masks": {"item": ["train_mask"]},
        },
    }
    meta_path = root / metadata_name
    meta_path.write_text(json.dumps(metadata, indent=4) + "\n")
    return {"metadata": meta_path, "graph_name": graph_name, "num_nodes": num_nodes, "edges": edges,
            "node_feats": node_feats, "edge_feats": edge_feats, "files": list(out.files)}


def _entries(*groups: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every file-list entry ({"format", "data", ...}) of the metadata's groups."""
    found: List[Dict[str, Any]] = []
    for group in groups:
        for value in group.values():
            if isinstance(value, dict) and "data" in value:
                found.append(value)
            elif isinstance(value, dict):
                found.extend(_entries(value))
    return found

