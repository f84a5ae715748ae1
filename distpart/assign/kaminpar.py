"""Step 1 with KaMinPar (`--method kaminpar`): a shared-memory partitioner run by one process.

KaMinPar (the `kaminpar` package, MIT) usually cuts fewer edges than ParMETIS but holds the
whole graph on one node. The ranks build the same graph ParMETIS gets (`adjacency.build_csr`:
symmetrized, simple, homogeneous IDs) and write it together as one ParHIP file (`parhip`)
into a work folder on the shared file system, `ASSIGN_DIR/.distpart-kaminpar/` (removed
afterwards, also on error; a leftover of a killed run is cleared by the next one, which
holds the folder's lock). Rank 0 then runs KaMinPar in a child process, on every CPU its
node lets it use (`--threads`, default all of them), and the partition is scattered back in
vertex blocks (`partition`, the `step1` interface). KaMinPar runs with its "eco"
preset (see CONTEXT): quality first.

Why a child process: the `kaminpar` binding holds the GIL for the whole partitioning, which
would silence the progress lines; the child can also use the CPUs the launcher did not bind
rank 0 to (Open MPI binds each of `mpiexec -n 2`'s ranks to one core), and its memory is
returned in full when it exits. Meanwhile the other ranks wait in an `Ibarrier` polled with
sleeps, since a blocking MPI wait spins on the cores KaMinPar's threads need.

Balance: KaMinPar balances one weight per vertex. Supported: node counts (the default, also
`--balance-ntypes` on a graph of one node type) or `--balance-edges` alone (in-degree weights,
as DGL's `--balance-edges`: the edges each partition keeps are balanced, node counts are
not). Several constraints (`--balance-ntypes` over several types, any `--balance-feature`,
combinations) are refused with a message; use `--method parmetis` for those. A graph whose
estimated KaMinPar memory exceeds what rank 0's node has available is refused too.

With `--threads 1` the result is a function of (graph, P, imbalance, seed) and so the same
for any number of ranks; with more threads KaMinPar is not deterministic.
"""
from __future__ import annotations

import importlib.util
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import DistpartError, InputError, OutputError
from ..mpi.exchange import DEFAULT_MAX_BYTES
from .step1 import Setup

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm, Request
    from .balance import BalanceOptions
    from .step1 import Step1Graph
    from ..chunked.metadata import GraphMeta
    from ..run.progress import Progress

WORK_FOLDER = ".distpart-kaminpar"
GRAPH_FILE = "graph.parhip"
PARTITION_FILE = "partition.npy"
INSTALL_HINT = "pip install 'distpart[kaminpar]'"

# KaMinPar's preset, here and for the multilevel method's coarsest graph: "eco" cuts fewer edges
# than "default" for more time (chosen by benchmarks/bench_assign.py; the runs: commit b03a837).
CONTEXT = "eco"

# Peak memory of the KaMinPar process, in bytes: per vertex, per weight, per adjacency entry,
# fixed; an upper bound of child_peak_rss_mb in benchmarks/bench_assign.py's runs.
MEMORY_PER_VERTEX = 64
MEMORY_PER_WEIGHT = 16
MEMORY_PER_ENTRY = 40
MEMORY_FIXED = 128 << 20

# Seconds per adjacency entry for one thread, for the progress ETA only (rough); k adds a log factor.
S_PER_ENTRY = 3e-6

_POLL_S = 0.05  # how often waiting ranks look at the Ibarrier: negligible CPU, little delay


class KaMinParError(DistpartError):
    """KaMinPar is missing or failed."""


# ---------------------------------------------------------------- pure checks

