"""DGL's chunked graph format: the pipeline's input, read, checked and written.

`metadata` parses `metadata.json` (or GSProcessing's metadata file) into a `GraphMeta`, with
`names` the rules for type and feature names;
`counts` reads the node and edge counts it leaves out from the files; `readers/` reads the
chunk files it names (CSV, NumPy, Parquet, HDF5) in pieces; `blocks` gives each rank its block of edges;
`validate` checks everything before work starts; `estimate` predicts output size and memory
from the metadata alone; `ids` converts between heterogeneous and homogeneous IDs of the
input graph; `write/` writes the format (`distpart chunk`, `write_graph`).
"""
__all__ = ["metadata", "names", "counts", "readers", "blocks", "validate", "estimate", "ids", "write"]
