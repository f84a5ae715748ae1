"""Checking a partition output against the input with a serial, whole-graph reference.

This is deliberately independent of the pipeline's code paths: the input is read by
`synthetic.read_whole_graph` (plain numpy/pyarrow/h5py), the assignment with numpy, and
the output through the public loader, so a bug shared by dispatch and verify still shows.
Also: a graph rebuilt from partitions (`restore_graph`), what real DGL reads of them
(`dgl_dump`), and the comparison of two runs' assignment files.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from distpart import load_orig_ids, load_partition
from distpart.chunked.write import describe_graph
from distpart.partitions.dglformat import read_graph, read_tensor_dict, write_graph
from distpart.synthetic import read_whole_graph
from harness import DRIVERS


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
        inner = g.ndata["inner_node"].astype(bool)
        assert inner[g.dst].all(), "an edge is not kept by its destination's owner"
        for e, s_name, d_name, src_new, dst_new, e_new in typed_edges(g, gpb, ntypes, etypes):
            orig_e = orig_eid_of_new[e][e_new]
            np.testing.assert_array_equal(orig_of_new[s_name][src_new], ref["edges"][e][0][orig_e])
            np.testing.assert_array_equal(orig_of_new[d_name][dst_new], ref["edges"][e][1][orig_e])
            edges_seen[e] += len(e_new)
    for e in etypes:
        assert edges_seen[e] == len(ref["edges"][e][0]), f"edges of {e} lost or duplicated"
    return {"num_nodes": config["num_nodes"], "num_edges": config["num_edges"]}


def tree_bytes(root: Path) -> Dict[str, bytes]:
    """Every file under root, by relative path."""
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assignment_files(out: Path) -> Dict[str, bytes]:
    """Step 1's result: OUT/assignment's files (the per-type .txt files, partition_meta.json),
    without the run records (.distpart-*), which name the run and its options."""
    folder = Path(out) / "assignment"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


def assert_same_assignment(got: Dict[str, bytes], plain: Dict[str, bytes], template: str) -> None:
    assert sorted(got) == sorted(plain), f"{template}: other assignment files than the plain command's"
    differ = [name for name in plain if got[name] != plain[name]]
    assert not differ, (f"{template} partitions differently from the plain command: {differ} differ "
                        f"(partition_meta.json: {got.get('partition_meta.json', b'').decode()!r})")


def typed_edges(g: Any, gpb: Any, ntypes: List[str], etypes: List[str]):
    """Per edge type of one loaded partition: (etype, src type, dst type, per-type new IDs of
    the sources and destinations, per-type new edge IDs), each edge's endpoint types checked."""
    nid = g.ndata["_ID"]
    src_t, src_new = gpb.map_to_per_ntype(nid[g.src])
    dst_t, dst_new = gpb.map_to_per_ntype(nid[g.dst])
    e_t, e_new = gpb.map_to_per_etype(g.edata["_ID"])
    for ei, e in enumerate(etypes):
        sel = e_t == ei
        s, _, d = e.split(":")
        assert (src_t[sel] == ntypes.index(s)).all() and (dst_t[sel] == ntypes.index(d)).all()
        yield e, s, d, src_new[sel], dst_new[sel], e_new[sel]


def restore_graph(out_dir: Path) -> Dict[str, Any]:
    """The original graph, rebuilt from a partition output through distpart's loader only:
    {"num_nodes": {ntype: n}, "edges": {etype: (src, dst)}, "node_feats": {(ntype, name): a},
    "edge_feats": {(etype, name): a}} in original IDs (edges in original edge-ID order)."""
    config_path = Path(out_dir) / "metadata.json"
    config = json.loads(config_path.read_text())
    num_parts = config["num_parts"]
    ntypes = sorted(config["ntypes"], key=config["ntypes"].get)
    etypes = sorted(config["etypes"], key=config["etypes"].get)
    parts = [load_partition(str(config_path), p) for p in range(num_parts)]
    ids = [load_orig_ids(str(config_path), p) for p in range(num_parts)]
    empty = np.empty(0, np.int64)
    # New per-type IDs run over the partitions in order: orig IDs concatenated are the maps.
    orig_nid = {t: np.concatenate([i[0].get(t, empty) for i in ids]) for t in ntypes}
    orig_eid = {e: np.concatenate([i[1].get(e, empty) for i in ids]) for e in etypes}

    def restored(shuffled: np.ndarray, orig: np.ndarray) -> np.ndarray:
        out = np.empty_like(shuffled)
        out[orig] = shuffled
        return out

    node_feats, edge_feats = {}, {}
    for key in parts[0][1]:
        t, name = key.split("/", 1)
        node_feats[(t, name)] = restored(np.concatenate([p[1][key] for p in parts]), orig_nid[t])
    for key in parts[0][2]:
        e, name = key.split("/", 1)
        edge_feats[(e, name)] = restored(np.concatenate([p[2][key] for p in parts]), orig_eid[e])
    edges = {e: (np.full(len(orig_eid[e]), -1, np.int64), np.full(len(orig_eid[e]), -1, np.int64)) for e in etypes}
    for g, _, _, gpb, _, _, _ in parts:
        for e, s, d, src_new, dst_new, e_new in typed_edges(g, gpb, ntypes, etypes):
            orig = orig_eid[e][e_new]
            assert (edges[e][0][orig] == -1).all(), f"an edge of {e} is stored twice"
            edges[e][0][orig] = orig_nid[s][src_new]
            edges[e][1][orig] = orig_nid[d][dst_new]
    for e in etypes:
        assert (edges[e][0] >= 0).all(), f"an edge of {e} is missing"
    return {"num_nodes": {t: len(orig_nid[t]) for t in ntypes}, "edges": edges,
            "node_feats": node_feats, "edge_feats": edge_feats}


