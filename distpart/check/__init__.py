"""Checks of an output: `verify` compares it with its input and assignment (its per-file
checks, every array DGL reads and the partition config, in `partfiles`), `report` measures
its quality (edge cut, balance, halo) and `plot` draws that report.
"""
__all__ = ["verify", "partfiles", "report", "plot"]
