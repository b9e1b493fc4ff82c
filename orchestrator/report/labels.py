"""How a run's agent is named wherever a run is listed or compared: by what a person calls it."""

from __future__ import annotations

from typing import Any

#: Kinds that say how an agent ran, not which agent it was: never shown as its name.
_NOT_NAMES = ("external", "imported", "command")


def agent_label(agent: dict[str, Any]) -> str | None:
    """Its name; an import's agent names; else its command (shortened); else its kind when that names it
    (``oracle``). Never ``external`` or ``imported``: those say how it ran, not which agent it was."""
    if agent.get("name"):
        return str(agent["name"])
    names = [str(n) for n in agent.get("names") or [] if n]
    if names:
        return ", ".join(names)
    if agent.get("command"):
        cmd = " ".join(str(agent["command"]).split())
        return cmd if len(cmd) <= 32 else cmd[:31] + "…"
    kind = agent.get("kind")
    return None if kind in _NOT_NAMES else kind
