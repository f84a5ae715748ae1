"""Live progress of a run: stage start lines and periodic `done of total, rate, ETA` lines.

A partitioning job on a cluster runs for minutes to hours; a silent terminal is
indistinguishable from a hang. Rank 0 reports what it is doing: a line when each stage
starts and, while a stage runs, a status line at most every `min_gap` seconds when work
advanced and at least every `max_gap` seconds regardless (a heartbeat), so a user always
sees within 10 s that the job is alive and how long it will take.

Counts are rank 0's own share of the work. Ranks get balanced blocks, so rank 0's fraction
done is the job's. Work that is one opaque library call (ParMETIS) cannot report progress;
it declares an estimated duration instead and the ETA says it is an estimate.

The printer is a daemon thread on rank 0 that never calls MPI, so it is safe at any MPI
thread level. Everything it prints is built by the pure `format_*` functions below.
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, TextIO

MIN_GAP_S = 5.0
MAX_GAP_S = 10.0


# ---------------------------------------------------------------- pure formatting

def format_count(n: float) -> str:
    """12345678 -> '12.3M': short enough to read at a glance in a log line."""
    n = float(n)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    if n != int(n) and abs(n) < 10:
        return f"{n:.2g}"   # slow rates, e.g. 0.25 partitions/s
    return f"{n:.0f}"


def format_duration(seconds: float) -> str:
    """Seconds as '42s', '3m05s' or '2h07m'."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def eta_seconds(done: float, total: float, elapsed: float) -> Optional[float]:
    """Remaining time at the average rate so far; None while nothing is done."""
    if total <= 0 or done <= 0 or elapsed <= 0:
        return None
    return max(total - done, 0.0) * elapsed / done


@dataclass
class TaskState:
    """What rank 0 is doing now: a named task with work done of a total, or an estimate."""

    stage: str
    task: str
    unit: str
    total: float
    done: float
    started: float                         # monotonic clock at task start
    estimate_s: Optional[float] = None     # for opaque calls: expected duration


def format_status(state: TaskState, now: float) -> str:
    """One status line: task, done of total, rate, elapsed and ETA (the word is always there)."""
    elapsed = now - state.started
    name = state.stage if state.task == state.stage else f"{state.stage}/{state.task}"
    parts = [name + ":"]
    if state.estimate_s is not None:
        left = state.estimate_s - elapsed
        parts.append(f"running, elapsed {format_duration(elapsed)},")
        if left > 0:
            parts.append(f"ETA ~{format_duration(left)} (estimate)")
        else:
            parts.append(f"ETA unknown (past the ~{format_duration(state.estimate_s)} estimate)")
        return " ".join(parts)
    if state.total <= 0 and state.done <= 0:
        return f"{name}: running, elapsed {format_duration(elapsed)}, ETA unknown (no progress measure here)"
    if state.total > 0:
        pct = 100.0 * min(state.done / state.total, 1.0)
        parts.append(f"{format_count(state.done)} of {format_count(state.total)} {state.unit} ({pct:.0f}%),")
    else:
        parts.append(f"{format_count(state.done)} {state.unit},")
    rate = state.done / elapsed if elapsed > 0 else 0.0
    parts.append(f"{format_count(rate)} {state.unit}/s, elapsed {format_duration(elapsed)},")
    eta = eta_seconds(state.done, state.total, elapsed)
    parts.append(f"ETA {format_duration(eta)}" if eta is not None else "ETA unknown (nothing done yet)")
    return " ".join(parts)


# ---------------------------------------------------------------- the reporter

