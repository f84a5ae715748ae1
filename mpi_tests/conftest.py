"""Shared fixtures for the MPI tests: launching `mpiexec` with a hard timeout, example inputs.

Each test starts its own `mpiexec -n R` subprocess and kills the whole process group if it
runs past its timeout, so a deadlock fails the test instead of hanging CI.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import pytest

RANKS = (1, 2, 4)
DEFAULT_TIMEOUT = 240


def mpi_env() -> dict:
    env = dict(os.environ)
    # Open MPI refuses root and more ranks than cores unless told; CI runs as root on 2 cores.
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
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
    # The point-to-point layer Debian's Open MPI picks anyway (its openmpi-mca-params.conf
    # excludes ucx), named so that MPI_Init does not first open the cm layer and probe its
    # PSM/PSM2 transports: 0.2 s less per mpiexec.
    env.setdefault("OMPI_MCA_pml", "ob1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def mpi_command(nranks: int, argv: Sequence[str], script: Optional[Path] = None) -> List[str]:
    """`mpiexec -n R python (-m distpart.cli | script) argv...`."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.fail("mpiexec not found: run scripts/setup.sh")
    target = [str(script)] if script else ["-m", "distpart.cli"]
    return [mpiexec, "-n", str(nranks), sys.executable, *target, *map(str, argv)]


def run_bounded(cmd: Sequence, env: Optional[dict] = None, timeout: float = DEFAULT_TIMEOUT,
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
        pytest.fail(f"timed out after {timeout}s (deadlock?): {' '.join(cmd)}\n{out}\n{err}")
    return Run(proc.returncode, out, err)


def mpirun(nranks: int, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT,
           script: Optional[Path] = None) -> Run:
    """Run distpart (or a test script) on nranks ranks; fail the test on timeout."""
    return run_bounded(mpi_command(nranks, argv, script), mpi_env(), timeout)


def run_driver(name: str, nranks: int, timeout: float = 120) -> Run:
    """Run mpi_tests/drivers/NAME.py on nranks ranks and assert it reports success."""
    run = mpirun(nranks, [], timeout, script=Path(__file__).parent / "drivers" / f"{name}.py")
    assert run.returncode == 0, run.output
    assert "checks: passed" in run.stdout, run.output
    return run


# Options whose value is a file the user asked for even when the run is refused.
_USER_OUTPUTS = ("--log-file", "--stats-json", "--json", "--plot")


def touched_roots(argv: Sequence) -> List[Path]:
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


def distpart(nranks: int, *argv, timeout: float = DEFAULT_TIMEOUT, ok: Optional[bool] = True,
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


class XdistGroups:
    """For parallel runs (scripts/test.sh: pytest-xdist, --dist loadgroup), registered as a
    plugin so that it sees the tests of tests/ as well.

    The tests of a module that share a module-scoped fixture (a reference run, a partitioned
    graph) form one group, so that one worker builds it once instead of every worker once.
    Tests already in a group (xdist_group("serial"): daemons, mounts, time or memory measured)
    stay in theirs.

    A grouped test that did not get its group fails before it starts anything, as it could run
    beside the other tests of its group: pytest-xdist 3.8 marks the group in the test's ID,
    which pytest 9.2 ignores (pytest-xdist issue 1386; setup.py keeps pytest below 9.2)."""

    @pytest.hookimpl(tryfirst=True)   # before pytest-xdist reads the groups
    def pytest_collection_modifyitems(self, config, items):
        for item in items:
            info = getattr(item, "_fixtureinfo", None)
            if info is None or item.get_closest_marker("xdist_group") is not None:
                continue
            if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))

    def pytest_runtest_setup(self, item):
        config = item.config
        if (getattr(config, "workerinput", None) is not None and config.getvalue("loadgroup")
                and item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid):
            pytest.fail(f"pytest-xdist --dist loadgroup does not group the tests with pytest "
                        f"{pytest.__version__}: run without -n (DISTPART_TEST_WORKERS=0), or with "
                        f"pytest<9.2", pytrace=False)


def pytest_configure(config):
    if config.pluginmanager.has_plugin("xdist") and not config.pluginmanager.has_plugin("distpart-xdist-groups"):
        config.pluginmanager.register(XdistGroups(), "distpart-xdist-groups")


@pytest.fixture(scope="session")
def example_dir(tmp_path_factory) -> Path:
    """The bundled heterogeneous example (all four formats, features of many dtypes)."""
    from distpart.synthetic import example_graph
    return example_graph(tmp_path_factory.mktemp("example")).parent


# ---------------------------------------------------------------- two hosts (netns.py)

@pytest.fixture(scope="session")
def _netns_session(tmp_path_factory):
    """One pair of network-namespace hosts with sshd (and the dead second network, eth1) for
    the whole session: test_netns.py and test_dgl_training.py share it. Removed at the end of
    the session, also after a failure (netns.py)."""
    from netns import netns_cluster
    with netns_cluster(tmp_path_factory.mktemp("netns"), 2, side_network=True) as cluster:
        yield cluster


@pytest.fixture
def netns_pair(_netns_session):
    """The session's hosts, left idle for the next test: whatever a test started on them
    (a job's orted and ranks, a DGL server) is killed after it; their sshds stay."""
    yield _netns_session
    _netns_session.kill_jobs()


# ---------------------------------------------------------------- real DGL (a separate Python)

REPO = Path(__file__).resolve().parent.parent


def find_dgl_python() -> Optional[str]:
    """A Python with DGL 2.x and distpart's dependencies (some tests run distpart's ranks
    there): $DISTPART_DGL_PYTHON, else /opt/dglenv/bin/python."""
    for python in filter(None, [os.environ.get("DISTPART_DGL_PYTHON"), "/opt/dglenv/bin/python"]):
        if Path(python).exists() and subprocess.run(
                [python, "-c", "import dgl.distributed, dgl.graphbolt, mpi4py, pyarrow.parquet, h5py"],
                capture_output=True, timeout=180).returncode == 0:
            return python
    return None


@pytest.fixture(scope="session")
def dgl_python() -> str:
    python = find_dgl_python()
    if python is None:
        # .ci/run looks for "DGL not installed" to fail instead of skipping.
        pytest.skip("DGL not installed (with distpart's dependencies): set DISTPART_DGL_PYTHON to "
                    "the Python scripts/setup-dgl.sh builds")
    return python


def dgl_env() -> dict:
    """mpi_env, with this clone importable and torch's thread pools at one thread (2 cores)."""
    env = mpi_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    return env


def distpart_dgl(python: str, nranks: int, *argv, ok: Optional[bool] = True, timeout: float = 300) -> Run:
    """distpart under the DGL environment's Python on nranks ranks."""
    mpiexec = mpi_command(nranks, argv)[0]
    run = run_bounded([mpiexec, "-n", nranks, python, "-m", "distpart.cli", *argv], dgl_env(), timeout)
    if ok is True:
        assert run.returncode == 0, run.output
    elif ok is False:
        assert run.returncode != 0, run.output
    return run
