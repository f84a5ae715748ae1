"""Each `distpart` subcommand as one function of its parsed arguments; `cli` registers each
with `set_defaults(func=...)`. The collective ones (validate, assign, dispatch, verify,
pipeline, report) run on every rank once `cli` has brought the world up: they read the
arguments, check what must be refused before any folder is made, hold the folder locks, and
call the pipeline's steps (`steps`, which never see argparse). The others (example, chunk)
run in one process.
"""
from __future__ import annotations

import argparse
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from . import steps
from .assign.options import check_num_parts
from .check.report import REPORT_FILE, report as report_output
from .check.verify import verify_quick
from .errors import InputError
from .mpi.collective import agreed
from .partitions.dglformat import graph_formats
from .partitions.graphbolt import GraphboltOptions, load_graphbolt
from .partitions.layout import check_layout
from .paths import check_output_file
from .run.lock import folder_locks
from .run.outdir import ASSIGNMENT, PARTITIONS, OutputFolder, refuse_inside_input
from .run.resume import RunKey
from .run.stages import StageLog, format_stage_table, write_json

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


# ---------------------------------------------------------------- commands without MPI

def example(args: argparse.Namespace) -> None:
    from .synthetic import example_graph   # here: h5py and pyarrow's writers, which no MPI command needs
    print(example_graph(args.out_dir, scale=args.scale, seed=args.seed))


def chunk(args: argparse.Namespace) -> None:
    """DGL's chunked format from OGB's raw layout or edge lists; prints metadata.json's path."""
    print(_chunked(args))


def _chunked(args: argparse.Namespace) -> Path:
    from .chunked.write import chunk_edge_lists, chunk_ogb   # here: pyarrow.compute/csv, 0.3 s a rank elsewhere
    num_nodes: Dict[str, int] = {}
    for key, value in _pairs(args.num_nodes, "--num-nodes", split_last=True):
        try:
            num_nodes[key] = int(value)
        except ValueError:
            raise InputError(None, f"--num-nodes {key}={value}: not an integer") from None
        if num_nodes[key] < 0:
            raise InputError(None, f"--num-nodes {key}={value}: must be >= 0")
    common = dict(num_chunks=args.num_chunks, edge_format=args.edge_format, overwrite=args.overwrite)
    try:
        if args.ogb is not None:
            if args.edges or args.node_feat:
                raise InputError(None, "--ogb reads the whole dataset: do not add --edges or --node-feat")
            return chunk_ogb(args.ogb, args.out_dir, num_nodes=num_nodes, graph_name=args.graph_name, **common)
        if not args.edges:
            raise InputError(None, "give --ogb DIR, or one --edges SRC:REL:DST=FILE per edge type")
        return chunk_edge_lists(dict(_pairs(args.edges, "--edges")), args.out_dir, num_nodes=num_nodes,
                                node_features=dict(_pairs(args.node_feat, "--node-feat")),
                                delimiter=args.delimiter, header=args.header,
                                graph_name=args.graph_name or "graph", **common)
    except ValueError as e:  # a name or option the writer refused
        raise InputError(None, str(e)) from None


