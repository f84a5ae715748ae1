"""Step 1's product: the partition of every node, in DGL's assignment format.

The format is one `<ntype>.txt` per node type (line i = partition of node i) plus
`partition_meta.json`. Each rank holds and writes only its own contiguous block of lines
(MPI-IO at byte offsets from a prefix sum) and reads back a byte block of each file, so no
rank ever holds a whole type's assignment.

Random assignment maps node i to `perm(i) mod P`, where `perm` is a keyed pseudo-random
permutation of [0, N) (a Feistel network with cycle walking). Being a bijection it gives
every partition floor(N/P) or ceil(N/P) nodes of each type, and it is a pure function of
(seed, type, i), so the files do not depend on the number of ranks.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional

import numpy as np

from ..arrays import keyed_permutation
from ..chunked.blocks import rank_bounds
from ..mpi.collective import agreed
from ..errors import InputError
from ..mpi.exchange import allreduce_max, allreduce_sum, exscan_sum
from ..chunked.metadata import GraphMeta, read_json
from ..paths import file_in
from ..chunked.readers import block_bounds, read_csv_ints
from ..mpi.files import open_for_writing, write_at

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

META_FILE = "partition_meta.json"


@dataclass
class NodeBlock:
    """Partitions of nodes [start, start + len(parts)) of one type, and every rank's block start."""

    start: int
    parts: np.ndarray
    bounds: np.ndarray

    @property
    def orig_ids(self) -> np.ndarray:
        return np.arange(self.start, self.start + len(self.parts), dtype=np.int64)


@dataclass
class Assignment:
    """This rank's share of a full assignment: one NodeBlock per node type."""

    num_parts: int
    algo_name: str
    blocks: Dict[str, NodeBlock]


# ---------------------------------------------------------------- random

def random_parts(ids: np.ndarray, n: int, num_parts: int, seed: int, type_index: int) -> np.ndarray:
    """Balanced random partition of nodes `ids` of a type with n nodes (int64)."""
    return keyed_permutation(ids, n, seed * 7919 + type_index) % num_parts


def random_assignment(comm: Intracomm, meta: GraphMeta, num_parts: int, seed: int) -> Assignment:
    """Each rank computes its canonical block of every type. Collective (for the bounds)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    blocks = {}
    for t, ntype in enumerate(meta.node_types):
        n = meta.num_nodes(ntype)
        bounds = block_bounds(n, size)
        ids = np.arange(bounds[rank], bounds[rank + 1], dtype=np.int64)
        blocks[ntype] = NodeBlock(int(bounds[rank]), random_parts(ids, n, num_parts, seed, t), bounds)
    return Assignment(num_parts, "random", blocks)


def fingerprint(comm: Intracomm, assignment: Assignment, meta: GraphMeta) -> str:
    """A digest of the whole assignment that does not depend on how it is split across ranks
    (what resumed runs compare). Collective."""
    from ..run.resume import assignment_digest, assignment_fingerprint
    local = sum(assignment_digest(t, assignment.blocks[n].start, assignment.blocks[n].parts)
                for t, n in enumerate(meta.node_types))
    return assignment_fingerprint(comm.allreduce(local), assignment.num_parts)


# ---------------------------------------------------------------- files

def format_lines(values: np.ndarray) -> bytes:
    """Integers as text, one per line (pyarrow's CSV writer, no header)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    sink = pa.BufferOutputStream()
    pacsv.write_csv(pa.table({"p": np.asarray(values, dtype=np.int64)}), sink,
                    write_options=pacsv.WriteOptions(include_header=False))
    return sink.getvalue().to_pybytes()


def write_assignment(comm: Intracomm, assignment: Assignment, meta: GraphMeta, out_dir: Path) -> None:
    """Write `<ntype>.txt` for every type and partition_meta.json. Collective."""

    out_dir = Path(out_dir)
    with agreed(comm):
        if comm.Get_rank() == 0:
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / META_FILE).unlink(missing_ok=True)
            except OSError as e:
                raise InputError(out_dir, f"cannot create output folder: {e.strerror}") from None
    for ntype in meta.node_types:
        data = np.frombuffer(format_lines(assignment.blocks[ntype].parts), dtype=np.uint8)
        offset = int(exscan_sum(comm, np.array([len(data)]))[0])
        path = file_in(out_dir, ntype, ".txt")
        with open_for_writing(comm, path, InputError) as fh:
            write_at(fh, offset, data)
    comm.Barrier()
    if comm.Get_rank() == 0:
        # Written last, so a folder with partition_meta.json holds a complete assignment.
        meta_obj = {"algo_name": assignment.algo_name, "num_parts": assignment.num_parts, "version": "1.0.0"}
        (out_dir / META_FILE).write_text(json.dumps(meta_obj, indent=2) + "\n")
    comm.Barrier()


