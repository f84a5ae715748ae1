"""distpart.chunked.metadata: parsing DGL's chunked metadata.json and every structural error it reports."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

from distpart.errors import InputError
from distpart.chunked.metadata import ChunkFiles, EdgeType, GraphMeta, load_metadata, parse_metadata

WRITES = "author:writes:paper"
CITES = "paper:cites:paper"


def valid_meta(abs_dir: Path) -> Dict[str, Any]:
    """A heterogeneous graph in DGL's chunked format, touching every format and option."""
    return {
        "graph_name": "mag_small",
        "node_type": ["author", "paper", "venue"],
        "num_nodes_per_chunk": [[3, 4], [5, 0, 2], [0]],
        "edge_type": [WRITES, CITES],
        "num_edges_per_chunk": [[6, 1], [7]],
        "edges": {
            WRITES: {
                "format": {"name": "csv", "delimiter": ","},
                "data": ["edges/writes0.csv", str(abs_dir / "writes1.csv")],
            },
            CITES: {"format": {"name": "parquet"}, "data": ["edges/cites0.parquet"]},
        },
        "node_data": {
            "paper": {
                "feat": {"format": {"name": "numpy"},
                         "data": ["node_data/feat0.npy", "node_data/feat1.npy", "../shared/feat2.npy"]},
                "label": {"format": {"name": "hdf5", "dataset": "labels/y"},
                          "data": [str(abs_dir / "label.h5")]},
            },
            "author": {"year": {"format": {"name": "parquet"}, "data": ["a.parquet", "b.parquet"]}},
        },
        "edge_data": {
            CITES: {"weight": {"format": {"name": "numpy"}, "data": ["edge_data/w.npy"]}},
        },
    }


