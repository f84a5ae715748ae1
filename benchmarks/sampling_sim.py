"""A fast stand-in for DistDGL's trainers, to compare Step 1 objectives in seconds: what
`bench_training.py` measures with DGL's own servers (remote feature rows per epoch, moved
seeds), simulated on one process from the input graph and an assignment.

It does what DGL 2.1 does, in NumPy: training nodes split among P trainers with
`node_split(force_even=True)` (the training nodes in partition order, cut into P even
ranges), each trainer's seeds shuffled into mini-batches, `MultiLayerNeighborSampler`
(fanouts, the last one from the seeds; per edge type min(fanout, in-degree) in-neighbours
without replacement), a batch's input nodes deduplicated, and a row counted remote when
another partition owns it. Numbers are judged by DGL's own runs (bench_training.py); this
is for quick iteration, e.g.

    python benchmarks/sampling_sim.py GRAPH_DIR ASSIGN_DIR --train-mask user/train_mask --fanouts 5,10
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

from distpart.synthetic import read_whole_graph


def in_csr(whole: dict, offsets: Dict[str, int], n: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Per edge type, (indptr by destination, sources) in homogeneous IDs."""
    out = []
    for name, (s, d) in whole["edges"].items():
        st, _, dt = name.split(":")
        u = np.asarray(s, dtype=np.int64) + offsets[st]
        v = np.asarray(d, dtype=np.int64) + offsets[dt]
        order = np.argsort(v, kind="stable")
        indptr = np.concatenate([[0], np.cumsum(np.bincount(v, minlength=n))])
        out.append((indptr, u[order]))
    return out


def sample(frontier: np.ndarray, graphs, fanout: int, rng: np.random.Generator) -> np.ndarray:
    """min(fanout, in-degree) in-neighbours of each frontier node per edge type (without
    replacement where the degree is small; with, then deduplicated, for hubs: the same to
    within a fraction of a row)."""
    picked = [frontier]
    for indptr, src in graphs:
        start, deg = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        small = deg <= fanout
        rows = np.repeat(start[small], deg[small]) + (np.arange(deg[small].sum())
                                                      - np.repeat(np.cumsum(deg[small]) - deg[small], deg[small]))
        picked.append(src[rows])
        big = np.flatnonzero(~small)
        if len(big):
            offs = (rng.random((len(big), fanout)) * deg[big][:, None]).astype(np.int64)
            picked.append(src[(start[big][:, None] + offs).ravel()])
    return np.unique(np.concatenate(picked))


def simulate(whole: dict, parts: np.ndarray, offsets: Dict[str, int], train: np.ndarray, num_parts: int,
             fanouts: Sequence[int], batch_size: int, epochs: int = 1, seed: int = 0) -> dict:
    n = len(parts)
    graphs = in_csr(whole, offsets, n)
    # node_split(force_even=True): training nodes in partition order (DGL relabels by partition).
    order = np.lexsort((np.arange(n), parts))
    seeds_in_order = order[train[order]]
    splits = np.array_split(seeds_in_order, num_parts)
    rng = np.random.default_rng(seed)
    remote = local = 0
    moved = sum(int((parts[s] != t).sum()) for t, s in enumerate(splits))
    for _ in range(epochs):
        for t, mine in enumerate(splits):
            mine = rng.permutation(mine)
            for b in range(0, len(mine), batch_size):
                frontier = np.unique(mine[b:b + batch_size])
                for fanout in reversed(fanouts):
                    frontier = sample(frontier, graphs, fanout, rng)
                far = int((parts[frontier] != t).sum())
                remote += far
                local += len(frontier) - far
    return {"remote_rows_per_epoch": remote / epochs, "local_rows_per_epoch": local / epochs, "moved_seeds": moved}


def main(argv: "List[str] | None" = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph", type=Path)
    ap.add_argument("assignments", type=Path, nargs="+")
    ap.add_argument("--train-mask", required=True, metavar="NTYPE/FEAT")
    ap.add_argument("--fanouts", default="5,10")
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args(argv)
    whole = read_whole_graph(args.graph / "metadata.json")
    ntypes = list(whole["num_nodes"])
    offsets, at = {}, 0
    for t in ntypes:
        offsets[t] = at
        at += int(whole["num_nodes"][t])
    ntype, _, feat = args.train_mask.partition("/")
    train = np.zeros(at, dtype=bool)
    mask = np.asarray(whole["node_feats"][(ntype, feat)]).reshape(-1).astype(bool)
    train[offsets[ntype]:offsets[ntype] + len(mask)] = mask
    fanouts = [int(f) for f in args.fanouts.split(",")]
    for folder in args.assignments:
        parts = np.concatenate([np.loadtxt(folder / f"{t}.txt", dtype=np.int64, ndmin=1) for t in ntypes])
        k = json.loads((folder / "partition_meta.json").read_text())["num_parts"]
        print(folder, simulate(whole, parts, offsets, train, k, fanouts, args.batch_size, args.epochs))


if __name__ == "__main__":
    main()
