"""``experiment.docker``: how the Docker backend reaches its daemon and builds task images."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DockerOptions(BaseModel):
    """Options of ``--backend docker``; every field has a default that works on a laptop."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str | None = Field(
        default=None,
        description="Docker Engine API address (unix:///path or tcp://host:port); default $DOCKER_HOST, else the local socket",
    )
    build: bool = Field(
        default=False,
        description="build every task's image from environment/Dockerfile, even when it names a docker_image",
    )
    build_network: str | None = Field(
        default=None, description="network for RUN steps of image builds (e.g. 'none'); default: the daemon's"
    )
    network: str | None = Field(
        default=None, description="network of tries that may use the internet; default: the daemon's (bridge)"
    )
    default_image: str | None = Field(
        default=None,
        description="image for a task that names no docker_image and has no environment/Dockerfile (headroom's "
        "enforcement canary is one: it needs bash and python3)",
    )
    pull: bool = Field(default=True, description="pull a task's docker_image when the daemon does not have it")
    keep_containers: bool = Field(
        default=False, description="leave each try's container stopped instead of removing it (for debugging)"
    )
    api_timeout_s: float = Field(default=120, gt=0, description="timeout of one Engine API call (steps have their own)")
    build_timeout_s: float = Field(
        default=1800, gt=0, description="longest an image build may go without the daemon sending any output"
    )
    cpu_period_us: int = Field(
        default=100_000, ge=1000, le=1_000_000, description="CFS period the CPU quota is a share of"
    )
