"""The model gateway: trials call their model through it, and it measures what they used (docs/agents.md)."""

from orchestrator.agents.gateway.service import Gateway, TryEnd, check

__all__ = ["Gateway", "TryEnd", "check"]
