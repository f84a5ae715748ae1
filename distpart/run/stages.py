"""Per-stage wall time and peak memory of every rank, and the table rank 0 prints of them.

A stage is entered by every rank together (`StageLog.stage` is collective: a barrier at each
end, so the wall time is the slowest rank's). Each stage is also where a progress line starts
and where the fault-injection tests pause a run (`faults.pause_point`).
"""
from __future__ import annotations

import json
import resource
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

from ..paths import write_file
from .faults import pause_point
from .progress import Progress

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


def peak_rss_bytes(children: bool = False) -> int:
    """Peak resident set size of this process so far (Linux reports KiB); with `children`,
    that of its largest finished child instead (KaMinPar runs in one, for example)."""
    kib = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss
    return int(kib) * (1 if sys.platform == "darwin" else 1024)


@dataclass
class StageLog:
    """Wall time and peak RSS of each stage on this rank; rank 0 prints the gathered table."""

    stages: List[Tuple[str, float, int, int]] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress.off)

    @contextmanager
    def stage(self, comm: Intracomm, name: str) -> Iterator[None]:
        comm.Barrier()
        t0 = time.perf_counter()
        self.progress.begin_stage(name)
        pause_point(name, comm.Get_rank())
        try:
            yield
        finally:
            self.progress.end_stage()
        comm.Barrier()
        self.stages.append((name, time.perf_counter() - t0, peak_rss_bytes(), peak_rss_bytes(children=True)))

    def gather(self, comm: Intracomm) -> Optional[dict]:
        """{"ranks": R, "stages": [{"stage", "wall_s", "peak_rss_mb": [per rank],
        "child_peak_rss_mb": [per rank]}]} on rank 0 (peaks so far, as each stage ended)."""
        everyone = comm.gather(self.stages, root=0)
        if comm.Get_rank() != 0:
            return None
        rows = []
        for i, (name, *_) in enumerate(self.stages):
            rows.append({"stage": name, "wall_s": round(max(r[i][1] for r in everyone), 3),
                         "peak_rss_mb": [round(r[i][2] / 2**20, 1) for r in everyone],
                         "child_peak_rss_mb": [round(r[i][3] / 2**20, 1) for r in everyone]})
        return {"ranks": comm.Get_size(), "stages": rows}


def format_stage_table(stats: dict) -> str:
    """The stage table as aligned text: stage, wall seconds, peak RSS (MiB) per rank."""
    lines = [f"{'stage':<12} {'wall_s':>9}  peak_rss_mb per rank"]
    for row in stats["stages"]:
        rss = " ".join(f"{v:>8.1f}" for v in row["peak_rss_mb"])
        lines.append(f"{row['stage']:<12} {row['wall_s']:>9.3f}  {rss}")
    return "\n".join(lines)


def write_json(path: str, obj: dict) -> None:
    write_file(path, json.dumps(obj, indent=2) + "\n", "stage statistics")
