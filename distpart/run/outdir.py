"""What a run may write into its output folders, decided before it writes anything.

A cluster job must never destroy its input or a user's files. Before the first write, the
folders a command writes (partitions: OUT_DIR; an assignment: ASSIGN_DIR) are checked:

* no input file may be replaced: the folder must not be the input folder or inside it, no
  file the input's metadata.json names may sit where distpart writes (`metadata.json`,
  `part<p>/`, `<ntype>.txt`, ...), and nothing distpart writes may be a symbolic link (a
  link could lead a write anywhere, the input included);
* names distpart writes that are already there must have been written by distpart: a folder
  distpart writes gets a marker file first (`.distpart-owner`); without it, an existing
  `metadata.json` or `<ntype>.txt` belongs to someone else and the run is refused;
* a previous distpart output is replaced only with `--overwrite`, which first removes what
  that run wrote (including `part<p>/` folders of a run with more partitions), never what
  the current run reads, and never a file distpart does not write: a user's file inside
  `part<p>/` or the assignment folder makes `--overwrite` refuse, naming it; or continued
  with `--resume`, which keeps it for the stages to check (see `resume`).

Pure file operations; the CLI runs them on rank 0 inside `agreed`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence

from ..errors import InputError
from ..paths import CONFIG_FILE, GRAPHBOLT_FILE, OWNER_MARKER, PART_FILES, STAGED_SUFFIX
from .lock import LOCK_NAME
from .resume import RECORD

MARKER = OWNER_MARKER
PARTITIONS, ASSIGNMENT = "partitions", "assignment"

# Work folders too (kaminpar.WORK_FOLDER, api.INPUT_FOLDER): removed when their run ends, but
# left behind by a killed one, so --overwrite removes them with the rest.
# A rank's record of a bug (mpi.failure.RECORD_PREFIX) lands in the folder it writes.
_ERROR_RECORD = r"distpart-error-rank\d+\.txt"
_PARTITION_NAMES = re.compile(r"^(part\d+|\.metadata\.json\.tmp|report\.json|distpart-manifest\.json"
                              r"|\.distpart-partition-graph-input|" + _ERROR_RECORD + r")$")
_ASSIGNMENT_FILES = ("partition_meta.json", ".partition_meta.json.tmp", RECORD, f"{RECORD}.tmp",
                     ".distpart-kaminpar")
# Folders distpart creates for its own work and removes whole (everything inside is its own).
_WORK_FOLDERS = (".distpart-kaminpar", ".distpart-partition-graph-input")
# What a part<p>/ folder holds: the files, their staged names, the completion record.
_IN_PARTITION = frozenset([*PART_FILES, *(n + STAGED_SUFFIX for n in PART_FILES), GRAPHBOLT_FILE,
                           Path(GRAPHBOLT_FILE).stem + STAGED_SUFFIX, RECORD, f"{RECORD}.tmp"])


@dataclass(frozen=True)
class OutputFolder:
    """A folder a command writes, and what kind of output goes there."""

    path: Path
    kind: str                       # PARTITIONS or ASSIGNMENT
    node_types: Sequence[str] = ()  # the `<ntype>.txt` files of an assignment (here or in a subfolder)
    default_assign_dir: str = ""    # for PARTITIONS: pipeline's assignment subfolder, if any

    def writes(self, name: str) -> bool:
        """Whether distpart writes top-level entry `name` in such a folder."""
        if name in (MARKER, LOCK_NAME):
            return True
        if self.kind == PARTITIONS:
            return (name == CONFIG_FILE or bool(_PARTITION_NAMES.match(name))
                    or (bool(self.default_assign_dir) and name == self.default_assign_dir))
        return (name in _ASSIGNMENT_FILES or name in {f"{t}.txt" for t in self.node_types}
                or bool(re.fullmatch(_ERROR_RECORD, name)))

    def foreign(self, entry: Path) -> Optional[Path]:
        """The first thing inside `entry` (a folder this output writes) that distpart does not
        write, or None: what `--overwrite` must not delete."""
        if not entry.is_dir() or entry.is_symlink() or entry.name in _WORK_FOLDERS:
            return None
        if _PARTITION_FOLDER.match(entry.name):
            known: Callable[[str], bool] = _IN_PARTITION.__contains__
        elif self.kind == PARTITIONS and entry.name == self.default_assign_dir:
            # The previous run may have had other node types: its config names them.
            types = [*self.node_types, *_config_node_types(self.path / CONFIG_FILE)]
            known = OutputFolder(entry, ASSIGNMENT, types).writes
        else:
            return None
        for name in sorted(os.listdir(entry)):
            inner = entry / name
            if not known(name) or inner.is_symlink() or (inner.is_dir() and name not in _WORK_FOLDERS):
                return inner
        return None


_PARTITION_FOLDER = re.compile(r"^part\d+$")


def _config_node_types(config: Path) -> List[str]:
    """The node types a previous output's partition config names ([] if it has none)."""
    try:
        ntypes = json.loads(config.read_text(encoding="utf-8")).get("ntypes", {})
        return [str(t) for t in ntypes] if isinstance(ntypes, dict) else []
    except (OSError, ValueError, AttributeError):
        return []


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _only_locks(entry: Path) -> bool:
    """A folder holding nothing but distpart's lock (and marker): made by this run's lock."""
    if not entry.is_dir() or entry.is_symlink():
        return False
    names = set(os.listdir(entry))
    return LOCK_NAME in names and names <= {MARKER, LOCK_NAME}