def weight_kind(meta: GraphMeta, balance: BalanceOptions) -> Optional[str]:
    """None (balance node counts) or "edges" (in-degree weights); refuse anything needing
    more than one constraint."""
    ntypes = len(meta.node_types)
    if balance.features:
        names = " ".join(f"--balance-feature {f}" for f in balance.features)
        raise InputError(None, f"{names}: --method kaminpar balances one weight per node and a 0/1 "
                               f"feature alone would leave the other nodes unbalanced; use --method "
                               f"parmetis to balance a feature together with node counts")
    asked: List[str] = []
    count = 0
    if balance.ntypes and ntypes > 1:
        asked.append(f"--balance-ntypes ({ntypes} node types, one constraint each)")
        count += ntypes
    elif balance.ntypes:
        asked.append("--balance-ntypes")
        count += 1
    if balance.edges:
        # With several types, edges are balanced per type too (as in `balance.vertex_weights`).
        asked.append("--balance-edges")
        count += ntypes if balance.ntypes and ntypes > 1 else 1
    if count > 1:
        raise InputError(None, f"{' with '.join(asked)} ask{'s' if len(asked) == 1 else ''} for {count} balance "
                               f"constraints but --method kaminpar balances one (node counts, or in-degrees "
                               f"with --balance-edges alone); use --method parmetis for several constraints")
    return "edges" if balance.edges else None


def memory_estimate(n: int, m: int, weighted: bool) -> int:
    """Bytes the KaMinPar process needs for n vertices and m adjacency entries (see above)."""
    per_vertex = MEMORY_PER_VERTEX + (MEMORY_PER_WEIGHT if weighted else 0)
    return per_vertex * n + MEMORY_PER_ENTRY * m + MEMORY_FIXED


def check_memory(need: int, available: int, host: str, n: int, m: int) -> None:
    """Refuse when KaMinPar's estimated memory exceeds what rank 0's node has available."""
    from ..run.guards import gib
    if need > available:
        raise InputError(None, f"--method kaminpar needs about {gib(need)} on one node for this graph "
                               f"({n} vertices, {m} adjacency entries) but rank 0's node {host} has "
                               f"{gib(available)} available; use --method parmetis, which spreads the "
                               f"graph over the ranks")


def estimate_seconds(m: int, num_parts: int, threads: int) -> float:
    """Rough KaMinPar run time for the progress ETA."""
    return 1.0 + S_PER_ENTRY * m / max(1, threads) * (1.0 + math.log2(max(2, num_parts)) / 3)


def available_memory() -> int:
    """This node's MemAvailable (what can be allocated without swapping), in bytes."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "MemAvailable":
                    return int(value.split()[0]) * 1024  # the kernel reports kB
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")  # free pages: a lower bound


def allowed_cpus() -> Set[int]:
    """The CPUs this process may run on (its cpuset), not just the ones it is bound to: the
    kernel intersects a requested affinity with the cpuset, so asking for every CPU and
    reading the mask back gives the node's CPUs this job may use. Restores the binding."""
    bound = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
        return set(os.sched_getaffinity(0))
    except OSError:
        return set(bound)
    finally:
        try:
            os.sched_setaffinity(0, bound)
        except OSError:
            pass


def kaminpar_installed() -> None:
    """Refuse early when the `kaminpar` package is missing (without loading it here)."""
    if importlib.util.find_spec("kaminpar") is None:
        raise InputError(None, f"--method kaminpar needs the kaminpar package: {INSTALL_HINT}")


# ---------------------------------------------------------------- the Step 1 method

ALGO_NAME = "kaminpar"


def refuse_balance(meta: GraphMeta, balance: BalanceOptions) -> None:
    """Refuse balance options that need more than one constraint (`weight_kind`)."""
    weight_kind(meta, balance)


def setup(meta: GraphMeta, balance: BalanceOptions, rank: int, threads: Optional[int] = None,
          work_dir: "str | Path" = ".") -> "Setup":
    """KaMinPar's weights: in-degrees with --balance-edges, else node counts. `work_dir` (the
    assignment folder) must be on a file system every rank sees."""
    if threads is not None and threads < 1:
        raise InputError(None, f"--threads must be at least 1, got {threads}")
    if rank == 0:
        kaminpar_installed()
    return Setup(weights=_in_degree_weights, context=(threads, work_dir))


