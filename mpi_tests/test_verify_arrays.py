"""`distpart verify` checks every array DGL's loader and DistGraph read, against the input.

One test per array or property: each rewrites one file of a correct output as a well-formed
DGL file (dglformat's write_graph / write_tensor_dict, or plain JSON) whose content is wrong,
and expects verify's error to name that file and the problem (verify runs in the test's own
process, on one rank: `assert_verify_fails`). The correct output is made once for the
session (conftest's random_output); each test corrupts its own copy.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import pytest

from distpart.partitions.dglformat import read_graph, read_tensor_dict, write_graph, write_tensor_dict
from distpart.partitions.partbook import ranges_from_counts, type_of

# With test_verify, test_verify_arrays, test_report_plot: one worker makes their shared output.
pytestmark = pytest.mark.xdist_group("random_output")

Arrays = Dict[str, np.ndarray]


@pytest.fixture(scope="module")
def good_output(random_output, tmp_path_factory) -> Path:
    """The session's random 2-rank output of the example (conftest.random_output), copied."""
    out = tmp_path_factory.mktemp("verify_arrays") / "out"
    shutil.copytree(random_output, out)
    return out


@pytest.fixture
def out(good_output, tmp_path) -> Path:
    copy = tmp_path / "out"
    shutil.copytree(good_output, copy)
    return copy


def assert_verify_fails(example_dir: Path, out: Path, *expected: str) -> None:
    """verify finds the output wrong, and its error holds each of `expected` (file first,
    then the problem). In this process, as a world of one rank: each case is about what
    verify finds in one file; that a failed check stops every rank of `distpart verify`
    with status 2 and one line is what test_verify.py's cases check, on 2 ranks."""
    from mpi4py import MPI

    from distpart import steps
    from distpart.errors import DistpartError
    from distpart.mpi.exchange import DEFAULT_MAX_BYTES
    from distpart.run.stages import StageLog

    comm, log = MPI.COMM_SELF, StageLog()
    with pytest.raises(DistpartError) as failed:
        meta = steps.validate_input(comm, example_dir, log)
        assignment = steps.read_step1(comm, meta, out / "assignment", None, log)
        steps.verify_output(comm, meta, assignment, out, DEFAULT_MAX_BYTES, log)
    for text in expected:
        assert text in str(failed.value), f"expected {text!r} in:\n{failed.value}"


# ---------------------------------------------------------------- rewriting one file

def config(out: Path) -> dict:
    return json.loads((out / "metadata.json").read_text())


def node_counts(cfg: dict) -> np.ndarray:
    """(P, T) node counts of the config's node_map, types in type-ID order."""
    names = sorted(cfg["ntypes"], key=cfg["ntypes"].get)
    return np.array([[end - start for start, end in cfg["node_map"][n]] for n in names]).T


def rewrite_graph(path: Path, fn: Callable[[Arrays, Arrays], None]) -> None:
    """Rewrite graph.dgl's node and edge data in place (structure unchanged)."""
    g = read_graph(path)
    ndata = {k: np.array(v) for k, v in g.ndata.items()}
    edata = {k: np.array(v) for k, v in g.edata.items()}
    fn(ndata, edata)
    write_graph(path, g.num_nodes, g.src, g.dst, ndata, edata)


def rewrite_halo(out: Path, p: int, fn: Callable[[np.ndarray], np.ndarray]) -> None:
    """Replace partition p's halo node _IDs by fn(halo); edges keep their source _IDs, and
    the new halo nodes get the _TYPE node_map gives them."""
    path = out / f"part{p}" / "graph.dgl"
    g = read_graph(path)
    n_inner = int(g.ndata["inner_node"].sum())
    nid = np.asarray(g.ndata["_ID"])
    halo = fn(nid[n_inner:].copy())
    src = g.src.copy()
    outside = src >= n_inner
    pos = {int(x): i for i, x in enumerate(halo)}
    src[outside] = n_inner + np.array([pos[int(x)] for x in nid[src[outside]]], dtype=np.int64)
    new_nid = np.concatenate([nid[:n_inner], halo])
    counts = node_counts(config(out))
    ndata = {"_ID": new_nid,
             "_TYPE": type_of(new_nid, counts).astype(np.int32),
             "inner_node": (np.arange(len(new_nid)) < n_inner).astype(np.uint8)}
    write_graph(path, len(new_nid), src, g.dst, ndata, {k: np.array(v) for k, v in g.edata.items()})


