"""Agents headroom runs, and what serves them from outside the trial (the model gateway)."""
