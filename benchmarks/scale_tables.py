"""The sizing snippets of docs/07-performance.md, from `bench_scale.py`'s results files
(`benchmarks/results/scale_*.json`) and the memory guard's model (`chunked.estimate`):
bytes per edge per stage and method beside the guard's estimate, the weak-scaling table,
the 200M-edge run, and how many machines a graph needs. `docs_numbers.py` embeds them.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Optional

from distpart.chunked.estimate import BASE_BYTES, DISPATCH_STAGES, STAGE_MODELS, StageModel, stage_peak

GROUPS = ("assign", "dispatch", "verify")
RUN_200M = "scale_200m_default.json"          # the default constraint set
RUN_200M_NODES = "scale_200m.json"            # node counts only
RUNS_200M = (RUN_200M, RUN_200M_NODES)
RUN_DGL = "dgl_pipeline_20m.json"
COMMAND_DGL = "python benchmarks/bench_dgl_pipeline.py"
MACHINE_GIB = 24
COMMAND_200M = "python benchmarks/bench_scale.py --edges 200m --ranks 2"


def _table(head: List[str], rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def grouped(run: dict) -> Dict[str, dict]:
    """Step 1, dispatch (its sub-stages together: wall summed, the largest peak) and verify of
    one run: wall s, peak MiB per rank, B/edge, and the guard's estimate of the largest rank
    with the current constants (in one process: the largest of the stages so far) and
    measured/estimate."""
    out: Dict[str, dict] = {}
    for row in run["stages"]:
        name = "dispatch" if row["stage"] in DISPATCH_STAGES else row["stage"]
        if name not in GROUPS or (run.get("stages_apart") and row.get("job", name) != name):
            continue  # with stages apart, each job's reading of the assignment is not its stage
        g = out.setdefault(name, {"wall_s": 0.0, "peak_rss_mb": [0.0] * len(row["peak_rss_mb"])})
        g["wall_s"] += row["wall_s"]
        g["peak_rss_mb"] = [max(a, b) for a, b in zip(g["peak_rss_mb"], row["peak_rss_mb"])]
    so_far = 0
    for name, g in out.items():
        model = STAGE_MODELS[f"assign/{run['method']}" if name == "assign" else name]
        # The model tells one balanced column (--balance nodes) from several (the default).
        columns = 1 if run.get("balance") == "nodes" else 2
        est = stage_peak(model, run["nodes"], run["edges"], run.get("feature_bytes", 0), run["ranks"], columns)
        so_far = est if run.get("stages_apart") else max(so_far, est)
        g["estimate_mb"] = so_far / 2**20
        g["measured_over_estimate"] = max(g["peak_rss_mb"]) / g["estimate_mb"]
        g["bytes_per_edge"] = sum(g["peak_rss_mb"]) * 2**20 / run["edges"]
    return out


def _runs(results: Path, pattern: str) -> List[tuple]:
    return [(f, json.loads(f.read_text())) for f in sorted(results.glob(pattern))]


def _label(run: dict) -> str:
    return f"RMAT {run['nodes'] / 1e6:g}M/{run['edges'] / 1e6:g}M"


def _stage_rows(run: dict, name: str) -> List[List[str]]:
    rows = []
    for stage, g in grouped(run).items():
        est, ratio = f"{g['estimate_mb']:,.0f}", f"{g['measured_over_estimate']:.2f}"
        method = run["method"] + ("" if run.get("balance", "default") == "default" else f" ({run['balance']} only)")
        code = f" @ {run['commit']}" if run.get("commit") else " (before issue 31's reductions)"
        rows.append([_label(run), method, str(run["ranks"]), stage + (" (own)" if run.get("stages_apart") else ""),
                     f"{g['wall_s']:.1f}", "/".join(f"{v:.0f}" for v in g["peak_rss_mb"]),
                     f"{g['bytes_per_edge']:.0f}", est, ratio, f"`{name}`{code}"])
    return rows


HEAD = ["input", "method", "ranks", "stage", "wall s", "peak MiB per rank", "B/edge", "guard's estimate MiB",
        "measured / estimate", "from"]


def perf_sizing(results: Path) -> str:
    """Per stage of every `scale_*.json` run, the weak series' included (not the 200M run)."""
    rows = [r for f, data in _runs(results, "scale_*.json") if f.name not in RUNS_200M
            for run in data.get("runs", [data]) for r in _stage_rows(run, f.name)]
    if not rows:
        return "No run of `benchmarks/bench_scale.py` is in `benchmarks/results/` yet (commands above)."
    return (_table(HEAD, rows) + "\n\nPeaks are high-water marks: in one `pipeline` process a stage's peak is the "
            "largest so far (marked \"own\" where the stages ran as separate jobs, `--stages-apart`). B/edge: the "
            "summed peak over ranks per input edge; the estimate is the guard's for the largest rank with the current "
            "constants (`distpart/chunked/estimate.py`), in one process the largest of the stages so far; 'from': the "
            "results file and the commit that ran (older files ran before issue 31's memory reductions). Measured on "
            "this 2-core machine, often beside other jobs (walls are not comparable across rows).")


