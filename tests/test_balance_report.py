"""Pure parts of ParMETIS assignment and reporting: constraints, weights, report."""
from __future__ import annotations

import numpy as np
import pytest

from distpart.assign.balance import BalanceOptions, usable_constraints, vertex_weights
from distpart.errors import InputError
from distpart.chunked.metadata import load_metadata
from distpart.check.report import imbalance, summarize
from distpart.synthetic import example_graph, read_whole_graph


def test_usable_constraints():
    names = ["ntype:a", "ntype:b", "ntype:c", "edges", "feature:a/m"]
    keep, notes = usable_constraints(np.array([1000, 3, 0, 50, 4]), names, 4, 1.05)
    assert keep.tolist() == [True, False, False, True, True]
    assert "ntype:b: 3 nodes cannot be spread over 4 partitions" in notes[0]
    assert "ntype:c: no weight at all" in notes[1]
    keep, _ = usable_constraints(np.array([6]), ["ntype:a"], 4, 1.05)   # best 2/1.5 = 1.33
    assert not keep[0]
    keep, _ = usable_constraints(np.array([6]), ["ntype:a"], 4, 1.5)
    assert keep[0]


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    path = example_graph(tmp_path_factory.mktemp("ex"))
    return load_metadata(path), read_whole_graph(path)


def test_vertex_weights_columns(example):
    meta, ref = example
    offsets = np.concatenate([[0], np.cumsum(meta.node_counts)])
    lo, hi = 900, 1400   # spans the author -> paper border
    deg = np.arange(hi - lo)
    opts = BalanceOptions(ntypes=True, edges=True, features=("paper/train_mask",))
    w, names = vertex_weights(meta, opts, offsets, lo, hi, deg)
    # With several types, in-degree is balanced per type, as DGL's in-memory partition_graph does.
    assert names == ["ntype:author", "ntype:paper", "ntype:institution", "edges:author", "edges:paper",
                     "edges:institution", "feature:paper/train_mask"]
    assert w.shape == (500, 7) and w.dtype == np.int64
    assert w[:100, 0].all() and not w[100:, 0].any() and w[100:, 1].all() and not w[:, 2].any()
    assert np.array_equal(w[:100, 3], deg[:100]) and not w[100:, 3].any()
    assert np.array_equal(w[100:, 4], deg[100:]) and not w[:100, 4].any() and not w[:, 5].any()
    assert np.array_equal(w[:, 3:6].sum(axis=1), deg)
    mask = ref["node_feats"][("paper", "train_mask")]
    assert np.array_equal(w[100:, 6], mask[:400].astype(np.int64)) and not w[:100, 6].any()
    w, names = vertex_weights(meta, BalanceOptions(edges=True), offsets, lo, hi, deg)
    assert names == ["nodes", "edges"] and np.array_equal(w[:, 1], deg)
    w, names = vertex_weights(meta, BalanceOptions(), offsets, lo, hi, deg)
    assert names == ["nodes"] and (w == 1).all()


def test_balance_feature_must_be_zero_one(example):
    meta, _ = example
    offsets = np.concatenate([[0], np.cumsum(meta.node_counts)])
    with pytest.raises(InputError, match="values must be 0 or 1"):
        vertex_weights(meta, BalanceOptions(features=("paper/label",)), offsets, 1000, 1100, np.zeros(100))


def test_imbalance_and_summary():
    assert imbalance([10, 10, 10]) == 1.0
    assert imbalance([15, 5]) == 1.5
    assert imbalance([0, 0]) == 1.0
    parts = [{"partition": 0, "nodes": 3, "nodes_per_type": {"a": 3}, "edges": 10, "halo_nodes": 2, "cut_edges": 4},
             {"partition": 1, "nodes": 1, "nodes_per_type": {"a": 1}, "edges": 30, "halo_nodes": 1, "cut_edges": 2}]
    rep = summarize(parts, ["a"], [])
    assert rep["edge_cut"] == 6 and rep["edges"] == 40 and rep["edge_cut_fraction"] == 0.15
    assert rep["imbalance"] == {"nodes": 1.5, "ntype:a": 1.5, "edges": 1.5}


@pytest.mark.parametrize("text", ["1e30", "nan", "inf", "1.0", "0.9", "abc"])
def test_imbalance_is_checked_once_when_the_command_line_is_parsed(text, capsys):
    """One message naming the option and the rule, exit 2, before MPI starts; never a cap
    that overflows (1e30) or a ParMETIS 'ubvec' message (nan, inf)."""
    from distpart.cli import _parser
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["assign", "in", "out", "--num-parts", "2", "--imbalance", text])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --imbalance:" in err and "ubvec" not in err
    assert ("expected a number" if text == "abc" else "greater than 1.0 and at most 1000") in err
    assert _parser().parse_args(["assign", "i", "o", "--num-parts", "2", "--imbalance", "1000"]).imbalance == 1000


def test_balance_options_from_the_api_refuse_what_the_command_line_refuses():
    from distpart.assign.balance import check_options
    for value in (float("nan"), float("inf"), 1e30, 1.0):
        with pytest.raises(InputError, match="--imbalance must be a number greater than 1.0"):
            check_options(None, BalanceOptions(imbalance=value))


def test_block_caps_stay_in_range_for_any_allowed_imbalance():
    from distpart.assign.multilevel.graph import block_caps
    total = np.array([10, 1 << 40, 7], dtype=np.int64)
    assert block_caps(total, 4, 1000.0).tolist() == total.tolist()
    assert block_caps(total, 4, 1.05).tolist() == [3, int(1.05 * (1 << 40) / 4 + 1e-9), 2]


def test_a_type_missing_from_a_partition_is_named_with_dgls_consequence():
    from distpart.check.dglstart import empty_type_warnings
    nodes = {"a": [3, 0, 2], "b": [1, 1, 1], "c": [0, 0, 0]}
    edges = {"a:r:b": [0, 4, 0], "b:s:a": [2, 2, 2]}
    lines = empty_type_warnings(nodes, edges, featured=["a", "a:r:b"])
    assert lines == [
        "partition 1 has no node of type 'a' (5 in all): it has a feature, so DGL's servers fail to start "
        "on this output ('Failed to map shared memory')",
        "partitions 0, 2 have no edge of type 'a:r:b' (4 in all): it has a feature, so DGL's servers fail "
        "to start on this output ('Failed to map shared memory')"]
    assert empty_type_warnings(nodes, edges, featured=["b"]) == []    # 'c' is empty everywhere: nothing to place
    assert len(empty_type_warnings(nodes, edges)) == 2 and "if it has a feature" in empty_type_warnings(nodes, edges)[0]


def test_the_report_warns_only_for_types_that_carry_a_feature():
    """summarize takes the featured types from the partitions' feature files: a featureless
    type missing from a partition cannot stop DGL's servers, and is not named."""
    def part(p, a, b, featured):
        return {"partition": p, "nodes": a + b, "nodes_per_type": {"a": a, "b": b}, "edges": 5,
                "edges_per_type": {"a:r:b": 5}, "halo_nodes": 0, "cut_edges": 0, "featured_types": featured}
    rep = summarize([part(0, 3, 2, ["a"]), part(1, 3, 0, ["a"])], ["a", "b"], [])
    assert "warnings" not in rep
    rep = summarize([part(0, 3, 2, ["b"]), part(1, 3, 0, ["b"])], ["a", "b"], [])
    assert rep["warnings"] == ["partition 1 has no node of type 'b' (2 in all): it has a feature, so DGL's "
                               "servers fail to start on this output ('Failed to map shared memory')"]
