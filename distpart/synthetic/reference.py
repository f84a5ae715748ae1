"""`read_whole_graph`: a deliberately naive serial reader of a chunked graph, which the tests
use as ground truth for the MPI pipeline.
"""
from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Dict, Tuple

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .writer import PathLike


def read_whole_graph(metadata_path: PathLike) -> Dict[str, Any]:
    """Read a whole chunked graph into memory, serially: the tests' ground truth.

    Returns ``{"num_nodes": {ntype: n}, "edges": {etype: (src, dst)}, "node_feats":
    {(ntype, feat): array}, "edge_feats": {(etype, feat): array}}`` with int64 src/dst in
    edge-ID order. Deliberately shares no code with the pipeline or the writers above, so
    a bug in either cannot hide itself.
    """
    meta_path = pathlib.Path(metadata_path)
    base = meta_path.parent
    meta = json.loads(meta_path.read_text(encoding="utf-8"))

    def resolve(p: str) -> pathlib.Path:
        return pathlib.Path(p) if os.path.isabs(p) else base / p

    def read_edge_file(path: pathlib.Path, fmt: Dict[str, Any]) -> Tuple[np.ndarray, np.ndarray]:
        if fmt["name"] == "numpy":
            arr = np.load(path).reshape(-1, 2)
            return arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
        if fmt["name"] == "parquet":
            table = pq.read_table(path)
            return (table.column("src").to_numpy().astype(np.int64),
                    table.column("dst").to_numpy().astype(np.int64))
        if fmt["name"] == "csv":
            if path.stat().st_size == 0:  # pyarrow refuses an empty CSV; it is an empty chunk
                return np.empty(0, np.int64), np.empty(0, np.int64)
            table = pacsv.read_csv(
                path,
                read_options=pacsv.ReadOptions(autogenerate_column_names=True),
                parse_options=pacsv.ParseOptions(delimiter=fmt.get("delimiter", ",")),
                convert_options=pacsv.ConvertOptions(
                    column_types={"f0": pa.int64(), "f1": pa.int64()}),
            )
            return table.column(0).to_numpy(), table.column(1).to_numpy()
        raise ValueError(f"{path}: unknown edge format {fmt['name']!r}")

    def read_feature_file(path: pathlib.Path, fmt: Dict[str, Any]) -> np.ndarray:
        if fmt["name"] == "numpy":
            return np.load(path)
        if fmt["name"] == "hdf5":
            with h5py.File(path, "r") as f:
                return f[fmt["dataset"]][...]
        if fmt["name"] == "parquet":
            table = pq.read_table(path)
            cols = [table.column(name).to_numpy() for name in table.column_names]
            shape_text = (table.schema.metadata or {}).get(b"shape")
            arr = np.stack(cols, axis=1)
            if shape_text is None:
                return arr if arr.shape[1] > 1 else arr[:, 0]
            shape = tuple(int(s) for s in shape_text.decode().strip("()[] ").split(",") if s.strip())
            return arr.reshape(shape)
        raise ValueError(f"{path}: unknown feature format {fmt['name']!r}")

    num_nodes = {nt: int(sum(c)) for nt, c in zip(meta["node_type"], meta["num_nodes_per_chunk"])}
    edges = {}
    for etype in meta["edge_type"]:
        spec = meta["edges"][etype]
        parts = [read_edge_file(resolve(p), spec["format"]) for p in spec["data"]]
        edges[etype] = (np.concatenate([s for s, _ in parts]), np.concatenate([d for _, d in parts]))

    def read_feats(section: Dict[str, Any]) -> Dict[Tuple[str, str], np.ndarray]:
        return {
            (owner, name): np.concatenate(
                [read_feature_file(resolve(p), spec["format"]) for p in spec["data"]])
            for owner, feats in section.items()
            for name, spec in feats.items()
        }

    return {
        "num_nodes": num_nodes,
        "edges": edges,
        "node_feats": read_feats(meta.get("node_data", {})),
        "edge_feats": read_feats(meta.get("edge_data", {})),
    }
