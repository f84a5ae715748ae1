"""Checking a partition output against the input with a serial, whole-graph reference.

This is deliberately independent of the pipeline's code paths: the input is read by
`synthetic.read_whole_graph` (plain numpy/pyarrow/h5py), the assignment with numpy, and
the output through the public loader, so a bug shared by dispatch and verify still shows.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import numpy as np

from distpart import load_orig_ids, load_partition
from distpart.synthetic import read_whole_graph


def storable(a: np.ndarray) -> np.ndarray:
    """The dtype DGL's loader can hold (the documented widening rules)."""
    widen = {np.dtype(bool): np.uint8, np.dtype(np.uint16): np.int32,
             np.dtype(np.uint32): np.int64, np.dtype(np.uint64): np.int64}
    return a.astype(widen.get(a.dtype, a.dtype))


def read_assignment_files(assign_dir: Path, ntypes) -> Dict[str, np.ndarray]:
    # Test-only reading (numpy, independent of the pipeline); an empty type has an empty file.
    return {t: np.array((Path(assign_dir) / f"{t}.txt").read_text().split(), dtype=np.int64) for t in ntypes}


def check_output(in_dir: Path, assign_dir: Path, out_dir: Path) -> dict:
    """Assert the output is exactly the input partitioned by the assignment; returns counts."""
    ref = read_whole_graph(Path(in_dir) / "metadata.json")
    config_path = Path(out_dir) / "metadata.json"
    config = json.loads(config_path.read_text())
    num_parts = config["num_parts"]
    ntypes = sorted(config["ntypes"], key=config["ntypes"].get)
    etypes = sorted(config["etypes"], key=config["etypes"].get)
    assign = read_assignment_files(assign_dir, ntypes)

    parts = [load_partition(str(config_path), p) for p in range(num_parts)]
    ids = [load_orig_ids(str(config_path), p) for p in range(num_parts)]
    # Per-type new IDs run over partitions in order, so concatenating orig IDs over
    # partitions gives orig ID by per-type new ID.
    orig_of_new = {t: np.concatenate([ids[p][0][t] for p in range(num_parts)]) for t in ntypes}
    orig_eid_of_new = {e: np.concatenate([ids[p][1][e] for p in range(num_parts)]) for e in etypes}
    for t in ntypes:
        n = ref["num_nodes"][t]
        assert np.array_equal(np.sort(orig_of_new[t]), np.arange(n)), f"orig_nids of {t} not a permutation"
    for e in etypes:
        m = len(ref["edges"][e][0])
        assert np.array_equal(np.sort(orig_eid_of_new[e]), np.arange(m)), f"orig_eids of {e} not a permutation"

    edges_seen = {e: 0 for e in etypes}
    for p, (g, nfeat, efeat, gpb, _, _, _) in enumerate(parts):
        orig_nids, orig_eids = ids[p]
        for t in ntypes:
            assert (assign[t][orig_nids[t]] == p).all(), f"node of {t} in partition {p} against the assignment"
            for (owner, f), values in ref["node_feats"].items():
                if owner == t:
                    np.testing.assert_array_equal(nfeat[f"{t}/{f}"], storable(values[orig_nids[t]]))
        for e in etypes:
            for (owner, f), values in ref["edge_feats"].items():
                if owner == e:
                    np.testing.assert_array_equal(efeat[f"{e}/{f}"], storable(values[orig_eids[e]]))
        nid = g.ndata["_ID"]
        inner = g.ndata["inner_node"].astype(bool)
        assert inner[g.dst].all(), "an edge is not kept by its destination's owner"
        src_t, src_new = gpb.map_to_per_ntype(nid[g.src])
        dst_t, dst_new = gpb.map_to_per_ntype(nid[g.dst])
        e_t, e_new = gpb.map_to_per_etype(g.edata["_ID"])
        for ei, e in enumerate(etypes):
            sel = e_t == ei
            s_name, _, d_name = e.split(":")
            assert (src_t[sel] == ntypes.index(s_name)).all() and (dst_t[sel] == ntypes.index(d_name)).all()
            orig_e = orig_eid_of_new[e][e_new[sel]]
            np.testing.assert_array_equal(orig_of_new[s_name][src_new[sel]], ref["edges"][e][0][orig_e])
            np.testing.assert_array_equal(orig_of_new[d_name][dst_new[sel]], ref["edges"][e][1][orig_e])
            edges_seen[e] += int(sel.sum())
    for e in etypes:
        assert edges_seen[e] == len(ref["edges"][e][0]), f"edges of {e} lost or duplicated"
    return {"num_nodes": config["num_nodes"], "num_edges": config["num_edges"]}


def tree_bytes(root: Path) -> Dict[str, bytes]:
    """Every file under root, by relative path."""
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
