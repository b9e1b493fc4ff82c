"""The exec channel's wire format: one JSON request, one JSON reply, one connection per exec.

It lives in the client module (:mod:`orchestrator.agents.exec`), so that one file is the
whole client an agent can copy into its own environment; the server and the local
backend's process server take it from here.
"""

from __future__ import annotations

from orchestrator.agents.exec import MAX_REQUEST, b64, receive, send, unb64

__all__ = ["MAX_REQUEST", "b64", "receive", "send", "unb64"]
