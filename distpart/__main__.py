"""`python -m distpart`: the same command as `distpart`, for launchers that need an interpreter path."""
import sys

from .cli import main

sys.exit(main())
