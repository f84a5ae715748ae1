"""What each DGL tool does once distpart's interpreter runs it: DGL's flags become distpart
commands. The scripts beside this file start it as `python -m distpart.dgltools.backend
TOOL ARGS...` (see `_python`); it parses the same flags again with `_flags`.

- dispatch_data: `distpart launch --ip-config IPS --ranks-per-host P/machines -- dispatch
  IN ASSIGN OUT --overwrite ...`, with `--ssh-port` as Open MPI's ssh option;
- data_proc_pipeline: `distpart dispatch` with `--world-size` ranks on this machine;
- random_partition: `distpart assign --method random --seed 0`;
- parmetis_preprocess, pm_dglpart, parmetis_postprocess: GraphStorm's three ParMETIS steps
  (`parmetis_steps`), each run on the ranks GraphStorm's `mpirun` started by `_collective`.

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
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence

from . import _flags, parmetis_steps
from ..assign.assignment import read_partition_meta
from ..chunked.metadata import read_json
from ..cli import main as distpart_main
from ..errors import EXIT_USER_ERROR, InputError
from ..launch import read_ip_config
from ..run.exits import Job, alone, on_every_rank

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

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

def run_dispatch_data(args: argparse.Namespace) -> int:
    pmeta = read_partition_meta(Path(args.partitions_dir))
    if pmeta is None:
        where = Path(args.partitions_dir) / "partition_meta.json"
        raise InputError(where, "does not exist: dispatch_data.py takes the number of partitions from it, as "
                                "DGL's does (random_partition.py and distpart assign write it)")
    command = dispatch_data_command(args, pmeta["num_parts"], read_ip_config(args.ip_config), os.environ)
    os.environ.update(ssh_port_env(args.ssh_port, os.environ))
    print(f"dispatch_data.py: distpart {shlex.join(command)}", file=sys.stderr, flush=True)
    return distpart_main(command)


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
        return distpart_main(job)           # one rank, no launcher needed
    fd, name = tempfile.mkstemp(prefix="distpart-dgl-hosts-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"localhost slots={args.world_size}\n")
        return distpart_main(["launch", "--hostfile", name, *shlex.split(os.environ.get("DISTPART_LAUNCH_ARGS", "")),
                          "--", *job])
    finally:
        os.unlink(name)


def _note_graph_name(args: argparse.Namespace) -> None:
    meta = read_json(Path(args.input_dir, args.schema))
    name = meta.get("graph_name") if isinstance(meta, dict) else None
    if isinstance(name, str) and name != args.graph_name:
        note("data_proc_pipeline", f"--graph-name {args.graph_name!r} differs from the metadata's graph_name "
                                   f"{name!r}; the partition config keeps {name!r}")


def run_random_partition(args: argparse.Namespace) -> int:
    return distpart_main(random_partition_job(args))


# ---------------------------------------------------------------- GraphStorm's ParMETIS steps

def _collective(tool: str, body: Callable[["Intracomm"], None]) -> int:
    """Run `body` on every rank of the job that started this process (GraphStorm's `mpirun`,
    or this process alone), as `distpart` runs a command (`run.exits`)."""
    job = Job.world(script_name(tool))
    return on_every_rank(job, lambda: body(job.comm))


def run_parmetis_preprocess(args: argparse.Namespace) -> int:
    meta_file = metadata_path(args.input_dir, args.schema_file)
    return _collective("parmetis_preprocess", lambda comm: parmetis_steps.preprocess(comm, args, meta_file))


def run_pm_dglpart(args: argparse.Namespace) -> int:
    return _collective("pm_dglpart", lambda comm: parmetis_steps.pm_dglpart(comm, args))


def run_parmetis_postprocess(args: argparse.Namespace) -> int:
    meta_file = metadata_path(args.postproc_input_dir, args.schema_file)
    return _collective("parmetis_postprocess", lambda comm: parmetis_steps.postprocess(comm, args, meta_file))


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
        return EXIT_USER_ERROR
    tool, rest = argv[0], argv[1:]
    args = _flags.parse(tool, rest)
    for dest in sorted(_flags.given(tool, rest) & set(_flags.UNUSED.get(tool, {}))):
        note(tool, f"--{dest.replace('_', '-')} is ignored: {_flags.UNUSED[tool][dest]}")
    return alone(script_name(tool), lambda: HANDLERS[tool](args))


if __name__ == "__main__":
    sys.exit(main())
