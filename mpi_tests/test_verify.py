"""`distpart verify` passes a good output and catches each kind of corruption."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness import distpart
from distpart.partitions.dglformat import read_graph, read_tensor_dict, write_graph, write_tensor_dict

# With test_verify, test_verify_arrays, test_report_plot: one worker makes their shared output.
pytestmark = pytest.mark.xdist_group("random_output")


@pytest.fixture(scope="module")
def good_output(random_output, tmp_path_factory) -> Path:
    """The session's random 2-rank output of the example (conftest.random_output), copied."""
    out = tmp_path_factory.mktemp("verify") / "out"
    shutil.copytree(random_output, out)
    return out


def _rewrite_tensors(path: Path, fn) -> None:
    tensors = {k: np.array(v) for k, v in read_tensor_dict(path).items()}
    fn(tensors)
    write_tensor_dict(path, tensors)


def _rewrite_graph(path: Path, fn) -> None:
    g = read_graph(path)
    ndata = {k: np.array(v) for k, v in g.ndata.items()}
    edata = {k: np.array(v) for k, v in g.edata.items()}
    fn(ndata, edata)
    write_graph(path, g.num_nodes, g.src, g.dst, ndata, edata)


def _change_feature_value(out: Path) -> str:
    def bump(t):
        t["paper/feat"][3, 5] += 1.0
    _rewrite_tensors(out / "part1" / "node_feat.dgl", bump)
    return "feature 'paper/feat' of item"


def _change_edge_feature_value(out: Path) -> str:
    def bump(t):
        t["author:writes:paper/year"][0] ^= 1
    _rewrite_tensors(out / "part2" / "edge_feat.dgl", bump)
    return "feature 'author:writes:paper/year' of item"


def _swap_orig_nids(out: Path) -> str:
    def swap(t):
        t["paper"][[0, 1]] = t["paper"][[1, 0]]
    _rewrite_tensors(out / "part0" / "orig_nids.dgl", swap)
    # Nodes are checked before edges: the first disagreement is the paper feature row.
    return "feature 'paper/feat' of item 0 differs from the input"


def _swap_orig_eids(out: Path) -> str:
    def swap(t):
        t["paper:cites:paper"][[0, 1]] = t["paper:cites:paper"][[1, 0]]
    _rewrite_tensors(out / "part3" / "orig_eids.dgl", swap)
    return "of type 'paper:cites:paper'"


def _shift_node_map(out: Path) -> str:
    config = json.loads((out / "metadata.json").read_text())
    config["node_map"]["paper"][1][0] += 1
    config["node_map"]["author"][1][1] += 1
    (out / "metadata.json").write_text(json.dumps(config))
    return "metadata.json"


def _flip_inner_node(out: Path) -> str:
    def flip(ndata, edata):
        ndata["inner_node"][7] = 0
    _rewrite_graph(out / "part2" / "graph.dgl", flip)
    return "part2/graph.dgl: inner_node flags disagree with node_map"


def _drop_edge_feature(out: Path) -> str:
    _rewrite_tensors(out / "part0" / "edge_feat.dgl", lambda t: t.pop("paper:cites:paper/weight"))
    return "part0/edge_feat.dgl: has no tensor 'paper:cites:paper/weight'"


def _missing_config(out: Path) -> str:
    (out / "metadata.json").unlink()
    return "metadata.json: does not exist"


def _feature_dtype_widened(out: Path) -> str:
    for p in range(4):
        _rewrite_tensors(out / f"part{p}" / "node_feat.dgl",
                         lambda t: t.update({"paper/feat": t["paper/feat"].astype(np.float64)}))
        _rewrite_tensors(out / f"part{p}" / "edge_feat.dgl",
                         lambda t: t.update({"author:writes:paper/year": t["author:writes:paper/year"].astype(np.int64)}))
    return "'paper/feat' has dtype float64 and row shape (8,), but the input gives float32 and (8,)"


def _feature_dtype_in_one_partition(out: Path) -> str:
    _rewrite_tensors(out / "part3" / "node_feat.dgl",
                     lambda t: t.update({"paper/feat": t["paper/feat"].astype(np.float64)}))
    return "part3/node_feat.dgl: 'paper/feat' has dtype float64"


def _feature_row_shape(out: Path) -> str:
    _rewrite_tensors(out / "part1" / "node_feat.dgl",
                     lambda t: t.update({"paper/feat": t["paper/feat"][:, :4].copy()}))
    return "part1/node_feat.dgl: 'paper/feat' has dtype float32 and row shape (4,), but the input gives float32 and (8,)"


