"""Coarsening for `--method multilevel`, laid out as kaminpar-dist's `coarsening/`:
`clustering` (size-constrained label propagation), `contraction` (the graph of the clusters)
and `hierarchy` (the level loop, and the hierarchy inside a partition's blocks for V-cycles).
"""
from .clustering import cluster, cluster_cap
from .contraction import contract
from .hierarchy import coarsen, coarsen_within, mesh_like

__all__ = ["cluster", "cluster_cap", "coarsen", "coarsen_within", "contract", "mesh_like"]
