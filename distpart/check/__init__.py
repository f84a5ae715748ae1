"""Checks of an output: `verify` compares it with its input and assignment, `report` measures
its quality (edge cut, balance, halo) and `plot` draws that report.
"""
__all__ = ["verify", "report", "plot"]
