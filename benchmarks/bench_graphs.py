"""The graphs of the Step 1 benchmark (bench_assign.py), each with 2 node types and two
training masks that follow its structure, written once in DGL's chunked format and kept.

Graph names: `KIND-SIZE` with KIND rmat, community or mesh and SIZE a node count such as
200k or 2m (rmat and community get 10 edges per node, the mesh 2), and `debian`:

* `rmat-N`: distpart.synthetic.rmat_graph (Graph500's RMAT, node types user 60% / item
  40%, 3 edge types, IDs randomly relabelled).
* `community-N`: Chung-Lu power-law degrees with 100 planted communities, 15% of the edges
  mixed across them (synthetic.graph_models.chung_lu). Type b: the communities c with
  c mod 3 = 2.
* `smalltype-N`: the community graph with one community as type b (about 1% of the nodes):
  a small node type that follows the structure, which a nodes-only balance leaves out of
  every partition but one (DGL's servers then fail to start).
* `mesh-N`: the 2-D torus (synthetic.mesh_graph's model). Type b: the third of the nodes
  nearest a random node (a breadth-first ball, a diamond of the grid).
* `debian`: the package dependency graph of the Debian (or Ubuntu) release this machine's
  apt knows: the `main` component's Packages index in /var/lib/apt/lists (run `apt-get
  update` first), decompressed by apt's own `apt-helper cat-file`. Nodes: every binary
  package (type `package`) and every name depended on that no package of the index is
  called (type `virtual`: virtual packages, or packages of other components).
  Edges, duplicates dropped: package -> each alternative of its Depends and Pre-Depends
  (`depends`; `depends_v` to a virtual), of its Recommends (`recommends`, `recommends_v`)
  and each name it Provides (`provides`, `provides_v`). The index's file name and Date are
  recorded in graph_info.json.

Training masks, on the first node type only, as DGL graphs carry them (`<type>/train_mask`
about 10% of that type, `<type>/sparse_train_mask` about 1%), chosen by structure so that a
partitioner that follows the structure concentrates them:
* rmat and mesh: the first nodes of the type in breadth-first order from a random node of
  the symmetrized graph (inside a level, higher degree first: hubs near the start);
* community: whole communities in order, then part of the next;
* debian: packages of Section python or ruby (train), ocaml (sparse).

Each graph lives in WORK/graphs/NAME; graph_info.json, written last, marks it complete.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from distpart import write_graph
from distpart.synthetic import rmat_graph, read_whole_graph
from distpart.synthetic.graph_models import chung_lu, chung_lu_communities, torus

INFO_FILE = "graph_info.json"
SMALL = ("rmat-200k", "community-200k", "mesh-200k", "debian")
LARGE = ("rmat-2m",)
COMMUNITIES = 100
MIXING = 0.15
TRAIN_SHARE, SPARSE_SHARE = 0.10, 0.01
DEBIAN_TRAIN_SECTIONS, DEBIAN_SPARSE_SECTIONS = ("python", "ruby"), ("ocaml",)
SEED = 1
# Edges generated (and relabelled) per call: bounds the generator's temporaries.
EDGE_BATCH = 2_000_000

Edges = Dict[str, Tuple[np.ndarray, np.ndarray]]


def graph_names(spec: str) -> List[str]:
    """`small`, `large`, `all` or a comma-separated list of names."""
    groups = {"small": list(SMALL), "large": list(LARGE), "all": [*SMALL, *LARGE]}
    names: List[str] = []
    for part in spec.split(","):
        names += groups.get(part.strip(), [part.strip()])
    for name in names:
        _parse(name)
    return list(dict.fromkeys(names))


def _parse(name: str) -> Tuple[str, int]:
    """(kind, nodes) of a graph name; ValueError for an unknown one."""
    if name == "debian":
        return name, 0
    m = re.fullmatch(r"(rmat|community|smalltype|mesh)-(\d+)([km]?)", name)
    if not m:
        raise ValueError(f"unknown graph {name!r}: rmat-N, community-N, smalltype-N, mesh-N (N like 200k, 2m) or debian")
    return m.group(1), int(m.group(2)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(3)]


def build(name: str, work: Path) -> Path:
    """The graph's folder (metadata.json, graph_info.json), built unless already there."""
    folder = work / "graphs" / name
    if (folder / INFO_FILE).exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    kind, n = _parse(name)
    print(f"building graph {name} in {folder}", flush=True)
    if kind == "rmat":
        num_nodes, edges, masks, info = _rmat(n, work / "graphs" / f".{name}-raw")
    elif kind in ("community", "smalltype"):
        num_nodes, edges, masks, info = _community(n, small_type=kind == "smalltype")
    elif kind == "mesh":
        num_nodes, edges, masks, info = _mesh(n)
    else:
        num_nodes, edges, masks, info = _debian()
    first = next(iter(num_nodes))
    write_graph({"num_nodes": num_nodes, "edges": edges,
                 "node_data": {first: {"train_mask": masks[0], "sparse_train_mask": masks[1]}}},
                folder, num_chunks=8, edge_format="numpy", graph_name=name.replace("-", "_"))
    info.update(name=name, num_nodes=num_nodes, num_edges={e: len(s) for e, (s, _) in edges.items()},
                train_mask=f"{first}/train_mask", sparse_train_mask=f"{first}/sparse_train_mask",
                train_nodes=int(masks[0].sum()), sparse_train_nodes=int(masks[1].sum()))
    (folder / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
    return folder


def info(folder: Path) -> dict:
    return json.loads((folder / INFO_FILE).read_text())


# ----------------------------------------------------------------------------- structure


def undirected_csr(src: np.ndarray, dst: np.ndarray, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """(indptr, neighbours) of the symmetrized graph, duplicates kept (BFS does not mind)."""
    rows = np.concatenate([src, dst])
    cols = np.concatenate([dst, src])
    order = np.argsort(rows, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    return indptr, cols[order]


def bfs_order(indptr: np.ndarray, neighbours: np.ndarray, start: int, wanted: np.ndarray, count: int) -> np.ndarray:
    """The first `count` nodes with `wanted[node]` in breadth-first order from `start`
    (inside a level, higher degree first, then lower ID); unreached ones follow in that
    order too. Level by level with array operations: O(V + E)."""
    n = len(indptr) - 1
    degree = np.diff(indptr)
    seen = np.zeros(n, dtype=bool)
    seen[start] = True
    frontier = np.array([start], dtype=np.int64)
    picked: List[np.ndarray] = []
    got = 0
    while len(frontier) and got < count:
        level = frontier[np.lexsort((frontier, -degree[frontier]))]
        take = level[wanted[level]]
        picked.append(take)
        got += len(take)
        begin, length = indptr[frontier], degree[frontier]
        steps = np.arange(int(length.sum()), dtype=np.int64) - np.repeat(np.cumsum(length) - length, length)
        nxt = np.unique(neighbours[np.repeat(begin, length) + steps])
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
    if got < count:   # a disconnected rest
        rest = np.flatnonzero(~seen & wanted)
        picked.append(rest[np.lexsort((rest, -degree[rest]))])
    return np.concatenate(picked)[:count]


def mask_of(n: int, chosen: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[chosen] = True
    return mask


def bfs_masks(src: np.ndarray, dst: np.ndarray, n: int, lo: int, hi: int,
              rng: np.random.Generator) -> Tuple[Tuple[np.ndarray, np.ndarray], int]:
    """Train and sparse train masks of homogeneous nodes [lo, hi) by BFS from a random node
    of that range; (masks over [lo, hi), the start node)."""
    indptr, neighbours = undirected_csr(src, dst, n)
    wanted = np.zeros(n, dtype=bool)
    wanted[lo:hi] = True
    start = int(rng.integers(lo, hi))
    order = bfs_order(indptr, neighbours, start, wanted, round(TRAIN_SHARE * (hi - lo))) - lo
    sparse = order[:round(SPARSE_SHARE * (hi - lo))]
    return (mask_of(hi - lo, order), mask_of(hi - lo, sparse)), start


def split_types(src: np.ndarray, dst: np.ndarray, is_b: np.ndarray) -> Tuple[Dict[str, int], Edges, np.ndarray]:
    """A one-type graph as types a (is_b false) and b: (node counts, edges per canonical type
    a:aa:a, a:ab:b, b:ba:a, b:bb:b in per-type IDs, each node's per-type ID)."""
    local = np.empty(len(is_b), dtype=np.int64)
    local[~is_b] = np.arange(int((~is_b).sum()))
    local[is_b] = np.arange(int(is_b.sum()))
    edges: Edges = {}
    for s in (False, True):
        for d in (False, True):
            keep = (is_b[src] == s) & (is_b[dst] == d)
            ts, td = "b" if s else "a", "b" if d else "a"
            edges[f"{ts}:{ts}{td}:{td}"] = (local[src[keep]], local[dst[keep]])
    return {"a": int((~is_b).sum()), "b": int(is_b.sum())}, edges, local


# ----------------------------------------------------------------------------- the graphs


def _generated(model, n: int, m: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """m edges of a one-type edge model, EDGE_BATCH at a time."""
    src, dst = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    for first in range(0, m, EDGE_BATCH):
        count = min(EDGE_BATCH, m - first)
        rng = np.random.default_rng([seed, first])
        src[first:first + count], dst[first:first + count] = model(rng, "_N:_E:_N", n, n, first, count, seed)
    return src, dst


def _rmat(n: int, raw: Path):
    shutil.rmtree(raw, ignore_errors=True)
    meta = rmat_graph(raw, n, 10 * n, num_chunks=8, seed=SEED)
    ref = read_whole_graph(meta)
    shutil.rmtree(raw, ignore_errors=True)
    num_nodes = dict(ref["num_nodes"])
    offsets = {"user": 0, "item": num_nodes["user"]}
    src = np.concatenate([s + offsets[e.split(":")[0]] for e, (s, _) in ref["edges"].items()])
    dst = np.concatenate([d + offsets[e.split(":")[2]] for e, (_, d) in ref["edges"].items()])
    masks, start = bfs_masks(src, dst, sum(num_nodes.values()), 0, num_nodes["user"], np.random.default_rng(SEED))
    info = {"source": f"distpart.synthetic.rmat_graph({n}, {10 * n}, seed={SEED})",
            "types": "user / item as rmat_graph makes them",
            "masks": f"users in BFS order from user {start} (higher degree first inside a level)"}
    return num_nodes, ref["edges"], masks, info


def _community(n: int, small_type: bool = False):
    src, dst = _generated(chung_lu(COMMUNITIES, MIXING), n, 10 * n, SEED)
    community = chung_lu_communities(n, COMMUNITIES, "_N", SEED)
    is_b = community == 2 if small_type else community % 3 == 2
    num_nodes, edges, local = split_types(src, dst, is_b)
    del src, dst
    a_nodes = np.flatnonzero(~is_b)
    order = local[a_nodes[np.lexsort((a_nodes, community[a_nodes]))]]   # by community, then ID
    na = num_nodes["a"]
    masks = (mask_of(na, order[:round(TRAIN_SHARE * na)]), mask_of(na, order[:round(SPARSE_SHARE * na)]))
    info = {"source": f"synthetic.graph_models.chung_lu({COMMUNITIES} communities, mixing {MIXING}), "
                      f"{n} nodes, {10 * n} edges, seed {SEED}",
            "types": "b: community 2" if small_type else "b: communities c with c mod 3 = 2",
            "masks": "type-a nodes of communities 0, 1, 3, 4, ... in order (whole communities, then part of the next)"}
    return num_nodes, edges, masks, info


def _mesh(n: int):
    src, dst = _generated(torus, n, 2 * n, SEED)
    rng = np.random.default_rng(SEED)
    indptr, neighbours = undirected_csr(src, dst, n)
    centre = int(rng.integers(0, n))
    is_b = mask_of(n, bfs_order(indptr, neighbours, centre, np.ones(n, dtype=bool), n // 3))
    num_nodes, edges, local = split_types(src, dst, is_b)
    # Masks: type-a nodes in BFS order over the whole mesh, in a's IDs.
    start = int(rng.choice(np.flatnonzero(~is_b)))
    na = num_nodes["a"]
    order = local[bfs_order(indptr, neighbours, start, ~is_b, round(TRAIN_SHARE * na))]
    masks = (mask_of(na, order), mask_of(na, order[:round(SPARSE_SHARE * na)]))
    info = {"source": f"synthetic.graph_models.torus, {n} nodes, {2 * n} edges, seed {SEED}",
            "types": f"b: the {n // 3} nodes nearest node {centre} (BFS ball)",
            "masks": f"type-a nodes in BFS order from node {start}"}
    return num_nodes, edges, masks, info


# ----------------------------------------------------------------------------- Debian


def packages_index(lists: Path = Path("/var/lib/apt/lists")) -> Path:
    """The release's `main` Packages index (no -updates, -security or -backports suite)."""
    found = sorted(p for p in lists.glob("*_dists_*_main_binary-*_Packages*")
                   if re.search(r"_dists_[^_-]+_main_binary-[^_]+_Packages(\.\w+)?$", p.name))
    if not found:
        raise SystemExit(f"no main Packages index in {lists}: run `apt-get update` (the debian graph is built from it)")
    return found[0]


def _apt_text(path: Path) -> str:
    """A (compressed) apt list file as text, decompressed by apt itself."""
    helper = shutil.which("apt-helper") or "/usr/lib/apt/apt-helper"
    return subprocess.run([helper, "cat-file", str(path)], check=True, capture_output=True).stdout.decode(
        "utf-8", errors="replace")


def _release_date(index: Path) -> str:
    release = index.with_name(re.sub(r"_main_binary-.*$", "_InRelease", index.name))
    if not release.exists():
        return "unknown"
    m = re.search(r"^Date: (.*)$", release.read_text(errors="replace"), re.M)
    return m.group(1).strip() if m else "unknown"


_FIELDS = ("Package", "Section", "Depends", "Pre-Depends", "Recommends", "Provides")


def parse_packages(text: str) -> List[Dict[str, str]]:
    """The stanzas of a Packages file, with the fields the graph needs."""
    out = []
    for stanza in text.split("\n\n"):
        fields: Dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t"):
                if key in fields:
                    fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            if key in _FIELDS:
                fields[key] = value.strip()
        if "Package" in fields:
            out.append(fields)
    return out


def dependency_names(field: str) -> List[str]:
    """Every alternative of a Depends-style field: versions, architectures, profiles and
    ':any' qualifiers removed."""
    names = []
    for alt in re.split(r"[,|]", field):
        alt = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", " ", alt).strip()
        if alt:
            names.append(alt.split()[0].split(":")[0])
    return names


def debian_graph(stanzas: List[Dict[str, str]]):
    """(node counts, edges, masks, section per package) of a parsed Packages index."""
    packages = sorted({s["Package"] for s in stanzas})
    pid = {p: i for i, p in enumerate(packages)}
    section: Dict[str, str] = {}
    links: Dict[str, List[Tuple[str, str]]] = {"depends": [], "recommends": [], "provides": []}
    for s in stanzas:
        p = s["Package"]
        section.setdefault(p, s.get("Section", ""))
        for field, rel in (("Depends", "depends"), ("Pre-Depends", "depends"), ("Recommends", "recommends"),
                           ("Provides", "provides")):
            links[rel] += [(p, d) for d in dependency_names(s.get(field, ""))]
    # A provided name nobody depends on is no dependency: only depended-on names are nodes.
    virtual = sorted({d for rel in ("depends", "recommends") for _, d in links[rel]} - set(pid))
    vid = {v: i for i, v in enumerate(virtual)}
    edges: Edges = {}
    for rel, pairs in links.items():
        for kind, ids, suffix in (("package", pid, ""), ("virtual", vid, "_v")):
            both = np.array([(pid[a], ids[b]) for a, b in pairs if b in ids], dtype=np.int64).reshape(-1, 2)
            if len(both):
                both = np.unique(both, axis=0)
                edges[f"package:{rel}{suffix}:{kind}"] = (both[:, 0].copy(), both[:, 1].copy())
    sec = np.array([section[p].split("/")[-1] for p in packages])
    masks = (np.isin(sec, DEBIAN_TRAIN_SECTIONS), np.isin(sec, DEBIAN_SPARSE_SECTIONS))
    return {"package": len(packages), "virtual": len(virtual)}, edges, masks


def _debian():
    index = packages_index()
    num_nodes, edges, masks = debian_graph(parse_packages(_apt_text(index)))
    info = {"source": f"{index.name} (Date: {_release_date(index)})",
            "types": "package: binary packages of the index; virtual: names depended on that no "
                     "package of the index is called",
            "masks": f"packages of Section {' or '.join(DEBIAN_TRAIN_SECTIONS)} (train), "
                     f"{' or '.join(DEBIAN_SPARSE_SECTIONS)} (sparse)"}
    return num_nodes, edges, masks, info
