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
