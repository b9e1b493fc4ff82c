"""Resource configurations: a guaranteed floor and a hard ceiling, kept separate.

A configuration scales a task's base spec (cpus, memory_mb) by a request
multiplier (what the trial is guaranteed) and a limit multiplier (where the
kernel or kubelet kills it), or sets no limit at all ("unbounded").

Labels are what people type and read:

=================  =======  =========
label              request  limit
=================  =======  =========
``1x-strict``      1        1
``1x/3x``          1        3
``2x/2x``          2        2
``3x``             1        3  (shorthand: request defaults to 1x)
``unbounded``      1        none
``2x/unbounded``   2        none
=================  =======  =========
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

_MULT = r"(\d+(?:\.\d+)?)x?"
_LABEL_RE = re.compile(
    rf"^(?:(?P<strict>{_MULT})-strict|(?P<req>{_MULT})/(?P<lim>{_MULT}|unbounded)|(?P<single>{_MULT})|(?P<unb>unbounded))$"
)

Multiplier = Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)]


class LabelError(ValueError):
    """A configuration label that cannot be parsed."""


def _fmt(m: float) -> str:
    return f"{m:g}x"


class ResourceConfig(BaseModel):
    """One point of a sweep: request multiplier and limit multiplier (None = unbounded)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_multiplier: Multiplier = 1.0
    limit_multiplier: Multiplier | None = 1.0

    @model_validator(mode="after")
    def _limit_not_below_request(self) -> "ResourceConfig":
        if self.limit_multiplier is not None and self.limit_multiplier < self.request_multiplier:
            raise ValueError(
                f"limit_multiplier {self.limit_multiplier:g} is below request_multiplier "
                f"{self.request_multiplier:g}: a hard limit under the guarantee cannot be enforced"
            )
        return self

    @property
    def unbounded(self) -> bool:
        return self.limit_multiplier is None

    @property
    def label(self) -> str:
        r, lim = self.request_multiplier, self.limit_multiplier
        if lim is None:
            return "unbounded" if r == 1 else f"{_fmt(r)}/unbounded"
        if lim == r:
            return f"{_fmt(r)}-strict"
        return f"{_fmt(r)}/{_fmt(lim)}"

    @property
    def sort_key(self) -> tuple[float, float]:
        """Order configurations by ceiling, then floor; unbounded last."""
        lim = math.inf if self.limit_multiplier is None else self.limit_multiplier
        return (lim, self.request_multiplier)

    @classmethod
    def parse(cls, text: str) -> "ResourceConfig":
        """Parse a label such as ``1x-strict``, ``1x/3x``, ``3`` or ``unbounded``."""
        m = _LABEL_RE.match(text.strip().lower())
        if m is None:
            raise LabelError(
                f"unknown configuration label {text!r}; expected e.g. '1x-strict', '1x/3x', '3', 'unbounded'"
            )
        g = m.groupdict()
        if g["unb"]:
            return cls(request_multiplier=1.0, limit_multiplier=None)
        if g["strict"]:
            v = float(m.group(2))
            return cls(request_multiplier=v, limit_multiplier=v)
        if g["single"]:
            # A bare multiplier means "guarantee the spec, allow this much": 1 -> 1x-strict.
            return cls(request_multiplier=1.0, limit_multiplier=float(m.group(8)))
        req = float(m.group(4))
        lim_text = g["lim"]
        if lim_text == "unbounded":
            return cls(request_multiplier=req, limit_multiplier=None)
        return cls(request_multiplier=req, limit_multiplier=float(lim_text.rstrip("x")))


class ResourceAmounts(BaseModel):
    """Concrete amounts for one trial: what is guaranteed and what is enforced."""

    model_config = ConfigDict(frozen=True)

    request_cpus: float
    request_memory_bytes: int
    limit_cpus: float | None
    limit_memory_bytes: int | None

    @property
    def qos_class(self) -> str:
        """The Kubernetes QoS class these amounts would get as one container."""
        if (
            self.limit_cpus is not None
            and self.limit_memory_bytes is not None
            and self.limit_cpus == self.request_cpus
            and self.limit_memory_bytes == self.request_memory_bytes
        ):
            return "Guaranteed"
        return "Burstable"


MIB = 1024 * 1024


def scale(cpus: float, memory_mb: int, config: ResourceConfig) -> ResourceAmounts:
    """Apply a configuration to a task's base spec."""
    lim = config.limit_multiplier
    return ResourceAmounts(
        request_cpus=cpus * config.request_multiplier,
        request_memory_bytes=int(memory_mb * MIB * config.request_multiplier),
        limit_cpus=None if lim is None else cpus * lim,
        limit_memory_bytes=None if lim is None else int(memory_mb * MIB * lim),
    )
