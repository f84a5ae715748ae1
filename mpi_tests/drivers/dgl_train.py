"""The training script DGL's launcher would run, for servers and trainers alike.

DGL's tools/launch.py runs one user command on every machine: as each server, with
DGL_ROLE=server (then `dgl.distributed.initialize` serves its partition and never returns),
and as the trainers, under `python -m torch.distributed.run` with DGL_ROLE=client. This is
that command for mpi_tests/test_dgl_training.py:

    dgl_train.py --ip-config F --graph-name G --checks CHECKS.npz --report OUT.json [--graphbolt]

A trainer opens the DistGraph served from distpart's partitions, checks it against the input
graph (CHECKS.npz, made by the test from the chunked input and distpart's orig ID files:
counts, every node feature row, sampled neighbours and their edge IDs), trains a 2-layer
GraphSAGE with DistributedDataParallel for a few epochs, and writes its losses and check
results to OUT.json (one file per trainer: the rank is appended to the name).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Dict, List

import numpy as np


def _parse(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--ip-config", required=True)
    p.add_argument("--graph-name", required=True)
    p.add_argument("--checks", required=True)
    p.add_argument("--report", required=True)
    p.add_argument("--graphbolt", action="store_true")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=20)
    return p.parse_args(argv)


def _check_graph(g, checks: Dict[str, np.ndarray], graphbolt: bool) -> Dict[str, int]:
    """The DistGraph against the input: counts, features, sampled neighbours. Raises on a mismatch."""
    import torch
    import dgl

    new2orig, e_new2orig = checks["new2orig"], checks["e_new2orig"]
    n, m = len(new2orig), len(e_new2orig)
    assert g.num_nodes() == n and g.num_edges() == m, (g.num_nodes(), g.num_edges(), n, m)
    all_nodes = torch.arange(n)
    for name in ("feat", "label", "train_mask"):
        got = g.ndata[name][all_nodes].numpy()
        want = checks[f"input_{name}"][new2orig]
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    # Every in-edge of some seeds (fanout -1: all of them), from whichever partition holds them.
    rng = np.random.default_rng(7)
    seeds = np.sort(rng.choice(n, size=min(n, 60), replace=False))
    frontier = g.sample_neighbors(torch.from_numpy(seeds), -1)  # GraphBolt or not: as the servers say
    src, dst = (x.numpy() for x in frontier.edges())
    got_pairs = sorted(zip(new2orig[src].tolist(), new2orig[dst].tolist()))
    in_src, in_dst = checks["input_src"], checks["input_dst"]
    mask = np.isin(in_dst, new2orig[seeds])
    want_pairs = sorted(zip(in_src[mask].tolist(), in_dst[mask].tolist()))
    assert got_pairs == want_pairs, "sampled in-neighbours differ from the input's"
    eids_checked = 0
    if dgl.EID in frontier.edata:  # GraphBolt serves edge IDs only when they were stored
        orig_e = e_new2orig[frontier.edata[dgl.EID].numpy()]
        assert np.array_equal(in_src[orig_e], new2orig[src]) and np.array_equal(in_dst[orig_e], new2orig[dst])
        eids_checked = len(orig_e)
    # A fanout of 3 gives at most 3 input in-edges per seed.
    small = g.sample_neighbors(torch.from_numpy(seeds), 3)
    s3, d3 = (x.numpy() for x in small.edges())
    edge_set = set(zip(in_src.tolist(), in_dst.tolist()))
    assert all(pair in edge_set for pair in zip(new2orig[s3].tolist(), new2orig[d3].tolist()))
    assert np.bincount(d3, minlength=n).max() <= 3
    return {"nodes": n, "edges": m, "sampled_edges": len(got_pairs), "sampled_eids_checked": eids_checked,
            "fanout3_edges": len(s3)}


def _train(g, args: argparse.Namespace) -> List[float]:
    import torch
    import torch.nn.functional as F
    import dgl
    from dgl.nn import SAGEConv

    class SAGE(torch.nn.Module):
        def __init__(self, d_in: int, d_hidden: int, classes: int) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([SAGEConv(d_in, d_hidden, "mean"), SAGEConv(d_hidden, classes, "mean")])

        def forward(self, blocks, x):
            for i, (layer, block) in enumerate(zip(self.layers, blocks)):
                x = layer(block, x)
                if i == 0:
                    x = F.relu(x)
            return x

    torch.manual_seed(0)
    train_nids = dgl.distributed.node_split(g.ndata["train_mask"], g.get_partition_book())
    sampler = dgl.dataloading.NeighborSampler([5, 5])
    loader = dgl.dataloading.DistNodeDataLoader(g, train_nids, sampler, batch_size=args.batch_size,
                                                shuffle=True, drop_last=False)
    classes = int(g.ndata["label"][torch.arange(g.num_nodes())].max()) + 1
    model = torch.nn.parallel.DistributedDataParallel(SAGE(g.ndata["feat"].shape[1], 16, classes))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(args.epochs):
        for input_nodes, seeds, blocks in loader:
            x = g.ndata["feat"][input_nodes]
            y = g.ndata["label"][seeds]
            loss = F.cross_entropy(model(blocks, x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
    return losses


def main(argv: List[str]) -> int:
    args = _parse(argv)
    import torch
    import dgl

    # Servers: serve this machine's partition until the trainers are done (never returns).
    dgl.distributed.initialize(args.ip_config, use_graphbolt=args.graphbolt)
    torch.distributed.init_process_group(backend="gloo")
    rank = torch.distributed.get_rank()
    report: Dict[str, object] = {"rank": rank, "graphbolt": args.graphbolt}
    try:
        g = dgl.distributed.DistGraph(args.graph_name)
        report["machine_partition"] = int(g.get_partition_book().partid)
        # What the servers hand over: a FusedCSCSamplingGraph when they serve GraphBolt.
        report["local_partition"] = type(g.local_partition).__name__
        checks = dict(np.load(args.checks))
        report["checks"] = _check_graph(g, checks, args.graphbolt)
        start = time.time()
        report["losses"] = _train(g, args)
        report["train_seconds"] = round(time.time() - start, 2)
        report["ok"] = True
    except Exception:  # reported to the test, which fails with it; the job still ends cleanly
        import traceback
        report["ok"] = False
        report["error"] = traceback.format_exc()
        print(report["error"], file=sys.stderr, flush=True)
    with open(f"{args.report}.{rank}", "w") as f:
        json.dump(report, f)
    torch.distributed.barrier()
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
