"""The consoles the command modules print to: results on stdout, progress and notes on stderr."""

from __future__ import annotations

import sys

from rich.console import Console

out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)
