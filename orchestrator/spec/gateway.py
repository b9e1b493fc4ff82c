"""The model gateway's settings: the experiment's ``gateway`` table (see docs/agents.md).

The upstream's key is named, never given: ``api_key_env`` is the name of a host
variable that the gateway reads when it starts. The value stays in the gateway
process; trials get a per-try key of the gateway's own.
"""

from __future__ import annotations

import fnmatch
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Upstream(BaseModel):
    """Where the gateway forwards one API's calls."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(
        description="as the provider's SDK takes it: OpenAI-compatible with /v1 "
        "(https://api.openai.com/v1), Anthropic without (https://api.anthropic.com)"
    )
    api_key_env: str | None = Field(
        default=None,
        description="NAME of the host variable holding the upstream "
        "key; None: the upstream takes none (a local server)",
    )

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"base_url must be an http(s) URL, not {value!r}")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(f"api_key_env is the NAME of an environment variable, not {value[:4]!r}...")
        return value


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)
    cached_input: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="cache reads; default: the input price"
    )
    cache_write: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Anthropic cache creation; default: the input price"
    )

    def cost(self, tokens_in: int, tokens_out: int, cached: int = 0, cache_write: int = 0) -> float:
        """``tokens_in`` counts every input token, cached reads and cache writes included."""
        plain = max(tokens_in - cached - cache_write, 0)
        read = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        return (plain * self.input + cached * read + cache_write * write + tokens_out * self.output) / 1e6


class TrialLimits(BaseModel):
    """Per-try limits the gateway enforces: once one is spent, the try's further calls are refused (403, the
    error's type ``limit_exceeded``) and the try's verdict, if it did not pass, is ``failed`` with the limit's
    own reason (``token_limit``, ``cost_limit``, ``working_time_limit``)."""

    model_config = ConfigDict(extra="forbid")

    tokens: int | None = Field(default=None, gt=0, description="input + output tokens of the try's calls")
    cost_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="USD of the try's calls, by the price table; a call to a model with no price is refused",
    )
    working_time_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="seconds since the try's first model call, less the time spent waiting on the provider: failed "
        "calls of the provider's side, and the pause after each (up to its Retry-After, or 60 s)",
    )


class Breaker(BaseModel):
    """The run's circuit breaker: the sweep pauses when the provider fails most of the run's recent calls."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(default=20, ge=1, description="how many of the run's most recent calls it looks at")
    failed_fraction: float = Field(
        default=0.8,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="it trips when at least this share of them failed on the provider's side",
    )


class GatewaySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    openai: Upstream | None = Field(default=None, description="serves /v1/chat/completions, /v1/responses, /v1/models")
    anthropic: Upstream | None = Field(default=None, description="serves /v1/messages")
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description="model name (or glob pattern, e.g. 'claude-sonnet-4*') -> price; a call to a model with no "
        "price has tokens but no cost",
    )
    timeout_s: float = Field(default=600.0, gt=0, description="one upstream call, streamed or not")
    max_request_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    limits: TrialLimits = Field(default_factory=TrialLimits, description="per-try token, cost and working-time limits")
    breaker: Breaker | None = Field(
        default_factory=Breaker, description="pause the sweep when the provider fails; null: never pause"
    )
    retry_backoff_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        allow_inf_nan=False,
        description="a starved try's retry waits this long, doubled for each retry before it (at most 10 "
        "minutes), or the provider's last Retry-After if that is longer",
    )

    @model_validator(mode="after")
    def _one_upstream(self) -> GatewaySpec:
        if self.openai is None and self.anthropic is None:
            raise ValueError("the gateway needs an upstream: openai, anthropic or both")
        return self

    def key_vars(self) -> list[str]:
        """Names of the host variables holding the upstreams' keys."""
        return sorted({u.api_key_env for u in (self.openai, self.anthropic) if u is not None and u.api_key_env})

    def price_of(self, *models: str | None) -> Price | None:
        """The first model named that has a price: exact names first, then the longest matching pattern."""
        for model in models:
            if not model:
                continue
            if model in self.prices:
                return self.prices[model]
            matches = [p for p in self.prices if fnmatch.fnmatchcase(model, p)]
            if matches:
                return self.prices[max(matches, key=len)]
        return None
