"""The exception types distpart raises for bad input and failed runs.

Every error a user can cause names the file (or metadata key) at fault, so that on a
cluster the message printed by rank 0 is enough to fix the input without a debugger.
"""
from __future__ import annotations

import os
from typing import Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

# The exit status of every rank when the user's input or command line is wrong (argparse's too).
EXIT_USER_ERROR = 2


class DistpartError(Exception):
    """Base class of errors that are reported to the user as a one-line message."""

    exit_code = EXIT_USER_ERROR


class LocatedError(DistpartError):
    """An error found in one place: `where` is the file (or `metadata.json: key`), then the problem."""

    def __init__(self, where: Optional[PathLike], problem: str) -> None:
        self.where = os.fspath(where) if where is not None else None
        self.problem = problem
        super().__init__(f"{self.where}: {problem}" if self.where else problem)


class InputError(LocatedError):
    """The input graph, the assignment or the command line is wrong.

    `where` is the file (or `metadata.json: key`) the problem was found in.
    """


class OutputError(LocatedError):
    """A partition output is inconsistent with its input (raised by verify and the loader)."""
