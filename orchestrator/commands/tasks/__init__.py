"""The `tasks` group's commands (being split: see cli.py)."""
