"""DGL's tools/partition_algo: `random_partition.py` (Step 1, random), a script run by path,
backed by `distpart assign --method random`. Not imported by distpart."""
