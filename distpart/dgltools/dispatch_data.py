#!/usr/bin/env python3
"""DGL's tools/dispatch_data.py, backed by distpart: Step 2 on the machines of --ip-config
(`distpart launch` of `distpart dispatch`, P/machines ranks on each machine).

Runs under any python3: it checks DGL's flags, then hands over to distpart's interpreter,
preferring --python-path when that one runs distpart (see _python.py), which then starts the
ranks on every machine. Exits with the dispatch's status.
"""
import os
import sys

# The same start in every script, on purpose: each runs by path under any python3, alone.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))  # _flags, _python beside this file
import _flags  # noqa: E402
import _python  # noqa: E402

if __name__ == "__main__":
    args = _flags.parse("dispatch_data", sys.argv[1:])
    named = "python_path" in _flags.given("dispatch_data", sys.argv[1:])
    _python.hand_over("dispatch_data", sys.argv[1:], preferred=[args.python_path] if named else [])
