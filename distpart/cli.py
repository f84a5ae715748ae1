"""The `distpart` command: argument parsing, MPI start-up, exit codes. Each subcommand is
one function (`commands`, `launch`) registered with `set_defaults(func=...)`.

Every collective subcommand is SPMD: run it under `mpiexec -n R` (or alone, as one rank).
How it ends on every rank (a user error printed once, exit 2; a stop; a bug aborting the
job) is `run.exits`'s policy, shared with DGL's tools.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from functools import partial
from pathlib import Path
from typing import Callable, List, Optional, Union

from .assign import METHODS
from .assign.options import imbalance_problem, parse_fanouts
from .errors import InputError
from .launch import add_hostfile_arguments, add_launch_arguments, hostfile_main, launch_main
from .mpi.collective import agreed
from .mpi.world import banner
from .paths import check_output_file
from .run.exits import Job, alone, on_every_rank
from .run.guards import return_freed_memory_to_the_os
from .run.progress import Progress, open_progress
from .run.signals import route_stops_to_main_thread, stopped_message
from .run.stages import StageLog

Command = Callable[[argparse.Namespace], int]

# What `distpart tools-path` prints: the dgltools folder, as installed. Named here, not
# imported: dgltools runs `distpart` commands, so it sits above this module.
TOOLS_DIR = Path(__file__).resolve().parent / "dgltools"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="distpart", description="MPI-parallel partitioning of DGL chunked graphs for distributed GNN training.")
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
    v.set_defaults(func=_collective("validate"))

    a = sub.add_parser("assign", help="Step 1: write a partition assignment (DGL format)")
    a.add_argument("in_dir", type=Path)
    a.add_argument("assign_dir", type=Path)
    a.add_argument("--num-parts", type=int, required=True)
    overwrite_option(a)
    method_options(a)
    common(a)
    a.set_defaults(func=_collective("assign"))

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
            d.set_defaults(func=_collective("dispatch"))
        else:
            d.set_defaults(func=_collective("verify"), after_parse=_verify_dirs)
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
    q.set_defaults(func=_collective("pipeline"))

    r = sub.add_parser("report", help="edge cut, balance and halo sizes of an output")
    r.add_argument("out_dir", type=Path)
    r.add_argument("--balance-feature", action="append", default=[], metavar="NTYPE/FEAT",
                   help="also report the balance of this 0/1 node feature")
    r.add_argument("--train-mask", action="append", default=[], metavar="NTYPE/FEAT",
                   help="a node feature marking training nodes: also report training nodes per "
                        "partition, their balance, and how many DGL's even split (node_split, "
                        "force_even=True) hands to another partition's trainer; repeatable")
    r.add_argument("--json", type=Path, help="where to write the report (default OUT_DIR/report.json)")
    r.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="also draw nodes and edges per partition by type, halo ratio and edge cut "
                        "(needs matplotlib: pip install 'distpart[plot]')")
    common(r)
    r.set_defaults(func=_collective("report"))

    sub.add_parser("tools-path", help="print the folder of distpart's drop-in for DGL's tools "
                   "(dispatch_data.py, ...): GraphStorm's --dgl-tool-path \"$(distpart tools-path)\""
                   ).set_defaults(func=_alone(_tools_path))

    h = sub.add_parser("hostfile", help="print an MPI hostfile for the machines of DGL's ip_config.txt")
    add_hostfile_arguments(h)
    h.set_defaults(func=_alone(hostfile_main))

    la = sub.add_parser("launch", help="start a distpart job across the machines of "
                        "DGL's ip_config.txt or a hostfile with the site's mpiexec")
    add_launch_arguments(la)
    la.set_defaults(func=_alone(launch_main))

    e = sub.add_parser("example", help="generate the bundled heterogeneous example graph")
    e.add_argument("out_dir", type=Path)
    e.add_argument("--scale", type=int, default=1)
    e.add_argument("--seed", type=int, default=0)
    e.set_defaults(func=_alone("example"))

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
    c.set_defaults(func=_alone("chunk"))
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
                    help="refuse to start when a stage's estimated peak memory per rank exceeds this (Step 1, dispatch, verify)")
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


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (argparse then names the option and exits 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def fanout_list(text: str) -> "tuple[int, ...]":
    """argparse type of --fanouts (argparse names the option and exits 2)."""
    try:
        return parse_fanouts(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def imbalance_factor(text: str) -> float:
    """argparse type of --imbalance: checked once, here (argparse names the option, exits 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 1.05, got {text!r}") from None
    problem = imbalance_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def method_options(sp: argparse.ArgumentParser) -> None:
    """Step 1's options, shared by `assign` and `pipeline` (DGL partition_graph's names)."""
    sp.add_argument("--method", choices=METHODS, default="multilevel")
    sp.add_argument("--threads", type=int, metavar="N",
                    help="kaminpar: threads of the one process that runs it (default: the cores of its node)")
    sp.add_argument("--vcycles", type=non_negative_int, metavar="N",
                    help="multilevel: refine N more times, each from a hierarchy coarsened inside the blocks "
                         "found so far (V-cycles; each costs about the first pass's time and lowers the cut a "
                         "little). Default: 1 on mesh-like graphs (no hubs), 0 otherwise")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--balance-ntypes", action=argparse.BooleanOptionalAction, default=None,
                    help="balance every node type (default for multilevel and parmetis, as DGL's pipeline "
                         "does; kaminpar refuses more than one constraint)")
    sp.add_argument("--balance-edges", nargs="?", const=True, default=None, type=imbalance_factor, metavar="FACTOR",
                    help="balance edges, as in-degree, per node type with --balance-ntypes (multilevel, parmetis; "
                         "kaminpar: alone only) at --imbalance, or with FACTOR at their own cap (max/average). "
                         "Default for multilevel: 1.5")
    sp.add_argument("--no-balance-edges", dest="balance_edges", action="store_false",
                    help="do not balance edges (node types, masks and --imbalance stay)")
    sp.add_argument("--balance-feature", action="append", default=[], metavar="NTYPE/FEAT",
                    help="multilevel, parmetis: also balance this 0/1 node feature (e.g. paper/train_mask); repeatable")
    sp.add_argument("--imbalance", type=imbalance_factor, default=1.05, help="allowed load imbalance per constraint, max/average (ParMETIS's ubvec, KaMinPar's epsilon + 1)")
    sp.add_argument("--objective", choices=["cut", "fetch", "vol"], default="cut",
                    help="what Step 1 minimises with the balance kept: cut = edges between machines "
                         "(default); fetch = the feature rows DistDGL's neighbour sampler fetches from "
                         "other machines per epoch, from --train-mask, --fanouts and --batch-size; "
                         "vol = the halo total (each node once per other machine holding a neighbour; "
                         "DGL's objtype='vol'). fetch and vol: multilevel")
    sp.add_argument("--train-mask", action="append", default=[], metavar="NTYPE/FEAT",
                    help="a 0/1 node feature marking training nodes (repeatable): balanced across "
                         "partitions, as DGL's trainers split them evenly, and the seeds of --objective fetch")
    sp.add_argument("--fanouts", type=fanout_list, default="10,25", metavar="F1,F2,...",
                    help="--objective fetch: the fanouts you train with, in DGL's order (the last is "
                         "sampled from the seeds; default 10,25, DGL's distributed GraphSAGE example)")
    sp.add_argument("--batch-size", type=int, default=1000,
                    help="--objective fetch: seeds per mini-batch you train with (default 1000)")
    sp.add_argument("--vertex-order", choices=["degree", "input"], default="degree",
                    help="parmetis: number the vertices hubs first (default; much smaller cuts on "
                         "power-law graphs) or keep the input's order")


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    after_parse = getattr(args, "after_parse", None)
    if after_parse is not None:
        after_parse(parser, args)
    return args.func(args)


