"""Run under a Python with DGL 2.x: dump what DGL loads from a partition output to .npz files.

    python dgl_dump.py CONFIG_JSON DUMP_DIR [--distgraph]

Per partition, DUMP_DIR/part{p}.npz holds the graph's edges and ndata/edata, every node and
edge feature, orig_nids/orig_eids (via dgl.data.load_tensors) and the partition book's
answers for every node and edge ID. With --distgraph (a 1-partition output) it also opens a
standalone DistGraph and dumps every feature read through it, plus a neighbour sample.
"""
import os
import sys

import numpy as np


def main() -> None:
    config, dump_dir = sys.argv[1], sys.argv[2]
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import torch

    os.makedirs(dump_dir, exist_ok=True)
    num_parts = None
    p = 0
    while num_parts is None or p < num_parts:
        g, nfeat, efeat, gpb, name, ntypes, etypes = dgl.distributed.load_partition(config, p)
        num_parts = gpb.num_partitions()
        created = g.formats()["created"]  # before edges(), which may build COO
        src, dst = g.edges(order="eid")
        out = {"src": src, "dst": dst, "num_nodes": torch.tensor([g.num_nodes()])}
        out.update({f"ndata:{k}": v for k, v in g.ndata.items()})
        out.update({f"edata:{k}": v for k, v in g.edata.items()})
        out.update({f"nfeat:{k}": v for k, v in nfeat.items()})
        out.update({f"efeat:{k}": v for k, v in efeat.items()})
        for kind in ("nids", "eids"):
            path = os.path.join(os.path.dirname(config), f"part{p}", f"orig_{kind}.dgl")
            out.update({f"orig_{kind}:{k}": v for k, v in dgl.data.load_tensors(path).items()})
        out["book:nid2partid"] = gpb.nid2partid(g.ndata["_ID"])
        out["book:per_ntype_type"], out["book:per_ntype_id"] = gpb.map_to_per_ntype(g.ndata["_ID"])
        out["book:per_etype_type"], out["book:per_etype_id"] = gpb.map_to_per_etype(g.edata["_ID"])
        out["meta:ntypes"] = np.array(ntypes)
        out["meta:etypes"] = np.array([":".join(e) if isinstance(e, tuple) else e for e in etypes])
        out["meta:graph_name"] = np.array([name])
        out["meta:formats"] = np.array(sorted(created))
        np.savez(os.path.join(dump_dir, f"part{p}.npz"),
                 **{k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in out.items()})
        p += 1
    if "--distgraph" in sys.argv:
        os.environ["DGL_DIST_MODE"] = "standalone"
        dgl.distributed.initialize(None)
        dg = dgl.distributed.DistGraph(name, part_config=config)
        out = {}
        for nt in dg.ntypes:
            ids = torch.arange(dg.num_nodes(nt))
            for f in dg.nodes[nt].data.keys():
                out[f"dist_nfeat:{nt}/{f}"] = dg.nodes[nt].data[f][ids]
        for et in dg.canonical_etypes:
            ids = torch.arange(dg.num_edges(et))
            for f in dg.edges[et].data.keys():
                out[f"dist_efeat:{':'.join(et)}/{f}"] = dg.edges[et].data[f][ids]
        sg = dgl.distributed.sample_neighbors(dg, {dg.ntypes[1]: torch.arange(10)}, 2)
        out["dist_sample_edges"] = torch.tensor([sg.num_edges()])
        np.savez(os.path.join(dump_dir, "distgraph.npz"), **{k: v.numpy() for k, v in out.items()})
    print("dumped", num_parts, "partitions")


if __name__ == "__main__":
    main()