def rewrite_tensors(path: Path, fn: Callable[[Arrays], None]) -> None:
    tensors = {k: np.array(v) for k, v in read_tensor_dict(path).items()}
    fn(tensors)
    write_tensor_dict(path, tensors)


def rewrite_config(out: Path, fn: Callable[[dict], None]) -> None:
    cfg = config(out)
    fn(cfg)
    (out / "metadata.json").write_text(json.dumps(cfg))


# ---------------------------------------------------------------- graph.dgl: every array present

@pytest.mark.parametrize("kind,key", [("node", "_ID"), ("node", "_TYPE"), ("node", "inner_node"),
                                      ("edge", "_ID"), ("edge", "_TYPE"), ("edge", "inner_edge")])
def test_graph_array_missing(kind, key, out, example_dir):
    rewrite_graph(out / "part1" / "graph.dgl", lambda nd, ed: (nd if kind == "node" else ed).pop(key))
    assert_verify_fails(example_dir, out, f"part1/graph.dgl: has no {kind} data '{key}'")


# ---------------------------------------------------------------- graph.dgl: node data

def test_node_id_outside_num_nodes(out, example_dir):
    num_nodes = config(out)["num_nodes"]
    # An unused halo node whose _TYPE is what node_map gives its ID: the range alone must catch it.
    rewrite_halo(out, 2, lambda halo: np.concatenate([halo, [num_nodes]]))
    assert_verify_fails(example_dir, out, f"part2/graph.dgl: node _ID {num_nodes} (local node ",
                        f"is outside [0, {num_nodes}), the number of nodes")


def test_node_id_dtype(out, example_dir):
    rewrite_graph(out / "part0" / "graph.dgl", lambda nd, ed: nd.update(_ID=nd["_ID"].astype(np.int32)))
    assert_verify_fails(example_dir, out, "part0/graph.dgl: node data '_ID' is int32 of shape")


def test_node_type_dtype(out, example_dir):
    rewrite_graph(out / "part3" / "graph.dgl", lambda nd, ed: nd.update(_TYPE=nd["_TYPE"].astype(np.float32)))
    assert_verify_fails(example_dir, out, "part3/graph.dgl: node data '_TYPE' is float32 of shape")


def test_inner_node_dtype(out, example_dir):
    rewrite_graph(out / "part1" / "graph.dgl",
                  lambda nd, ed: nd.update(inner_node=nd["inner_node"].astype(np.int64)))
    assert_verify_fails(example_dir, out, "part1/graph.dgl: node data 'inner_node' is int64 of shape")


def _part_ids(out: Path, nid: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.cumsum(node_counts(config(out)).sum(axis=1)), nid, side="right")


def test_part_id_wrong(out, example_dir):
    def add(nd, ed):
        nd["part_id"] = _part_ids(out, nd["_ID"])
        nd["part_id"][-1] = 2                   # a halo node: owned elsewhere, marked as ours
    rewrite_graph(out / "part2" / "graph.dgl", add)
    assert_verify_fails(example_dir, out, "part2/graph.dgl: part_id of node _ID",
                        "is 2, but node_map puts it in partition")


def test_part_id_dtype(out, example_dir):
    rewrite_graph(out / "part0" / "graph.dgl",
                  lambda nd, ed: nd.update(part_id=_part_ids(out, nd["_ID"]).astype(np.float64)))
    assert_verify_fails(example_dir, out, "part0/graph.dgl: node data 'part_id' is float64 of shape")


# ---------------------------------------------------------------- graph.dgl: the halo set

def test_halo_node_no_edge_uses(out, example_dir):
    cfg = config(out)
    own = cfg["node_map"]["paper"][0]           # partition 0's papers are never partition 1's halo

    def add_unused(halo):
        extra = next(i for i in range(*own) if i not in set(halo.tolist()))
        return np.sort(np.concatenate([halo, [extra]]))
    rewrite_halo(out, 1, add_unused)
    assert_verify_fails(example_dir, out, "part1/graph.dgl: halo node _ID ",
                        "is the source of no edge of this partition")


