"""Progress lines: formatting, ETA, and when the reporter prints (a fake clock, no MPI); and
what verify reports through it (one in-process rank, COMM_SELF)."""
import io
import re
import subprocess
import sys

import pytest

from distpart.run.progress import (Progress, TaskState, eta_seconds, format_count, format_duration,
                               format_status, rank_tag)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


@pytest.mark.parametrize("n, text", [(0, "0"), (0.25, "0.25"), (999, "999"), (1500, "1.5k"), (12_345_678, "12.3M"),
                                     (2.5e9, "2.5G")])
def test_format_count(n, text):
    assert format_count(n) == text


@pytest.mark.parametrize("s, text", [(0, "0s"), (59.4, "59s"), (61, "1m01s"), (3599, "59m59s"),
                                     (7260, "2h01m"), (-3, "0s")])
def test_format_duration(s, text):
    assert format_duration(s) == text


def test_eta_is_remaining_work_at_the_average_rate():
    assert eta_seconds(25, 100, 10.0) == pytest.approx(30.0)
    assert eta_seconds(100, 100, 10.0) == 0.0
    assert eta_seconds(0, 100, 10.0) is None
    assert eta_seconds(5, 0, 10.0) is None


def test_status_line_has_counts_rate_elapsed_and_eta():
    state = TaskState("dispatch", "edges", "edges", total=20e6, done=5e6, started=0.0)
    line = format_status(state, now=10.0)
    assert line == "dispatch/edges: 5.0M of 20.0M edges (25%), 500.0k edges/s, elapsed 10s, ETA 30s"


def test_status_line_of_an_opaque_call_uses_the_estimate_then_says_it_is_past():
    state = TaskState("assign", "ParMETIS_V3_PartKway", "", 0, 0, started=0.0, estimate_s=60.0)
    assert format_status(state, 15.0) == "assign/ParMETIS_V3_PartKway: running, elapsed 15s, ETA ~45s (estimate)"
    assert "ETA unknown (past the ~1m00s estimate)" in format_status(state, 75.0)


def test_status_line_before_any_work_still_names_the_eta():
    state = TaskState("verify", "checks", "items", total=10, done=0, started=0.0)
    assert format_status(state, 3.0).endswith("ETA unknown (nothing done yet)")
    stage_only = TaskState("write", "write", "", 0, 0, started=0.0)
    assert "running, elapsed 3s, ETA unknown" in format_status(stage_only, 3.0)


def test_reporter_prints_every_min_gap_when_moving_and_every_max_gap_when_not():
    clock, out = Clock(), io.StringIO()
    p = Progress(True, out, None, min_gap=5, max_gap=10, clock=clock)
    p._thread = object()  # drive tick() by hand: no thread
    p.begin_stage("dispatch")
    with p.task("edges", 100, "edges"):
        clock.t += 4
        p.advance(10)
        assert p.tick() is None                      # moved, but only 4 s since the start
        clock.t += 1
        assert "10 of 100 edges" in p.tick()         # 5 s and moved
        clock.t += 6
        assert p.tick() is None                      # 6 s, nothing moved
        clock.t += 4
        assert "10 of 100 edges" in p.tick()         # 10 s: heartbeat even without progress
    p.end_stage()
    clock.t += 20
    assert p.tick() is None                          # between stages nothing is reported
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("stage dispatch started")
    assert all(line.startswith("distpart [") for line in lines)
    assert sum("ETA" in line for line in lines) == 2


def test_stage_lines_do_not_delay_status_lines():
    clock, out = Clock(), io.StringIO()
    p = Progress(True, out, None, min_gap=5, max_gap=10, clock=clock)
    p._thread = object()
    p.begin_stage("a")
    clock.t += 9
    p.end_stage()
    p.begin_stage("b")                               # a stage line at 9 s
    clock.t += 1
    assert p.tick() is not None                      # still due at 10 s since the last status line


def test_quiet_with_a_log_file_writes_only_the_file(tmp_path):
    log = open(tmp_path / "log.txt", "w")
    p = Progress(True, None, log, min_gap=0, max_gap=0)
    p.begin_stage("validate")
    p.say("error line", to_stream=False)
    p.close()
    text = (tmp_path / "log.txt").read_text()
    assert "stage validate started" in text and "error line" in text
    p.say("after close")                             # closed: silently off
    assert "after close" not in (tmp_path / "log.txt").read_text()


