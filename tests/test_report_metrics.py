"""The report's training-cost metrics (pure): halo, kept edges and edge share, per-partition
cut, DGL's even split of training nodes ("moved" seeds), imbalance; checked against
brute-force definitions, and the moved seeds against DGL 2.1's own `node_split` when a
Python with DGL is found."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from harness import DGL_MISSING, find_dgl_python
from distpart.check.report import (even_split_offsets, format_report, imbalance, moved_seeds,
                                   partition_loads, seed_split, summarize, training_costs)


def _moved_by_hand(counts: list) -> list:
    """Number every training node in partition order, give trainer p the p-th of k even
    slices (the first T mod k one larger), count each partition's nodes outside its slice."""
    k, total = len(counts), sum(counts)
    owner = [p for p, c in enumerate(counts) for _ in range(c)]   # partition of the i-th node
    trainer = []
    for p in range(k):
        trainer += [p] * (total // k + (1 if p < total % k else 0))
    moved = [0] * k
    for o, t in zip(owner, trainer):
        moved[o] += o != t
    return moved


def test_even_split_offsets_are_dgls():
    # DGL 2.1 _even_offset(10, 4): sizes 3, 3, 2, 2.
    assert even_split_offsets(10, 4).tolist() == [0, 3, 6, 8, 10]
    assert even_split_offsets(8, 4).tolist() == [0, 2, 4, 6, 8]
    assert even_split_offsets(2, 4).tolist() == [0, 1, 2, 2, 2]
    assert even_split_offsets(0, 3).tolist() == [0, 0, 0, 0]


def test_moved_seeds_examples():
    assert moved_seeds([5, 5, 5, 5]).tolist() == [0, 0, 0, 0]       # balanced: nobody moves
    assert moved_seeds([20, 0, 0, 0]).tolist() == [15, 0, 0, 0]     # one holder: 3/4 leave it
    # 11 nodes: slices 3, 3, 3, 2; partition 0 keeps 3 of its 6, partition 1 (IDs 6..7)
    # falls inside trainer 2's slice [6, 9): both move; partition 2's 3 nodes [8, 11) keep 1.
    assert moved_seeds([6, 2, 3, 0]).tolist() == [3, 2, 2, 0]
    assert moved_seeds([]).tolist() == []


def test_moved_seeds_match_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(300):
        k = int(rng.integers(1, 9))
        counts = rng.integers(0, 30, size=k) * (rng.random(k) < 0.8)
        moved = moved_seeds(counts)
        assert moved.tolist() == _moved_by_hand(counts.tolist()), counts
        assert (moved >= 0).all() and (moved <= counts).all()


def test_seed_split_summary():
    s = seed_split([6, 2, 3, 0])
    assert s == {"nodes": 11, "per_partition": [6, 2, 3, 0], "moved": 7, "moved_fraction": round(7 / 11, 6),
                 "moved_per_partition": [3, 2, 2, 0]}
    assert seed_split([0, 0])["moved_fraction"] == 0.0


def _loads_by_hand(part, src, dst, k):
    edges, cut, halo = [0] * k, [0] * k, [set() for _ in range(k)]
    for u, v in zip(src.tolist(), dst.tolist()):
        p = part[v]
        edges[p] += 1
        if part[u] != p:
            cut[p] += 1
            halo[p].add(u)
    return edges, cut, [len(h) for h in halo]


def test_partition_loads_match_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n, m, k = int(rng.integers(1, 40)), int(rng.integers(0, 120)), int(rng.integers(1, 6))
        part = rng.integers(0, k, size=n).astype(np.int16)   # any integer dtype
        src, dst = rng.integers(0, n, size=m), rng.integers(0, n, size=m)   # loops and duplicates too
        got = [a.tolist() for a in partition_loads(part, src, dst, k)]
        assert got == list(_loads_by_hand(part.tolist(), src, dst, k))


def test_partition_loads_small_graph():
    # 0 -> 2, 1 -> 2, 1 -> 2 again, 3 -> 0, 2 -> 3: parts {0, 1} and {2, 3}.
    part = np.array([0, 0, 1, 1])
    src, dst = np.array([0, 1, 1, 3, 2]), np.array([2, 2, 2, 0, 3])
    edges, cut, halo = partition_loads(part, src, dst, 2)
    assert edges.tolist() == [1, 4] and cut.tolist() == [1, 3] and halo.tolist() == [1, 2]


def test_training_costs():
    c = training_costs([10, 30, 0], [4, 2, 0], [3, 5, 0])
    assert c["edges"] == 40 and c["edge_cut"] == 6 and c["edge_cut_fraction"] == 0.15
    assert (c["max_partition_cut"], c["max_cut_partition"]) == (4, 0)
    assert (c["halo_nodes"], c["max_halo_nodes"], c["max_halo_partition"]) == (8, 5, 1)
    assert (c["largest_partition"], c["largest_partition_edges"], c["largest_partition_edge_share"]) == (1, 30, 0.75)
    assert training_costs([0, 0], [0, 0], [0, 0])["largest_partition_edge_share"] == 0.0


def _parts():
    return [{"partition": 0, "nodes": 3, "nodes_per_type": {"a": 3}, "edges": 10, "halo_nodes": 2, "cut_edges": 4,
             "train_nodes": {"a/train": 6}},
            {"partition": 1, "nodes": 1, "nodes_per_type": {"a": 1}, "edges": 30, "halo_nodes": 1, "cut_edges": 2,
             "train_nodes": {"a/train": 0}}]


def test_summary_and_printout_with_a_train_mask():
    rep = summarize(_parts(), ["a"], [], ["a/train"])
    assert rep["edge_cut"] == 6 and rep["halo_nodes"] == 3 and rep["max_halo_nodes"] == 2
    assert rep["largest_partition_edge_share"] == 0.75 and rep["max_partition_cut"] == 4
    assert rep["train"]["a/train"]["moved"] == 3 and rep["train"]["a/train"]["moved_per_partition"] == [3, 0]
    assert rep["imbalance"] == {"nodes": 1.5, "ntype:a": 1.5, "edges": 1.5, "feature:a/train": 2.0}
    text = format_report(rep, ["a"])
    lines = text.splitlines()
    assert lines[0].split() == ["part", "n:a", "edges", "halo", "cut_edges", "train", "moved"]
    assert lines[1].split() == ["0", "3", "10", "2", "4", "6", "3"]
    assert "edge cut: 6 of 40 edges (15.00%); largest per-partition cut 4 (partition 0)" in text
    assert "halo nodes (fetched from other partitions): 3 in all, at most 2 (partition 0)" in text
    assert "largest partition: 30 of 40 edges (75.00%, partition 1)" in text
    assert "training nodes a/train: 6; DGL's even split (node_split, force_even) hands 3 (50.00%)" in text
    json.dumps(rep)   # plain Python numbers: written as report.json


def test_summary_without_a_train_mask_has_no_train_columns():
    rep = summarize(_parts(), ["a"], [])
    assert "train" not in rep and "moved" not in format_report(rep, ["a"])
    assert imbalance([3, 1]) == 1.5


# ----------------------------------------------------------------------------- against DGL itself

_DGL_SPLIT = r"""
import json, sys
import numpy as np, torch
from dgl.distributed import role
from dgl.distributed.dist_graph import node_split
from dgl.distributed.graph_partition_book import RangePartitionBook

cases = json.loads(sys.argv[1])
out = []
for counts, sizes in cases:
    k = len(counts)
    ends = np.cumsum(sizes)
    node_map = {"n": np.stack([ends - sizes, ends], 1)}
    role.PER_ROLE_RANK["default"] = {i: i for i in range(k)}   # one trainer per partition
    rng = np.random.default_rng(0)
    mask = np.zeros(int(ends[-1]), dtype=np.int64)
    for p in range(k):   # counts[p] training nodes at random places of partition p's ID range
        mask[ends[p] - sizes[p] + rng.choice(sizes[p], counts[p], replace=False)] = 1
    moved = [0] * k
    for p in range(k):
        book = RangePartitionBook(p, k, dict(node_map), {("n", "e", "n"): np.array([[0, 1]] * k)},
                                  {"n": 0}, {("n", "e", "n"): 0})
        seeds = node_split(torch.tensor(mask), book, ntype="n", rank=p, force_even=True).numpy()
        owner = np.searchsorted(ends, seeds, side="right")
        for q in range(k):
            if q != p:
                moved[q] += int((owner == q).sum())
    out.append(moved)
print(json.dumps(out))
"""


def test_moved_seeds_equal_dgls_node_split():
    python = find_dgl_python()
    if python is None:
        pytest.skip(DGL_MISSING)
    rng = np.random.default_rng(11)
    cases = [[[6, 2, 3, 0], [9, 5, 7, 4]], [[20, 0, 0, 0], [30, 8, 8, 8]], [[5, 5, 5, 5], [10, 10, 10, 10]]]
    for _ in range(5):
        k = int(rng.integers(2, 7))
        sizes = rng.integers(1, 40, size=k)
        cases.append([[int(rng.integers(0, s + 1)) for s in sizes], sizes.tolist()])
    run = subprocess.run([python, "-c", _DGL_SPLIT, json.dumps(cases)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "DGLBACKEND": "pytorch"})
    assert run.returncode == 0, run.stderr[-3000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    assert theirs == [moved_seeds(counts).tolist() for counts, _ in cases]
