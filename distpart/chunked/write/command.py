"""`distpart chunk`: the command line's arguments turned into one of the three inputs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from ...errors import InputError
from .ogb import chunk_ogb
from .edge_lists import chunk_edge_lists


def _pairs(items: Sequence[str], what: str, split_last: bool = False) -> List[Tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.rpartition("=") if split_last else item.partition("=")
        if not sep or not key or not value:
            raise InputError(None, f"{what} takes KEY=VALUE, got {item!r}")
        out.append((key, value))
    return out


def run_chunk(args: Any) -> Path:
    """The `distpart chunk` subcommand (arguments as cli.py parses them); returns metadata.json."""
    num_nodes: Dict[str, int] = {}
    for key, value in _pairs(args.num_nodes, "--num-nodes", split_last=True):
        try:
            num_nodes[key] = int(value)
        except ValueError:
            raise InputError(None, f"--num-nodes {key}={value}: not an integer") from None
        if num_nodes[key] < 0:
            raise InputError(None, f"--num-nodes {key}={value}: must be >= 0")
    common = dict(num_chunks=args.num_chunks, edge_format=args.edge_format, overwrite=args.overwrite)
    try:
        if args.ogb is not None:
            if args.edges or args.node_feat:
                raise InputError(None, "--ogb reads the whole dataset: do not add --edges or --node-feat")
            return chunk_ogb(args.ogb, args.out_dir, num_nodes=num_nodes, graph_name=args.graph_name, **common)
        if not args.edges:
            raise InputError(None, "give --ogb DIR, or one --edges SRC:REL:DST=FILE per edge type")
        return chunk_edge_lists(dict(_pairs(args.edges, "--edges")), args.out_dir, num_nodes=num_nodes,
                                node_features=dict(_pairs(args.node_feat, "--node-feat")),
                                delimiter=args.delimiter, header=args.header,
                                graph_name=args.graph_name or "graph", **common)
    except ValueError as e:  # a name or option the writer refused
        raise InputError(None, str(e)) from None