def _pairs(items: Sequence[str], what: str, split_last: bool = False) -> List[Tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.rpartition("=") if split_last else item.partition("=")
        if not sep or not key or not value:
            raise InputError(None, f"{what} takes KEY=VALUE, got {item!r}")
        out.append((key, value))
    return out


# ---------------------------------------------------------------- collective commands

def validate(comm: "Intracomm", args: argparse.Namespace, log: StageLog) -> None:
    with _started(comm, args, log):
        meta = steps.validate_input(comm, args.in_dir, log, full=not args.quick)
        _finish(comm, args, log, f"validate: OK ({len(meta.node_types)} node types, {len(meta.edge_types)} edge "
                                 f"types, {sum(meta.node_counts)} nodes, {sum(meta.edge_counts)} edges)")


def assign(comm: "Intracomm", args: argparse.Namespace, log: StageLog) -> None:
    options = step1_options(args)
    with _started(comm, args, log, writes=[args.assign_dir], num_parts=args.num_parts) as run:
        meta = _input(comm, args, log)
        _claim(comm, args, meta, [OutputFolder(args.assign_dir, ASSIGNMENT, meta.node_types)])
        key = RunKey(steps.fingerprint_input(comm, meta), options.recorded())
        steps.assign(comm, meta, args.assign_dir, options, key, run.max_bytes, log, args.resume)
        _finish(comm, args, log)


def dispatch(comm: "Intracomm", args: argparse.Namespace, log: StageLog) -> None:
    with _started(comm, args, log, writes=[args.out_dir], num_parts=args.num_parts) as run:
        graphbolt = _graphbolt(comm, args)
        meta = _input(comm, args, log)
        _check_resources(comm, args, meta, run.graph_formats, log)
        _claim(comm, args, meta, [OutputFolder(args.out_dir, PARTITIONS, meta.node_types)], reads=[args.assign_dir])
        input_key = steps.fingerprint_input(comm, meta)
        assignment = steps.read_step1(comm, meta, args.assign_dir, args.num_parts, log)
        check_layout(assignment.num_parts, comm.Get_size())
        steps.build(comm, meta, assignment, args.out_dir, input_key, _output_options({}, assignment), run.max_bytes,
                    log, args.resume, graphbolt, run.graph_formats)
        _finish(comm, args, log)


def verify(comm: "Intracomm", args: argparse.Namespace, log: StageLog) -> None:
    with _started(comm, args, log, num_parts=args.num_parts) as run:
        if args.quick:
            with log.stage(comm, "verify"):
                summary = verify_quick(comm, args.out_dir, progress=log.progress)
            if comm.Get_rank() == 0:
                print(f"verify --quick: OK ({summary})", flush=True)
            return
        meta = _input(comm, args, log)
        assignment = steps.read_step1(comm, meta, args.assign_dir, args.num_parts, log)
        summary = steps.verify_output(comm, meta, assignment, args.out_dir, run.max_bytes, log)
        if comm.Get_rank() == 0:
            print(f"verify: OK ({summary})", flush=True)
        _finish(comm, args, log)


def pipeline(comm: "Intracomm", args: argparse.Namespace, log: StageLog) -> None:
    options = step1_options(args)
    assign_dir = args.assign_dir if args.assign_dir is not None else args.out_dir / "assignment"
    # The assignment folder is locked too, even inside OUT_DIR: an `assign` into
    # OUT_DIR/assignment must not rewrite Step 1's result while this pipeline reads it.
    with _started(comm, args, log, writes=[args.out_dir, assign_dir], num_parts=args.num_parts) as run:
        graphbolt = _graphbolt(comm, args)
        meta = _input(comm, args, log)
        _check_resources(comm, args, meta, run.graph_formats, log, options.method, args.verify,
                         len(options.balance().names(meta)))
        _claim(comm, args, meta, steps.pipeline_folders(args.out_dir, args.assign_dir, meta.node_types))
        input_key = steps.fingerprint_input(comm, meta)
        assignment = steps.assign(comm, meta, assign_dir, options, RunKey(input_key, options.recorded()),
                                  run.max_bytes, log, args.resume)
        steps.build(comm, meta, assignment, args.out_dir, input_key, _output_options(options.recorded(), assignment),
                    run.max_bytes, log, args.resume, graphbolt, run.graph_formats)
        steps.check_and_report(comm, meta, assignment, args.out_dir, run.max_bytes, log, verify_first=args.verify,
                               say_ok=True, features=args.balance_feature, train_masks=args.train_mask)
        _finish(comm, args, log)


def report(comm: "Intracomm", args: argparse.Namespace, log: StageLog) -> None:
    report_files = [(args.json or args.out_dir / REPORT_FILE, "report"), (args.plot, "plot")]
    with _started(comm, args, log, files=report_files):
        report_output(comm, args.out_dir, args.balance_feature, args.json, args.plot, args.train_mask)


# ---------------------------------------------------------------- argparse -> plain values

def step1_options(args: argparse.Namespace) -> steps.Step1Options:
    """Step 1's options of `assign` and `pipeline` (same names), defaults filled in once."""
    given = {f.name: getattr(args, f.name) for f in fields(steps.Step1Options)}
    return steps.Step1Options(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}).with_defaults()


