"""The output's manifest: every file with its size and checksum, the input's fingerprint and
the options, written after every partition is complete and before `metadata.json`.

`metadata.json` says "complete"; the manifest says "intact": `distpart verify --quick`
checks every file against it without reading the input, which is what a user wants after
copying partitions between clusters or when a node crashed while writing.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Tuple

from ..errors import OutputError
from ..chunked.metadata import GraphMeta, read_json

MANIFEST_FILE = "distpart-manifest.json"
VERSION = 1
_CHUNK = 4 << 20


def file_digest(path: "str | os.PathLike[str]") -> str:
    """sha256 of a file, read in 4 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(_CHUNK), b""):
            h.update(piece)
    return h.hexdigest()


def file_entry(root: Path, path: Path) -> Tuple[str, Dict[str, Any]]:
    """(path relative to root, {"size", "sha256"}) of one written file."""
    return path.relative_to(root).as_posix(), {"size": path.stat().st_size, "sha256": file_digest(path)}


def input_fingerprint(meta: GraphMeta) -> str:
    """A cheap fingerprint of the input: metadata.json's bytes and each data file's name,
    size and modification time (hashing terabytes of input is not cheap). Names are relative
    to the input folder, so the same input reached from another working directory matches."""
    h = hashlib.sha256(Path(meta.path).read_bytes())
    root = meta.root.resolve()
    for _, path in meta.all_files():
        real = Path(path).resolve()
        name = real.relative_to(root).as_posix() if root in real.parents else os.fspath(real)
        st = os.stat(real)
        h.update(f"\0{name}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()


def build_manifest(files: Iterable[Tuple[str, Dict[str, Any]]], fingerprint: str,
                   options: Mapping[str, Any], config_text: str) -> Dict[str, Any]:
    """The manifest object; `config_text` is the metadata.json about to be written."""
    entries = dict(sorted(files))
    entries["metadata.json"] = {"size": len(config_text.encode()),
                                "sha256": hashlib.sha256(config_text.encode()).hexdigest()}
    return {"version": VERSION, "tool": "distpart", "input_fingerprint": fingerprint,
            "options": dict(options), "files": entries}


def write_manifest(out_dir: Path, manifest: Mapping[str, Any]) -> None:
    tmp = out_dir / f".{MANIFEST_FILE}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, out_dir / MANIFEST_FILE)


def read_manifest(out_dir: Path) -> Dict[str, Any]:
    path = out_dir / MANIFEST_FILE
    if not path.exists():
        raise OutputError(path, "does not exist (the output is incomplete, or was written by "
                                "a distpart without manifests)")
    manifest = read_json(path, OutputError)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("size"), int) and isinstance(v.get("sha256"), str)
            for v in files.values()):
        raise OutputError(path, "malformed manifest: 'files' must map paths to {size, sha256}")
    return manifest


def check_files(out_dir: Path, entries: List[Tuple[str, Dict[str, Any]]]) -> None:
    """OutputError for the first listed file that is missing, resized or changed."""
    root = out_dir.resolve()
    for rel, want in entries:
        path = out_dir / rel
        if root not in path.resolve().parents:
            raise OutputError(out_dir / MANIFEST_FILE, f"lists a path outside the output: {rel!r}")
        if not path.is_file():
            raise OutputError(path, "is listed in the manifest but missing")
        size = path.stat().st_size
        if size != want["size"]:
            raise OutputError(path, f"has {size} bytes but the manifest says {want['size']} "
                                    f"(truncated or replaced?)")
        if file_digest(path) != want["sha256"]:
            raise OutputError(path, "differs from the manifest's checksum (changed after writing?)")
