"""A benchmark graph (bench_graphs.py) with what training needs: a `feat` of DIM float32
columns on every node type that has none (standard normal, seeded per type and chunk) and a
`label` of CLASSES classes on the training mask's node type, learnable from the feature (the
arg-max of its first CLASSES columns). The real cost of training on a graph is fetching such
rows, so every node type gets one.

The copy lives beside the graph, WORK/graphs/NAME-trainDIM, and is reused while its
`train_features.json` (written last) matches; its structure and masks are hard links to the
graph's own files (a copy where the file system has none), so it costs only the new features.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

CLASSES = 4
MARK = "train_features.json"
INFO_FILE = "graph_info.json"   # bench_graphs.INFO_FILE


def _link_tree(src: Path, dst: Path) -> None:
    """Every file of src at the same place under dst, metadata.json aside (rewritten)."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() or rel.as_posix() in ("metadata.json", MARK):
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:   # another file system, or no hard links there
            shutil.copy2(path, target)


def with_features(base: Path, dim: int = 64, seed: int = 1) -> Path:
    """The folder of `base`'s graph with `feat` on every node type and `label` on the
    training mask's type (see the module docstring), written unless already there."""
    info = json.loads((base / INFO_FILE).read_text())
    want = {"base": str(base.resolve()), "base_info": info, "dim": dim, "seed": seed, "classes": CLASSES}
    folder = base.parent / f"{base.name}-train{dim}"
    if (folder / MARK).exists() and json.loads((folder / MARK).read_text()) == want:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    print(f"adding a {dim}-float feature on every node type: {folder}", flush=True)
    _link_tree(base, folder)
    meta = json.loads((base / "metadata.json").read_text())
    train_ntype = info["train_mask"].split("/")[0]
    (folder / "node_data").mkdir(exist_ok=True)
    for t, ntype in enumerate(meta["node_type"]):
        feats = meta.setdefault("node_data", {}).setdefault(ntype, {})
        if "feat" in feats:
            continue
        files, labels = [], []
        for k, rows in enumerate(meta["num_nodes_per_chunk"][t]):
            x = np.random.default_rng([seed, t, k]).standard_normal((rows, dim), dtype=np.float32)
            rel = f"node_data/train{dim}-{t}-feat-{k}.npy"
            np.save(folder / rel, x)
            files.append(rel)
            if ntype == train_ntype:
                rel = f"node_data/train{dim}-{t}-label-{k}.npy"
                np.save(folder / rel, x[:, :CLASSES].argmax(axis=1).astype(np.int64))
                labels.append(rel)
        feats["feat"] = {"format": {"name": "numpy"}, "data": files}
        if labels and "label" not in feats:
            feats["label"] = {"format": {"name": "numpy"}, "data": labels}
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    (folder / MARK).write_text(json.dumps(want, indent=2) + "\n")
    return folder
