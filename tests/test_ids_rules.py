"""IdConverter's input rules (issue 18 item 13), those of DGL's guide 7.5 converter with clear
errors: IDs and counts are integers (a float is refused, never truncated), `[]` is an empty
int64 result, the counts must add up to what int64 IDs can number, and an unknown type is
an IdRangeError (a ValueError) naming the known types that is also the KeyError the guide's
dict lookup raises. Then Hypothesis properties: conversions agree with the guide's scalar
algorithm, and arbitrary inputs give a result or one of those errors, nothing else."""
from __future__ import annotations

from bisect import bisect_right

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distpart.chunked.ids import IdConverter, IdRangeError
from distpart.chunked.metadata import parse_metadata

PROPERTY = settings(max_examples=80, deadline=None, derandomize=True, database=None)
INT64_MAX = 2**63 - 1


@pytest.fixture
def conv() -> IdConverter:
    return IdConverter(["author", "empty", "paper"], [3, 0, 4], ["author:writes:paper", "paper:cites:paper"], [5, 2])


# ---------------------------------------------------------------- the reported cases

def test_an_empty_list_is_an_empty_int64_result(conv):
    for out in (conv.nid_het2hom("paper", []), conv.eid_het2hom("cites", []), conv.nid_het2hom([], []),
                *conv.nid_hom2het([]), *conv.eid_hom2het([]), *conv.nid_hom2het(np.zeros((0, 3)))):
        assert out.dtype == np.int64 and out.size == 0
    assert conv.nid_hom2het(np.zeros((0, 3)))[0].shape == (0, 3)


@pytest.mark.parametrize("bad", [1.5, 1.0, np.float64(1.0), True, "1", None, [1]])
def test_a_type_id_must_be_an_integer(conv, bad):
    for method in (conv.id2ntype, conv.id2etype):
        with pytest.raises(TypeError, match="type IDs must be integers"):
            method(bad)
    assert conv.id2ntype(np.int64(2)) == "paper" and conv.id2etype(np.array(1)) == "paper:cites:paper"


@pytest.mark.parametrize("count", [1.5, float("nan"), float("inf"), "3", None, True, [3]])
def test_a_count_must_be_a_whole_number(count):
    with pytest.raises(ValueError, match=r"the count of node type 'a' must be a whole number"):
        IdConverter(["a"], [count])
    with pytest.raises(ValueError, match=r"the count of edge type 'a:r:a' must be a whole number"):
        IdConverter(["a"], [1], ["a:r:a"], [count])


def test_integral_float_counts_are_their_integers():
    conv = IdConverter(["a", "b"], [2.0, np.float32(3.0)])
    assert conv.num_nodes.tolist() == [2, 3] and conv.total_nodes == 5


@pytest.mark.parametrize("counts", [[2**62, 2**62], [INT64_MAX, 1], [2**64]])
def test_counts_beyond_int64_ids_are_refused(counts):
    with pytest.raises(ValueError, match="more than int64 IDs can number"):
        IdConverter([f"t{i}" for i in range(len(counts))], counts)
    IdConverter(["a", "b"], [INT64_MAX - 1, 1])              # exactly the int64 range: fine


@pytest.mark.parametrize("bad", ["venue", ["paper"], ("paper",), {"paper": 1}, 1.5])
def test_an_unknown_node_type_names_the_known_ones(conv, bad):
    with pytest.raises(IdRangeError) as e:
        conv.ntype2id(bad)
    assert str(e.value) == f"unknown node type {bad!r}; the node types are ['author', 'empty', 'paper']"
    assert isinstance(e.value, KeyError) and isinstance(e.value, ValueError)   # the guide's dict lookup: KeyError
    with pytest.raises(IdRangeError, match="unknown node type"):
        conv.nid_het2hom(bad, 0) if isinstance(bad, (str, tuple)) else conv.ntype2id(bad)


@pytest.mark.parametrize("bad", ["author:cites:paper", ("paper", "cites"), ("a", 1, "b"), ["cites"], None])
def test_an_unknown_edge_type_names_the_known_ones(conv, bad):
    with pytest.raises(KeyError) as e:
        conv.etype2id(bad)
    assert isinstance(e.value, IdRangeError)
    assert str(e.value) == (f"unknown edge type {bad!r}; the edge types are "
                            "['author:writes:paper', 'paper:cites:paper']")


def test_graph_meta_lookups_name_the_known_types(tmp_path):
    raw = {"graph_name": "g", "node_type": ["a", "b"], "num_nodes_per_chunk": [[1], [1]],
           "edge_type": ["a:r:b"], "num_edges_per_chunk": [[1]],
           "edges": {"a:r:b": {"format": {"name": "numpy"}, "data": ["e.npy"]}}}
    meta = parse_metadata(raw, tmp_path / "metadata.json")
    with pytest.raises(KeyError) as e:
        meta.etype("b:r:a")
    assert isinstance(e.value, ValueError) and str(e.value) == "unknown edge type 'b:r:a'; the edge types are ['a:r:b']"
    with pytest.raises(ValueError) as e:
        meta.ntype_id("c")
    assert str(e.value) == "unknown node type 'c'; the node types are ['a', 'b']"


