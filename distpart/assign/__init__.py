"""Step 1: the partition of every node.

`assignment` is the step's product (`Assignment`, DGL's `<ntype>.txt` and
`partition_meta.json`, read and written) and the random method; the rest is what the graph
partitioners need: `adjacency` builds the distributed CSR, `ordering` puts hubs first,
`balance` turns balance options into vertex weights, `parmetis` binds ParMETIS, `parhip` writes
the graph KaMinPar reads and `kaminpar` runs it. Dispatch and the checks import only
`assignment` from here.
"""
__all__ = ["assignment", "adjacency", "ordering", "balance", "parmetis", "parhip", "kaminpar"]
