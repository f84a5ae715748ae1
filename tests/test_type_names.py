"""Type and feature names in metadata.json and in `distpart chunk` (issue 18 item 11): a name
distpart would make a file name of must fit in one (255 bytes, with the suffix distpart adds:
`<ntype>.txt`), and no name may hold a control, format or line-break character, which would
break or disguise the one-line report. Refused when the metadata is parsed (`distpart
validate`), or before `distpart chunk` writes anything. Then Hypothesis properties: random
names, and random JSON-ish metadata documents, give a graph or an InputError in one line,
never anything else."""
from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distpart.chunked.metadata import load_metadata, parse_metadata
from distpart.chunked.names import name_problem
from distpart.chunked.write import chunk_edge_lists, chunk_ogb, write_graph
from distpart.errors import InputError
from distpart.paths import file_in

PROPERTY = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def graph(node_types: List[str], etype: str = "", feat: str = "feat") -> Dict[str, Any]:
    """A small chunked metadata.json (as decoded) with these names."""
    etype = etype or f"{node_types[0]}:r:{node_types[-1]}"
    return {"graph_name": "g", "node_type": node_types, "num_nodes_per_chunk": [[2]] * len(node_types),
            "edge_type": [etype], "num_edges_per_chunk": [[1]],
            "edges": {etype: {"format": {"name": "numpy"}, "data": ["e.npy"]}},
            "node_data": {node_types[0]: {feat: {"format": {"name": "numpy"}, "data": ["f.npy"]}}}}


def refused(tmp_path: Path, raw: Any) -> str:
    with pytest.raises(InputError) as e:
        parse_metadata(raw, tmp_path / "metadata.json")
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'metadata.json'}: ") and len(msg.splitlines()) == 1, msg
    return msg


# ---------------------------------------------------------------- length

@pytest.mark.parametrize("name, size", [("a" * 252, 252), ("\u00e9" * 126, 252), ("\u20ac" * 100, 300),
                                        ("x" * 300, 300)])
def test_a_node_type_name_too_long_for_its_file_is_refused(tmp_path, name, size):
    msg = refused(tmp_path, graph([name, "b"]))
    assert f"{tmp_path / 'metadata.json'}: node_type: node type name " in msg
    assert f"is {size} bytes in UTF-8; it becomes the file name '<name>.txt', so it can have at most 251 bytes" in msg


@pytest.mark.parametrize("name", ["a" * 251, "\u00e9" * 125 + "a"])
def test_the_longest_node_type_name_still_makes_its_file(tmp_path, name):
    meta = parse_metadata(graph([name, "b"]), tmp_path / "metadata.json")
    assert meta.node_types[0] == name
    file_in(tmp_path, name, ".txt").write_text("0\n")       # what Step 1 writes for it


def test_relation_and_feature_names_must_fit_a_file_name(tmp_path):
    assert "relation name 'rrrrr" in refused(tmp_path, graph(["a"], "a:" + "r" * 256 + ":a"))
    assert "feature name 'fffff" in refused(tmp_path, graph(["a"], feat="f" * 256))
    parse_metadata(graph(["a"], "a:" + "r" * 255 + ":a", "f" * 255), tmp_path / "metadata.json")


# ---------------------------------------------------------------- characters that break the report

@pytest.mark.parametrize("char", ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\u202e",
                                  "\u200b", "\ufeff", "\ud800"])
@pytest.mark.parametrize("where", ["node type", "relation", "feature"])
def test_control_format_and_line_break_characters_are_refused(tmp_path, char, where):
    bad = f"pa{char}per"
    raw = {"node type": graph([bad, "b"]), "relation": graph(["a"], f"a:{bad}:a"),
           "feature": graph(["a"], feat=bad)}[where]
    msg = refused(tmp_path, raw)
    assert f"{where} name " in msg and f"(it holds U+{ord(char):04X})" in msg
    assert "control, format or line-break characters" in msg


