"""CLI command groups, one module per topic (registered at the end of orchestrator/cli.py)."""
