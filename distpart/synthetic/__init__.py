"""Example and benchmark inputs in DGL's chunked format, deterministic for a seed.

`graph_models` says which edges a chunk holds (uniform, RMAT, torus); `writer` writes a whole
graph with features from node, edge and feature specs, one chunk at a time; `graphs` builds
the graphs the docs, tests and benchmarks use on it; `reference` reads a chunked graph whole,
naively, as the tests' ground truth; `gsprocessing` writes a small graph in the layout of
GraphStorm's Spark preprocessing; `__main__` is `python -m distpart.synthetic`. Nothing in
the pipeline imports this folder but `distpart example`.
"""
from .graphs import (community_graph, example_graph, example_graph_specs, homogeneous_graph, mesh_graph,
                     rmat_graph)
from .gsprocessing import write_gsprocessing_graph
from .reference import read_whole_graph
from .writer import EdgeTypeSpec, FeatureSpec, NodeTypeSpec, feature_values, write_chunked_graph

__all__ = ["EdgeTypeSpec", "FeatureSpec", "NodeTypeSpec", "community_graph", "example_graph", "example_graph_specs",
           "feature_values", "homogeneous_graph", "mesh_graph", "read_whole_graph", "rmat_graph",
           "write_chunked_graph", "write_gsprocessing_graph"]
