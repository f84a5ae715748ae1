"""The `distpart` command: argument parsing, the stage sequence of each subcommand, exit codes.

Every subcommand is SPMD: run it under `mpiexec -n R` (or alone, as one rank). A user
error (DistpartError) is agreed on by all ranks, printed once by rank 0, and every rank
exits with status 2. Any other exception is a bug: the rank prints its traceback and
aborts the whole MPI job, so no rank is left waiting in a collective.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Tuple

from .errors import DistpartError

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from .partitions.graphbolt import GraphboltOptions

EXIT_USER_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="distpart", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--max-message-mb", type=int, default=256,
                        help="cap on the bytes one rank sends or receives per Alltoallv (MiB)")
        sp.add_argument("--stats-json", type=Path, help="write per-stage wall time and peak RSS here")
        sp.add_argument("--quiet", action="store_true",
                        help="no progress lines on stderr (results and errors are still printed)")
        sp.add_argument("--log-file", type=Path,
                        help="also append the progress lines (and errors) to this file (rank 0)")
        sp.add_argument("--progress-every", type=float, default=10.0, metavar="SECONDS",
                        help="longest gap between progress lines (default 10; lines come at most "
                             "twice as often while work advances)")

    v = sub.add_parser("validate", help="check metadata.json and every file it names")
    v.add_argument("in_dir", type=Path)
    v.add_argument("--quick", action="store_true", help="headers only; skip reading edges and features")
    common(v)

    a = sub.add_parser("assign", help="Step 1: write a partition assignment (DGL format)")
    a.add_argument("in_dir", type=Path)
    a.add_argument("assign_dir", type=Path)
    a.add_argument("--num-parts", type=int, required=True)
    overwrite_option(a)
    method_options(a)
    common(a)

    for name, text in (("dispatch", "Step 2: build and write the partitions"),
                       ("verify", "check an output against its input and assignment "
                                  "(--quick OUT_DIR: against its manifest only)")):
        d = sub.add_parser(name, help=text)
        if name == "verify":
            d.add_argument("dirs", type=Path, nargs="+", metavar="IN_DIR ASSIGN_DIR OUT_DIR")
            d.add_argument("--quick", action="store_true",
                           help="check sizes and checksums against OUT_DIR's manifest; no input needed")
        else:
            d.add_argument("in_dir", type=Path)
            d.add_argument("assign_dir", type=Path)
            d.add_argument("out_dir", type=Path)
        d.add_argument("--num-parts", type=int, help="only needed when the assignment has no partition_meta.json")
        if name == "dispatch":
            overwrite_option(d)
            guard_options(d)
            output_format_options(d)
        common(d)

    q = sub.add_parser("pipeline", help="validate, assign, dispatch and verify in one run")
    q.add_argument("in_dir", type=Path)
    q.add_argument("out_dir", type=Path)
    q.add_argument("--num-parts", type=int, required=True)
    method_options(q)
    q.add_argument("--assign-dir", type=Path, help="where Step 1 writes (default OUT_DIR/assignment)")
    q.add_argument("--no-verify", dest="verify", action="store_false")
    overwrite_option(q)
    guard_options(q)
    output_format_options(q)
    common(q)

    r = sub.add_parser("report", help="edge cut, balance and halo sizes of an output")
    r.add_argument("out_dir", type=Path)
    r.add_argument("--balance-feature", action="append", default=[], metavar="NTYPE/FEAT",
                   help="also report the balance of this 0/1 node feature")
    r.add_argument("--json", type=Path, help="where to write the report (default OUT_DIR/report.json)")
    r.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="also draw nodes and edges per partition by type, halo ratio and edge cut "
                        "(needs matplotlib: pip install 'distpart[plot]')")
    common(r)

    h = sub.add_parser("hostfile", help="print an MPI hostfile for the machines of DGL's ip_config.txt")
    h.add_argument("ip_config", type=Path)
    h.add_argument("--slots", type=int, default=1, help="ranks per machine")
    h.add_argument("--flavor", choices=["openmpi", "mpich"], default="openmpi")

    from .launch import add_launch_arguments
    add_launch_arguments(sub.add_parser("launch", help="start a distpart job across the machines of "
                                        "DGL's ip_config.txt or a hostfile with the site's mpiexec"))

    e = sub.add_parser("example", help="generate the bundled heterogeneous example graph")
    e.add_argument("out_dir", type=Path)
    e.add_argument("--scale", type=int, default=1)
    e.add_argument("--seed", type=int, default=0)

    c = sub.add_parser("chunk", help="write DGL's chunked graph format from OGB's raw layout or "
                                     "one large edge list (CSV or Parquet) per edge type")
    c.add_argument("out_dir", type=Path)
    c.add_argument("--ogb", type=Path, metavar="DIR",
                   help="OGB's raw layout (MAG240M's): <src>___<rel>___<dst>/edge_index.npy, <ntype>/node_*.npy")
    c.add_argument("--edges", action="append", default=[], metavar="SRC:REL:DST=FILE",
                   help="an edge list (.csv, or .parquet/.pq): endpoints in the first two columns, "
                        "further columns are edge features; repeat per edge type")
    c.add_argument("--node-feat", action="append", default=[], metavar="NTYPE/NAME=FILE.npy",
                   help="a node feature for --edges (one row per node); repeatable")
    c.add_argument("--num-nodes", action="append", default=[], metavar="NTYPE=N",
                   help="nodes of a type (default: a node feature's rows, else the largest endpoint + 1)")
    c.add_argument("--delimiter", default=",", help="--edges CSV: the field delimiter (default ',')")
    c.add_argument("--header", action="store_true", help="--edges CSV: the first line names the columns")
    c.add_argument("--num-chunks", type=int, default=4, help="files per edge type and feature (default 4)")
    c.add_argument("--edge-format", choices=["csv", "numpy", "parquet"], default="csv",
                   help="edge files written (default csv, space-separated, as DGL's tools)")
    c.add_argument("--graph-name", help="graph_name in metadata.json (default: the OGB folder's name, or 'graph')")
    c.add_argument("--overwrite", action="store_true", help="replace a chunked graph distpart chunk wrote before")
    return p


def overwrite_option(sp: argparse.ArgumentParser) -> None:
    """--overwrite and --resume: what to do with a previous run's output in the folder."""
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--overwrite", action="store_true",
                   help="replace a previous distpart output in the folder (never files distpart did not write)")
    g.add_argument("--resume", action="store_true",
                   help="continue an interrupted run: keep what it completed (refused if the inputs "
                        "or options changed), redo the rest")


