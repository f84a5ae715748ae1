"""The pipeline's steps on plain values, for the command line (`commands`) and
`partition_graph` (`api`) alike: validate the input, check resources, claim the output
folders, Step 1 (or read its result back), Step 2, verify and report.

Nothing here knows argparse: each step takes paths, numbers and option records. Every
function is collective unless it says otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from .assign import compute_assignment
from .assign.assignment import Assignment, fingerprint, read_assignment, write_assignment
from .assign.balance import BalanceOptions
from .assign.objective import DEFAULT_BATCH_SIZE, DEFAULT_FANOUTS, Objective
from .assign.options import default_balance
from .check.report import report
from .check.verify import verify
from .chunked.estimate import estimate_output_bytes, estimate_stage_peaks
from .chunked.metadata import GraphMeta
from .chunked.validate import validate
from .dispatch.dispatch import dispatch
from .dispatch.publish import withdrawn_on_error
from .errors import InputError
from .mpi.collective import agreed
from .partitions.graphbolt import GraphboltOptions
from .partitions.manifest import input_fingerprint
from .run.guards import check_space, check_stage_memory, gib
from .run.outdir import ASSIGNMENT, PARTITIONS, OutputFolder, claim, plan_removals
from .run.progress import Progress
from .run.resume import RECORD, RunKey, check_record, remove_record, write_record
from .run.stages import StageLog

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


def message_bytes(max_message_mb: int) -> int:
    """--max-message-mb in bytes. Not collective."""
    if not 1 <= max_message_mb <= 2047:
        raise InputError(None, f"--max-message-mb must be between 1 and 2047 (MPI counts are 32-bit), "
                               f"got {max_message_mb}")
    return max_message_mb << 20


def validate_input(comm: "Intracomm", in_dir: Path, log: StageLog, full: bool = False) -> GraphMeta:
    """The input's metadata, checked (`full`: every row of every file too); rank 0 notes chunk
    files outside the input folder, which every rank must be able to read."""
    with log.stage(comm, "validate"):
        meta = validate(comm, in_dir, full=full)
    outside = meta.files_outside_root()
    if outside and comm.Get_rank() == 0:
        log.progress.note(f"{len(outside)} chunk file{' lies' if len(outside) == 1 else 's lie'} outside "
                          f"{meta.root} (e.g. {outside[0]}); every rank must be able to read "
                          f"{'it' if len(outside) == 1 else 'them'}")
    return meta


def check_resources(comm: "Intracomm", meta: GraphMeta, num_parts: int, out_dir: Path,
                    graph_formats: Sequence[str], space_check: bool, max_memory_gb: Optional[float],
                    progress: Progress, method: Optional[str] = None, verify: bool = False,
                    columns: int = 1) -> None:
    """Refuse before any work when the output cannot fit or a stage (Step 1 with `method`
    unless None, balancing `columns` constraint columns; dispatch; verify with `verify`) would
    exceed `max_memory_gb` per rank (estimates from the metadata)."""
    with agreed(comm):
        need = estimate_output_bytes(meta, num_parts, graph_formats)
        peaks = estimate_stage_peaks(meta, comm.Get_size(), method, verify, columns)
        if comm.Get_rank() == 0:
            per_stage = ", ".join(f"{s} about {gib(e)}" for s, e in peaks.items())
            progress.say(f"estimates: output about {gib(need)}; per rank {per_stage}")
            if space_check:
                check_space(out_dir, need)
        if max_memory_gb is not None:
            check_stage_memory(peaks, max_memory_gb, whole_graph=["assign"] if method == "kaminpar" else [])


def pipeline_folders(out_dir: Path, assign_dir: Optional[Path], ntypes: Sequence[str]) -> List[OutputFolder]:
    """The partitions and the assignment of a whole pipeline (assign_dir None: OUT_DIR/assignment)."""
    default = assign_dir is None
    return [OutputFolder(out_dir, PARTITIONS, ntypes, default_assign_dir="assignment" if default else ""),
            OutputFolder(out_dir / "assignment" if default else assign_dir, ASSIGNMENT, ntypes)]


def claim_folders(comm: "Intracomm", folders: Sequence[OutputFolder], input_root: Path,
                  input_files: Sequence[Path] = (), reads: Sequence[Path] = (), overwrite: bool = False,
                  resume: bool = False) -> None:
    """Refuse folders whose files distpart must not replace; clear a previous output with
    `overwrite`; mark the folders as distpart's. Before the first write."""
    with agreed(comm):
        if comm.Get_rank() == 0:
            removals = [r for f in folders
                        for r in plan_removals(f, input_root, input_files, reads, overwrite, resume)]
            claim(folders, removals)


