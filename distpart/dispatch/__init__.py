"""Step 2: move nodes, edges and features to the ranks that own their partitions, relabel them
and write each partition.

`dispatch` runs the step; `relabel` holds its pure array functions (local graphs, rows by
partition).
"""
__all__ = ["dispatch", "relabel"]
