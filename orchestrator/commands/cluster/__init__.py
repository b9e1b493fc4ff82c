"""The `cluster` group's commands (being split: see cli.py)."""
