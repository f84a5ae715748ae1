"""The input as GraphStorm's Spark preprocessing (GSProcessing) writes it, through `distpart
pipeline` and `dispatch` on 1, 2 and 4 ranks (issue 20, item 2): the metadata file named
updated_row_counts_metadata.json and given by its path, no num_*_per_chunk, row_counts,
list<float> columns, unaligned feature files, '-rev' edge types, ':' in folder names.

The output is checked against the arrays the generator wrote (not read back through distpart's
readers), through the public loader and the original IDs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

from harness import RANKS, distpart
from reference import tree_bytes
from distpart import load_orig_ids, load_partition
from distpart.synthetic.gsprocessing import GSPROCESSING_METADATA, write_gsprocessing_graph

NUM_PARTS = 4


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> Dict[str, Any]:
    return write_gsprocessing_graph(tmp_path_factory.mktemp("gsp") / "g")


@pytest.fixture(scope="module")
def outputs(graph, tmp_path_factory) -> Dict[int, Path]:
    outs = {}
    for r in RANKS:
        out = tmp_path_factory.mktemp(f"out_r{r}")
        run = distpart(r, "pipeline", graph["metadata"], out, "--num-parts", NUM_PARTS,
                       "--method", "random", "--seed", 3)
        assert "verify: OK (4 partitions, 500 nodes, 4200 edges, 6 features match the input)" in run.stdout
        outs[r] = out
    return outs


def check_against(graph: Dict[str, Any], out: Path) -> None:
    """Every node, edge and feature row of the output is the generator's, by original ID."""
    config = out / "metadata.json"
    meta = json.loads(config.read_text())
    assert meta["num_nodes"] == 500 and meta["num_edges"] == 4200
    ntypes = sorted(meta["ntypes"], key=meta["ntypes"].get)
    etypes = sorted(meta["etypes"], key=meta["etypes"].get)
    assert ntypes == ["item", "user"] and etypes == list(graph["edges"])
    parts = [load_partition(str(config), p) for p in range(NUM_PARTS)]
    ids = [load_orig_ids(str(config), p) for p in range(NUM_PARTS)]
    orig_nid = {t: np.concatenate([i[0][t] for i in ids]) for t in ntypes}    # by per-type new ID
    orig_eid = {e: np.concatenate([i[1][e] for i in ids]) for e in etypes}
    for t in ntypes:
        assert np.array_equal(np.sort(orig_nid[t]), np.arange(graph["num_nodes"][t]))
    for e in etypes:
        assert np.array_equal(np.sort(orig_eid[e]), np.arange(len(graph["edges"][e][0])))
    for (g, nfeat, efeat, gpb, _, _, _), (nids, eids) in zip(parts, ids):
        for (t, name), want in graph["node_feats"].items():
            np.testing.assert_array_equal(nfeat[f"{t}/{name}"], want[nids[t]])   # shapes too: (N,), (N, 1)
            assert nfeat[f"{t}/{name}"].shape[1:] == want.shape[1:]
        for (e, name), want in graph["edge_feats"].items():
            np.testing.assert_array_equal(efeat[f"{e}/{name}"], want[eids[e]])
            assert efeat[f"{e}/{name}"].shape[1:] == want.shape[1:]
        src_t, src_new = gpb.map_to_per_ntype(g.ndata["_ID"][g.src])
        dst_t, dst_new = gpb.map_to_per_ntype(g.ndata["_ID"][g.dst])
        e_t, e_new = gpb.map_to_per_etype(g.edata["_ID"])
        for k, e in enumerate(etypes):
            sel = e_t == k
            src_name, _, dst_name = e.split(":")
            assert (src_t[sel] == ntypes.index(src_name)).all() and (dst_t[sel] == ntypes.index(dst_name)).all()
            orig = orig_eid[e][e_new[sel]]
            np.testing.assert_array_equal(orig_nid[src_name][src_new[sel]], graph["edges"][e][0][orig])
            np.testing.assert_array_equal(orig_nid[dst_name][dst_new[sel]], graph["edges"][e][1][orig])


@pytest.mark.parametrize("nranks", RANKS)
def test_pipeline_output_is_the_input(graph, outputs, nranks):
    check_against(graph, outputs[nranks])


def test_output_is_byte_identical_for_any_rank_count(outputs):
    trees = {r: tree_bytes(out) for r, out in outputs.items()}
    assert "part3/node_feat.dgl" in trees[1] and "assignment/user.txt" in trees[1]
    for r in RANKS[1:]:
        assert set(trees[r]) == set(trees[1])
        assert [n for n in trees[1] if trees[r][n] != trees[1][n]] == [], f"R={r} differs from R=1"


