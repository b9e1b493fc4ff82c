"""Keep secrets out of everything headroom writes: store, provenance, logs and reports."""

from __future__ import annotations

import base64
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


def too_short_to_redact_cleanly(names: list[str]) -> list[str]:
    """The named variables whose values are set but shorter than :data:`MIN_GUESSED_SECRET` (never their values).

    They are redacted all the same, so every occurrence of such a value ("1", "gpt") is wiped from
    outputs and trajectories too: the sweep says so before it starts.
    """
    return [n for n in names if 0 < len(os.environ.get(n, "")) < MIN_GUESSED_SECRET]


#: A secret's transformed forms are redacted (and searched for) from this length on: shorter, a hex or base64
#: piece could match ordinary text.
MIN_TRANSFORMED = 16


def transformed(secret: str) -> list[str]:
    """``secret`` and the forms an agent that stole it would print it in to slip past a plain search: reversed,
    upper and lower case, hex, and base64 (standard and URL-safe, at each of the three alignments it can have
    inside a longer encoded text, the partial characters at its ends dropped). Only the secret itself for a
    short one."""
    forms = {secret}
    if len(secret) >= MIN_TRANSFORMED:
        raw = secret.encode()
        forms |= {secret[::-1], secret.upper(), secret.lower(), raw.hex(), raw.hex().upper()}
        for pad in range(3):
            enc = base64.b64encode(b"\0" * pad + raw).decode()
            keep = enc[(pad * 4 + 2) // 3 :]  # characters that depend on the pad only are dropped
            tail = (len(raw) + pad) % 3
            keep = keep.rstrip("=")
            if tail:
                keep = keep[:-1]  # the last character mixes in the padding bits
            forms |= {keep, keep.replace("+", "-").replace("/", "_")}
    return sorted(forms, key=len, reverse=True)


def secret_values(names: list[str] | None = None) -> list[str]:
    """Values of the named environment variables and of those that look secret, longest first."""
    named = set(names or ())
    vals = {
        v
        for k, v in os.environ.items()
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


#: A step's stdout/stderr tail keeps this many bytes. Backends that have the whole output hand
#: over up to :data:`TAIL_SLACK` more: redaction then sees a secret printed across the cut whole,
#: and only the redacted text is cut (:func:`cut_tail`).
TAIL_BYTES = 4096
TAIL_SLACK = 4096
#: The shortest fragment of a known secret scrubbed at a cut edge: shorter ones match ordinary text.
MIN_FRAGMENT = 4


def _longest_suffix_at_start(text: str, secret: str) -> int:
    for k in range(min(len(secret) - 1, len(text)), MIN_FRAGMENT - 1, -1):
        if text.startswith(secret[-k:]):
            return k
    return 0


def _longest_prefix_at_end(text: str, secret: str) -> int:
    for k in range(min(len(secret) - 1, len(text)), MIN_FRAGMENT - 1, -1):
        if text.endswith(secret[:k]):
            return k
    return 0


def scrub_edges(text: str, secrets: list[str] | None, *, start: bool = True, end: bool = False) -> str:
    """A cut through a secret leaves a fragment the whole-value redaction cannot see: the
    secret's tail at the start of a cut text (its head at the end). Fragments of
    :data:`MIN_FRAGMENT` characters or more are replaced."""
    vals = [v for v in secrets or () if len(v) > MIN_FRAGMENT]
    if not vals or not text:
        return text
    if start and (k := max(_longest_suffix_at_start(text, v) for v in vals)):
        text = REDACTED + text[k:]
    if end and (k := max(_longest_prefix_at_end(text, v) for v in vals)):
        text = text[:-k] + REDACTED
    return text


def cut_tail(text: str, secrets: list[str] | None, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of an already redacted output, with a fragment at the cut scrubbed.

    The backend's own cut (it read only the end of the output) is an edge too, so the start
    is scrubbed whether or not this cut removes anything.
    """
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) > limit:
        text = raw[-limit:].decode("utf-8", "ignore")
    return scrub_edges(text, secrets, start=True)


_SECTION = re.compile(r"^===== tail of [^\n]* =====\n", re.M)


def scrub_sections(text: str, secrets: list[str] | None) -> str:
    """A log made of cut tails (the Kubernetes runner's ``===== tail of FILE =====`` sections, read
    with a byte limit): scrub the start and end of the whole and the start of every section."""
    parts: list[str] = []
    pos = 0
    for m in _SECTION.finditer(text):
        parts.append(scrub_edges(text[pos : m.start()], secrets, start=True))
        parts.append(m.group())
        pos = m.end()
    parts.append(scrub_edges(text[pos:], secrets, start=True))
    return scrub_edges("".join(parts), secrets, start=False, end=True)


def redact_bytes(data: bytes, extra: list[str] | None = None) -> bytes:
    """:func:`redact_text` over bytes that need not be UTF-8 (an artifact, a model response).

    Bytes that are not UTF-8 pass through unchanged (surrogateescape round-trips them), so
    only what the redaction replaces differs from the input.
    """
    text = data.decode("utf-8", "surrogateescape")
    out = redact_text(text, extra)
    return data if out == text else out.encode("utf-8", "surrogateescape")
