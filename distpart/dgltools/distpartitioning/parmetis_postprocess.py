#!/usr/bin/env python3
"""DGL's tools/distpartitioning/parmetis_postprocess.py: splits <graph>_part.<P> (lines
`<node ID> <partition>`, from distpart's pm_dglpart or DGL's) into <ntype>.txt files and
partition_meta.json in --partitions_dir.

Runs under any python3: it checks DGL's flags, then hands over to distpart's interpreter
(see ../_python.py).
"""
import os
import sys

# The same start in every script, on purpose: each runs by path under any python3, alone.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # the tools folder
import _flags  # noqa: E402
import _python  # noqa: E402

if __name__ == "__main__":
    _flags.parse("parmetis_postprocess", sys.argv[1:])
    _python.hand_over("parmetis_postprocess", sys.argv[1:])