def read_partition_meta(assign_dir: Path) -> Optional[dict]:
    """partition_meta.json if present (DGL's older random_partition.py does not write it)."""
    path = Path(assign_dir) / META_FILE
    if not path.exists():
        return None
    obj = read_json(path)
    num_parts = obj.get("num_parts") if isinstance(obj, dict) else None
    if not isinstance(num_parts, int) or isinstance(num_parts, bool) or num_parts < 1:
        raise InputError(path, "must be an object with a positive integer 'num_parts'")
    return obj


def read_assignment(comm: Intracomm, meta: GraphMeta, assign_dir: Path,
                    num_parts: Optional[int] = None) -> Assignment:
    """Read every type's assignment file, each rank a byte block of each. Collective.

    The number of partitions comes from partition_meta.json, else `num_parts`, else the
    largest partition ID + 1.
    """

    assign_dir = Path(assign_dir)
    rank, size = comm.Get_rank(), comm.Get_size()
    with agreed(comm):
        pmeta = read_partition_meta(assign_dir)
        if pmeta and num_parts is not None and pmeta["num_parts"] != num_parts:
            raise InputError(assign_dir / META_FILE, f"num_parts is {pmeta['num_parts']} but "
                                                     f"--num-parts {num_parts} was given")
    local: Dict[str, np.ndarray] = {}
    line_counts = np.zeros(len(meta.node_types), dtype=np.int64)
    with agreed(comm):
        for t, ntype in enumerate(meta.node_types):
            path = file_in(assign_dir, ntype, ".txt")
            if not path.exists():
                raise InputError(path, f"assignment file for node type '{ntype}' does not exist")
            lo, hi = block_bounds(path.stat().st_size, size)[rank:rank + 2]
            local[ntype] = read_csv_ints(path, int(lo), int(hi), 1)[:, 0]
            line_counts[t] = len(local[ntype])
    totals = allreduce_sum(comm, line_counts)
    starts = exscan_sum(comm, line_counts)
    with agreed(comm):
        for t, ntype in enumerate(meta.node_types):
            if totals[t] != meta.num_nodes(ntype):
                raise InputError(file_in(assign_dir, ntype, ".txt"), f"has {totals[t]} lines but node type "
                                 f"'{ntype}' has {meta.num_nodes(ntype)} nodes")
    if pmeta:
        nparts, algo = pmeta["num_parts"], str(pmeta.get("algo_name", "random"))
    elif num_parts is not None:
        nparts, algo = num_parts, "random"
    else:
        top = max((int(v.max()) for v in local.values() if len(v)), default=0)
        nparts, algo = int(allreduce_max(comm, np.array([top]))[0]) + 1, "random"
    blocks = {}
    with agreed(comm):
        for t, ntype in enumerate(meta.node_types):
            parts = local[ntype]
            bad = np.flatnonzero((parts < 0) | (parts >= nparts))
            if len(bad):
                raise InputError(file_in(assign_dir, ntype, ".txt"), f"partition ID {int(parts[bad[0]])} on line "
                                 f"{int(starts[t]) + int(bad[0]) + 1} is outside [0, {nparts})")
    for t, ntype in enumerate(meta.node_types):
        bounds = rank_bounds(comm, int(starts[t]), int(totals[t]))
        blocks[ntype] = NodeBlock(int(starts[t]), local[ntype], bounds)
    return Assignment(nparts, algo, blocks)