def write_meta(folder: Path, raw: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "metadata.json"
    path.write_text(json.dumps(raw) if not isinstance(raw, str) else raw)
    return path


# ---------------------------------------------------------------- valid input

def test_valid_heterogeneous_metadata(tmp_path: Path) -> None:
    abs_dir = tmp_path / "elsewhere"
    folder = tmp_path / "graph"
    path = write_meta(folder, valid_meta(abs_dir))
    meta = load_metadata(path)

    assert isinstance(meta, GraphMeta)
    assert meta.path == path
    assert meta.root == folder
    assert meta.graph_name == "mag_small"
    assert meta.node_types == ("author", "paper", "venue")
    assert meta.node_chunk_counts == ((3, 4), (5, 0, 2), (0,))
    assert all(isinstance(c, tuple) for c in meta.node_chunk_counts)
    assert meta.node_counts == [7, 7, 0]
    assert meta.num_nodes("paper") == 7
    assert meta.num_nodes("venue") == 0
    assert meta.ntype_id("venue") == 2

    assert [e.name for e in meta.edge_types] == [WRITES, CITES]
    w = meta.etype(WRITES)
    assert isinstance(w, EdgeType)
    assert (w.src, w.rel, w.dst) == ("author", "writes", "paper")
    assert w.chunk_counts == (6, 1)
    assert w.count == 7
    c = meta.etype(CITES)
    assert (c.src, c.rel, c.dst) == ("paper", "cites", "paper")
    assert meta.edge_counts == [7, 7]
    with pytest.raises(KeyError):
        meta.etype("author:cites:paper")

    # Formats: csv keeps its delimiter, hdf5 its dataset, the others use the defaults.
    assert w.files.fmt.name == "csv" and w.files.fmt.delimiter == ","
    assert c.files.fmt.name == "parquet" and c.files.fmt.dataset is None
    label = meta.node_features("paper")["label"]
    assert isinstance(label, ChunkFiles)
    assert label.fmt.name == "hdf5" and label.fmt.dataset == "labels/y"

    # Paths: relative ones resolve against the metadata's folder, absolute ones are kept.
    assert w.files.paths == (folder / "edges/writes0.csv", abs_dir / "writes1.csv")
    assert c.files.paths == (folder / "edges/cites0.parquet",)
    feat = meta.node_features("paper")["feat"]
    assert feat.paths[:2] == (folder / "node_data/feat0.npy", folder / "node_data/feat1.npy")
    assert feat.paths[2].resolve() == (tmp_path / "shared/feat2.npy").resolve()
    assert label.paths == (abs_dir / "label.h5",)
    assert meta.node_features("author")["year"].paths == (folder / "a.parquet", folder / "b.parquet")
    assert meta.node_features("venue") == {}
    assert meta.edge_features(CITES)["weight"].paths == (folder / "edge_data/w.npy",)
    assert meta.edge_features(WRITES) == {}

    # Every file, each with a `where` naming the metadata file and the key.
    files = meta.all_files()
    assert len(files) == 3 + 3 + 1 + 2 + 1
    assert {p for _, p in files} >= {folder / "edges/writes0.csv", abs_dir / "label.h5"}
    for where, _ in files:
        assert where.startswith(str(path) + ": ")
    assert (f"{path}: edges.{WRITES}", folder / "edges/writes0.csv") in files
    assert (f"{path}: node_data.paper.label", abs_dir / "label.h5") in files


def test_load_metadata_accepts_the_folder(tmp_path: Path) -> None:
    path = write_meta(tmp_path / "g", valid_meta(tmp_path))
    meta = load_metadata(tmp_path / "g")
    assert meta.path == path
    assert meta.etype(WRITES).files.paths[0] == tmp_path / "g/edges/writes0.csv"


def test_load_metadata_accepts_str_path(tmp_path: Path) -> None:
    path = write_meta(tmp_path, valid_meta(tmp_path))
    assert load_metadata(str(path)).graph_name == "mag_small"


def test_parse_metadata_matches_load(tmp_path: Path) -> None:
    raw = valid_meta(tmp_path)
    path = write_meta(tmp_path, raw)
    assert parse_metadata(copy.deepcopy(raw), path) == load_metadata(path)


def test_csv_default_delimiter_is_space(tmp_path: Path) -> None:
    raw = valid_meta(tmp_path)
    del raw["edges"][WRITES]["format"]["delimiter"]
    meta = parse_metadata(raw, tmp_path / "metadata.json")
    assert meta.etype(WRITES).files.fmt.delimiter == " "


@pytest.mark.parametrize("delim", ["\t", ";", "|", " "])
def test_csv_single_character_delimiters(tmp_path: Path, delim: str) -> None:
    raw = valid_meta(tmp_path)
    raw["edges"][WRITES]["format"]["delimiter"] = delim
    assert parse_metadata(raw, tmp_path / "m.json").etype(WRITES).files.fmt.delimiter == delim


def test_graph_without_edge_types(tmp_path: Path) -> None:
    raw = {"graph_name": "points", "node_type": ["_N"], "num_nodes_per_chunk": [[10, 5]],
           "node_data": {"_N": {"x": {"format": {"name": "numpy"}, "data": ["x0.npy", "x1.npy"]}}}}
    meta = load_metadata(write_meta(tmp_path, raw))
    assert meta.edge_types == ()
    assert meta.edge_counts == []
    assert meta.node_counts == [15]
    assert meta.edge_data == {}
    assert [p for _, p in meta.all_files()] == [tmp_path / "x0.npy", tmp_path / "x1.npy"]


def test_graph_with_empty_edge_type_list(tmp_path: Path) -> None:
    raw = {"graph_name": "g", "node_type": ["a"], "num_nodes_per_chunk": [[1]],
           "edge_type": [], "num_edges_per_chunk": [], "edges": {}}
    meta = parse_metadata(raw, tmp_path / "metadata.json")
    assert meta.edge_types == ()


def test_type_with_zero_nodes(tmp_path: Path) -> None:
    raw = {"graph_name": "g", "node_type": ["a", "empty"], "num_nodes_per_chunk": [[2], [0, 0]],
           "edge_type": ["a:r:empty"], "num_edges_per_chunk": [[0]],
           "edges": {"a:r:empty": {"format": {"name": "numpy"}, "data": ["e.npy"]}}}
    meta = parse_metadata(raw, tmp_path / "metadata.json")
    assert meta.num_nodes("empty") == 0
    assert meta.node_chunk_counts[1] == (0, 0)
    assert meta.etype("a:r:empty").count == 0


def test_null_feature_groups_mean_none(tmp_path: Path) -> None:
    raw = valid_meta(tmp_path)
    raw["node_data"] = None
    del raw["edge_data"]
    meta = parse_metadata(raw, tmp_path / "metadata.json")
    assert meta.node_data == {} and meta.edge_data == {}


# ---------------------------------------------------------------- errors

def expect_error(tmp_path: Path, raw: Any, *fragments: str) -> InputError:
    """load_metadata must raise InputError whose message names the file and every fragment."""
    path = write_meta(tmp_path, raw)
    with pytest.raises(InputError) as info:
        load_metadata(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    assert info.value.where is not None and str(path) in info.value.where
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return info.value


def mutated(tmp_path: Path, change: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
    raw = valid_meta(tmp_path)
    change(raw)
    return raw


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_metadata(tmp_path / "nope.json")
    assert str(tmp_path / "nope.json") in str(info.value)
    with pytest.raises(InputError) as info:
        load_metadata(tmp_path)  # a folder without metadata.json
    assert str(tmp_path / "metadata.json") in str(info.value)


def test_malformed_json_reports_line_and_column(tmp_path: Path) -> None:
    text = '{\n  "graph_name": "g",\n  "node_type": ["a"]\n  "num_nodes_per_chunk": [[1]]\n}\n'
    err = expect_error(tmp_path, text, "malformed JSON", "line 4", "column 3")
    assert err.problem.startswith("malformed JSON")


def test_truncated_json(tmp_path: Path) -> None:
    text = json.dumps(valid_meta(tmp_path))[:-20]
    expect_error(tmp_path, text, "malformed JSON", "line 1", "column")


def test_non_utf8_metadata_raises_input_error(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    path.write_bytes(b'{"graph_name": "caf\xe9"}')
    with pytest.raises(InputError) as info:
        load_metadata(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("top", ["[]", "[1, 2]", '"graph"', "3", "null"])
def test_top_level_not_an_object(tmp_path: Path, top: str) -> None:
    expect_error(tmp_path, top, "top level must be a JSON object")


# num_edges_per_chunk may be missing: edge counts then come from row_counts or the files
# (test_metadata_dialects.py).
@pytest.mark.parametrize("key", ["graph_name", "node_type", "num_nodes_per_chunk", "edges"])
def test_missing_required_key(tmp_path: Path, key: str) -> None:
    expect_error(tmp_path, mutated(tmp_path, lambda r: r.pop(key)), key, "missing key")


def test_edge_type_missing_with_edges_present(tmp_path: Path) -> None:
    # Without "edge_type" the graph has no edge types, so any "edges" entry is unlisted.
    raw = mutated(tmp_path, lambda r: r.pop("edge_type"))
    raw.pop("edge_data")
    expect_error(tmp_path, raw, "edges", "not listed in edge_type")


@pytest.mark.parametrize("key,value,problem", [
    ("graph_name", 3, "must be a str"),
    ("node_type", "author", "must be a list"),
    ("node_type", ["author", 2, "venue"], "list of strings"),
    ("node_type", [], "at least one node type"),
    ("edge_type", WRITES, "must be a list"),
    ("edges", [WRITES, CITES], "must be a dict"),
])
def test_wrong_kind_of_value(tmp_path: Path, key: str, value: Any, problem: str) -> None:
    expect_error(tmp_path, mutated(tmp_path, lambda r: r.__setitem__(key, value)), key, problem)


COUNT_KEYS = ["num_nodes_per_chunk", "num_edges_per_chunk"]


@pytest.mark.parametrize("key", COUNT_KEYS)
@pytest.mark.parametrize("bad", [5, "3", {"a": 1}])
def test_counts_not_a_list(tmp_path: Path, key: str, bad: Any) -> None:
    expect_error(tmp_path, mutated(tmp_path, lambda r: r.__setitem__(key, bad)), key)


@pytest.mark.parametrize("key", COUNT_KEYS)
@pytest.mark.parametrize("entry", [5, [1, -1], [True, 2], [False], [1.0, 2], ["1"], [None], {"x": 1}])
def test_bad_count_entry(tmp_path: Path, key: str, entry: Any) -> None:
    def change(r: Dict[str, Any]) -> None:
        r[key][0] = entry
    first_type = "author" if key == COUNT_KEYS[0] else WRITES
    expect_error(tmp_path, mutated(tmp_path, change), key, "non-negative integers", repr(first_type))


@pytest.mark.parametrize("key,extra", [("num_nodes_per_chunk", 1), ("num_nodes_per_chunk", -1),
                                       ("num_edges_per_chunk", 1), ("num_edges_per_chunk", -1)])
def test_count_list_length_differs_from_types(tmp_path: Path, key: str, extra: int) -> None:
    def change(r: Dict[str, Any]) -> None:
        if extra > 0:
            r[key].append([1])
        else:
            r[key].pop()
    ntypes = 3 if key == COUNT_KEYS[0] else 2
    expect_error(tmp_path, mutated(tmp_path, change), key,
                 f"has {ntypes + extra} lists but there are {ntypes} types")


def test_duplicate_node_type(tmp_path: Path) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["node_type"] = ["author", "paper", "author"]
    expect_error(tmp_path, mutated(tmp_path, change), "node_type", "unique")


def test_duplicate_edge_type(tmp_path: Path) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edge_type"] = [WRITES, WRITES]
    expect_error(tmp_path, mutated(tmp_path, change), "edge_type", "unique")


@pytest.mark.parametrize("name", ["writes", "author:writes", "author:writes:paper:x",
                                  "author::paper", ":writes:paper", "author:writes:"])
def test_non_canonical_edge_type(tmp_path: Path, name: str) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edge_type"][0] = name
        r["edges"][name] = r["edges"].pop(WRITES)
    expect_error(tmp_path, mutated(tmp_path, change), "edge_type", repr(name), "canonical")


@pytest.mark.parametrize("name,unknown", [("author:writes:book", "book"), ("robot:writes:paper", "robot")])
def test_edge_type_with_unknown_node_type(tmp_path: Path, name: str, unknown: str) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edge_type"][0] = name
        r["edges"][name] = r["edges"].pop(WRITES)
    expect_error(tmp_path, mutated(tmp_path, change), "edge_type", f"unknown node type '{unknown}'")


def test_edges_entry_missing(tmp_path: Path) -> None:
    expect_error(tmp_path, mutated(tmp_path, lambda r: r["edges"].pop(CITES)),
                 "edges", f"no entry for edge type '{CITES}'")


def test_edges_entry_not_listed(tmp_path: Path) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edges"]["venue:hosts:paper"] = copy.deepcopy(r["edges"][CITES])
    expect_error(tmp_path, mutated(tmp_path, change), "edges", "'venue:hosts:paper'", "not listed in edge_type")


@pytest.mark.parametrize("files", [["one.csv"], ["a.csv", "b.csv", "c.csv"], []])
def test_file_count_differs_from_edge_chunks(tmp_path: Path, files: list) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edges"][WRITES]["data"] = files
    expect_error(tmp_path, mutated(tmp_path, change), f"edges.{WRITES}.data",
                 f"{len(files)} files", "2 entries")


@pytest.mark.parametrize("fmt", ["hdf5", "CSV", "npy", "json", "", None, 3])
def test_unknown_edge_format(tmp_path: Path, fmt: Any) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edges"][CITES]["format"]["name"] = fmt
    expect_error(tmp_path, mutated(tmp_path, change), f"edges.{CITES}.format.name", "unknown format")


@pytest.mark.parametrize("fmt", ["CSV", "txt", "Numpy", None])
def test_unknown_feature_format(tmp_path: Path, fmt: Any) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["node_data"]["paper"]["feat"]["format"] = {"name": fmt, "delimiter": ","}
    err = expect_error(tmp_path, mutated(tmp_path, change), "node_data.paper.feat.format.name", "unknown format")
    assert "csv" in err.problem.split("expected one of")[1]   # CSV features are DGL's too


def test_unknown_edge_feature_format(tmp_path: Path) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edge_data"][CITES]["weight"]["format"]["name"] = "tsv"
    expect_error(tmp_path, mutated(tmp_path, change), f"edge_data.{CITES}.weight.format.name", "unknown format")


@pytest.mark.parametrize("fmt", [{"name": "hdf5"}, {"name": "hdf5", "dataset": None},
                                 {"name": "hdf5", "dataset": 3}])
def test_hdf5_without_dataset(tmp_path: Path, fmt: dict) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["node_data"]["paper"]["label"]["format"] = fmt
    expect_error(tmp_path, mutated(tmp_path, change), "node_data.paper.label.format.dataset", "dataset")


@pytest.mark.parametrize("group,owner", [("node_data", "institution"), ("edge_data", "author:cites:paper"),
                                         ("edge_data", "paper")])
def test_feature_under_undeclared_type(tmp_path: Path, group: str, owner: str) -> None:
    def change(r: Dict[str, Any]) -> None:
        r[group][owner] = {"x": {"format": {"name": "numpy"}, "data": ["x.npy"]}}
    expect_error(tmp_path, mutated(tmp_path, change), group, repr(owner), "not a declared type")


def test_feature_name_with_slash(tmp_path: Path) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["node_data"]["paper"]["a/b"] = r["node_data"]["paper"].pop("feat")
    expect_error(tmp_path, mutated(tmp_path, change), "node_data.paper", "'a/b'", "'/'")


def test_edge_feature_name_with_slash(tmp_path: Path) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edge_data"][CITES]["w/1"] = r["edge_data"][CITES].pop("weight")
    expect_error(tmp_path, mutated(tmp_path, change), f"edge_data.{CITES}", "'w/1'")


@pytest.mark.parametrize("delim", [",,", "\t\t", "", 1, None])
def test_bad_csv_delimiter(tmp_path: Path, delim: Any) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edges"][WRITES]["format"]["delimiter"] = delim
    expect_error(tmp_path, mutated(tmp_path, change), f"edges.{WRITES}.format.delimiter", "single character")


@pytest.mark.parametrize("spec,key,problem", [
    ("file.csv", "", "must be an object"),
    ({"data": ["a.parquet"]}, ".format", "missing key"),
    ({"format": "parquet", "data": ["a.parquet"]}, ".format", "must be an object"),
    ({"format": {"name": "parquet"}}, ".data", "missing key"),
    ({"format": {"name": "parquet"}, "data": "a.parquet"}, ".data", "list of file paths"),
    ({"format": {"name": "parquet"}, "data": ["a.parquet", 3]}, ".data", "list of file paths"),
])
def test_bad_chunk_file_spec(tmp_path: Path, spec: Any, key: str, problem: str) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["edges"][CITES] = spec
    expect_error(tmp_path, mutated(tmp_path, change), f"edges.{CITES}{key}", problem)


@pytest.mark.parametrize("group", ["node_data", "edge_data"])
def test_feature_group_not_an_object(tmp_path: Path, group: str) -> None:
    expect_error(tmp_path, mutated(tmp_path, lambda r: r.__setitem__(group, ["feat"])), group, "must be an object")


def test_features_of_a_type_not_an_object(tmp_path: Path) -> None:
    def change(r: Dict[str, Any]) -> None:
        r["node_data"]["paper"] = ["feat"]
    expect_error(tmp_path, mutated(tmp_path, change), "node_data.paper", "must be an object")


@pytest.mark.parametrize("edges", [None, 5])
def test_non_object_edges_without_edge_types(tmp_path: Path, edges: Any) -> None:
    raw = {"graph_name": "g", "node_type": ["a"], "num_nodes_per_chunk": [[1]], "edges": edges}
    expect_error(tmp_path, raw, "edges")


# ---------------------------------------------------------------- names (issue 11.1, 7.2)

def _named(node_types, etype, feat="feat"):
    src, rel, dst = etype.split(":")
    return {"graph_name": "g", "node_type": node_types, "num_nodes_per_chunk": [[2]] * len(node_types),
            "edge_type": [etype], "num_edges_per_chunk": [[1]],
            "edges": {etype: {"format": {"name": "numpy"}, "data": ["e.npy"]}},
            "node_data": {node_types[0]: {feat: {"format": {"name": "numpy"}, "data": ["f.npy"]}}}}


@pytest.mark.parametrize("node_types, etype, feat, problem", [
    (["/abs/path/victim"], "/abs/path/victim:r:/abs/path/victim", "feat", "must not contain '/'"),
    (["..", "b"], "b:r:b", "feat", "'..' is not allowed"),
    (["inst/x", "b"], "b:r:b", "feat", "node type name 'inst/x' must not contain '/'"),
    (["", "b"], "b:r:b", "feat", "node type name must not be empty"),
    (["a\0b", "b"], "b:r:b", "feat", "NUL"),
    (["a\\b", "b"], "b:r:b", "feat", "must not contain '/' or '\\'"),
    (["a:b", "b"], "b:r:b", "feat", "must not contain ':'"),
    (["a"], "a:r/s:a", "feat", "relation name 'r/s' must not contain '/'"),
    (["a"], "a:r:a", "x/y", "feature name 'x/y' must not contain '/'"),
    (["a"], "a:r:a", "", "feature name must not be empty"),
])
def test_unsafe_names_are_refused_naming_the_key(tmp_path, node_types, etype, feat, problem):
    from distpart.chunked.metadata import parse_metadata
    with pytest.raises(InputError) as e:
        parse_metadata(_named(node_types, etype, feat), tmp_path / "metadata.json")
    assert problem in str(e.value)
    assert str(tmp_path / "metadata.json") in str(e.value)


def test_ordinary_names_pass(tmp_path):
    from distpart.chunked.metadata import parse_metadata
    meta = parse_metadata(_named(["paper-v2", "author.x"], "paper-v2:writes_to:author.x", "feat.0"),
                          tmp_path / "metadata.json")
    assert meta.node_types == ("paper-v2", "author.x")


def test_output_paths_stay_inside_their_folder(tmp_path):
    from distpart.paths import file_in
    assert file_in(tmp_path, "paper", ".txt") == tmp_path / "paper.txt"
    for bad in ("/abs/victim", "..", "a/b", ""):
        with pytest.raises(InputError, match="refusing to write"):
            file_in(tmp_path, bad, ".txt")
    (tmp_path / "link.txt").symlink_to("/tmp/elsewhere.txt")
    with pytest.raises(InputError, match="resolves outside the folder"):
        file_in(tmp_path, "link", ".txt")
