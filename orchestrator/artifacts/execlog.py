"""The exec log: one line of JSON per command an agent ran in the trial's environment through the exec channel.

The exec channel (docs/agents.md) appends an :class:`ExecRecord` per exec and stores
the file as the try's :data:`~orchestrator.artifacts.names.EXEC_LOG` artifact; the
viewer lists it. Lines that do not parse are shown as they are, never dropped.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ExecRecord(BaseModel):
    model_config = ConfigDict(extra="allow")

    command: list[str] | str = Field(description="argv, or a shell string")
    cwd: str | None = None
    exit_code: int | None = Field(default=None, description="None: it did not exit (killed, timed out)")
    signal: int | None = None
    timed_out: bool = False
    duration_s: float | None = None
    stdout_bytes: int | None = None
    stderr_bytes: int | None = None
    started_at: str | None = None


def dumps(record: ExecRecord) -> bytes:
    return record.model_dump_json(exclude_none=True).encode() + b"\n"


def parse(data: bytes) -> list[ExecRecord | str]:
    """Each line as a record, or as its text when it is not one."""
    out: list[ExecRecord | str] = []
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            value: Any = json.loads(line)
            out.append(ExecRecord.model_validate(value))
        except (ValueError, ValidationError):
            out.append(line)
    return out