def guard_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--max-memory-gb", type=float,
                    help="refuse to start when dispatch's estimated peak memory per rank exceeds this")
    sp.add_argument("--no-space-check", action="store_true",
                    help="skip the check that the output file system has room for the estimated output")


def output_format_options(sp: argparse.ArgumentParser) -> None:
    """How partitions are stored: DGL dispatch's --graph-formats, and GraphBolt output
    (dgl_partition_to_graphbolt's options, same names)."""
    sp.add_argument("--graph-formats", default="coo", metavar="FORMATS",
                    help="sparse formats stored in each graph.dgl, comma-separated: any of coo, csr, "
                         "csc (default coo, as DGL's dispatch; DGL builds the others when it needs them)")
    sp.add_argument("--graphbolt", action="store_true",
                    help="also write part<p>/fused_csc_sampling_graph.pt for DGL's use_graphbolt=True "
                         "(needs DGL 2.1.0 and torch: pip install 'distpart[graphbolt]')")
    sp.add_argument("--store-eids", action="store_true", help="graphbolt: keep global edge IDs (_ID)")
    sp.add_argument("--store-inner-node", action="store_true", help="graphbolt: keep the inner_node mask")
    sp.add_argument("--store-inner-edge", action="store_true", help="graphbolt: keep the inner_edge mask")


def _graphbolt(args: argparse.Namespace) -> "Optional[GraphboltOptions]":
    """The GraphboltOptions of --graphbolt, or None; the --store-* flags need --graphbolt."""
    from .errors import InputError
    from .partitions.graphbolt import GraphboltOptions
    stores = {k: getattr(args, k, False) for k in ("store_eids", "store_inner_node", "store_inner_edge")}
    if not getattr(args, "graphbolt", False):
        if any(stores.values()):
            raise InputError(None, "--store-eids, --store-inner-node and --store-inner-edge need --graphbolt")
        return None
    return GraphboltOptions(**stores)


