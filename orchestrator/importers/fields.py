"""Bookkeeping shared by the importers: what happened to each source field, and size spellings.

Every importer reports each field it met as **kept** (headroom reads it as it is),
**converted** (headroom reads it under another spelling or unit; the note says how),
**ignored** (a field of Harbor's format that headroom accepts and does not use), or
**unmapped** (a legacy Terminal-Bench key kept verbatim, but nothing in headroom acts on it).
A field is never dropped silently; a key no format knows is an error naming the closest valid
one (orchestrator/spec/unknown.py).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

KEPT, CONVERTED, UNMAPPED, DEFAULTED, IGNORED = "kept", "converted", "unmapped", "defaulted", "ignored"
KINDS = (KEPT, CONVERTED, DEFAULTED, IGNORED, UNMAPPED)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.I)
_MIB_PER_UNIT = {"": 1 / 2**20, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0**2}


def size_to_mib(text: str | int | float, *, bare_unit: str = "b") -> int:
    """``"2G"`` -> 2048: Harbor's and docker's sizes (K, M, G, T; optional ``i``/``b``; binary units).

    A bare number means bytes in docker-compose (``bare_unit="b"``) and MiB where a
    field is already in MiB (``bare_unit="m"``). Raises ValueError on anything else.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        text = f"{text}{'' if bare_unit == 'b' else bare_unit}"
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (expected e.g. '2G', '512M', '4096m')")
    value, unit = float(m.group(1)), m.group(2).lower()
    mib = value * _MIB_PER_UNIT[unit]
    if mib <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return max(1, int(round(mib)))


@dataclass
class FieldReport:
    """What one importer did with the fields of one source item."""

    entries: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, field path, note)

    def add(self, kind: str, path: str, note: str = "") -> None:
        self.entries.append((kind, path, note))

    def by_kind(self, kind: str) -> list[tuple[str, str]]:
        return [(p, n) for k, p, n in self.entries if k == kind]


def summarize(reports: list[FieldReport]) -> dict[str, list[dict[str, object]]]:
    """Across many items: per kind, each (field, note) with how many items it applied to."""
    out: dict[str, list[dict[str, object]]] = {}
    for kind in KINDS:
        counts = Counter((p, n) for r in reports for k, p, n in r.entries if k == kind)
        out[kind] = [{"field": p, "note": n, "tasks": c} for (p, n), c in sorted(counts.items())]
    return out
