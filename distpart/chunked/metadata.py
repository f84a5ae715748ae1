"""The input graph's schema: parsing and structural checks of DGL's chunked `metadata.json`.

This module owns the in-memory description of a chunked graph (types, counts, chunk files
and their formats). It reads only the JSON, never a data file, so every rank can parse it
redundantly and cheaply; checks that need file contents live in `readers` and `validate`.

Counts come in the dialects the writers of the format use: DGL's guide (`num_nodes_per_chunk`,
`num_edges_per_chunk`), DGL's tools and GraphStorm's Spark preprocessing, GSProcessing
(`num_nodes_per_type`, `num_edges_per_type`, a `row_counts` list beside each file list).
A count the JSON leaves out is left None here and read from the files by `counts`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import DistpartError, InputError
from ..paths import read_user_text
from .names import name_problem, printable

EDGE_FORMATS = ("csv", "numpy", "parquet")
FEATURE_FORMATS = ("numpy", "parquet", "csv", "hdf5")
INT64_MAX = 2**63 - 1
class UnknownTypeError(InputError, KeyError, ValueError):
    """A node or edge type the graph does not have. A KeyError and a ValueError, as a dict's
    or list's lookup would raise, with a message naming the type and the known ones."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)

    __str__ = Exception.__str__       # not KeyError's quoted repr


@dataclass(frozen=True)
class FileFormat:
    """How the files of one chunk list are encoded (the `format` object of a ChunkFileSpec)."""

    name: str
    delimiter: str = " "
    dataset: Optional[str] = None


@dataclass(frozen=True)
class ChunkFiles:
    """An ordered list of chunk files sharing one format; rows concatenate in list order."""

    fmt: FileFormat
    paths: Tuple[Path, ...]
    where: str  # the metadata key it came from, for error messages
    # Rows per file as the metadata declares them (GSProcessing's "row_counts"), checked
    # against the files when they are opened; None when the metadata does not say.
    row_counts: Optional[Tuple[int, ...]] = None
    # What reading the files' headers found (readers/features.py), kept for this loaded
    # metadata: a run opens a feature from several stages on every rank, and a CSV file's
    # header is a scan of the whole file. Not part of the value.
    headers: Dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class EdgeType:
    """A canonical edge type `src:rel:dst` with its per-chunk counts and edge files.

    `chunk_counts` is None while the metadata leaves the per-file counts out (`counts`
    reads them from the files); `counts_key` names where they came from, for the messages
    that compare them with what the files hold; `declared_total` is `num_edges_per_type`'s
    entry, if any.
    """

    name: str
    src: str
    rel: str
    dst: str
    chunk_counts: Optional[Tuple[int, ...]]
    files: ChunkFiles
    counts_key: str = "num_edges_per_chunk"
    declared_total: Optional[int] = None

    @property
    def count(self) -> int:
        if self.chunk_counts is None:
            raise RuntimeError(f"the edge count of {self.name!r} is not known yet: the metadata leaves it "
                               f"out, and chunked.counts.count_rows reads it from the files")
        return sum(self.chunk_counts)


@dataclass(frozen=True)
class GraphMeta:
    """Everything metadata.json says about a chunked graph, validated for consistency."""

    path: Path
    graph_name: str
    node_types: Tuple[str, ...]
    node_chunk_counts: Tuple[Tuple[int, ...], ...]
    edge_types: Tuple[EdgeType, ...]
    node_data: Mapping[str, Mapping[str, ChunkFiles]]
    edge_data: Mapping[str, Mapping[str, ChunkFiles]]
    # Node types counted from their `raw_id_mappings` files (GSProcessing's node ID maps),
    # when the metadata has neither num_nodes_per_chunk nor num_nodes_per_type.
    node_count_files: Mapping[str, ChunkFiles] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def counted(self) -> bool:
        """Whether every node and edge count is known (else `counts.count_rows` reads them)."""
        return (all(c is not None for c in self.node_chunk_counts)
                and all(e.chunk_counts is not None for e in self.edge_types))

    def num_nodes(self, ntype: str) -> int:
        counts = self.node_chunk_counts[self.ntype_id(ntype)]
        if counts is None:
            raise RuntimeError(f"the node count of {ntype!r} is not known yet: the metadata leaves it out, "
                               f"and chunked.counts.count_rows reads it from the files")
        return sum(counts)

    @property
    def node_counts(self) -> List[int]:
        return [self.num_nodes(t) for t in self.node_types]

    @property
    def edge_counts(self) -> List[int]:
        return [e.count for e in self.edge_types]

    def ntype_id(self, ntype: str) -> int:
        if ntype not in self.node_types:
            raise UnknownTypeError(f"unknown node type {ntype!r}; the node types are {list(self.node_types)}")
        return self.node_types.index(ntype)

    def etype(self, name: str) -> EdgeType:
        for e in self.edge_types:
            if e.name == name:
                return e
        raise UnknownTypeError(f"unknown edge type {name!r}; the edge types are {[e.name for e in self.edge_types]}")

    def node_features(self, ntype: str) -> Mapping[str, ChunkFiles]:
        return self.node_data.get(ntype, {})

    def edge_features(self, etype: str) -> Mapping[str, ChunkFiles]:
        return self.edge_data.get(etype, {})

    def files_outside_root(self) -> List[Path]:
        """Data files that do not lie under metadata.json's folder (allowed; worth a note,
        since every rank must see them too)."""
        root = self.root.resolve()
        return [p for _, p in self.all_files() if root not in Path(p).resolve().parents]

    def all_files(self) -> List[Tuple[str, Path]]:
        """Every data file named by the metadata, with the key that names it."""
        out: List[Tuple[str, Path]] = [(e.files.where, p) for e in self.edge_types for p in e.files.paths]
        out.extend((cf.where, p) for cf in self.node_count_files.values() for p in cf.paths)
        for group in (self.node_data, self.edge_data):
            for feats in group.values():
                out.extend((cf.where, p) for cf in feats.values() for p in cf.paths)
        return out


