"""The rows of the training benchmark as the command line gives them, and what every row of a
graph shares.

A row is `[LABEL=]METHOD [DISTPART FLAGS...]`, split like a shell line: `parmetis`,
`multilevel`, `fetch=multilevel --objective fetch --train-mask {train_mask}`. The method
becomes `--method METHOD`; the flags go to `distpart pipeline` unchanged after the graph's
balance flags, but for the placeholders `{train_mask}` and `{sparse_train_mask}` (the graph's
masks) and `{fanouts}` and `{batch_size}` (what the trainers use), so a new Step 1 option
needs no change here. The label (default: the spec itself) names the row in the tables; the
baseline row's label (default `parmetis`) is what ratios compare to.

The balance flags are one template for all rows (`--balance`, `{train_mask}` and
`{sparse_train_mask}` filled in per graph), so rows of a graph differ only in their own flags.
The default spells every constraint out (node types, no edges, the train mask): distpart's
defaults differ by method (multilevel also balances edges), and rows must share one set.
From the flags follow the constraints a row must keep, read back from `distpart report`'s
imbalances: `ntype:T` per node type with --balance-ntypes (`nodes` with --no-balance-ntypes),
`feature:NTYPE/FEAT` per balanced feature, all within --imbalance, and `edges` within its own
cap when edges are balanced without node types (per-type edge loads are not in the report: not
checked); what the flags leave to a method's default is not checked.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

DEFAULT_ROWS = ("random", "parmetis", "multilevel", "vol=multilevel --objective vol",
                "fetch=multilevel --objective fetch --train-mask {train_mask} --fanouts {fanouts} "
                "--batch-size {batch_size}")
DEFAULT_BALANCE = "--balance-ntypes --no-balance-edges --balance-feature {train_mask}"
BASELINE = "parmetis"
DEFAULT_METHOD = "default"


@dataclass(frozen=True)
class RowSpec:
    label: str
    method: str
    flags: Tuple[str, ...]

    def argv(self, values: Mapping[str, object]) -> List[str]:
        """What the row adds to `distpart pipeline` (placeholders filled in, see `fill`); method
        `default` names none, so the row is what a user gets who gives no --method."""
        method = [] if self.method == DEFAULT_METHOD else ["--method", self.method]
        return [*method, *fill(self.flags, values)]

    @property
    def slug(self) -> str:
        """The label as a file name."""
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.label)[:80]


def parse_row(spec: str) -> RowSpec:
    """`[LABEL=]METHOD [FLAGS...]` -> RowSpec; ValueError for an empty spec or one that does not
    start with a method name."""
    words = shlex.split(spec)
    if not words:
        raise ValueError("an empty row spec")
    label = None
    if "=" in words[0] and not words[0].startswith("-"):
        label, _, words[0] = words[0].partition("=")
        if not words[0]:
            words = words[1:]
    if not words or words[0].startswith("-"):
        raise ValueError(f"row {spec!r}: give a method name first, e.g. 'multilevel --vcycles 2'")
    return RowSpec(label or " ".join(words), words[0], tuple(words[1:]))


def parse_rows(specs: Sequence[str]) -> List[RowSpec]:
    rows = [parse_row(s) for s in specs]
    labels = [r.label for r in rows]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ValueError(f"two rows are labelled {dupes[0]!r}: give one a LABEL= prefix")
    return rows


PLACEHOLDERS = ("train_mask", "sparse_train_mask", "fanouts", "batch_size")


def fill(words: Sequence[str], values: Mapping[str, object]) -> List[str]:
    """Each word with `{train_mask}`, `{sparse_train_mask}` (the graph's masks), `{fanouts}`
    and `{batch_size}` (the trainers') replaced by `values`' entries of those names."""
    out = []
    for word in words:
        for key in PLACEHOLDERS:
            if "{" + key + "}" in word:
                word = word.replace("{" + key + "}", str(values.get(key) or ""))
        out.append(word)
    return out


def balance_flags(template: str, graph_info: Mapping[str, object]) -> List[str]:
    """The balance flags of a graph: the template with its masks filled in."""
    return fill(shlex.split(template), graph_info)


def _features(flags: Sequence[str]) -> List[str]:
    out = []
    for i, flag in enumerate(flags):
        if flag == "--balance-feature" and i + 1 < len(flags):
            out.append(flags[i + 1])
        elif flag.startswith("--balance-feature="):
            out.append(flag.split("=", 1)[1])
    return out


def _edge_cap(flags: Sequence[str], ub: float) -> Optional[float]:
    """The edges' cap the flags set (`--balance-edges [FACTOR]`, the last one wins), None if off
    or left to the method's default."""
    cap = None
    for i, flag in enumerate(flags):
        if flag == "--no-balance-edges":
            cap = None
        elif flag == "--balance-edges" or flag.startswith("--balance-edges="):
            value = flag.split("=", 1)[1] if "=" in flag else (flags[i + 1] if i + 1 < len(flags) else "")
            try:
                cap = float(value)
            except ValueError:
                cap = ub
    return cap


def _by_type(flags: Sequence[str]) -> Optional[bool]:
    """--balance-ntypes / --no-balance-ntypes (the last one wins); None: the method's default."""
    said = [f for f in flags if f in ("--balance-ntypes", "--no-balance-ntypes")]
    return None if not said else said[-1] == "--balance-ntypes"


def balance_label(flags: Sequence[str]) -> str:
    """The balance flags in a table cell: `types + user/train_mask`, `nodes + edges 1.5`; what
    the flags leave to the method's defaults is `default`."""
    by_type, cap = _by_type(flags), _edge_cap(flags, 0.0)
    parts = ["default types" if by_type is None else "types" if by_type else "nodes"]
    if cap is not None:
        parts.append(f"edges {cap:g}" if cap else "edges")
    elif "--no-balance-edges" not in flags:
        parts.append("default edges")
    return " + ".join(parts + _features(flags))


def checked_constraints(flags: Sequence[str], ntypes: Sequence[str], ub: float) -> Dict[str, float]:
    """The report's imbalance names the flags balance, each with its cap (see the module
    docstring); what the flags leave to the method's default is not checked."""
    by_type, cap = _by_type(flags), _edge_cap(flags, ub)
    checked = {f"ntype:{t}": ub for t in ntypes} if by_type else {"nodes": ub} if by_type is False else {}
    if cap is not None and not (by_type and len(ntypes) > 1):
        checked["edges"] = cap
    checked.update({f"feature:{f}": ub for f in _features(flags)})
    return checked


def over_limit(imbalance: Mapping[str, float], checked: Mapping[str, float]) -> Dict[str, Optional[float]]:
    """The checked constraints above their cap (the report rounds to 4 digits), worst first; a
    checked name the report lacks is listed too, as None (unchecked is not within)."""
    over = {name: float(imbalance[name]) for name, cap in checked.items()
            if name in imbalance and imbalance[name] > cap + 1e-9}
    missing = {name: None for name in checked if name not in imbalance}
    return {**dict(sorted(over.items(), key=lambda kv: -kv[1])), **missing}


def report_flags(flags: Sequence[str], train_mask: str) -> List[str]:
    """`distpart report` options: the training mask, and every other balanced feature."""
    out = ["--train-mask", train_mask]
    for f in _features(flags):
        if f != train_mask:
            out += ["--balance-feature", f]
    return out