def _graph_formats(args: argparse.Namespace) -> Tuple[str, ...]:
    from .partitions.dglformat import graph_formats
    return graph_formats(getattr(args, "graph_formats", "coo").split(","))


def method_options(sp: argparse.ArgumentParser) -> None:
    """Step 1's options, shared by `assign` and `pipeline` (DGL partition_graph's names)."""
    sp.add_argument("--method", choices=["parmetis", "random", "kaminpar"], default="parmetis")
    sp.add_argument("--threads", type=int, metavar="N",
                    help="kaminpar: threads of the one process that runs it (default: the cores of its node)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--balance-ntypes", action="store_true", help="balance every node type (parmetis; kaminpar refuses more than one constraint)")
    sp.add_argument("--balance-edges", action="store_true", help="balance edges, as in-degree (parmetis; kaminpar: alone only)")
    sp.add_argument("--balance-feature", action="append", default=[], metavar="NTYPE/FEAT",
                    help="parmetis: also balance this 0/1 node feature (e.g. paper/train_mask); repeatable")
    sp.add_argument("--imbalance", type=float, default=1.05, help="allowed load imbalance per constraint (parmetis ubvec, kaminpar epsilon + 1)")
    sp.add_argument("--vertex-order", choices=["degree", "input"], default="degree",
                    help="parmetis: number the vertices hubs first (default; much smaller cuts on "
                         "power-law graphs) or keep the input's order")


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "verify":
        _verify_dirs(parser, args)
    if args.command == "launch":
        from .launch import launch_main
        return launch_main(args)
    if args.command in ("example", "hostfile", "chunk"):
        return _run_serial(args)

    from .run.guards import return_freed_memory_to_the_os
    return_freed_memory_to_the_os()
    from mpi4py import MPI
    from .mpi.collective import agreed
    from .run.stages import StageLog
    from .run.progress import Progress, rank_tag
    from .mpi.world import banner, check_world, launcher_rank, library_name

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    host = MPI.Get_processor_name()
    library = library_name(MPI.Get_library_version())
    if rank != 0:
        _tag_warnings(rank_tag(rank, size, host))
    progress = Progress.off()
    try:
        # Before any collective or file: a size-1 world under a many-process launcher is a
        # mismatch, and each such process must stop on its own.
        check_world(size, os.environ, library)
        with agreed(comm):
            progress = _open_progress(rank == 0, args)
        hosts = comm.gather(host, root=0)
        if rank == 0:
            progress.say(banner(args.command, hosts, library, os.environ))
        _refuse_input_as_output(args)
        _graph_formats(args)  # an unknown format: refused before any folder is made
        from .run.lock import folder_locks
        with folder_locks(comm, _written_folders(args), f"distpart {args.command}", progress.say):
            _run(comm, args, StageLog(progress=progress))
    except DistpartError as e:
        # In a mismatched launch every process is a rank 0: only the launcher's rank 0 speaks.
        if rank == 0 and (size > 1 or launcher_rank(os.environ) in (None, 0)):
            message = f"distpart {args.command}: error: {e}"
            print(message, file=sys.stderr, flush=True)
            progress.say(message, to_stream=False)
        return EXIT_USER_ERROR
    except BaseException:  # a bug: never leave the other ranks waiting in a collective
        sys.stderr.write(f"{rank_tag(rank, size, host)} " + traceback.format_exc())
        sys.stderr.flush()
        comm.Abort(1)
    finally:
        progress.close()
    return 0


