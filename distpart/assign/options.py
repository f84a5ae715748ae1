"""Step 1's option values that are checked while the command line is parsed: here, without
NumPy, so that a wrong value is refused before anything heavy (MPI, the BLAS) starts."""
from __future__ import annotations

import math
import os
from typing import Optional, Tuple

from ..errors import InputError

# The in-degree columns' cap when no --balance-edges FACTOR is given: loose enough to cost no
# fetched rows, tight enough that no machine holds most of a power-law graph's edges
# (benchmarks/sampling_sim.py and bench_training.py measured it).
DEFAULT_EDGE_IMBALANCE = 1.5
def default_balance(method: str, ntypes: "Optional[bool]", edges: "Optional[bool | float]") -> "tuple[bool, bool | float]":
    """(--balance-ntypes, --balance-edges) with what the user left unsaid filled in. Node
    types for multilevel and parmetis, as DGL's pipeline balances them (KaMinPar balances one
    weight; random spreads every type by construction); the edges at DEFAULT_EDGE_IMBALANCE
    for multilevel only (ParMETIS meets several constraints poorly on small graphs: a
    partition of 2 nodes on the example graph). `edges`: False (off), True (at --imbalance)
    or a factor."""
    types_default = method in ("multilevel", "parmetis")
    return (types_default if ntypes is None else ntypes,
            (DEFAULT_EDGE_IMBALANCE if method == "multilevel" else False) if edges is None else edges)


# Past this no balance is left to ask for (every block may hold everything well before it).
MAX_IMBALANCE = 1000.0


def imbalance_problem(value: float) -> Optional[str]:
    """Why `value` cannot be --imbalance (max/average load per constraint), or None."""
    if not math.isfinite(value) or not 1.0 < value <= MAX_IMBALANCE:
        return (f"must be a number greater than 1.0 and at most {MAX_IMBALANCE:g} (the largest load over "
                f"the average, e.g. 1.05), got {value}")
    return None


def check_num_parts(where: "Optional[str | os.PathLike[str]]", num_parts: int, num_nodes: int) -> None:
    """P as every Step 1 takes it: at least 1 and at most the number of nodes."""
    if num_parts < 1:
        raise InputError(where, f"the number of partitions must be at least 1, got {num_parts}")
    if num_parts > num_nodes:
        raise InputError(where, f"the number of partitions ({num_parts}) is larger than the number of "
                                f"nodes ({num_nodes}): some partitions would be empty")


def parse_fanouts(text: str) -> Tuple[int, ...]:
    """`--fanouts 10,25`: positive integers, comma-separated (ValueError says what is wrong)."""
    try:
        fanouts = tuple(int(f) for f in text.split(","))
    except ValueError:
        raise ValueError(f"expected whole numbers separated by commas, such as 10,25, got {text!r}") from None
    if not fanouts or min(fanouts) < 1:
        raise ValueError(f"every fanout must be at least 1, got {text!r}")
    return fanouts