def read_json(path: Path, error: "type[DistpartError]" = InputError) -> Any:
    """Decode a JSON file; `error(path, problem)` for a missing, unreadable or malformed file.

    Every JSON distpart reads (metadata.json, partition_meta.json, the partition config)
    goes through here, so all report problems the same way.
    """
    text = read_user_text(path, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(path, f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except ValueError as e:       # e.g. an integer of more digits than Python converts
        raise error(path, f"malformed JSON: {e}") from None
    except RecursionError:
        raise error(path, "malformed JSON: nested too deeply") from None


def load_metadata(path: "str | os.PathLike[str]") -> GraphMeta:
    """Read and check a metadata file: a folder's metadata.json, or the file itself under
    any name (GSProcessing's `updated_row_counts_metadata.json`, DGL's --metadata-filename).
    Raises InputError naming the key. Counts the JSON leaves out stay None
    (`counts.count_rows` reads them)."""
    p = Path(path)
    if p.is_dir():
        p = p / "metadata.json"
        if not p.exists():
            raise InputError(p, "file does not exist; a metadata file of another name (such as "
                                "GSProcessing's updated_row_counts_metadata.json) is given by its path "
                                "instead of its folder")
    return parse_metadata(read_json(p), p)


def parse_metadata(raw: Any, path: Path) -> GraphMeta:
    """Check the decoded JSON object `raw` read from `path` and build a GraphMeta."""
    ctx = _Ctx(path)
    if not isinstance(raw, dict):
        ctx.fail("", "top level must be a JSON object")
    graph_name = ctx.typed(raw, "graph_name", str)
    node_types = tuple(ctx.str_list(raw, "node_type"))
    if not node_types:
        ctx.fail("node_type", "must name at least one node type")
    for ntype in node_types:
        ctx.name(ntype, "node type", "node_type")
    if len(set(node_types)) != len(node_types):
        ctx.fail("node_type", "node type names must be unique")
    node_chunks, node_count_files = ctx.node_counts(raw, node_types)

    etype_names = ctx.str_list(raw, "edge_type") if "edge_type" in raw else []
    if len(set(etype_names)) != len(etype_names):
        ctx.fail("edge_type", "edge type names must be unique")
    edge_chunks = (ctx.count_lists(raw, "num_edges_per_chunk", etype_names)
                   if etype_names and "num_edges_per_chunk" in raw else [None] * len(etype_names))
    edge_totals = (ctx.totals(raw, "num_edges_per_type", etype_names)
                   if etype_names and "num_edges_per_type" in raw else [None] * len(etype_names))
    edges_raw = ctx.typed(raw, "edges", dict) if etype_names else raw.get("edges", {})
    if not isinstance(edges_raw, dict):
        ctx.fail("edges", f"must be an object, found {type(edges_raw).__name__}")
    edge_types = []
    for name, counts, total in zip(etype_names, edge_chunks, edge_totals):
        parts = name.split(":")
        if len(parts) != 3 or not all(parts):
            ctx.fail("edge_type", f"'{name}' is not a canonical 'src:rel:dst' edge type")
        ctx.name(parts[1], "relation", "edge_type")
        for end in (parts[0], parts[2]):
            if end not in node_types:
                ctx.fail("edge_type", f"'{name}' names unknown node type '{end}'")
        if name not in edges_raw:
            ctx.fail("edges", f"no entry for edge type '{name}'")
        files = ctx.chunk_files(edges_raw[name], f"edges.{name}", EDGE_FORMATS)
        edge_types.append(ctx.edge_type(name, parts, files, counts, total))
    for name in edges_raw:
        if name not in etype_names:
            ctx.fail("edges", f"'{name}' is not listed in edge_type")
    known = [sum(e.chunk_counts) for e in edge_types if e.chunk_counts is not None]
    if sum(known) > INT64_MAX:
        ctx.fail("edges", f"the edge counts add up to {sum(known)}, more than int64 IDs can number ({INT64_MAX})")

    node_data = ctx.feature_groups(raw, "node_data", node_types)
    edge_data = ctx.feature_groups(raw, "edge_data", etype_names)
    return GraphMeta(path, graph_name, node_types, tuple(node_chunks), tuple(edge_types), node_data,
                     edge_data, node_count_files)


class _Ctx:
    """Error-raising accessors that know which file and key they are reading."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str) -> None:
        # Keys and problems quote names from the file: escaped, so the report stays one line.
        where = f"{self.path}: {printable(key)}" if key else str(self.path)
        raise InputError(where, printable(problem))

    def name(self, name: str, kind: str, key: str) -> None:
        problem = name_problem(name, kind)
        if problem:
            self.fail(key, problem)

    def typed(self, obj: Mapping[str, Any], key: str, kind: type) -> Any:
        if key not in obj:
            self.fail(key, "missing key")
        val = obj[key]
        if not isinstance(val, kind):
            self.fail(key, f"must be a {kind.__name__}, found {type(val).__name__}")
        return val

    def str_list(self, obj: Mapping[str, Any], key: str) -> List[str]:
        val = self.typed(obj, key, list)
        if not all(isinstance(v, str) for v in val):
            self.fail(key, "must be a list of strings")
        return val

    def count_lists(self, obj: Mapping[str, Any], key: str, names: List[str]) -> List[List[int]]:
        val = self.typed(obj, key, list)
        if len(val) != len(names):
            self.fail(key, f"has {len(val)} lists but there are {len(names)} types")
        for name, counts in zip(names, val):
            if not isinstance(counts, list) or not all(
                    isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
                self.fail(key, f"entry for '{name}' must be a list of non-negative integers")
        total = sum(sum(counts) for counts in val)
        if total > INT64_MAX:     # IDs of all types together are int64 (DGL's homogeneous IDs)
            self.fail(key, f"the counts add up to {total}, more than int64 IDs can number ({INT64_MAX})")
        return val

    def totals(self, obj: Mapping[str, Any], key: str, names: List[str]) -> List[int]:
        """A list of one non-negative integer per type (`num_nodes_per_type`, `num_edges_per_type`)."""
        val = self.typed(obj, key, list)
        if len(val) != len(names):
            self.fail(key, f"has {len(val)} entries but there are {len(names)} types")
        for name, count in zip(names, val):
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                self.fail(key, f"entry for '{name}' must be a non-negative integer, found {count!r}")
        return val

    def node_counts(self, raw: Mapping[str, Any], node_types: Tuple[str, ...]
                    ) -> Tuple[List[Optional[Tuple[int, ...]]], Dict[str, ChunkFiles]]:
        """Per-type node counts (per chunk where known) and the files that give the others.

        DGL's guide writes `num_nodes_per_chunk`, DGL's tools and GSProcessing read and write
        `num_nodes_per_type`; with both, they must agree. With neither, a type's nodes are
        the rows of its `raw_id_mappings` files (GSProcessing's node ID maps): their
        `row_counts`, checked against the files, or the files' own row counts.
        """
        names = list(node_types)
        per_chunk = (self.count_lists(raw, "num_nodes_per_chunk", names)
                     if "num_nodes_per_chunk" in raw else None)
        per_type = self.totals(raw, "num_nodes_per_type", names) if "num_nodes_per_type" in raw else None
        if per_chunk is not None:
            for name, chunks, total in zip(names, per_chunk, per_type or [None] * len(names)):
                if total is not None and sum(chunks) != total:
                    self.fail("num_nodes_per_type", f"says {total} nodes of type '{name}' but "
                                                    f"num_nodes_per_chunk adds up to {sum(chunks)}")
            return [tuple(c) for c in per_chunk], {}
        if per_type is not None:
            if sum(per_type) > INT64_MAX:
                self.fail("num_nodes_per_type", f"the counts add up to {sum(per_type)}, more than int64 IDs "
                                                f"can number ({INT64_MAX})")
            return [(n,) for n in per_type], {}
        mappings = raw.get("raw_id_mappings")
        if not isinstance(mappings, dict):
            self.fail("num_nodes_per_chunk", "missing key: node counts come from num_nodes_per_chunk "
                      "(DGL's guide), num_nodes_per_type (DGL's tools, GSProcessing) or the Parquet files "
                      "of raw_id_mappings (GSProcessing), and the metadata has none of them")
        counts: List[Optional[Tuple[int, ...]]] = []
        files: Dict[str, ChunkFiles] = {}
        for name in names:
            if name not in mappings:
                self.fail("raw_id_mappings", f"no entry for node type '{name}', and neither num_nodes_per_chunk "
                                             f"nor num_nodes_per_type gives its node count")
            files[name] = self.chunk_files(mappings[name], f"raw_id_mappings.{name}", ("parquet",))
            counts.append(files[name].row_counts)   # checked against the files by `counts`
        return counts, files

    def edge_type(self, name: str, parts: List[str], files: ChunkFiles, declared: Optional[List[int]],
                  total: Optional[int]) -> EdgeType:
        """The EdgeType, its per-file counts from num_edges_per_chunk, else the files' row_counts,
        else unknown (None: read from the files later); every count given must agree."""
        counts: Optional[Tuple[int, ...]] = None
        key = "row_counts"
        if declared is not None:
            if len(files.paths) != len(declared):
                self.fail(f"edges.{name}.data", f"{len(files.paths)} files but num_edges_per_chunk has "
                          f"{len(declared)} entries for this type")
            if files.row_counts is not None and list(files.row_counts) != list(declared):
                self.fail(f"edges.{name}.row_counts", f"{list(files.row_counts)} disagrees with "
                                                      f"num_edges_per_chunk's {list(declared)}")
            counts, key = tuple(declared), "num_edges_per_chunk"
        elif files.row_counts is not None:
            counts = files.row_counts
        if total is not None and counts is not None and sum(counts) != total:
            self.fail("num_edges_per_type", f"says {total} edges of type '{name}' but {key} adds up to "
                                            f"{sum(counts)}")
        return EdgeType(name, parts[0], parts[1], parts[2], counts, files, key, total)

    def chunk_files(self, spec: Any, key: str, formats: Tuple[str, ...]) -> ChunkFiles:
        if not isinstance(spec, dict):
            self.fail(key, "must be an object with 'format' and 'data'")
        fmt_raw = spec.get("format")
        if not isinstance(fmt_raw, dict):
            self.fail(f"{key}.format", "missing key" if fmt_raw is None else "must be an object")
        name = fmt_raw.get("name")
        if name not in formats:
            self.fail(f"{key}.format.name", f"unknown format {name!r}; expected one of {', '.join(formats)}")
        # Without a delimiter, DGL reads CSV edges with a space and CSV features with a comma
        # (its array_readwriter's CSV parser, which reads features, defaults to ',').
        delimiter = fmt_raw.get("delimiter", "," if formats == FEATURE_FORMATS else " ")
        if name == "csv" and (not isinstance(delimiter, str) or len(delimiter) != 1):
            self.fail(f"{key}.format.delimiter", "must be a single character")
        dataset = fmt_raw.get("dataset")
        if name == "hdf5" and not isinstance(dataset, str):
            self.fail(f"{key}.format.dataset", "hdf5 format needs the dataset name as a string")
        if "data" not in spec:
            self.fail(f"{key}.data", "missing key")
        data = spec["data"]
        if not isinstance(data, list) or not all(isinstance(d, str) for d in data):
            self.fail(f"{key}.data", "must be a list of file paths")
        paths = tuple(Path(d) if os.path.isabs(d) else self.path.parent / d for d in data)
        row_counts = spec.get("row_counts")
        if row_counts is not None:
            if not isinstance(row_counts, list) or not all(
                    isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in row_counts):
                self.fail(f"{key}.row_counts", "must be a list of non-negative integers, one per file")
            if len(row_counts) != len(paths):
                self.fail(f"{key}.row_counts", f"has {len(row_counts)} entries but data names {len(paths)} files")
            row_counts = tuple(row_counts)
        return ChunkFiles(FileFormat(name, delimiter, dataset), paths, f"{self.path}: {key}", row_counts)

    def feature_groups(self, raw: Mapping[str, Any], key: str,
                       owners: List[str]) -> Dict[str, Dict[str, ChunkFiles]]:
        groups = raw.get(key, {})
        if groups is None:
            return {}
        if not isinstance(groups, dict):
            self.fail(key, "must be an object")
        out: Dict[str, Dict[str, ChunkFiles]] = {}
        for owner, feats in groups.items():
            if owner not in owners:
                self.fail(key, f"'{owner}' is not a declared type")
            if not isinstance(feats, dict):
                self.fail(f"{key}.{owner}", "must be an object of features")
            out[owner] = {}
            for fname, spec in feats.items():
                self.name(fname, "feature", f"{key}.{owner}")
                out[owner][fname] = self.chunk_files(spec, f"{key}.{owner}.{fname}", FEATURE_FORMATS)
        return out