def refuse_inside_input(where: Path, input_root: Path) -> None:
    """Refuse an output folder that is the input folder or lies inside it (symlinks resolved).
    Also checked before the folder lock is taken, so not even a lock file lands in the input.
    `input_root` may be the metadata file itself (any name, as GSProcessing writes it): its
    folder is the input."""
    target, root = Path(where).resolve(), Path(input_root).resolve()
    if root.is_file():
        root = root.parent
    if target == root:
        raise InputError(where, "is the input graph's folder: write the output somewhere else "
                                "(distpart never writes into its input)")
    if _inside(target, root):
        raise InputError(where, f"is inside the input graph's folder {root}: write the output "
                                f"somewhere else (distpart never writes into its input)")


def plan_removals(folder: OutputFolder, input_root: Path, input_files: Iterable[Path],
                  reads: Sequence[Path], overwrite: bool, resume: bool = False) -> List[Path]:
    """Check one output folder; return what `--overwrite` must remove first (else []).

    `input_files`: every file of the input graph (metadata.json included); `reads`: other
    paths this run reads (an assignment folder), which are never removed.
    """
    where = folder.path
    target = where.resolve()
    refuse_inside_input(where, input_root)
    for f in input_files:
        f = Path(f).resolve()
        if _inside(f, target) and folder.writes(f.relative_to(target).parts[0]):
            raise InputError(where, f"writing here would replace the input file {f}: choose another folder")
    if not where.exists():
        return []
    if not where.is_dir():
        raise InputError(where, "exists and is not a folder")
    for n in sorted(os.listdir(where)):
        if folder.writes(n) and (where / n).is_symlink():
            raise InputError(where / n, f"is a symbolic link (to {os.readlink(where / n)}): distpart "
                                        f"writes only real files and folders in its output folder, "
                                        f"so that no write can land elsewhere; remove the link")
    protected = [Path(r).resolve() for r in reads]
    present = sorted(n for n in os.listdir(where)
                     if folder.writes(n) and n not in (MARKER, LOCK_NAME) and not _only_locks(where / n)
                     and not any(_inside(p, (target / n).resolve()) for p in protected))
    if not present:
        return []
    if not (where / MARKER).is_file():
        raise InputError(where / present[0], "exists and was not written by distpart: refusing to "
                                             "replace it (choose another output folder)")
    if resume:
        return []
    if not overwrite:
        raise InputError(where, f"holds the output of a previous distpart run ({', '.join(present[:4])}"
                                f"{', ...' if len(present) > 4 else ''}): pass --overwrite to replace it, "
                                f"or --resume to continue it")
    for n in present:
        alien = folder.foreign(where / n)
        if alien is not None:
            raise InputError(alien, "was not written by distpart: --overwrite removes only what "
                                    "distpart wrote; move this file away (or choose another output "
                                    "folder) and run again")
    return [where / n for n in present]


def claim(folders: Sequence[OutputFolder], removals: Sequence[Path]) -> None:
    """Remove a previous run's files (config first, so nothing half-removed looks complete),
    then mark each folder as distpart's."""
    ordered = sorted(removals, key=lambda p: p.name != CONFIG_FILE)
    for path in ordered:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as e:
            raise InputError(path, f"cannot remove the previous output: {e.strerror}") from None
    for folder in folders:
        try:
            folder.path.mkdir(parents=True, exist_ok=True)
            (folder.path / MARKER).write_text(json.dumps({"tool": "distpart", "kind": folder.kind}) + "\n")
        except FileExistsError:
            raise InputError(folder.path, "exists and is not a folder") from None
        except OSError as e:
            raise InputError(folder.path, f"cannot write in the output folder: {e.strerror}") from None
