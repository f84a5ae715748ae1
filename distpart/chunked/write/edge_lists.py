"""Input (c): one large edge list per relation, CSV or Parquet (`chunk_edge_lists`): the
first two columns (or `src`/`dst`) are the endpoints, every further column an edge
feature; pyarrow streams both, CSV in two passes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ...errors import InputError
from ..names import name_problem
from ..readers.parquet import buffered_reads_safe, parquet_data_columns
from .files import DEFAULT_BATCH_BYTES, EdgeKey, PathLike
from .writer import rows_per_batch
from .sources import EdgeSource, as_int64, check_negative, count_nodes, note_printer, write_sources


def chunk_edge_lists(edge_files: Mapping[EdgeKey, PathLike], out_dir: PathLike, *,
                     num_nodes: Optional[Mapping[str, int]] = None,
                     node_features: Optional[Mapping[Union[str, Tuple[str, str]], PathLike]] = None,
                     delimiter: str = ",", header: bool = False, num_chunks: int = 4,
                     edge_format: str = "csv", graph_name: str = "graph", overwrite: bool = False,
                     batch_bytes: int = DEFAULT_BATCH_BYTES,
                     notes: Optional[Callable[[str], None]] = None) -> Path:
    """Chunk one edge list per relation (CSV, or Parquet by its .parquet/.pq name); return
    metadata.json's path.

    The endpoints are the first two columns (Parquet: `src` and `dst` if present); every
    further column is an edge feature, named by the CSV header (`header=True`) or the
    Parquet column, else `f2`, `f3`, ... A Parquet list column of equal-length lists is a
    2-D feature. `node_features` maps (ntype, name) or "ntype/name" to a .npy file. Node
    types are taken in order of first mention (`num_nodes`, then the edge types); counts
    come from `num_nodes`, a node feature's rows, or the largest endpoint + 1 (noted).
    """
    say = note_printer(notes)
    if not edge_files:
        raise InputError(None, "no edge list given")
    sources: List[EdgeSource] = []
    ntypes: Dict[str, None] = dict.fromkeys(num_nodes or {})
    for key, path in edge_files.items():
        etype = ":".join(key) if isinstance(key, tuple) else str(key)
        parts = etype.split(":")
        if len(parts) != 3 or not all(parts):
            raise InputError(None, f"edge type {etype!r} is not a canonical 'src:rel:dst' edge type")
        for problem in (name_problem(parts[0], "node type"), name_problem(parts[1], "relation"),
                        name_problem(parts[2], "node type")):
            if problem:
                raise InputError(None, f"edge type {etype!r}: {problem}")
        ntypes.update(dict.fromkeys((parts[0], parts[2])))
        path = Path(path)
        if not path.is_file():
            raise InputError(path, "file does not exist")
        if path.suffix.lower() in (".parquet", ".pq"):
            sources.append(_parquet_edge_source(etype, path, batch_bytes))
        else:
            sources.append(_csv_edge_source(etype, path, delimiter, header, batch_bytes))
    if len({s.etype for s in sources}) != len(sources):
        raise InputError(None, "an edge type is given twice")
    node_feats: Dict[str, Dict[str, Path]] = {}
    for key, path in (node_features or {}).items():
        if isinstance(key, tuple):
            ntype, name = key
        else:
            ntype, _, name = str(key).partition("/")
        problem = name_problem(ntype, "node type") or name_problem(name, "feature")
        if problem:
            raise InputError(None, f"node feature {key!r}: {problem}")
        ntypes.setdefault(ntype, None)
        node_feats.setdefault(ntype, {})[name] = Path(path)
        if not Path(path).is_file():
            raise InputError(path, "file does not exist")
    counts = count_nodes(list(ntypes), sources, node_feats, dict(num_nodes or {}), say)
    return write_sources(out_dir, counts, sources, node_feats, num_chunks=num_chunks, edge_format=edge_format,
                          graph_name=graph_name, overwrite=overwrite, batch_bytes=batch_bytes, inputs=[])


def _feature_columns(batch: pa.RecordBatch, names: Sequence[str], path: Path, first_row: int) -> Dict[str, np.ndarray]:
    out = {}
    for name in names:
        col = batch.column(name)
        if col.null_count:
            bad = int(np.flatnonzero(np.asarray(col.is_null()))[0])
            raise InputError(path, f"column '{name}' has an empty value at row {first_row + bad}")
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type) or pa.types.is_fixed_size_list(col.type):
            lengths = np.asarray(pc.list_value_length(col))
            if len(lengths) and (lengths != lengths[0]).any():
                bad = int(np.flatnonzero(lengths != lengths[0])[0])
                raise InputError(path, f"column '{name}': row {first_row + bad} has {lengths[bad]} values, "
                                       f"the rows before {lengths[0]}")
            width = int(lengths[0]) if len(lengths) else 0
            out[name] = col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), width)
        else:
            out[name] = col.to_numpy(zero_copy_only=False)
    return out


def _endpoint_columns(batch: pa.RecordBatch, src: str, dst: str, path: Path, etype: str,
                      first: int) -> Tuple[np.ndarray, np.ndarray]:
    """The endpoint columns as int64 (an unsigned ID beyond int64 is refused, as read)."""
    return (as_int64(batch.column(src).to_numpy(zero_copy_only=False), path, etype, "source", first),
            as_int64(batch.column(dst).to_numpy(zero_copy_only=False), path, etype, "destination", first))


def _numpy_type(atype: pa.DataType, path: Path, name: str) -> Tuple[np.dtype, bool]:
    """(numpy dtype, is a list) of a feature column, or InputError for text and the like."""
    is_list = pa.types.is_list(atype) or pa.types.is_large_list(atype) or pa.types.is_fixed_size_list(atype)
    value = atype.value_type if is_list else atype
    if pa.types.is_boolean(value):
        return np.dtype(bool), is_list
    if pa.types.is_integer(value) or pa.types.is_floating(value):
        return np.dtype(value.to_pandas_dtype()), is_list
    raise InputError(path, f"column '{name}' holds {atype} values: edge features must be numbers or booleans")


def _first_pass(source: EdgeSource, feature_names: Sequence[str]) -> None:
    """Count rows, find the largest endpoints, the features' row shapes; refuse negatives."""
    shapes: Dict[str, Tuple[int, ...]] = {}
    for src, dst, feats, first in source.batches():
        source.rows = first + len(src)
        if len(src):
            check_negative(src, dst, source.path, source.etype, first)
            source.max_src = max(source.max_src, int(src.max()))
            source.max_dst = max(source.max_dst, int(dst.max()))
        for name in feature_names:
            shape = feats[name].shape[1:]
            if name in shapes and shape != shapes[name] and len(src):
                raise InputError(source.path, f"column '{name}': rows of shape {shape} from row {first} on, "
                                              f"{shapes[name]} before")
            if len(src) or name not in shapes:
                shapes[name] = shape
    for name in feature_names:
        dtype, _ = source.features[name]
        source.features[name] = (dtype, shapes.get(name, ()))


