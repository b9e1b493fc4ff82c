"""headroom: benchmark orchestrator for agentic evaluations."""

__version__ = "0.1.0"