def graphbolt_options(args: argparse.Namespace) -> Optional[GraphboltOptions]:
    """The GraphboltOptions of --graphbolt, or None; the --store-* flags need --graphbolt."""
    stores = {k: getattr(args, k) for k in ("store_eids", "store_inner_node", "store_inner_edge")}
    if not args.graphbolt:
        if any(stores.values()):
            raise InputError(None, "--store-eids, --store-inner-node and --store-inner-edge need --graphbolt")
        return None
    return GraphboltOptions(**stores)


class _Run(NamedTuple):
    max_bytes: int
    graph_formats: Tuple[str, ...]


@contextmanager
def _started(comm: "Intracomm", args: argparse.Namespace, log: StageLog, writes: Sequence[Path] = (),
             num_parts: Optional[int] = None, files: Sequence[Tuple[Optional[Path], str]] = ()) -> Iterator[_Run]:
    """What every collective command checks before its work, in this order: no folder it
    `writes` inside its input (before the lock file is made, so the input folder is never
    written at all); every file it was given to write (`--stats-json`, `files`), refused now
    rather than after a run; the graph formats; then, holding the folders' locks,
    --max-message-mb and the partitions per rank."""
    in_dir = getattr(args, "in_dir", None)
    if in_dir is not None:
        for folder in writes:
            refuse_inside_input(Path(folder), Path(in_dir))
    with agreed(comm):
        if comm.Get_rank() == 0:
            for path, what in [(args.stats_json, "stage statistics"), *files]:
                if path is not None:
                    check_output_file(path, what)
    formats = graph_formats(getattr(args, "graph_formats", "coo").split(","))  # before any folder is made
    with folder_locks(comm, writes, f"distpart {args.command}", log.progress.say):
        max_bytes = steps.message_bytes(args.max_message_mb)
        if num_parts is not None:
            check_layout(num_parts, comm.Get_size())
        yield _Run(max_bytes, formats)


def _input(comm: "Intracomm", args: argparse.Namespace, log: StageLog):
    """The input, validated, and --num-parts checked against its nodes."""
    meta = steps.validate_input(comm, args.in_dir, log)
    if args.num_parts is not None:
        check_num_parts(None, args.num_parts, sum(meta.node_counts))
    return meta


def _claim(comm: "Intracomm", args: argparse.Namespace, meta, folders: Sequence[OutputFolder],
           reads: Sequence[Path] = ()) -> None:
    steps.claim_folders(comm, folders, meta.root, steps.input_files(meta), reads, args.overwrite, args.resume)


def _graphbolt(comm: "Intracomm", args: argparse.Namespace) -> Optional[GraphboltOptions]:
    graphbolt = graphbolt_options(args)
    if graphbolt is not None:  # before any work: without DGL the run could not finish
        with agreed(comm):
            load_graphbolt()
    return graphbolt


def _check_resources(comm: "Intracomm", args: argparse.Namespace, meta, formats: Sequence[str],
                     log: StageLog, method: Optional[str] = None, verify: bool = False, columns: int = 1) -> None:
    steps.check_resources(comm, meta, args.num_parts or comm.Get_size(), args.out_dir, formats,
                          not args.no_space_check, args.max_memory_gb, log.progress, method, verify, columns)


def _output_options(step1: dict, assignment) -> dict:
    """What the output depends on besides the input, for the manifest (Step 1's options, if
    this run computed the assignment)."""
    return {**step1, "num_parts": assignment.num_parts, "assignment": assignment.algo_name}


def _finish(comm: "Intracomm", args: argparse.Namespace, log: StageLog, line: Optional[str] = None) -> None:
    """Rank 0 prints the stage table (or `line`) and writes --stats-json."""
    stats = log.gather(comm)
    if stats is not None:
        print(format_stage_table(stats) if line is None else line, flush=True)
        if args.stats_json:
            write_json(str(args.stats_json), stats)