def input_files(meta: GraphMeta) -> List[Path]:
    """metadata.json and every file it names. Not collective."""
    return [meta.path, *(path for _, path in meta.all_files())]


def fingerprint_input(comm: "Intracomm", meta: GraphMeta) -> str:
    """The input's fingerprint, computed by rank 0, known to all."""
    with agreed(comm):
        key = input_fingerprint(meta) if comm.Get_rank() == 0 else None
    return comm.bcast(key, root=0)


@dataclass(frozen=True)
class Step1Options:
    """What Step 1's assignment depends on besides the input and the number of ranks, with
    `distpart assign`'s names and defaults (a resume record and the manifest hold them)."""

    num_parts: int
    method: str = "multilevel"
    seed: int = 0
    balance_ntypes: Optional[bool] = None
    balance_edges: Union[bool, float, None] = None   # off, at `imbalance`, or its own cap
    balance_feature: Tuple[str, ...] = ()
    imbalance: float = 1.05
    vertex_order: str = "degree"
    vcycles: Optional[int] = None
    objective: str = "cut"
    train_mask: Tuple[str, ...] = ()
    fanouts: Tuple[int, ...] = DEFAULT_FANOUTS
    batch_size: int = DEFAULT_BATCH_SIZE
    threads: Optional[int] = None                    # how, not what: not recorded

    def recorded(self) -> Dict[str, Any]:
        """The options as recorded (lists where JSON gives lists back)."""
        keys = ("method", "seed", "balance_ntypes", "balance_edges", "balance_feature", "imbalance",
                "vertex_order", "vcycles", "objective", "train_mask", "fanouts", "batch_size", "num_parts")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in ((k, getattr(self, k)) for k in keys)}

    def with_defaults(self) -> "Step1Options":
        """These options with what the user left unsaid (None) filled in, once: the resume
        record holds the result."""
        ntypes, edges = default_balance(self.method, self.balance_ntypes, self.balance_edges)
        return replace(self, balance_ntypes=ntypes, balance_edges=edges)

    def balance(self) -> BalanceOptions:
        """The balance constraints (of options `with_defaults`)."""
        # Training nodes are balanced too: DGL's trainers split them evenly, whatever the partition.
        features = tuple(dict.fromkeys([*self.balance_feature, *self.train_mask]))
        edges = self.balance_edges
        return BalanceOptions(bool(self.balance_ntypes), edges is not False, features, self.imbalance,
                              None if isinstance(edges, bool) else edges)


def compute_step1(comm: "Intracomm", meta: GraphMeta, options: Step1Options, max_bytes: Optional[int] = None,
                  progress: Optional[Progress] = None, work_dir: Union[str, Path] = ".") -> Assignment:
    """Step 1 by `options.method`, in memory."""
    objective = Objective(options.objective, options.train_mask, options.fanouts, options.batch_size)
    return compute_assignment(comm, meta, options.num_parts, options.method, options.balance(), options.seed,
                              max_bytes, progress, vertex_order=options.vertex_order, threads=options.threads,
                              work_dir=work_dir, vcycles=options.vcycles, objective=objective)


