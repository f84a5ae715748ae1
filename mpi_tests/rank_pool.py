"""Standing MPI jobs that run distpart's commands one after another, so that a test's
`mpiexec -n R distpart ...` does not pay for an mpiexec, R Pythons, their imports and MPI_Init
every time (most of an MPI test's CPU on the small graphs the tests use).

A pool is one `mpiexec -n R python rank_pool.py SOCKET` per pytest process and rank count,
started on first use. Each rank connects to the test process's Unix socket and waits there
(blocked in a read: no CPU while idle). For each command every rank gets the same line: it
points file descriptors 1 and 2 at files of its own, changes to the caller's folder, calls
`distpart.cli.main(argv)` as `python -m distpart.cli` would, and answers with its exit
status. The caller gets what mpiexec would give: every rank's output, rank by rank, and the
first non-zero status.

What a fresh process would give and a standing one would not is reset before each command:
the warnings shown once, `warnings.formatwarning` (cli tags it on ranks > 0), `sys.argv`,
the folder, the process's peak RSS (`/proc/self/clear_refs`), which `--stats-json` reports.
A command that aborts the job (a bug: `mpi.failure`) ends the pool as it ends a launch: the
caller gets mpiexec's status and output, and the next command starts a new pool.

Not pooled (harness.mpirun decides): other scripts than distpart, an environment other
than the pool's, rank counts outside POOL_RANKS, and runs that are signalled or paused.
DISTPART_TEST_POOL=0 turns pools off: every run is its own mpiexec.
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import resource
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

POOL_RANKS = (1, 2, 4)
START_TIMEOUT = 120.0
ABORT_GRACE_S = 30.0   # for mpiexec's own end after a rank called MPI_Abort
HERE = Path(__file__).resolve().parent


def enabled() -> bool:
    return os.environ.get("DISTPART_TEST_POOL", "1").strip() not in ("0", "no", "false", "")


# ---------------------------------------------------------------- the ranks' side

def serve(path: str) -> None:
    """One rank of a pool: run each command the socket brings, until it closes."""
    from mpi4py import MPI

    import distpart.cli as cli
    importlib.import_module("distpart.commands")   # what every command imports, once

    rank = MPI.COMM_WORLD.Get_rank()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    stream = conn.makefile("rw", encoding="utf-8")
    stream.write(json.dumps({"rank": rank, "pid": os.getpid()}) + "\n")
    stream.flush()
    filters, formatwarning, home = list(warnings.filters), warnings.formatwarning, os.getcwd()
    for line in stream:
        job = json.loads(line)
        before = _usage()
        status = _run_one(cli, job, rank, filters, formatwarning)
        os.chdir(home)
        stream.write(json.dumps({"status": status, "usage": [b - a for a, b in zip(before, _usage())]}) + "\n")
        stream.flush()


def _run_one(cli, job: dict, rank: int, filters: list, formatwarning) -> int:
    warnings.filters[:] = filters
    warnings._filters_mutated()   # every "shown once" warning is shown again, as in a new process
    warnings.formatwarning = formatwarning
    script = job.get("script")
    argv, path = sys.argv, list(sys.path)
    sys.argv = [script or cli.__file__, *job["argv"]]
    if script:
        sys.path.insert(0, os.path.dirname(script))   # as `python SCRIPT` has it
    _reset_peak_rss()
    saved = []
    for fd, name in ((1, "out"), (2, "err")):
        (sys.stdout if fd == 1 else sys.stderr).flush()
        saved.append(os.dup(fd))
        target = os.open(f"{job['prefix']}.{rank}.{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    try:
        os.chdir(job["cwd"])
        if script:
            runpy.run_path(script, run_name="__main__")
            status = 0
        else:
            status = cli.main(job["argv"])
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException:
        # What Python does with an exception nobody caught, and mpiexec then with the job.
        traceback.print_exc()
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)
        raise
    finally:
        sys.argv, sys.path[:] = argv, path
        for fd, old in zip((1, 2), saved):
            (sys.stdout if fd == 1 else sys.stderr).flush()
            os.dup2(old, fd)
            os.close(old)
    return int(status)


def _usage() -> Tuple[float, float, int, int]:
    """This rank's (user CPU-s, system CPU-s, involuntary context switches, minor faults)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime, u.ru_stime, u.ru_nivcsw, u.ru_minflt


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


# ---------------------------------------------------------------- the test process's side

class PoolGone(Exception):
    """The pool could not start (the caller runs the command with its own mpiexec)."""


