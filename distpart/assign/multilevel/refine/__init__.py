"""Refinement of one level of the multilevel hierarchy, run at every level on the way back.

`balancer` owns the multi-constraint rebalancer (`rebalance`: vertices leave overloaded
blocks, cheapest per unit of overload first, until every constraint fits) and the pieces Jet
shares with it: per-call facts and the Allreduced state of a partition (`Refinement`,
`State`), connections to blocks, and a distributed weighted select (`first_reaching`).
`jet` owns Jet refinement (`jet`: candidate moves, the afterburner, the rebalancer when the
moves overfill a block, the best partition seen). Both give the same result for any number
of ranks. Callers import `balancer.rebalance` and `jet.jet`. Design: ../shared/design/step1-multilevel.md, step 3.
"""
# The modules, not their functions: a function `jet` here would hide the module `jet`.
__all__ = ["balancer", "jet"]