def _in_degree_weights(meta: GraphMeta, balance: BalanceOptions, offsets: np.ndarray, lo: int, hi: int,
                       in_degree: np.ndarray) -> Tuple[np.ndarray, List[str]]:
    """The one weight column KaMinPar balances besides node counts: in-degrees, if asked."""
    if balance.edges:
        return np.asarray(in_degree, dtype=np.int64).reshape(-1, 1), ["edges"]
    return np.zeros((hi - lo, 0), dtype=np.int64), []


def partition(comm: Intracomm, graph: "Step1Graph", vwgt: np.ndarray, k: int, imbalance: np.ndarray,
              seed: int, setup: "Setup", max_bytes: int = DEFAULT_MAX_BYTES,
              progress: Optional[Progress] = None) -> np.ndarray:
    """KaMinPar's blocks of this rank's vertices, from rank 0's child. Collective."""
    from ..mpi.collective import agreed
    from ..mpi.exchange import allreduce_sum
    from .parhip import write_parhip
    from ..run.progress import Progress

    progress = progress or Progress.off()
    threads, work_dir = setup.context
    rank = comm.Get_rank()
    csr, graph.csr = graph.csr, None
    vtxdist = np.asarray(csr.vtxdist, dtype=np.int64)
    n = int(vtxdist[-1])
    m = int(allreduce_sum(comm, np.array([int(csr.xadj[-1]) - int(csr.xadj[0])]))[0])
    weights = np.ascontiguousarray(vwgt[:, 0]) if graph.names == ["edges"] else None
    del vwgt

    # What the ranks on rank 0's node free before KaMinPar starts counts as available.
    freed = _node_sum(comm, csr.xadj.nbytes + csr.adjncy.nbytes + csr.in_degree.nbytes)
    cpus: Set[int] = set()
    with agreed(comm):
        if rank == 0:
            import socket
            check_memory(memory_estimate(n, m, weights is not None), available_memory() + freed,
                         socket.gethostname(), n, m)
            cpus = allowed_cpus()
    nthreads = threads or len(cpus)

    work = Path(work_dir) / WORK_FOLDER
    try:
        with agreed(comm):
            if rank == 0:
                _fresh_folder(work)
        comm.Barrier()  # the folder exists before any rank opens a file in it
        write_parhip(comm, work / GRAPH_FILE, csr, weights)
        del csr, weights  # rank 0's node needs the memory for KaMinPar
        estimate = estimate_seconds(m, k, nthreads)
        with agreed(comm), progress.opaque("KaMinPar", estimate):
            if rank == 0:
                try:
                    run_kaminpar(work / GRAPH_FILE, work / PARTITION_FILE, k,
                                 float(imbalance[0]) - 1.0, seed, nthreads, sorted(cpus), n)
                finally:
                    comm.Ibarrier().Wait()  # release the waiting ranks, also on failure
            else:
                _wait_idle(comm.Ibarrier())
        return _scatter_partition(comm, work / PARTITION_FILE, vtxdist, max_bytes)
    finally:
        if rank == 0:
            shutil.rmtree(work, ignore_errors=True)


def _node_sum(comm: Intracomm, value: int) -> int:
    """Sum of `value` over the ranks on rank 0's node (valid on rank 0). Collective."""
    from mpi4py import MPI
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        total = np.zeros(1, dtype=np.int64)
        node.Allreduce(np.array([value], dtype=np.int64), total, op=MPI.SUM)
        return int(total[0])
    finally:
        node.Free()


def _fresh_folder(work: Path) -> None:
    try:
        shutil.rmtree(work, ignore_errors=True)  # a killed run's leftover
        work.mkdir(parents=True)
    except OSError as e:
        raise OutputError(work, f"cannot create KaMinPar's work folder: {e.strerror}") from None


