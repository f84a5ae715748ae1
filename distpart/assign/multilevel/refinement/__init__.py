"""Refinement of one level of the multilevel hierarchy, run at every level on the way back,
laid out as kaminpar-dist's `refinement/`: `state` (one `Refinement` per level call and the
`State` of a partition, shared by the rebalancer and Jet), `select` (a distributed weighted
select), `balancer` (the multi-constraint rebalancer), `swap` (exchanges single moves cannot
make), `jet` (Jet refinement) and `volume` (the total communication volume of
`--objective vol`, on the finest level). The refiners give the same result for any number of
ranks. Design: ../shared/design/step1-multilevel.md, step 3.
"""
# The modules, not their functions: a function `jet` here would hide the module `jet`.
# Callers import `balancer.rebalance` and `jet.jet`.
__all__ = ["balancer", "jet", "select", "state", "swap", "volume"]
