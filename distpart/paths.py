"""Where distpart writes: the names of the output's files, and every path built from a name
must stay inside its root; and reading a user's text file with errors that name it.

Type names come from the input's metadata.json, often a downloaded dataset. They are
checked when the metadata is parsed (`metadata.check_name`); this is the second line: a
path built from a name is resolved and refused if it would land outside the folder it
belongs to (an absolute name, `..`, a separator that slipped through).
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import DistpartError, InputError


def read_user_text(path: "str | os.PathLike[str]", error: "type[DistpartError]" = InputError,
                   encoding: str = "utf-8") -> str:
    """A text file a user gave us, whole; a missing, unreadable or undecodable file is `error`
    naming it (for JSON, hostfiles, ip_config.txt: one message style for all)."""
    try:
        return Path(path).read_text(encoding=encoding)
    except FileNotFoundError:
        raise error(path, "file does not exist") from None
    except UnicodeDecodeError as e:
        raise error(path, f"not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise error(path, f"cannot read: {e.strerror}") from None


def file_in(root: "str | os.PathLike[str]", name: str, suffix: str = "") -> Path:
    """`root/(name + suffix)`, refused unless it is a direct child of `root`."""
    root = Path(root)
    leaf = name + suffix
    if not name or "\0" in leaf or os.sep in leaf or (os.altsep and os.altsep in leaf) \
            or name in (".", "..") or leaf in (".", ".."):
        raise InputError(root, f"refusing to write {leaf!r}: a name used as a file name must not be "
                               f"empty, '.', '..' or contain a path separator")
    path = root / leaf
    if path.resolve().parent != root.resolve():
        raise InputError(root, f"refusing to write {leaf!r}: it resolves outside the folder")
    return path


# Written first into every folder distpart writes: what makes a folder distpart's to replace.
OWNER_MARKER = ".distpart-owner"
# The partition config JSON at the top of an output folder (DGL's loader opens this file).
CONFIG_FILE = "metadata.json"
# The files of one partition folder, and the suffix they carry until the partition is complete.
PART_FILES = ("graph.dgl", "node_feat.dgl", "edge_feat.dgl", "orig_nids.dgl", "orig_eids.dgl")
STAGED_SUFFIX = ".partial"
# With --graphbolt each partition also holds DGL's GraphBolt graph, named as DGL 2.1.0 names it.
GRAPHBOLT_FILE = "fused_csc_sampling_graph.pt"


def part_dir(out_dir: "str | os.PathLike[str]", p: int) -> Path:
    """Partition p's folder, `out_dir/part<p>`, as DGL names it."""
    return Path(out_dir) / f"part{p}"


def check_output_file(path: "str | os.PathLike[str]", what: str = "output file") -> Path:
    """Refuse, before any work, a file path distpart was told to write that it could not
    write safely: a symbolic link (a write would land wherever it leads, the input included),
    anything but a regular file, a missing parent folder, or a folder it may not write."""
    path = Path(path)
    if path.is_symlink():
        raise InputError(path, f"is a symbolic link (to {os.readlink(path)}): distpart writes only "
                               f"real files, so that no write can land elsewhere; remove the link")
    if path.exists() and not path.is_file():
        raise InputError(path, f"exists and is not a regular file: cannot write the {what} here")
    parent = path.parent
    if not parent.is_dir():
        raise InputError(path, f"cannot write the {what}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(path, f"cannot write the {what}: the folder {parent} is not writable")
    return path


def write_file(path: "str | os.PathLike[str]", data: "bytes | str", what: str = "output file") -> Path:
    """Write `data` to `path` safely: never through a symbolic link or into something that is
    not a regular file, and atomically (a temporary file beside it, created with O_EXCL and
    without following links, then renamed over the name), so a reader never sees half a file.
    Every file distpart writes outside the partition folders goes through here."""
    path = check_output_file(path, what)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(path, f"cannot write the {what}: {e.strerror}") from None
    return path
