"""What a try leaves, kept: the agent's logs dir, complete stdout and stderr, the exec log, the gateway's
transcript. Write through :func:`artifacts_for` (:mod:`.sink`), read through :mod:`.reader`; docs/agents.md."""

from orchestrator.artifacts.sink import ArtifactSink, NullSink, Stored, StoreSink, TryKey, artifacts_for

__all__ = ["ArtifactSink", "NullSink", "Stored", "StoreSink", "TryKey", "artifacts_for"]
