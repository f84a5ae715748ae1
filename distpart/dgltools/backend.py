"""What each DGL tool does once distpart's interpreter runs it: DGL's flags become distpart
commands. The scripts beside this file start it as `python -m distpart.dgltools.backend
TOOL ARGS...` (see `_python`); it parses the same flags again with `_flags`.

- dispatch_data: `distpart launch --ip-config IPS --ranks-per-host P/machines -- dispatch
  IN ASSIGN OUT --overwrite ...`, with `--ssh-port` as Open MPI's ssh option;
- data_proc_pipeline: `distpart dispatch` with `--world-size` ranks on this machine;
- random_partition: `distpart assign --method random --seed 0`;
- parmetis_preprocess, pm_dglpart, parmetis_postprocess: GraphStorm's three ParMETIS steps.
  DGL's first step writes ParMETIS's input files, its `pm_dglpart` writes
  `<graph>_part.<P>` (lines `<node ID> <partition>`), its last step splits that file into
  `<ntype>.txt`. Here the first step checks the input and writes the small files GraphStorm
  copies, `pm_dglpart` runs distpart's ParMETIS method (Step 1 of `distpart assign
  --method parmetis --balance-ntypes`) on the ranks GraphStorm's `mpirun` started and writes
  `<graph>_part.<P>` in DGL's format with MPI-IO, and the last step splits it as DGL's does.

Two environment variables pass what DGL's flags cannot say: `DISTPART_LAUNCH_ARGS` (e.g.
`--interface eth0`, for `distpart launch`) and `DISTPART_DISPATCH_ARGS` (e.g.
`--max-memory-gb 100`, for `distpart dispatch`).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence

from . import _flags
from ..errors import DistpartError, InputError

if TYPE_CHECKING:
    import numpy as np
    from mpi4py.MPI import Intracomm

    from ..assign.assignment import Assignment
    from ..chunked.metadata import GraphMeta

USER_ERROR = 2
QUIET_LEVELS = ("WARNING", "ERROR", "CRITICAL")     # DGL log levels that hide progress lines


def script_name(tool: str) -> str:
    return tool if tool == "pm_dglpart" else f"{tool}.py"


def note(tool: str, text: str) -> None:
    print(f"{script_name(tool)}: note: {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- DGL's flags -> distpart (pure)

def metadata_path(in_dir: str, filename: str) -> str:
    """The input as distpart takes it: the folder when the metadata is `metadata.json` (so
    distpart's checks see the input folder), else the metadata file itself (GSProcessing
    names it otherwise). Joined as DGL joins them (an absolute filename wins), absolute,
    since remote ranks may start in another folder."""
    if filename == "metadata.json":
        return os.path.abspath(in_dir)
    return os.path.abspath(os.path.join(in_dir, filename))


def output_options(tool: str, args: argparse.Namespace, env: Mapping[str, str]) -> List[str]:
    """distpart dispatch's options for DGL's output flags, plus $DISTPART_DISPATCH_ARGS.

    `--overwrite`: DGL's dispatch writes into an existing output folder, so a rerun of the
    same job must too; distpart still refuses to remove files it did not write."""
    opts = ["--overwrite"]
    if args.graph_formats:
        opts += ["--graph-formats", args.graph_formats]
    stores = [flag for flag in ("store_eids", "store_inner_node", "store_inner_edge") if getattr(args, flag)]
    if args.use_graphbolt:
        opts.append("--graphbolt")
        opts += [f"--{flag.replace('_', '-')}" for flag in stores]
    elif stores:
        note(tool, "--store-eids/--store-inner-node/--store-inner-edge shape GraphBolt output only: "
                   "ignored without --use-graphbolt (as DGL ignores them)")
    if str(args.log_level).upper() in QUIET_LEVELS:
        opts.append("--quiet")
    if not (args.save_orig_nids and args.save_orig_eids):
        note(tool, "orig_nids.dgl and orig_eids.dgl are written into every partition whether or not "
                   "--save-orig-nids/--save-orig-eids are given")
    return opts + shlex.split(env.get("DISTPART_DISPATCH_ARGS", ""))


def ssh_port_env(port: int, env: Mapping[str, str]) -> Dict[str, str]:
    """The variables that make Open MPI's ssh (and distpart launch's check) use `port`: its
    ssh options, `OMPI_MCA_plm_rsh_args`. Port 22 changes nothing (so ~/.ssh/config rules)."""
    if port == 22:
        return {}
    if not 0 < port < 65536:
        raise InputError(None, f"--ssh-port {port} is not a TCP port (1-65535)")
    return {"OMPI_MCA_plm_rsh_args": f"{env.get('OMPI_MCA_plm_rsh_args', '')} -p {port}".strip()}


def dispatch_data_command(args: argparse.Namespace, num_parts: int, hosts: Sequence[str],
                          env: Mapping[str, str]) -> List[str]:
    """`distpart launch ... -- dispatch ...` for dispatch_data.py's flags: P/machines ranks on
    each distinct machine of ip_config.txt (DGL starts one process per machine; distpart one
    per partition, so each rank builds one partition)."""
    machines = len(dict.fromkeys(hosts))
    if num_parts % machines:
        raise InputError(args.ip_config, f"names {machines} machine{'s' * (machines > 1)}, but the assignment "
                                         f"has {num_parts} partitions: the partitions must be a multiple of "
                                         "the machines (each machine builds the same number)")
    job = ["dispatch", metadata_path(args.in_dir, args.metadata_filename), os.path.abspath(args.partitions_dir),
           os.path.abspath(args.out_dir), *output_options("dispatch_data", args, env)]
    return ["launch", "--ip-config", os.path.abspath(args.ip_config), "--ranks-per-host",
            str(num_parts // machines), *shlex.split(env.get("DISTPART_LAUNCH_ARGS", "")), "--", *job]


def data_proc_pipeline_job(args: argparse.Namespace, env: Mapping[str, str]) -> List[str]:
    """`distpart dispatch ...` for data_proc_pipeline.py's flags (paths as DGL joins them:
    the schema and the partitions folder relative to --input-dir)."""
    if args.world_size < 1 or args.num_parts % args.world_size:
        raise InputError(None, f"--num-parts {args.num_parts} must be a positive multiple of --world-size "
                               f"{args.world_size} (each process builds the same number of partitions)")
    return ["dispatch", metadata_path(args.input_dir, args.schema),
            os.path.abspath(os.path.join(args.input_dir, args.partitions_dir)), os.path.abspath(args.output),
            "--num-parts", str(args.num_parts), *output_options("data_proc_pipeline", args, env)]


def random_partition_job(args: argparse.Namespace) -> List[str]:
    """`distpart assign ... --method random` for random_partition.py's flags. DGL draws
    np.random.randint unseeded; distpart's random method is seeded (the same files every run)
    and balanced (every partition gets floor or ceil of N/P nodes of each type)."""
    return ["assign", os.path.abspath(args.in_dir), os.path.abspath(args.out_dir), "--num-parts",
            str(args.num_partitions), "--method", "random", "--seed", "0", "--overwrite"]


# ---------------------------------------------------------------- dispatch and random partition

def _distpart(argv: List[str]) -> int:
    from ..cli import main as distpart_main
    return distpart_main(argv)


def run_dispatch_data(args: argparse.Namespace) -> int:
    from ..assign.assignment import read_partition_meta
    from ..launch import read_ip_config
    pmeta = read_partition_meta(Path(args.partitions_dir))
    if pmeta is None:
        where = Path(args.partitions_dir) / "partition_meta.json"
        raise InputError(where, "does not exist: dispatch_data.py takes the number of partitions from it, as "
                                "DGL's does (random_partition.py and distpart assign write it)")
    command = dispatch_data_command(args, pmeta["num_parts"], read_ip_config(args.ip_config), os.environ)
    os.environ.update(ssh_port_env(args.ssh_port, os.environ))
    print(f"dispatch_data.py: distpart {shlex.join(command)}", file=sys.stderr, flush=True)
    return _distpart(command)


def run_data_proc_pipeline(args: argparse.Namespace) -> int:
    rank = os.environ.get("RANK", "")
    if rank not in ("", "0"):
        raise InputError(None, f"started with RANK={rank}, as DGL's launcher starts one copy per machine: "
                               "distpart's data_proc_pipeline.py runs the whole dispatch (--world-size ranks "
                               "on this machine) from one copy; start it once, or run dispatch_data.py, which "
                               "starts ranks on every machine of ip_config.txt")
    job = data_proc_pipeline_job(args, os.environ)
    _note_graph_name(args)
    print(f"data_proc_pipeline.py: distpart {shlex.join(job)} on {args.world_size} rank"
          f"{'s' * (args.world_size > 1)}", file=sys.stderr, flush=True)
    if args.world_size == 1:
        return _distpart(job)           # one rank, no launcher needed
    fd, name = tempfile.mkstemp(prefix="distpart-dgl-hosts-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"localhost slots={args.world_size}\n")
        return _distpart(["launch", "--hostfile", name, *shlex.split(os.environ.get("DISTPART_LAUNCH_ARGS", "")),
                          "--", *job])
    finally:
        os.unlink(name)


def _note_graph_name(args: argparse.Namespace) -> None:
    from ..chunked.metadata import read_json
    meta = read_json(Path(args.input_dir, args.schema))
    name = meta.get("graph_name") if isinstance(meta, dict) else None
    if isinstance(name, str) and name != args.graph_name:
        note("data_proc_pipeline", f"--graph-name {args.graph_name!r} differs from the metadata's graph_name "
                                   f"{name!r}; the partition config keeps {name!r}")


def run_random_partition(args: argparse.Namespace) -> int:
    return _distpart(random_partition_job(args))


# ---------------------------------------------------------------- GraphStorm's ParMETIS steps

def _collective(tool: str, body: Callable[["Intracomm"], None]) -> int:
    """Run `body` on every rank of the job that started this process (GraphStorm's `mpirun`,
    or this process alone), as `distpart` runs a command: a DistpartError agreed by all ranks
    is printed once and every rank exits 2; any other exception aborts the whole job."""
    from mpi4py import MPI

    from ..mpi.world import check_world, launcher_rank, library_name
    from ..run.progress import rank_tag
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    try:
        check_world(size, os.environ, library_name(MPI.Get_library_version()))
        body(comm)
    except DistpartError as e:
        if rank == 0 and (size > 1 or launcher_rank(os.environ) in (None, 0)):
            print(f"{script_name(tool)}: error: {e}", file=sys.stderr, flush=True)
        return USER_ERROR
    except BaseException:  # a bug: never leave the other ranks waiting in a collective
        sys.stderr.write(f"{rank_tag(rank, size, MPI.Get_processor_name())} " + traceback.format_exc())
        sys.stderr.flush()
        comm.Abort(1)
    return 0


def _write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise InputError(path, f"cannot write: {e.strerror}") from None


def run_parmetis_preprocess(args: argparse.Namespace) -> int:
    """Check the input on GraphStorm's ranks and write what GraphStorm and pm_dglpart read:
    `<input_dir>/<graph>_stats.txt` (DGL's `nodes edges constraints`, kept if present, as
    DGL keeps it), `<output_dir>/parmetis_nfiles.txt` (one line in DGL's `file start end`
    form naming the metadata file, which pm_dglpart reads) and `parmetis_efiles.txt` (the
    input's edge files, for reference)."""
    def body(comm: "Intracomm") -> None:
        from ..chunked.validate import validate
        from ..mpi.collective import agreed
        meta = validate(comm, metadata_path(args.input_dir, args.schema_file))
        with agreed(comm):
            if args.num_parts < 1:
                raise InputError(None, f"--num_parts must be at least 1, got {args.num_parts}")
            if comm.Get_rank() == 0:
                nodes, edges = sum(meta.node_counts), sum(meta.edge_counts)
                stats = Path(args.input_dir) / f"{meta.graph_name}_stats.txt"
                if not stats.exists():
                    _write_text(stats, f"{nodes} {edges} {len(meta.node_types)}")
                out = Path(args.output_dir)
                _write_text(out / "parmetis_nfiles.txt", f"{meta.path.resolve()} 0 {nodes}\n")
                _write_text(out / "parmetis_efiles.txt",
                            "".join(f"{p.resolve()}\n" for e in meta.edge_types for p in e.files.paths))
    return _collective("parmetis_preprocess", body)


def metadata_from_nfiles(nfiles: Path) -> Path:
    """The metadata file our parmetis_preprocess.py named in parmetis_nfiles.txt."""
    from ..paths import read_user_text
    text = read_user_text(nfiles, InputError)
    fields = text.split("\n", 1)[0].split()
    if len(fields) != 3 or not fields[0].endswith(".json"):
        raise InputError(nfiles, "does not name a chunked graph's metadata file: it was not written by "
                                 "distpart's parmetis_preprocess.py (DGL's lists node weight files, which "
                                 "distpart does not read); run the one in `distpart tools-path`")
    return Path(fields[0])


def part_file_lines(type_offset: int, block_start: int, parts: "np.ndarray") -> bytes:
    """`<global node ID> <partition>` lines of one block of one node type (DGL's ParMETIS
    output: node IDs of all types in one range, types in metadata order)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    ids = np.arange(len(parts), dtype=np.int64) + (type_offset + block_start)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(pa.table({"n": ids, "p": np.asarray(parts, dtype=np.int64)}), sink,
                    write_options=pacsv.WriteOptions(include_header=False, delimiter=" "))
    return sink.getvalue().to_pybytes()


def write_part_file(comm: "Intracomm", assignment: "Assignment", meta: "GraphMeta", path: Path) -> None:
    """`<graph>_part.<P>`, every rank writing its blocks at their byte offsets (MPI-IO), so no
    rank holds more than its share. Collective."""
    import numpy as np

    from ..mpi.exchange import allreduce_sum, exscan_sum
    from ..mpi.files import open_for_writing, write_at
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


def run_pm_dglpart(args: argparse.Namespace) -> int:
    """distpart's ParMETIS method on the ranks `mpirun` started; writes `<graph>_part.<P>`
    in the current folder, as DGL's pm_dglpart does."""
    def body(comm: "Intracomm") -> None:
        from ..assign import compute_assignment
        from ..assign.balance import BalanceOptions
        from ..chunked.validate import validate
        from ..mpi.collective import agreed
        from ..partitions.layout import check_layout
        from ..run.progress import open_progress
        with agreed(comm):
            meta_file = metadata_from_nfiles(Path(args.nfiles))
        meta = validate(comm, meta_file)
        out = Path.cwd() / f"{args.graph_name}_part.{args.num_parts}"
        with agreed(comm):
            if meta.graph_name != args.graph_name:
                raise InputError(meta.path, f"graph_name is {meta.graph_name!r}, but pm_dglpart was asked to "
                                            f"partition {args.graph_name!r}")
            check_layout(args.num_parts, comm.Get_size())
            if any(p.resolve() == out.resolve() for _, p in meta.all_files()):
                raise InputError(out, "is a file of the input graph: pm_dglpart would replace it")
        progress = open_progress(comm.Get_rank() == 0, False, None)
        try:
            # DGL's preprocess gives ParMETIS one constraint per node type; so does this.
            balance = BalanceOptions(ntypes=True)
            assignment = compute_assignment(comm, meta, args.num_parts, "parmetis", balance, 0, None, progress)
            write_part_file(comm, assignment, meta, out)
        finally:
            progress.close()
        if comm.Get_rank() == 0:
            print(f"pm_dglpart: wrote {out} ({sum(meta.node_counts)} nodes, {args.num_parts} partitions)",
                  flush=True)
    return _collective("pm_dglpart", body)


def read_part_file(path: Path, num_nodes: int) -> "np.ndarray":
    """The partition of every node from `<node ID> <partition>` lines (DGL's ParMETIS output,
    in any order), checked: each node ID of [0, num_nodes) exactly once, partitions >= 0."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    try:
        table = pacsv.read_csv(str(path), read_options=pacsv.ReadOptions(autogenerate_column_names=True),
                               parse_options=pacsv.ParseOptions(delimiter=" "))
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(path, f"cannot read ParMETIS's '<node ID> <partition>' lines: {e}") from None
    if table.num_columns < 2 or any(not pa.types.is_integer(c.type) for c in table.columns[:2]):
        raise InputError(path, "expected lines of two integers, '<node ID> <partition>'")
    ids, parts = (table.column(i).to_numpy().astype(np.int64) for i in (0, 1))
    if len(ids) != num_nodes:
        raise InputError(path, f"has {len(ids)} lines, but the graph has {num_nodes} nodes")
    if len(ids) and np.any(ids[1:] < ids[:-1]):
        order = np.argsort(ids, kind="stable")
        ids, parts = ids[order], parts[order]
    if not np.array_equal(ids, np.arange(num_nodes, dtype=np.int64)):
        raise InputError(path, f"does not name each node ID from 0 to {num_nodes - 1} exactly once")
    if len(parts) and parts.min() < 0:
        raise InputError(path, f"has a negative partition ({parts.min()})")
    return parts


def run_parmetis_postprocess(args: argparse.Namespace) -> int:
    """Split `<graph>_part.<P>` into `<ntype>.txt` and write partition_meta.json (algo_name
    "metis"), as DGL's parmetis_postprocess.py. One process: it reads the whole file, like DGL's."""
    def body(comm: "Intracomm") -> None:
        import json

        import numpy as np

        from ..assign.assignment import META_FILE, format_lines
        from ..chunked.validate import validate
        from ..mpi.collective import agreed
        from ..paths import file_in
        from ..run.outdir import refuse_inside_input
        meta = validate(comm, metadata_path(args.postproc_input_dir, args.schema_file))
        with agreed(comm):
            if comm.Get_rank() != 0:
                return
            out = Path(args.partitions_dir)
            refuse_inside_input(out, meta.root)
            source = Path(args.parmetis_output_file)
            parts = read_part_file(source, sum(meta.node_counts))
            suffix = source.name.rsplit(".", 1)[-1]
            num_parts = int(parts.max()) + 1 if len(parts) else 1
            if suffix.isdigit() and int(suffix) >= num_parts:
                num_parts = int(suffix)     # <graph>_part.<P>: an empty last partition still counts
            offsets = np.cumsum([0, *meta.node_counts])
            for t, ntype in enumerate(meta.node_types):
                path = file_in(out, ntype, ".txt")
                try:
                    out.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(format_lines(parts[offsets[t]:offsets[t + 1]]))
                except OSError as e:
                    raise InputError(path, f"cannot write: {e.strerror}") from None
            _write_text(out / META_FILE, json.dumps({"algo_name": "metis", "num_parts": num_parts,
                                                     "version": "1.0.0"}, indent=2) + "\n")
            print(f"parmetis_postprocess.py: wrote {', '.join(f'{t}.txt' for t in meta.node_types)} and "
                  f"{META_FILE} ({num_parts} partitions) in {out}", flush=True)
    return _collective("parmetis_postprocess", body)


HANDLERS: Dict[str, Callable[[argparse.Namespace], int]] = {
    "dispatch_data": run_dispatch_data,
    "data_proc_pipeline": run_data_proc_pipeline,
    "random_partition": run_random_partition,
    "parmetis_preprocess": run_parmetis_preprocess,
    "pm_dglpart": run_pm_dglpart,
    "parmetis_postprocess": run_parmetis_postprocess,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in HANDLERS:
        print(f"usage: python -m distpart.dgltools.backend {{{','.join(HANDLERS)}}} ARGS...", file=sys.stderr)
        return USER_ERROR
    tool, rest = argv[0], argv[1:]
    args = _flags.parse(tool, rest)
    for dest in sorted(_flags.given(tool, rest) & set(_flags.UNUSED.get(tool, {}))):
        note(tool, f"--{dest.replace('_', '-')} is ignored: {_flags.UNUSED[tool][dest]}")
    try:
        return HANDLERS[tool](args)
    except DistpartError as e:
        print(f"{script_name(tool)}: error: {e}", file=sys.stderr, flush=True)
        return USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
