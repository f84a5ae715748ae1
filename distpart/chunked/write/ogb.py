"""Input (b): OGB's raw layout, as MAG240M ships it (`chunk_ogb`): `processed/<src>___<rel>___<dst>/
edge_index.npy` per relation, `processed/<ntype>/node_<name>.npy` per node feature, read
by rows with positioned reads.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from ...errors import InputError
from ..names import name_problem
from .files import DEFAULT_BATCH_BYTES, PathLike
from .writer import check_feature_dtype, rows_per_batch
from .sources import EdgeSource, NpyFile, as_int64, check_negative, count_nodes, open_npy, note_printer, write_sources


def _meta_pt_counts(path: Path, say: Callable[[str], None]) -> Dict[str, int]:
    """Node counts from OGB's meta.pt (a torch-saved dict), when torch is installed."""
    if not path.is_file():
        return {}
    try:
        import torch
    except ImportError:
        say(f"{path}: torch is not installed, so its node counts are not read; counts come from "
            f"--num-nodes, the node features, or the largest endpoint + 1")
        return {}
    try:
        # weights_only: a dict of numbers needs no arbitrary unpickling.
        meta = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # any unreadable file: fall back to the other sources
        say(f"{path}: not read ({e}); counts come from the other sources")
        return {}
    if not isinstance(meta, Mapping):
        return {}
    return {str(k): int(v) for k, v in meta.items() if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}


def chunk_ogb(ogb_dir: PathLike, out_dir: PathLike, *, num_nodes: Optional[Mapping[str, int]] = None,
              num_chunks: int = 4, edge_format: str = "csv", graph_name: Optional[str] = None,
              overwrite: bool = False, batch_bytes: int = DEFAULT_BATCH_BYTES,
              notes: Optional[Callable[[str], None]] = None) -> Path:
    """Chunk a graph in OGB's raw layout (MAG240M's); return metadata.json's path.

    `ogb_dir` is the dataset folder or its `processed/` folder. Each sub-folder named
    `<src>___<rel>___<dst>` holding `edge_index.npy` ((2, E) or (E, 2)) is an edge type; its
    other `.npy` files are edge features (`edge_<name>.npy` -> `<name>`). Every other
    sub-folder is a node type whose `.npy` files are node features (`node_feat.npy` ->
    `feat`). Node and edge types are taken in name order (DGL's order). Node counts come from
    `num_nodes`, else the dataset's `meta.pt` (with torch), else a node feature's rows, else
    the largest endpoint + 1 (noted: trailing isolated nodes cannot be seen).
    """
    say = note_printer(notes)
    root = Path(ogb_dir)
    if not root.is_dir():
        raise InputError(root, "is not a folder")
    processed = root / "processed" if (root / "processed").is_dir() else root
    dataset_root = root if processed != root else root.parent
    relations, node_dirs = [], []
    for d in sorted(p for p in processed.iterdir() if p.is_dir()):
        if (d / "edge_index.npy").is_file():
            relations.append(d)
        elif any(f.suffix == ".npy" for f in d.iterdir()):
            node_dirs.append(d)
    if not relations:
        raise InputError(processed, "has no <src>___<rel>___<dst>/edge_index.npy: not OGB's raw layout")

    sources: List[EdgeSource] = []
    for d in relations:
        parts = d.name.split("___")
        problem = "an edge type folder must be named <src>___<rel>___<dst>" if len(parts) != 3 else (
            name_problem(parts[0], "node type") or name_problem(parts[1], "relation")
            or name_problem(parts[2], "node type"))
        if problem:
            raise InputError(d, problem)
        sources.append(_npy_edge_source(":".join(parts), d, batch_bytes))
    node_feats: Dict[str, Dict[str, Path]] = {}
    for d in node_dirs:
        for f in sorted(d.glob("*.npy")):
            name = f.stem[len("node_"):] if f.stem.startswith("node_") else f.stem
            problem = name_problem(d.name, "node type") or name_problem(name, "feature")
            if problem:
                raise InputError(f, problem)
            node_feats.setdefault(d.name, {})[name] = f
    known = dict(_meta_pt_counts(dataset_root / "meta.pt", say))
    known.update(num_nodes or {})
    ntypes = sorted({n for s in sources for n in (s.etype.split(":")[0], s.etype.split(":")[2])} | set(node_feats)
                    | set(num_nodes or {}))
    counts = count_nodes(ntypes, sources, node_feats, known, say)
    return write_sources(out_dir, counts, sources, node_feats, num_chunks=num_chunks, edge_format=edge_format,
                          graph_name=graph_name or dataset_root.name or "graph", overwrite=overwrite,
                          batch_bytes=batch_bytes, inputs=[processed])


def _npy_edge_source(etype: str, folder: Path, batch_bytes: int) -> EdgeSource:
    path = folder / "edge_index.npy"
    arr = open_npy(path)
    if arr.ndim != 2 or 2 not in arr.shape or arr.dtype.kind not in "iu":
        raise InputError(path, f"must be a (2, E) integer array, found shape {arr.shape} of {arr.dtype}")
    by_rows = arr.shape[0] != 2   # OGB's layout is (2, E); (E, 2) is accepted too
    rows = arr.shape[0] if by_rows else arr.shape[1]
    feats: Dict[str, NpyFile] = {}
    for f in sorted(folder.glob("*.npy")):
        if f.name == "edge_index.npy":
            continue
        values = open_npy(f)
        if values.ndim < 1 or len(values) != rows:
            raise InputError(f, f"has {len(values) if values.ndim else 0} rows but {path} has {rows} edges")
        name = f.stem[len("edge_"):] if f.stem.startswith("edge_") else f.stem
        if name_problem(name, "feature"):
            raise InputError(f, name_problem(name, "feature"))
        try:
            check_feature_dtype(values.dtype, f"feature {etype}/{name}")
        except ValueError as e:
            raise InputError(f, str(e)) from None
        feats[name] = values
    step = rows_per_batch(16 + sum(v.dtype.itemsize * v.row_items for v in feats.values()), batch_bytes)

    def batches(features: bool = True) -> Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]:
        for a in range(0, rows, step):
            b = min(rows, a + step)
            if by_rows:
                pair = arr.rows(a, b)
                src, dst = pair[:, 0], pair[:, 1]
            else:  # (2, E) in C order: the sources, then the destinations, each contiguous
                src, dst = arr.items(a, b - a), arr.items(rows + a, b - a)
            yield (as_int64(src, path, etype, "source", a), as_int64(dst, path, etype, "destination", a),
                   {k: v.rows(a, b) for k, v in feats.items()} if features else {}, a)

    source = EdgeSource(etype, path, rows, {k: (v.dtype, v.tail) for k, v in feats.items()},
                         batches=batches)
    for src, dst, _, first in batches(features=False):   # the endpoints' ranges only
        if len(src):
            check_negative(src, dst, path, etype, first)
            source.max_src = max(source.max_src, int(src.max()))
            source.max_dst = max(source.max_dst, int(dst.max()))
    return source
