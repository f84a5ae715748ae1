"""What each `distpart` subcommand does, stage by stage, once the world is up: validate,
check resources and claim the output folders, Step 1 (or read its result), Step 2, verify,
report, and the stage table. Every function here is collective unless it says otherwise.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Tuple

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from .partitions.graphbolt import GraphboltOptions


def graphbolt_options(args: argparse.Namespace) -> "Optional[GraphboltOptions]":
    """The GraphboltOptions of --graphbolt, or None; the --store-* flags need --graphbolt."""
    from .errors import InputError
    from .partitions.graphbolt import GraphboltOptions
    stores = {k: getattr(args, k, False) for k in ("store_eids", "store_inner_node", "store_inner_edge")}
    if not getattr(args, "graphbolt", False):
        if any(stores.values()):
            raise InputError(None, "--store-eids, --store-inner-node and --store-inner-edge need --graphbolt")
        return None
    return GraphboltOptions(**stores)


def graph_formats_of(args: argparse.Namespace) -> Tuple[str, ...]:
    from .partitions.dglformat import graph_formats
    return graph_formats(getattr(args, "graph_formats", "coo").split(","))


def written_folders(args: argparse.Namespace) -> List[Path]:
    """The folders a subcommand writes, which no other run may write at the same time."""
    if args.command == "assign":
        return [args.assign_dir]
    if args.command == "dispatch":
        return [args.out_dir]
    if args.command == "pipeline":
        # The assignment folder too, even inside OUT_DIR: an `assign` into OUT_DIR/assignment
        # must not rewrite Step 1's result while this pipeline reads it.
        return [args.out_dir, args.assign_dir if args.assign_dir is not None else args.out_dir / "assignment"]
    return []


def check_output_files(args: argparse.Namespace) -> None:
    """Every file path a command was given to write (and `report`'s report.json), checked
    before any work: a link, a missing or read-only folder is refused now, not after a run.
    Rank 0 only (the caller agrees)."""
    from .check.report import REPORT_FILE
    from .paths import check_output_file
    files = [(getattr(args, "stats_json", None), "stage statistics")]
    if args.command == "report":
        files += [(args.json or args.out_dir / REPORT_FILE, "report"), (args.plot, "plot")]
    for path, what in files:
        if path is not None:
            check_output_file(path, what)


def refuse_input_as_output(args: argparse.Namespace) -> None:
    """Checked before the lock file is made, so the input folder is never written at all."""
    from .run.outdir import refuse_inside_input
    in_dir = getattr(args, "in_dir", None)
    if in_dir is None:
        return
    for folder in written_folders(args):
        refuse_inside_input(Path(folder), Path(in_dir))


def _check_resources(comm: Intracomm, args: argparse.Namespace, meta, num_parts: Optional[int], progress) -> None:
    """Refuse before any work when the output cannot fit or dispatch would exceed
    --max-memory-gb (estimates from the metadata). Collective."""
    from .mpi.collective import agreed
    from .chunked.estimate import estimate_output_bytes, estimate_peak_rss
    from .run.guards import check_memory, check_space, gib
    with agreed(comm):
        need = estimate_output_bytes(meta, num_parts or comm.Get_size(), graph_formats_of(args))
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
        folders, reads = [OutputFolder(args.out_dir, PARTITIONS, ntypes)], [args.assign_dir]
    else:
        default = args.assign_dir is None
        folders = [OutputFolder(args.out_dir, PARTITIONS, ntypes, default_assign_dir="assignment" if default else ""),
                   OutputFolder(args.out_dir / "assignment" if default else args.assign_dir, ASSIGNMENT, ntypes)]
    inputs = [meta.path, *(path for _, path in meta.all_files())]
    with agreed(comm):
        if comm.Get_rank() == 0:
            removals = [r for f in folders
                        for r in plan_removals(f, meta.root, inputs, reads, args.overwrite, args.resume)]
            claim(folders, removals)


def _step1_options(args: argparse.Namespace) -> dict:
    """What Step 1's assignment depends on besides the input (and the number of ranks)."""
    keys = ("method", "seed", "balance_ntypes", "balance_edges", "balance_feature", "imbalance", "vertex_order",
            "vcycles", "objective", "train_mask", "fanouts", "batch_size")
    recorded = {k: getattr(args, k) for k in keys if hasattr(args, k)}
    if "fanouts" in recorded:
        recorded["fanouts"] = list(recorded["fanouts"])   # as JSON gives it back
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
    from .assign import compute_assignment
    from .assign.assignment import fingerprint, read_assignment, write_assignment
    from .assign.balance import BalanceOptions
    from .assign.objective import Objective
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
        # Training nodes are balanced too: DGL's trainers split them evenly, whatever the partition.
        features = tuple(dict.fromkeys([*args.balance_feature, *args.train_mask]))
        edges = args.balance_edges
        balance = BalanceOptions(args.balance_ntypes, edges is not False, features, args.imbalance,
                                 None if isinstance(edges, bool) else edges)
        objective = Objective(args.objective, tuple(args.train_mask), tuple(args.fanouts), args.batch_size)
        assignment = compute_assignment(comm, meta, args.num_parts, args.method, balance, args.seed, max_bytes,
                                        log.progress, vertex_order=args.vertex_order, threads=args.threads,
                                        work_dir=assign_dir, vcycles=args.vcycles, objective=objective)
        write_assignment(comm, assignment, meta, assign_dir)
        digest = fingerprint(comm, assignment, meta)
        with agreed(comm):
            if comm.Get_rank() == 0:
                write_record(assign_dir, key, digest=digest)
    return assignment


def _verify(comm: Intracomm, meta, assignment, out_dir: Path, max_bytes: int, log) -> None:
    from .check.verify import verify
    with log.stage(comm, "verify"):
        summary = verify(comm, meta, assignment, out_dir, max_bytes=max_bytes, progress=log.progress)
    if comm.Get_rank() == 0:
        print(f"verify: OK ({summary})", flush=True)


def run_command(comm: Intracomm, args: argparse.Namespace, log) -> None:
    from .assign.assignment import fingerprint, read_assignment
    from .check.report import report
    from .run.resume import RunKey
    from .run.stages import format_stage_table, write_json
    from .errors import InputError
    from .dispatch.dispatch import dispatch
    from .dispatch.publish import withdrawn_on_error
    from .partitions.layout import check_layout
    from .chunked.validate import validate
    from .assign.options import check_num_parts

    if hasattr(args, "method"):   # Step 1's defaults, filled in once: the resume record holds them
        from .assign.options import default_balance
        args.balance_ntypes, args.balance_edges = default_balance(args.method, args.balance_ntypes,
                                                                  args.balance_edges)
    if not 1 <= args.max_message_mb <= 2047:
        raise InputError(None, f"--max-message-mb must be between 1 and 2047 (MPI counts are 32-bit), "
                               f"got {args.max_message_mb}")
    max_bytes = args.max_message_mb << 20
    num_parts = getattr(args, "num_parts", None)
    if num_parts is not None:
        check_layout(num_parts, comm.Get_size())

    if args.command == "report":
        report(comm, args.out_dir, args.balance_feature, args.json, args.plot, args.train_mask)
        return
    graphbolt = graphbolt_options(args)
    if graphbolt is not None:  # before any work: without DGL the run could not finish
        from .mpi.collective import agreed
        from .partitions.graphbolt import load_graphbolt
        with agreed(comm):
            load_graphbolt()
    if args.command == "verify" and args.quick:
        from .check.verify import verify_quick
        with log.stage(comm, "verify"):
            summary = verify_quick(comm, args.out_dir, progress=log.progress)
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
    if num_parts is not None:
        check_num_parts(None, num_parts, sum(meta.node_counts))
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
                 resume=args.resume, graphbolt=graphbolt, graph_formats=graph_formats_of(args))
    if args.command == "verify":
        with log.stage(comm, "read_assign"):
            assignment = read_assignment(comm, meta, args.assign_dir, num_parts)
        _verify(comm, meta, assignment, args.out_dir, max_bytes, log)
    if args.command == "pipeline":
        # A pipeline whose check fails leaves no metadata.json: its output must not look complete.
        with withdrawn_on_error(comm, args.out_dir):
            if args.verify:
                _verify(comm, meta, assignment, args.out_dir, max_bytes, log)
            with log.stage(comm, "report"):
                report(comm, args.out_dir, args.balance_feature, train_masks=args.train_mask)

    stats = log.gather(comm)
    if stats is not None:
        if args.command != "validate":
            print(format_stage_table(stats), flush=True)
        else:
            print(f"validate: OK ({len(meta.node_types)} node types, {len(meta.edge_types)} edge types, "
                  f"{sum(meta.node_counts)} nodes, {sum(meta.edge_counts)} edges)", flush=True)
        if args.stats_json:
            write_json(str(args.stats_json), stats)
