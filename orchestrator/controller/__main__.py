"""``python -m orchestrator.controller [OPTIONS]``: the controller process on its own.

The same command as ``headroom cluster controller``, without importing the rest of the CLI (the
report stack pulls in pandas), so a long-running controller stays small.
"""

from orchestrator.controller.main import controller_main

controller_main()
