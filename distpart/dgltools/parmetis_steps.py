"""GraphStorm's three ParMETIS steps on distpart: what `backend` runs for
parmetis_preprocess.py, pm_dglpart and parmetis_postprocess.py.

DGL's first step writes ParMETIS's input files, its `pm_dglpart` writes `<graph>_part.<P>`
(lines `<node ID> <partition>`) and its last step splits that file into `<ntype>.txt`. Here
the first step checks the input and writes the small files GraphStorm copies, `pm_dglpart`
runs distpart's ParMETIS method (Step 1 of `distpart assign --method parmetis
--balance-ntypes`) and writes `<graph>_part.<P>` in DGL's format with MPI-IO, and the last
step splits it as DGL's does.

Each step checks what it reads as `distpart assign` and `dispatch` do (P at most N, every
line of every file it reads, the graph unchanged between steps) and refuses with an
InputError naming the file and the problem, before it writes anything. Every small file
goes through `paths.write_file`; `<graph>_part.<P>` is written by every rank at once
(MPI-IO), its path checked with `paths.check_output_file` first.

Each step is a collective `body(comm, ...)`; `backend._collective` runs it.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..assign import compute_assignment
from ..assign.assignment import META_FILE, Assignment, format_lines
from ..assign.balance import BalanceOptions
from ..assign.options import check_num_parts
from ..chunked.metadata import GraphMeta
from ..chunked.validate import validate
from ..errors import InputError
from ..mpi.collective import agreed
from ..mpi.exchange import allreduce_sum, exscan_sum
from ..mpi.files import open_for_writing, write_at
from ..partitions.layout import check_layout
from ..paths import check_output_file, file_in, read_user_text, write_file
from ..run.outdir import refuse_inside_input
from ..run.progress import open_progress

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

NFILES = "parmetis_nfiles.txt"
EFILES = "parmetis_efiles.txt"
FROM_TOOLS = "run parmetis_preprocess.py from `distpart tools-path` again"


def _check_not_input(meta: "GraphMeta", paths: Iterable[Path], tool: str) -> None:
    for path in paths:
        if any(p.resolve() == path.resolve() for _, p in meta.all_files()):
            raise InputError(path, f"is a file of the input graph: {tool} would replace it")


# ---------------------------------------------------------------- parmetis_nfiles.txt

def nfiles_line(metadata: Path, num_nodes: int) -> str:
    """The one line of parmetis_nfiles.txt, in DGL's `file start end` form; the path is
    quoted as a shell word so that one with spaces reads back whole."""
    return f"{shlex.quote(str(metadata))} 0 {num_nodes}\n"


def read_nfiles(nfiles: Path) -> Tuple[Path, int]:
    """The metadata file and node count our parmetis_preprocess.py wrote in
    parmetis_nfiles.txt (`nfiles_line`, or the older unquoted line when it has 3 fields)."""
    lines = [line for line in read_user_text(nfiles, InputError).splitlines() if line.strip()]
    if not lines:
        raise InputError(nfiles, f"is empty: it must hold one line 'METADATA_FILE 0 NODES'; {FROM_TOOLS}")
    first = lines[0].strip()
    try:
        # shlex.quote leaves a path bare unless it must quote it, and then it starts with '
        fields = shlex.split(first) if first.startswith("'") else first.split()
    except ValueError as e:
        raise InputError(nfiles, f"line 1 is not 'METADATA_FILE 0 NODES' with the path quoted as a shell "
                                 f"word ({e}); {FROM_TOOLS}") from None
    if len(fields) == 3 and fields[0].endswith(".json") and fields[1] == "0" and fields[2].isdigit():
        if len(lines) > 1:
            raise InputError(nfiles, f"has {len(lines)} lines, but distpart's parmetis_preprocess.py writes "
                                     f"one ('METADATA_FILE 0 NODES'); {FROM_TOOLS}")
        return Path(fields[0]), int(fields[2])
    if ".json" not in first:
        raise InputError(nfiles, "does not name a chunked graph's metadata file: it was not written by "
                                 "distpart's parmetis_preprocess.py (DGL's lists node weight files, which "
                                 f"distpart does not read); {FROM_TOOLS}")
    if len(fields) > 3 and re.fullmatch(r"\S.*\.json\s+0\s+[0-9]+", first):
        raise InputError(nfiles, f"line 1 names a metadata file whose path has a space but is not quoted "
                                 f"(an older parmetis_preprocess.py wrote it so): {FROM_TOOLS}")
    raise InputError(nfiles, f"line 1 is not 'METADATA_FILE 0 NODES' ({len(fields)} fields: "
                             f"{first[:200]!r}); {FROM_TOOLS}")


# ---------------------------------------------------------------- parmetis_preprocess.py

def _check_outputs(paths: Iterable[Path], what: str) -> None:
    """check_output_file on each path whose folder exists (a missing one is created later)."""
    for path in paths:
        if path.is_symlink() or path.parent.is_dir():
            check_output_file(path, what)


def preprocess(comm: "Intracomm", args: argparse.Namespace, meta_file: str) -> None:
    """Check the input on GraphStorm's ranks and write what GraphStorm and pm_dglpart read:
    `<input_dir>/<graph>_stats.txt` (DGL's `nodes edges constraints`, kept if present, as
    DGL keeps it), `<output_dir>/parmetis_nfiles.txt` (`nfiles_line`, which pm_dglpart
    reads) and `parmetis_efiles.txt` (the input's edge files, for reference)."""
    out = Path(args.output_dir)
    with agreed(comm):
        if args.num_parts < 1:
            raise InputError(None, f"--num_parts must be at least 1, got {args.num_parts}")
        _check_outputs([out / NFILES, out / EFILES], "ParMETIS step file")
    meta = validate(comm, meta_file)
    nodes, edges = sum(meta.node_counts), sum(meta.edge_counts)
    stats = Path(args.input_dir) / f"{meta.graph_name}_stats.txt"
    with agreed(comm):
        check_num_parts(meta.path, args.num_parts, nodes)
        _check_not_input(meta, [out / NFILES, out / EFILES], "parmetis_preprocess.py")
        keep_stats = stats.exists()     # never written then; a link leading nowhere is refused
        if not keep_stats:
            check_output_file(stats, "graph statistics file")
    with agreed(comm):
        if comm.Get_rank() == 0:
            if not keep_stats:
                write_file(stats, f"{nodes} {edges} {len(meta.node_types)}", "graph statistics file")
            try:
                out.mkdir(parents=True, exist_ok=True)      # DGL's preprocess creates its output folder too
            except OSError as e:
                raise InputError(out, f"cannot create the output folder: {e.strerror}") from None
            write_file(out / NFILES, nfiles_line(meta.path.resolve(), nodes), "ParMETIS step file")
            write_file(out / EFILES, "".join(f"{p.resolve()}\n" for e in meta.edge_types for p in e.files.paths),
                       "ParMETIS step file")


# ---------------------------------------------------------------- pm_dglpart

def part_file_lines(type_offset: int, block_start: int, parts: "np.ndarray") -> bytes:
    """`<global node ID> <partition>` lines of one block of one node type (DGL's ParMETIS
    output: node IDs of all types in one range, types in metadata order)."""
    ids = np.arange(len(parts), dtype=np.int64) + (type_offset + block_start)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(pa.table({"n": ids, "p": np.asarray(parts, dtype=np.int64)}), sink,
                    write_options=pacsv.WriteOptions(include_header=False, delimiter=" "))
    return sink.getvalue().to_pybytes()


def write_part_file(comm: "Intracomm", assignment: "Assignment", meta: "GraphMeta", path: Path) -> None:
    """`<graph>_part.<P>`, every rank writing its blocks at their byte offsets (MPI-IO), so no
    rank holds more than its share. Collective."""
    offsets = np.cumsum([0, *meta.node_counts])
    chunks = [np.frombuffer(part_file_lines(int(offsets[t]), assignment.blocks[ntype].start,
                                            assignment.blocks[ntype].parts), dtype=np.uint8)
              for t, ntype in enumerate(meta.node_types)]
    sizes = np.array([len(c) for c in chunks], dtype=np.int64)
    totals, below = allreduce_sum(comm, sizes), exscan_sum(comm, sizes)
    starts = np.cumsum(totals) - totals + below     # blocks are in rank order inside each type
    with open_for_writing(comm, path, InputError) as fh:
        for start, chunk in zip(starts, chunks):
            write_at(fh, int(start), chunk)
    comm.Barrier()


def pm_dglpart(comm: "Intracomm", args: argparse.Namespace) -> None:
    """distpart's ParMETIS method on the ranks `mpirun` started; writes `<graph>_part.<P>`
    in the current folder, as DGL's pm_dglpart does."""
    nfiles = Path(args.nfiles)
    out = Path.cwd() / f"{args.graph_name}_part.{args.num_parts}"
    with agreed(comm):
        meta_file, listed_nodes = read_nfiles(nfiles)
        check_output_file(out, "ParMETIS output file")
    meta = validate(comm, meta_file)
    nodes = sum(meta.node_counts)
    with agreed(comm):
        if meta.graph_name != args.graph_name:
            raise InputError(meta.path, f"graph_name is {meta.graph_name!r}, but pm_dglpart was asked to "
                                        f"partition {args.graph_name!r}")
        if listed_nodes != nodes:
            raise InputError(nfiles, f"says the graph has {listed_nodes} nodes, but {meta.path} has {nodes}: the "
                                     f"graph changed after parmetis_preprocess.py ran; run it again")
        check_num_parts(meta.path, args.num_parts, nodes)
        check_layout(args.num_parts, comm.Get_size())
        _check_not_input(meta, [out], "pm_dglpart")
    progress = open_progress(comm.Get_rank() == 0, False, None)
    try:
        # DGL's preprocess gives ParMETIS one constraint per node type; so does this.
        balance = BalanceOptions(ntypes=True)
        assignment = compute_assignment(comm, meta, args.num_parts, "parmetis", balance, 0, None, progress)
        write_part_file(comm, assignment, meta, out)
    finally:
        progress.close()
    if comm.Get_rank() == 0:
        print(f"pm_dglpart: wrote {out} ({nodes} nodes, {args.num_parts} partitions)", flush=True)


# ---------------------------------------------------------------- parmetis_postprocess.py

def num_parts_of(path: Path) -> Optional[int]:
    """P from the name `<graph>_part.<P>` that pm_dglpart gives its output (None: no `.<P>`)."""
    match = re.fullmatch(r".*\.([0-9]+)", path.name)
    return int(match.group(1)) if match else None


def _first(mask: "np.ndarray") -> int:
    return int(np.flatnonzero(mask)[0])


def read_part_file(path: Path, num_nodes: int, num_parts: Optional[int]) -> Tuple["np.ndarray", int]:
    """The partition of every node, and P, from `<node ID> <partition>` lines (DGL's ParMETIS
    output, in any order), checked: each node ID of [0, num_nodes) on exactly one line, every
    partition in [0, P). P is `num_parts` when given (the file name's), else, as DGL's
    postprocess counts it, the number of distinct partitions."""
    try:
        # empty lines kept (as null rows) so that row i is line i + 1
        table = pacsv.read_csv(str(path), read_options=pacsv.ReadOptions(autogenerate_column_names=True),
                               parse_options=pacsv.ParseOptions(delimiter=" ", ignore_empty_lines=False),
                               convert_options=pacsv.ConvertOptions(column_types={"f0": pa.int64(),
                                                                                  "f1": pa.int64()}))
    except (pa.ArrowInvalid, OSError) as e:
        problem = " ".join(str(e).split())
        raise InputError(path, f"cannot read ParMETIS's '<node ID> <partition>' lines: {problem}") from None
    if table.num_columns != 2:
        raise InputError(path, f"has {table.num_columns} field{'s' * (table.num_columns > 1)} a line: expected "
                               "two integers, '<node ID> <partition>'")
    has = [np.asarray(table.column(i).is_valid()) for i in (0, 1)]
    valid, blank = has[0] & has[1], ~(has[0] | has[1])
    rows = len(blank) - (_first(~blank[::-1]) if not blank.all() else len(blank))   # trailing empty lines go
    if not valid[:rows].all():
        raise InputError(path, f"line {_first(~valid[:rows]) + 1} is not '<node ID> <partition>'")
    ids, parts = (table.column(i).slice(0, rows).to_numpy().astype(np.int64, copy=False) for i in (0, 1))
    del table
    bad = (ids < 0) | (ids >= num_nodes)
    if bad.any():
        line = _first(bad)
        raise InputError(path, f"node ID {ids[line]} on line {line + 1} is outside [0, {num_nodes}) "
                               f"(the graph has {num_nodes} nodes)")
    if num_parts is None:
        num_parts, origin = len(np.unique(parts)), "the number of distinct partitions, as DGL counts it"
    else:
        origin = f"from the file name, <graph>_part.{num_parts}"
    bad = (parts < 0) | (parts >= num_parts)
    if bad.any():
        line = _first(bad)
        raise InputError(path, f"partition ID {parts[line]} on line {line + 1} is outside [0, {num_parts}) "
                               f"(P = {num_parts}: {origin})")
    if len(ids) == num_nodes and np.array_equal(ids, np.arange(num_nodes, dtype=np.int64)):
        return parts, num_parts     # pm_dglpart's own order: nothing to sort
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    same = ids[1:] == ids[:-1]
    if same.any():
        second = order[1:][same]
        at = int(np.argmin(second))         # the duplicate seen first, reading the file down
        first = int(order[:-1][same][at])
        raise InputError(path, f"node ID {ids[1:][same][at]} is on line {first + 1} and again on line "
                               f"{int(second[at]) + 1}: each node must be on exactly one line")
    if len(ids) != num_nodes:
        gaps = ids != np.arange(len(ids))
        missing = _first(gaps) if gaps.any() else len(ids)
        raise InputError(path, f"has {len(ids)} lines, but the graph has {num_nodes} nodes "
                               f"(node ID {missing} has no line)")
    return parts[order], num_parts


def postprocess(comm: "Intracomm", args: argparse.Namespace, meta_file: str) -> None:
    """Split `<graph>_part.<P>` into `<ntype>.txt` and write partition_meta.json (algo_name
    "metis"), as DGL's parmetis_postprocess.py. One process: it reads the whole file, like DGL's."""
    meta = validate(comm, meta_file)
    with agreed(comm):
        if comm.Get_rank() != 0:
            return
        out = Path(args.partitions_dir)
        refuse_inside_input(out, meta.root)
        _check_outputs([out / f"{ntype}.txt" for ntype in meta.node_types] + [out / META_FILE], "assignment file")
        targets = [file_in(out, ntype, ".txt") for ntype in meta.node_types]
        source = Path(args.parmetis_output_file)
        nodes = sum(meta.node_counts)
        num_parts = num_parts_of(source)
        if num_parts is not None:
            check_num_parts(source, num_parts, nodes)
        parts, num_parts = read_part_file(source, nodes, num_parts)
        try:
            out.mkdir(parents=True, exist_ok=True)       # DGL's postprocess creates --partitions_dir too
            (out / META_FILE).unlink(missing_ok=True)    # a folder with partition_meta.json is complete
        except OSError as e:
            raise InputError(out, f"cannot create the output folder: {e.strerror}") from None
        offsets = np.cumsum([0, *meta.node_counts])
        for t, path in enumerate(targets):
            write_file(path, format_lines(parts[offsets[t]:offsets[t + 1]]), "assignment file")
        write_file(out / META_FILE, json.dumps({"algo_name": "metis", "num_parts": num_parts,
                                                "version": "1.0.0"}, indent=2) + "\n", "assignment file")
        print(f"parmetis_postprocess.py: wrote {', '.join(f'{t}.txt' for t in meta.node_types)} and "
              f"{META_FILE} ({num_parts} partitions) in {out}", flush=True)
