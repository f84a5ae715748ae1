"""DGL's command lines, flag for flag: one argparse parser per script of DGL's `tools` folder
(DGL 2.1.0, plus what master added: `--use-graphbolt`, `--store-eids`, `--store-inner-node`,
`--store-inner-edge`), so every command a caller wrote for DGL's scripts parses here too.

Standard library only: the scripts parse their flags under whatever `python3` started them,
before distpart's interpreter is found. Unknown flags are refused with argparse's usage
error and exit status 2 (DGL's `dispatch_data.py` alone ignores them, `parse_known_args`:
a misspelt flag there silently changes nothing, here it stops the run). Flags DGL does not
mark required but cannot run without are checked after parsing, with the same exit status.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Dict, List, Sequence, Set

LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

# Flags of DGL's gloo process group, which distpart (MPI) has no use for: accepted, then said
# to be unused (tool -> {dest: why}).
UNUSED: Dict[str, Dict[str, str]] = {
    "dispatch_data": {
        "master_port": "the port of DGL's gloo rendezvous; distpart's ranks meet through MPI",
        "process_group_timeout": "a timeout of DGL's gloo process group; distpart's ranks use MPI",
    },
    "data_proc_pipeline": {
        "process_group_timeout": "a timeout of DGL's gloo process group; distpart's ranks use MPI",
    },
}


def dispatch_data() -> argparse.ArgumentParser:
    """tools/dispatch_data.py."""
    p = argparse.ArgumentParser(prog="dispatch_data.py", description="Dispatch edge index and data to partitions",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--in-dir", type=str,
                   help="Location of the input directory where the dataset is located")
    p.add_argument("--metadata-filename", type=str, default="metadata.json",
                   help="Filename for the metadata JSON file that describes the dataset to be dispatched.")
    p.add_argument("--partitions-dir", type=str,
                   help="Location of the partition-id mapping files which define node-ids and their "
                        "respective partition-ids, relative to the input directory")
    p.add_argument("--out-dir", type=str,
                   help="Location of the output directory where the graph partitions will be created")
    p.add_argument("--ip-config", type=str, help="File location of IP configuration for server processes")
    p.add_argument("--master-port", type=int, default=12345,
                   help="port used by gloo group to create randezvous point (unused by distpart)")
    p.add_argument("--log-level", required=False, type=str, default="INFO", choices=LOG_LEVELS,
                   help="Log level to use for execution.")
    p.add_argument("--python-path", type=str, default=sys.executable,
                   help="Path to the Python executable on all workers")
    p.add_argument("--ssh-port", type=int, default=22, help="SSH Port.")
    p.add_argument("--process-group-timeout", type=int, default=1800,
                   help="timeout[seconds] for operations executed against the process group (unused by distpart)")
    _output_flags(p)
    p.add_argument("--graph-formats", type=str, default=None,
                   help="Save partitions in specified formats: any combination (joined with ',') of "
                        "coo, csc and csr.")
    return p


def data_proc_pipeline() -> argparse.ArgumentParser:
    """tools/distpartitioning/data_proc_pipeline.py."""
    p = argparse.ArgumentParser(prog="data_proc_pipeline.py", description="Construct graph partitions")
    p.add_argument("--input-dir", required=True, type=str,
                   help="The directory path that contains the partition results.")
    p.add_argument("--graph-name", required=True, type=str, help="The graph name")
    p.add_argument("--schema", required=True, type=str, help="The schema of the graph")
    p.add_argument("--num-parts", required=True, type=int, help="The number of partitions")
    p.add_argument("--output", required=True, type=str,
                   help="The output directory of the partitioned results")
    p.add_argument("--partitions-dir", default=None, type=str,
                   help="directory of the partition-ids for each node type")
    p.add_argument("--log-level", type=str, default="info",
                   help="To enable log level for debugging purposes. Available options: (Critical, Error, "
                        "Warning, Info, Debug, Notset), default value is: Info")
    p.add_argument("--world-size", default=1, type=int, required=True, help="no. of processes to spawn")
    p.add_argument("--process-group-timeout", required=True, type=int,
                   help="timeout[seconds] for operations executed against the process group (unused by distpart)")
    _output_flags(p)
    p.add_argument("--graph-formats", default=None, type=str, help="Save partitions in specified formats.")
    return p


def _output_flags(p: argparse.ArgumentParser) -> None:
    """The flags dispatch_data.py passes on to data_proc_pipeline.py unchanged."""
    p.add_argument("--save-orig-nids", action="store_true", help="Save original node IDs into files")
    p.add_argument("--save-orig-eids", action="store_true", help="Save original edge IDs into files")
    p.add_argument("--use-graphbolt", action="store_true", help="Use GraphBolt for distributed partition.")
    p.add_argument("--store-inner-node", action="store_true", default=False, help="Store inner nodes.")
    p.add_argument("--store-inner-edge", action="store_true", default=False, help="Store inner edges.")
    p.add_argument("--store-eids", action="store_true", default=False, help="Store edge IDs.")


def random_partition() -> argparse.ArgumentParser:
    """tools/partition_algo/random_partition.py."""
    p = argparse.ArgumentParser(prog="random_partition.py")
    p.add_argument("--in_dir", type=str, help="input directory that contains the metadata file")
    p.add_argument("--out_dir", type=str, help="output directory")
    p.add_argument("--num_partitions", type=int, help="number of partitions")
    return p


def parmetis_preprocess() -> argparse.ArgumentParser:
    """tools/distpartitioning/parmetis_preprocess.py."""
    p = argparse.ArgumentParser(prog="parmetis_preprocess.py", description="Generate ParMETIS files for input dataset")
    p.add_argument("--schema_file", required=True, type=str, help="The schema of the input graph")
    p.add_argument("--input_dir", required=True, type=str,
                   help="This directory will be used as the relative directory to locate files, if absolute "
                        "paths are not used")
    p.add_argument("--output_dir", required=True, type=str,
                   help="The output directory for the node weights files and auxiliary files for ParMETIS.")
    p.add_argument("--num_parts", required=True, type=int, help="Total no. of output graph partitions.")
    p.add_argument("--log_level", required=False, type=str, default="INFO", choices=LOG_LEVELS,
                   help="Log level to use for execution.")
    return p


def parmetis_postprocess() -> argparse.ArgumentParser:
    """tools/distpartitioning/parmetis_postprocess.py."""
    p = argparse.ArgumentParser(prog="parmetis_postprocess.py",
                                description="PostProcessing the ParMETIS output for partitioning pipeline")
    p.add_argument("--postproc_input_dir", required=True, type=str, help="Base directory for post processing step.")
    p.add_argument("--schema_file", required=True, type=str, help="The schema of the input graph")
    p.add_argument("--parmetis_output_file", required=True, type=str, help="ParMETIS output file")
    p.add_argument("--partitions_dir", required=True, type=str,
                   help="The output will be files (with ParMETIS partition ids) and each file corresponds to a "
                        "node-type in the input graph dataset.")
    return p


def pm_dglpart() -> argparse.ArgumentParser:
    """DGL's ParMETIS program `pm_dglpart GRAPH_NAME NUM_PARTS [NFILES EFILES]` (a C program
    in DGL's ParMETIS fork; GraphStorm runs it from ~/local/bin with all four arguments)."""
    p = argparse.ArgumentParser(prog="pm_dglpart", description="Partition the graph that parmetis_preprocess.py "
                                "described, with distpart's ParMETIS method; writes <graph_name>_part.<num_parts> "
                                "in the current folder")
    p.add_argument("graph_name", help="the graph's name (graph_name in its metadata)")
    p.add_argument("num_parts", type=int, help="number of partitions")
    p.add_argument("nfiles", nargs="?", default="parmetis_nfiles.txt",
                   help="parmetis_nfiles.txt written by parmetis_preprocess.py")
    p.add_argument("efiles", nargs="?", default="parmetis_efiles.txt",
                   help="parmetis_efiles.txt written by parmetis_preprocess.py (not read)")
    return p


