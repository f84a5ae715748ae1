"""A partition folder's life during Step 2: files written under staged names, each partition
moved into place with its completion record as soon as it is whole, partitions a previous
run completed kept on `--resume`, and rank 0's manifest and metadata.json written last, so
metadata.json exists only when every partition does.
"""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import DistpartError, InputError, OutputError
from ..mpi.collective import agreed
from ..partitions.manifest import MANIFEST_FILE, build_manifest, check_files, file_entry, write_manifest
from ..paths import CONFIG_FILE, GRAPHBOLT_FILE, PART_FILES, STAGED_SUFFIX, part_dir
from ..run.guards import writing
from ..run.progress import Progress
from ..run.resume import RunKey, check_record, remove_record, write_record
from ..run.signals import Stopped, undone_if_stuck

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ..partitions.graphbolt import GraphboltOptions

# (path relative to the output folder, {"size", "sha256"}) of one published file.
FileEntry = Tuple[str, Dict[str, Any]]


def staged_path(out_dir: Path, p: int, name: str) -> Path:
    """Where partition p's file `name` is written until the partition is complete."""
    if name == GRAPHBOLT_FILE:
        # torch.save names the archive inside the file after the name up to its last dot:
        # `<stem>.partial` gives the bytes DGL writes to `<stem>.pt`.
        return part_dir(out_dir, p) / (Path(name).stem + STAGED_SUFFIX)
    return part_dir(out_dir, p) / (name + STAGED_SUFFIX)


def output_options(graphbolt: Optional[GraphboltOptions], graph_formats: Sequence[str]) -> Dict[str, Any]:
    """How the partitions are stored, as the manifest and the completion records name it.
    Only choices other than the default appear, so an output written before these options
    existed keeps its key (and `--resume` still accepts it)."""
    options: Dict[str, Any] = {}
    if graphbolt is not None:
        options["graphbolt"] = graphbolt.as_json()
    if tuple(graph_formats) != ("coo",):
        options["graph_formats"] = list(graph_formats)
    return options


def publish_partition(out_dir: Path, p: int, key: RunKey, edge_counts: np.ndarray,
                       names: Tuple[str, ...] = PART_FILES) -> List[FileEntry]:
    """Move partition p's complete files into place, then record it complete, so a file under
    its final name is always whole and a record always vouches for whole files."""
    folder = part_dir(out_dir, p)
    # Checked again right before the renames: a link put there after the start would lead
    # them anywhere, the input included.
    if folder.is_symlink() or folder.resolve().parent != Path(out_dir).resolve():
        raise OutputError(folder, "is a symbolic link or leads outside the output folder: distpart "
                                  "writes only real folders there; remove it and run again")
    entries = []
    for name in names:
        final = folder / name
        os.replace(staged_path(out_dir, p, name), final)
        entries.append(file_entry(out_dir, final))
    write_record(part_dir(out_dir, p), key, files=dict(entries), edge_counts=edge_counts.tolist())
    return entries


def reusable_partitions(comm: Intracomm, out_dir: Path, mine: range, num_parts: int, key: RunKey,
                        progress: Progress) -> Dict[int, Tuple[List[FileEntry], List[int]]]:
    """This rank's partitions that a previous run completed with the same key and whose files
    are intact: {p: (manifest entries, edge counts per type)}. Collective.

    Everything is checked before anything changes, so a refusal leaves the output as it was:
    a record of another run, or a `part<q>/` of a run with more partitions than `num_parts`
    (it would stay beside the new output, unlisted), is an error on every rank. Only then are
    the records of damaged partitions removed (they are rebuilt), and every rank's notes reach
    rank 0's log."""
    reusable, damaged, notes = {}, [], []
    with agreed(comm):
        if comm.Get_rank() == 0:
            _refuse_extra_partitions(out_dir, num_parts)
        for p in mine:
            record = check_record(part_dir(out_dir, p), key)
            if record is None:
                continue
            entries = sorted(record.get("files", {}).items())
            try:
                check_files(out_dir, entries)
            except OutputError as e:
                damaged.append(p)
                notes.append(f"resume: rebuilding part{p}: {e}")
                continue
            reusable[p] = (entries, list(record.get("edge_counts", [])))
    with agreed(comm):
        for p in damaged:
            remove_record(part_dir(out_dir, p))
    everyone = comm.gather(notes, root=0)   # a line per damaged partition
    reused = comm.allreduce(len(reusable))
    if comm.Get_rank() == 0:
        for note in (n for rank in everyone for n in rank):
            progress.note(note)
        progress.note(f"resume: {reused} of {num_parts} partitions complete from a previous run, kept")
    return reusable


