"""What distributed training pays for, counted the way the trainers see it, and summed over
trainers: plain numpy and Python, so that the trainer (under DGL's Python) and the unit tests
(without DGL) share one definition.

Per mini-batch, from the partition of every node involved (DGL's partition book):
- remote feature rows: the batch's input nodes (every node of the sampled L-hop frontier,
  seeds included, deduplicated per batch) that another partition owns; local rows the rest;
- remote sampling requests: per layer, one per other partition owning any of that layer's
  seeds (DGL 2.1's `_distributed_access` sends one request to each such machine);
- remote feature requests: per node type's feature pull and the label pull, one per other
  partition owning any of the IDs (the kvstore's fast_pull sends one message per machine).
Per epoch and machine: bytes and packets on the machine's interface (`/proc/net/dev`).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Sequence

import numpy as np

NET_FIELDS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")
# Summed over batches of an epoch, and over trainers.
BATCH_FIELDS = ("batches", "seeds", "input_rows", "remote_rows", "local_rows",
                "remote_sampling_requests", "remote_feature_requests")


def remote_partitions(parts: Iterable[np.ndarray], own: int) -> int:
    """How many partitions other than `own` own at least one of the nodes."""
    seen = set()
    for p in parts:
        seen.update(np.unique(np.asarray(p)).tolist())
    seen.discard(own)
    return len(seen)


def batch_counts(input_parts: Mapping[str, np.ndarray], layer_seed_parts: Sequence[Sequence[np.ndarray]],
                 label_parts: np.ndarray, own: int) -> Dict[str, object]:
    """One mini-batch's counts. input_parts: node type -> the partition of each input node;
    layer_seed_parts: per layer, the partitions of its seeds (one array per node type);
    label_parts: the partitions of the batch's seeds (the label pull); own: the trainer's
    machine's partition."""
    by_type = {t: int(np.count_nonzero(np.asarray(p) != own)) for t, p in input_parts.items()}
    rows = sum(len(p) for p in input_parts.values())
    remote = sum(by_type.values())
    pulls = [p for p in input_parts.values() if len(p)] + [label_parts]
    return {"batches": 1, "seeds": int(len(label_parts)), "input_rows": int(rows), "remote_rows": int(remote),
            "local_rows": int(rows - remote), "remote_rows_by_type": by_type,
            "remote_sampling_requests": sum(remote_partitions(layer, own) for layer in layer_seed_parts),
            "remote_feature_requests": sum(remote_partitions([p], own) for p in pulls)}


def add_counts(total: Dict[str, object], batch: Mapping[str, object]) -> Dict[str, object]:
    """total += batch, field by field (the per-type rows too); returns total."""
    for key in BATCH_FIELDS:
        total[key] = int(total.get(key, 0)) + int(batch.get(key, 0))
    by_type = total.setdefault("remote_rows_by_type", {})
    for t, v in dict(batch.get("remote_rows_by_type", {})).items():
        by_type[t] = by_type.get(t, 0) + int(v)
    return total


def parse_net_dev(text: str, iface: str) -> Dict[str, int]:
    """An interface's byte and packet counters from /proc/net/dev's text."""
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name.strip() == iface:
            v = [int(x) for x in rest.split()]
            # receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes packets ...
            return {"rx_bytes": v[0], "rx_packets": v[1], "tx_bytes": v[8], "tx_packets": v[9]}
    raise ValueError(f"no interface {iface!r} in /proc/net/dev")


def net_delta(before: Mapping[str, int], after: Mapping[str, int]) -> Dict[str, int]:
    return {k: int(after[k]) - int(before[k]) for k in NET_FIELDS}


# ----------------------------------------------------------------------------- over trainers


def epoch_totals(reports: Sequence[Mapping]) -> List[Dict[str, object]]:
    """Per epoch, the trainers' counts summed (bytes too: each machine's own interface), and
    the largest trainer's remote rows and the slowest trainer's seconds."""
    if not reports:
        return []
    out = []
    for e in range(min(len(r["epochs"]) for r in reports)):
        epochs = [r["epochs"][e] for r in reports]
        row: Dict[str, object] = {"epoch": e + 1}
        for ep in epochs:
            add_counts(row, ep)
        for key in NET_FIELDS:
            row[key] = sum(int(ep.get(key, 0)) for ep in epochs)
        row["max_trainer_remote_rows"] = max(int(ep["remote_rows"]) for ep in epochs)
        row["seconds"] = round(max(float(ep.get("seconds", 0.0)) for ep in epochs), 2)
        losses = [ep["mean_loss"] for ep in epochs if ep.get("mean_loss") is not None]
        row["mean_loss"] = round(float(np.mean(losses)), 4) if losses else None
        out.append(row)
    return out


def training_summary(reports: Sequence[Mapping]) -> Dict[str, object]:
    """The row's training numbers: the mean over epochs of each per-epoch total, the moved
    seeds (training nodes a trainer got that its own partition does not hold, summed over
    trainers) and the per-epoch totals themselves."""
    epochs = epoch_totals(reports)
    summary: Dict[str, object] = {
        "trainers": len(reports), "epochs": len(epochs),
        "train_nodes": sum(int(r["train_nodes"]) for r in reports),
        "moved_seeds": sum(int(r["moved_seeds"]) for r in reports)}
    for key in (*BATCH_FIELDS, *NET_FIELDS, "max_trainer_remote_rows", "seconds"):
        values = [float(ep[key]) for ep in epochs]
        summary[f"{key}_per_epoch"] = round(float(np.mean(values)), 1) if values else None
    summary["per_epoch"] = epochs
    return summary