PARSERS: Dict[str, Callable[[], argparse.ArgumentParser]] = {
    "dispatch_data": dispatch_data,
    "data_proc_pipeline": data_proc_pipeline,
    "random_partition": random_partition,
    "parmetis_preprocess": parmetis_preprocess,
    "parmetis_postprocess": parmetis_postprocess,
    "pm_dglpart": pm_dglpart,
}

# Flags DGL leaves optional but cannot run without (its script fails later, with an
# assertion or a TypeError): refused at once here, as argparse refuses a missing flag.
NEEDED: Dict[str, List[str]] = {
    "dispatch_data": ["--in-dir", "--partitions-dir", "--out-dir", "--ip-config"],
    "random_partition": ["--in_dir", "--out_dir", "--num_partitions"],
    "data_proc_pipeline": ["--partitions-dir"],
}


def parse(tool: str, argv: Sequence[str]) -> argparse.Namespace:
    """DGL's flags of `tool`; exits with status 2 and argparse's usage message on any error."""
    parser = PARSERS[tool]()
    args = parser.parse_args(list(argv))
    missing = [flag for flag in NEEDED.get(tool, []) if getattr(args, flag.lstrip("-").replace("-", "_")) is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    return args


def given(tool: str, argv: Sequence[str]) -> Set[str]:
    """The dests of the flags that `argv` sets itself (abbreviations included), as opposed to
    those left at DGL's defaults."""
    parser = PARSERS[tool]()
    for action in parser._actions:     # no default: only what argv sets reaches the namespace
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(list(argv))))
