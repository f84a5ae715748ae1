"""Progress lines: formatting, ETA, and when the reporter prints (a fake clock, no MPI)."""
import io

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
