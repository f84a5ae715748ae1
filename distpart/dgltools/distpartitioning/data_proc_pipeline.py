#!/usr/bin/env python3
"""DGL's tools/distpartitioning/data_proc_pipeline.py, backed by `distpart dispatch`, for
callers that start it directly: the whole dispatch from one copy, with --world-size ranks on
this machine (DGL's starts one copy per machine, each a member of a gloo group; for several
machines use dispatch_data.py).

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
    _flags.parse("data_proc_pipeline", sys.argv[1:])
    _python.hand_over("data_proc_pipeline", sys.argv[1:])
