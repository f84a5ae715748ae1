"""A drop-in for DGL's `tools` folder, backed by distpart: `distpart tools-path` prints where
it is, so callers that run DGL's scripts by path (GraphStorm's `--dgl-tool-path`, the
commands of DGL's distributed-preprocessing guide) run distpart by changing one path.

The scripts keep DGL's names, places and flags, and run under any `python3` (the one on
`PATH` may lack numpy and mpi4py):

- `dispatch_data.py`: Step 2 across the machines of ip_config.txt (`distpart launch` of
  `distpart dispatch`);
- `partition_algo/random_partition.py`: Step 1, random (`distpart assign --method random`);
- `distpartitioning/data_proc_pipeline.py`: Step 2 on this machine, for callers that start
  DGL's per-machine program directly;
- `distpartitioning/parmetis_preprocess.py`, `pm_dglpart`,
  `distpartitioning/parmetis_postprocess.py`: GraphStorm's `--partition-algorithm parmetis`
  steps, backed by distpart's ParMETIS method.

Each script only parses DGL's flags (`_flags`, standard library only) and re-executes
itself under distpart's own interpreter (`_python` finds it), where `backend` maps the
flags onto distpart's commands. `_flags` and `_python` import nothing from distpart, so
they run under any Python 3.7+; `backend` is ordinary distpart code.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["TOOLS_DIR"]

# What `distpart tools-path` prints: this folder, as installed (a wheel or an editable clone).
TOOLS_DIR = Path(__file__).resolve().parent
