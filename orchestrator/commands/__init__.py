"""CLI commands that live in their own modules; each is registered in orchestrator/cli.py with one line."""
