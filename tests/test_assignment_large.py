"""The assignment reader's line offsets past 2**31: this process plays the last of two ranks,
and the other (a stand-in answering the collectives) holds the first 3e9 lines of each file.

Nothing of that size exists: the metadata says each type has 3e9 + n nodes, the files hold
only this rank's lines, and the stand-in's counts reach this rank through the same int64
reductions and prefix sums MPI would carry.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distpart.assign.assignment import read_assignment
from distpart.chunked.metadata import load_metadata
from distpart.chunked.readers import block_bounds, read_csv_ints
from distpart.errors import InputError
from large_comm import LastOfTwo

BEFORE = 3 * 10**9   # lines the other rank holds, of each type


def files(tmp_path: Path, lines: dict) -> tuple:
    """An assignment folder with these lines per type, and the metadata of a graph whose types
    have BEFORE + (the lines rank 1 of 2 reads) nodes."""
    assign = tmp_path / "assign"
    assign.mkdir()
    mine = {}
    for ntype, parts in lines.items():
        path = assign / f"{ntype}.txt"
        path.write_text("".join(f"{p}\n" for p in parts))
        lo, hi = block_bounds(path.stat().st_size, 2)[1:3]
        mine[ntype] = read_csv_ints(path, int(lo), int(hi), 1)[:, 0]
    (assign / "partition_meta.json").write_text(json.dumps({"num_parts": 4, "algo_name": "random"}))
    meta = {"graph_name": "big", "node_type": list(lines),
            "num_nodes_per_chunk": [[BEFORE, len(mine[t])] for t in lines], "edge_type": [],
            "edges": {}, "node_data": {}, "edge_data": {}}
    (tmp_path / "metadata.json").write_text(json.dumps(meta))
    return assign, load_metadata(tmp_path / "metadata.json"), mine


def test_blocks_start_past_2_31(tmp_path: Path) -> None:
    assign, meta, mine = files(tmp_path, {"a": [0, 1, 2, 3] * 5, "b": [3, 2, 1, 0, 1, 2]})
    comm = LastOfTwo(np.array([BEFORE, BEFORE], dtype=np.int64))
    got = read_assignment(comm, meta, assign, num_parts=4)
    for ntype in ("a", "b"):
        block = got.blocks[ntype]
        assert block.start == BEFORE
        assert block.bounds.tolist() == [0, BEFORE, BEFORE + len(mine[ntype])]
        assert block.parts.tolist() == mine[ntype].tolist()
        assert block.orig_ids.tolist() == list(range(BEFORE, BEFORE + len(mine[ntype])))


def test_bad_line_is_numbered_past_2_31(tmp_path: Path) -> None:
    assign, meta, mine = files(tmp_path, {"a": [0, 1, 2, 3, 0, 1, 2, 9, 1, 1]})
    bad = int(np.flatnonzero(mine["a"] == 9)[0])
    with pytest.raises(InputError, match=rf"partition ID 9 on line {BEFORE + bad + 1} is outside \[0, 4\)"):
        read_assignment(LastOfTwo(np.array([BEFORE], dtype=np.int64)), meta, assign, num_parts=4)


def test_line_count_mismatch_names_the_total_past_2_31(tmp_path: Path) -> None:
    assign, meta, mine = files(tmp_path, {"a": [0, 1, 2, 3] * 3})
    fewer = LastOfTwo(np.array([BEFORE - 1], dtype=np.int64))
    with pytest.raises(InputError, match=rf"has {BEFORE - 1 + len(mine['a'])} lines but node type 'a' "
                                         rf"has {BEFORE + len(mine['a'])} nodes"):
        read_assignment(fewer, meta, assign, num_parts=4)
