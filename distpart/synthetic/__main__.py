"""Command line of the synthetic graphs::

    python -m distpart.synthetic example OUT_DIR [--scale S] [--seed N]
    python -m distpart.synthetic homogeneous OUT_DIR --num-nodes N --num-edges M \\
        [--num-chunks C] [--format numpy|csv|parquet] [--feat-dim D] [--community K] [--seed N]
    python -m distpart.synthetic rmat OUT_DIR --num-nodes N --num-edges M [...]
    python -m distpart.synthetic mesh OUT_DIR --num-nodes N [...]
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from ..chunked.metadata import EDGE_FORMATS
from .graphs import example_graph, homogeneous_graph, mesh_graph, rmat_graph


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m distpart.synthetic",
        description="Write a synthetic graph in DGL's chunked graph format.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("example", help="the bundled heterogeneous example graph")
    ex.add_argument("out_dir")
    ex.add_argument("--scale", type=int, default=1)
    ex.add_argument("--seed", type=int, default=0)
    ho = sub.add_parser("homogeneous", help="a one-type graph for benchmarks")
    ho.add_argument("out_dir")
    ho.add_argument("--num-nodes", type=int, required=True)
    ho.add_argument("--num-edges", type=int, required=True)
    ho.add_argument("--num-chunks", type=int, default=8)
    ho.add_argument("--format", choices=EDGE_FORMATS, default="numpy")
    ho.add_argument("--feat-dim", type=int, default=16)
    ho.add_argument("--community", type=int, default=None)
    ho.add_argument("--seed", type=int, default=0)
    rm = sub.add_parser("rmat", help="a heterogeneous RMAT power-law graph (Graph500 parameters)")
    me = sub.add_parser("mesh", help="a 2-D torus mesh, 2 edges per node")
    for sp in (rm, me):
        sp.add_argument("out_dir")
        sp.add_argument("--num-nodes", type=int, required=True)
        sp.add_argument("--num-chunks", type=int, default=8)
        sp.add_argument("--format", choices=EDGE_FORMATS, default="numpy")
        sp.add_argument("--seed", type=int, default=0)
    rm.add_argument("--num-edges", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "example":
            path = example_graph(args.out_dir, scale=args.scale, seed=args.seed)
        elif args.command == "rmat":
            path = rmat_graph(args.out_dir, args.num_nodes, args.num_edges, num_chunks=args.num_chunks,
                              fmt=args.format, seed=args.seed)
        elif args.command == "mesh":
            path = mesh_graph(args.out_dir, args.num_nodes, num_chunks=args.num_chunks, fmt=args.format,
                              seed=args.seed)
        else:
            path = homogeneous_graph(
                args.out_dir, args.num_nodes, args.num_edges, num_chunks=args.num_chunks,
                fmt=args.format, feat_dim=args.feat_dim, seed=args.seed,
                community=args.community,
            )
    except ValueError as exc:
        parser.error(str(exc))  # exits with status 2 and the usage line
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
