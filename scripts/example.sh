#!/usr/bin/env bash
# Set up, generate the bundled heterogeneous example and partition it: 4 partitions on 2
# ranks, verified against the input. Output in example_data/partitions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/mpienv.sh
rm -rf example_data
distpart example example_data/graph
mpiexec -n 2 distpart pipeline example_data/graph example_data/partitions --num-parts 4 \
  --stats-json example_data/stats.json
echo "partitions written to example_data/partitions (config: example_data/partitions/metadata.json)"
