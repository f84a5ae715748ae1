"""The test harness: how the tests, conftest.py and the benchmarks start distpart and MPI jobs.

Every run has a hard timeout; on timeout its whole process group is killed and the test
fails, so a deadlock fails the test instead of hanging CI. A distpart command or MPI script
run by `mpirun` (and so `distpart(...)`) goes to this process's standing MPI job of that many
ranks (rank_pool.py) when it can; anything else is a subprocess in its own process group.
It also owns the rank counts the MPI tests run at (`RANKS`), the environment mpiexec needs
on a 2-core CI machine running as root (`launch_env`, `mpi_env`), `distpart(...)` (a
subcommand that must succeed, or be refused without touching the file system), and where
the other interpreters and MPIs live (real DGL's Python, MPICH's Hydra).

pytest is imported only where a run fails, so MPI worker scripts (`RANKS`) and the
benchmarks (benchmarks/common.py puts mpi_tests/ on sys.path) import this module without it.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NoReturn, Optional, Sequence, Tuple

import rank_pool

RANKS = (1, 2, 4)
DEFAULT_TIMEOUT = 240
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DRIVERS = HERE / "drivers"


def _fail(message: str) -> NoReturn:
    import pytest   # here only: worker scripts and benchmarks import this module without it
    pytest.fail(message)


def start_early(test: Callable) -> Callable:
    """Mark one of the suite's longest single tests: pytest-xdist starts it before the short
    ones (conftest), so that it does not end the run alone. An attribute, not a pytest mark:
    the worker scripts that hold such tests run without pytest."""
    test.start_early = True   # type: ignore[attr-defined]
    return test


def launch_env() -> Dict[str, str]:
    """os.environ plus Open MPI's permission to run as root and to oversubscribe (CI runs as
    root on 2 cores, and 4-rank jobs): what any mpiexec on such a machine needs."""
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def mpi_env() -> Dict[str, str]:
    """launch_env, tuned for many short jobs side by side (the test suite)."""
    env = launch_env()
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")  # containers lack CMA
    # When a rank exits non-zero (every refusal test), Open MPI 4.1's mpiexec SIGTERMs the job,
    # then sleeps odls_base_sigkill_timeout (1 s), SIGKILLs, and sleeps it once more, even when
    # every rank has already exited: 2 s of nothing per failing run. A rank that takes the
    # SIGTERM only prints a line and exits (run/signals.py), so without the grace nothing
    # changes but the wait.
    env.setdefault("OMPI_MCA_odls_base_sigkill_timeout", "0")
    # Ranks waiting in a collective yield the core instead of spinning on it. Open MPI does so
    # by itself only when a job has more ranks than cores; scripts/test.sh runs several jobs
    # at once, where two spinning 2-rank jobs starve a third (measured: 3 files on 3 workers,
    # 2m42 -> 1m03 wall).
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    # Open MPI binds a job of 1 or 2 ranks to cores 0 and 1, every such job to the same ones:
    # side by side, all the 1-rank jobs and every rank 0 queue on core 0 while core 1 idles.
    # Unbound, the kernel spreads them (scripts/test.sh: less CPU and wall time).
    env.setdefault("OMPI_MCA_hwloc_base_binding_policy", "none")
    # The point-to-point layer Debian's Open MPI picks anyway (its openmpi-mca-params.conf
    # excludes ucx), named so that MPI_Init does not first open the cm layer and probe its
    # PSM/PSM2 transports: 0.2 s less per mpiexec.
    env.setdefault("OMPI_MCA_pml", "ob1")
    # NumPy's OpenBLAS starts a thread per core at import, in every rank; the ranks use no
    # BLAS, and on an oversubscribed machine the pool only costs start-up CPU.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    # With PYTHONDONTWRITEBYTECODE (container images set it) every rank recompiles all of
    # distpart's modules: 0.3 CPU-s per rank, per launch. The ranks cache their bytecode
    # outside the clone instead, which stays as clean as the variable keeps it.
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        env.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"distpart-pycache-{os.getuid()}"))
    return env


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def mpi_command(nranks: int, argv: Sequence[object], script: Optional[Path] = None,
                python: str = sys.executable) -> List[str]:
    """`mpiexec -n R python (-m distpart.cli | script) argv...`."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        _fail("mpiexec not found: run scripts/setup.sh")
    target = [str(script)] if script else ["-m", "distpart.cli"]
    return [mpiexec, "-n", str(nranks), python, *target, *map(str, argv)]