def _parquet_edge_source(etype: str, path: Path, batch_bytes: int) -> EdgeSource:
    try:
        pf = pq.ParquetFile(str(path))
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"not a readable Parquet file: {e}") from None
    schema = pf.schema_arrow
    names = [schema.names[i] for i in parquet_data_columns(schema, path)]
    if "src" in names and "dst" in names:
        src_col, dst_col = "src", "dst"
    elif len(names) >= 2:
        src_col, dst_col = names[0], names[1]
    else:
        raise InputError(path, f"needs two endpoint columns, found {names}")
    for col in (src_col, dst_col):
        if not pa.types.is_integer(schema.field(col).type):
            raise InputError(path, f"endpoint column '{col}' holds {schema.field(col).type}, not integers")
    feature_names = [n for n in names if n not in (src_col, dst_col)]
    features = {n: (_numpy_type(schema.field(n).type, path, n)[0], ()) for n in feature_names}
    rows = pf.metadata.num_rows
    stored = sum(pf.metadata.row_group(g).total_byte_size for g in range(pf.metadata.num_row_groups))
    step = rows_per_batch(max(16, stored // max(1, rows)), batch_bytes)

    def batches() -> Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]:
        first = 0
        # pyarrow's defaults pre-buffer whole row groups and decode several at once on threads;
        # one row group at a time through a small buffer bounds memory, except where the
        # buffered stream corrupts reads (`buffered_reads_safe`): there, whole chunks.
        buffer = 1 << 20 if buffered_reads_safe() else 0
        reader = pq.ParquetFile(str(path), memory_map=False, pre_buffer=False, buffer_size=buffer)
        try:
            for batch in reader.iter_batches(batch_size=step, columns=[src_col, dst_col, *feature_names],
                                             use_threads=False):
                for col in (src_col, dst_col):
                    if batch.column(col).null_count:
                        bad = int(np.flatnonzero(np.asarray(batch.column(col).is_null()))[0])
                        raise InputError(path, f"endpoint column '{col}' has an empty value at row {first + bad}")
                src, dst = _endpoint_columns(batch, src_col, dst_col, path, etype, first)
                yield src, dst, _feature_columns(batch, feature_names, path, first), first
                first += len(src)
        except pa.ArrowException as e:
            raise InputError(path, f"cannot read: {e}") from None
        finally:
            reader.close()

    source = EdgeSource(etype, path, rows, features, batches=batches)
    _first_pass(source, feature_names)
    return source


def _csv_edge_source(etype: str, path: Path, delimiter: str, header: bool, batch_bytes: int) -> EdgeSource:
    """A CSV edge list, read with pyarrow's streaming reader. Column types are fixed by the
    first pass: pyarrow infers them from the first block, so a feature column whose first
    block looks like integers and later holds decimals is read as float64 from the start."""
    if len(delimiter) != 1:
        raise InputError(None, f"the CSV delimiter must be one character, got {delimiter!r}")
    empty = path.stat().st_size == 0
    # pyarrow's streaming CSV reader keeps about 32 blocks read ahead, threads or not: blocks
    # of batch_bytes / 32 hold the reader near batch_bytes.
    block = int(min(max(batch_bytes // 32, 1 << 16), 1 << 30))
    names: List[str] = []
    if not empty:
        names = _csv_names(path, delimiter, header, block)
        if len(names) < 2:
            raise InputError(path, f"needs at least two columns (source, destination), found {len(names)}")
    feature_names = names[2:]
    types: Dict[str, pa.DataType] = {n: pa.int64() for n in names[:2]}

    def open_reader(column_types: Mapping[str, pa.DataType]):
        read = pacsv.ReadOptions(block_size=block, autogenerate_column_names=not header, use_threads=False)
        convert = pacsv.ConvertOptions(column_types=dict(column_types), strings_can_be_null=False)
        try:
            return pacsv.open_csv(str(path), read_options=read,
                                  parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=convert)
        except pa.ArrowException as e:
            raise InputError(path, _csv_problem(e)) from None

    def batches_with(column_types: Mapping[str, pa.DataType]):
        def batches() -> Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]:
            if empty:
                return
            first = 0
            reader = open_reader(column_types)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except pa.ArrowException as e:
                    raise _CsvTypeError(path, _csv_problem(e), first) from None
                src, dst = _endpoint_columns(batch, names[0], names[1], path, etype, first)
                yield src, dst, _feature_columns(batch, feature_names, path, first), first
                first += len(src)
        return batches

    features: Dict[str, Tuple[np.dtype, Tuple[int, ...]]] = {}
    source = EdgeSource(etype, path)
    if not empty:
        reader = open_reader(types)
        for name in feature_names:
            features[name] = (_numpy_type(reader.schema.field(name).type, path, name)[0], ())
            types[name] = reader.schema.field(name).type
    source.features = features
    source.batches = batches_with(types)
    try:
        _first_pass(source, feature_names)
    except _CsvTypeError as e:
        if not feature_names:
            raise InputError(path, e.problem) from None
        # A later block did not fit the type inferred from the first: read the features as
        # float64, which holds both integers and decimals.
        retry = dict(types, **{n: pa.float64() for n in feature_names if pa.types.is_integer(types[n])})
        if retry == types:
            raise InputError(path, e.problem) from None
        types = retry
        source.features = {n: (np.dtype(types[n].to_pandas_dtype()) if n in retry else features[n][0], ())
                           for n in feature_names}
        source.batches = batches_with(types)
        source.rows, source.max_src, source.max_dst = 0, -1, -1
        try:
            _first_pass(source, feature_names)
        except _CsvTypeError as e2:
            raise InputError(path, e2.problem) from None
    return source


class _CsvTypeError(InputError):
    """A block pyarrow could not convert with the column types given (caught to retry)."""

    def __init__(self, path: Path, problem: str, row: int) -> None:
        super().__init__(path, problem)
        self.row = row


def _csv_names(path: Path, delimiter: str, header: bool, block: int) -> List[str]:
    read = pacsv.ReadOptions(block_size=block, autogenerate_column_names=not header, use_threads=False)
    try:
        reader = pacsv.open_csv(str(path), read_options=read, parse_options=pacsv.ParseOptions(delimiter=delimiter))
    except pa.ArrowException as e:
        raise InputError(path, _csv_problem(e)) from None
    return list(reader.schema.names)


def _csv_problem(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return f"not a valid edge list: {text}"
