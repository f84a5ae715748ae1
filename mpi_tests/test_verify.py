"""`distpart verify` passes a good output and catches each kind of corruption."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import distpart
from distpart.dglformat import read_graph, read_tensor_dict, write_graph, write_tensor_dict


@pytest.fixture(scope="module")
def good_output(example_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("verify") / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--no-verify", "--method", "random")
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


CORRUPTIONS = {
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
    for r in (1, 2, 4):
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
