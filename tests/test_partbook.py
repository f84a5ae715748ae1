"""distpart.partitions.partbook: node_map construction, config validation, brute-force mappings."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from distpart.errors import OutputError
from distpart.partitions.partbook import PartitionBook, ranges_from_counts
from graphs import make_config, random_config


def test_ranges_from_counts_spec_example() -> None:
    counts = np.array([[143, 11, 238], [157, 9, 262]])
    assert ranges_from_counts(counts, ["author", "institution", "paper"]) == {
        "author": [[0, 143], [392, 549]],
        "institution": [[143, 154], [549, 558]],
        "paper": [[154, 392], [558, 820]],
    }


def test_ranges_from_counts_empty_and_small_types() -> None:
    # 'b' has fewer items than partitions; partition 2 is empty altogether.
    ranges = ranges_from_counts(np.array([[0, 2], [1, 0], [0, 0], [3, 1]], np.uint32), ["a", "b"])
    assert ranges == {"a": [[0, 0], [2, 3], [3, 3], [3, 6]], "b": [[0, 2], [3, 3], [3, 3], [6, 7]]}
    assert all(type(x) is int for pairs in ranges.values() for pair in pairs for x in pair)
    json.dumps(ranges)
    assert ranges_from_counts(np.zeros((2, 1), np.int64), ["a"]) == {"a": [[0, 0], [0, 0]]}


@pytest.mark.parametrize(
    "counts, names",
    [
        (np.zeros(3), ["a"]),
        (np.zeros((2, 2)), ["a"]),
        (np.array([[1, -1]]), ["a", "b"]),
        (np.ones((1, 1)), ["a"]),
    ],
)
def test_ranges_from_counts_rejects(counts: np.ndarray, names: list[str]) -> None:
    with pytest.raises(ValueError):
        ranges_from_counts(counts, names)


def brute_force(ranges: dict[str, list[list[int]]], names: list[str]) -> tuple[np.ndarray, ...]:
    """(partition, type, per-type ID) of every homogeneous ID, by plain enumeration."""
    part: list[int] = []
    type_id: list[int] = []
    per_type: list[int] = []
    seen = dict.fromkeys(names, 0)
    for p in range(len(ranges[names[0]])):
        for t, name in enumerate(names):
            start, end = ranges[name][p]
            assert start == len(part)
            for _ in range(end - start):
                part.append(p)
                type_id.append(t)
                per_type.append(seen[name])
                seen[name] += 1
    return np.array(part, int), np.array(type_id, int), np.array(per_type, int)


@pytest.mark.parametrize("seed", range(25))
def test_mappings_match_brute_force(seed: int) -> None:
    cfg = random_config(seed)
    num_parts = cfg["num_parts"]
    for part_id in range(num_parts):
        book = PartitionBook.from_config(cfg, part_id)
        assert book.num_partitions() == num_parts and book.partid == part_id
        assert book.ntypes == list(cfg["ntypes"]) and book.etypes == list(cfg["etypes"])
        for kind in ("node", "edge"):
            names = book.ntypes if kind == "node" else book.etypes
            part, type_id, per_type = brute_force(cfg[f"{kind}_map"], names)
            to_partid = book.nid2partid if kind == "node" else book.eid2partid
            to_per_type = book.map_to_per_ntype if kind == "node" else book.map_to_per_etype
            to_homo = book.map_to_homo_nid if kind == "node" else book.map_to_homo_eid
            part_ids = book.partid2nids if kind == "node" else book.partid2eids
            to_local = book.nid2localnid if kind == "node" else book.eid2localeid

            all_ids = np.arange(len(part))
            np.testing.assert_array_equal(to_partid(all_ids), part)
            got_types, got_per_type = to_per_type(all_ids)
            np.testing.assert_array_equal(got_types, type_id)
            np.testing.assert_array_equal(got_per_type, per_type)
            assert got_types.dtype == got_per_type.dtype == np.int64
            for t, name in enumerate(names):
                of_type = type_id == t
                typed = np.arange(of_type.sum())
                # Homogeneous IDs of a type ascend with its per-type IDs.
                np.testing.assert_array_equal(to_homo(typed, name), all_ids[of_type])
                np.testing.assert_array_equal(to_partid(typed, name), part[of_type])
                for p in range(num_parts):
                    np.testing.assert_array_equal(
                        part_ids(p, name), per_type[of_type & (part == p)]
                    )
                own = per_type[of_type & (part == part_id)]
                np.testing.assert_array_equal(to_local(own, part_id, name), np.arange(len(own)))
            for p in range(num_parts):
                np.testing.assert_array_equal(part_ids(p), all_ids[part == p])
            own = all_ids[part == part_id]
            np.testing.assert_array_equal(to_local(own, part_id), np.arange(len(own)))
        meta = book.metadata()
        node_part, edge_part = (
            brute_force(cfg["node_map"], book.ntypes)[0],
            brute_force(cfg["edge_map"], book.etypes)[0],
        )
        assert meta == [
            {
                "machine_id": p,
                "num_nodes": int((node_part == p).sum()),
                "num_edges": int((edge_part == p).sum()),
            }
            for p in range(num_parts)
        ]


@pytest.fixture
def hetero() -> dict[str, Any]:
    return make_config(
        np.array([[2, 1], [0, 3]]),
        np.array([[1, 2, 0], [4, 0, 1]]),
        ["user", "item"],
        ["user:buys:item", "item:bought_by:user", "user:buys:user"],
    )


def test_edge_type_spellings(hetero: dict[str, Any]) -> None:
    book = PartitionBook.from_config(hetero, 0)
    ids = np.arange(5)
    by_string = book.eid2partid(ids, "user:buys:item")
    np.testing.assert_array_equal(book.eid2partid(ids, ("user", "buys", "item")), by_string)
    np.testing.assert_array_equal(book.eid2partid(np.arange(2), "bought_by"), [0, 0])
    with pytest.raises(ValueError, match="ambiguous edge type 'buys'"):
        book.eid2partid(ids, "buys")
    with pytest.raises(ValueError, match="unknown edge type 'likes'"):
        book.partid2eids(0, "likes")
    with pytest.raises(ValueError, match="unknown node type 'shop'"):
        book.map_to_homo_nid([0], "shop")


def test_bad_queries(hetero: dict[str, Any]) -> None:
    book = PartitionBook.from_config(hetero, 1)
    with pytest.raises(ValueError, match=r"IDs outside \[0, 6\)"):
        book.nid2partid([6])
    with pytest.raises(ValueError, match=r"IDs outside \[0, 2\)"):
        book.map_to_homo_nid([-1], "user")
    with pytest.raises(ValueError, match="must be integers"):
        book.map_to_per_ntype([0.5])
    with pytest.raises(ValueError, match="local IDs of partition 0"):
        book.nid2localnid([0], 0)
    with pytest.raises(ValueError, match="partition 2 out of range"):
        book.partid2nids(2)
    assert book.nid2partid(np.array([], np.int64)).shape == (0,)
    assert book.nid2partid(np.int64(5)) == 1
    with pytest.raises(ValueError, match="partition 2 requested"):
        PartitionBook.from_config(hetero, 2)


def test_homogeneous_defaults() -> None:
    cfg = {
        "num_parts": 2,
        "num_nodes": 5,
        "num_edges": 3,
        "node_map": [[0, 2], [2, 5]],
        "edge_map": [[0, 3], [3, 3]],
    }
    book = PartitionBook.from_config(cfg, 0)
    assert book.ntypes == ["_N"] and book.etypes == ["_N:_E:_N"]
    np.testing.assert_array_equal(book.nid2partid(np.arange(5)), [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(book.eid2partid(np.arange(3), "_E"), [0, 0, 0])
    np.testing.assert_array_equal(
        book.nid2partid(np.arange(5), "_N"), book.nid2partid(np.arange(5))
    )


def _broken(cfg: dict[str, Any], edit: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(cfg)
    edit(cfg)
    return cfg


@pytest.mark.parametrize(
    "edit, where, problem",
    [
        (
            lambda c: c["node_map"]["item"].__setitem__(0, [3, 4]),
            "node_map",
            "starts at 3, expected 2",
        ),
        (
            lambda c: c["node_map"]["user"].__setitem__(1, [5, 4]),
            "node_map",
            "ends before it starts",
        ),
        (
            lambda c: c.__setitem__("num_nodes", 7),
            "node_map",
            r"cover \[0, 6\), but num_nodes is 7",
        ),
        (
            lambda c: c["node_map"].__setitem__("user", [[0, 2]]),
            "node_map",
            "2 \\[start, end\\] integer pairs",
        ),
        (
            lambda c: c["node_map"].__setitem__("user", [[0, 2.0], [3, 3]]),
            "node_map",
            "integer pairs",
        ),
        (lambda c: c["node_map"].pop("item"), "node_map", "differ from the declared"),
        (lambda c: c.pop("edge_map"), "edge_map", "missing"),
        (
            lambda c: c["edge_map"]["user:buys:user"].__setitem__(1, [8, 8]),
            "edge_map",
            "starts at 8, expected 7",
        ),
        (
            lambda c: c.__setitem__("ntypes", {"user": 0, "item": 2}),
            "ntypes",
            "type IDs must be 0..1",
        ),
        (lambda c: c.__setitem__("ntypes", {}), "ntypes", "non-empty"),
        (lambda c: c["etypes"].__setitem__("buys", 3), "etypes", "'buys' is not a canonical"),
        (lambda c: c.__setitem__("num_parts", 0), "num_parts", "positive integer"),
    ],
)
def test_config_validation(hetero: dict[str, Any], edit: Any, where: str, problem: str) -> None:
    with pytest.raises(OutputError, match=f"^out/metadata.json: {where}: .*{problem}"):
        PartitionBook.from_config(_broken(hetero, edit), 0, source="out/metadata.json")


def test_unknown_etype_endpoint(hetero: dict[str, Any]) -> None:
    cfg = _broken(
        hetero, lambda c: c["etypes"].update({"user:buys:shop": c["etypes"].pop("user:buys:user")})
    )
    with pytest.raises(OutputError, match="etypes: 'user:buys:shop'"):
        PartitionBook.from_config(cfg, 0)
