"""The MPI tests' fixtures (and the plugin that groups them for pytest-xdist, and the end of
the session's removal of the shared-memory files that killed jobs leave).

How a test runs distpart or mpiexec (with a hard timeout, the environment, the rank counts)
is in harness.py; shared graph builders in graphs.py; output checks in reference.py. This
file only registers fixtures and hooks, so no module imports it.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict

import pytest

from harness import DGL_MISSING, distpart, find_dgl_python, remove_leaked_segments


class XdistGroups:
    """For parallel runs (scripts/test.sh: pytest-xdist, --dist loadgroup), registered as a
    plugin so that it sees the tests of tests/ as well.

    The tests of a module that share a module-scoped fixture (a reference run, a partitioned
    graph) form one group, so that one worker builds it once instead of every worker once.
    Tests already in a group (xdist_group("netns_pair"): the session's two sshd hosts;
    xdist_group("serial"): SLURM, mounts, time or memory measured) stay in theirs.

    A grouped test that did not get its group fails before it starts anything, as it could run
    beside the other tests of its group: pytest-xdist 3.8 marks the group in the test's ID,
    which pytest 9.2 ignores (pytest-xdist issue 1386; setup.py keeps pytest below 9.2)."""

    @pytest.hookimpl(tryfirst=True)   # before pytest-xdist reads the groups
    def pytest_collection_modifyitems(self, config, items):
        # The scheduler hands out equal-sized work units in collection order: the longest
        # single tests (harness.start_early) first, so that none of them ends the run alone.
        items[:] = sorted(items, key=lambda item: not getattr(getattr(item, "function", None), "start_early", False))
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


_STARTED = pytest.StashKey[float]()   # when the session began (pytest_sessionfinish)


def pytest_configure(config):
    if config.pluginmanager.has_plugin("xdist") and not config.pluginmanager.has_plugin("distpart-xdist-groups"):
        config.pluginmanager.register(XdistGroups(), "distpart-xdist-groups")
    config.stash[_STARTED] = time.time()


def pytest_sessionfinish(session):
    """Once, where the session began (not in each xdist worker): remove the shared-memory
    files the jobs the tests killed left behind (harness.remove_leaked_segments)."""
    if getattr(session.config, "workerinput", None) is None:
        remove_leaked_segments(session.config.stash[_STARTED])


@pytest.fixture(scope="session")
def example_dir(tmp_path_factory) -> Path:
    """The bundled heterogeneous example (all four formats, features of many dtypes)."""
    from distpart.synthetic import example_graph
    return example_graph(tmp_path_factory.mktemp("example")).parent


@pytest.fixture(scope="session")
def random_output(example_dir, tmp_path_factory) -> Path:
    """`mpiexec -n 2 distpart pipeline EXAMPLE OUT --num-parts 4 --no-verify --method random`,
    once per session for the modules that check an output (test_verify, test_verify_arrays,
    test_report_plot: xdist_group("random_output"), so one worker makes it). Each copies it."""
    out = tmp_path_factory.mktemp("random_output") / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--no-verify", "--method", "random")
    return out


@pytest.fixture(scope="module")
def plain(example_dir, tmp_path_factory) -> Dict[str, bytes]:
    """The assignment every job template is compared with (test_templates.py, test_slurm.py):
    the plain `mpiexec -n 2 distpart pipeline IN OUT --num-parts 4`, once per module."""
    from reference import assignment_files
    out = tmp_path_factory.mktemp("plain") / "out"
    run = distpart(2, "pipeline", example_dir, out, "--num-parts", 4, timeout=120)
    assert "verify: OK" in run.stdout, run.output
    return assignment_files(out)


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

@pytest.fixture(scope="session")
def dgl_python() -> str:
    python = find_dgl_python()
    if python is None:
        pytest.skip(DGL_MISSING)
    return python