def test_disabled_reporter_accepts_everything_and_prints_nothing():
    p = Progress.off()
    p.begin_stage("x")
    with p.task("t", 10, "rows"):
        p.advance(5)
    with p.opaque("call", 3):
        pass
    assert p.tick() is None
    p.close()


def test_rank_tag():
    assert rank_tag(3, 8, "node-b") == "[rank 3/8 node-b]"



# ---------------------------------------------------------------- verify's measure (issue 28 item 13)

MEASURED = re.compile(r"^verify/(checks|files): [\d.]+[kMG]? of [\d.]+[kMG]? (items|bytes) \((\d+)%\), .*, ETA ")


@pytest.fixture(scope="module")
def small_output(tmp_path_factory):
    """The bundled example in 2 partitions (random: the fastest), not yet verified; made by
    one process without mpiexec."""
    from distpart.synthetic import example_graph
    root = tmp_path_factory.mktemp("verify-progress")
    in_dir, out = example_graph(root / "graph").parent, root / "out"
    done = subprocess.run([sys.executable, "-m", "distpart", "pipeline", in_dir, out, "--num-parts", "2",
                           "--method", "random", "--no-verify", "--quiet"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return in_dir, out


def watched_reporter():
    """(reporter, lines, look): `look` takes the status line a user would see now, one fake
    second later; the reporter looks after each advance too (no printing thread)."""
    clock = Clock()
    p = Progress(True, io.StringIO(), None, min_gap=0, max_gap=0, clock=clock)
    p._thread = object()
    lines = []

    def look():
        clock.t += 1
        lines.append(p.tick())
    advance = p.advance
    p.advance = lambda n: (advance(n), look())
    return p, lines, look


def percents(lines):
    assert lines and all(MEASURED.match(line) for line in lines), lines
    return [int(MEASURED.match(line).group(3)) for line in lines]


def test_verify_counts_items_of_a_total_from_the_first_partition_loaded(small_output, monkeypatch):
    """Every status line of verify, those while partitions load included (formerly
    `verify: running, ... ETA unknown (no progress measure here)`), shows items done of a
    total and an ETA; loading moves the count, no step hides a quarter of the work, and the
    count ends at the total."""
    from mpi4py import MPI
    import distpart.check.verify as check
    from distpart.assign.assignment import read_assignment
    from distpart.chunked.metadata import load_metadata

    in_dir, out = small_output
    meta = load_metadata(in_dir / "metadata.json")
    assignment = read_assignment(MPI.COMM_SELF, meta, out / "assignment")
    p, lines, look = watched_reporter()
    loaded, real_load = [], check.load_part

    def load_part(*args, **kwargs):
        look()
        part = real_load(*args, **kwargs)
        look()
        loaded.append(len(lines) - 1)
        return part
    monkeypatch.setattr(check, "load_part", load_part)
    p.begin_stage("verify")
    check.verify(MPI.COMM_SELF, meta, assignment, out, max_bytes=1 << 20, progress=p)
    p.end_stage()

    pct = percents(lines)
    assert len(loaded) == 2 and 0 < pct[loaded[0]] < pct[loaded[1]] < 100, (loaded, lines)
    assert pct == sorted(pct) and pct[-1] == 100, pct
    assert max(b - a for a, b in zip(pct, pct[1:])) < 25, pct
    assert all(re.search(r"ETA \d+s$", line) for line in lines if not line.startswith("verify/checks: 0 of")), lines


def test_verify_quick_counts_bytes_of_a_total(small_output):
    from mpi4py import MPI
    from distpart.check.verify import verify_quick

    p, lines, _ = watched_reporter()
    p.begin_stage("verify")
    verify_quick(MPI.COMM_SELF, small_output[1], progress=p)
    p.end_stage()
    pct = percents(lines)
    assert len(lines) > 5 and pct == sorted(pct) and pct[-1] == 100, lines
    assert lines[-1].startswith("verify/files: ") and lines[-1].endswith("ETA 0s"), lines
