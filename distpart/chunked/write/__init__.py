"""Writing DGL's chunked graph format from data that is not chunked yet (`distpart chunk`).

This package owns the writer of the chunked format (`writer`, `files`) and its three sources:

(a) `memory`: a plain in-memory description (`write_graph`): node counts per type, (src, dst) arrays
    per canonical edge type, feature arrays per type (see `describe_graph`), or a DGLGraph;
(b) `ogb`: OGB's raw layout (`chunk_ogb`), as MAG240M ships it: `processed/<src>___<rel>___<dst>/
    edge_index.npy` (a (2, E) array) per relation and `processed/<ntype>/node_<name>.npy` per
    node feature;
(c) `edge_lists`: one large edge list per relation, CSV or Parquet (`chunk_edge_lists`): the first two
    columns (or `src`/`dst`) are the endpoints, every further column an edge feature.

Everything is streamed: a source is read in batches (`pyarrow.csv.open_csv`,
`ParquetFile.iter_batches`, slices of memory-mapped .npy files), each batch is cut at the
chunk boundaries and appended to the open chunk files, so memory is bounded by the batch
(`batch_bytes`), never by a file, a chunk or the graph. CSV sources are read twice (to count
rows and find the endpoint ranges, then to write); nothing is held between the passes.

The output holds every key DGL's and distpart's readers read: `graph_name`, `node_type`,
`num_nodes_per_chunk`, `edge_type`, `num_edges_per_chunk`, `edges` (with the CSV delimiter),
`node_data`, `edge_data`, paths relative to the folder. Edges go to `edges/` in the chosen
format (csv with a space, as DGL's tools write, numpy or parquet); features to `node_data/
<ntype>/` and `edge_data/<etype>/` as .npy. metadata.json is written last, so a folder with
one is complete. A folder is only written when it is new or empty, or with `overwrite`
when an earlier `distpart chunk` wrote it (a `.distpart-chunked` marker says so).

`sources` holds what (b) and (c) share (`distpart chunk`'s command line is in `commands`). The
shared pieces of `files` (`chunk_sizes`, `file_stem`, `write_edge_file`) are also used by
`synthetic`, which writes the test and benchmark graphs.
"""
from .edge_lists import chunk_edge_lists
from .files import EXTENSIONS, MARKER, chunk_sizes, file_stem, write_edge_file
from .memory import GraphDescription, describe_graph, write_graph
from .ogb import chunk_ogb
from .writer import ChunkedGraphWriter, prepare_folder

__all__ = [
    "GraphDescription",
    "ChunkedGraphWriter",
    "chunk_sizes",
    "describe_graph",
    "write_graph",
    "chunk_ogb",
    "chunk_edge_lists",
    "prepare_folder",
    # the shared pieces `synthetic` writes its graphs with
    "EXTENSIONS",
    "MARKER",
    "file_stem",
    "write_edge_file",
]
