"""The training benchmark's parts (benchmarks/bench_training.py runs them), in reading order:

- `rows`: the rows given on the command line (`[LABEL=]METHOD FLAGS...`), the balance flags
  every row of a graph shares, and the constraints a row must keep within --imbalance;
- `features`: a benchmark graph with what training needs (a float feature on every node type,
  a label), cached beside the graph;
- `runs`: the subprocesses, each with a timeout: distpart's pipeline and report, and the DGL
  job on the network-namespace machines (mpi_tests/dgl_job.py);
- `counts`: what a trainer counts per mini-batch and epoch, and the sums over trainers (plain
  numpy: the trainer imports it under DGL's Python, the unit tests without DGL);
- `trainer`: the script DGL's launcher runs on every machine, as server and as trainer.

The tables (console and markdown) are `benchmarks/training_tables.py`.
"""
