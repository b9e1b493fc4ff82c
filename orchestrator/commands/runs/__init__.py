"""The `runs` group's commands (being split: see cli.py)."""
