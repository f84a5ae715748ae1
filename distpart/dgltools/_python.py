"""Finding distpart's own interpreter from a script started by any `python3`, and handing
the run over to it.

GraphStorm starts `python3 TOOLS/dispatch_data.py` with the first `python3` on `PATH`,
which may lack numpy and mpi4py, and DGL's guide does the same. The scripts live inside the
installed package, so the package folder is known (`__file__`); what is not known is which
interpreter imports *this* copy of distpart with its dependencies. Candidates, in order:

1. `$DISTPART_PYTHON`, if set: the only candidate then (an error if it does not work);
2. the interpreters the caller named: `--python-path` of dispatch_data.py (DGL's "Python
   on all workers"; GraphStorm passes its own), then the one running the script;
3. the environment the package is installed in: `<prefix>/bin/python3` for
   `<prefix>/lib/pythonX.Y/site-packages/distpart`;
4. a source checkout's virtualenv: `<clone>/.venv/bin/python3` (scripts/setup.sh makes it);
5. the interpreter of the `distpart` command on `PATH` (its `#!` line), then `$VIRTUAL_ENV`.

Each is checked by running it: it must import numpy, mpi4py and pyarrow, and `distpart`
from this very folder (not another install). The first that does runs the tool:
`os.execv` replaces the script's process, so the exit status is the tool's own, nothing is
left waiting on a child, and a process started by `mpirun` stays the same MPI process.

Standard library only, Python 3.7+.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple

PACKAGE_DIR = Path(__file__).resolve().parent.parent       # .../distpart
PROBE = "import distpart, numpy, mpi4py, pyarrow; print(distpart.__file__)"
PROBE_TIMEOUT_S = 120       # a cold import from a network file system can be slow
BACKEND = "distpart.dgltools.backend"
USER_ERROR = 2      # distpart.errors.EXIT_USER_ERROR, which this file (any python3) cannot import


def _interpreters_in(prefix: Path) -> List[str]:
    return [str(prefix / "bin" / name) for name in ("python3", "python")]


def shebang_python(script: Optional[str]) -> Optional[str]:
    """The interpreter of a console script's `#!` line (pip writes an absolute path), or None."""
    if not script:
        return None
    try:
        with open(script, "rb") as f:
            first = f.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words or os.path.basename(words[0]) == "env":
        return None        # `#!/usr/bin/env python3` names no particular interpreter
    return words[0]


def candidates(preferred: Sequence[str], env: Mapping[str, str], package_dir: Path = PACKAGE_DIR,
               running: str = sys.executable) -> List[str]:
    """Interpreters to try, in order, each once (paths are compared as written: a virtualenv's
    `python3` is a symlink to the base interpreter, which lacks the environment's packages)."""
    forced = env.get("DISTPART_PYTHON")
    if forced:
        return [forced]
    found: List[str] = [*preferred, running]
    for parent in package_dir.parents:
        if parent.name in ("site-packages", "dist-packages") and len(parent.parents) >= 3:
            found += _interpreters_in(parent.parents[2])      # <prefix>/lib/pythonX.Y/site-packages
            break
    for venv in (".venv", "venv"):
        found += _interpreters_in(package_dir.parent / venv)
    on_path = shutil.which("distpart", path=env.get("PATH"))
    found.append(shebang_python(on_path) or "")
    if env.get("VIRTUAL_ENV"):
        found += _interpreters_in(Path(env["VIRTUAL_ENV"]))
    out: List[str] = []
    for python in found:
        python = python.strip()        # GraphStorm's fallback --python-path is "python3 "
        if python and os.sep not in python:
            python = shutil.which(python, path=env.get("PATH")) or ""   # a bare name, as a shell finds it
        if python and os.path.abspath(python) not in out:
            out.append(os.path.abspath(python))
    return out


def probe(python: str, env: Mapping[str, str], package_dir: Path = PACKAGE_DIR) -> Optional[str]:
    """None if `python` runs this distpart with its dependencies, else why not (one line)."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return "no such executable"
    try:
        done = subprocess.run([python, "-c", PROBE], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, env=dict(env),
                              timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"did not start within {PROBE_TIMEOUT_S} s"
    except OSError as e:
        return f"cannot run it: {e.strerror}"
    if done.returncode != 0:
        lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit status {done.returncode}"
    where = Path(done.stdout.strip().splitlines()[-1]).resolve().parent if done.stdout.strip() else None
    if where != package_dir:
        return f"imports another distpart ({where})"
    return None


def find_python(preferred: Sequence[str], env: Mapping[str, str],
                package_dir: Path = PACKAGE_DIR) -> Tuple[Optional[str], List[Tuple[str, str]]]:
    """(the first interpreter that works, or None; [(interpreter, why not)] for those before it)."""
    refused: List[Tuple[str, str]] = []
    for python in candidates(preferred, env, package_dir):
        why = probe(python, env, package_dir)
        if why is None:
            return python, refused
        refused.append((python, why))
    return None, refused


def not_found_message(refused: Iterable[Tuple[str, str]], package_dir: Path = PACKAGE_DIR) -> str:
    tried = "; ".join(f"{python}: {why}" for python, why in refused)
    return (f"no Python found that runs distpart from {package_dir} with numpy, mpi4py and pyarrow "
            f"(tried {tried}); set DISTPART_PYTHON to the interpreter of distpart's environment")


def hand_over(tool: str, argv: Sequence[str], preferred: Sequence[str] = ()) -> None:
    """Replace this process by distpart's interpreter running `tool` with `argv`; exits with
    status 2 and a message naming every interpreter tried when none works."""
    python, refused = find_python(preferred, os.environ)
    name = tool if tool == "pm_dglpart" else f"{tool}.py"
    if python is None:
        print(f"{name}: error: {not_found_message(refused)}", file=sys.stderr, flush=True)
        sys.exit(USER_ERROR)
    for other, why in refused:
        if other in preferred:
            print(f"{name}: note: {other} cannot run distpart ({why}); using {python}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(python, [python, "-m", BACKEND, tool, *argv])
