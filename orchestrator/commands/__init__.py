"""CLI commands beyond the core sweep/report set, one module per topic."""