def _alone(command: Union[str, Callable[[argparse.Namespace], Optional[int]]]) -> Command:
    """A subcommand that needs no MPI (a function, or the name of one in `commands`): a user
    error is one line and exit 2."""
    return lambda args: alone(f"distpart {args.command}", lambda: _command(command)(args))


def _collective(name: str) -> Command:
    """The subcommand `commands.<name>(comm, args, log)`, run on every rank once the world is up."""
    return partial(_on_every_rank, name)


def _command(command: Union[str, Callable[..., Optional[int]]]) -> Callable[..., Optional[int]]:
    """`commands.<command>` (or `command` itself). The one late import of distpart's own code:
    `commands` brings numpy, pyarrow and the whole pipeline, which `distpart --help`,
    `launch`, `hostfile` and `tools-path` do not need."""
    if not isinstance(command, str):
        return command
    from . import commands
    return getattr(commands, command)


def _tools_path(args: argparse.Namespace) -> None:
    print(TOOLS_DIR)


def _on_every_rank(name: str, args: argparse.Namespace) -> int:
    route_stops_to_main_thread()  # before MPI and NumPy start threads (run/signals.py says why)
    return_freed_memory_to_the_os()
    command = _command(name)
    job = Job.world(f"distpart {args.command}")
    if job.rank != 0:
        _tag_warnings(job.tag)

    def body() -> None:
        with agreed(job.comm):
            job.progress = _open_progress(job.rank == 0, args)
        hosts = job.comm.gather(job.host, root=0)
        if job.rank == 0:
            job.progress.say(banner(args.command, hosts, job.library, os.environ))
        command(job.comm, args, StageLog(progress=job.progress))

    return on_every_rank(job, body, stop_line=lambda stop: stopped_message(stop, args),
                         outputs=[getattr(args, "out_dir", None), getattr(args, "assign_dir", None)],
                         inputs=[getattr(args, "in_dir", None)], log_file=args.log_file)


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


def _open_progress(is_root: bool, args: argparse.Namespace) -> Progress:
    if not args.progress_every > 0:
        raise InputError(None, f"--progress-every must be positive, got {args.progress_every}")
    if is_root and args.log_file is not None:
        check_output_file(args.log_file, "log file")
    try:
        return open_progress(is_root, args.quiet, args.log_file and str(args.log_file),
                             args.progress_every)
    except OSError as e:
        raise InputError(args.log_file, f"cannot open the log file: {e.strerror}") from None


def _tag_warnings(tag: str) -> None:
    """Warnings of ranks other than 0 name the rank and host they came from."""
    plain = warnings.formatwarning
    warnings.formatwarning = lambda *a, **k: f"{tag} {plain(*a, **k)}"


if __name__ == "__main__":
    sys.exit(main())