class Progress:
    """Rank 0's progress reporter. A disabled instance (other ranks) accepts every call and
    prints nothing, so callers never test the rank. With `--quiet` the stream is None:
    progress goes only to the log file, notes still to stderr."""

    def __init__(self, enabled: bool = False, stream: Optional[TextIO] = None,
                 log_file: Optional[TextIO] = None, *, notes: Optional[TextIO] = None,
                 min_gap: float = MIN_GAP_S, max_gap: float = MAX_GAP_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self._stream, self._log_file = stream, log_file
        self._notes = notes if notes is not None else stream   # notes are shown even when quiet
        self._min_gap, self._max_gap, self._clock = min_gap, max_gap, clock
        self._t0 = clock()
        self._lock = threading.Lock()
        self._state: Optional[TaskState] = None
        self._stage = ""
        self._last_status = self._t0   # status lines are spaced on their own: other lines carry no ETA
        self._last_done = 0.0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @classmethod
    def off(cls) -> "Progress":
        return cls(False)

    # -- lines

    def say(self, text: str, to_stream: bool = True) -> None:
        """Print one line now (stage starts, notes), prefixed with the run's elapsed time;
        `to_stream=False` writes it to the log file only (for text already on the terminal)."""
        if not self.enabled:
            return
        line = f"distpart [{format_duration(self._clock() - self._t0):>6}] {text}\n"
        for out in (self._stream if to_stream else None, self._log_file):
            if out is not None:
                out.write(line)
                out.flush()

    def note(self, text: str) -> None:
        """A line the user must see even with --quiet (a warning about the input, say)."""
        if not self.enabled:
            return
        line = f"distpart [{format_duration(self._clock() - self._t0):>6}] note: {text}\n"
        for out in {id(o): o for o in (self._notes, self._log_file) if o is not None}.values():
            out.write(line)
            out.flush()

    # -- stages and tasks

    def begin_stage(self, name: str) -> None:
        self._stage = name
        self.say(f"stage {name} started")
        self._swap(TaskState(name, name, "", 0.0, 0.0, self._clock()))
        self._ensure_thread()

    def end_stage(self) -> None:
        self._swap(None)

    @contextmanager
    def task(self, name: str, total: float, unit: str) -> Iterator["Progress"]:
        """Track `total` units of work on rank 0 (advance with `advance`)."""
        prev = self._swap(TaskState(self._stage or name, name, unit, float(total), 0.0, self._clock()))
        try:
            yield self
        finally:
            self._swap(prev)

    @contextmanager
    def opaque(self, name: str, estimate_s: float) -> Iterator[None]:
        """A call that cannot report progress; the ETA comes from `estimate_s`."""
        prev = self._swap(TaskState(self._stage or name, name, "", 0.0, 0.0, self._clock(),
                                    estimate_s=max(float(estimate_s), 1.0)))
        try:
            yield
        finally:
            self._swap(prev)

    def advance(self, n: float) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self._state is not None:
                self._state.done += n

    def _swap(self, state: Optional[TaskState]) -> Optional[TaskState]:
        with self._lock:
            prev, self._state = self._state, state
            self._last_done = 0.0
        return prev

    # -- the printing thread

    def _ensure_thread(self) -> None:
        if not self.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="distpart-progress", daemon=True)
        self._thread.start()

    def tick(self) -> Optional[str]:
        """Print a status line if one is due; returns it (the thread's step, testable alone)."""
        now = self._clock()
        with self._lock:
            state = self._state
            if state is None:
                return None
            gap = now - self._last_status
            moved = state.done != self._last_done or state.estimate_s is not None
            if gap < self._max_gap and not (gap >= self._min_gap and moved):
                return None
            self._last_done = state.done
            self._last_status = now
            text = format_status(state, now)
        self.say(text)
        return text

    def _run(self) -> None:
        while not self._stop.wait(min(0.25, self._min_gap / 4)):
            try:
                self.tick()
            except Exception:  # a broken pipe on stderr must not kill the job
                return

    def close(self) -> None:
        """Stop the thread and close the log file (the reporter is off afterwards)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self.enabled = False


def rank_tag(rank: int, size: int, host: str) -> str:
    """'[rank 3/8 node-b]': where a line from a rank other than 0 came from."""
    return f"[rank {rank}/{size} {host}]"


def open_progress(is_root: bool, quiet: bool, log_path: Optional[str],
                  max_gap: float = MAX_GAP_S) -> Progress:
    """The reporter for this rank: enabled on rank 0 unless quiet and no log file."""
    if not is_root:
        return Progress.off()
    log_file = open(log_path, "a", encoding="utf-8") if log_path else None
    return Progress(True, None if quiet else sys.stderr, log_file, notes=sys.stderr,
                    min_gap=max_gap / 2, max_gap=max_gap)
