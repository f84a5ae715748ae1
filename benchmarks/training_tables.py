"""The training benchmark's tables from `bench_training.py`'s JSON: the console table it prints
and `benchmarks/results/training_tables.md`, which the docs link to.

    python benchmarks/training_tables.py --out benchmarks/results/training_tables.md   # DOCUMENT_FILES
    python benchmarks/training_tables.py benchmarks/results/training.json              # one file, printed

One row per (graph, method row): remote feature rows per epoch (summed over trainers, the mean
of the epochs) and their ratio to the baseline row of the same graph (ParMETIS by default),
local rows, MB on the wire per epoch (every machine's transmitted bytes), moved seeds (as the
trainers counted them), remote sampling requests per epoch, and the partition's cut, halo,
imbalances and constraints over --imbalance (from `distpart report`), Step 1's wall time and
peak RSS (largest rank); a failed row says why.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from assign_tables import emit, imbalance_cells

COLUMNS = ["graph", "method", "balance", "remote rows/epoch", "vs {baseline}", "local rows/epoch", "MB/epoch",
           "moved seeds", "sampling req/epoch", "cut %", "halo total", "halo max", "imb nodes", "imb types",
           "imb train", "over ub", "Step 1 s", "Step 1 MB", "status"]

RESULTS = Path(__file__).resolve().parent / "results"
# training_tables.md, in this order: the cut and fetch objectives with types and the train mask
# balanced, the same on RMAT 2M/20M, and the default output (no balance flags).
DOCUMENT_FILES = ["training.json", "training_rmat_2m.json", "training_default.json"]

LEGEND = """\
{parts} machines (network namespaces), one DGL {dgl} server and one trainer each; a 2-layer R-GCN-style
model, MultiLayerNeighborSampler([{fanouts}]), batch size {batch_size}, {epochs} epochs, a {feat_dim}-float
feature on every node type; training nodes: node_split(..., force_even=True) of the graph's train mask.
remote rows/epoch: input nodes of every mini-batch owned by another machine, summed over batches and
trainers (mean of the epochs); vs {baseline}: its ratio to the {baseline} row of the graph. MB/epoch:
bytes sent on every machine's eth0 (10^6). moved seeds: training nodes a trainer got that its own
partition does not hold. sampling req/epoch: remote sampling requests (one per layer and other
machine holding any of the layer's seeds). cut %: input edges whose endpoints are in different
partitions; halo: remote in-neighbours per partition (total, largest); imb: max/avg per partition
(node types in type order); over ub: balanced constraints above their cap (--imbalance {imbalance};
edges: their own). Step 1: wall time and peak RSS (largest of {ranks} ranks) of distpart's assign stage."""


def _num(x: Optional[float], digits: int = 0) -> str:
    if x is None:
        return ""
    return f"{x:,.{digits}f}"


def baseline_rows(rows: Sequence[Mapping], baseline: str) -> Dict[str, float]:
    """graph -> the baseline row's remote rows per epoch (graphs whose baseline trained)."""
    out = {}
    for r in rows:
        value = r.get("training", {}).get("remote_rows_per_epoch")
        if r["label"] == baseline and value:
            out[r["graph"]] = float(value)
    return out


def _over(over: Mapping[str, Optional[float]]) -> str:
    if not over:
        return "-"
    return ", ".join(f"{k} {v:.4f}" if v is not None else f"{k} not reported" for k, v in over.items())


def cells(rows: Sequence[Mapping], baseline: str) -> List[Dict[str, str]]:
    """The table's cells, one dict per row, keyed by COLUMNS (with the baseline's name)."""
    base = baseline_rows(rows, baseline)
    ratio_col = f"vs {baseline}"
    out = []
    for r in rows:
        c = dict.fromkeys((k.format(baseline=baseline) for k in COLUMNS), "")
        c.update(graph=r["graph"], method=r["label"], balance=r.get("balance_label", ""), status=r.get("status", ""))
        p = r.get("partition")
        if p:
            imb = imbalance_cells(p["imbalance"])
            c.update({"cut %": f"{p['cut_pct']:.2f}", "halo total": _num(p["halo_total"]),
                      "halo max": _num(p["halo_max"]), "imb nodes": imb["imb nodes"], "imb types": imb["imb types"],
                      "imb train": imb["imb train"], "over ub": _over(r.get("over", {}))})
        s1 = r.get("step1")
        if s1:
            c.update({"Step 1 s": f"{s1['wall_s']:.1f}", "Step 1 MB": _num(s1["peak_rss_mb"])})
        t = r.get("training")
        if t:
            remote = t["remote_rows_per_epoch"]
            c.update({"remote rows/epoch": _num(remote), "local rows/epoch": _num(t["local_rows_per_epoch"]),
                      "MB/epoch": f"{t['tx_bytes_per_epoch'] / 1e6:.1f}", "moved seeds": _num(t["moved_seeds"]),
                      "sampling req/epoch": _num(t["remote_sampling_requests_per_epoch"])})
            if r["graph"] in base:
                c[ratio_col] = f"{remote / base[r['graph']]:.2f}x"
        if r.get("status") not in (None, "ok") and r.get("error"):
            c["status"] = f"{r['status']}: {r['error']}"[:200]
        out.append(c)
    return out


def markdown(rows: Sequence[Mapping], baseline: str) -> str:
    table = cells(rows, baseline)
    head = list(table[0]) if table else [c.format(baseline=baseline) for c in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c[h].replace("|", "/") for h in head) + " |" for c in table]
    return "\n".join(lines)


def legend(result: Mapping) -> str:
    s = result["settings"]
    return LEGEND.format(baseline=s["baseline"], dgl=s.get("dgl_version", "2.1"), **{
        k: s[k] for k in ("parts", "fanouts", "batch_size", "epochs", "feat_dim", "imbalance", "ranks")})


def document(results: Sequence[Mapping]) -> str:
    """training_tables.md: per results file, its settings, command, table and graphs."""
    parts = ["# Training benchmark: what each Step 1 method costs DGL's trainers", "",
             "Generated by `python benchmarks/training_tables.py` from the JSON of "
             "`benchmarks/bench_training.py`; do not edit by hand.", ""]
    for result in results:
        s = result["settings"]
        parts += [f"## {', '.join(result['graphs'])}: {s['parts']} machines, `--imbalance {s['imbalance']}`", "",
                  "```bash", *result.get("commands", [result["command"]]), "```", "", legend(result), "",
                  markdown(result["rows"], s["baseline"]), ""]
        for name, info in result["graphs"].items():
            parts.append(f"- {name}: {info.get('source', '')}; {info.get('nodes', '')} nodes, "
                         f"{info.get('edges', '')} edges; train mask {info.get('train_mask', '')} "
                         f"({info.get('train_nodes', '')} nodes): {info.get('masks', '')}")
        parts += ["", f"Benchmark wall time {result.get('wall_s', 0) / 60:.0f} min.", ""]
    return "\n".join(parts)


def document_text(results: Path = RESULTS) -> str:
    """training_tables.md as the DOCUMENT_FILES make it."""
    return document([json.loads((results / name).read_text()) for name in DOCUMENT_FILES])


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description="Markdown tables from bench_training.py's JSON files")
    ap.add_argument("files", nargs="*", type=Path, help="default: DOCUMENT_FILES in benchmarks/results")
    ap.add_argument("--out", type=Path, help="write the markdown file here (default: print it)")
    args = ap.parse_args(argv)
    text = document([json.loads(f.read_text()) for f in args.files]) if args.files else document_text()
    emit(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