def _verify_dirs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`verify IN ASSIGN OUT`, or `verify --quick OUT` (IN and ASSIGN are not needed then)."""
    dirs = args.dirs
    if len(dirs) == 3:
        args.in_dir, args.assign_dir, args.out_dir = dirs
    elif len(dirs) == 1 and args.quick:
        args.in_dir = args.assign_dir = None
        args.out_dir = dirs[0]
    else:
        parser.error("verify takes IN_DIR ASSIGN_DIR OUT_DIR (or --quick OUT_DIR)")


def _open_progress(is_root: bool, args: argparse.Namespace):
    from .errors import InputError
    from .run.progress import open_progress
    if not args.progress_every > 0:
        raise InputError(None, f"--progress-every must be positive, got {args.progress_every}")
    try:
        return open_progress(is_root, args.quiet, args.log_file and str(args.log_file),
                             args.progress_every)
    except OSError as e:
        raise InputError(args.log_file, f"cannot open the log file: {e.strerror}") from None


def _tag_warnings(tag: str) -> None:
    """Warnings of ranks other than 0 name the rank and host they came from."""
    import warnings
    plain = warnings.formatwarning
    warnings.formatwarning = lambda *a, **k: f"{tag} {plain(*a, **k)}"


def _written_folders(args: argparse.Namespace) -> List[Path]:
    """The folders a subcommand writes, which no other run may write at the same time."""
    if args.command == "assign":
        return [args.assign_dir]
    if args.command == "dispatch":
        return [args.out_dir]
    if args.command == "pipeline":
        folders = [args.out_dir]
        if args.assign_dir is not None and not _inside(args.assign_dir, args.out_dir):
            folders.append(args.assign_dir)
        return folders
    return []


def _refuse_input_as_output(args: argparse.Namespace) -> None:
    """Checked before the lock file is made, so the input folder is never written at all."""
    from .errors import InputError
    in_dir = getattr(args, "in_dir", None)
    if in_dir is None:
        return
    for folder in _written_folders(args):
        if Path(folder).resolve() == Path(in_dir).resolve():
            raise InputError(folder, "is the input graph's folder: write the output somewhere else "
                                     "(distpart never writes into its input)")


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _run_serial(args: argparse.Namespace) -> int:
    """Subcommands that need no MPI."""
    try:
        if args.command == "example":
            from .synthetic import example_graph
            print(example_graph(args.out_dir, scale=args.scale, seed=args.seed))
        elif args.command == "chunk":
            from .chunked.write import run_chunk
            print(run_chunk(args))
        else:
            from .launch import hostfile_text, read_ip_config
            sys.stdout.write(hostfile_text(read_ip_config(args.ip_config), args.slots, args.flavor))
    except DistpartError as e:
        print(f"distpart {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    return 0


def _check_resources(comm: Intracomm, args: argparse.Namespace, meta, num_parts: Optional[int], progress) -> None:
    """Refuse before any work when the output cannot fit or dispatch would exceed
    --max-memory-gb (estimates from the metadata). Collective."""
    from .mpi.collective import agreed
    from .chunked.estimate import estimate_output_bytes, estimate_peak_rss
    from .run.guards import check_memory, check_space, gib
    with agreed(comm):
        need = estimate_output_bytes(meta, num_parts or comm.Get_size(), _graph_formats(args))
        rss = estimate_peak_rss(meta, comm.Get_size())
        if comm.Get_rank() == 0:
            progress.say(f"estimates: output about {gib(need)}, dispatch about {gib(rss)} per rank")
            if not args.no_space_check:
                check_space(args.out_dir, need)
        if args.max_memory_gb is not None:
            check_memory(rss, args.max_memory_gb)


def _claim_output_folders(comm: Intracomm, args: argparse.Namespace, meta) -> None:
    """Refuse folders whose files distpart must not replace; clear a previous output with
    --overwrite; mark the folders as distpart's. Before the first write. Collective."""
    from .mpi.collective import agreed
    from .run.outdir import ASSIGNMENT, PARTITIONS, OutputFolder, claim, plan_removals

    ntypes = meta.node_types
    reads: List[Path] = []
    if args.command == "assign":
        folders = [OutputFolder(args.assign_dir, ASSIGNMENT, ntypes)]
    elif args.command == "dispatch":
        folders, reads = [OutputFolder(args.out_dir, PARTITIONS)], [args.assign_dir]
    else:
        default = args.assign_dir is None
        folders = [OutputFolder(args.out_dir, PARTITIONS, default_assign_dir="assignment" if default else ""),
                   OutputFolder(args.out_dir / "assignment" if default else args.assign_dir, ASSIGNMENT, ntypes)]
    inputs = [meta.path, *(path for _, path in meta.all_files())]
    with agreed(comm):
        if comm.Get_rank() == 0:
            removals = [r for f in folders
                        for r in plan_removals(f, meta.root, inputs, reads, args.overwrite, args.resume)]
            claim(folders, removals)


