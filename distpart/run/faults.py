"""Named pause points for the kill-and-resume tests.

`DISTPART_PAUSE_AT=<point>[@<rank>]` (rank 0 by default; `@*` every rank) stops that rank
with SIGSTOP when it reaches `<point>`, after printing `distpart: paused at <point>` on
stderr. The test then SIGKILLs the whole job, so the kill lands at a known place however
fast the machine is. With `@*` no other rank waits for the stopped one in a collective (a
busy wait on an oversubscribed machine) while the test works beside the paused run.
Points: every stage name (when the stage starts) and `partition-published` (after a rank
moved its first partition into place). Unset, this costs one dictionary lookup per point.
"""
from __future__ import annotations

import os
import signal
import sys

ENV = "DISTPART_PAUSE_AT"


def pause_point(point: str, rank: int) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, at = spec.partition("@")
    if name != point or (at != "*" and rank != int(at or 0)):
        return
    print(f"distpart: paused at {point} (rank {rank}, {ENV})", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