def test_names_quoted_from_the_file_stay_on_one_line(tmp_path):
    """Every report quoting a key of the file escapes what would break its line."""
    raw = graph(["a"])
    raw["edge_type"] = ["x\ny:r:a"]
    assert "'x\\ny:r:a' names unknown node type 'x\\ny'" in refused(tmp_path, raw)
    raw = graph(["a"])
    raw["edges"]["a:r:a\u2028(fine)"] = raw["edges"]["a:r:a"]
    assert "'a:r:a\\u2028(fine)' is not listed in edge_type" in refused(tmp_path, raw)
    raw = graph(["a"])
    raw["node_data"]["evil\r\x1b[2K"] = {}
    assert "'evil\\r\\x1b[2K' is not a declared type" in refused(tmp_path, raw)
    raw = graph(["a"])
    raw["node_data"]["a"]["f"] = {"format": {"name": "numpy\n"}, "data": []}
    assert "node_data.a.f.format.name: unknown format 'numpy\\n'" in refused(tmp_path, raw)


def test_validate_refuses_them_with_exit_2_in_one_line(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps(graph(["n" * 300, "b"])))
    run = subprocess.run([sys.executable, "-m", "distpart", "validate", str(folder)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    errors = [ln for ln in run.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "node_type: node type name 'nnnn" in errors[0] and "at most 251 bytes" in errors[0]


# ---------------------------------------------------------------- distpart chunk: refused before writing

def test_chunk_refuses_an_edge_type_whose_chunk_file_name_is_too_long(tmp_path):
    edges = tmp_path / "e.csv"
    edges.write_text("0,1\n1,0\n")
    long_type = f"{'a' * 120}:{'r' * 10}:{'a' * 120}"        # each name fine; edges/<a___r___a>-3.csv is not
    with pytest.raises(InputError, match=r"its chunk file name 'aaaa.*would be 262 bytes in UTF-8, and a file "
                                         r"name holds at most 255"):
        chunk_edge_lists({long_type: edges}, tmp_path / "out", notes=lambda _: None)
    assert not (tmp_path / "out").exists()
    run = subprocess.run([sys.executable, "-m", "distpart", "chunk", "--edges", f"{long_type}={edges}",
                          str(tmp_path / "out2")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) <= 2, run.stderr
    assert "error:" in run.stderr and "Traceback" not in run.stderr and not (tmp_path / "out2").exists()


def test_chunk_refuses_a_long_feature_name_before_writing(tmp_path):
    g = {"num_nodes": {"a": 2}, "edges": {"a:r:a": (np.array([0]), np.array([1]))},
         "node_data": {"a": {"f" * 250: np.zeros(2)}}}
    with pytest.raises(ValueError, match=r"feature a/f+: its chunk file name .* would be 256 bytes"):
        write_graph(g, tmp_path / "out", num_chunks=2)
    assert not (tmp_path / "out").exists()


def test_chunk_ogb_checks_folder_and_file_names_before_writing(tmp_path):
    rel = tmp_path / "ogb" / "processed" / "pa\nper___cites___paper"
    rel.mkdir(parents=True)
    np.save(rel / "edge_index.npy", np.array([[0, 1], [1, 0]]))
    with pytest.raises(InputError, match=r"node type name 'pa\\nper' must not contain control"):
        chunk_ogb(tmp_path / "ogb", tmp_path / "out", notes=lambda _: None)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- metadata.json as text

@pytest.mark.parametrize("text, problem", [("[" * 100000, "nested too deeply"),
                                           ('{"graph_name": ' + "9" * 5000 + "}", "malformed JSON")])
def test_json_python_cannot_decode_is_an_input_error(tmp_path, text, problem):
    (tmp_path / "metadata.json").write_text(text)
    with pytest.raises(InputError, match=problem):
        load_metadata(tmp_path)


def test_counts_beyond_int64_ids_are_refused(tmp_path):
    raw = graph(["a", "b"])
    raw["num_nodes_per_chunk"] = [[2**62], [2**62]]
    assert "num_nodes_per_chunk: the counts add up to 9223372036854775808" in refused(tmp_path, raw)


# ---------------------------------------------------------------- properties

_odd = st.sampled_from(["\n", "\r", "\x00", "\x1b", "\u2028", "\u202e", "\ud800", "/", "\\", ":", ".", "..", " ",
                        "\ufeff", "\u00e9", "\U0001d11e", "#", "'", '"'])
names = st.one_of(st.text(max_size=12), st.lists(st.one_of(_odd, st.characters()), max_size=8).map("".join),
                  st.text(alphabet="a\u00e9\u20ac\U0001d11e", min_size=50, max_size=140))


def _one_line(msg: str) -> bool:
    return len(msg.splitlines()) == 1 and msg.encode("utf-8")


@PROPERTY
@given(name=names, kind=st.sampled_from(["node type", "relation", "feature"]))
def test_an_accepted_name_makes_its_file_and_a_refusal_is_one_line(tmp_path, name, kind):
    problem = name_problem(name, kind)
    if problem is not None:
        assert _one_line(problem)
        return
    assert name.splitlines() == [name]                        # quoted as it is, it stays on one line
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in name)
    suffix = ".txt" if kind == "node type" else ""
    path = file_in(tmp_path, name, suffix)
    path.write_text("x")                                      # the file system takes it
    assert path.read_text() == "x"
    path.unlink()


@PROPERTY
@given(ntypes=st.lists(names, min_size=1, max_size=3), rel=names, feat=names)
def test_metadata_with_random_names_parses_or_is_refused_in_one_line(tmp_path, ntypes, rel, feat):
    raw = graph(ntypes, f"{ntypes[0]}:{rel}:{ntypes[-1]}", feat)
    try:
        meta = parse_metadata(raw, tmp_path / "metadata.json")
    except InputError as e:
        assert _one_line(str(e))
        return
    for ntype in meta.node_types:
        file_in(tmp_path, ntype, ".txt").write_text("")


_keys = st.one_of(st.sampled_from(["graph_name", "node_type", "num_nodes_per_chunk", "edge_type",
                                   "num_edges_per_chunk", "edges", "node_data", "edge_data", "format", "data",
                                   "name", "delimiter", "dataset", "a", "a:r:a", "feat"]), names)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | names
    | st.sampled_from(["csv", "numpy", "parquet", "hdf5", "a", "a:r:a"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4), max_leaves=16)


def _paths(value: Any, prefix=()) -> List[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def _parse_or_input_error(tmp_path: Path, raw: Any) -> None:
    try:
        parse_metadata(raw, tmp_path / "metadata.json")
    except InputError as e:
        assert _one_line(str(e)), str(e)


@PROPERTY
@given(raw=json_values)
def test_any_json_document_parses_or_is_an_input_error(tmp_path, raw):
    _parse_or_input_error(tmp_path, raw)


@PROPERTY
@given(data=st.data())
def test_a_valid_document_with_any_part_replaced_parses_or_is_an_input_error(tmp_path, data):
    raw = graph(["a", "b"], "a:r:b")
    raw["edge_data"] = {"a:r:b": {"w": {"format": {"name": "csv", "delimiter": ","}, "data": ["w.csv"]}}}
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(raw)[1:]))
        parent = raw
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(json_values)
    _parse_or_input_error(tmp_path, raw)


@PROPERTY
@given(text=st.one_of(st.text(max_size=40), json_values.map(json.dumps),
                      st.binary(max_size=40).map(lambda b: b.decode("latin-1"))))
def test_any_metadata_file_loads_or_is_an_input_error(tmp_path, text):
    (tmp_path / "metadata.json").write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        load_metadata(tmp_path)
    except InputError as e:
        assert _one_line(str(e)), str(e)
