"""A partition folder's life during Step 2: files written under staged names, each partition
moved into place with its completion record as soon as it is whole, partitions a previous
run completed kept on `--resume`, and rank 0's manifest and metadata.json written last, so
metadata.json exists only when every partition does.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from ..mpi.collective import agreed
from ..partitions.manifest import MANIFEST_FILE, build_manifest, check_files, file_entry, write_manifest
from ..paths import CONFIG_FILE, GRAPHBOLT_FILE, PART_FILES, STAGED_SUFFIX, part_dir
from ..run.guards import writing
from ..run.progress import Progress
from ..run.resume import RunKey, check_record, remove_record, write_record

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
    entries = []
    for name in names:
        final = part_dir(out_dir, p) / name
        os.replace(staged_path(out_dir, p, name), final)
        entries.append(file_entry(out_dir, final))
    write_record(part_dir(out_dir, p), key, files=dict(entries), edge_counts=edge_counts.tolist())
    return entries


def reusable_partitions(comm: Intracomm, out_dir: Path, mine: range, key: RunKey,
                         progress: Progress) -> Dict[int, Tuple[List[FileEntry], List[int]]]:
    """This rank's partitions that a previous run completed with the same key and whose files
    are intact: {p: (manifest entries, edge counts per type)}. A record of another run is an
    error on every rank; a damaged partition is rebuilt. Collective."""
    from ..errors import OutputError
    reusable = {}
    with agreed(comm):
        for p in mine:
            folder = part_dir(out_dir, p)
            record = check_record(folder, key)
            if record is None:
                continue
            entries = sorted(record.get("files", {}).items())
            try:
                check_files(out_dir, entries)
            except OutputError as e:
                progress.note(f"resume: rebuilding part{p}: {e}")
                remove_record(folder)
                continue
            reusable[p] = (entries, list(record.get("edge_counts", [])))
    reused = comm.allreduce(len(reusable))
    if comm.Get_rank() == 0:
        progress.note(f"resume: {reused} of {comm.Get_size() * len(mine)} partitions complete "
                      f"from a previous run, kept")
    return reusable


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
