"""What every benchmark script shares: the environment mpiexec needs on a CI-like machine
(root, oversubscribed), running distpart under mpiexec, and printing a result table."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence


def mpi_env() -> Dict[str, str]:
    """Open MPI's permission to run as root and to oversubscribe (CI runs as root on 2 cores)."""
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def mpiexec(ranks: int, argv: Sequence[object], script: "Path | None" = None) -> List[str]:
    """`mpiexec -n R python (-m distpart.cli | script) argv...`."""
    target = [str(script)] if script else ["-m", "distpart.cli"]
    return [shutil.which("mpiexec") or "mpiexec", "-n", str(ranks), sys.executable, *target, *map(str, argv)]


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
