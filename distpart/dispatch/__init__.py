"""Step 2: move nodes, edges and features to the ranks that own their partitions, relabel them
and write each partition.

`dispatch` runs the step (relabel, send nodes, send edges, send edge features, write);
`relabel` holds its pure array functions (local graphs, rows by partition); `publish` owns the
partition folders' staged files, completion records, reuse on resume, and the manifest and
metadata.json written last.
"""
__all__ = ["dispatch", "relabel", "publish"]