def test_metadata_object_missing_a_key_is_named():
    with pytest.raises(ValueError, match="the metadata has neither 'num_nodes_per_chunk' nor 'num_nodes_per_type'"):
        IdConverter.from_metadata({"node_type": ["a"]})
    with pytest.raises(ValueError, match=r"num_nodes_per_chunk: a chunk's count must be a whole number, got 0.5"):
        IdConverter.from_metadata({"node_type": ["a"], "num_nodes_per_chunk": [[1, 0.5]]})
    conv = IdConverter.from_metadata({"node_type": ["a"], "num_nodes_per_chunk": [[1, 2]]})
    assert conv.total_nodes == 3 and conv.edge_types == []


def test_python_ints_beyond_int64_are_range_errors_not_type_errors(conv):
    with pytest.raises(IdRangeError, match=f"homogeneous node ID {2**70} does not fit in int64"):
        conv.nid_hom2het([1, 2**70])
    with pytest.raises(IdRangeError, match=f"node ID {-2**64} does not fit in int64"):
        conv.nid_het2hom("paper", [-2**64])
    types, ids = conv.nid_hom2het(np.array([1, 4], dtype=object))
    assert types.tolist() == [0, 2] and ids.tolist() == [1, 1] and ids.dtype == np.int64


# ---------------------------------------------------------------- properties

def guide_hom2het(offsets, counts, i):
    """The guide's scalar algorithm: the type whose range holds i (empty types hold nothing)."""
    t = bisect_right(list(offsets), i) - 1
    while counts[t] == 0:
        t += 1
    return t, i - offsets[t]


graphs = st.lists(st.integers(0, 50), min_size=1, max_size=5).filter(lambda c: sum(c) > 0)


@PROPERTY
@given(counts=graphs, data=st.data())
def test_conversions_agree_with_the_guide_and_round_trip(counts, data):
    names = [f"t{i}" for i in range(len(counts))]
    conv = IdConverter(names, counts)
    offsets = [0] + list(np.cumsum(counts))
    ids = data.draw(st.lists(st.integers(0, sum(counts) - 1), max_size=20))
    types, per_type = conv.nid_hom2het(ids)
    assert [(int(t), int(i)) for t, i in zip(types, per_type)] == [guide_hom2het(offsets, counts, i) for i in ids]
    assert conv.nid_het2hom(types, per_type).tolist() == ids
    for t, name in enumerate(names):
        mine = per_type[types == t]
        assert conv.nid_het2hom(name, mine).tolist() == [ids[k] for k in np.flatnonzero(types == t)]


junk = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=3),
                 st.lists(st.one_of(st.integers(-2**65, 2**65), st.floats(), st.booleans()), max_size=4),
                 st.tuples(st.text(max_size=3), st.text(max_size=3)))


@PROPERTY
@given(value=junk, kind=st.sampled_from(["nid_hom2het", "nid_het2hom", "id2ntype", "ntype2id", "etype2id",
                                         "eid_het2hom"]))
def test_any_input_gives_a_result_or_a_clear_error(value, kind):
    conv = IdConverter(["a", "b"], [3, 4], ["a:r:b"], [5])
    calls = {"nid_hom2het": lambda: conv.nid_hom2het(value), "nid_het2hom": lambda: conv.nid_het2hom("b", value),
             "id2ntype": lambda: conv.id2ntype(value), "ntype2id": lambda: conv.ntype2id(value),
             "etype2id": lambda: conv.etype2id(value), "eid_het2hom": lambda: conv.eid_het2hom(value, 0)}
    try:
        out = calls[kind]()
    except (TypeError, ValueError, KeyError) as e:     # IdRangeError is a ValueError
        assert str(e) and "\n" not in str(e)
        return
    # Accepted: never a float or bool taken for an integer, never a silently wrapped value.
    flat = np.asarray(value, dtype=object).reshape(-1) if not isinstance(value, tuple) else []
    assert not any(isinstance(v, (float, bool)) for v in flat), (value, out)
    if kind in ("nid_hom2het", "nid_het2hom"):
        arrays = out if isinstance(out, tuple) else (out,)
        assert all(a.dtype == np.int64 for a in arrays)


@PROPERTY
@given(counts=st.lists(st.one_of(st.integers(-5, 2**64), st.floats(allow_nan=True), st.booleans(),
                                 st.text(max_size=2)), min_size=1, max_size=4))
def test_counts_are_taken_exactly_or_refused(counts):
    names = [f"t{i}" for i in range(len(counts))]
    try:
        conv = IdConverter(names, counts)
    except ValueError as e:
        assert "\n" not in str(e)
        return
    exact = [int(c) for c in counts]
    assert all(not isinstance(c, (bool, str)) and c == e for c, e in zip(counts, exact))   # nothing truncated
    assert conv.num_nodes.tolist() == exact and 0 <= sum(exact) <= INT64_MAX
    assert conv.total_nodes == sum(exact)