def run_bounded(cmd: Sequence[object], env: Optional[Dict[str, str]] = None, timeout: float = DEFAULT_TIMEOUT,
                cwd: Optional[Path] = None) -> Run:
    """Run cmd in its own process group; on timeout kill the whole group and fail the test,
    so a deadlock (or a launcher waiting on a dead host) never hangs the suite."""
    cmd = [str(c) for c in cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env if env is not None else mpi_env(), cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        _fail(f"timed out after {timeout}s (deadlock?): {' '.join(cmd)}\n{out}\n{err}")
    return Run(proc.returncode, out, err)


def mpirun(nranks: int, argv: Sequence[object], timeout: float = DEFAULT_TIMEOUT,
           script: Optional[Path] = None) -> Run:
    """Run distpart (or a test script) on nranks ranks; fail the test on timeout. A distpart
    command runs in this process's standing job of nranks ranks when it can (rank_pool.py)."""
    done = pooled(nranks, argv, timeout, script)
    if done is not None:
        status, out, err, timed_out = done
        if timed_out:
            _fail(f"timed out after {timeout}s (deadlock?): {script or 'distpart'} "
                  f"{' '.join(map(str, argv))}\n{out}\n{err}")
        return Run(status, out, err)
    return run_bounded(mpi_command(nranks, argv, script), mpi_env(), timeout)


def pooled(nranks: int, argv: Sequence[object], timeout: float, script: Optional[Path] = None,
           cwd: Optional[str] = None) -> Optional[Tuple[int, str, str, bool]]:
    """(status, stdout, stderr, timed out) of the run in this process's standing job of
    nranks ranks (rank_pool.py); None when it cannot run there (the caller launches it)."""
    if not (rank_pool.enabled() and nranks in rank_pool.POOL_RANKS):
        return None
    return rank_pool.pooled_run(nranks, [str(a) for a in argv], mpi_env(),
                                mpi_command(nranks, [], HERE / "rank_pool.py"), timeout,
                                None if script is None else str(Path(script).resolve()), cwd)


def start_paused(pause_at: str, nranks: int, argv: Sequence[object], timeout: float = 120,
                 extra_env: Optional[Dict[str, str]] = None) -> Tuple[subprocess.Popen, List[str]]:
    """Start a distpart run with `DISTPART_PAUSE_AT=pause_at` (run/faults.py: `point`, rank 0
    only, or `point@*`) in its own session; return it once rank 0 printed that it paused,
    with the output lines so far. The caller ends the process group."""
    point = pause_at.partition("@")[0]
    env = dict(mpi_env(), DISTPART_PAUSE_AT=pause_at, **(extra_env or {}))
    proc = subprocess.Popen(mpi_command(nranks, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    lines, deadline = [], time.monotonic() + timeout
    for line in proc.stdout:
        lines.append(line)
        if f"paused at {point} (rank 0" in line or time.monotonic() > deadline:
            break
    if not any(f"paused at {point} (rank 0" in x for x in lines):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        raise AssertionError(f"never paused at {point}:\n" + "".join(lines))
    # A rank prints its pause line just before it stops itself: a signal sent in between
    # (the SIGCONT that lets it go on) would come before the stop, and the stop last forever.
    _wait_stopped(proc, nranks if pause_at.endswith("@*") else 1, deadline)
    return proc, lines


def _wait_stopped(proc: subprocess.Popen, count: int, deadline: float) -> None:
    """Until `count` processes under `proc` are stopped (SIGSTOP), or the deadline."""
    import psutil   # a test dependency; worker scripts import this module without it
    while time.monotonic() < deadline:
        stopped = 0
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            try:
                stopped += child.status() == psutil.STATUS_STOPPED
            except psutil.NoSuchProcess:
                pass
        if stopped >= count:
            return
        time.sleep(0.01)


@contextmanager
def paused_run(point: str, nranks: int, argv: Sequence[object], timeout: float = 120
               ) -> Iterator[subprocess.Popen]:
    """A distpart run with every rank stopped (SIGSTOP) at `point` (run/faults.py) for the
    block, killed after it unless the block let it go on (`go_on`) and it finished."""
    proc, _ = start_paused(f"{point}@*", nranks, argv, timeout)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)


def go_on(proc: subprocess.Popen, timeout: float = DEFAULT_TIMEOUT) -> str:
    """Let a `paused_run` continue to its end; the rest of its output."""
    os.killpg(proc.pid, signal.SIGCONT)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _fail(f"the paused run did not finish within {timeout} s once let go on")
    return out


def run_driver(name: str, nranks: int, timeout: float = 120) -> Run:
    """Run mpi_tests/drivers/NAME.py on nranks ranks and assert it reports success."""
    run = mpirun(nranks, [], timeout, script=DRIVERS / f"{name}.py")
    assert run.returncode == 0, run.output
    assert "checks: passed" in run.stdout, run.output
    return run


# Options whose value is a file the user asked for even when the run is refused.
_USER_OUTPUTS = ("--log-file", "--stats-json", "--json", "--plot")


def touched_roots(argv: Sequence[object]) -> List[Path]:
    """The folders a distpart command line names (for a path that does not exist yet, its
    nearest existing parent), without the files the user asked to be written in any case."""
    roots: List[Path] = []
    for i, arg in enumerate(argv):
        if not isinstance(arg, Path) or (i and str(argv[i - 1]) in _USER_OUTPUTS):
            continue
        path = arg
        while not path.exists() and path != path.parent:
            path = path.parent
        if path != path.parent and path not in roots:
            roots.append(path)
    return roots


def distpart(nranks: int, *argv: object, timeout: float = DEFAULT_TIMEOUT, ok: Optional[bool] = True,
             refusal_changes_nothing: bool = True) -> Run:
    """Run a distpart subcommand; with ok=True assert success, with ok=False assert failure.

    A refusal (exit 2) must leave the file system as it found it: unless ok=True, every folder
    the command line names is snapshotted (names, sizes, sha256) before and compared after,
    the one place that checks it for every refusal test. A run expected to fail part-way
    (a full disk, a killed rank) passes `refusal_changes_nothing=False`."""
    from safety import differences, snapshot
    roots = touched_roots(argv) if ok is not True and refusal_changes_nothing else []
    asked = {str(argv[i + 1]) for i, a in enumerate(argv[:-1]) if str(a) in _USER_OUTPUTS}

    def state():
        return {path: entry for path, entry in snapshot(*roots).items() if path not in asked}

    before = state()
    run = mpirun(nranks, argv, timeout)
    if ok is True:
        assert run.returncode == 0, f"distpart {' '.join(map(str, argv))} failed:\n{run.output}"
    elif ok is False:
        assert run.returncode != 0, f"distpart {' '.join(map(str, argv))} should have failed:\n{run.output}"
    if run.returncode == 2 and roots:
        diff = differences(before, state())
        assert not diff, (f"distpart {' '.join(map(str, argv))} was refused but changed the file "
                          f"system:\n{diff}\n{run.output}")
    return run


# ---------------------------------------------------------------- what killed jobs leave

SHM = Path("/dev/shm")


def remove_leaked_segments(since: float, folder: Path = SHM) -> List[Path]:
    """Remove Open MPI's shared-memory files (`vader_segment.*`) made since `since` (a time)
    that no live process maps: what the ranks the tests SIGKILL (a node failure, a timeout, a
    bug's MPI_Abort) could not remove. Returns what was removed."""
    if not folder.is_dir():
        return []
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            mapped.update(line.split(None, 5)[5].strip() for line in maps.read_text().splitlines()
                          if "vader_segment" in line)
        except (OSError, IndexError):
            pass   # the process ended meanwhile, or maps nothing by name
    removed = []
    for path in folder.glob("vader_segment.*"):
        try:
            info = path.stat()
            if info.st_uid == os.getuid() and info.st_mtime >= since and str(path) not in mapped:
                path.unlink()
                removed.append(path)
        except OSError:
            pass   # removed meanwhile
    return removed


# ---------------------------------------------------------------- real DGL (a separate Python)

DGL_MISSING = ("DGL not installed (with distpart's dependencies): set DISTPART_DGL_PYTHON to the "
               "Python scripts/setup-dgl.sh builds")   # .ci/run looks for "DGL not installed"


@functools.lru_cache(maxsize=None)
def find_dgl_python() -> Optional[str]:
    """A Python with DGL 2.x and distpart's dependencies (some tests run distpart's ranks
    there): $DISTPART_DGL_PYTHON, else /opt/dglenv/bin/python, else this one if it has DGL."""
    candidates = [os.environ.get("DISTPART_DGL_PYTHON"), "/opt/dglenv/bin/python"]
    if importlib.util.find_spec("dgl") is not None:
        candidates.append(sys.executable)
    for python in filter(None, candidates):
        if Path(python).exists() and subprocess.run(
                [python, "-c", "import dgl.distributed, dgl.graphbolt, mpi4py, pyarrow.parquet, h5py"],
                capture_output=True, timeout=180).returncode == 0:
            return python
    return None


def dgl_env() -> Dict[str, str]:
    """mpi_env, with this clone importable and torch's thread pools at one thread (2 cores)."""
    env = mpi_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    return env


def distpart_dgl(python: str, nranks: int, *argv: object, ok: Optional[bool] = True, timeout: float = 300) -> Run:
    """distpart under the DGL environment's Python on nranks ranks."""
    run = run_bounded(mpi_command(nranks, argv, python=python), dgl_env(), timeout)
    if ok is True:
        assert run.returncode == 0, run.output
    elif ok is False:
        assert run.returncode != 0, run.output
    return run


# ---------------------------------------------------------------- MPICH (a second MPI)

def _ldconfig_paths(soname: str) -> List[str]:
    """Paths the dynamic loader's cache lists for `soname` (e.g. libmpich.so.12)."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.split("=>", 1)[1].strip() for line in out.splitlines()
            if line.strip().startswith(soname + " ") and "=>" in line]


@functools.lru_cache(maxsize=None)
def find_mpich() -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(mpiexec.mpich, libmpich.so.12 to link as libmpi.so.12 or None if not needed, why skip or None)."""
    hydra = shutil.which("mpiexec.mpich") or shutil.which("mpiexec.hydra")
    if hydra is None:
        return None, None, "MPICH's mpiexec (mpiexec.mpich) is not installed: apt-get install mpich " \
                           "(scripts/setup-test.sh installs it)"
    libmpich = _ldconfig_paths("libmpich.so.12")
    if libmpich:
        return hydra, libmpich[0], None
    if _ldconfig_paths("libmpi.so.12"):  # an MPICH with the ABI's own library name
        return hydra, None, None
    return None, None, "MPICH's library (libmpich.so.12 or libmpi.so.12) is not installed: apt-get install mpich"


def mpich_variables(tmp_path: Path) -> Dict[str, str]:
    """What the docs tell a user to set for MPICH, and its `mpiexec` first on PATH (a wrapper:
    Hydra finds its proxy next to its own path, so a symlink would not do)."""
    hydra, libmpich, _ = find_mpich()
    bin_dir, abi_dir = tmp_path / "mpich-bin", tmp_path / "mpich-abi"
    bin_dir.mkdir()
    (bin_dir / "mpiexec").write_text(f'#!/bin/sh\nexec {hydra} "$@"\n')
    (bin_dir / "mpiexec").chmod(0o755)
    env = {"MPI4PY_MPIABI": "mpich", "PATH": f"{bin_dir}:/usr/bin:/bin"}
    if libmpich is not None:
        abi_dir.mkdir()
        (abi_dir / "libmpi.so.12").symlink_to(libmpich)
        env["LD_LIBRARY_PATH"] = str(abi_dir)
    return env
