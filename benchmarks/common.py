"""What every benchmark script shares: the environment mpiexec needs on a CI-like machine
(root, oversubscribed) and the mpiexec command line, both the test harness's
(mpi_tests/harness.py), running distpart under mpiexec, and printing a result table."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence

sys.path.append(str(Path(__file__).resolve().parents[1] / "mpi_tests"))   # the tests' harness
# mpi_env: Open MPI's permission to run as root and to oversubscribe (CI: root, 2 cores, 4 ranks);
# mpiexec: `mpiexec -n R python (-m distpart.cli | script) argv...`.
from harness import launch_env as mpi_env, mpi_command as mpiexec  # noqa: E402,F401


def run_distpart(ranks: int, argv: Sequence[object], stats: Path) -> dict:
    """Run a distpart subcommand quietly with --stats-json; return the stats."""
    subprocess.run(mpiexec(ranks, [*argv, "--quiet", "--stats-json", stats]), check=True, env=mpi_env(),
                   stdout=subprocess.DEVNULL)
    return json.loads(stats.read_text())


def stage(stats: dict, name: str) -> dict:
    return next(r for r in stats["stages"] if r["stage"] == name)


def print_table(rows: List[dict]) -> None:
    head = list(dict.fromkeys(k for r in rows for k in r))  # every column, in first-seen order
    widths = [max(len(h), *(len(str(r.get(h, ""))) for r in rows)) for h in head]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(str(r.get(h, "")).rjust(w) for h, w in zip(head, widths)))


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")
    print(f"written {path}")


# In an ssh stand-in's script (DGL's launcher runs `ssh [options] HOST 'CMD'`): after it,
# args[i] is the host and args[i + 1:] the remote command.
SSH_ARGS = '''args = sys.argv[1:]
WITH_VALUE = set("BbcDEeFIiJLlmOoPpQRSWw")      # ssh options that take a value
i = 0
while i < len(args) and args[i].startswith("-") and len(args[i]) > 1:
    i += 2 if len(args[i]) == 2 and args[i][1] in WITH_VALUE else 1'''


def watch_launcher(proc: subprocess.Popen, t0: float, check: Callable[[float], Optional[str]],
                   timeout: float, poll_s: float) -> str:
    """Wait for a launcher (DGL's, GraphStorm's): "exited", the verdict `check(seconds since
    t0)` returns first (it also records what it sees, e.g. "hung" once the ranks are done but
    the launcher is not), or "timeout". The launcher's process group is killed if still there."""
    outcome: Optional[str] = None
    while outcome is None:
        now = time.monotonic() - t0
        said = check(now)
        if proc.poll() is not None:
            outcome = "exited"
        elif said:
            outcome = said
        elif now > timeout:
            outcome = "timeout"
        else:
            time.sleep(poll_s)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return outcome