class RankPool:
    """One standing `mpiexec -n nranks` job for this process."""

    def __init__(self, nranks: int, env: Dict[str, str], command: List[str]) -> None:
        self.nranks, self.env, self.count = nranks, env, 0
        self.dir = Path(tempfile.mkdtemp(prefix=f"rank-pool{nranks}-"))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.dir / "s"))
        listener.listen(nranks)
        self.launcher_out = open(self.dir / "mpiexec.out", "w+b")
        self.launcher_err = open(self.dir / "mpiexec.err", "w+b")
        self.proc = subprocess.Popen([*command, str(self.dir / "s")], stdout=self.launcher_out,
                                     stderr=self.launcher_err, stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True)
        self.conns: Dict[int, socket.socket] = {}
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while len(self.conns) < nranks:
                ready, _, _ = select.select([listener], [], [], 0.5)
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise PoolGone(self._launcher_output(0, 0)[1])
                if ready:
                    conn, _ = listener.accept()
                    hello = json.loads(_read_line(conn, deadline))
                    self.conns[int(hello["rank"])] = conn
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _launcher_output(self, out_at: int, err_at: int) -> Tuple[str, str]:
        texts = []
        for f, at in ((self.launcher_out, out_at), (self.launcher_err, err_at)):
            f.flush()
            f.seek(at)
            texts.append(f.read().decode("utf-8", "replace"))
            f.seek(0, os.SEEK_END)
        return texts[0], texts[1]

    def run(self, argv: Sequence[str], cwd: str, timeout: float, script: Optional[str] = None
            ) -> Tuple[int, str, str, bool]:
        """(status, stdout, stderr, timed_out) of one distpart command (or `python SCRIPT
        argv`) on every rank."""
        self.count += 1
        prefix = str(self.dir / f"c{self.count}")
        out_at, err_at = self.launcher_out.seek(0, os.SEEK_END), self.launcher_err.seek(0, os.SEEK_END)
        line = (json.dumps({"argv": list(argv), "cwd": cwd, "prefix": prefix, "script": script}) + "\n").encode()
        for conn in self.conns.values():
            conn.sendall(line)
        statuses: Dict[int, int] = {}
        usage = [0.0, 0.0, 0, 0]
        started = time.monotonic()
        waiting = {conn.fileno(): rank for rank, conn in self.conns.items()}
        deadline = time.monotonic() + timeout
        timed_out = False
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select(list(waiting), [], [], min(left, 0.5))
            for fd in ready:
                rank = waiting.pop(fd)
                text = _read_line(self.conns[rank], deadline)
                if text:
                    answer = json.loads(text)
                    statuses[rank] = int(answer["status"])
                    usage = [a + b for a, b in zip(usage, answer["usage"])]
            if not ready and not self.alive:
                break
        _log(self.nranks, argv, time.monotonic() - started, usage)
        if len(statuses) == self.nranks:
            outs, errs = self._outputs(prefix)
            return next((s for s in statuses.values() if s != 0), 0), "".join(outs), "".join(errs), False
        # An abort ends the job (mpiexec says so and exits), or the caller fails the test on
        # the timeout: either way the pool is gone.
        try:
            self.proc.wait(timeout=0.1 if timed_out else ABORT_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        outs, errs = self._outputs(prefix)
        launcher = self._launcher_output(out_at, err_at)
        self.close()
        return self.proc.returncode, "".join(outs) + launcher[0], "".join(errs) + launcher[1], timed_out

    def _outputs(self, prefix: str) -> Tuple[List[str], List[str]]:
        """Each rank's stdout and stderr of a command, rank by rank; the files removed."""
        texts: Dict[str, List[str]] = {"out": [], "err": []}
        for r in range(self.nranks):
            for name, found in texts.items():
                path = Path(f"{prefix}.{r}.{name}")
                found.append(_read(path))
                path.unlink(missing_ok=True)
        return texts["out"], texts["err"]

    def close(self) -> None:
        for conn in self.conns.values():
            try:
                conn.close()
            except OSError:
                pass
        self.conns = {}
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.launcher_out.close()
        self.launcher_err.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _log(nranks: int, argv: Sequence[str], wall: float, usage: Sequence[float]) -> None:
    """With DISTPART_TEST_POOL_LOG=FILE, a line per pooled command (to see where the suite's
    CPU goes: the ranks of a pool are reaped only when the tests end): test, ranks, wall s,
    then summed over the ranks CPU s, of it system s, involuntary context switches, minor
    page faults; then the command."""
    path = os.environ.get("DISTPART_TEST_POOL_LOG")
    if path:
        user, system, switches, faults = usage
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0]}\t{nranks}\t{wall:.2f}\t"
                    f"{user + system:.2f}\t{system:.2f}\t{int(switches)}\t{int(faults)}\t{' '.join(argv)}\n")


def _read_line(conn: socket.socket, deadline: float) -> str:
    data = b""
    while not data.endswith(b"\n"):
        conn.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = conn.recv(4096)
        except (socket.timeout, OSError):
            return ""
        if not chunk:
            return ""
        data += chunk
    return data.decode("utf-8")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


_pools: Dict[int, RankPool] = {}
# Set by pytest for each test; nothing the ranks read.
_CHANGES_PER_TEST = ("PYTEST_CURRENT_TEST",)


def pooled_run(nranks: int, argv: Sequence[str], env: Dict[str, str], command: List[str],
               timeout: float, script: Optional[str] = None, cwd: Optional[str] = None
               ) -> Optional[Tuple[int, str, str, bool]]:
    """Run distpart `argv` in this process's pool of `nranks` ranks, in folder `cwd` (default:
    this process's); None when this run cannot be pooled (the caller launches it): another
    environment, or the pool cannot start."""
    env = {k: v for k, v in env.items() if k not in _CHANGES_PER_TEST}
    pool = _pools.get(nranks)
    if pool is not None and pool.alive and pool.env != env:
        return None
    if pool is None or not pool.alive:   # none yet, or an abort ended it
        if pool is not None:
            pool.close()   # idempotent: run() closes a pool it saw end
        try:
            pool = RankPool(nranks, env, command)
        except PoolGone:
            return None
        _pools[nranks] = pool
    return pool.run(argv, cwd or os.getcwd(), timeout, script)


@atexit.register
def _close_all() -> None:
    for pool in _pools.values():
        pool.close()
    _pools.clear()


if __name__ == "__main__":
    serve(sys.argv[1])
