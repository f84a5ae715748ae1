#!/usr/bin/env bash
# Step 1's whole benchmark (benchmarks/results/assign_tables.md, which docs/03-step1.md links to):
#
#   bash benchmarks/run_assign_suite.sh [WORK_DIR]
#
# 1. the 200k graphs and the Debian graph: every method and reference, sets C0-C3 and C2s,
#    --imbalance 1.03 and 1.05, 2 ranks             -> benchmarks/results/assign_small.json
# 2. RMAT 2M/20M: every method and reference, C0, C2, C3, --imbalance 1.05, 2 ranks, then
#    multilevel C0 on 1 and 4 ranks as well        -> benchmarks/results/assign_rmat_2m.json
# 3. the 200k graphs and the Debian graph in 16 parts: multilevel, ParMETIS, KaMinPar and the
#    METIS references, C0 and C2, --imbalance 1.05    -> benchmarks/results/assign_k16.json
# 4. a 2M-node torus, nodes only: multilevel with and without its V-cycle, ParMETIS, KaMinPar
#    and the METIS references                      -> benchmarks/results/assign_mesh_2m.json
# 5. the tables from those files (benchmarks/results/assign_tables.md); then
#    `python benchmarks/docs_numbers.py` updates the numbers the docs quote.
#
# WORK_DIR (default /var/tmp/distpart-bench) keeps the generated graphs for the next run; the
# Debian graph needs apt's Packages index (`apt-get update` first). assign_tables.md says how
# long the last run took; run it on a quiet machine, the times are part of the result.
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-/var/tmp/distpart-bench}"
results=benchmarks/results
py=python
if [ -x .venv/bin/python ]; then py=.venv/bin/python; fi

"$py" benchmarks/bench_assign.py --graphs small --constraints C0,C1,C2,C3,C2s --imbalance 1.03,1.05 \
  --ranks 2 --work-dir "$work" --json "$results/assign_small.json"
"$py" benchmarks/bench_assign.py --graphs rmat-2m --constraints C0,C2,C3 --imbalance 1.05 --ranks 2 \
  --methods multilevel,parmetis,kaminpar,random,metis-kway,metis-rb,metis-ncon \
  --work-dir "$work" --json "$results/assign_rmat_2m.json"
"$py" benchmarks/bench_assign.py --graphs rmat-2m --constraints C0 --imbalance 1.05 --ranks 1,4 \
  --methods multilevel --work-dir "$work" --json "$results/assign_rmat_2m.json" --update
"$py" benchmarks/bench_assign.py --graphs small --constraints C0,C2 --imbalance 1.05 --ranks 2 --parts 16 \
  --methods multilevel,parmetis,kaminpar,metis-kway,metis-rb,metis-ncon \
  --work-dir "$work" --json "$results/assign_k16.json"
"$py" benchmarks/bench_assign.py --graphs mesh-2m --constraints C0 --imbalance 1.05 --ranks 2 \
  --methods "multilevel,multilevel:--vcycles 0,parmetis,kaminpar,metis-kway,metis-rb" \
  --work-dir "$work" --json "$results/assign_mesh_2m.json"

"$py" benchmarks/assign_tables.py --document --out "$results/assign_tables.md"
"$py" benchmarks/docs_numbers.py