def test_halo_not_ascending(out, example_dir):
    rewrite_halo(out, 3, lambda halo: halo[[1, 0, *range(2, len(halo))]])
    assert_verify_fails(example_dir, out, "part3/graph.dgl: halo nodes are not in ascending _ID order")


# ---------------------------------------------------------------- graph.dgl: edge data

def test_edge_id_dtype(out, example_dir):
    rewrite_graph(out / "part2" / "graph.dgl", lambda nd, ed: ed.update(_ID=ed["_ID"].astype(np.int32)))
    assert_verify_fails(example_dir, out, "part2/graph.dgl: edge data '_ID' is int32 of shape")


def test_edge_type_dtype(out, example_dir):
    rewrite_graph(out / "part1" / "graph.dgl", lambda nd, ed: ed.update(_TYPE=ed["_TYPE"].astype(np.float32)))
    assert_verify_fails(example_dir, out, "part1/graph.dgl: edge data '_TYPE' is float32 of shape")


def test_inner_edge_cleared(out, example_dir):
    def clear(nd, ed):
        ed["inner_edge"][5] = 0
    rewrite_graph(out / "part0" / "graph.dgl", clear)
    assert_verify_fails(example_dir, out, "part0/graph.dgl: inner_edge of edge _ID ",
                        "is 0, but every edge of a partition is its own (1)")


def test_inner_edge_dtype(out, example_dir):
    rewrite_graph(out / "part3" / "graph.dgl",
                  lambda nd, ed: ed.update(inner_edge=ed["inner_edge"].astype(np.int32)))
    assert_verify_fails(example_dir, out, "part3/graph.dgl: edge data 'inner_edge' is int32 of shape")


# ---------------------------------------------------------------- orig_nids.dgl / orig_eids.dgl

@pytest.mark.parametrize("file,key,count", [("orig_nids.dgl", "paper", 2000),
                                            ("orig_eids.dgl", "paper:cites:paper", 3000)])
def test_orig_ids_outside_type_count(file, key, count, out, example_dir):
    def bump(t):
        t[key][4] = count
    rewrite_tensors(out / "part1" / file, bump)
    assert_verify_fails(example_dir, out, f"part1/{file}: '{key}' holds ID {count}, outside [0, {count})")


@pytest.mark.parametrize("file,key", [("orig_nids.dgl", "author"), ("orig_eids.dgl", "author:writes:paper")])
def test_orig_ids_dtype(file, key, out, example_dir):
    rewrite_tensors(out / "part2" / file, lambda t: t.update({key: t[key].astype(np.int32)}))
    assert_verify_fails(example_dir, out, f"part2/{file}: '{key}' is int32 of shape")


# ---------------------------------------------------------------- feature dicts: nothing extra

def test_feature_not_in_input(out, example_dir):
    """DistGraph would serve it as a feature of the graph; the same check covers edge_feat.dgl
    and the orig ID dicts."""
    rewrite_tensors(out / "part0" / "node_feat.dgl",
                    lambda t: t.update({"paper/extra": np.zeros(len(t["paper/feat"]), np.float32)}))
    assert_verify_fails(example_dir, out, "part0/node_feat.dgl: has tensor 'paper/extra', "
                                          "which the input does not have")


# ---------------------------------------------------------------- metadata.json: the partition book

def test_node_map_counts_differ_from_assignment(out, example_dir):
    """Contiguous, covering, each type's total right: only the split between partitions
    is wrong (one author and one paper trade places between partitions 0 and 1)."""
    def move(cfg):
        names = sorted(cfg["ntypes"], key=cfg["ntypes"].get)
        counts = node_counts(cfg)
        a, p = names.index("author"), names.index("paper")
        counts[0, a] += 1
        counts[0, p] -= 1
        counts[1, a] -= 1
        counts[1, p] += 1
        cfg["node_map"] = ranges_from_counts(counts, names)
    rewrite_config(out, move)
    assert_verify_fails(example_dir, out, "metadata.json: node_map gives partition 0 251 nodes of type "
                                          "'author', but the assignment puts 250 there")