def assign(comm: "Intracomm", meta: GraphMeta, assign_dir: Path, options: Step1Options, key: RunKey,
           max_bytes: int, log: StageLog, resume: bool = False) -> Assignment:
    """Compute and write the assignment, or with `resume` read back the one a previous run
    completed with the same key."""
    if resume:
        with agreed(comm):
            record = check_record(assign_dir, key) if comm.Get_rank() == 0 else None
        record = comm.bcast(record, root=0)
        if record is not None:
            assignment = read_step1(comm, meta, assign_dir, options.num_parts, log)
            with agreed(comm):
                if fingerprint(comm, assignment, meta) != record.get("digest"):
                    raise InputError(assign_dir, f"the assignment files differ from what {RECORD} recorded "
                                                 f"(changed after writing): rerun with --overwrite")
            if comm.Get_rank() == 0:
                log.progress.note(f"resume: the assignment in {assign_dir} is complete, kept")
            return assignment
    with agreed(comm):
        if comm.Get_rank() == 0 and Path(assign_dir).is_dir():
            remove_record(assign_dir)
    with log.stage(comm, "assign"):
        assignment = compute_step1(comm, meta, options, max_bytes, log.progress, work_dir=assign_dir)
        write_assignment(comm, assignment, meta, assign_dir)
        digest = fingerprint(comm, assignment, meta)
        with agreed(comm):
            if comm.Get_rank() == 0:
                write_record(assign_dir, key, digest=digest)
    return assignment


def read_step1(comm: "Intracomm", meta: GraphMeta, assign_dir: Path, num_parts: Optional[int],
               log: StageLog) -> Assignment:
    """A written assignment, read back (`num_parts` only without partition_meta.json)."""
    with log.stage(comm, "read_assign"):
        return read_assignment(comm, meta, assign_dir, num_parts)


def build(comm: "Intracomm", meta: GraphMeta, assignment: Assignment, out_dir: Path, input_key: str,
          options: Dict[str, Any], max_bytes: int, log: StageLog, resume: bool = False,
          graphbolt: Optional[GraphboltOptions] = None, graph_formats: Sequence[str] = ("coo",)) -> None:
    """Step 2: build and write every partition. `input_key` (`fingerprint_input`) and
    `options` (what else the output depends on) go to the manifest with the assignment's
    fingerprint; dispatch adds how the partitions are stored."""
    key = RunKey(input_key, options, fingerprint(comm, assignment, meta))
    dispatch(comm, meta, assignment, out_dir, key=key, max_bytes=max_bytes, log=log, resume=resume,
             graphbolt=graphbolt, graph_formats=graph_formats)


def verify_output(comm: "Intracomm", meta: GraphMeta, assignment: Assignment, out_dir: Path, max_bytes: int,
          log: StageLog) -> str:
    """Verify an output against its input and assignment; the summary (OutputError if not)."""
    with log.stage(comm, "verify"):
        return verify(comm, meta, assignment, out_dir, max_bytes=max_bytes, progress=log.progress)


def check_and_report(comm: "Intracomm", meta: GraphMeta, assignment: Assignment, out_dir: Path, max_bytes: int,
                     log: StageLog, *, verify_first: bool = True, say_ok: bool = False,
                     features: Sequence[str] = (), train_masks: Sequence[str] = ()) -> None:
    """The end of a pipeline: verify (rank 0 prints the result with `say_ok`) and report. A
    pipeline whose check fails leaves no metadata.json: its output must not look complete."""
    with withdrawn_on_error(comm, out_dir):
        if verify_first:
            summary = verify_output(comm, meta, assignment, out_dir, max_bytes, log)
            if say_ok and comm.Get_rank() == 0:
                print(f"verify: OK ({summary})", flush=True)
        with log.stage(comm, "report"):
            report(comm, out_dir, features, train_masks=train_masks)