def _step1_options(args: argparse.Namespace) -> dict:
    """What Step 1's assignment depends on besides the input (and the number of ranks)."""
    keys = ("method", "seed", "balance_ntypes", "balance_edges", "balance_feature", "imbalance", "vertex_order")
    recorded = {k: getattr(args, k) for k in keys if hasattr(args, k)}
    recorded["num_parts"] = args.num_parts
    return recorded


def _recorded_options(args: argparse.Namespace, assignment) -> dict:
    """What the output depends on besides the input, for the manifest."""
    recorded = _step1_options(args) if hasattr(args, "method") else {}
    recorded.update(num_parts=assignment.num_parts, assignment=assignment.algo_name)
    return recorded   # dispatch adds how the partitions are stored (dispatch.output_options)


def _input_fingerprint(comm: Intracomm, meta) -> str:
    from .mpi.collective import agreed
    from .partitions.manifest import input_fingerprint
    with agreed(comm):
        fingerprint = input_fingerprint(meta) if comm.Get_rank() == 0 else None
    return comm.bcast(fingerprint, root=0)


def _step1(comm: Intracomm, args: argparse.Namespace, meta, assign_dir: Path, key, max_bytes: int, log):
    """Compute and write the assignment, or with --resume read back the one a previous run
    completed with the same key. Collective."""
    from .assign.assignment import fingerprint, parmetis_assignment, random_assignment, read_assignment, write_assignment
    from .assign.balance import BalanceOptions
    from .mpi.collective import agreed
    from .errors import InputError
    from .run.resume import RECORD, check_record, remove_record, write_record

    if args.resume:
        with agreed(comm):
            record = check_record(assign_dir, key) if comm.Get_rank() == 0 else None
        record = comm.bcast(record, root=0)
        if record is not None:
            with log.stage(comm, "read_assign"):
                assignment = read_assignment(comm, meta, assign_dir, args.num_parts)
            with agreed(comm):
                if fingerprint(comm, assignment, meta) != record.get("digest"):
                    raise InputError(assign_dir, f"the assignment files differ from what {RECORD} recorded "
                                                 f"(changed after writing): rerun with --overwrite")
            if comm.Get_rank() == 0:
                log.progress.note(f"resume: the assignment in {assign_dir} is complete, kept")
            return assignment
    with agreed(comm):
        if comm.Get_rank() == 0 and Path(assign_dir).is_dir():
            remove_record(assign_dir)
    with log.stage(comm, "assign"):
        if args.method == "random":
            assignment = random_assignment(comm, meta, args.num_parts, args.seed)
        elif args.method == "kaminpar":
            from .assign.kaminpar import kaminpar_assignment
            balance = BalanceOptions(args.balance_ntypes, args.balance_edges,
                                     tuple(args.balance_feature), args.imbalance)
            assignment = kaminpar_assignment(comm, meta, args.num_parts, balance, args.seed, max_bytes,
                                             log.progress, args.threads, assign_dir)
        else:
            balance = BalanceOptions(args.balance_ntypes, args.balance_edges,
                                     tuple(args.balance_feature), args.imbalance)
            assignment = parmetis_assignment(comm, meta, args.num_parts, balance, args.seed, max_bytes,
                                             log.progress, args.vertex_order)
        write_assignment(comm, assignment, meta, assign_dir)
        digest = fingerprint(comm, assignment, meta)
        with agreed(comm):
            if comm.Get_rank() == 0:
                write_record(assign_dir, key, digest=digest)
    return assignment


