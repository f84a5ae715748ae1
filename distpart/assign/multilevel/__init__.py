"""Step 1's own distributed multilevel method (`--method multilevel`), laid out as
kaminpar-dist's: `graph` holds one level of the hierarchy and its halo; `coarsening/`
clusters by size-constrained label propagation and contracts; `initial` partitions the
gathered coarsest graph (METIS k-way with several constraints, KaMinPar with one);
`refinement/` has Jet and the multi-constraint rebalancer, run at every level on the way
back; `partitioner` drives them and is the method's `step1` interface, exported here.
Design: ../shared/design/step1-multilevel.md.
"""
from .partitioner import ALGO_NAME, multilevel_partition, partition, setup, unmet_constraints

__all__ = ["ALGO_NAME", "multilevel_partition", "partition", "setup", "unmet_constraints"]
