"""Stage 0: check metadata.json and every file it names before any work is done.

The quick check (run first by every command) parses the JSON on every rank, then spreads
the per-file checks over ranks: existence, the counts the metadata leaves out (`counts`),
and for formats with headers (NumPy, Parquet, HDF5) row counts, shapes and dtypes against
the metadata. Contents that need a full read
(CSV fields, endpoint ranges, CSV row counts) are checked by whatever stage reads them;
`full=True` reads them here too, which is what `distpart validate` does. All ranks reach
the same verdict.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, List

from .blocks import read_edge_block
from .counts import count_rows
from ..mpi.collective import agreed
from ..errors import InputError
from .metadata import EdgeType, GraphMeta, load_metadata
from .readers import FeatureSource, block_bounds, edge_file_sizes

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


def validate(comm: Intracomm, in_dir: "str | Path", *, full: bool = False) -> GraphMeta:
    """Check the input graph; returns its metadata or raises InputError on every rank."""
    rank, size = comm.Get_rank(), comm.Get_size()
    with agreed(comm):
        meta = load_metadata(in_dir)
        if not meta.edge_types:
            # The chunked format allows it, but DGL's partition config needs an edge type
            # (its loader and DistGraph read `etypes`): refused here, before anything is written.
            raise InputError(meta.path, "edge_type: the graph has no edge types; DGL's partitions "
                                        "need at least one")
    with agreed(comm):
        for i, (where, path) in enumerate(meta.all_files()):
            if i % size == rank and not path.is_file():
                raise InputError(path, f"file does not exist (named in {where})")
    meta = count_rows(meta, comm)
    with agreed(comm):
        for i, check in enumerate(_header_checks(meta)):
            if i % size == rank:
                check()
    if full:
        for etype in meta.edge_types:
            read_edge_block(comm, meta, etype)
        _read_all_features(comm, meta)
    return meta


def _header_checks(meta: GraphMeta) -> List[Callable[[], None]]:
    checks: List[Callable[[], None]] = []
    for etype in meta.edge_types:
        if etype.files.fmt.name != "csv":
            checks.append(lambda e=etype: _check_edge_rows(e))
    for ntype, feats in meta.node_data.items():
        for files in feats.values():
            checks.append(lambda f=files, n=meta.num_nodes(ntype), t=ntype:
                          FeatureSource.expecting(f, n, f"node type '{t}'"))
    for ename, feats in meta.edge_data.items():
        for files in feats.values():
            checks.append(lambda f=files, n=meta.etype(ename).count, t=ename:
                          FeatureSource.expecting(f, n, f"edge type '{t}'"))
    return checks


def _check_edge_rows(etype: EdgeType) -> None:
    for path, found, declared in zip(etype.files.paths, edge_file_sizes(etype.files), etype.chunk_counts):
        if found != declared:
            raise InputError(path, f"has {found} edges but {etype.counts_key} for '{etype.name}' says {declared}")


def _read_all_features(comm: Intracomm, meta: GraphMeta, batch_rows: int = 1 << 20) -> None:
    """Read every feature row once (spread over ranks) so corrupt data is found before work."""
    rank, size = comm.Get_rank(), comm.Get_size()
    groups = list(meta.node_data.values()) + list(meta.edge_data.values())
    with agreed(comm):
        for feats in groups:
            for files in feats.values():
                source = FeatureSource(files)
                lo, hi = block_bounds(source.rows, size)[rank:rank + 2]
                for a in range(int(lo), int(hi), batch_rows):
                    source.read(a, min(a + batch_rows, int(hi)))
