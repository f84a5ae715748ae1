"""The script DGL's launcher runs on every machine of the training benchmark, as server and as
trainer (mpi_tests/drivers/dgl_machine.py starts it both ways, with the launcher's variables):

    trainer.py --ip-config F --graph-name G --train-mask NTYPE/FEAT --report OUT.json
               [--fanouts 5,10] [--batch-size 1000] [--epochs 2] [--hidden 16] [--classes 4] [--seed 1]

As a server (DGL_ROLE=server) `dgl.distributed.initialize` serves the machine's partition and
never returns. As a trainer: the DistGraph; training nodes from the mask with
`node_split(..., force_even=True)`; `DistNodeDataLoader` with
`MultiLayerNeighborSampler(fanouts)`; a 2-layer R-GCN-style model (per node type a self
weight, per edge type a mean of the sampled in-neighbours and a weight) under
DistributedDataParallel; every node type's `feat` is fetched for each batch's input nodes, the
label for its seeds. Before and after each epoch, all trainers meet at a barrier and read their
machine's interface counters. What is counted (counts.py): remote and local feature rows,
remote sampling and feature requests per batch; moved seeds once. Each trainer writes its
report to OUT.json.RANK and exits non-zero on an error (without waiting for the others, so the
job stops instead of hanging).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from counts import add_counts, batch_counts, net_delta, parse_net_dev  # noqa: E402


def _parse(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--ip-config", required=True)
    p.add_argument("--graph-name", required=True)
    p.add_argument("--train-mask", required=True, help="NTYPE/FEAT")
    p.add_argument("--report", required=True)
    p.add_argument("--fanouts", default="5,10")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--classes", type=int, default=4, help="the label's classes (features.CLASSES)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--iface", default="eth0")
    return p.parse_args(argv)


def _net(iface: str) -> Dict[str, int]:
    """This machine's interface counters (/proc/net is the reading process's network namespace)."""
    with open("/proc/net/dev") as f:
        return parse_net_dev(f.read(), iface)


def _model(ntypes, etypes, d_in: int, hidden: int, classes: int):
    import torch
    import dgl.function as fn

    def key(ce) -> str:
        return ":".join(ce)

    class Layer(torch.nn.Module):
        def __init__(self, a: int, b: int) -> None:
            super().__init__()
            self.b = b
            self.own = torch.nn.ModuleDict({t: torch.nn.Linear(a, b) for t in ntypes})
            self.rel = torch.nn.ModuleDict({key(ce): torch.nn.Linear(a, b, bias=False) for ce in etypes})

        def forward(self, block, h):
            out = {t: self.own[t](h[t][:block.num_dst_nodes(t)]) for t in block.dsttypes}
            for ce in block.canonical_etypes:
                s, _, d = ce
                rel = block[ce]
                if rel.num_edges() == 0:   # mean over no edge: zeros, and every weight stays in the graph
                    agg = torch.zeros(rel.num_dst_nodes(), h[s].shape[1])
                else:
                    with rel.local_scope():
                        rel.srcdata["h"] = h[s]
                        rel.update_all(fn.copy_u("h", "m"), fn.mean("m", "a"))
                        agg = rel.dstdata["a"]
                out[d] = out[d] + self.rel[key(ce)](agg)
            return out

    class RGCN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([Layer(d_in, hidden), Layer(hidden, classes)])

        def forward(self, blocks, x):
            h = x
            for i, (layer, block) in enumerate(zip(self.layers, blocks)):
                h = layer(block, h)
                if i < len(self.layers) - 1:
                    h = {t: torch.relu(v) for t, v in h.items()}
            return h

    return RGCN()


def _as_dict(x, ntype: str) -> Dict:
    return x if isinstance(x, dict) else {ntype: x}


def _train(g, args: argparse.Namespace, report: Dict) -> None:
    import torch
    import torch.nn.functional as F
    import dgl

    ntype, mask = args.train_mask.split("/", 1)
    gpb = g.get_partition_book()
    own = int(gpb.partid)
    hetero = len(g.ntypes) > 1 or len(g.canonical_etypes) > 1
    first = g.ntypes[0]
    train = dgl.distributed.node_split(g.nodes[ntype].data[mask], gpb, ntype=ntype, force_even=True)
    report.update(partition=own, train_nodes=int(len(train)),
                  moved_seeds=int(np.count_nonzero(gpb.nid2partid(train, ntype).numpy() != own)))
    fanouts = [int(f) for f in args.fanouts.split(",")]
    sampler = dgl.dataloading.MultiLayerNeighborSampler(fanouts)
    loader = dgl.dataloading.DistNodeDataLoader(g, {ntype: train} if hetero else train, sampler,
                                                batch_size=args.batch_size, shuffle=True, drop_last=False)
    feat_dim = g.nodes[first].data["feat"].shape[1]
    model = torch.nn.parallel.DistributedDataParallel(
        _model(g.ntypes, g.canonical_etypes, feat_dim, args.hidden, args.classes), find_unused_parameters=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def parts(ids, t) -> np.ndarray:
        return gpb.nid2partid(ids, t).numpy() if len(ids) else np.zeros(0, dtype=np.int64)

    def fetch(t, ids):
        if len(ids) == 0:
            return torch.zeros((0, feat_dim))
        return g.nodes[t].data["feat"][ids]

    report["epochs"] = []
    for _ in range(args.epochs):
        torch.distributed.barrier()   # every trainer starts the epoch together: the counters cover it alone
        before, start = _net(args.iface), time.time()
        counts: Dict = add_counts({}, {})   # zeros: a trainer without a batch still reports
        losses: List[float] = []
        with model.join():   # trainers may get one batch more or less than others
            for input_nodes, seeds, blocks in loader:
                inputs, seeds = _as_dict(input_nodes, first), _as_dict(seeds, first)
                layers = [[parts(ids, t) for t, ids in _as_dict(b.dstdata[dgl.NID], first).items()] for b in blocks]
                add_counts(counts, batch_counts({t: parts(ids, t) for t, ids in inputs.items()}, layers,
                                                parts(seeds[ntype], ntype), own))
                x = {t: fetch(t, ids) for t, ids in inputs.items()}
                y = g.nodes[ntype].data["label"][seeds[ntype]]
                loss = F.cross_entropy(model(blocks, x)[ntype], y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss))
        seconds = time.time() - start
        torch.distributed.barrier()
        counts.update(net_delta(before, _net(args.iface)), seconds=round(seconds, 3),
                      mean_loss=round(float(np.mean(losses)), 4) if losses else None)
        report["epochs"].append(counts)


def main(argv: List[str]) -> int:
    args = _parse(argv)
    import torch
    import dgl

    dgl.distributed.initialize(args.ip_config)   # a server serves here until the trainers are done
    torch.distributed.init_process_group(backend="gloo")
    rank = torch.distributed.get_rank()
    torch.manual_seed(args.seed + rank)
    dgl.random.seed(args.seed + rank)
    report: Dict[str, object] = {"rank": rank, "pid": os.getpid()}
    try:
        g = dgl.distributed.DistGraph(args.graph_name)
        _train(g, args, report)
        report["ok"] = True
    except Exception:   # reported to the benchmark; the job stops instead of waiting at a barrier
        report["ok"] = False
        report["error"] = traceback.format_exc()
        print(report["error"], file=sys.stderr, flush=True)
    with open(f"{args.report}.{rank}", "w") as f:
        json.dump(report, f)
    if not report["ok"]:
        os._exit(1)
    torch.distributed.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
