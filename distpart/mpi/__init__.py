"""Every MPI collective the other parts call, spelled in one place.

`exchange` moves rows between ranks (bounded-size `Alltoallv` rounds, the distributed owner
lookup, the int64 reductions and prefix sums); `collective` keeps ranks in step when one of
them fails (`agreed`); `files` writes one file from every rank at once (MPI-IO); `world`
checks the world a run got against what its launcher meant to start; `failure` is a rank's
last words when a bug stops it (the reason reaches the user from any host, then the job
aborts). Nothing here knows
about graphs: it sits just above `errors` and `arrays`.
"""
__all__ = ["exchange", "collective", "files", "world", "failure"]