def test_dispatch_of_a_given_assignment(graph, outputs, tmp_path):
    """`validate` and `dispatch` alone, on the metadata file's path, with the assignment the
    pipeline wrote: the same partitions."""
    run = distpart(2, "validate", graph["metadata"])
    assert "validate: OK (2 node types, 4 edge types, 500 nodes, 4200 edges)" in run.stdout
    out = tmp_path / "out"
    distpart(2, "dispatch", graph["metadata"], outputs[1] / "assignment", out)
    mine, theirs = tree_bytes(out), tree_bytes(outputs[1])
    # Every partition file; the completion records differ by the options they record.
    files = [n for n in theirs if n.startswith("part") and n.endswith(".dgl")] + ["metadata.json"]
    assert len(files) == 5 * NUM_PARTS + 1 and all(mine[n] == theirs[n] for n in files)


def test_counts_read_from_the_files_on_4_ranks(outputs, tmp_path):
    """The same graph with no row_counts (only num_*_per_type): the ranks count the files
    between them, and the partitions are the same bytes."""
    bare = write_gsprocessing_graph(tmp_path / "bare", row_counts=False, metadata_name="meta.json")
    out = tmp_path / "out"
    distpart(4, "pipeline", bare["metadata"], out, "--num-parts", NUM_PARTS, "--method", "random", "--seed", 3)
    mine, theirs = tree_bytes(out), tree_bytes(outputs[1])
    files = [n for n in theirs if n.endswith(".dgl") or n.endswith(".txt")] + ["metadata.json"]
    assert all(mine[n] == theirs[n] for n in files)


def test_csv_edges_without_counts_are_counted_by_the_ranks(example_dir, tmp_path):
    """DGL's example layout without num_edges_per_chunk: CSV edge files parsed by the ranks."""
    meta = json.loads((example_dir / "metadata.json").read_text())
    meta.pop("num_edges_per_chunk")
    meta["edges"] = {e: {**spec, "data": [str(example_dir / p) for p in spec["data"]]}
                     for e, spec in meta["edges"].items()}
    for group in ("node_data", "edge_data"):
        for feats in meta[group].values():
            for spec in feats.values():
                spec["data"] = [str(example_dir / p) for p in spec["data"]]
    path = tmp_path / "counted.json"
    path.write_text(json.dumps(meta))
    run = distpart(2, "validate", path)
    assert "validate: OK (3 node types, 4 edge types, 3003 nodes, 10000 edges)" in run.stdout


# ---------------------------------------------------------------- bad input: exit 2, the file named


def _bad_copy(tmp_path: Path, change) -> Path:
    graph = write_gsprocessing_graph(tmp_path / "bad")
    raw = json.loads(graph["metadata"].read_text())
    expected = change(raw)
    graph["metadata"].write_text(json.dumps(raw))
    return graph["metadata"], expected


def _feature_rows_short(raw: dict) -> str:
    feat = raw["node_data"]["user"]["feat"]
    feat["data"].pop()
    kept = feat["row_counts"][:-1]
    feat["row_counts"] = kept
    return (f"{GSPROCESSING_METADATA}: node_data.user.feat: feature has {sum(kept)} rows"
            f" in its files but node type 'user' has 300")


def _edge_row_counts_broken(raw: dict) -> str:
    counts = raw["edges"]["user:buys:item"]["row_counts"]
    counts[0], counts[1] = counts[0] + 1, counts[1] - 1             # the same total
    name = Path(raw["edges"]["user:buys:item"]["data"][0]).name
    return f"{name}: has {counts[0] - 1} edges but row_counts for 'user:buys:item' says {counts[0]}"


def _feature_row_counts_broken(raw: dict) -> str:
    rating = raw["edge_data"]["user:buys:item"]["rating"]
    rating["row_counts"][0] += 1
    rating["row_counts"][1] -= 1
    name = Path(rating["data"][0]).name
    return f"{name}: has {rating['row_counts'][0] - 1} rows but row_counts says {rating['row_counts'][0]}"


def _num_edges_per_type_broken(raw: dict) -> str:
    raw["num_edges_per_type"][3] += 1
    return (f"{GSPROCESSING_METADATA}: num_edges_per_type: says 901 edges of type 'item:buys-rev:user' "
            f"but row_counts adds up to 900")


# pipeline validates first, with the same code as validate: each change under one of them.
@pytest.mark.parametrize("change,command", [(_feature_rows_short, "pipeline"), (_edge_row_counts_broken, "validate"),
                                            (_feature_row_counts_broken, "pipeline"),
                                            (_num_edges_per_type_broken, "validate")])
def test_bad_input_is_refused_naming_the_file(tmp_path, change, command):
    meta, expected = _bad_copy(tmp_path, change)
    argv = [command, meta] + ([tmp_path / "out", "--num-parts", 2] if command == "pipeline" else [])
    run = distpart(2, *argv, ok=False)
    assert run.returncode == 2, run.output
    line = f"distpart {command}: error: "
    assert line in run.stderr and expected in run.stderr, run.output
    assert not (tmp_path / "out" / "metadata.json").exists()
