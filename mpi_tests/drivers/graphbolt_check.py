"""DGL-side checks of distpart's GraphBolt output, run under the DGL environment's Python.

    graphbolt_check.py convert-and-compare OURS_CONFIG THEIRS_CONFIG [--store-eids]
        [--store-inner-node] [--store-inner-edge]

THEIRS_CONFIG is a copy of distpart's output without GraphBolt files: DGL 2.1.0's
`dgl_partition_to_graphbolt` converts it here, then every partition's graph from both is
loaded with torch and compared tensor by tensor (names, dtypes, values), and DGL's
`load_partition(..., use_graphbolt=True)` loads ours (with DGL's own consistency checks,
DGL_DIST_DEBUG, when edge IDs are stored: they need them). Prints one JSON line.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

import torch
from dgl.distributed import load_partition
from dgl.distributed.partition import dgl_partition_to_graphbolt


def _same(a: Any, b: Any, what: str) -> None:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        assert a is not None and b is not None, f"{what}: one side is None"
        assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
        assert torch.equal(a, b), f"{what}: values differ"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), f"{what}: keys {list(a)} != {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{what}[{k}]")
    else:
        assert a == b, f"{what}: {a!r} != {b!r}"


def convert_and_compare(ours: str, theirs: str, flags: List[str]) -> Dict[str, Any]:
    dgl_partition_to_graphbolt(theirs, store_eids="--store-eids" in flags,
                               store_inner_node="--store-inner-node" in flags,
                               store_inner_edge="--store-inner-edge" in flags)
    config = json.load(open(ours))
    loaded, homogeneous = 0, False
    for p in range(config["num_parts"]):
        paths = [os.path.join(os.path.dirname(c), json.load(open(c))[f"part-{p}"]["part_graph_graphbolt"])
                 for c in (ours, theirs)]
        a, b = (torch.load(path) for path in paths)
        assert type(a).__name__ == "FusedCSCSamplingGraph", type(a)
        for attr in ("csc_indptr", "indices", "node_type_offset", "type_per_edge", "node_type_to_id",
                     "edge_type_to_id", "node_attributes", "edge_attributes", "total_num_nodes",
                     "total_num_edges"):
            _same(getattr(a, attr), getattr(b, attr), f"part{p}.{attr}")
        homogeneous = a.node_type_to_id is None
        if "--store-eids" in flags:
            os.environ["DGL_DIST_DEBUG"] = "1"   # load_partition then checks every edge's types
        g, nfeat, efeat, gpb, name, ntypes, etypes = load_partition(ours, p, use_graphbolt=True)
        os.environ.pop("DGL_DIST_DEBUG", None)
        assert type(g).__name__ == "FusedCSCSamplingGraph" and gpb.partid == p
        assert g.total_num_nodes == len(g.node_attributes["_ID"])
        loaded += 1
    return {"parts": config["num_parts"], "same_tensors": True, "loaded": loaded, "homogeneous": homogeneous}


def main(argv: List[str]) -> int:
    if argv[0] != "convert-and-compare":
        raise SystemExit(f"unknown command {argv[0]}")
    print(json.dumps(convert_and_compare(argv[1], argv[2], argv[3:])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
