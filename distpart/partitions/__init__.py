"""The output format, DGL's partitions, written and read back.

`dglformat` reads and writes DGL's binary `.dgl` files; `graphbolt` writes GraphBolt's graph;
`layout` is the partition config JSON and which rank builds which partition; `partbook`
maps IDs to partitions; `manifest` lists every output file with its checksum; `loader` loads
an output without DGL (`distpart.load_partition` and friends).
"""
__all__ = ["dglformat", "graphbolt", "layout", "partbook", "manifest", "loader"]
