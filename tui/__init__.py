"""The app and the command line (the only package that imports textual)."""
from __future__ import annotations

# First of all: `distdoctor` (the console script) imports this package before tui/cli.py, so a
# Ctrl-C during the imports that follow is one line and exit 130, not a traceback.
from . import startup as startup
