"""Tests of distpart.chunked.ids: the heterogeneous <-> homogeneous ID converter of DGL's guide 7.5."""
from __future__ import annotations

import json
from bisect import bisect_right
from pathlib import Path

import numpy as np
import pytest

import distpart
from distpart.chunked.ids import IdConverter, IdRangeError
from distpart.chunked.metadata import load_metadata
from distpart.synthetic import example_graph

NTYPES = ["author", "empty", "paper", "institution"]
NCOUNTS = [1000, 0, 2000, 3]
ETYPES = ["author:writes:paper", "paper:cites:paper", "author:affiliated_with:institution"]
ECOUNTS = [4000, 3000, 0]


@pytest.fixture
def conv() -> IdConverter:
    return IdConverter(NTYPES, NCOUNTS, ETYPES, ECOUNTS)


def guide_hom2het(offsets, counts, i):
    """The guide's scalar algorithm (first type whose range holds i), written out plainly."""
    t = bisect_right(list(offsets), i) - 1
    while counts[t] == 0:  # an empty type's range is empty: the next one holds i
        t += 1
    return t, i - offsets[t]


def test_offsets_follow_type_order(conv):
    np.testing.assert_array_equal(conv.nid_offset, [0, 1000, 1000, 3000, 3003])
    np.testing.assert_array_equal(conv.eid_offset, [0, 4000, 7000, 7000])
    assert conv.nid_offset.dtype == np.int64 and conv.total_nodes == 3003 and conv.total_edges == 7000


def test_node_round_trip_every_id(conv):
    hom = np.arange(conv.total_nodes, dtype=np.int64)
    types, per_type = conv.nid_hom2het(hom)
    assert types.dtype == np.int64 and per_type.dtype == np.int64
    for i in (0, 999, 1000, 2999, 3000, 3002):
        assert (int(types[i]), int(per_type[i])) == guide_hom2het(conv.nid_offset, NCOUNTS, i)
    np.testing.assert_array_equal(np.bincount(types, minlength=4), NCOUNTS)
    np.testing.assert_array_equal(conv.nid_het2hom(types, per_type), hom)
    for t, name in enumerate(NTYPES):
        ids = per_type[types == t]
        np.testing.assert_array_equal(conv.nid_het2hom(name, ids), hom[types == t])
        np.testing.assert_array_equal(conv.nid_het2hom(t, ids), hom[types == t])


def test_edges_and_edge_type_forms(conv):
    assert conv.eid_het2hom("paper:cites:paper", 5) == 4005
    assert conv.eid_het2hom(("paper", "cites", "paper"), 5) == 4005
    assert conv.eid_het2hom("cites", 5) == 4005  # a relation only one edge type has
    assert conv.eid_het2hom(1, 5) == 4005
    types, ids = conv.eid_hom2het(np.array([0, 3999, 4000, 6999]))
    np.testing.assert_array_equal(types, [0, 0, 1, 1])
    np.testing.assert_array_equal(ids, [0, 3999, 0, 2999])
    assert conv.id2etype(1) == "paper:cites:paper" and conv.etype2id("writes") == 0


def test_shapes_are_kept(conv):
    ids = np.arange(12).reshape(3, 4)
    out = conv.nid_het2hom("paper", ids)
    assert out.shape == (3, 4) and int(out[2, 3]) == 1011
    types, per_type = conv.nid_hom2het(out)
    assert types.shape == (3, 4) and (types == 2).all()
    scalar = conv.nid_het2hom("author", 7)
    assert scalar.shape == () and int(scalar) == 7
    assert conv.nid_het2hom("paper", np.array([], dtype=np.int32)).shape == (0,)


def test_unsigned_and_narrow_ids_are_widened(conv):
    out = conv.nid_het2hom("paper", np.array([1, 2], dtype=np.uint16))
    assert out.dtype == np.int64 and out.tolist() == [1001, 1002]


def test_range_errors_name_type_id_and_position(conv):
    with pytest.raises(IdRangeError, match=r"node ID 2000 \(at index 2\) of type 'paper' is outside \[0, 2000\)"):
        conv.nid_het2hom("paper", [0, 5, 2000])
    with pytest.raises(ValueError, match=r"node ID -1 of type 'author' is outside \[0, 1000\)"):
        conv.nid_het2hom("author", -1)
    with pytest.raises(IdRangeError, match=r"node ID 0 of type 'empty' is outside \[0, 0\)"):
        conv.nid_het2hom("empty", 0)
    with pytest.raises(IdRangeError, match=r"homogeneous node ID 3003 \(at index \(1, 0\)\) is outside \[0, 3003\)"):
        conv.nid_hom2het(np.array([[1, 2], [3003, 4]]))
    with pytest.raises(IdRangeError, match=r"edge ID 0 \(at index 0\) of type 'author:affiliated_with:institution'"):
        conv.eid_het2hom("affiliated_with", [0])
    with pytest.raises(IdRangeError, match=r"homogeneous edge ID -3 is outside \[0, 7000\)"):
        conv.eid_hom2het(-3)
    with pytest.raises(IdRangeError, match=r"node ID 3 \(at index 1\) of type 'institution'"):
        conv.nid_het2hom(np.array([3, 3]), np.array([2, 3]))
    with pytest.raises(IdRangeError, match=r"node type ID 4 \(at index 0\) is outside \[0, 4\)"):
        conv.nid_het2hom(np.array([4]), np.array([0]))
    with pytest.raises(IdRangeError, match=r"unknown node type 'venue'"):
        conv.nid_het2hom("venue", 0)
    with pytest.raises(TypeError, match="must be integers"):
        conv.nid_hom2het(np.array([1.5]))
    with pytest.raises(IdRangeError, match="does not fit in int64"):
        conv.nid_hom2het(np.array([2**63], dtype=np.uint64))


def test_ambiguous_relation_is_refused():
    conv = IdConverter(["a", "b"], [2, 2], ["a:r:b", "b:r:a"], [1, 1])
    with pytest.raises(IdRangeError, match="ambiguous"):
        conv.etype2id("r")
    assert conv.eid_het2hom("b:r:a", 0) == 1


def test_from_metadata_in_every_form(tmp_path: Path):
    meta_path = example_graph(tmp_path / "g")
    raw = json.loads(meta_path.read_text())
    forms = [meta_path, meta_path.parent, str(meta_path), raw, load_metadata(meta_path)]
    convs = [IdConverter.from_metadata(m) for m in forms]
    for c in convs:
        assert c.node_types == ["author", "paper", "institution"]
        np.testing.assert_array_equal(c.nid_offset, [0, 1000, 3000, 3003])
        np.testing.assert_array_equal(c.eid_offset, [0, 4000, 7000, 8000, 10000])
        assert c.nid_het2hom("institution", 2) == 3002
    assert distpart.IdConverter is IdConverter  # exported lazily at the top level


def test_bad_construction():
    with pytest.raises(ValueError, match="exactly one count"):
        IdConverter(["a"], [1, 2])
    with pytest.raises(ValueError, match="unique"):
        IdConverter(["a", "a"], [1, 2])
    with pytest.raises(ValueError, match="negative"):
        IdConverter(["a"], [-1])
    with pytest.raises(ValueError, match="canonical"):
        IdConverter(["a"], [1], ["a:r"], [1])
