#!/usr/bin/env python3
"""DGL's tools/distpartitioning/parmetis_preprocess.py as GraphStorm runs it (`mpirun -np P
... parmetis_preprocess.py --input_dir IN --schema_file F --output_dir IN --num_parts P`):
checks the input on every rank and writes <graph>_stats.txt, parmetis_nfiles.txt and
parmetis_efiles.txt for distpart's pm_dglpart (not DGL's ParMETIS input files).

Runs under any python3: it checks DGL's flags, then each rank replaces itself by distpart's
interpreter (see ../_python.py), staying the same MPI process.
"""
import os
import sys

# The same start in every script, on purpose: each runs by path under any python3, alone.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # the tools folder
import _flags  # noqa: E402
import _python  # noqa: E402

if __name__ == "__main__":
    _flags.parse("parmetis_preprocess", sys.argv[1:])
    _python.hand_over("parmetis_preprocess", sys.argv[1:])
