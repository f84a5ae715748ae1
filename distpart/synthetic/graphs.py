"""The graphs distpart is tested and benchmarked on, built with `writer.write_chunked_graph`:
the small heterogeneous graph the docs and tests are written against (`example_graph`), large
homogeneous graphs (`homogeneous_graph`), power-law `rmat_graph`, `community_graph` (Chung-Lu
degrees with planted communities) and `mesh_graph`.
"""
from __future__ import annotations

import pathlib
from typing import List, Optional, Sequence, Tuple

from .graph_models import GRAPH500, chung_lu, rmat, torus
from .writer import EdgeTypeSpec, FeatureSpec, NodeTypeSpec, PathLike, write_chunked_graph


def example_graph_specs(
    scale: int = 1,
) -> Tuple[List[NodeTypeSpec], List[EdgeTypeSpec], List[FeatureSpec]]:
    """The schema of `example_graph` (types, counts, formats), for tests that need it."""
    nodes = [
        NodeTypeSpec("author", 1000 * scale),
        NodeTypeSpec("paper", 2000 * scale),
        # 3 nodes in 4 chunks at scale 1: the last node chunk is empty on purpose.
        NodeTypeSpec("institution", 3 * scale),
    ]
    edges = [
        EdgeTypeSpec("author:writes:paper", 4000 * scale, fmt="csv", delimiter=" "),
        EdgeTypeSpec("paper:cites:paper", 3000 * scale, fmt="numpy"),
        EdgeTypeSpec("author:affiliated_with:institution", 1000 * scale, fmt="parquet"),
        EdgeTypeSpec("paper:written_by:author", 2000 * scale, fmt="csv", delimiter=","),
    ]
    feats = [
        FeatureSpec("paper", "feat", "float32", (8,), fmt="numpy", num_chunks=3),
        FeatureSpec("paper", "label", "int64", (), fmt="parquet"),
        FeatureSpec("paper", "train_mask", "bool", (), fmt="hdf5"),
        FeatureSpec("author", "emb", "float16", (4,), fmt="hdf5", num_chunks=2),
        FeatureSpec("author", "age", "uint16", (), fmt="numpy"),
        FeatureSpec("author:writes:paper", "year", "int16", (), fmt="numpy"),
        # 5 files against the edge type's 4: feature chunking is independent of edge chunking.
        FeatureSpec("paper:cites:paper", "weight", "float64", (2,), fmt="parquet", num_chunks=5),
    ]
    return nodes, edges, feats


def example_graph(out_dir: PathLike, scale: int = 1, seed: int = 0) -> pathlib.Path:
    """Write the bundled heterogeneous example (README and tests) and return metadata.json."""
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    nodes, edges, feats = example_graph_specs(scale)
    return write_chunked_graph(
        out_dir, nodes, edges, feats, num_chunks=4, seed=seed, graph_name="example"
    )


def homogeneous_graph(
    out_dir: PathLike,
    num_nodes: int,
    num_edges: int,
    *,
    num_chunks: int = 8,
    fmt: str = "numpy",
    feat_dim: int = 16,
    seed: int = 0,
    community: Optional[int] = None,
) -> pathlib.Path:
    """Write a one-type graph ("_N", "_N:_E:_N") for benchmarks; return metadata.json.

    `fmt` is the edge format; the float32 node feature "feat" (width `feat_dim`, none when
    0) is always .npy.
    """
    feats = [FeatureSpec("_N", "feat", "float32", (feat_dim,))] if feat_dim > 0 else []
    return write_chunked_graph(
        out_dir,
        [NodeTypeSpec("_N", num_nodes)],
        [EdgeTypeSpec("_N:_E:_N", num_edges, fmt=fmt)],
        feats,
        num_chunks=num_chunks,
        seed=seed,
        community=community,
        graph_name="homogeneous",
    )


def rmat_graph(
    out_dir: PathLike,
    num_nodes: int,
    num_edges: int,
    *,
    num_chunks: int = 8,
    fmt: str = "numpy",
    seed: int = 0,
    probabilities: Tuple[float, float, float] = GRAPH500,
    features: Sequence[FeatureSpec] = (),
) -> pathlib.Path:
    """A heterogeneous power-law graph for partitioning benchmarks; return metadata.json.

    Node types "user" (60% of the nodes) and "item"; edge types user:follows:user (40% of
    the edges), user:buys:item (40%) and item:similar:item (20%), each an RMAT matrix with
    Graph500's parameters, IDs randomly relabelled per node type (see graph_models).
    `features` (owners among those types) are written beside, one chunk at a time.
    """
    users = num_nodes * 3 // 5
    follows, buys = num_edges * 2 // 5, num_edges * 2 // 5
    return write_chunked_graph(
        out_dir,
        [NodeTypeSpec("user", users), NodeTypeSpec("item", num_nodes - users)],
        [EdgeTypeSpec("user:follows:user", follows, fmt=fmt),
         EdgeTypeSpec("user:buys:item", buys, fmt=fmt),
         EdgeTypeSpec("item:similar:item", num_edges - follows - buys, fmt=fmt)],
        features, num_chunks=num_chunks, seed=seed, graph_name="rmat", edge_model=rmat(probabilities),
    )


def community_graph(
    out_dir: PathLike, num_nodes: int, num_edges: int, *, communities: int = 100, mixing: float = 0.15,
    num_chunks: int = 8, fmt: str = "numpy", seed: int = 0,
) -> pathlib.Path:
    """A one-type power-law graph with planted communities (graph_models.chung_lu: Chung-Lu
    degrees, all but a `mixing` fraction of edges inside a community); return metadata.json.
    `graph_models.chung_lu_communities(num_nodes, communities, "_N", seed)` gives each
    node's community."""
    return write_chunked_graph(
        out_dir,
        [NodeTypeSpec("_N", num_nodes)],
        [EdgeTypeSpec("_N:_E:_N", num_edges, fmt=fmt)],
        num_chunks=num_chunks, seed=seed, graph_name="community",
        edge_model=chung_lu(communities, mixing),
    )


def mesh_graph(
    out_dir: PathLike, num_nodes: int, *, num_chunks: int = 8, fmt: str = "numpy", seed: int = 0
) -> pathlib.Path:
    """A 2-D torus mesh (2 edges per node, IDs randomly relabelled); return metadata.json."""
    return write_chunked_graph(
        out_dir,
        [NodeTypeSpec("_N", num_nodes)],
        [EdgeTypeSpec("_N:_E:_N", 2 * num_nodes, fmt=fmt)],
        num_chunks=num_chunks, seed=seed, graph_name="mesh", edge_model=torus,
    )


# ----------------------------------------------------------------------------- reference reader