def perf_weak(results: Path) -> str:
    """The weak-scaling series: the largest rank's peak of every stage per R."""
    out = []
    for f, data in _runs(results, "scale_weak_*.json"):
        runs = data["runs"]
        per = [grouped(run) for run in runs]
        for stage in GROUPS:
            peaks = [max(g[stage]["peak_rss_mb"]) for g in per if stage in g]
            if len(peaks) != len(runs):
                continue
            spread = max(peaks) / min(peaks) - 1
            balance = "node counts" if runs[0].get("balance") == "nodes" else "default set"
            out.append([f"{data['edges_per_rank'] / 1e6:g}M, {balance}", stage]
                       + [f"{p:,.0f} ({g[stage]['wall_s']:.0f} s)" for p, g in zip(peaks, per)]
                       + [f"{100 * spread:.0f}%", f"`{f.name}`"])
    if not out:
        return "No weak-scaling run is in `benchmarks/results/` yet (`bench_scale.py --weak`)."
    ranks = [f"R={r['ranks']}: peak MiB (wall)" for r in _runs(results, "scale_weak_*.json")[0][1]["runs"]]
    return (_table(["edges per rank, balance", "stage"] + ranks + ["spread (max/min - 1)", "from"], out)
            + "\n\nThe largest rank's peak so far in one `pipeline` process; 4 ranks on 2 cores are oversubscribed, "
            "so the walls are reported, not judged.")


def extrapolated(results: Path, edges: int = 200_000_000) -> str:
    """ParMETIS's Step 1 at `edges`, from its summed peak per edge on RMAT 2M/20M (assign_rmat_2m.json)."""
    path = results / "assign_rmat_2m.json"
    if not path.exists():
        return ""
    data = json.loads(path.read_text())
    graph = data["graphs"]["rmat-2m"]
    measured = sum(graph["num_edges"].values())
    row = next((r for r in data["rows"] if r["graph"] == "rmat-2m" and r["method"] == "parmetis"
                and r.get("constraints") == "C0" and r["ranks"] == 2 and r.get("peak_rss_mb")), None)
    if row is None:
        return ""
    per_edge = sum(float(x) for x in str(row["peak_rss_mb"]).split("/")) * 2**20 / measured
    return (f" ParMETIS's Step 1 ({per_edge:.0f} B/edge summed over 2 ranks on RMAT 2M/20M, "
            f"`assign_rmat_2m.json`) would need about {per_edge * edges / 2**30:.0f} GiB summed for "
            f"{edges / 1e6:g}M edges, so it cannot run on this machine.")


def dgl_extrapolated(results: Path, edges: int = 200_000_000) -> str:
    """DGL 2.1's own pipeline at `edges`, from each step's summed peak per edge over its
    processes in `dgl_pipeline_20m.json` (bench_dgl_pipeline.py)."""
    path = results / RUN_DGL
    if not path.exists():
        return f" DGL's own pipeline is not measured yet (`{COMMAND_DGL}` writes {RUN_DGL})."
    run = json.loads(path.read_text())
    steps = [(row["stage"].split(" ")[0], sum(row["peak_rss_mb"]) * 2**20 / run["edges"], row)
             for row in run["stages"]]
    name, per_edge, worst = max(steps, key=lambda s: s[1])
    need = per_edge * edges / 2**30
    procs = len(worst["peak_rss_mb"])
    measured = " and ".join(f"{b:.0f} B/edge in {n} ({'/'.join(f'{v:,.0f}' for v in r['peak_rss_mb'])} MiB, "
                            f"{r['wall_s']:.0f} s)" for n, b, r in steps)
    verdict = "cannot" if need > MACHINE_GIB else "can"
    each = " more than the whole machine" if need / procs > MACHINE_GIB else ""
    return (f" DGL {run['dgl_version']}'s own pipeline {verdict} run at {edges / 1e6:g}M edges on this "
            f"{MACHINE_GIB} GB machine: on RMAT {run['nodes'] / 1e6:g}M/{run['edges'] / 1e6:g}M (`{RUN_DGL}`, "
            f"`{COMMAND_DGL}`) the summed peak of its processes per input edge was {measured}, so {name} "
            f"would need about {need:.0f} GiB summed ({need / MACHINE_GIB:.1f} times the machine's memory), "
            f"about {need / procs:.0f} GiB in each of its {procs} processes{',' if each else ''}{each}.")