def _wait_idle(request: Request) -> None:
    """Wait for `request` without spinning a core (a blocking MPI wait polls busily)."""
    while not request.Test():
        time.sleep(_POLL_S)


def _scatter_partition(comm: Intracomm, path: Path, vtxdist: np.ndarray, max_bytes: int) -> np.ndarray:
    """Each rank's vertex block of the partition rank 0's KaMinPar wrote, in rounds of at most
    `max_bytes` sent by rank 0. Collective."""
    from mpi4py import MPI
    from ..arrays import exclusive_cumsum
    rank, size = comm.Get_rank(), comm.Get_size()
    part = np.load(path, mmap_mode="r") if rank == 0 else None
    local = np.empty(int(vtxdist[rank + 1] - vtxdist[rank]), dtype=np.int64)
    piece = max(1, max_bytes // 8 // size)
    largest = int(np.diff(vtxdist).max())
    for j in range(-(-largest // piece)):
        starts = vtxdist[:-1] + j * piece
        counts = np.clip(vtxdist[1:] - starts, 0, piece)
        sendbuf = None
        if rank == 0:
            send = np.concatenate([part[s:s + c] for s, c in zip(starts, counts)]).astype(np.int64)
            sendbuf = [send, counts.astype(np.int32), exclusive_cumsum(counts).astype(np.int32), MPI.INT64_T]
        at = j * piece
        comm.Scatterv(sendbuf, [local[at:at + int(counts[rank])], MPI.INT64_T], root=0)
    return local


# ---------------------------------------------------------------- rank 0 and its child

def run_kaminpar(graph: Path, out: Path, num_parts: int, eps: float, seed: int, threads: int,
                 cpus: Sequence[int], n: int) -> None:
    """Run KaMinPar in a child process that writes the partition to `out` (.npy); check it."""
    cmd = [sys.executable, "-m", "distpart.assign.kaminpar", str(graph), str(out), str(num_parts), repr(eps),
           str(seed), str(threads), ",".join(map(str, cpus))]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        if "ModuleNotFoundError: No module named 'kaminpar'" in proc.stderr:
            raise KaMinParError(f"--method kaminpar needs the kaminpar package: {INSTALL_HINT}")
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"status {proc.returncode}"
        raise KaMinParError(f"KaMinPar failed ({how}): {' | '.join(tail) or 'no message'}")
    part = np.load(out, mmap_mode="r")
    if part.shape != (n,):
        raise KaMinParError(f"KaMinPar returned {part.shape[0]} partition IDs for {n} vertices")
    if n and (int(part.min()) < 0 or int(part.max()) >= num_parts):
        raise KaMinParError(f"KaMinPar returned a partition ID outside [0, {num_parts})")


def _die_with_parent() -> None:
    """Have the kernel kill this child when rank 0 dies (an aborted job must not leave
    KaMinPar running); Linux only, harmless elsewhere."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def solver(threads: int):
    """A KaMinPar partitioner with CONTEXT on `threads` threads (needs the `kaminpar` package)."""
    import kaminpar
    return kaminpar.KaMinPar(threads, kaminpar.context_by_name(CONTEXT))


def _child(argv: Sequence[str]) -> int:
    from ..run.signals import unblock_stops
    unblock_stops()  # rank 0 blocks them for its threads; a cancel must end KaMinPar too
    graph, out, num_parts, eps, seed, threads, cpus = argv
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # rank 0 died before the request took effect
        return 1
    if cpus:
        try:
            os.sched_setaffinity(0, [int(c) for c in cpus.split(",")])
        except OSError:
            pass  # keep the inherited binding
    import kaminpar
    g = kaminpar.load_graph(graph, kaminpar.GraphFileFormat.PARHIP, compress=False)
    kaminpar.reseed(int(seed))
    part = solver(int(threads)).compute_partition(g, int(num_parts), float(eps))
    del g
    np.save(out, np.asarray(part, dtype=np.int64))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