def _refuse_extra_partitions(out_dir: Path, num_parts: int) -> None:
    extra = sorted((int(m.group(1)), name) for name in (os.listdir(out_dir) if out_dir.is_dir() else [])
                   for m in [_PART_NAME.match(name)] if m and int(m.group(1)) >= num_parts)
    if extra:
        raise InputError(out_dir / extra[-1][1], f"is a partition of a previous run with at least "
                                                 f"{extra[-1][0] + 1} partitions, and this run writes "
                                                 f"{num_parts}: --resume cannot continue it; rerun with "
                                                 f"--overwrite to start over")


_PART_NAME = re.compile(r"^part(\d+)$")


def gathered_edge_counts(comm: Intracomm, published: Dict[int, Tuple[List[FileEntry], List[int]]],
                          num_parts: int) -> np.ndarray:
    """(P, E) edge counts from the records of reused partitions (every partition reused)."""
    rows: Dict[int, List[int]] = {}
    for part in comm.allgather({p: counts for p, (_, counts) in published.items()}):
        rows.update(part)
    return np.array([rows[p] for p in range(num_parts)], dtype=np.int64).reshape(num_parts, -1)


def publish_output(comm: Intracomm, out_dir: Path, entries: List[FileEntry], config: dict, key: RunKey) -> None:
    """Rank 0 writes the manifest of every partition's files, then metadata.json, so
    metadata.json exists only when every partition does. Collective."""
    everyone = comm.gather(entries, root=0)  # a few names and sizes per partition
    with agreed(comm), writing(out_dir):
        if comm.Get_rank() == 0:
            text = json.dumps(config, indent=2) + "\n"
            write_manifest(out_dir, build_manifest([e for rank in everyone for e in rank],
                                                   key.input, key.options, text))
            tmp = out_dir / f".{CONFIG_FILE}.tmp"
            tmp.write_text(text)
            os.replace(tmp, out_dir / CONFIG_FILE)


@contextmanager
def withdrawn_on_error(comm: Intracomm, out_dir: Path) -> Iterator[None]:
    """Run a check of a published output; if it fails (an error agreed on every rank) or the
    run is stopped meanwhile (Ctrl-C, a scheduler's cancel: rank 0 acts alone then), rank 0
    removes metadata.json and the manifest before the error goes on, so the output no longer
    looks complete to DGL or to `verify --quick`. The partition files stay, for inspection
    and for `--resume`, which publishes them again once checked."""
    def withdraw() -> None:
        if comm.Get_rank() == 0:
            for name in (CONFIG_FILE, MANIFEST_FILE):
                try:
                    (Path(out_dir) / name).unlink(missing_ok=True)
                except OSError:
                    pass  # the error being raised says more than this one would

    try:
        with undone_if_stuck(withdraw):
            yield
    except (DistpartError, Stopped, KeyboardInterrupt):
        withdraw()
        raise


def prepare_output(comm: Intracomm, out_dir: Path, mine: range) -> None:
    """Remove a stale metadata.json and manifest first: an interrupted rerun must not look complete."""
    with agreed(comm):
        try:
            if comm.Get_rank() == 0:
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / CONFIG_FILE).unlink(missing_ok=True)
                (out_dir / MANIFEST_FILE).unlink(missing_ok=True)
        except OSError as e:
            raise InputError(out_dir, f"cannot prepare output folder: {e.strerror}") from None
    with agreed(comm):
        try:
            for p in mine:
                (part_dir(out_dir, p)).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(out_dir, f"cannot create partition folder: {e.strerror}") from None
