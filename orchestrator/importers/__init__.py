"""Harbor and Terminal-Bench tasks and results, read into headroom's own models."""
