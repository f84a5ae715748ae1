"""Step 1's own distributed multilevel method (`--method multilevel`).

`graph` holds one level of the hierarchy and its halo; `coarsen` clusters by size-constrained
label propagation and contracts; `initial` partitions the gathered coarsest graph (METIS k-way
with several constraints, KaMinPar with one); `refine` has Jet and the multi-constraint
rebalancer run at every level on the way back. This module's `multilevel_assignment` drives
them. Design: ../shared/design/step1-multilevel.md.
"""