def assert_same_graph(got: Dict[str, Any], graph: Any, stored: bool = True) -> None:
    """`got` (read_whole_graph's or restore_graph's form) holds exactly `graph` (a description;
    see chunk.describe_graph): counts, every edge in order, every feature with its dtype.
    `stored`: features as the partition format stores them (`storable`), else as given."""
    want = describe_graph(graph)
    assert got["num_nodes"] == want.num_nodes
    assert list(got["edges"]) == list(want.edges) if not stored else set(got["edges"]) == set(want.edges)
    for e, (src, dst) in want.edges.items():
        np.testing.assert_array_equal(got["edges"][e][0], src)
        np.testing.assert_array_equal(got["edges"][e][1], dst)
        assert got["edges"][e][0].dtype == np.int64
    want_nf = {(t, n): v for t, f in want.node_data.items() for n, v in f.items()}
    want_ef = {(e, n): v for e, f in want.edge_data.items() for n, v in f.items()}
    assert set(got["node_feats"]) == set(want_nf) and set(got["edge_feats"]) == set(want_ef)
    for ours, theirs in ((got["node_feats"], want_nf), (got["edge_feats"], want_ef)):
        for key, values in theirs.items():
            expected = storable(values) if stored else values
            np.testing.assert_array_equal(ours[key], expected, err_msg=str(key))
            assert ours[key].dtype == expected.dtype, key


def assert_restores(out_dir: Path, graph: Any) -> None:
    """The partitions in `out_dir` hold exactly `graph` (a description; see chunk.describe_graph)."""
    assert_same_graph(restore_graph(out_dir), graph)


def dgl_dump(python: str, out_dir: Path, dump_dir: Path) -> Dict[int, Any]:
    """What real DGL's load_partition reads from each partition (mpi_tests/drivers/dgl_dump.py)."""
    run = subprocess.run([python, str(DRIVERS / "dgl_dump.py"), str(out_dir / "metadata.json"), str(dump_dir)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    num_parts = json.loads((out_dir / "metadata.json").read_text())["num_parts"]
    return {p: np.load(dump_dir / f"part{p}.npz") for p in range(num_parts)}


def _values(spec: dict[str, Any]) -> np.ndarray:
    return np.array(spec["values"], dtype=spec["dtype"]).reshape(spec["shape"])


def _assert_values(arr: np.ndarray, spec: dict[str, Any], what: str) -> None:
    assert str(arr.dtype) == spec["dtype"] and list(arr.shape) == spec["shape"], what
    np.testing.assert_array_equal(arr, _values(spec), what)


def check_dgl_written_files(folder: Path, scratch: Path) -> None:
    """Compare distpart's reader and writer with the files DGL wrote into `folder`.

    `folder` holds the output of `tests/dgl_check.py --save-fixtures`: graph files in
    several sparse formats and ID types, a tensor dict, and expected.json with the
    values DGL reads back from them. distpart's own file goes to `scratch`.
    """
    expected = json.loads((folder / "expected.json").read_text())
    for name, want in expected["graphs"].items():
        graph = read_graph(folder / name)
        assert graph.num_nodes == want["num_nodes"], name
        # DGL hands back the graph's ID type (int32 for .int() graphs); distpart int64.
        assert graph.src.dtype == graph.dst.dtype == np.int64
        np.testing.assert_array_equal(graph.src, _values(want["src"]), name)
        np.testing.assert_array_equal(graph.dst, _values(want["dst"]), name)
        for ours, theirs in ((graph.ndata, want["ndata"]), (graph.edata, want["edata"])):
            assert sorted(ours) == sorted(theirs), name
            for key, spec in theirs.items():
                _assert_values(ours[key], spec, f"{name}: {key}")

    for mmap in (False, True):
        tensors = read_tensor_dict(folder / "tensors.dgl", mmap=mmap)
        assert sorted(tensors) == sorted(expected["tensors.dgl"])
        for key, spec in expected["tensors.dgl"].items():
            _assert_values(tensors[key], spec, f"tensors.dgl: {key}")

    # Same graph written by distpart: DGL's bytes exactly, past the header's used part,
    # in every sparse format DGL's save_graphs can be asked for.
    single = expected["graph_coo_single.dgl"]
    for formats in (["coo"], ["csr"], ["csc"], ["coo", "csr", "csc"]):
        name = f"graph_{'_'.join(formats)}_single.dgl"
        ours_path = scratch / f"distpart_{name}"
        write_graph(
            ours_path,
            single["num_nodes"],
            _values(single["src"]),
            _values(single["dst"]),
            {k: _values(v) for k, v in single["ndata"].items()},
            {k: _values(v) for k, v in single["edata"].items()},
            formats=formats,
        )
        mine, dgls = ours_path.read_bytes(), (folder / name).read_bytes()
        assert mine[:32] == dgls[:32] and mine[4096:] == dgls[4096:], name
        graph = read_graph(ours_path)
        np.testing.assert_array_equal(graph.src, _values(single["src"]), name)
        np.testing.assert_array_equal(graph.dst, _values(single["dst"]), name)