def _duplicated_halo_node(out: Path) -> str:
    g = read_graph(out / "part0" / "graph.dgl")
    ndata = {k: np.array(v) for k, v in g.ndata.items()}
    edata = {k: np.array(v) for k, v in g.edata.items()}
    inner = int(ndata["inner_node"].sum())
    dup = {k: np.concatenate([v, v[inner:inner + 1]]) for k, v in ndata.items()}
    write_graph(out / "part0" / "graph.dgl", g.num_nodes + 1, g.src, g.dst, dup, edata)
    return "part0/graph.dgl: a halo node appears more than once"


def _dropped_edge(out: Path) -> str:
    g = read_graph(out / "part1" / "graph.dgl")
    keep = np.arange(1, len(g.src))
    write_graph(out / "part1" / "graph.dgl", g.num_nodes, g.src[keep], g.dst[keep],
                {k: np.array(v) for k, v in g.ndata.items()},
                {k: np.array(v)[keep] for k, v in g.edata.items()})
    return "part1/graph.dgl: edge _ID are not the edge_map range"


def _duplicated_edge(out: Path) -> str:
    g = read_graph(out / "part2" / "graph.dgl")
    keep = np.concatenate([np.arange(len(g.src)), [0]])
    write_graph(out / "part2" / "graph.dgl", g.num_nodes, g.src[keep], g.dst[keep],
                {k: np.array(v) for k, v in g.ndata.items()},
                {k: np.array(v)[keep] for k, v in g.edata.items()})
    return "part2/graph.dgl: edge _ID are not the edge_map range"


def _changed_node_type(out: Path) -> str:
    def change(ndata, edata):
        ndata["_TYPE"][0] = (ndata["_TYPE"][0] + 1) % 3
    _rewrite_graph(out / "part1" / "graph.dgl", change)
    return "part1/graph.dgl: node _TYPE disagrees with node_map"


def _changed_edge_type(out: Path) -> str:
    def change(ndata, edata):
        edata["_TYPE"][0] = (edata["_TYPE"][0] + 1) % 4
    _rewrite_graph(out / "part3" / "graph.dgl", change)
    return "part3/graph.dgl: edge _TYPE disagrees with edge_map"


def _claimed_twice(out: Path) -> str:
    def twice(t):
        t["paper:cites:paper"][1] = t["paper:cites:paper"][0]   # one edge claimed twice, another never
    _rewrite_tensors(out / "part3" / "orig_eids.dgl", twice)
    return "of type 'paper:cites:paper' is kept"


def _rewired_edge(out: Path) -> str:
    g = read_graph(out / "part1" / "graph.dgl")
    inner = int(np.asarray(g.ndata["inner_node"]).sum())
    dst = np.array(g.dst)
    dst[0] = (dst[0] + 1) % inner   # still an owned node, but not the input's
    write_graph(out / "part1" / "graph.dgl", g.num_nodes, g.src, dst,
                {k: np.array(v) for k, v in g.ndata.items()}, {k: np.array(v) for k, v in g.edata.items()})
    return "connects the wrong nodes (input"


CORRUPTIONS = {
    "claimed_twice": _claimed_twice,
    "rewired_edge": _rewired_edge,
    "feature_dtype_widened": _feature_dtype_widened,
    "feature_dtype_in_one_partition": _feature_dtype_in_one_partition,
    "feature_row_shape": _feature_row_shape,
    "duplicated_halo_node": _duplicated_halo_node,
    "dropped_edge": _dropped_edge,
    "duplicated_edge": _duplicated_edge,
    "changed_node_type": _changed_node_type,
    "changed_edge_type": _changed_edge_type,
    "feature_value": _change_feature_value,
    "edge_feature_value": _change_edge_feature_value,
    "swapped_orig_nids": _swap_orig_nids,
    "swapped_orig_eids": _swap_orig_eids,
    "shifted_node_map": _shift_node_map,
    "flipped_inner_node": _flip_inner_node,
    "dropped_edge_feature": _drop_edge_feature,
    "missing_config": _missing_config,
}


def test_verify_passes_good_output(good_output, example_dir):
    # 4 ranks: test_pipeline.py's pipelines end in this check on 1, 2 and 4 ranks.
    for r in (1, 2):
        run = distpart(r, "verify", example_dir, good_output / "assignment", good_output)
        assert "verify: OK (4 partitions, 3003 nodes, 10000 edges, 7 features match the input)" in run.stdout


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_verify_catches(case, good_output, example_dir, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(good_output, out)
    expected = CORRUPTIONS[case](out)
    run = distpart(2, "verify", example_dir, out / "assignment", out, ok=False, timeout=120)
    assert run.returncode == 2, run.output
    assert expected in run.stderr, f"expected {expected!r} in:\n{run.stderr}"
    assert "Traceback" not in run.output
