#!/usr/bin/env python3
"""DGL's tools/partition_algo/random_partition.py, backed by `distpart assign --method random`:
writes <ntype>.txt and partition_meta.json into --out_dir, seeded (the same files every run)
and balanced per node type.

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
    _flags.parse("random_partition", sys.argv[1:])
    _python.hand_over("random_partition", sys.argv[1:])
