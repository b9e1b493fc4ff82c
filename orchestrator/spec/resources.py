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
``task-band``      each task's own floor and ceiling
=================  =======  =========

``task-band`` is not a multiplier: each task runs at the band its ``task.toml``
publishes (``memory_mb``/``cpus`` as the floor, ``memory_limit_mb``/``cpus_limit``
as the ceiling, see ``headroom runs calibrate``). Its stored multipliers are 1/1 ("1x of
the band"), and it sorts after every multiplier configuration.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.errors import LabelError

_MULT = r"(\d+(?:\.\d+)?)x?"
_LABEL_RE = re.compile(
    rf"^(?:(?P<strict>{_MULT})-strict|(?P<req>{_MULT})/(?P<lim>{_MULT}|unbounded)|(?P<single>{_MULT})|(?P<unb>unbounded))$"
)

Multiplier = Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)]
TASK_BAND: Final = "task-band"


def _fmt(m: float) -> str:
    return f"{m:g}x"


class ResourceConfig(BaseModel):
    """One point of a sweep: request multiplier and limit multiplier (None = unbounded)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_multiplier: Multiplier = 1.0
    limit_multiplier: Multiplier | None = 1.0
    kind: Literal["multiplier", "task-band"] = "multiplier"

    @model_validator(mode="after")
    def _limit_not_below_request(self) -> ResourceConfig:
        if self.kind == TASK_BAND and (self.request_multiplier, self.limit_multiplier) != (1.0, 1.0):
            raise ValueError("a task-band configuration runs each task at its own floor and ceiling (multipliers 1/1)")
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
    def task_band(self) -> bool:
        return self.kind == TASK_BAND

    @property
    def label(self) -> str:
        if self.task_band:
            return TASK_BAND
        r, lim = self.request_multiplier, self.limit_multiplier
        if lim is None:
            return "unbounded" if r == 1 else f"{_fmt(r)}/unbounded"
        if lim == r:
            return f"{_fmt(r)}-strict"
        return f"{_fmt(r)}/{_fmt(lim)}"

    @property
    def sort_key(self) -> tuple[float, float]:
        """Order configurations by ceiling, then floor; unbounded, then task-band, last."""
        if self.task_band:
            return (math.inf, math.inf)
        lim = math.inf if self.limit_multiplier is None else self.limit_multiplier
        return (lim, self.request_multiplier)

    @classmethod
    def parse(cls, text: str) -> ResourceConfig:
        """Parse a label such as ``1x-strict``, ``1x/3x``, ``3`` or ``unbounded``."""
        if text.strip().lower() == TASK_BAND:
            return cls(kind=TASK_BAND)
        m = _LABEL_RE.match(text.strip().lower())
        if m is None:
            raise LabelError(
                f"unknown configuration label {text!r}; expected e.g. '1x-strict', '1x/3x', '3', 'unbounded', 'task-band'"
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


def band_amounts(
    cpus: float, memory_mb: int, cpus_limit: float | None, memory_limit_mb: int | None, task_id: str
) -> ResourceAmounts:
    """A task's own band: its spec as the floor, its published ceiling as the limit.

    Refuses a task without a memory ceiling: a task-band arm that silently ran it
    unbounded would not be the band the maintainer publishes.
    """
    if memory_limit_mb is None:
        raise ValueError(
            f"task {task_id} has no memory_limit_mb: a task-band configuration needs each task's "
            "ceiling (write it with `headroom runs calibrate RUN --tasks-out DIR`)"
        )
    return ResourceAmounts(
        request_cpus=cpus,
        request_memory_bytes=int(memory_mb * MIB),
        limit_cpus=cpus_limit if cpus_limit is not None else cpus,
        limit_memory_bytes=int(memory_limit_mb * MIB),
    )