def _run(comm: Intracomm, args: argparse.Namespace, log) -> None:
    from .assign.assignment import fingerprint, read_assignment
    from .check.report import report
    from .run.resume import RunKey
    from .run.stages import format_stage_table, write_json
    from .errors import InputError
    from .dispatch.dispatch import dispatch
    from .partitions.layout import check_layout
    from .chunked.validate import validate
    from .check.verify import verify

    if not 1 <= args.max_message_mb <= 2047:
        raise InputError(None, f"--max-message-mb must be between 1 and 2047 (MPI counts are 32-bit), "
                               f"got {args.max_message_mb}")
    max_bytes = args.max_message_mb << 20
    num_parts = getattr(args, "num_parts", None)
    if num_parts is not None:
        check_layout(num_parts, comm.Get_size())

    if args.command == "report":
        report(comm, args.out_dir, args.balance_feature, args.json, args.plot)
        return
    graphbolt = _graphbolt(args)
    if graphbolt is not None:  # before any work: without DGL the run could not finish
        from .mpi.collective import agreed
        from .partitions.graphbolt import load_graphbolt
        with agreed(comm):
            load_graphbolt()
    if args.command == "verify" and args.quick:
        from .check.verify import verify_quick
        with log.stage(comm, "verify"):
            summary = verify_quick(comm, args.out_dir)
        if comm.Get_rank() == 0:
            print(f"verify --quick: OK ({summary})", flush=True)
        return
    with log.stage(comm, "validate"):
        meta = validate(comm, args.in_dir, full=args.command == "validate" and not args.quick)
    outside = meta.files_outside_root()
    if outside and comm.Get_rank() == 0:
        log.progress.note(f"{len(outside)} chunk file{' lies' if len(outside) == 1 else 's lie'} outside "
                          f"{meta.root} (e.g. {outside[0]}); every rank must be able to read "
                          f"{'it' if len(outside) == 1 else 'them'}")
    if num_parts is not None and num_parts > sum(meta.node_counts):
        raise InputError(None, f"the number of partitions ({num_parts}) is larger than the number of "
                               f"nodes ({sum(meta.node_counts)}): some partitions would be empty")
    if args.command in ("dispatch", "pipeline"):
        _check_resources(comm, args, meta, num_parts, log.progress)
    if args.command in ("assign", "dispatch", "pipeline"):
        _claim_output_folders(comm, args, meta)
        input_key = _input_fingerprint(comm, meta)
    if args.command == "assign" or args.command == "pipeline":
        assign_dir = args.assign_dir if args.command == "assign" else (args.assign_dir or args.out_dir / "assignment")
        assignment = _step1(comm, args, meta, assign_dir, RunKey(input_key, _step1_options(args)), max_bytes, log)
    if args.command == "dispatch":
        with log.stage(comm, "read_assign"):
            assignment = read_assignment(comm, meta, args.assign_dir, num_parts)
        check_layout(assignment.num_parts, comm.Get_size())
    if args.command in ("dispatch", "pipeline"):
        key = RunKey(input_key, _recorded_options(args, assignment), fingerprint(comm, assignment, meta))
        dispatch(comm, meta, assignment, args.out_dir, key=key, max_bytes=max_bytes, log=log,
                 resume=args.resume, graphbolt=graphbolt, graph_formats=_graph_formats(args))
    if args.command == "verify" or (args.command == "pipeline" and args.verify):
        if args.command == "verify":
            with log.stage(comm, "read_assign"):
                assignment = read_assignment(comm, meta, args.assign_dir, num_parts)
        with log.stage(comm, "verify"):
            summary = verify(comm, meta, assignment, args.out_dir, max_bytes=max_bytes,
                             progress=log.progress)
        if comm.Get_rank() == 0:
            print(f"verify: OK ({summary})", flush=True)
    if args.command == "pipeline":
        with log.stage(comm, "report"):
            report(comm, args.out_dir, args.balance_feature)

    stats = log.gather(comm)
    if stats is not None:
        if args.command != "validate":
            print(format_stage_table(stats), flush=True)
        else:
            print(f"validate: OK ({len(meta.node_types)} node types, {len(meta.edge_types)} edge types, "
                  f"{sum(meta.node_counts)} nodes, {sum(meta.edge_counts)} edges)", flush=True)
        if args.stats_json:
            write_json(str(args.stats_json), stats)


if __name__ == "__main__":
    sys.exit(main())
