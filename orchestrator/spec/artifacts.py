"""How much of what a try leaves is kept (orchestrator/artifacts): the experiment's ``artifacts`` table."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MIB = 1024 * 1024


class ArtifactsSpec(BaseModel):
    """Per-try bounds on the artifacts store. A bound that is hit is recorded, artifact by artifact."""

    model_config = ConfigDict(extra="forbid")

    max_bytes_per_try: int = Field(
        default=64 * MIB,
        ge=0,
        description="bytes of (redacted, uncompressed) content kept per try; the artifact that crosses it is cut "
        "to what is left (status truncated) and later ones are not kept (status dropped), each with "
        "its original size",
    )
    max_files_per_try: int = Field(
        default=10_000,
        ge=0,
        description="artifacts recorded per try; a tree walk stops there and says so",
    )
