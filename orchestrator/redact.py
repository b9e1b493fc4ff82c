"""Keep secrets out of everything headroom writes: store, provenance, logs and reports."""

from __future__ import annotations

import os
import re
from typing import Any

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_PATTERNS = [
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{16,}"),  # OpenAI/Anthropic-style keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),  # JWTs
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._\-]{12,}"),
    # Environment-style assignments (OPENAI_API_KEY=...): upper case only, so flags such as
    # --max-tokens=4096 keep their value.
    re.compile(r"\b([A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Z0-9_]*)=(\S+)"),
    # Flags that exist to carry a credential.
    re.compile(r"(--(?:api[-_]?key|token|access[-_]token|auth[-_]token|secret|password))[= ](\S+)"),
]


#: A variable that merely *looks* secret by its name is redacted from this length on; shorter values
#: ("1", "true") would wipe ordinary text. A variable *named* as a secret (``--agent-env``) is
#: redacted whatever its length: the user said it is one.
MIN_GUESSED_SECRET = 8


def secret_values(names: list[str] | None = None) -> list[str]:
    """Values of the named environment variables and of those that look secret, longest first."""
    named = set(names or ())
    vals = {
        v for k, v in os.environ.items()
        if v and ((k in named) or (_SECRET_NAME.search(k) and len(v) >= MIN_GUESSED_SECRET))
    }
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str, extra: list[str] | None = None) -> str:
    for v in extra or ():
        if v:
            text = text.replace(v, REDACTED)
    for pat in _PATTERNS:
        if pat.groups == 2:
            text = pat.sub(lambda m: f"{m.group(1)}{m.group(0)[len(m.group(1))]}{REDACTED}", text)
        else:
            text = pat.sub(REDACTED, text)
    return text


def redact(obj: Any, extra: list[str] | None = None) -> Any:
    """Redact every string inside a JSON-like object."""
    if isinstance(obj, str):
        return redact_text(obj, extra)
    if isinstance(obj, dict):
        return {k: redact(v, extra) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, extra) for v in obj]
    return obj
