"""CLI commands that live in their own modules (registered at the end of orchestrator/cli.py)."""
