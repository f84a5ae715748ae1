"""No empty partition where the graph has nodes enough (assign.nonempty), on one process
(COMM_SELF): a path cut into more blocks than multilevel fills, and a type missing from a
partition. The same moves on any number of ranks follow from their rule (global IDs only)."""
from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from distpart.assign import compute_assignment
from distpart.assign.assignment import Assignment, NodeBlock
from distpart.assign.balance import BalanceOptions
from distpart.assign.nonempty import fill_empty_partitions
from distpart.chunked.metadata import load_metadata
from distpart.synthetic import EdgeTypeSpec, FeatureSpec, NodeTypeSpec, write_chunked_graph

COMM = MPI.COMM_SELF


class Notes:
    def __init__(self) -> None:
        self.lines = []

    def note(self, text: str) -> None:
        self.lines.append(text)


def path_model(rng, canonical, n_src, n_dst, first, count, seed):
    ids = np.arange(first, first + count, dtype=np.int64)
    return ids, ids + 1


def two_types(tmp_path, n_a: int, n_b: int):
    meta = write_chunked_graph(tmp_path / "g", [NodeTypeSpec("A", n_a), NodeTypeSpec("B", n_b)],
                               [EdgeTypeSpec("A:r:B", 20)], [FeatureSpec("A", "feat", "float32", (2,))],
                               num_chunks=1)
    return load_metadata(meta)


def test_a_path_in_more_parts_than_multilevel_fills_gets_a_node_in_every_partition(tmp_path):
    """Issue 28's case: 10 nodes, 8 parts. Multilevel alone left partitions 1, 2 and 6 empty."""
    meta = load_metadata(write_chunked_graph(tmp_path / "g", [NodeTypeSpec("_N", 10)],
                                             [EdgeTypeSpec("_N:_E:_N", 9)], num_chunks=1, edge_model=path_model))
    a = compute_assignment(COMM, meta, 8, "multilevel", BalanceOptions())
    parts = a.blocks["_N"].parts
    assert sorted(set(parts.tolist())) == list(range(8)), parts
    assert np.bincount(parts, minlength=8).max() <= 2


def test_a_type_missing_from_a_partition_gets_its_highest_id_node_of_the_fullest(tmp_path):
    meta = two_types(tmp_path, 6, 4)
    blocks = {"A": NodeBlock(0, np.array([0, 0, 0, 0, 2, 2]), np.array([0, 6])),
              "B": NodeBlock(0, np.array([1, 1, 2, 0]), np.array([0, 4]))}
    notes = Notes()
    fill_empty_partitions(COMM, meta, Assignment(3, "test", blocks), notes)
    # A: partition 1 had none; partition 0 holds most (4): its highest ID, node 3, moves.
    assert blocks["A"].parts.tolist() == [0, 0, 0, 1, 2, 2]
    assert blocks["B"].parts.tolist() == [1, 1, 2, 0]   # nothing was missing: untouched
    assert len(notes.lines) == 1 and "partition 1 had no node of type 'A'" in notes.lines[0]


def test_a_type_smaller_than_the_partition_count_is_named_with_dgls_consequence(tmp_path):
    meta = two_types(tmp_path, 2, 8)
    blocks = {"A": NodeBlock(0, np.array([0, 0]), np.array([0, 2])),
              "B": NodeBlock(0, np.arange(8) % 4, np.array([0, 8]))}
    notes = Notes()
    fill_empty_partitions(COMM, meta, Assignment(4, "test", blocks), notes)
    assert blocks["A"].parts.tolist() == [0, 0] and blocks["B"].parts.tolist() == (np.arange(8) % 4).tolist()
    assert len(notes.lines) == 1
    assert "node type 'A' has 2 nodes, fewer than the 4 partitions: partitions 1, 2, 3 hold none" in notes.lines[0]
    assert "DGL's servers cannot start" in notes.lines[0]


@pytest.mark.parametrize("seed", range(3))
def test_nothing_moves_where_nothing_is_empty(tmp_path, seed):
    meta = two_types(tmp_path, 50, 40)
    rng = np.random.default_rng(seed)
    a, b = rng.permutation(np.arange(50) % 4), rng.permutation(np.arange(40) % 4)
    blocks = {"A": NodeBlock(0, a.copy(), np.array([0, 50])), "B": NodeBlock(0, b.copy(), np.array([0, 40]))}
    notes = Notes()
    fill_empty_partitions(COMM, meta, Assignment(4, "test", blocks), notes)
    assert (blocks["A"].parts == a).all() and (blocks["B"].parts == b).all() and not notes.lines
