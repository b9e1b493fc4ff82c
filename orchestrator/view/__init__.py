"""``headroom view``: a local, read-only web browser for a results store."""
