"""What a partition needs for DGL's servers to start: a node of every node type that has a
feature, and an edge of every edge type that has one.

DGL 2.1's server puts each feature of its partition into shared memory; a type with no row
in a partition gives a zero-byte tensor, and `empty_shared_mem` fails ("Failed to map shared
memory"), so training cannot start although the output loads and verifies. Step 1 gives
every partition a node of each type with at least P nodes (`assign.nonempty`); what it
cannot (a type smaller than P, an edge type missing from a partition) is named here.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np


def empty_type_warnings(node_counts: Dict[str, Sequence[int]], edge_counts: Dict[str, Sequence[int]],
                        featured: Optional[Sequence[str]] = None) -> List[str]:
    """One line per type missing from some partition: `node_counts`/`edge_counts` map a type
    to its count per partition; `featured` names the types with a feature (None: unknown,
    then every missing type is named, with the condition)."""
    lines = []
    for kind, counts in (("node", node_counts), ("edge", edge_counts)):
        for name, per_part in counts.items():
            per_part = np.asarray(per_part, dtype=np.int64)
            missing = np.flatnonzero(per_part == 0).tolist()
            if not missing or per_part.sum() == 0 or (featured is not None and name not in featured):
                continue
            shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            why = ("it has a feature, so DGL's servers fail to start on this output ('Failed to map "
                   "shared memory')" if featured is not None else
                   "if it has a feature, DGL's servers fail to start on this output ('Failed to map "
                   "shared memory')")
            lines.append(f"partition{'s' if len(missing) > 1 else ''} {shown} "
                         f"{'have' if len(missing) > 1 else 'has'} no {kind} of type '{name}' "
                         f"({int(per_part.sum())} in all): {why}")
    return lines