def predicted_200m(edges: int = 200_000_000, ranks: int = 2) -> str:
    """The guard's estimate per rank of every stage of the 200M run (bench_scale's input)."""
    nodes = edges // 16
    feats = nodes * 16 * 4 + edges * 4   # the 16-float node feature and the float32 edge feature
    est = {name: stage_peak(STAGE_MODELS[key], nodes, edges, feats, ranks) for name, key in
           (("assign", "assign/multilevel"), ("dispatch", "dispatch"), ("verify", "verify"))}
    return ("With the current constants the guard estimates, per rank of 2: "
            + ", ".join(f"{name} {e / 2**30:.1f} GiB" for name, e in est.items()) + ".")


def perf_200m(results: Path) -> str:
    """The 200M-edge runs (the default set, node counts only), or what to run to fill this in,
    and ParMETIS and DGL's pipeline extrapolated."""
    runs = [(name, json.loads((results / name).read_text())) for name in RUNS_200M if (results / name).exists()]
    if not runs:
        return (f"Not measured yet: `{COMMAND_200M}` writes {RUN_200M} in the results folder, then "
                "`python benchmarks/docs_numbers.py` fills this in. " + predicted_200m() + extrapolated(results)
                + dgl_extrapolated(results))
    lines = []
    for _, run in runs:
        cut = run.get("cut") or {}
        cut_text = f"; cut {100 * cut['edge_cut_fraction']:.2f}% of edges" if cut else ""
        lines.append(f"`{run['command']}`: mpiexec wall {run['mpiexec_wall_s']:,.0f} s{cut_text}"
                     + (f"; `{run['verify']}`." if run.get("verify") else "."))
    edges = runs[0][1]["edges"]
    return (_table(HEAD, [row for name, run in runs for row in _stage_rows(run, name)]) + "\n\n"
            + "\n".join(f"- {line}" for line in lines) + "\n\n"
            + (extrapolated(results, edges) + dgl_extrapolated(results, edges)).strip())


def machines_needed(edges: int, memory_gb: float, method: str = "multilevel", edges_per_node: int = 16,
                    feature_bytes: int = 0, usable: float = 0.9, columns: int = 2) -> Optional[int]:
    """One rank per machine: the fewest machines on which every stage's estimated peak per
    rank stays within `usable` of `memory_gb` (None: no count does, e.g. a whole-graph stage).
    `columns`: the constraint columns Step 1 balances (the default set has several)."""
    nodes = edges // edges_per_node
    cap = usable * memory_gb * 2**30
    models: List[StageModel] = [STAGE_MODELS[f"assign/{method}"], STAGE_MODELS["dispatch"], STAGE_MODELS["verify"]]
    need = 1
    for m in models:
        if stage_peak(m, nodes, edges, feature_bytes, 1, columns) <= cap:
            continue
        if m.whole_graph or cap <= BASE_BYTES:
            return None
        total = m.edge_bytes(columns) * edges + m.per_node * nodes + m.features * feature_bytes
        need = max(need, math.ceil(total / (cap - BASE_BYTES)))
    return need


def perf_machines(results: Path) -> str:
    """Machines of 24, 64 and 256 GiB a graph of N edges needs, from the guard's model."""
    sizes = [(10**8, "100M"), (10**9, "1B"), (10**10, "10B")]
    memories = (24, 64, 256)
    rows = []
    for edges, name in sizes:
        for method in ("multilevel", "parmetis"):
            cells = [machines_needed(edges, m, method) for m in memories]
            rows.append([name, method] + [str(c) if c is not None else "-" for c in cells])
    per_edge = ", ".join(f"{k} {v.per_edge:g}" + (f" ({v.per_edge_multi:g} balancing several columns)"
                                                   if v.per_edge_multi else "")
                         for k, v in STAGE_MODELS.items() if not k.endswith("random"))
    return (_table(["edges", "Step 1 method"] + [f"machines of {m} GiB" for m in memories], rows)
            + f"\n\nOne rank per machine, Step 1 balancing the default constraint set, 16 edges per node, no features (add twice the feature bytes to "
            f"dispatch and verify), at most 90% of each machine's memory; from the guard's constants in bytes per "
            f"edge summed over ranks ({per_edge}; `distpart/chunked/estimate.py`).")
